//! The store as a client sees it, through the owner's socket: the backend conformance suite
//! and the shared differential test run on a client handle while an owner handle (here in the
//! same process) holds the folder. Every answer must be the same as the owner's own.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use fairq_file::{FileBackend, FileOptions, Role};
use fairq_worker::ManualClock;
use fairq_worker::conformance::Harness;
use fairq_worker::conformance::differential::{self, Capabilities, Differential};

/// Each case in its own folder, held by an owner kept here until cleanup.
#[derive(Default)]
struct ClientHarness {
    owners: Mutex<HashMap<PathBuf, FileBackend>>,
}

impl ClientHarness {
    fn open_pair(&self, dir: &std::path::Path, clock: ManualClock) -> FileBackend {
        let options = FileOptions::default().clock(clock);
        let owner = FileBackend::open(dir, options.clone()).expect("open the owner");
        assert_eq!(owner.role(), Role::Owner);
        let client = FileBackend::open(dir, options).expect("open a client");
        assert_eq!(client.role(), Role::Client);
        self.owners.lock().unwrap().insert(dir.to_path_buf(), owner);
        client
    }

    fn close_pair(&self, client: FileBackend) -> PathBuf {
        let dir = client.path().to_path_buf();
        client.close().expect("close the client");
        let owner = self.owners.lock().unwrap().remove(&dir).expect("its owner");
        owner.close().expect("close the owner");
        dir
    }
}

impl Harness for ClientHarness {
    type Backend = FileBackend;

    async fn create(&self, clock: ManualClock) -> FileBackend {
        let dir = tempfile::tempdir().expect("temporary folder").keep();
        self.open_pair(&dir, clock)
    }

    async fn cleanup(&self, backend: FileBackend) {
        let dir = self.close_pair(backend);
        std::fs::remove_dir_all(&dir).expect("remove the store folder");
    }
}

impl Differential for ClientHarness {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            release: true,
            reopen: true,
            hold_retries: true,
        }
    }

    async fn reopen(&self, store: FileBackend, clock: ManualClock) -> FileBackend {
        let dir = self.close_pair(store);
        self.open_pair(&dir, clock)
    }
}

fairq_worker::conformance_tests!(ClientHarness::default());

#[test]
fn a_client_behaves_like_the_reference_across_owner_restarts() {
    differential::check(ClientHarness::default(), 32);
}

/// Pausing through the owner.
#[test]
fn pause_holds_claims_until_resumed() {
    fairq_worker::conformance::run(ClientHarness::default(), |store, clock| {
        Box::pin(fairq_worker::conformance::pause::pause_holds_claims_until_resumed(store, clock))
    });
}

/// Cancelling through the owner: refusals keep their kind on the way back.
#[test]
fn cancel_deletes_waiting_jobs_only() {
    fairq_worker::conformance::run(ClientHarness::default(), |store, clock| {
        Box::pin(fairq_worker::conformance::cancel::cancel_deletes_waiting_jobs_only(store, clock))
    });
}

/// A client's wait for jobs with no end (`Duration::MAX`, which a worker's poll interval
/// may be) returns when its owner goes away, after a short pause, for the caller to call
/// again (and reach the next owner); it used to sleep for the rest of the timeout, so the
/// caller never claimed again.
#[test]
fn an_endless_wait_returns_when_the_owner_goes_away() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(1_000);
        let harness = ClientHarness::default();
        let client = harness.open_pair(dir.path(), clock);
        let waiting = {
            let client = client.clone();
            tokio::spawn(async move {
                fairq_worker::Backend::wait_for_jobs(&client, "q", std::time::Duration::MAX).await
            })
        };
        // Until the owner closes, the wait is held there: nothing is due.
        tokio::task::yield_now().await;
        let owner = harness.owners.lock().unwrap().remove(dir.path()).unwrap();
        owner.close().unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(30), waiting)
            .await
            .expect("the wait returns once its owner is gone")
            .unwrap();
        client.close().unwrap();
    });
}
