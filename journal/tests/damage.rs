//! Damage found from the outside: segment files deleted or replaced, symlinks and other
//! non-regular files in the folder, corruption appearing while the queue is open.
//! Every outcome is either every acknowledged item or an error naming the file.

mod common;
mod faulty;

use std::path::{Path, PathBuf};
use std::time::Duration;

use fairq_journal::format::{RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use fairq_journal::salvage::{reader_positions, salvage, SavedPosition};
use fairq_journal::storage::FsStorage;
use fairq_journal::{ItemId, JournalConfig, JournalError, JournaledQueue, SyncPolicy};

fn cfg(segment_size: u64) -> JournalConfig {
    JournalConfig {
        sync: SyncPolicy::Always,
        segment_size,
        checkpoint_interval: Duration::ZERO,
        ..JournalConfig::default()
    }
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    v.sort();
    v
}

/// A queue with one item per segment (ids 1..=n), every item put and nothing consumed.
fn filled(n: u8) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg(40)).unwrap();
    let r = q.reader("r").unwrap();
    for i in 0..n {
        q.put(&[i; 8]).unwrap();
    }
    r.checkpoint().unwrap();
    q.close().unwrap();
    dir
}

fn open_all(dir: &Path) -> Result<Vec<Vec<u8>>, JournalError> {
    let q = JournaledQueue::open(dir, "q", cfg(40))?;
    let r = q.reader("r")?;
    let mut out = Vec::new();
    while let Some(item) = r.get()? {
        r.commit(item.id)?;
        out.push(item.data.to_vec());
    }
    Ok(out)
}

fn expect_missing(result: Result<Vec<Vec<u8>>, JournalError>, missing: &Path) {
    match result {
        Err(JournalError::Corrupt { path, reason, .. }) => {
            assert_eq!(path, missing, "{reason}");
            assert!(reason.contains("missing"), "{reason}");
        }
        other => panic!(
            "expected the missing {} to be reported, got {other:?}",
            missing.display()
        ),
    }
}

#[test]
fn a_segment_missing_in_the_middle_is_corruption_naming_it() {
    let dir = filled(3);
    let segs = segments(dir.path());
    assert!(segs.len() >= 3, "{segs:?}");
    std::fs::remove_file(&segs[1]).unwrap();
    expect_missing(open_all(dir.path()), &segs[1]);
}

#[test]
fn the_first_segment_missing_is_corruption_naming_it() {
    let dir = filled(3);
    let segs = segments(dir.path());
    std::fs::remove_file(&segs[0]).unwrap();
    expect_missing(open_all(dir.path()), &segs[0]);
}

#[test]
fn the_first_segments_missing_after_retirement_is_still_detected() {
    // The reader consumed and retired the first segments; then the oldest remaining one is
    // deleted by hand.
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg(40)).unwrap();
    let r = q.reader("r").unwrap();
    for i in 0..6u8 {
        q.put(&[i; 8]).unwrap();
    }
    for _ in 0..2 {
        let item = r.get().unwrap().unwrap();
        r.commit(item.id).unwrap();
    }
    r.checkpoint().unwrap();
    q.close().unwrap();
    let segs = segments(dir.path());
    std::fs::remove_file(&segs[0]).unwrap();
    expect_missing(open_all(dir.path()), &segs[0]);
}

#[test]
fn every_segment_missing_is_corruption() {
    let dir = filled(2);
    for s in segments(dir.path()) {
        std::fs::remove_file(s).unwrap();
    }
    assert!(matches!(
        open_all(dir.path()),
        Err(JournalError::Corrupt { .. })
    ));
}

#[test]
fn retirement_leaves_no_false_gap_across_reopens() {
    // Consume a little, reopen, consume more, many times: retired segments never look missing.
    let dir = tempfile::tempdir().unwrap();
    let mut expected = 0u8;
    for round in 0..8u8 {
        let q = JournaledQueue::open(dir.path(), "q", cfg(40)).unwrap();
        let r = q.reader("r").unwrap();
        for i in 0..3u8 {
            q.put(&[round * 3 + i; 8]).unwrap();
        }
        for _ in 0..2 {
            let item = r.get().unwrap().unwrap();
            assert_eq!(item.data, vec![expected; 8]);
            expected += 1;
            r.commit(item.id).unwrap();
        }
        q.close().unwrap();
    }
    assert_eq!(open_all(dir.path()).unwrap().len(), 8);
}

#[cfg(unix)]
#[test]
fn a_segment_replaced_by_a_symlink_is_refused_and_its_target_untouched() {
    let dir = filled(3);
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("precious");
    std::fs::write(&target, b"not a journal file").unwrap();
    let segs = segments(dir.path());
    let last = segs.last().unwrap();
    std::fs::remove_file(last).unwrap();
    std::os::unix::fs::symlink(&target, last).unwrap();
    match JournaledQueue::open(dir.path(), "q", cfg(40)) {
        Err(JournalError::UnsafeFile { path, reason }) => {
            assert_eq!(&path, last);
            assert!(reason.contains("symbolic link"), "{reason}");
        }
        other => panic!("expected the symlink to be refused, got {other:?}"),
    }
    assert_eq!(std::fs::read(&target).unwrap(), b"not a journal file");
}

