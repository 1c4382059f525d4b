//! Differential property test: random operation sequences run on the Redis store and on the
//! in-memory reference store (`MemoryBackend`) with the same manual clock readings, and every
//! answer must match: which jobs each claim returns and in what order (the fair schedule),
//! attempts, lease deadlines, run times, failure outcomes, refusals, rescue counts, and at the
//! end every job's state and the per-queue statistics.

mod common;

use std::time::Duration;

use fairq_core::retry::RetryPolicy;
use fairq_worker::{
    Backend, BackendError, Claim, Failure, Job, JobId, ListFilter, ManualClock, MemoryBackend,
    NewJob, QueueStats,
};
use proptest::prelude::*;

const QUEUE: &str = "model";
const LEASE: Duration = Duration::from_millis(40);

#[derive(Debug, Clone)]
enum Op {
    /// Enqueue one job (key `None` or one of four), possibly delayed, possibly after an
    /// earlier job.
    Enqueue {
        key: Option<u8>,
        delay: u64,
        after: Option<usize>,
    },
    /// Enqueue several keyed jobs at once.
    EnqueueMany {
        keys: Vec<u8>,
    },
    Claim {
        max: usize,
    },
    Complete {
        pick: usize,
    },
    Fail {
        pick: usize,
        permanent: bool,
    },
    Heartbeat {
        pick: usize,
    },
    Advance {
        ms: u64,
    },
    Rescue,
    ReviveAll,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (proptest::option::of(0u8..4), prop_oneof![3 => Just(0u64), 1 => 1u64..60],
              proptest::option::weighted(0.15, 0usize..64))
            .prop_map(|(key, delay, after)| Op::Enqueue { key, delay, after }),
        1 => proptest::collection::vec(0u8..4, 1..6).prop_map(|keys| Op::EnqueueMany { keys }),
        4 => (1usize..4).prop_map(|max| Op::Claim { max }),
        3 => (0usize..8).prop_map(|pick| Op::Complete { pick }),
        2 => (0usize..8, proptest::bool::weighted(0.2))
            .prop_map(|(pick, permanent)| Op::Fail { pick, permanent }),
        1 => (0usize..8).prop_map(|pick| Op::Heartbeat { pick }),
        2 => (0u64..50).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Rescue),
        1 => Just(Op::ReviveAll),
    ]
}

fn policy() -> RetryPolicy {
    RetryPolicy::new(2).with_delays([Duration::from_millis(10), Duration::from_millis(25)])
}

fn new_job(key: Option<u8>) -> NewJob {
    let job = NewJob::new(QUEUE, "work", vec![key.unwrap_or(9)]).retry(policy());
    match key {
        Some(k) => job.key(format!("k{k}")),
        None => job,
    }
}

/// One store under test plus the mapping from its ids to enqueue positions.
struct Side<B> {
    store: B,
    ids: Vec<JobId>,
    held: Vec<Job>,
}

impl<B: Backend> Side<B> {
    fn position(&self, id: JobId) -> usize {
        self.ids.iter().position(|i| *i == id).expect("known job")
    }

    /// A claim as positions and the numbers that must agree.
    fn view(&self, job: &Job) -> (usize, u32, u64, u64, u64) {
        (
            self.position(job.claim.id),
            job.attempt,
            job.lease_deadline,
            job.run_at,
            job.claim.token.0,
        )
    }
}

/// A result reduced to what must agree between stores (ids become positions).
fn shape<T: std::fmt::Debug>(result: &Result<T, BackendError>) -> String {
    match result {
        Ok(value) => format!("ok {value:?}"),
        Err(BackendError::Transition { source, .. }) => format!("refused {source:?}"),
        Err(other) => format!(
            "error {}",
            other.to_string().split(':').next().unwrap_or("")
        ),
    }
}

fn stats_shape(stats: Vec<QueueStats>) -> Vec<String> {
    stats
        .into_iter()
        .map(|s| {
            format!(
                "{} {:?} {:?} {:?} {:?}",
                s.queue, s.counts, s.retries, s.processing_ms, s.oldest_error_at
            )
        })
        .collect()
}

