//! Opening a store reports unusable folders, held locks and damaged files as typed errors.

mod common;

use std::io::{Read, Seek, SeekFrom, Write};

use common::{LEASE, START, open, runtime, segments};
use fairq_file::{FileBackend, FileError, FileOptions, Role};
use fairq_journal::{JournalConfig, JournaledQueue};
use fairq_worker::{Backend, ManualClock, NewJob};

#[test]
fn a_file_is_not_a_store_folder() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain");
    std::fs::write(&file, b"x").unwrap();
    let err = FileBackend::open(&file, FileOptions::default()).unwrap_err();
    assert!(matches!(err, FileError::NotAFolder { .. }), "{err:?}");
    assert!(err.to_string().contains("is not a folder"));
    let err = FileBackend::open(file.join("below"), FileOptions::default()).unwrap_err();
    assert!(matches!(err, FileError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("cannot use"), "{err}");
}

#[test]
fn a_missing_folder_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a").join("b");
    let store = FileBackend::open(&path, FileOptions::default()).unwrap();
    assert!(path.is_dir());
    store.close().unwrap();
}

#[test]
fn one_owner_per_folder() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
    assert_eq!(store.role(), Role::Owner);
    // Without sharing, a held folder is refused.
    let err = FileBackend::open(dir.path(), FileOptions::default().share(false)).unwrap_err();
    assert!(matches!(err, FileError::Locked { .. }), "{err:?}");
    assert!(err.to_string().contains("in use"));
    // With sharing (the default) a second open is a client of the first.
    let client = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
    assert_eq!(client.role(), Role::Client);
    // A holder that does not serve the folder cannot be reached: opening says so.
    drop(client);
    store.close().unwrap();
    let quiet = FileBackend::open(dir.path(), FileOptions::default().serve(false)).unwrap();
    let err = FileBackend::open(
        dir.path(),
        FileOptions::default().connect_timeout(std::time::Duration::from_millis(50)),
    )
    .unwrap_err();
    assert!(matches!(err, FileError::Locked { .. }), "{err:?}");
    assert!(
        err.to_string().contains("does not serve the store"),
        "{err}"
    );
    drop(quiet);
    // Closing releases the folder even while clones of the handle live on.
    let store = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
    let clone = store.clone();
    store.close().unwrap();
    let again = FileBackend::open(dir.path(), FileOptions::default().share(false)).unwrap();
    runtime().block_on(async {
        let err = clone
            .enqueue(NewJob::new("q", "k", vec![]))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("closed"), "{err}");
    });
    drop(again);
}

#[test]
fn a_connect_timeout_too_long_for_an_instant_waits_as_long_as_it_takes() {
    // `Duration::MAX` has no instant that far off: opening used to panic computing its
    // deadline. Now it means "wait for the holder however long it takes".
    let forever = FileOptions::default().connect_timeout(std::time::Duration::MAX);
    let dir = tempfile::tempdir().unwrap();
    let owner = FileBackend::open(dir.path(), forever.clone()).unwrap();
    assert_eq!(owner.role(), Role::Owner);
    let client = FileBackend::open(dir.path(), forever.clone()).unwrap();
    assert_eq!(client.role(), Role::Client);
    let view = FileBackend::open_read_only(dir.path(), forever.clone()).unwrap();
    drop((client, view));
    owner.close().unwrap();
    // A holder that does not serve: the opener keeps trying, and takes the folder over once
    // the holder lets go (whether it first tried before or after that).
    let quiet = FileBackend::open(dir.path(), FileOptions::default().serve(false)).unwrap();
    let waiting = {
        let path = dir.path().to_path_buf();
        std::thread::spawn(move || FileBackend::open(&path, forever).map(|s| s.role()))
    };
    quiet.close().unwrap();
    drop(quiet);
    assert_eq!(waiting.join().unwrap().unwrap(), Role::Owner);
}

/// A store with three jobs, closed; returns the path of its only segment.
fn store_with_jobs(dir: &std::path::Path) -> std::path::PathBuf {
    let clock = ManualClock::new(START);
    runtime().block_on(async {
        let store = open(dir, &clock);
        for i in 0..3 {
            store
                .enqueue(NewJob::new("q", "k", vec![i; 100]))
                .await
                .unwrap();
        }
        store.close().unwrap();
    });
    let segs = segments(dir);
    assert_eq!(segs.len(), 1);
    dir.join(&segs[0])
}

#[test]
fn damage_inside_the_journal_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let segment = store_with_jobs(dir.path());
    // Flip a payload byte of the first record; valid records follow it.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&segment)
        .unwrap();
    let offset = 28 + 36 + 40;
    file.seek(SeekFrom::Start(offset)).unwrap();
    let mut byte = [0u8];
    file.read_exact(&mut byte).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(&[byte[0] ^ 0x40]).unwrap();
    drop(file);
    let err = FileBackend::open(dir.path(), FileOptions::default()).unwrap_err();
    assert!(matches!(err, FileError::CorruptJournal { .. }), "{err:?}");
    assert!(err.is_corrupt());
    assert!(err.to_string().contains("corrupt journal file"), "{err}");
    // The failed open let go of the folder: the same error again, not "locked".
    let err = FileBackend::open(dir.path(), FileOptions::default()).unwrap_err();
    assert!(matches!(err, FileError::CorruptJournal { .. }), "{err:?}");
}

