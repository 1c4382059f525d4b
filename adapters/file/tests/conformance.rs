//! The backend conformance suite on the file store, each check in its own temporary folder.

use fairq_file::{FileBackend, FileOptions};
use fairq_worker::ManualClock;
use fairq_worker::conformance::Harness;

/// File stores that keep succeeded jobs (the default) or not.
struct FileHarness {
    keep_succeeded: bool,
}

const KEEPING: FileHarness = FileHarness {
    keep_succeeded: true,
};

impl Harness for FileHarness {
    type Backend = FileBackend;

    async fn create(&self, clock: ManualClock) -> FileBackend {
        // The folder lives as long as the store's path is used; `cleanup` removes it.
        let dir = tempfile::tempdir().expect("temporary folder").keep();
        let options = FileOptions::default()
            .clock(clock)
            .keep_succeeded(self.keep_succeeded);
        FileBackend::open(&dir, options).expect("open a file store")
    }

    async fn cleanup(&self, backend: FileBackend) {
        let dir = backend.path().to_path_buf();
        backend.close().expect("close the file store");
        drop(backend);
        std::fs::remove_dir_all(&dir).expect("remove the store folder");
    }
}

fairq_worker::conformance_tests!(KEEPING);

/// Pausing a queue: the owner journals the flag; claims take nothing while it is set.
#[test]
fn pause_holds_claims_until_resumed() {
    fairq_worker::conformance::run(KEEPING, |store, clock| {
        Box::pin(fairq_worker::conformance::pause::pause_holds_claims_until_resumed(store, clock))
    });
}

/// Cancelling one job: the owner deletes it and journals the deletion.
#[test]
fn cancel_deletes_waiting_jobs_only() {
    fairq_worker::conformance::run(KEEPING, |store, clock| {
        Box::pin(fairq_worker::conformance::cancel::cancel_deletes_waiting_jobs_only(store, clock))
    });
}

/// A store that deletes succeeded jobs: deleted at once, still counted.
#[test]
fn succeeded_jobs_are_deleted_and_still_counted() {
    let not_keeping = FileHarness {
        keep_succeeded: false,
    };
    fairq_worker::conformance::run(not_keeping, |store, clock| {
        Box::pin(
            fairq_worker::conformance::keep::succeeded_jobs_are_deleted_and_still_counted(
                store, clock,
            ),
        )
    });
}

/// A success deleted when recorded is journaled as a deletion: a reopened store (keeping
/// succeeded jobs this time) does not find it, and still counts it.
#[tokio::test]
async fn a_deleted_success_stays_deleted_after_a_reopen() {
    use fairq_worker::{Backend, NewJob};
    let dir = tempfile::tempdir().expect("temporary folder");
    let open = |keep: bool| {
        FileBackend::open(dir.path(), FileOptions::default().keep_succeeded(keep)).expect("open")
    };
    let store = open(false);
    let gone = store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    let lease = std::time::Duration::from_secs(30);
    let job = store.claim("q", 1, lease).await.unwrap().remove(0);
    store.complete(job.claim).await.unwrap();
    store.close().expect("close");
    drop(store);

    let store = open(true);
    assert!(store.get(gone).await.unwrap().is_none());
    let stats = store.stats().await.unwrap();
    let q = stats.iter().find(|q| q.queue == "q").expect("queue q");
    assert_eq!((q.retries.ok, q.counts.succeeded), (1, 0));
    // This store keeps its successes.
    let kept = store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    let job = store.claim("q", 1, lease).await.unwrap().remove(0);
    store.complete(job.claim).await.unwrap();
    assert!(store.get(kept).await.unwrap().is_some());
    store.close().expect("close");
}

/// A success whose only dependent was purged is deleted like any other (on a store
/// that deletes successes).
#[test]
fn a_success_whose_dependents_were_purged_is_deleted() {
    fairq_worker::conformance::run(
        FileHarness {
            keep_succeeded: false,
        },
        |store, clock| {
            Box::pin(
                fairq_worker::conformance::keep::a_success_whose_dependents_were_purged_is_deleted(
                    store, clock,
                ),
            )
        },
    );
}

/// A success whose only dependent was cancelled is deleted like any other (on a store
/// that deletes successes).
#[test]
fn a_success_whose_dependents_were_cancelled_is_deleted() {
    fairq_worker::conformance::run(
        FileHarness {
            keep_succeeded: false,
        },
        |store, clock| {
            Box::pin(
                fairq_worker::conformance::keep::a_success_whose_dependents_were_cancelled_is_deleted(
                    store, clock,
                ),
            )
        },
    );
}

/// An enqueue answered with the job holding its unique key (`OnConflict::Ignore`) gives the
/// dependency it names no dependent: its success is deleted like any other (outside
/// `conformance_tests!`, which runs the check on a store keeping successes, where a dependent
/// recorded by mistake does not show).
#[test]
fn an_ignored_duplicate_leaves_its_dependency_alone() {
    fairq_worker::conformance::run(
        FileHarness {
            keep_succeeded: false,
        },
        |store, clock| {
            Box::pin(
                fairq_worker::conformance::keep::an_ignored_duplicate_leaves_its_dependency_alone(
                    store, clock,
                ),
            )
        },
    );
}
