//! Differential property test: the PostgreSQL store and the in-memory reference store
//! (`MemoryBackend`) receive the same random operations at the same manual-clock readings,
//! and must give the same answers: which jobs every claim hands out and in which order (the
//! fair schedule), attempts, tokens, deadlines, outcomes, refusals, rescue and revival
//! counts, and at the end every job's state and the queue's statistics.
//!
//! Each case runs in its own queue of one shared schema; ids are compared through the
//! mapping built at enqueue.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use fairq_core::retry::RetryPolicy;
use fairq_worker::{
    Backend, BackendError, Failure, Job, JobId, ListFilter, MemoryBackend, NewJob, OnConflict,
    RetryTarget,
};
use proptest::prelude::*;

const LEASE: Duration = Duration::from_millis(50);

#[derive(Debug, Clone)]
enum Op {
    Enqueue {
        key: Option<u8>,
        delay: u64,
        after: Option<usize>,
        unique: Option<(u8, bool)>,
    },
    EnqueueMany {
        keys: Vec<Option<u8>>,
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
    let key = proptest::option::weighted(0.8, 0u8..4);
    prop_oneof![
        5 => (
            key.clone(),
            prop_oneof![4 => Just(0u64), 1 => 1u64..80],
            proptest::option::weighted(0.15, 0usize..40),
            proptest::option::weighted(0.2, (0u8..3, any::<bool>())),
        )
            .prop_map(|(key, delay, after, unique)| Op::Enqueue { key, delay, after, unique }),
        1 => proptest::collection::vec(key, 1..6).prop_map(|keys| Op::EnqueueMany { keys }),
        5 => (1usize..4).prop_map(|max| Op::Claim { max }),
        3 => (0usize..8).prop_map(|pick| Op::Complete { pick }),
        2 => ((0usize..8), proptest::bool::weighted(0.2))
            .prop_map(|(pick, permanent)| Op::Fail { pick, permanent }),
        1 => (0usize..8).prop_map(|pick| Op::Heartbeat { pick }),
        2 => (1u64..60).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Rescue),
        1 => Just(Op::ReviveAll),
    ]
}

fn policy() -> RetryPolicy {
    RetryPolicy::new(2).with_delays([Duration::ZERO, Duration::from_millis(30)])
}

/// Both stores, and what the test knows about their jobs.
struct Pair<'a> {
    pg: &'a fairq_postgres::PgBackend,
    mem: MemoryBackend,
    queue: String,
    /// Memory id → PostgreSQL id, and back.
    to_pg: HashMap<JobId, JobId>,
    to_mem: HashMap<JobId, JobId>,
    /// Jobs enqueued so far (memory ids), for dependencies.
    enqueued: Vec<JobId>,
    /// Claims handed out (and maybe stale): (memory job, PostgreSQL job).
    held: Vec<(Job, Job)>,
}

