//! The in-memory store's one-pass answers to [`Inspect`] agree with the provided versions,
//! which read through `list`, on random histories.

use std::time::Duration;

use fairq_core::job::Millis;
use fairq_core::retry::RetryPolicy;
use fairq_worker::{
    Backend, BackendError, Claim, Each, Failure, Finished, Inspect, Job, JobId, JobInfo,
    ListFilter, ManualClock, MemoryBackend, NewJob, Purge, QueueStats, ReviveTarget, Settled,
};
use proptest::prelude::*;

/// The memory store seen only through [`Backend`], so [`Inspect`] falls back to `list`.
struct Listed(MemoryBackend);

impl Backend for Listed {
    async fn enqueue(&self, job: NewJob) -> Result<JobId, BackendError> {
        self.0.enqueue(job).await
    }
    async fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        self.0.enqueue_many(jobs).await
    }
    async fn claim(&self, q: &str, max: usize, lease: Duration) -> Result<Vec<Job>, BackendError> {
        self.0.claim(q, max, lease).await
    }
    async fn settle(&self, batch: Vec<Finished>) -> Result<Each<Settled>, BackendError> {
        self.0.settle(batch).await
    }
    async fn heartbeat(&self, claim: Claim, lease: Duration) -> Result<Millis, BackendError> {
        self.0.heartbeat(claim, lease).await
    }
    async fn rescue(&self, q: &str) -> Result<u64, BackendError> {
        self.0.rescue(q).await
    }
    async fn stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        self.0.stats().await
    }
    async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        self.0.list(filter).await
    }
    async fn get(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        self.0.get(id).await
    }
    async fn revive(&self, target: ReviveTarget) -> Result<u64, BackendError> {
        self.0.revive(target).await
    }
    async fn purge(&self, purge: Purge) -> Result<u64, BackendError> {
        self.0.purge(purge).await
    }
    async fn prune(&self, retention: fairq_worker::Retention) -> Result<u64, BackendError> {
        self.0.prune(retention).await
    }
}

impl Inspect for Listed {}

#[derive(Debug, Clone)]
enum Op {
    Enqueue {
        key: Option<u8>,
        delay_ms: u64,
        after_last: bool,
    },
    Claim(usize),
    Complete,
    Fail {
        permanent: bool,
    },
    Advance(u64),
    Rescue,
    Revive,
    Cancel(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (proptest::option::of(0u8..4), prop_oneof![Just(0u64), 1u64..3_000], any::<bool>())
            .prop_map(|(key, delay_ms, after_last)| Op::Enqueue { key, delay_ms, after_last: after_last && delay_ms == 0 }),
        2 => (1usize..4).prop_map(Op::Claim),
        2 => Just(Op::Complete),
        1 => any::<bool>().prop_map(|permanent| Op::Fail { permanent }),
        2 => (1u64..2_000).prop_map(Op::Advance),
        1 => Just(Op::Rescue),
        1 => Just(Op::Revive),
        1 => (0usize..20).prop_map(Op::Cancel),
    ]
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let clock = ManualClock::new(1_000_000);
    let native = MemoryBackend::with_clock(clock.clone());
    let listed = Listed(native.clone());
    let mut running: Vec<Job> = Vec::new();
    let mut ids: Vec<JobId> = Vec::new();
    for op in ops {
        match op {
            Op::Enqueue {
                key,
                delay_ms,
                after_last,
            } => {
                let mut job = NewJob::new("q", "k", vec![])
                    .retry(RetryPolicy::new(1).with_delays([Duration::from_millis(500)]));
                if let Some(k) = key {
                    job = job.key(format!("tenant-{k}"));
                }
                if delay_ms > 0 {
                    job = job.delay(Duration::from_millis(delay_ms));
                }
                if let (true, Some(last)) = (after_last, ids.last()) {
                    job = job.after(*last);
                }
                if let Ok(id) = native.enqueue(job).await {
                    ids.push(id);
                }
            }
            Op::Claim(n) => {
                running.extend(native.claim("q", n, Duration::from_secs(1)).await.unwrap())
            }
            Op::Complete => {
                if let Some(job) = running.pop() {
                    let _ = native.complete(job.claim).await;
                }
            }
            Op::Fail { permanent } => {
                if let Some(job) = running.pop() {
                    let failure = if permanent {
                        Failure::permanent("no")
                    } else {
                        Failure::retryable("again")
                    };
                    let _ = native.fail(&job, failure).await;
                }
            }
            Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
            Op::Rescue => {
                native.rescue("q").await.unwrap();
            }
            Op::Revive => {
                native
                    .revive(ReviveTarget::AllDead { queue: None })
                    .await
                    .unwrap();
            }
            Op::Cancel(i) => {
                if let Some(id) = ids.get(i) {
                    let _ = native.cancel(*id).await;
                }
            }
        }
        let now = native.now();
        let a = native.backlog_by_key("q", now, usize::MAX).await.unwrap();
        let b = listed.backlog_by_key("q", now, usize::MAX).await.unwrap();
        prop_assert_eq!(&a, &b);
        prop_assert!(a.complete);
        // Every unfinished job is counted once.
        let counts = native.counts("q");
        let counted: u64 = a.items.iter().map(|k| k.waiting() + k.running).sum();
        prop_assert_eq!(counted, counts.pending());
        // Recent attempts agree too (both in no particular order).
        let mut a = native.started_since("q", 0, usize::MAX).await.unwrap();
        let mut b = listed.started_since("q", 0, usize::MAX).await.unwrap();
        a.items.sort_by_key(|s| s.id);
        b.items.sort_by_key(|s| s.id);
        prop_assert_eq!(&a, &b);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn native_and_listed_backlogs_and_attempts_agree(ops in proptest::collection::vec(op(), 1..60)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(ops))?;
    }
}

