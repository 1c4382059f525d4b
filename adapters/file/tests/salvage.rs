//! Salvage (`FileBackend::salvage`): a store that refuses to open because of damage is
//! rebuilt into a new folder from what is intact. An intact store comes back exactly (jobs,
//! states, payloads, counters, pause flags); a damaged one comes back with every job whose
//! records lay outside the damage, each with its own payload, and the report says what was
//! lost; the damaged folder is never changed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::{LEASE, START, copy_folder, runtime, segments, small_segments};
use fairq_file::{FileBackend, FileError};
use fairq_journal::fingerprint::FolderFingerprint;
use fairq_worker::{
    Backend, Failure, Inspect, JobId, JobInfo, ListFilter, ManualClock, NewJob, QueueStats,
};

const JOBS: u8 = 60;
const PAYLOAD: usize = 3_000;

/// A closed store with jobs in two queues, some completed, one failed and waiting for its
/// retry, queue "b" paused; its journal spans several segments. Returns each job's payload.
fn build(dir: &Path) -> BTreeMap<JobId, Vec<u8>> {
    let clock = ManualClock::new(START);
    let mut jobs = BTreeMap::new();
    runtime().block_on(async {
        let store = FileBackend::open(dir, small_segments(&clock)).unwrap();
        for i in 0..JOBS {
            let queue = if i % 3 == 0 { "b" } else { "a" };
            let payload = vec![i; PAYLOAD];
            let id = store
                .enqueue(NewJob::new(queue, format!("k{}", i % 5), payload.clone()))
                .await
                .unwrap();
            jobs.insert(id, payload);
        }
        let claimed = store.claim("a", 10, LEASE).await.unwrap();
        for job in &claimed[1..] {
            store.complete(job.claim).await.unwrap();
        }
        store
            .fail(&claimed[0], Failure::retryable("smtp timeout"))
            .await
            .unwrap();
        store.set_paused("b", true).await.unwrap();
        store.close().unwrap();
    });
    assert!(segments(dir).len() >= 3, "{:?}", segments(dir));
    jobs
}

/// Everything a reader of the store can see: jobs, counters, paused queues.
fn look(dir: &Path) -> (Vec<JobInfo>, Vec<QueueStats>, Vec<String>) {
    let clock = ManualClock::new(START);
    let store = FileBackend::open_read_only(dir, small_segments(&clock)).unwrap();
    let seen = runtime().block_on(async {
        (
            store
                .list(ListFilter::default().limit(usize::MAX))
                .await
                .unwrap(),
            store.stats().await.unwrap(),
            store.paused().await.unwrap(),
        )
    });
    store.close().unwrap();
    seen
}

fn payloads(dir: &Path) -> BTreeMap<JobId, Vec<u8>> {
    common::payloads(dir, &ManualClock::new(START))
}

#[test]
fn an_intact_store_comes_back_exactly() {
    let old = tempfile::tempdir().unwrap();
    build(old.path());
    let before = look(old.path());
    assert_eq!(before.2, vec!["b".to_string()]);
    let new = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START);
    let report = FileBackend::salvage(old.path(), new.path(), small_segments(&clock)).unwrap();
    assert!(!report.lost_anything(), "{report:?}");
    assert_eq!(report.jobs, u64::from(JOBS));
    assert_eq!(report.queues, 2);
    assert_eq!(look(new.path()), before);
    // The rebuilt store is a store like any other: it takes new jobs, with new ids.
    runtime().block_on(async {
        let store = FileBackend::open(new.path(), small_segments(&clock)).unwrap();
        let id = store.enqueue(NewJob::new("a", "k", vec![1])).await.unwrap();
        assert!(before.0.iter().all(|j| j.id < id), "id {id} reused");
        store.close().unwrap();
    });
}

/// Which jobs have their payload in each segment file (a payload is a run of one byte
/// value, unique to its job, and a journal record never spans two segments).
fn jobs_by_segment(
    dir: &Path,
    jobs: &BTreeMap<JobId, Vec<u8>>,
) -> BTreeMap<String, BTreeSet<JobId>> {
    segments(dir)
        .into_iter()
        .map(|seg| {
            let bytes = std::fs::read(dir.join(&seg)).unwrap();
            let inside = jobs
                .iter()
                .filter(|(_, p)| bytes.windows(PAYLOAD).any(|w| w == p.as_slice()))
                .map(|(id, _)| *id)
                .collect();
            (seg, inside)
        })
        .collect()
}