#[cfg(unix)]
#[test]
fn symlinked_checkpoints_lock_files_and_directories_named_like_queue_files_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("t");
    std::fs::write(&target, b"keep").unwrap();
    for victim in ["q.cp.r", "q.readers", "q.lock", "q.cp.r.tmp"] {
        let dir = filled(1);
        let p = dir.path().join(victim);
        let _ = std::fs::remove_file(&p);
        std::os::unix::fs::symlink(&target, &p).unwrap();
        assert!(
            matches!(
                JournaledQueue::open(dir.path(), "q", cfg(40)),
                Err(JournalError::UnsafeFile { .. })
            ),
            "{victim}"
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"keep", "{victim}");
    }
    let dir = filled(1);
    std::fs::create_dir(dir.path().join("q.00000000000000000009.seg")).unwrap();
    assert!(matches!(
        JournaledQueue::open(dir.path(), "q", cfg(40)),
        Err(JournalError::UnsafeFile { .. })
    ));
    // Files of other queues and unrelated entries are none of this queue's business.
    let dir = filled(1);
    std::os::unix::fs::symlink(&target, dir.path().join("other.cp")).unwrap();
    std::fs::create_dir(dir.path().join("archive")).unwrap();
    assert_eq!(open_all(dir.path()).unwrap().len(), 1);
}

#[cfg(unix)]
#[test]
fn a_new_segment_is_never_written_through_a_symlink() {
    // The next segment's name is taken by a symlink created while the queue is open.
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("t");
    std::fs::write(&target, b"keep").unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg(40)).unwrap();
    q.put(&[1; 8]).unwrap();
    let segs = segments(dir.path());
    let next = segs.last().unwrap().to_str().unwrap().replace(
        &format!("{:020}", segs.len()),
        &format!("{:020}", segs.len() + 1),
    );
    std::os::unix::fs::symlink(&target, &next).unwrap();
    // Rotation must fail (and poison) rather than truncate the target.
    assert!(q.put(&[2; 40]).is_err() || q.put(&[3; 40]).is_err());
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
}

#[cfg(unix)]
#[test]
fn files_are_private_by_default_and_modes_are_configurable() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("store");
    let q = JournaledQueue::open(&dir, "q", cfg(40)).unwrap();
    let r = q.reader("r").unwrap();
    q.put(b"secret").unwrap();
    r.checkpoint().unwrap();
    q.close().unwrap();
    assert_eq!(mode(&dir), 0o700);
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        assert_eq!(mode(&p), 0o600, "{}", p.display());
    }

    let dir = parent.path().join("shared");
    let config = JournalConfig {
        file_mode: 0o640,
        dir_mode: 0o750,
        ..cfg(40)
    };
    let q = JournaledQueue::open(&dir, "q", config).unwrap();
    q.put(b"x").unwrap();
    q.close().unwrap();
    assert_eq!(mode(&dir), 0o750 & !umask());
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        assert_eq!(mode(&p), 0o640 & !umask(), "{}", p.display());
    }
}

#[cfg(unix)]
fn umask() -> u32 {
    // The umask of this process, read back from a file created with mode 0o777.
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("probe");
    std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o777)
        .open(&p)
        .unwrap();
    !std::fs::metadata(&p).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_record_damaged_while_the_queue_is_open_is_reported_on_read() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg(1 << 20)).unwrap();
    let r = q.reader("r").unwrap();
    for i in 0..4u8 {
        q.put(&[i; 100]).unwrap();
    }
    // Flip a payload byte of the third record on disk behind the open queue's back, before
    // the reader has read anything.
    let seg = segments(dir.path()).pop().unwrap();
    let third = 28 + 2 * (36 + 100);
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[third + 36 + 50] ^= 0x20;
    std::fs::write(&seg, &bytes).unwrap();
    for i in 0..2u8 {
        let item = r.get().unwrap().unwrap();
        assert_eq!(item.data, vec![i; 100]);
        r.commit(item.id).unwrap();
    }
    match r.get() {
        Err(JournalError::Corrupt {
            path,
            offset,
            reason,
        }) => {
            assert_eq!(path, seg);
            assert_eq!(offset as usize, third);
            assert!(reason.contains("checksum"), "{reason}");
        }
        other => panic!("expected the damaged record to be reported, got {other:?}"),
    }
    // Nothing was skipped: the reader still stands before the damaged record.
    assert!(matches!(r.get(), Err(JournalError::Corrupt { .. })));
    assert_eq!(r.len(), 2);
}