/// A job waiting for a retry is no attempt in progress: the provided `started_since` leaves it
/// out as the memory store does, rather than listing it unfinished, due at its next retry.
#[tokio::test]
async fn started_since_leaves_out_a_job_waiting_for_a_retry_natively_and_listed() {
    let clock = ManualClock::new(10_000);
    let native = MemoryBackend::with_clock(clock.clone());
    let policy = RetryPolicy::new(3).with_delays([Duration::from_secs(60)]);
    native
        .enqueue(NewJob::new("q", "k", vec![]).retry(policy))
        .await
        .unwrap();
    clock.advance(Duration::from_millis(5));
    let job = native
        .claim("q", 1, Duration::from_secs(30))
        .await
        .unwrap()
        .remove(0);
    clock.advance(Duration::from_millis(5));
    native.fail(&job, Failure::retryable("x")).await.unwrap();
    let listed = Listed(native.clone());
    let from_native = native.started_since("q", 0, usize::MAX).await.unwrap();
    let from_list = listed.started_since("q", 0, usize::MAX).await.unwrap();
    assert!(from_native.items.is_empty(), "{:?}", from_native.items);
    assert_eq!(from_native, from_list);
}

#[tokio::test]
async fn a_scan_stops_at_its_budget_and_says_so() {
    let store = Listed(MemoryBackend::new());
    let jobs = (0..30)
        .map(|i| NewJob::new("q", "k", vec![]).key(format!("t{}", i % 3)))
        .collect();
    store.enqueue_many(jobs).await.unwrap();
    let all = store
        .backlog_by_key("q", store.0.now(), 1_000)
        .await
        .unwrap();
    assert!(all.complete);
    assert_eq!(all.items.iter().map(|k| k.due).sum::<u64>(), 30);
    let part = store.backlog_by_key("q", store.0.now(), 10).await.unwrap();
    assert!(!part.complete);
    assert_eq!(part.items.iter().map(|k| k.due).sum::<u64>(), 10);
}

#[tokio::test]
async fn the_memory_store_reports_waits_and_run_times_of_recent_attempts() {
    let clock = ManualClock::new(10_000);
    let store = MemoryBackend::with_clock(clock.clone());
    store
        .enqueue(NewJob::new("q", "k", vec![]).key("a"))
        .await
        .unwrap();
    store
        .enqueue(NewJob::new("q", "k", vec![]).key("b"))
        .await
        .unwrap();
    clock.advance(Duration::from_millis(40));
    let jobs = store.claim("q", 2, Duration::from_secs(30)).await.unwrap();
    clock.advance(Duration::from_millis(5));
    store.complete(jobs[0].claim).await.unwrap();
    let started = store
        .started_since("q", 10_000, usize::MAX)
        .await
        .unwrap()
        .items;
    assert_eq!(started.len(), 2);
    assert!(started.iter().all(|s| s.wait_ms() == 40));
    let done: Vec<_> = started.iter().filter(|s| s.succeeded).collect();
    assert_eq!((done.len(), done[0].run_ms()), (1, Some(5)));
    assert!(
        store
            .started_since("q", 10_041, usize::MAX)
            .await
            .unwrap()
            .items
            .is_empty()
    );
}