async fn run_ops(ops: Vec<Op>) {
    let clock = ManualClock::new(fairq_worker::conformance::START);
    let redis = common::store(clock.clone()).await;
    let mut r = Side {
        store: redis.clone(),
        ids: Vec::new(),
        held: Vec::new(),
    };
    let mut m = Side {
        store: MemoryBackend::with_clock(clock.clone()),
        ids: Vec::new(),
        held: Vec::new(),
    };
    for (step, op) in ops.into_iter().enumerate() {
        let ctx = format!("step {step}: {op:?}");
        match op {
            Op::Enqueue { key, delay, after } => {
                let mut rj = new_job(key).delay(Duration::from_millis(delay));
                let mut mj = rj.clone();
                if let Some(after) = after.filter(|a| *a < r.ids.len()) {
                    rj = rj.after(r.ids[after]);
                    mj = mj.after(m.ids[after]);
                }
                let (a, b) = (r.store.enqueue(rj).await, m.store.enqueue(mj).await);
                assert_eq!(a.is_ok(), b.is_ok(), "{ctx}: {a:?} vs {b:?}");
                if let (Ok(a), Ok(b)) = (a, b) {
                    r.ids.push(a);
                    m.ids.push(b);
                }
            }
            Op::EnqueueMany { keys } => {
                let jobs: Vec<NewJob> = keys.iter().map(|k| new_job(Some(*k))).collect();
                let a = r.store.enqueue_many(jobs.clone()).await.expect("redis");
                let b = m.store.enqueue_many(jobs).await.expect("memory");
                r.ids.extend(a);
                m.ids.extend(b);
            }
            Op::Claim { max } => {
                let a = r.store.claim(QUEUE, max, LEASE).await.expect("redis claim");
                let b = m
                    .store
                    .claim(QUEUE, max, LEASE)
                    .await
                    .expect("memory claim");
                let va: Vec<_> = a.iter().map(|j| r.view(j)).collect();
                let vb: Vec<_> = b.iter().map(|j| m.view(j)).collect();
                assert_eq!(va, vb, "{ctx}: claims differ");
                for (ja, jb) in a.iter().zip(&b) {
                    assert_eq!(ja.key, jb.key, "{ctx}");
                    assert_eq!(ja.payload, jb.payload, "{ctx}");
                }
                r.held.extend(a);
                m.held.extend(b);
            }
            Op::Complete { pick } | Op::Fail { pick, .. } | Op::Heartbeat { pick } => {
                if r.held.is_empty() {
                    continue;
                }
                // Held claims may be stale (rescued meanwhile): both stores must refuse alike.
                let i = pick % r.held.len();
                let (ca, cb): (Claim, Claim) = (r.held[i].claim, m.held[i].claim);
                let (a, b) = match op {
                    Op::Complete { .. } => (
                        shape(&r.store.complete(ca).await),
                        shape(&m.store.complete(cb).await),
                    ),
                    Op::Fail { permanent, .. } => {
                        let failure = if permanent {
                            Failure::permanent("no")
                        } else {
                            Failure::retryable("boom")
                        };
                        (
                            shape(&r.store.fail(&r.held[i], failure.clone()).await),
                            shape(&m.store.fail(&m.held[i], failure).await),
                        )
                    }
                    _ => (
                        shape(&r.store.heartbeat(ca, LEASE).await),
                        shape(&m.store.heartbeat(cb, LEASE).await),
                    ),
                };
                assert_eq!(a, b, "{ctx}");
                if !matches!(op, Op::Heartbeat { .. }) {
                    r.held.remove(i);
                    m.held.remove(i);
                }
            }
            Op::Advance { ms } => clock.advance(Duration::from_millis(ms)),
            Op::Rescue => {
                let a = r.store.rescue(QUEUE).await.expect("redis rescue");
                let b = m.store.rescue(QUEUE).await.expect("memory rescue");
                assert_eq!(a, b, "{ctx}: rescued");
            }
            Op::ReviveAll => {
                let target = fairq_worker::ReviveTarget::AllDead { queue: None };
                let a = r.store.revive(target.clone()).await.expect("redis retry");
                let b = m.store.revive(target).await.expect("memory retry");
                assert_eq!(a, b, "{ctx}: revived");
            }
        }
    }
    let all = ListFilter::default().limit(10_000);
    let a = r.store.list(all.clone()).await.expect("list");
    let b = m.store.list(all).await.expect("list");
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(r.position(x.id), m.position(y.id));
        assert_eq!(
            (x.state, x.attempts, &x.last_error, &x.key),
            (y.state, y.attempts, &y.last_error, &y.key),
            "final state of job #{}",
            r.position(x.id)
        );
        assert_eq!(
            x.depends_on.map(|d| r.position(d)),
            y.depends_on.map(|d| m.position(d))
        );
    }
    assert_eq!(
        stats_shape(r.store.stats().await.expect("stats")),
        stats_shape(m.store.stats().await.expect("stats"))
    );
    redis.destroy().await.expect("cleanup");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn redis_store_matches_the_reference_store(ops in proptest::collection::vec(op(), 1..60)) {
        if !common::available() {
            return Ok(());
        }
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(run_ops(ops));
    }
}

/// The differential test every store shares (`fairq_worker::conformance::differential`):
/// settlement batches, releases, held retries, unique keys, purges and prunes on two queues
/// against the reference store, comparing every record and statistic (`next_retry_at`
/// included) after each step.
#[test]
fn redis_store_matches_the_shared_differential_test() {
    if !common::available() {
        return;
    }
    fairq_worker::conformance::differential::check(common::RedisHarness, 64);
}