#[test]
fn reads_that_return_flipped_bits_never_deliver_wrong_data() {
    use fairq_journal::sim::{SimDisk, SimFaults};
    let disk = SimDisk::new(11);
    let config = JournalConfig {
        sync: SyncPolicy::Never,
        ..JournalConfig::on_sim(&disk)
    };
    let q = JournaledQueue::open("/q", "q", config).unwrap();
    let r = q.reader("r").unwrap();
    let payload = |i: u32| -> Vec<u8> { (0..40 + i % 300).map(|b| (b * 31 + i) as u8).collect() };
    for i in 0..300u32 {
        q.put(&payload(i)).unwrap();
    }
    disk.set_faults(SimFaults {
        corrupt_read_per_mille: 400,
        ..SimFaults::default()
    });
    let (mut next, mut reported) = (0u32, 0u32);
    let mut attempts = 0;
    while next < 300 {
        attempts += 1;
        assert!(attempts < 100_000, "no progress");
        match r.get() {
            Ok(Some(item)) => {
                assert_eq!(item.data, payload(next), "item {next} delivered damaged");
                if next % 7 == 0 && reported % 2 == 0 {
                    // Aborted items are read again from the file, through the same checks.
                    r.abort(item.id).unwrap();
                    reported += 1;
                    continue;
                }
                r.commit(item.id).unwrap();
                next += 1;
            }
            Ok(None) => panic!("items vanished at {next}"),
            // A read that returned damaged bytes twice in a row is reported, never skipped.
            Err(JournalError::Corrupt { .. }) => reported += 1,
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    assert!(reported > 0, "the fault injection never fired");
}

/// A last segment whose header is bad but which is longer than a header was not torn by a
/// crash (a new segment's header is synced before anything is appended): it is damage, and
/// its items are not dropped with the file.
#[test]
fn a_zero_filled_last_segment_is_corruption_not_a_torn_new_segment() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg(1 << 20)).unwrap();
    // More than a file system block: a crash cannot leave that much behind a torn header.
    for i in 0..3u8 {
        q.put(&[i; 2_000]).unwrap();
    }
    q.close().unwrap();
    let segs = segments(dir.path());
    assert_eq!(segs.len(), 1);
    let len = std::fs::metadata(&segs[0]).unwrap().len() as usize;
    std::fs::write(&segs[0], vec![0u8; len]).unwrap();
    for read_only in [true, false] {
        let opened = if read_only {
            JournaledQueue::open_read_only(dir.path(), "q", cfg(1 << 20))
        } else {
            JournaledQueue::open(dir.path(), "q", cfg(1 << 20))
        };
        match opened {
            Err(JournalError::Corrupt { path, .. }) => assert_eq!(path, segs[0]),
            other => panic!(
                "expected corruption of {}, got {other:?}",
                segs[0].display()
            ),
        }
        assert_eq!(std::fs::metadata(&segs[0]).unwrap().len() as usize, len);
    }
}

/// Zeros in the middle of the last segment with a record after them are damage, not the
/// unused end of a segment: the scan looks past the zeros, finds the later record and
/// refuses to cut it off. Zeros that run to the end are cut (the last record stays intact).
#[test]
fn zeros_before_a_later_record_are_corruption_and_zeros_to_the_end_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg(1 << 20)).unwrap();
    for i in 0..3u8 {
        q.put(&[i + 1; 100]).unwrap();
    }
    q.close().unwrap();
    let segs = segments(dir.path());
    assert_eq!(segs.len(), 1);
    let data = std::fs::read(&segs[0]).unwrap();
    // Each record is its header and 100 bytes, one after another after the segment header.
    let record_len = RECORD_HEADER_LEN + 100;
    assert_eq!(data.len(), SEGMENT_HEADER_LEN + 3 * record_len);
    let second = SEGMENT_HEADER_LEN + record_len;
    let mut holed = data.clone();
    holed[second..second + record_len].fill(0);
    std::fs::write(&segs[0], &holed).unwrap();
    match open_all(dir.path()) {
        Err(JournalError::Corrupt { path, offset, .. }) => {
            assert_eq!(path, segs[0]);
            assert_eq!(offset, second as u64);
        }
        other => panic!("expected corruption at {second}, got {other:?}"),
    }
    assert_eq!(std::fs::read(&segs[0]).unwrap(), holed, "nothing was cut");

    let mut tail = data.clone();
    tail[second..].fill(0);
    tail.extend_from_slice(&[0u8; 1 << 16]);
    std::fs::write(&segs[0], &tail).unwrap();
    assert_eq!(open_all(dir.path()).unwrap(), vec![vec![1u8; 100]]);
    assert_eq!(std::fs::metadata(&segs[0]).unwrap().len() as usize, second);
}

/// The newest segments deleted after a clean close: the checkpoint names the newest segment
/// of its time, so the missing end is reported (naming the first missing file), not skipped.
#[test]
fn the_last_segments_missing_are_corruption_naming_the_first_of_them() {
    for gone in [1, 2] {
        let dir = filled(4);
        let segs = segments(dir.path());
        assert!(segs.len() >= 3, "{segs:?}");
        for seg in &segs[segs.len() - gone..] {
            std::fs::remove_file(seg).unwrap();
        }
        let first_missing = &segs[segs.len() - gone];
        expect_missing(open_all(dir.path()), first_missing);
        match JournaledQueue::open_read_only(dir.path(), "q", cfg(40)) {
            Err(JournalError::Corrupt { path, .. }) => assert_eq!(&path, first_missing),
            other => panic!("expected corruption, got {other:?}"),
        }
    }
}

