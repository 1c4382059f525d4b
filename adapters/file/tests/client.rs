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

/// The largest message of the tests below (the real one is 512 MiB): a few jobs' payloads.
const SMALL_MESSAGE: usize = 64 << 10;
/// Payload of each job in the tests below: twenty of them do not fit in one message.
const PAYLOAD: usize = 8 << 10;
const JOBS: usize = 20;

/// An owner and a client of a new folder that send no message over [`SMALL_MESSAGE`], and
/// [`JOBS`] jobs of [`PAYLOAD`] bytes in queue "q", enqueued by the owner.
async fn large_jobs(dir: &std::path::Path) -> (FileBackend, FileBackend) {
    use fairq_worker::{Backend, NewJob};
    let options = FileOptions::default()
        .clock(ManualClock::new(1_000))
        .max_message(SMALL_MESSAGE);
    let owner = FileBackend::open(dir, options.clone()).expect("open the owner");
    let client = FileBackend::open(dir, options).expect("open a client");
    assert_eq!(client.role(), Role::Client);
    let jobs = (0..JOBS)
        .map(|i| NewJob::new("q", "k", vec![i as u8; PAYLOAD]).key(format!("key-{}", i % 3)))
        .collect();
    owner.enqueue_many(jobs).await.expect("enqueue");
    (owner, client)
}

/// A client's claim whose answer would be larger than one message takes fewer jobs, and the
/// client gets every job it took. The owner used to claim them all, make the claim durable
/// and send an answer the client's reader refused: the claim failed (`Unavailable`, with
/// every other call on the connection) while its jobs stayed running under leases nobody
/// held, to be rescued later at the cost of an attempt.
#[test]
fn a_claim_too_large_for_one_message_takes_fewer_jobs() {
    use fairq_worker::{Backend, Finished};
    common_runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (owner, client) = large_jobs(dir.path()).await;
        let mut claimed = Vec::new();
        loop {
            let jobs = client
                .claim("q", JOBS, std::time::Duration::from_secs(60))
                .await
                .expect("the claim is answered");
            assert!(jobs.len() < JOBS, "one answer cannot carry every job");
            // Nothing is claimed that the client did not get.
            assert_eq!(
                owner.counts("q").running,
                (claimed.len() + jobs.len()) as u64
            );
            if jobs.is_empty() {
                break;
            }
            claimed.extend(jobs);
        }
        assert_eq!(claimed.len(), JOBS);
        assert!(
            claimed
                .iter()
                .all(|job| job.payload.len() == PAYLOAD && job.attempt == 1)
        );
        let batch: Vec<Finished> = claimed
            .iter()
            .map(|job| Finished::succeeded(job.claim))
            .collect();
        for settled in client.settle(batch).await.expect("settle") {
            settled.expect("every lease the client got is current");
        }
        assert_eq!(owner.counts("q").succeeded, JOBS as u64);
        client.close().unwrap();
        owner.close().unwrap();
    });
}

/// The same for the claim of a settlement (`settle_and_claim`, what a worker's acker sends).
#[test]
fn a_settlements_claim_too_large_for_one_message_takes_fewer_jobs() {
    use fairq_worker::{Backend, Finished};
    common_runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (owner, client) = large_jobs(dir.path()).await;
        let lease = std::time::Duration::from_secs(60);
        let mut batch = Vec::new();
        let mut done = 0;
        loop {
            let answer = client
                .settle_and_claim(std::mem::take(&mut batch), "q", JOBS, lease)
                .await
                .expect("the settlement is answered");
            done += answer.settled.len();
            assert!(answer.settled.iter().all(|s| s.is_ok()));
            let jobs = answer.claimed.expect("the claim is answered");
            assert!(jobs.len() < JOBS, "one answer cannot carry every job");
            assert_eq!(owner.counts("q").running, jobs.len() as u64);
            if jobs.is_empty() {
                break;
            }
            batch = jobs
                .iter()
                .map(|job| Finished::succeeded(job.claim))
                .collect();
        }
        assert_eq!(done, JOBS);
        assert_eq!(owner.counts("q").succeeded, JOBS as u64);
        client.close().unwrap();
        owner.close().unwrap();
    });
}

