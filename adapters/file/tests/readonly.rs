//! Looking without writing, a full disk, and who may read the files.
//!
//! * A read-only open lists a store whose folder cannot be written, and changes nothing in
//!   it (names, sizes, contents and modification times compared before and after), a torn
//!   tail included (ignored and reported, not cut off).
//! * A full disk is reported as such, with what was not recorded; the store can still be
//!   inspected read-only, and once space is back nothing acknowledged is missing. On the
//!   simulated disk always; on a real 1 MiB tmpfs too when this process may mount one.
//! * Files are created 0600 and the folder 0700 by default, configurably.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use common::{LEASE, START, runtime};
use fairq_file::{FileBackend, FileError, FileOptions, Role};
use fairq_journal::TailCause;
use fairq_journal::fingerprint::FolderFingerprint;
use fairq_journal::sim::{SimDisk, SimFaults};
use fairq_journal::storage::Storage;
use fairq_worker::{Backend, BackendError, JobId, JobStatus, ListFilter, ManualClock, NewJob};

/// Everything observable about a folder's entries (name, mode, size, content, modification
/// time).
fn observe(dir: &Path) -> FolderFingerprint {
    FolderFingerprint::take(dir).unwrap()
}

fn file_error(e: &BackendError) -> &FileError {
    match e {
        BackendError::Store(source) => source.downcast_ref::<FileError>().expect("a FileError"),
        other => panic!("not a store error: {other:?}"),
    }
}

fn ids<B: Backend>(store: &B) -> Vec<JobId> {
    runtime().block_on(async {
        store
            .list(ListFilter::default().limit(usize::MAX))
            .await
            .unwrap()
            .into_iter()
            .map(|j| j.id)
            .collect()
    })
}

#[test]
fn a_read_only_folder_can_be_listed_and_nothing_in_it_changes() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("store");
    let clock = ManualClock::new(START);
    let options = FileOptions::default().clock(clock.clone());
    let (done, running) = runtime().block_on(async {
        let store = FileBackend::open(&dir, options.clone()).unwrap();
        let mut ids = Vec::new();
        for i in 0..5u8 {
            let job = NewJob::new("q", format!("k{i}"), vec![i; 10]);
            ids.push(store.enqueue(job).await.unwrap());
        }
        let jobs = store.claim("q", 2, LEASE).await.unwrap();
        store.complete(jobs[0].claim).await.unwrap();
        // One more change, so the claim of the second job is durable too.
        store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
        store.close().unwrap();
        (jobs[0].claim.id, jobs[1].claim.id)
    });
    // A torn tail, as a crash leaves it: a read-only open must not cut it off.
    let last = dir.join(common::segments(&dir).last().unwrap());
    let mut bytes = std::fs::read(&last).unwrap();
    bytes.extend_from_slice(&[0xAB; 7]);
    std::fs::write(&last, &bytes).unwrap();

    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o500)).unwrap();
    let before = observe(&dir);
    let view = FileBackend::open_read_only(&dir, options.clone()).unwrap();
    assert_eq!((view.role(), view.is_read_only()), (Role::Snapshot, true));
    assert_eq!(ids(&view).len(), 6);
    runtime().block_on(async {
        let status = |info: Option<fairq_worker::JobInfo>| info.unwrap().status();
        assert_eq!(status(view.get(done).await.unwrap()), JobStatus::Succeeded);
        // Shown as recorded: the next owner rescues it.
        assert_eq!(status(view.get(running).await.unwrap()), JobStatus::Running);
        assert_eq!(view.stats().await.unwrap()[0].counts.succeeded, 1);
        let err = view
            .enqueue(NewJob::new("q", "k", vec![]))
            .await
            .unwrap_err();
        assert!(
            matches!(file_error(&err), FileError::ReadOnly { .. }),
            "{err}"
        );
        assert!(view.claim("q", 1, LEASE).await.is_err());
        assert!(view.prune(Duration::ZERO.into()).await.is_err());
    });
    let report = view.recovery_report().unwrap().clone();
    assert_eq!(report.tails.len(), 1, "{report:?}");
    assert_eq!(report.tails[0].dropped_bytes, 7);
    assert!(!report.tails[0].truncated);
    assert!(view.recovery_warnings()[0].contains("7 bytes at offset"));
    view.close().unwrap();
    drop(view);
    assert_eq!(observe(&dir), before, "a read-only open changed the folder");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();

    // A writable open cuts the tail off and says so; the jobs are all there.
    let store = FileBackend::open(&dir, options).unwrap();
    let report = store.recovery_report().unwrap();
    assert!(report.tails[0].truncated);
    assert_eq!(report.tails[0].cause, TailCause::Incomplete);
    assert_eq!(ids(&store).len(), 6);
}