/// A segment created after the last checkpoint, then deleted: no checkpoint knows it, but the
/// tail marker does, so the queue refuses to open (naming the file) instead of dropping its
/// items and handing their ids out again.
#[test]
fn a_segment_created_after_the_last_checkpoint_and_deleted_is_corruption() {
    let dir = filled(2);
    let copy = tempfile::tempdir().unwrap();
    {
        let q = JournaledQueue::open(dir.path(), "q", cfg(40)).unwrap();
        let _r = q.reader("r").unwrap();
        for i in 0..3u8 {
            q.put(&[100 + i; 8]).unwrap();
        }
        // The folder as a crash would leave it now: no checkpoint since the puts (they are
        // written on commit and close).
        common::crash_copy(dir.path(), copy.path());
        q.close().unwrap();
    }
    // One item per segment: the newest holds nothing yet, the one before holds the last item.
    let segs = segments(copy.path());
    assert!(segs.len() >= segments_of_filled_2() + 2, "{segs:?}");
    let first_gone = &segs[segs.len() - 2];
    for seg in &segs[segs.len() - 2..] {
        std::fs::remove_file(seg).unwrap();
    }
    expect_missing(open_all(copy.path()), first_gone);
    match JournaledQueue::open_read_only(copy.path(), "q", cfg(40)) {
        Err(JournalError::Corrupt { path, .. }) => assert_eq!(&path, first_gone),
        other => panic!("expected corruption, got {other:?}"),
    }
    // With the segment back, nothing is lost.
    let items = open_all(dir.path()).unwrap();
    assert_eq!(items.len(), 5);
}

fn segments_of_filled_2() -> usize {
    segments(filled(2).path()).len()
}

/// A folder written before tail markers existed (none there) opens and gets one, and a
/// marker that is not one is corruption naming it.
#[test]
fn a_missing_marker_checks_nothing_and_a_damaged_one_is_named() {
    let dir = filled(2);
    let marker = dir.path().join("q.tail");
    assert!(marker.exists());
    std::fs::remove_file(&marker).unwrap();
    assert_eq!(
        open_all(dir.path()).unwrap(),
        vec![vec![0u8; 8], vec![1u8; 8]]
    );
    assert!(marker.exists(), "opening records the writer's segment");
    let mut bytes = std::fs::read(&marker).unwrap();
    bytes[12] ^= 1;
    std::fs::write(&marker, bytes).unwrap();
    match open_all(dir.path()) {
        Err(JournalError::Corrupt { path, reason, .. }) => {
            assert_eq!(path, marker);
            assert!(reason.contains("tail marker"), "{reason}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn salvage_reads_every_intact_item_of_a_queue_that_open_refuses() {
    // Five items in segments of one item each; the middle segment goes missing and a byte
    // of the second item's payload is flipped: opening refuses, salvage hands over the rest.
    let dir = filled(5);
    // (A sixth segment, empty, was started after the fifth filled up.)
    let segs = segments(dir.path());
    assert_eq!(segs.len(), 6);
    std::fs::remove_file(&segs[2]).unwrap();
    let mut bytes = std::fs::read(&segs[1]).unwrap();
    let flipped_at = SEGMENT_HEADER_LEN + RECORD_HEADER_LEN + 3;
    bytes[flipped_at] ^= 0x01;
    std::fs::write(&segs[1], &bytes).unwrap();
    assert!(open_all(dir.path()).is_err());
    let before: Vec<_> = segments(dir.path())
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();

    let mut items = Vec::new();
    let report = salvage(dir.path(), "q", &FsStorage, &mut |id, data| {
        items.push((id.0, data.to_vec()))
    })
    .unwrap();
    assert_eq!(
        items,
        vec![(1, vec![0; 8]), (4, vec![3; 8]), (5, vec![4; 8])]
    );
    assert_eq!((report.segments, report.items, report.bytes), (5, 3, 24));
    assert!(report.damaged());
    assert_eq!(report.damage.len(), 2, "{report:?}");
    assert_eq!(report.damage[0].path, segs[1]);
    assert_eq!(report.damage[0].offset, SEGMENT_HEADER_LEN as u64);
    assert!(report.damage[0].reason.contains("checksum"), "{report:?}");
    assert_eq!(report.damage[1].path, segs[2]);
    assert_eq!(report.damage[1].reason, "missing segment file");
    // Nothing was changed.
    let after: Vec<_> = segments(dir.path())
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert_eq!(before, after);
}

#[test]
fn reader_positions_let_a_salvage_leave_out_what_every_reader_finished() {
    // Items 1..=6 in one segment, read by two readers: `a` finished 1 to 4, `b` finished
    // 1, 2 and 5 (out of order). A byte of item 3 is flipped, so opening refuses.
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg(4096)).unwrap();
    let (a, b) = (q.reader("a").unwrap(), q.reader("b").unwrap());
    for i in 1..=6u8 {
        q.put(&[i; 8]).unwrap();
    }
    let take = |r: &fairq_journal::Reader, n: usize| -> Vec<ItemId> {
        (0..n).map(|_| r.get().unwrap().unwrap().id).collect()
    };
    for id in take(&a, 4) {
        a.commit(id).unwrap();
    }
    let got = take(&b, 5);
    for id in [got[0], got[1], got[4]] {
        b.commit(id).unwrap();
    }
    q.close().unwrap();
    let segs = segments(dir.path());
    let mut bytes = std::fs::read(&segs[0]).unwrap();
    let third = bytes.windows(8).position(|w| w == [3; 8]).expect("item 3");
    bytes[third] ^= 0x01;
    std::fs::write(&segs[0], &bytes).unwrap();
    assert!(JournaledQueue::open(dir.path(), "q", cfg(4096)).is_err());
    let files_before = folder_bytes(dir.path());

    let positions = reader_positions(dir.path(), "q", &FsStorage).unwrap();
    let names: Vec<&str> = positions.readers.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(positions.registry_damage, None);
    let mut kept = Vec::new();
    let report = salvage(dir.path(), "q", &FsStorage, &mut |id, data| {
        if !positions.finished_by_all(id) {
            kept.push(data[0]);
        }
    })
    .unwrap();
    // 1 and 2 were finished by both; 3 is damaged; 4 only by a, 5 only by b; 6 by neither.
    assert_eq!(kept, [4, 5, 6], "{report:?}");
    assert!(report.damaged());
    assert_eq!(
        folder_bytes(dir.path()),
        files_before,
        "reading changed a file"
    );

    // A reader whose checkpoint is gone finishes nothing: everything intact is kept.
    std::fs::remove_file(dir.path().join("q.cp.b")).unwrap();
    let positions = reader_positions(dir.path(), "q", &FsStorage).unwrap();
    assert_eq!(positions.readers[1].position, SavedPosition::Missing);
    let mut kept = Vec::new();
    salvage(dir.path(), "q", &FsStorage, &mut |id, data| {
        if !positions.finished_by_all(id) {
            kept.push(data[0]);
        }
    })
    .unwrap();
    assert_eq!(kept, [1, 2, 4, 5, 6]);
}

/// Every file of `dir` with its bytes, by name.
fn folder_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

/// A queue read by `a` (finished 1 to 4) and `b` (finished 1 and 2), items 1..=6 in
/// segments of one item each, closed.
fn two_readers_with_progress() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg(40)).unwrap();
    let (a, b) = (q.reader("a").unwrap(), q.reader("b").unwrap());
    for i in 1..=6u8 {
        q.put(&[i; 8]).unwrap();
    }
    for (r, n) in [(&a, 4), (&b, 2)] {
        for _ in 0..n {
            let item = r.get().unwrap().unwrap();
            r.commit(item.id).unwrap();
        }
    }
    q.close().unwrap();
    dir
}