/// A client's list too large for one message comes in several answers, which the client
/// joins: it gets the rows the owner's own list gives. The answer used to be refused by the
/// client's reader (`Unavailable`).
#[test]
fn a_list_too_large_for_one_message_is_the_owners_list() {
    use fairq_worker::{Backend, ListFilter};
    common_runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (owner, client) = large_jobs(dir.path()).await;
        for filter in [
            ListFilter::default().limit(usize::MAX),
            ListFilter::default().limit(JOBS - 3),
            ListFilter {
                after: Some(fairq_worker::JobId(4)),
                ..ListFilter::default().queue("q").limit(JOBS)
            },
        ] {
            let theirs = owner.list(filter.clone()).await.expect("the owner's list");
            let ours = client.list(filter).await.expect("the client's list");
            assert!(!theirs.is_empty());
            assert_eq!(ours, theirs);
        }
        client.close().unwrap();
        owner.close().unwrap();
    });
}

fn common_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Polls `job` at the owner until `released` holds of it, for at most
/// [`PATIENCE`](fairq_worker::conformance::PATIENCE), between polls waiting for its queue's
/// wake-up (a release wakes it) or a short pause.
async fn released_at_owner(
    owner: &FileBackend,
    job: fairq_worker::JobId,
    queue: &str,
    released: impl Fn(&fairq_worker::JobInfo) -> bool,
) -> fairq_worker::JobInfo {
    use fairq_worker::Backend;
    let deadline = tokio::time::Instant::now() + fairq_worker::conformance::PATIENCE;
    loop {
        let info = owner.get(job).await.unwrap().expect("the job");
        if released(&info) {
            return info;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the job was never handed back: {:?}, attempts {}",
            info.state,
            info.attempts
        );
        owner
            .wait_for_jobs(queue, std::time::Duration::from_millis(20))
            .await;
    }
}

/// A client's claim, or settlement's claim, whose caller stops waiting (its future is
/// dropped once the call is sent: a `select!`, a timeout) hands its jobs back: due again at
/// once, the attempt not counted. They used to stay running under a lease nobody held, and
/// their rescue counted an attempt that never ran (a job with no retries died unrun).
#[test]
fn an_abandoned_client_claim_hands_its_jobs_back() {
    use fairq_core::job::State;
    use fairq_core::retry::RetryPolicy;
    use fairq_worker::{Backend, NewJob};
    use std::time::Duration;
    common_runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(1_000);
        let options = FileOptions::default().clock(clock.clone());
        let owner = FileBackend::open(dir.path(), options.clone()).unwrap();
        let client = FileBackend::open(dir.path(), options).unwrap();
        assert_eq!(client.role(), Role::Client);
        let lease = Duration::from_secs(30);
        let mut ids = Vec::new();
        for queue in ["q", "r"] {
            let job = NewJob::new(queue, "kind", vec![]).retry(RetryPolicy::new(0));
            ids.push(owner.enqueue(job).await.unwrap());
        }
        // A release makes a job due at its time: 2000, not its first due time of 1000.
        clock.advance(Duration::from_secs(1));
        tokio::select! {
            biased;
            _ = client.claim("q", 1, lease) => panic!("answered at once"),
            _ = async {} => {}
        }
        tokio::select! {
            biased;
            _ = client.settle_and_claim(Vec::new(), "r", 1, lease) => panic!("answered at once"),
            _ = async {} => {}
        }
        for (id, queue) in ids.into_iter().zip(["q", "r"]) {
            let info = released_at_owner(&owner, id, queue, |info| {
                info.run_at == 2_000 && !matches!(info.state, State::Running { .. })
            })
            .await;
            assert_eq!(info.attempts, 0, "the attempt was refunded");
            assert_eq!(owner.counts(queue).running, 0);
        }
        clock.advance(lease + Duration::from_secs(1));
        for queue in ["q", "r"] {
            assert_eq!(owner.rescue(queue).await.unwrap(), 0, "nothing to rescue");
            let jobs = owner.claim(queue, 1, lease).await.unwrap();
            assert_eq!(jobs.len(), 1, "the job runs after all");
            assert_eq!(jobs[0].attempt, 1);
        }
        client.close().unwrap();
        owner.close().unwrap();
    });
}