#[test]
fn a_read_only_open_of_a_held_folder_is_a_client_that_refuses_changes() {
    let dir = tempfile::tempdir().unwrap();
    let owner = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
    runtime().block_on(async {
        owner.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
        let view = FileBackend::open_read_only(dir.path(), FileOptions::default()).unwrap();
        assert_eq!((view.role(), view.is_read_only()), (Role::Client, true));
        assert!(view.recovery_report().is_none());
        assert_eq!(view.list(ListFilter::default()).await.unwrap().len(), 1);
        let err = view
            .enqueue(NewJob::new("q", "k", vec![]))
            .await
            .unwrap_err();
        assert!(
            matches!(file_error(&err), FileError::ReadOnly { .. }),
            "{err}"
        );
        assert_eq!(owner.counts("q").scheduled, 1);
    });
    // A folder that does not exist is not created.
    let missing = dir.path().join("missing");
    assert!(FileBackend::open_read_only(&missing, FileOptions::default()).is_err());
    assert!(!missing.exists());
}

/// Bytes of file data under `dir` on the simulated disk.
fn sim_used(disk: &SimDisk, dir: &Path) -> u64 {
    disk.list_dir(dir)
        .unwrap()
        .iter()
        .map(|e| disk.read_all(&dir.join(&e.name)).unwrap().len() as u64)
        .sum()
}

#[test]
fn a_full_disk_says_so_and_what_was_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimDisk::new(9);
    let clock = ManualClock::new(START);
    let options = FileOptions::default()
        .clock(clock.clone())
        .storage(disk.clone());
    let kept = runtime().block_on(async {
        let store = FileBackend::open(dir.path(), options.clone()).unwrap();
        let mut kept = Vec::new();
        for _ in 0..3 {
            let job = NewJob::new("q", "k", vec![7; 100]);
            kept.push(store.enqueue(job).await.unwrap());
        }
        disk.set_faults(SimFaults {
            capacity: Some(sim_used(&disk, dir.path()) + 50),
            ..SimFaults::default()
        });
        let err = store
            .enqueue(NewJob::new("q", "k", vec![7; 1_000]))
            .await
            .unwrap_err();
        let file_err = file_error(&err);
        assert!(
            matches!(file_err, FileError::DiskFull { .. }),
            "{file_err:?}"
        );
        assert!(file_err.is_disk_full());
        let text = err.to_string();
        assert!(text.contains("is full"), "{text}");
        assert!(
            text.contains("the change to job 4 was not recorded"),
            "{text}"
        );
        // Nothing later is taken; the reason still says the disk is full.
        let later = store
            .enqueue(NewJob::new("q", "k", vec![]))
            .await
            .unwrap_err();
        assert!(later.to_string().contains("the disk is full"), "{later}");
        drop(store);
        kept
    });
    // A writable open must write (a new segment) and cannot: it says the disk is full and
    // that nothing changed.
    disk.set_faults(SimFaults {
        capacity: Some(sim_used(&disk, dir.path())),
        ..SimFaults::default()
    });
    let err = FileBackend::open(dir.path(), options.clone()).unwrap_err();
    assert!(matches!(err, FileError::DiskFull { .. }), "{err:?}");
    assert!(err.to_string().contains("nothing was recorded"), "{err}");
    // Looking still works, and shows every acknowledged job.
    let view = FileBackend::open_read_only(dir.path(), options.clone()).unwrap();
    assert_eq!(ids(&view), kept);
    drop(view);
    // With space again, the store opens with every acknowledged job and without the one
    // that was refused.
    disk.set_faults(SimFaults::default());
    let store = FileBackend::open(dir.path(), options).unwrap();
    assert_eq!(ids(&store), kept);
}

/// A 1 MiB tmpfs mounted for the test, unmounted when dropped; `None` when this process
/// may not mount (not root, or no mount namespace rights).
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount() -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        status.success().then_some(Tmpfs(dir))
    }

    fn remount(&self, options: &str) {
        let status = std::process::Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(self.0.path())
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn grow(&self) {
        self.remount("size=4m");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

/// Fills the file system holding `dir` to the last byte.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    for chunk in [4096, 512, 1] {
        let buf = vec![0u8; chunk];
        while f.write_all(&buf).is_ok() {}
    }
}

