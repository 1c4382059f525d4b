//! The file store under faults, driven through the `fairq` binary: read-only commands on a
//! folder that cannot be written (they change nothing in it), repairs printed as warnings
//! instead of happening silently, and a full disk reported as such.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use common::fairq;

/// Name, mode, size, content and modification time of every entry of `dir`.
fn observe(dir: &Path) -> BTreeMap<String, (u32, u64, Vec<u8>, i64, i64)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            let content = if meta.is_file() {
                std::fs::read(e.path()).unwrap()
            } else {
                Vec::new()
            };
            (
                e.file_name().to_string_lossy().into_owned(),
                (
                    meta.mode(),
                    meta.len(),
                    content,
                    meta.mtime(),
                    meta.mtime_nsec(),
                ),
            )
        })
        .collect()
}

fn last_segment(dir: &Path) -> std::path::PathBuf {
    let mut segs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segs.sort();
    segs.pop().unwrap()
}

#[test]
fn stats_and_list_look_at_a_read_only_folder_without_changing_it_and_report_repairs() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("store");
    let store = format!("file:{}", folder.display());
    for i in 1..=3 {
        fairq(dir.path())
            .args([
                "--store",
                &store,
                "enqueue",
                "-k",
                "x",
                "-p",
                &i.to_string(),
            ])
            .assert()
            .success();
    }
    // The remains of a torn write after the last record.
    let segment = last_segment(&folder);
    let mut bytes = std::fs::read(&segment).unwrap();
    let valid = bytes.len();
    bytes.extend_from_slice(&[0x5A; 9]);
    std::fs::write(&segment, &bytes).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o500)).unwrap();
    let before = observe(&folder);
    for command in ["list", "stats"] {
        let out = fairq(dir.path())
            .args(["--store", &store, "--json", command])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{command}: {stderr}");
        let name = segment.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            stderr.starts_with("warning: ")
                && stderr.contains(&name)
                && stderr.contains(&format!("9 bytes at offset {valid}"))
                && stderr.contains("torn tail"),
            "{command}: {stderr}"
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if command == "list" {
            assert_eq!(json.as_array().unwrap().len(), 3, "{json}");
        }
    }
    assert_eq!(
        observe(&folder),
        before,
        "a read-only command changed the store folder"
    );
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A command that writes cuts the tail off, and says so too.
    let out = fairq(dir.path())
        .args(["--store", &store, "enqueue", "-k", "x"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cut off: a torn tail"), "{stderr}");
}

#[test]
fn a_full_disk_is_reported_as_full_and_can_still_be_inspected() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("small");
    std::fs::create_dir(&mount).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&mount)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here (fairq-file's tests cover a full disk)");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&mount);
    let store = format!("file:{}", mount.join("store").display());
    let payload = format!("\"{}\"", "x".repeat(16_000));
    let mut enqueued = 0;
    let stderr = loop {
        let out = fairq(dir.path())
            .args(["--store", &store, "enqueue", "-k", "x", "-p", &payload])
            .output()
            .unwrap();
        if !out.status.success() {
            break String::from_utf8_lossy(&out.stderr).into_owned();
        }
        enqueued += 1;
        assert!(enqueued < 100, "256 KiB never filled up");
    };
    assert!(
        stderr.contains("is full") && stderr.contains("not recorded")
            || stderr.contains("nothing was recorded"),
        "{stderr}"
    );
    assert!(!stderr.contains("cannot use"), "{stderr}");
    // Looking still works, and shows every job that was acknowledged.
    let out = fairq(dir.path())
        .args(["--store", &store, "--json", "list", "--limit", "1000"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json.as_array().unwrap().len(), enqueued);
}