impl Pair<'_> {
    fn new_job(&self, key: Option<u8>) -> NewJob {
        let job = NewJob::new(self.queue.clone(), "k", vec![]).retry(policy());
        match key {
            Some(k) => job.key(format!("key{k}")),
            None => job,
        }
    }

    fn record(&mut self, mem: JobId, pg: JobId) {
        self.to_pg.insert(mem, pg);
        self.to_mem.insert(pg, mem);
        if !self.enqueued.contains(&mem) {
            self.enqueued.push(mem);
        }
    }

    /// An error in memory-id terms, comparable between stores.
    fn normalise(&self, err: &BackendError, from_pg: bool) -> String {
        let map = |id: JobId| {
            if from_pg {
                self.to_mem.get(&id).copied().unwrap_or(JobId(u64::MAX))
            } else {
                id
            }
        };
        match err {
            BackendError::NotFound(id) => format!("not found {}", map(*id)),
            BackendError::Transition { id, source } => format!("{} {source:?}", map(*id)),
            BackendError::Duplicate {
                queue,
                key,
                existing,
            } => format!("duplicate {queue} {key} {}", map(*existing)),
            BackendError::UnknownDependency(id) => format!("unknown dependency {}", map(*id)),
            BackendError::Invalid(m) => format!("invalid {m}"),
            other => panic!("unexpected store error: {other}"),
        }
    }

    async fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Enqueue {
                key,
                delay,
                after,
                unique,
            } => {
                let mut mem_job = self.new_job(*key);
                if *delay > 0 {
                    mem_job = mem_job.delay(Duration::from_millis(*delay));
                }
                if let Some((u, ignore)) = unique {
                    let on = if *ignore {
                        OnConflict::Ignore
                    } else {
                        OnConflict::Error
                    };
                    mem_job = mem_job.unique(format!("u{u}"), on);
                }
                let mut pg_job = mem_job.clone();
                if let Some(i) = after {
                    if let Some(&dep) = self.enqueued.get(*i % self.enqueued.len().max(1)) {
                        mem_job = mem_job.after(dep);
                        pg_job = pg_job.after(self.to_pg[&dep]);
                    }
                }
                let (m, p) = (
                    self.mem.enqueue(mem_job).await,
                    self.pg.enqueue(pg_job).await,
                );
                match (m, p) {
                    (Ok(m), Ok(p)) => self.record(m, p),
                    (Err(m), Err(p)) => {
                        prop_assert_eq!(self.normalise(&m, false), self.normalise(&p, true))
                    }
                    (m, p) => prop_assert!(false, "enqueue differs: {m:?} vs {p:?}"),
                }
            }
            Op::EnqueueMany { keys } => {
                let jobs: Vec<NewJob> = keys.iter().map(|k| self.new_job(*k)).collect();
                let m = self.mem.enqueue_many(jobs.clone()).await.expect("memory");
                let p = self.pg.enqueue_many(jobs).await.expect("postgres");
                prop_assert_eq!(m.len(), p.len());
                for (m, p) in m.into_iter().zip(p) {
                    self.record(m, p);
                }
            }
            Op::Claim { max } => {
                let m = self
                    .mem
                    .claim(&self.queue, *max, LEASE)
                    .await
                    .expect("memory");
                let p = self
                    .pg
                    .claim(&self.queue, *max, LEASE)
                    .await
                    .expect("postgres");
                let m_view: Vec<_> = m
                    .iter()
                    .map(|j| {
                        (
                            j.claim.id,
                            j.claim.token,
                            j.attempt,
                            j.lease_deadline,
                            j.run_at,
                        )
                    })
                    .collect();
                let p_view: Vec<_> = p
                    .iter()
                    .map(|j| {
                        (
                            self.to_mem[&j.claim.id],
                            j.claim.token,
                            j.attempt,
                            j.lease_deadline,
                            j.run_at,
                        )
                    })
                    .collect();
                prop_assert_eq!(m_view, p_view, "claims differ");
                self.held.extend(m.into_iter().zip(p));
            }
            Op::Complete { pick } | Op::Fail { pick, .. } | Op::Heartbeat { pick } => {
                if self.held.is_empty() {
                    return Ok(());
                }
                let (m_job, p_job) = self.held.remove(pick % self.held.len());
                let (m, p) = match op {
                    Op::Complete { .. } => (
                        self.mem.complete(m_job.claim).await.map(|()| String::new()),
                        self.pg.complete(p_job.claim).await.map(|()| String::new()),
                    ),
                    Op::Fail { permanent, .. } => {
                        let failure = if *permanent {
                            Failure::permanent("boom")
                        } else {
                            Failure::retryable("boom")
                        };
                        (
                            self.mem
                                .fail(m_job.claim, failure.clone())
                                .await
                                .map(|o| format!("{o:?}")),
                            self.pg
                                .fail(p_job.claim, failure)
                                .await
                                .map(|o| format!("{o:?}")),
                        )
                    }
                    _ => {
                        // A heartbeat keeps the claim held.
                        self.held.push((m_job.clone(), p_job.clone()));
                        (
                            self.mem
                                .heartbeat(m_job.claim, LEASE)
                                .await
                                .map(|d| d.to_string()),
                            self.pg
                                .heartbeat(p_job.claim, LEASE)
                                .await
                                .map(|d| d.to_string()),
                        )
                    }
                };
                let m = m.map_err(|e| self.normalise(&e, false));
                let p = p.map_err(|e| self.normalise(&e, true));
                prop_assert_eq!(m, p, "{:?} differs", op);
            }
            Op::Advance { .. } => {}
            Op::Rescue => {
                let m = self.mem.rescue(&self.queue).await.expect("memory");
                let p = self.pg.rescue(&self.queue).await.expect("postgres");
                prop_assert_eq!(m, p, "rescue counts differ");
            }
            Op::ReviveAll => {
                let target = RetryTarget::AllDead {
                    queue: Some(self.queue.clone()),
                };
                let m = self.mem.retry(target.clone()).await.expect("memory");
                let p = self.pg.retry(target).await.expect("postgres");
                prop_assert_eq!(m, p, "revival counts differ");
            }
        }
        Ok(())
    }

    async fn compare_final(&self) -> Result<(), TestCaseError> {
        let filter = ListFilter::default()
            .queue(self.queue.clone())
            .limit(10_000);
        let m = self.mem.list(filter.clone()).await.expect("memory");
        let p = self.pg.list(filter).await.expect("postgres");
        prop_assert_eq!(m.len(), p.len());
        for (m, p) in m.iter().zip(&p) {
            prop_assert_eq!(m.id, self.to_mem[&p.id]);
            prop_assert_eq!(m.state, p.state, "state of job {}", m.id);
            prop_assert_eq!(m.attempts, p.attempts);
            prop_assert_eq!(&m.last_error, &p.last_error);
            prop_assert_eq!(&m.key, &p.key);
            prop_assert_eq!(m.depends_on, p.depends_on.map(|d| self.to_mem[&d]));
        }
        let m_stats = self.mem.stats().await.expect("memory");
        let p_stats = self.pg.stats().await.expect("postgres");
        let p_stats = p_stats.iter().find(|s| s.queue == self.queue);
        match (m_stats.first(), p_stats) {
            (Some(m), Some(p)) => {
                prop_assert_eq!(m.counts, p.counts);
                prop_assert_eq!(m.retries, p.retries);
                prop_assert_eq!(m.processing_ms, p.processing_ms);
                prop_assert_eq!(m.oldest_error_at, p.oldest_error_at);
            }
            (None, None) => {}
            (m, p) => prop_assert!(false, "stats differ: {m:?} vs {p:?}"),
        }
        Ok(())
    }
}

#[test]
fn postgres_matches_the_reference_store() {
    if !common::available() {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let t = runtime
        .block_on(common::TestStore::new("model"))
        .expect("server available");
    let case = std::sync::atomic::AtomicU32::new(0);
    let config = ProptestConfig {
        cases: 128,
        max_shrink_iters: 200,
        ..ProptestConfig::default()
    };
    proptest!(config, |(ops in proptest::collection::vec(op(), 1..40))| {
        let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let queue = format!("case{n}");
        runtime.block_on(async {
            let mut pair = Pair {
                pg: &t.store,
                mem: MemoryBackend::with_clock(t.clock.clone()),
                queue,
                to_pg: HashMap::new(),
                to_mem: HashMap::new(),
                enqueued: Vec::new(),
                held: Vec::new(),
            };
            for op in &ops {
                if let Op::Advance { ms } = op {
                    t.clock.advance(Duration::from_millis(*ms));
                }
                pair.apply(op).await?;
            }
            pair.compare_final().await
        })?;
    });
    runtime.block_on(t.cleanup());
}