/// The first bytes of what `reader` of `q` delivers until it is empty, each committed.
fn drain(q: &JournaledQueue, reader: &str) -> Vec<u8> {
    let r = q.reader(reader).unwrap();
    let mut got = Vec::new();
    while let Some(item) = r.get().unwrap() {
        got.push(item.data[0]);
        r.commit(item.id).unwrap();
    }
    got
}

#[test]
fn a_lost_reader_registry_is_rebuilt_from_the_checkpoints_and_no_reader_loses_its_place() {
    // Before, a missing registry meant "the default reader alone": the named readers'
    // checkpoints were deleted as stale, `a` started again from the oldest item and `b`,
    // created anew, at the tail, so it never got items 3 to 6.
    let dir = two_readers_with_progress();
    let registry = dir.path().join("q.readers");
    std::fs::remove_file(&registry).unwrap();

    // Read-only: the readers are taken from the checkpoints, and nothing is written.
    let ro = JournaledQueue::open_read_only(dir.path(), "q", cfg(40)).unwrap();
    assert_eq!(ro.recovery_report().registry_rebuilt, ["a", "b"]);
    assert_eq!(ro.reader("b").unwrap().len(), 4);
    drop(ro);
    assert!(!registry.exists());

    let q = JournaledQueue::open(dir.path(), "q", cfg(40)).unwrap();
    let report = q.recovery_report().clone();
    assert_eq!(report.registry_rebuilt, ["a", "b"]);
    assert!(
        !report.is_clean() && report.restarted_readers.is_empty(),
        "{report:?}"
    );
    assert_eq!(drain(&q, "a"), [5, 6]);
    assert_eq!(drain(&q, "b"), [3, 4, 5, 6]);
    assert!(matches!(q.reader(""), Err(JournalError::NoDefaultReader)));
    q.close().unwrap();
    // The registry was written again: the next open is clean.
    assert!(registry.exists());
    let q = JournaledQueue::open(dir.path(), "q", cfg(40)).unwrap();
    assert!(q.recovery_report().is_clean(), "{:?}", q.recovery_report());
}

/// Puts items 1..=`n` (8 bytes of their number each), and returns the default reader with
/// item 1 committed and its place saved.
fn default_reader_past_the_first_of(q: &JournaledQueue, n: u8) -> fairq_journal::Reader {
    for i in 1..=n {
        q.put(&[i; 8]).unwrap();
    }
    let default = q.reader("").unwrap();
    let first = default.get().unwrap().unwrap();
    default.commit(first.id).unwrap();
    default.checkpoint().unwrap();
    default
}