#[test]
fn a_torn_tail_loses_only_the_unacknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let segment = store_with_jobs(dir.path());
    // Half of a last record, as a crash in the middle of an append leaves it.
    let len = std::fs::metadata(&segment).unwrap().len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap();
    file.set_len(len - 50).unwrap();
    drop(file);
    let store = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
    assert_eq!(store.counts("q").scheduled, 2);
}

fn journal_with(dir: &std::path::Path, payload: &[u8]) {
    let journal = JournaledQueue::open(dir, "jobs", JournalConfig::default()).unwrap();
    journal.put(payload).unwrap();
    journal.close().unwrap();
}

#[test]
fn a_record_that_is_not_a_store_record_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    journal_with(dir.path(), b"\x01\x05\x07garbage that is no entry");
    let err = FileBackend::open(dir.path(), FileOptions::default()).unwrap_err();
    assert!(
        matches!(err, FileError::CorruptRecord { item: 1, .. }),
        "{err:?}"
    );
    assert!(err.is_corrupt());
}

#[test]
fn a_newer_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    journal_with(dir.path(), b"\x07\x00");
    let err = FileBackend::open(dir.path(), FileOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            FileError::UnsupportedVersion {
                found: 7,
                supported: 4,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_failed_sync_poisons_the_store_until_it_is_reopened() {
    use fairq_journal::sim::{SimDisk, SimFaults};
    let dir = tempfile::tempdir().unwrap();
    let disk = SimDisk::new(5);
    let clock = ManualClock::new(START);
    let options = FileOptions::default()
        .clock(clock.clone())
        .storage(disk.clone());
    runtime().block_on(async {
        let store = FileBackend::open(dir.path(), options.clone()).unwrap();
        let kept = store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
        disk.set_faults(SimFaults {
            sync_error_per_mille: 1000,
            ..SimFaults::default()
        });
        let err = store
            .enqueue(NewJob::new("q", "k", vec![]))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("reopen"), "{err}");
        disk.set_faults(SimFaults::default());
        // Memory is ahead of the disk now: every call is refused, reads included.
        assert!(store.enqueue(NewJob::new("q", "k", vec![])).await.is_err());
        assert!(store.get(kept).await.is_err());
        assert!(store.close().is_err());
        drop(store);
        let store = FileBackend::open(dir.path(), options).unwrap();
        assert!(store.get(kept).await.unwrap().is_some());
        store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    });
}

/// Fails every write into a journal checkpoint's temporary file while its flag is set.
#[derive(Debug)]
struct RefusedCheckpoint(
    Box<dyn fairq_journal::storage::WriteFile>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
);

impl RefusedCheckpoint {
    fn refused(&self) -> std::io::Result<()> {
        if self.1.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::other("checkpoint writes refused"));
        }
        Ok(())
    }
}

impl fairq_journal::sim::ForwardWrite for RefusedCheckpoint {
    fn inner(&self) -> &dyn fairq_journal::storage::WriteFile {
        self.0.as_ref()
    }
    fn write(&self, buf: &[u8]) -> std::io::Result<usize> {
        self.refused()?;
        self.0.write(buf)
    }
    fn write_vectored(&self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        self.refused()?;
        self.0.write_vectored(bufs)
    }
}

#[test]
fn a_failed_journal_checkpoint_neither_poisons_the_store_nor_fails_a_durable_change() {
    // The writer reads back each frame it puts. A checkpoint of the journal's reader that
    // falls due there and fails (here: every one, as on a disk refusing new files) used to
    // fail that read: the store was poisoned and the change reported as not recorded,
    // though its frame was durable. A checkpoint only bounds what a reopen replays.
    use fairq_journal::sim::{SimDisk, WrapFiles};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let disk = SimDisk::new(6);
    let refuse = Arc::new(AtomicBool::new(false));
    let flag = refuse.clone();
    let storage = WrapFiles::new(disk.clone()).write_files(move |path, f| {
        let name = path.file_name().unwrap().to_string_lossy();
        if name.contains(".cp") && name.ends_with(".tmp") {
            Box::new(RefusedCheckpoint(f, flag.clone()))
        } else {
            f
        }
    });
    let clock = ManualClock::new(START);
    let options = FileOptions::default().clock(clock.clone()).storage(storage);
    runtime().block_on(async {
        // Opened before: the reopened journal's reader has its first checkpoint due at once.
        FileBackend::open(dir.path(), options.clone())
            .unwrap()
            .close()
            .unwrap();
        let store = FileBackend::open(dir.path(), options.clone()).unwrap();
        refuse.store(true, Ordering::SeqCst);
        let mut ids = Vec::new();
        for _ in 0..3 {
            // Each job's claim and completion supersede its earlier records: commits, which
            // make the checkpoint due.
            let id = store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
            let jobs = store.claim("q", 1, LEASE).await.unwrap();
            assert_eq!(jobs[0].claim.id, id);
            store.complete(jobs[0].claim).await.unwrap();
            ids.push(id);
        }
        let kept = store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
        refuse.store(false, Ordering::SeqCst);
        store.close().unwrap();
        let store = FileBackend::open(dir.path(), options).unwrap();
        assert!(store.get(kept).await.unwrap().is_some());
        for id in ids {
            let info = store.get(id).await.unwrap().unwrap();
            assert_eq!(
                info.status(),
                fairq_worker::JobStatus::Succeeded,
                "{info:?}"
            );
        }
        store.close().unwrap();
    });
}