#[test]
fn a_full_tmpfs_says_so_and_can_still_be_inspected() {
    let Some(tmpfs) = Tmpfs::mount() else {
        eprintln!("skipped: cannot mount a tmpfs here (the simulated disk test covers it)");
        return;
    };
    let dir = tmpfs.0.path().join("store");
    let options = FileOptions::default().segment_size(64 << 10);
    let (kept, refused) = runtime().block_on(async {
        let store = FileBackend::open(&dir, options.clone()).unwrap();
        let mut kept = Vec::new();
        loop {
            match store.enqueue(NewJob::new("q", "k", vec![1; 8_000])).await {
                Ok(id) => kept.push(id),
                Err(e) => break (kept, e),
            }
        }
    });
    assert!(
        matches!(file_error(&refused), FileError::DiskFull { .. }),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("was not recorded"),
        "{refused}"
    );
    assert!(kept.len() > 10, "{} jobs fit in 1 MiB", kept.len());
    fill(tmpfs.0.path());
    // Opening needs room only to start a new segment. With an empty last segment to reuse
    // (created just before the disk filled: where the disk fills decides) it opens, and its
    // first enqueue is refused the same way.
    match FileBackend::open(&dir, options.clone()) {
        Err(err) => {
            assert!(err.is_disk_full(), "{err:?}");
            assert!(err.to_string().contains("is full"), "{err}");
        }
        Ok(store) => {
            let refused = runtime()
                .block_on(store.enqueue(NewJob::new("q", "k", vec![1; 8_000])))
                .unwrap_err();
            assert!(
                matches!(file_error(&refused), FileError::DiskFull { .. }),
                "{refused}"
            );
            drop(store);
        }
    }
    let before = observe(&dir);
    let view = FileBackend::open_read_only(&dir, options.clone()).unwrap();
    assert_eq!(ids(&view), kept);
    drop(view);
    assert_eq!(observe(&dir), before);
    // Space comes back (the file system grows): nothing acknowledged is missing.
    tmpfs.grow();
    let store = FileBackend::open(&dir, options).unwrap();
    assert_eq!(ids(&store), kept);
    store.close().unwrap();
}

/// On a read-only mount (which binds root too, unlike file modes) a store can be listed.
#[test]
fn a_store_on_a_read_only_mount_can_be_listed() {
    let Some(tmpfs) = Tmpfs::mount() else {
        eprintln!("skipped: cannot mount a tmpfs here (the chmod test covers it)");
        return;
    };
    let dir = tmpfs.0.path().join("store");
    let ids_written = runtime().block_on(async {
        let store = FileBackend::open(&dir, FileOptions::default()).unwrap();
        let mut ids = Vec::new();
        for i in 0..4u8 {
            ids.push(store.enqueue(NewJob::new("q", "k", vec![i])).await.unwrap());
        }
        store.close().unwrap();
        ids
    });
    tmpfs.remount("ro");
    let before = observe(&dir);
    let view = FileBackend::open_read_only(&dir, FileOptions::default()).unwrap();
    assert_eq!(ids(&view), ids_written);
    drop(view);
    assert_eq!(observe(&dir), before);
    // A writable open cannot work there, and says why.
    let err = FileBackend::open(&dir, FileOptions::default()).unwrap_err();
    assert!(err.to_string().contains("Read-only file system"), "{err}");
    tmpfs.remount("rw");
}

fn umask() -> u32 {
    use std::os::unix::fs::OpenOptionsExt;
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
fn store_files_are_private_by_default_and_modes_are_configurable() {
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o777;
    let parent = tempfile::tempdir().unwrap();
    for (name, file_mode, dir_mode) in
        [("private", None, None), ("group", Some(0o640), Some(0o750))]
    {
        let dir = parent.path().join(name).join("store");
        let mut options = FileOptions::default();
        if let (Some(f), Some(d)) = (file_mode, dir_mode) {
            options = options.file_mode(f).dir_mode(d);
        }
        let store = FileBackend::open(&dir, options).unwrap();
        runtime().block_on(async {
            store
                .enqueue(NewJob::new("q", "k", b"secret".to_vec()))
                .await
                .unwrap();
        });
        let (want_file, want_dir) = (
            file_mode.unwrap_or(0o600) & !umask(),
            dir_mode.unwrap_or(0o700) & !umask(),
        );
        // While the store is open: the socket too. A temporary file that a background
        // write renames away between the listing and the look is skipped.
        let mut seen = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            match std::fs::symlink_metadata(&p) {
                Ok(m) => assert_eq!(m.mode() & 0o777, want_file, "{}", p.display()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => panic!("{}: {e}", p.display()),
            }
            seen += 1;
        }
        assert!(seen >= 6, "{seen} files");
        assert!(dir.join("fairq.sock").exists());
        store.close().unwrap();
        assert_eq!(mode(&dir), want_dir, "{}", dir.display());
        // Folders created on the way are private too.
        assert_eq!(mode(dir.parent().unwrap()), want_dir);
    }
}