#[test]
fn a_crash_inside_the_first_named_readers_creation_completes_it_on_open() {
    // The first named reader's checkpoint is written before the registry: a crash between
    // the two leaves the default reader's checkpoint, the new one's, and no registry.
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg(40)).unwrap();
    let default = default_reader_past_the_first_of(&q, 3);
    drop(default);
    q.close().unwrap();
    let default_cp = std::fs::read(dir.path().join("q.cp")).unwrap();
    std::fs::write(dir.path().join("q.cp.a"), &default_cp).unwrap();

    let q = JournaledQueue::open(dir.path(), "q", cfg(40)).unwrap();
    assert_eq!(q.recovery_report().registry_rebuilt, ["a"]);
    // `a` took over the default reader's place, as the interrupted call would have.
    assert_eq!(drain(&q, "a"), [2, 3]);
    q.close().unwrap();
    assert!(
        !dir.path().join("q.cp").exists(),
        "the default reader's checkpoint is stale"
    );
}

#[test]
fn a_power_loss_at_any_step_of_the_first_named_readers_creation_loses_no_item() {
    // Items 1..=4, the default reader finished 1 and saved its place; then reader `a` is
    // created (it takes over the default reader's place) with the power failing at each of
    // the creation's storage operations in turn. After the restart, `a` delivers 2, 3 and 4
    // (and item 1 at most again), whichever files the crash left.
    let (mut completed, mut rebuilt) = (false, 0);
    for crash_at in 0..40 {
        let disk = fairq_journal::sim::SimDisk::new(crash_at);
        let config = JournalConfig {
            sync: SyncPolicy::Always,
            checkpoint_interval: Duration::ZERO,
            ..JournalConfig::on_sim(&disk)
        };
        let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
        let default = default_reader_past_the_first_of(&q, 4);
        disk.schedule_crash(crash_at);
        let created = q.reader("a").is_ok() && !disk.is_dead();
        drop(default);
        drop(q);
        if created {
            completed = true;
            break;
        }
        disk.restart();
        let q = JournaledQueue::open("/j", "q", config).unwrap();
        if q.recovery_report().registry_rebuilt == ["a"] {
            rebuilt += 1;
        }
        let got = drain(&q, "a");
        let tail: Vec<u8> = got.iter().copied().filter(|&i| i != 1).collect();
        assert_eq!(tail, [2, 3, 4], "crash at operation {crash_at}: {got:?}");
    }
    assert!(completed, "the creation took more than 40 operations");
    // Some crash came between the new checkpoint and the registry.
    assert!(
        rebuilt > 0,
        "no crash point left a checkpoint without a registry"
    );
}

#[test]
fn a_failed_registry_write_undoes_the_first_named_readers_checkpoint() {
    // The first named reader's checkpoint is written, then the registry write fails: the
    // call fails and the default reader goes on (and saves its place further on). The new
    // reader's checkpoint must not stay behind: without a registry, the next open would
    // take reader `a` from it, at its older place, and remove the default reader's newer
    // checkpoint as stale.
    use faulty::{Faulty, Op};
    let disk = fairq_journal::sim::SimDisk::new(5);
    let storage = Faulty::new(&disk);
    let config = JournalConfig {
        sync: SyncPolicy::Always,
        checkpoint_interval: Duration::ZERO,
        storage: std::sync::Arc::new(storage.clone()),
        ..JournalConfig::default()
    };
    let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
    let default = default_reader_past_the_first_of(&q, 4);
    let registry_tmp = Path::new("/j/q.readers.tmp");
    storage.refuse(move |op| matches!(op, Op::Create(p) if *p == registry_tmp));
    assert!(q.reader("a").is_err());
    storage.refuse_nothing();
    assert_eq!(q.reader_names(), [""]);
    for _ in 0..2 {
        let item = default.get().unwrap().unwrap();
        default.commit(item.id).unwrap();
    }
    default.checkpoint().unwrap();
    drop((default, q));

    let q = JournaledQueue::open("/j", "q", config).unwrap();
    assert_eq!(q.reader_names(), [""]);
    assert_eq!(drain(&q, ""), [4]);
}

#[test]
fn an_empty_last_segment_is_reused_only_once_its_directory_entry_is_durable() {
    // A process killed while it created a segment, after the header's sync and before the
    // folder's, leaves an empty segment whose directory entry a power loss may still take
    // away. Opening reuses it for the writer: it must make the entry durable itself, not
    // leave that to the tail marker's write (which here fails, and is only logged).
    use fairq_journal::format::{encode_segment_header, SegmentHeader};
    use fairq_journal::storage::Storage;
    use faulty::{Faulty, Op};
    let disk = fairq_journal::sim::SimDisk::new(6);
    let storage = Faulty::new(&disk);
    let config = JournalConfig {
        sync: SyncPolicy::Always,
        checkpoint_interval: Duration::ZERO,
        storage: std::sync::Arc::new(storage.clone()),
        ..JournalConfig::default()
    };
    let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
    q.put(&[1; 8]).unwrap();
    q.close().unwrap();
    let mut header = Vec::new();
    encode_segment_header(
        &SegmentHeader {
            segment_id: 2,
            prev_unsynced: false,
        },
        &mut header,
    );
    let f = disk
        .create(Path::new("/j/q.00000000000000000002.seg"), 0o600)
        .unwrap();
    f.write(&header).unwrap();
    f.sync_data().unwrap();
    drop(f);

    let tail_tmp = Path::new("/j/q.tail.tmp");
    storage.refuse(move |op| matches!(op, Op::Create(p) if *p == tail_tmp));
    let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
    q.put(&[2; 8]).unwrap();
    drop(q);
    storage.refuse_nothing();
    disk.crash();
    let q = JournaledQueue::open("/j", "q", config).unwrap();
    assert_eq!(drain(&q, ""), [1, 2]);
}

