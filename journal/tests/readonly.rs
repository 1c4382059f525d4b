//! Opening a queue read-only never creates, changes or removes a file, so a queue can be
//! inspected on a full disk, and what a writable open would repair is reported instead.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use fairq_journal::sim::{SimDisk, SimFaults};
use fairq_journal::storage::Storage;
use fairq_journal::{JournalConfig, JournalError, JournaledQueue, SyncPolicy, TailCause};

fn cfg(disk: &SimDisk) -> JournalConfig {
    JournalConfig {
        sync: SyncPolicy::Always,
        segment_size: 200,
        checkpoint_interval: Duration::ZERO,
        ..JournalConfig::on_sim(disk)
    }
}

fn contents(disk: &SimDisk, dir: &Path) -> BTreeMap<String, Vec<u8>> {
    disk.list_dir(dir)
        .unwrap()
        .into_iter()
        .map(|e| {
            let bytes = disk.read_all(&dir.join(&e.name)).unwrap_or_default();
            (e.name, bytes)
        })
        .collect()
}

/// A queue with items 0..10 in several segments, 3 of them committed by reader "r".
fn queue(disk: &SimDisk) {
    let q = JournaledQueue::open("/q", "q", cfg(disk)).unwrap();
    let r = q.reader("r").unwrap();
    for i in 0..10u8 {
        q.put(&[i; 30]).unwrap();
    }
    for _ in 0..3 {
        let item = r.get().unwrap().unwrap();
        r.commit(item.id).unwrap();
    }
    q.close().unwrap();
}

#[test]
fn a_read_only_open_changes_nothing_and_reports_what_it_would_repair() {
    let disk = SimDisk::new(1);
    queue(&disk);
    // A torn tail on the last segment, a half-written checkpoint and a stale temporary file.
    let dir = Path::new("/q");
    let mut segs: Vec<String> = contents(&disk, dir)
        .into_keys()
        .filter(|n| n.ends_with(".seg"))
        .collect();
    segs.sort();
    let last = dir.join(segs.last().unwrap());
    let f = disk.open_append(&last).unwrap();
    f.write(&[0x21, 0, 0, 0, 9, 9]).unwrap();
    drop(f);
    disk.create(&dir.join("q.cp.r.tmp"), 0o600).unwrap();
    let before = contents(&disk, dir);
    let mutations = disk.mutations();

    let q = JournaledQueue::open_read_only(dir, "q", cfg(&disk)).unwrap();
    assert!(q.is_read_only());
    let report = q.recovery_report().clone();
    assert_eq!(report.tails.len(), 1, "{report:?}");
    assert_eq!(report.tails[0].path, last);
    assert_eq!(report.tails[0].dropped_bytes, 6);
    assert_eq!(report.tails[0].cause, TailCause::Incomplete);
    assert!(!report.tails[0].truncated);
    let r = q.reader("r").unwrap();
    assert_eq!(r.len(), 7);
    // Reads, commits and aborts work in memory.
    let item = r.get().unwrap().unwrap();
    assert_eq!(item.data, vec![3; 30]);
    r.abort(item.id).unwrap();
    let item = r.get().unwrap().unwrap();
    r.commit(item.id).unwrap();
    let other = q.reader("someone-new").unwrap();
    assert_eq!(other.len(), 0);
    for refused in [
        q.put(b"x").map(|_| ()),
        q.sync(),
        q.rotate(),
        q.checkpoint(),
        r.checkpoint(),
    ] {
        assert!(
            matches!(refused, Err(JournalError::ReadOnly { .. })),
            "{refused:?}"
        );
    }
    q.close().unwrap();
    assert_eq!(disk.mutations(), mutations, "a read-only open wrote");
    assert_eq!(contents(&disk, dir), before);

    // A writable open then repairs the same things, and nothing the read-only one did stuck.
    let q = JournaledQueue::open(dir, "q", cfg(&disk)).unwrap();
    assert!(q.recovery_report().tails[0].truncated);
    assert_eq!(q.reader("r").unwrap().len(), 7);
    assert_eq!(q.reader_names(), vec!["r".to_string()]);
}

#[test]
fn a_full_disk_can_still_be_inspected() {
    let disk = SimDisk::new(2);
    queue(&disk);
    // Fill the disk to the last byte: a writable open needs to write a new segment header.
    let used: u64 = contents(&disk, Path::new("/q"))
        .values()
        .map(|v| v.len() as u64)
        .sum();
    disk.set_faults(SimFaults {
        capacity: Some(used),
        ..SimFaults::default()
    });
    let err = JournaledQueue::open("/q", "q", cfg(&disk)).unwrap_err();
    assert!(err.to_string().contains("ENOSPC"), "{err}");
    let q = JournaledQueue::open_read_only("/q", "q", cfg(&disk)).unwrap();
    let r = q.reader("r").unwrap();
    let mut seen = Vec::new();
    while let Some(item) = r.get().unwrap() {
        seen.push(item.data[0]);
        r.commit(item.id).unwrap();
    }
    assert_eq!(seen, (3..10).collect::<Vec<u8>>());
}

#[test]
fn read_only_and_writable_opens_exclude_each_other_on_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let config = JournalConfig::default();
    let w = JournaledQueue::open(dir.path(), "q", config.clone()).unwrap();
    w.put(b"a").unwrap();
    assert!(matches!(
        JournaledQueue::open_read_only(dir.path(), "q", config.clone()),
        Err(JournalError::Locked { .. })
    ));
    w.close().unwrap();
    let r1 = JournaledQueue::open_read_only(dir.path(), "q", config.clone()).unwrap();
    let r2 = JournaledQueue::open_read_only(dir.path(), "q", config.clone()).unwrap();
    assert!(matches!(
        JournaledQueue::open(dir.path(), "q", config.clone()),
        Err(JournalError::Locked { .. })
    ));
    assert_eq!(r1.reader("").unwrap().len(), 1);
    assert_eq!(r2.reader("").unwrap().len(), 1);
}

#[test]
fn a_read_only_open_of_an_empty_folder_is_an_empty_queue_and_of_no_folder_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open_read_only(dir.path(), "q", JournalConfig::default()).unwrap();
    assert!(q.reader("").unwrap().get().unwrap().is_none());
    q.close().unwrap();
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing created"
    );
    let missing = dir.path().join("nope");
    assert!(matches!(
        JournaledQueue::open_read_only(&missing, "q", JournalConfig::default()),
        Err(JournalError::Io { .. })
    ));
    assert!(!missing.exists());
}

#[test]
fn a_read_only_open_still_refuses_damage() {
    let disk = SimDisk::new(3);
    queue(&disk);
    let dir = Path::new("/q");
    let mut segs: Vec<String> = contents(&disk, dir)
        .into_keys()
        .filter(|n| n.ends_with(".seg"))
        .collect();
    segs.sort();
    disk.remove_file(&dir.join(&segs[1])).unwrap();
    assert!(matches!(
        JournaledQueue::open_read_only(dir, "q", cfg(&disk)),
        Err(JournalError::Corrupt { .. })
    ));
}
