//! The shared differential test (`fairq_worker::conformance::differential`) on the file
//! store: random requests, clock moves and reopenings against the reference state machine.
//! After every step the file store must answer like the reference and hold the same jobs and
//! counters; a reopening must change nothing but what the documented recovery does (leases
//! of the dead process are rescued, a fresh fair round starts).

use fairq_file::{FileBackend, FileOptions};
use fairq_worker::ManualClock;
use fairq_worker::conformance::Harness;
use fairq_worker::conformance::differential::{self, Capabilities, Differential};

/// Each case in its own temporary folder.
struct FileHarness;

impl Harness for FileHarness {
    type Backend = FileBackend;

    async fn create(&self, clock: ManualClock) -> FileBackend {
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

impl Differential for FileHarness {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            release: true,
            reopen: true,
            hold_retries: true,
        }
    }

    async fn reopen(&self, store: FileBackend, clock: ManualClock) -> FileBackend {
        let dir = store.path().to_path_buf();
        store.close().expect("close the file store");
        drop(store);
        FileBackend::open(&dir, FileOptions::default().clock(clock)).expect("reopen the store")
    }
}

#[test]
fn the_file_store_behaves_like_the_reference_across_reopens() {
    differential::check(FileHarness, 64);
}