/// A queue on a simulated disk whose folder syncs can be refused, with items 1..=4 and
/// the default reader past item 1 (see `default_reader_past_the_first_of`).
fn registry_queue(
    seed: u64,
) -> (
    faulty::Faulty,
    JournalConfig,
    JournaledQueue,
    fairq_journal::Reader,
) {
    let disk = fairq_journal::sim::SimDisk::new(seed);
    let storage = faulty::Faulty::new(&disk);
    let config = JournalConfig {
        sync: SyncPolicy::Always,
        checkpoint_interval: Duration::ZERO,
        storage: std::sync::Arc::new(storage.clone()),
        ..JournalConfig::default()
    };
    let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
    let default = default_reader_past_the_first_of(&q, 4);
    (storage, config, q, default)
}

/// Refuses the folder's sync that follows the next rename onto the reader registry: the new
/// registry is in place, only not durably.
fn refuse_the_sync_after_the_registry_rename(storage: &faulty::Faulty) {
    let mut renamed = false;
    storage.refuse(move |op| match op {
        faulty::Op::Rename { to, .. } if *to == Path::new("/j/q.readers") => {
            renamed = true;
            false
        }
        faulty::Op::SyncDir(_) if renamed => {
            renamed = false;
            true
        }
        _ => false,
    });
}

#[test]
fn a_first_named_reader_whose_registry_is_renamed_but_not_synced_took_over() {
    // The registry naming `a` is in place when its sync fails: the call reports the
    // failure, but the queue now has reader `a` (with the default reader's place), as
    // the folder says, and its checkpoint stays for it.
    let (storage, config, q, default) = registry_queue(7);
    refuse_the_sync_after_the_registry_rename(&storage);
    assert!(q.reader("a").is_err());
    storage.refuse_nothing();
    assert_eq!(q.reader_names(), ["a"]);
    assert_eq!(default.name(), "a");
    let a = q.reader("a").unwrap();
    let item = a.get().unwrap().unwrap();
    assert_eq!(item.data[0], 2);
    a.commit(item.id).unwrap();
    a.checkpoint().unwrap();
    drop((a, default, q));
    let q = JournaledQueue::open("/j", "q", config).unwrap();
    assert_eq!(q.reader_names(), ["a"]);
    assert_eq!(drain(&q, "a"), [3, 4]);
}

#[test]
fn a_further_reader_whose_registry_is_renamed_but_not_synced_exists_with_its_checkpoint() {
    let (storage, config, q, default) = registry_queue(8);
    drop(default);
    q.reader("a").unwrap();
    refuse_the_sync_after_the_registry_rename(&storage);
    assert!(q.reader("b").is_err());
    storage.refuse_nothing();
    assert_eq!(q.reader_names(), ["a", "b"]);
    q.put(&[5; 8]).unwrap();
    drop(q);
    let q = JournaledQueue::open("/j", "q", config).unwrap();
    assert_eq!(q.reader_names(), ["a", "b"]);
    assert!(
        q.recovery_report().restarted_readers.is_empty(),
        "{:?}",
        q.recovery_report()
    );
    assert_eq!(drain(&q, "b"), [5]);
}

#[test]
fn a_reader_removed_from_a_registry_renamed_but_not_synced_is_gone() {
    let (storage, config, q, default) = registry_queue(9);
    drop(default);
    q.reader("a").unwrap();
    let b = q.reader("b").unwrap();
    refuse_the_sync_after_the_registry_rename(&storage);
    assert!(q.remove_reader("b").is_err());
    storage.refuse_nothing();
    assert_eq!(q.reader_names(), ["a"]);
    assert!(matches!(b.get(), Err(JournalError::ReaderRemoved(_))));
    drop((b, q));
    let q = JournaledQueue::open("/j", "q", config).unwrap();
    assert_eq!(q.reader_names(), ["a"]);
}

