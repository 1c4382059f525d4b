//! Differential test: random requests, clock moves and reopenings against the reference
//! in-memory store. After every step the file store must answer like the reference and hold
//! the same jobs and counters; a reopening must change nothing but what the documented
//! recovery does (leases of the dead process are rescued, a fresh fair round starts).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{START, all_jobs, open};
use fairq_core::retry::{Backoff, RetryPolicy};
use fairq_core::stats::Histogram;
use fairq_worker::memory::store::Store;
use fairq_worker::{
    Backend, Claim, Clock, Failure, JobId, JobStatus, ListFilter, ManualClock, NewJob, OnConflict,
    Purge, RetryTarget,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Enqueue {
        queue: u8,
        key: Option<u8>,
        delay: u64,
        unique: Option<u8>,
        depends: Option<prop::sample::Index>,
        retries: u32,
    },
    EnqueueMany(u8, Vec<Option<u8>>),
    Claim {
        queue: u8,
        max: usize,
        lease: u64,
    },
    Complete(prop::sample::Index),
    Fail(prop::sample::Index, bool),
    Heartbeat(prop::sample::Index),
    Rescue(u8),
    Advance(u64),
    RetryOne(prop::sample::Index),
    RetryAll,
    Purge(Option<u8>, Option<u8>),
    Prune(u64),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..2, prop::option::of(0u8..3), prop_oneof![Just(0u64), 1u64..3_000], prop::option::weighted(0.2, 0u8..3), prop::option::weighted(0.2, any::<prop::sample::Index>()), 0u32..3)
            .prop_map(|(queue, key, delay, unique, depends, retries)| Op::Enqueue { queue, key, delay, unique, depends, retries }),
        1 => (0u8..2, prop::collection::vec(prop::option::of(0u8..3), 1..6)).prop_map(|(q, keys)| Op::EnqueueMany(q, keys)),
        4 => (0u8..2, 1usize..4, 100u64..5_000).prop_map(|(queue, max, lease)| Op::Claim { queue, max, lease }),
        3 => any::<prop::sample::Index>().prop_map(Op::Complete),
        2 => (any::<prop::sample::Index>(), prop::bool::weighted(0.2)).prop_map(|(i, p)| Op::Fail(i, p)),
        1 => any::<prop::sample::Index>().prop_map(Op::Heartbeat),
        1 => (0u8..2).prop_map(Op::Rescue),
        2 => (1u64..4_000).prop_map(Op::Advance),
        1 => any::<prop::sample::Index>().prop_map(Op::RetryOne),
        1 => Just(Op::RetryAll),
        1 => (prop::option::of(0u8..2), prop::option::of(0u8..6)).prop_map(|(q, s)| Op::Purge(q, s)),
        1 => (0u64..5_000).prop_map(Op::Prune),
        2 => Just(Op::Reopen),
    ]
}

fn queue(q: u8) -> String {
    format!("q{q}")
}

/// The reference: the pure store plus the run-time histograms it would report.
struct Model {
    store: Store,
    histograms: BTreeMap<String, Histogram>,
}

impl Model {
    fn record_run(&mut self, id: JobId, now: u64) -> Option<(String, u64)> {
        self.store
            .record(id)
            .map(|r| (r.queue().to_string(), now.saturating_sub(r.claimed_at())))
    }

    fn finish_run(&mut self, run: Option<(String, u64)>) {
        if let Some((queue, elapsed)) = run {
            self.histograms.entry(queue).or_default().record(elapsed);
        }
    }

    /// What reopening does to the reference: rebuild from records, rescue the dead leases.
    fn reopen(&mut self, now: u64) {
        let ids: Vec<JobId> = self
            .store
            .list(&ListFilter::default().limit(usize::MAX))
            .iter()
            .map(|j| j.id)
            .collect();
        let mut records = Vec::new();
        for id in ids {
            let mut record = self.store.record(id).cloned().expect("record");
            record.expire_lease(now);
            records.push((id, record));
        }
        let queues: Vec<String> = self.store.stats().into_iter().map(|s| s.queue).collect();
        let retries: Vec<_> = queues
            .iter()
            .map(|q| (q.clone(), self.store.retry_stats(q).unwrap_or_default()))
            .collect();
        let mut store = Store::restore(records, self.store.next_id(), now);
        for (q, r) in retries {
            store.set_retry_stats(&q, r);
        }
        for q in &queues {
            store.rescue(q, now, &mut || 0);
        }
        self.store = store;
    }
}

fn policy(retries: u32) -> RetryPolicy {
    RetryPolicy::new(retries).with_backoff(Backoff::Fixed(Duration::from_millis(500)))
}

