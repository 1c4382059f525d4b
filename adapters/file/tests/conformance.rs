//! The backend conformance suite on the file store, each check in its own temporary folder.

use fairq_file::{FileBackend, FileOptions};
use fairq_worker::ManualClock;
use fairq_worker::conformance::Harness;

struct FileHarness;

impl Harness for FileHarness {
    type Backend = FileBackend;

    async fn create(&self, clock: ManualClock) -> FileBackend {
        // The folder lives as long as the store's path is used; `cleanup` removes it.
        let dir = tempfile::tempdir().expect("temporary folder").keep();
        FileBackend::open(&dir, FileOptions::default().clock(clock)).expect("open a file store")
    }

    async fn cleanup(&self, backend: FileBackend) {
        let dir = backend.path().to_path_buf();
        backend.close().expect("close the file store");
        drop(backend);
        std::fs::remove_dir_all(&dir).expect("remove the store folder");
    }
}

fairq_worker::conformance_tests!(FileHarness);

/// Pausing a queue: the owner journals the flag; claims take nothing while it is set.
#[test]
fn pause_holds_claims_until_resumed() {
    fairq_worker::conformance::run(FileHarness, |store, clock| {
        Box::pin(fairq_worker::conformance::pause::pause_holds_claims_until_resumed(store, clock))
    });
}

/// Cancelling one job: the owner deletes it and journals the deletion.
#[test]
fn cancel_deletes_waiting_jobs_only() {
    fairq_worker::conformance::run(FileHarness, |store, clock| {
        Box::pin(fairq_worker::conformance::cancel::cancel_deletes_waiting_jobs_only(store, clock))
    });
}