#[test]
fn a_damaged_store_comes_back_without_only_what_lay_in_the_damage() {
    let template = tempfile::tempdir().unwrap();
    let jobs = build(template.path());
    let by_segment = jobs_by_segment(template.path(), &jobs);
    let segs = segments(template.path());
    let middle = segs[segs.len() / 2].clone();
    for damage in ["flip", "zero", "delete"] {
        let dir = tempfile::tempdir().unwrap();
        copy_folder(template.path(), dir.path());
        let file = dir.path().join(&middle);
        let mut bytes = std::fs::read(&file).unwrap();
        match damage {
            "flip" => {
                let at = bytes.len() / 2;
                bytes[at] ^= 0x10;
                std::fs::write(&file, bytes).unwrap();
            }
            "zero" => std::fs::write(&file, vec![0u8; bytes.len()]).unwrap(),
            _ => std::fs::remove_file(&file).unwrap(),
        }
        let clock = ManualClock::new(START);
        let refused = FileBackend::open(dir.path(), small_segments(&clock)).unwrap_err();
        assert!(refused.is_corrupt(), "{damage}: {refused}");
        let untouched = FolderFingerprint::take(dir.path()).unwrap();

        let new = tempfile::tempdir().unwrap();
        let report = FileBackend::salvage(dir.path(), new.path(), small_segments(&clock)).unwrap();
        assert_eq!(
            FolderFingerprint::take(dir.path()).unwrap(),
            untouched,
            "{damage}: salvage changed the damaged folder"
        );
        assert!(report.lost_anything(), "{damage}: {report:?}");
        assert!(
            report
                .damage
                .iter()
                .any(|d| d.path.ends_with(&middle) && !d.torn_tail),
            "{damage}: the damaged file is not named: {report:?}"
        );
        let found = payloads(new.path());
        // Nothing came back different, or from nowhere.
        for (id, payload) in &found {
            assert_eq!(jobs.get(id), Some(payload), "{damage}: job {id}");
        }
        // Every job whose payload lay outside the damaged file came back.
        let missing: BTreeSet<JobId> = jobs
            .keys()
            .filter(|id| !found.contains_key(id))
            .copied()
            .collect();
        assert!(
            missing.is_subset(&by_segment[&middle]),
            "{damage}: lost {missing:?}, only {:?} lay in the damage",
            by_segment[&middle]
        );
        if damage != "flip" {
            // The whole file went: every job whose payload was only there went with it.
            assert_eq!(missing, by_segment[&middle], "{damage}");
        } else {
            assert!(
                !missing.is_empty() && missing.len() <= 2,
                "{damage}: {missing:?}"
            );
        }
        // A job whose full record was lost but whose later progress survived is listed.
        for id in &report.lost_jobs {
            assert!(missing.contains(id), "{damage}: {id} listed lost but found");
        }
        // The rebuilt store opens for writing like any other.
        FileBackend::open(new.path(), small_segments(&clock))
            .unwrap()
            .close()
            .unwrap();
    }
}

#[test]
fn salvage_refuses_an_owned_folder_and_a_target_that_holds_anything() {
    let old = tempfile::tempdir().unwrap();
    build(old.path());
    let clock = ManualClock::new(START);

    let full = tempfile::tempdir().unwrap();
    std::fs::write(full.path().join("notes.txt"), b"mine").unwrap();
    let err = FileBackend::salvage(old.path(), full.path(), small_segments(&clock)).unwrap_err();
    assert!(matches!(err, FileError::NotEmpty { .. }), "{err:?}");
    assert!(err.to_string().contains("notes.txt"), "{err}");
    assert_eq!(
        std::fs::read(full.path().join("notes.txt")).unwrap(),
        b"mine"
    );

    let owner = FileBackend::open(old.path(), small_segments(&clock).share(false)).unwrap();
    let new = tempfile::tempdir().unwrap();
    let err = FileBackend::salvage(old.path(), new.path(), small_segments(&clock)).unwrap_err();
    assert!(matches!(err, FileError::Locked { .. }), "{err:?}");
    owner.close().unwrap();

    // A folder without a store (a wrong path) is refused, not rebuilt empty.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("readme.txt"), b"not a store").unwrap();
    let err =
        FileBackend::salvage(elsewhere.path(), new.path(), small_segments(&clock)).unwrap_err();
    assert!(err.to_string().contains("no journal segment"), "{err}");
    assert_eq!(std::fs::read_dir(new.path()).unwrap().count(), 0);

    let missing = old.path().join("nowhere");
    let err = FileBackend::salvage(&missing, new.path(), small_segments(&clock)).unwrap_err();
    assert!(matches!(err, FileError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("nowhere"), "{err}");

    // A file given as the folder to salvage.
    let file = elsewhere.path().join("readme.txt");
    let err = FileBackend::salvage(&file, new.path(), small_segments(&clock)).unwrap_err();
    assert!(matches!(err, FileError::NotAFolder { .. }), "{err:?}");
    assert_eq!(std::fs::read_dir(new.path()).unwrap().count(), 0);
}