fn status(s: u8) -> Option<JobStatus> {
    JobStatus::ALL.get(usize::from(s)).copied()
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(START);
        let mut file = open(dir.path(), &clock);
        let mut model = Model {
            store: Store::default(),
            histograms: BTreeMap::new(),
        };
        let mut claims: Vec<Claim> = Vec::new();
        let mut ids: Vec<JobId> = Vec::new();
        for op in ops {
            let now = clock.now();
            match op {
                Op::Enqueue {
                    queue: q,
                    key,
                    delay,
                    unique,
                    depends,
                    retries,
                } => {
                    let mut job = NewJob::new(queue(q), "kind", vec![q; 3]).retry(policy(retries));
                    if let Some(k) = key {
                        job = job.key(format!("k{k}"));
                    }
                    if delay > 0 {
                        job = job.delay(Duration::from_millis(delay));
                    }
                    if let Some(u) = unique {
                        job = job.unique(
                            format!("u{u}"),
                            if u == 0 {
                                OnConflict::Ignore
                            } else {
                                OnConflict::Error
                            },
                        );
                    }
                    if let (Some(d), false) = (depends, ids.is_empty()) {
                        job = job.after(ids[d.index(ids.len())]);
                    }
                    let expected = model.store.enqueue_many(vec![job.clone()], now);
                    let got = file.enqueue(job).await;
                    prop_assert_eq!(
                        format!("{:?}", got.as_ref().map_err(|e| e.to_string())),
                        format!(
                            "{:?}",
                            expected.as_ref().map(|v| v[0]).map_err(|e| e.to_string())
                        )
                    );
                    if let Ok(id) = got {
                        ids.push(id);
                    }
                }
                Op::EnqueueMany(q, keys) => {
                    let jobs: Vec<NewJob> = keys
                        .iter()
                        .map(|k| {
                            let job = NewJob::new(queue(q), "kind", vec![]).retry(policy(1));
                            match k {
                                Some(k) => job.key(format!("k{k}")),
                                None => job,
                            }
                        })
                        .collect();
                    let expected = model.store.enqueue_many(jobs.clone(), now).unwrap();
                    let got = file.enqueue_many(jobs).await.unwrap();
                    prop_assert_eq!(&got, &expected);
                    ids.extend(got);
                }
                Op::Claim {
                    queue: q,
                    max,
                    lease,
                } => {
                    let lease = Duration::from_millis(lease);
                    let expected = model.store.claim(&queue(q), max, lease, now);
                    let got = file.claim(&queue(q), max, lease).await.unwrap();
                    prop_assert_eq!(&got, &expected);
                    claims.extend(got.iter().map(|j| j.claim));
                }
                Op::Complete(i) if !claims.is_empty() => {
                    let claim = claims[i.index(claims.len())];
                    let run = model.record_run(claim.id, now);
                    let expected = model.store.complete(claim, now);
                    if expected.is_ok() {
                        model.finish_run(run);
                    }
                    let got = file.complete(claim).await;
                    prop_assert_eq!(
                        got.map_err(|e| e.to_string()),
                        expected.map_err(|e| e.to_string())
                    );
                }
                Op::Fail(i, permanent) if !claims.is_empty() => {
                    let claim = claims[i.index(claims.len())];
                    let failure = if permanent {
                        Failure::permanent("p")
                    } else {
                        Failure::retryable("r")
                    };
                    let run = model.record_run(claim.id, now);
                    let expected = model.store.fail(claim, failure.clone(), now, 0);
                    if expected.is_ok() {
                        model.finish_run(run);
                    }
                    let got = file.fail(claim, failure).await;
                    prop_assert_eq!(
                        got.map_err(|e| e.to_string()),
                        expected.map_err(|e| e.to_string())
                    );
                }
                Op::Heartbeat(i) if !claims.is_empty() => {
                    let claim = claims[i.index(claims.len())];
                    let lease = Duration::from_millis(2_000);
                    let expected = model.store.heartbeat(claim, lease, now);
                    let got = file.heartbeat(claim, lease).await;
                    prop_assert_eq!(
                        got.map_err(|e| e.to_string()),
                        expected.map_err(|e| e.to_string())
                    );
                }
                Op::Rescue(q) => {
                    let expected = model.store.rescue(&queue(q), now, &mut || 0);
                    prop_assert_eq!(file.rescue(&queue(q)).await.unwrap(), expected);
                }
                Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                Op::RetryOne(i) if !ids.is_empty() => {
                    let target = RetryTarget::One(ids[i.index(ids.len())]);
                    let expected = model.store.retry(target.clone(), now);
                    let got = file.retry(target).await;
                    prop_assert_eq!(
                        got.map_err(|e| e.to_string()),
                        expected.map_err(|e| e.to_string())
                    );
                }
                Op::RetryAll => {
                    let target = RetryTarget::AllDead { queue: None };
                    let expected = model.store.retry(target.clone(), now).unwrap();
                    prop_assert_eq!(file.retry(target).await.unwrap(), expected);
                }
                Op::Purge(q, s) => {
                    let purge = Purge {
                        queue: q.map(queue),
                        status: s.and_then(status),
                    };
                    let expected = model.store.purge(&purge);
                    prop_assert_eq!(file.purge(purge).await.unwrap(), expected);
                }
                Op::Prune(ms) => {
                    let older = Duration::from_millis(ms);
                    let expected = model.store.prune(older, now);
                    prop_assert_eq!(file.prune(older).await.unwrap(), expected);
                }
                Op::Reopen => {
                    file.close().unwrap();
                    drop(file);
                    file = open(dir.path(), &clock);
                    model.reopen(now);
                }
                _ => {}
            }
            // Same jobs, same counters, same run-time summaries.
            let expected_jobs = model.store.list(&ListFilter::default().limit(usize::MAX));
            prop_assert_eq!(&all_jobs(&file).await, &expected_jobs);
            let mut expected_stats = model.store.stats();
            for s in &mut expected_stats {
                s.processing_ms = model
                    .histograms
                    .get(&s.queue)
                    .map(Histogram::summary)
                    .unwrap_or_default();
            }
            prop_assert_eq!(&file.stats().await.unwrap(), &expected_stats);
        }
        // And once more from disk.
        file.close().unwrap();
        drop(file);
        let file = open(dir.path(), &clock);
        model.reopen(clock.now());
        prop_assert_eq!(
            &all_jobs(&file).await,
            &model.store.list(&ListFilter::default().limit(usize::MAX))
        );
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn the_file_store_behaves_like_the_reference_across_reopens(ops in prop::collection::vec(op(), 1..40)) {
        run(ops)?;
    }
}
