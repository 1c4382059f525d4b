//! Helpers shared by the journal's integration tests (`mod common;`); each uses part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

/// The files of `dir` (all but the lock file), by name, as one instant saw them; a file
/// removed between the listing and the read is left out, as it would be a moment later.
fn read_folder(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".lock") {
            continue;
        }
        match std::fs::read(entry.path()) {
            Ok(bytes) => {
                files.insert(name, bytes);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("{}: {e}", entry.path().display()),
        }
    }
    files
}

/// Copies the folder of an open queue into `to` as a kill -9 at one instant would leave it.
///
/// The queue's helper threads (creating the next segment and its tail marker, cutting a
/// sealed one back) may change files while they are copied, so one pass can mix moments no
/// crash could. The folder is read until two passes in a row agree: no file goes back to
/// an earlier content, so a file that is the same in both was unchanged from its first read
/// to its second, and every first-pass read comes before every second-pass read; at the
/// moment between the passes the folder held exactly what was read.
pub fn crash_copy(from: &Path, to: &Path) {
    let mut last = read_folder(from);
    loop {
        let now = read_folder(from);
        if now == last {
            break;
        }
        last = now;
        std::thread::yield_now();
    }
    for (name, bytes) in last {
        std::fs::write(to.join(name), bytes).unwrap();
    }
}

/// The names of the files in `dir`, sorted.
pub fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}