#[test]
fn a_record_with_the_last_possible_id_is_corruption() {
    // The journal never gives out `u64::MAX` (no id would follow it): a record claiming it,
    // however well checksummed, is damage, not an id to continue from.
    use fairq_journal::format::{encode_record, Record, RecordKind};
    let dir = filled(2);
    let last = segments(dir.path()).pop().unwrap();
    let mut rec = Vec::new();
    encode_record(
        &Record {
            kind: RecordKind::Item,
            id: u64::MAX,
            added_at_ms: 1,
            expires_at_ms: None,
            payload: b"forged",
        },
        &mut rec,
    );
    let mut bytes = std::fs::read(&last).unwrap();
    bytes.extend_from_slice(&rec);
    std::fs::write(&last, bytes).unwrap();
    match open_all(dir.path()) {
        Err(JournalError::Corrupt { path, reason, .. }) => {
            assert_eq!(path, last);
            assert!(reason.contains("out of range"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

/// A folder holding only segment `seg` of queue `q`, with a valid header and, if
/// `with_record`, one item (id 1).
fn forged_segment(seg: u64, with_record: bool) -> (tempfile::TempDir, PathBuf) {
    use fairq_journal::format::{
        encode_record, encode_segment_header, Record, RecordKind, SegmentHeader,
    };
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = Vec::new();
    encode_segment_header(
        &SegmentHeader {
            segment_id: seg,
            prev_unsynced: false,
        },
        &mut bytes,
    );
    if with_record {
        encode_record(
            &Record {
                kind: RecordKind::Item,
                id: 1,
                added_at_ms: 1,
                expires_at_ms: None,
                payload: &[1; 8],
            },
            &mut bytes,
        );
    }
    let path = dir.path().join(format!("q.{seg:020}.seg"));
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

#[test]
fn a_segment_with_the_last_possible_id_is_corruption() {
    // No segment id follows `u64::MAX`: the journal never creates that segment, and one
    // found is damage (opening used to overflow computing the next segment's id).
    for with_record in [true, false] {
        let (dir, path) = forged_segment(u64::MAX, with_record);
        for read_only in [false, true] {
            let opened = if read_only {
                JournaledQueue::open_read_only(dir.path(), "q", cfg(4096))
            } else {
                JournaledQueue::open(dir.path(), "q", cfg(4096))
            };
            match opened {
                Err(JournalError::Corrupt {
                    path: p, reason, ..
                }) => {
                    assert_eq!(p, path);
                    assert!(reason.contains("out of range"), "{reason}");
                }
                other => panic!("expected Corrupt, got {other:?}"),
            }
        }
    }
}

#[test]
fn the_writer_never_creates_the_segment_with_the_last_possible_id() {
    // The segment before the last possible one, holding an item: opening would start the
    // writer on a new segment with the last id, which no later open accepts.
    let (dir, path) = forged_segment(u64::MAX - 1, true);
    match JournaledQueue::open(dir.path(), "q", cfg(4096)) {
        Err(JournalError::Corrupt {
            path: p, reason, ..
        }) => {
            assert_eq!(p, path);
            assert!(reason.contains("no segment can follow"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // Two ids before it: the writer starts on the one before the last, and a rotation
    // that would need the last one fails rather than create it (or overflow after it).
    let (dir, _) = forged_segment(u64::MAX - 2, true);
    let q = JournaledQueue::open(dir.path(), "q", cfg(80)).unwrap();
    let put = (0..4u8).map(|i| q.put(&[i; 30])).collect::<Vec<_>>();
    assert!(put.iter().any(|p| p.is_err()), "{put:?}");
    assert!(!dir.path().join(format!("q.{:020}.seg", u64::MAX)).exists());
    drop(q);
    assert!(matches!(
        JournaledQueue::open(dir.path(), "q", cfg(80)),
        Err(JournalError::Corrupt { .. })
    ));
    // Every acknowledged item can still be read (the put whose rotation failed may be
    // there too, as after any failed rotation).
    let q = JournaledQueue::open_read_only(dir.path(), "q", cfg(80)).unwrap();
    let r = q.reader("").unwrap();
    let mut got = Vec::new();
    while let Some(item) = r.get().unwrap() {
        got.push(item.id);
    }
    for id in put.iter().filter_map(|p| p.as_ref().ok()) {
        assert!(got.contains(id), "{id:?} lost: {got:?}");
    }
    assert!(got.len() <= 1 + put.len(), "{got:?}");
}

#[test]
fn a_checkpoint_naming_the_last_possible_id_is_set_aside() {
    use fairq_journal::checkpoint::{encode_checkpoint, Checkpoint};
    for forged in [
        Checkpoint {
            head: 1,
            done: vec![u64::MAX],
            ..Checkpoint::default()
        },
        Checkpoint {
            head: 1,
            errors: vec![(u64::MAX, 1)],
            ..Checkpoint::default()
        },
        Checkpoint {
            head: u64::MAX,
            ..Checkpoint::default()
        },
    ] {
        let dir = filled(2);
        std::fs::write(dir.path().join("q.cp.r"), encode_checkpoint(&forged)).unwrap();
        // The reader starts again from the oldest item, as with any unusable checkpoint,
        // and new items still get ids.
        assert_eq!(open_all(dir.path()).unwrap(), vec![vec![0; 8], vec![1; 8]]);
        let q = JournaledQueue::open(dir.path(), "q", cfg(40)).unwrap();
        q.put(b"next").unwrap();
        q.close().unwrap();
        assert_eq!(open_all(dir.path()).unwrap(), vec![b"next".to_vec()]);
    }
}
