//! The differential test every store shares: random request sequences run on the store under
//! test and on the reference state machine ([`Store`]), with the same clock readings, and
//! every answer must agree.
//!
//! The conformance checks pin down behaviour case by case; this test explores sequences
//! nobody wrote down: which jobs each claim returns and in what order (the fair schedule),
//! attempts, lease deadlines and due times, settlement answers entry by entry (including stale
//! and repeated claims), failure verdicts, heartbeats, releases, rescues, revivals, purges and
//! prunes, and, after every step, every job's full record and every queue's statistics. Job
//! ids are compared by enqueue position, so a store may number its jobs as it likes.
//!
//! A store crate runs it from one test, with a [`Differential`] harness:
//!
//! ```ignore
//! #[test]
//! fn matches_the_reference_store() {
//!     fairq_worker::conformance::differential::check(MyHarness::new(), 64);
//! }
//! ```
//!
//! Retry policies here have no jitter, so the reference's verdicts are exact whatever random
//! numbers the store draws. A store that can be closed and reopened (the file store) says so
//! in its [`Capabilities`] and gets `Reopen` steps: the reference then does what a reopening
//! must do (leases of the dead process are rescued, a fresh fair round starts).
//!
//! [`Store`]: crate::memory::store::Store

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use fairq_core::job::Millis;
use fairq_core::retry::{Backoff, RetryPolicy};
use fairq_core::stats::Histogram;
use proptest::prelude::*;
use proptest::sample::Index;

use super::{Harness, START};
use crate::backend::{Backend, ListFilter, Purge, QueueStats, ReviveTarget};
use crate::clock::{Clock, ManualClock};
use crate::error::BackendError;
use crate::job::{Failure, Job, JobId, JobInfo, JobStatus, NewJob, OnConflict};
use crate::memory::store::Store;
use crate::retention::Retention;
use crate::settle::Finished;

/// What a store offers beyond the calls every store must answer alike.
///
/// ```
/// let caps = fairq_worker::conformance::differential::Capabilities::default();
/// assert!(!caps.release && !caps.reopen && !caps.hold_retries);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// [`Backend::release`] is implemented (not [`BackendError::Unsupported`]).
    pub release: bool,
    /// [`Differential::reopen`] closes and reopens the store (a restart of its process).
    pub reopen: bool,
    /// [`Backend::hold_retries`] is implemented, and [`QueueStats::next_retry_at`] reported.
    pub hold_retries: bool,
}

/// A [`Harness`] for the differential test.
///
/// ```
/// use fairq_worker::conformance::Harness;
/// use fairq_worker::conformance::differential::{Capabilities, Differential};
/// use fairq_worker::{ManualClock, MemoryBackend};
///
/// struct Memory;
/// impl Harness for Memory {
///     type Backend = MemoryBackend;
///     async fn create(&self, clock: ManualClock) -> MemoryBackend { MemoryBackend::with_clock(clock) }
///     async fn cleanup(&self, _backend: MemoryBackend) {}
/// }
/// impl Differential for Memory {
///     fn capabilities(&self) -> Capabilities {
///         Capabilities { release: true, reopen: false, hold_retries: true }
///     }
/// }
/// fairq_worker::conformance::differential::check(Memory, 4);
/// ```
pub trait Differential: Harness {
    /// What the store offers.
    fn capabilities(&self) -> Capabilities;

    /// Closes `store` and opens it again on `clock`, as a restart of its process would
    /// (called only when [`Capabilities::reopen`] is set).
    fn reopen(
        &self,
        store: Self::Backend,
        clock: ManualClock,
    ) -> impl Future<Output = Self::Backend> + Send {
        let _ = clock;
        async move { store }
    }
}

/// How one attempt of a settlement step ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The handler succeeded.
    Ok,
    /// A failure retrying may cure.
    Retryable,
    /// A failure that kills the job.
    Permanent,
}

/// For each entry of a settled batch, the queue and the running time of the run it ends (when
/// the job was running), for the latency histograms.
type Runs = Vec<Option<(String, Millis)>>;

impl End {
    /// The handler's result this end stands for.
    fn result(self) -> Result<(), Failure> {
        match self {
            End::Ok => Ok(()),
            End::Retryable => Err(Failure::retryable("retry me")),
            End::Permanent => Err(Failure::permanent("never")),
        }
    }
}

/// One step of a differential run.
#[derive(Debug, Clone)]
pub enum Op {
    /// Enqueue one job.
    Enqueue {
        /// Queue 0 or 1.
        queue: u8,
        /// Fairness key (`None`: the shared key).
        key: Option<u8>,
        /// Delay in ms.
        delay: u64,
        /// Unique key (0 ignores a conflict, others refuse it).
        unique: Option<u8>,
        /// An earlier job it depends on.
        depends: Option<Index>,
        /// Retries its policy allows.
        retries: u32,
    },
    /// Enqueue several jobs of one queue at once.
    EnqueueMany(u8, Vec<Option<u8>>),
    /// Claim up to `max` jobs of a queue under a lease of `lease` ms.
    Claim {
        /// Queue 0 or 1.
        queue: u8,
        /// Most jobs.
        max: usize,
        /// Lease in ms.
        lease: u64,
    },
    /// Settle a batch of held claims (maybe stale, maybe repeated).
    Settle(Vec<(Index, End)>),
    /// Settle a batch, then claim from a queue.
    SettleAndClaim(Vec<(Index, End)>, u8, usize),
    /// Extend held leases.
    Heartbeat(Vec<Index>),
    /// Hand held claims back (stores with [`Capabilities::release`]).
    Release(Vec<Index>),
    /// Rescue the expired leases of a queue.
    Rescue(u8),
    /// Move the clock.
    Advance(u64),
    /// Revive one job (refused unless it is dead).
    ReviveOne(Index),
    /// Revive every dead job.
    ReviveAll,
    /// Purge by queue and status.
    Purge(Option<u8>, Option<u8>),
    /// Prune succeeded and dead jobs finished this many ms ago (`None`: keep that outcome).
    Prune(Option<u64>, Option<u64>),
    /// Close and reopen the store (stores with [`Capabilities::reopen`]).
    Reopen,
    /// Hold a queue's retries back for this many ms (stores with
    /// [`Capabilities::hold_retries`]).
    HoldRetries(u8, u64),
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![6 => Just(End::Ok), 3 => Just(End::Retryable), 1 => Just(End::Permanent)]
}

fn batch() -> impl Strategy<Value = Vec<(Index, End)>> {
    prop::collection::vec((any::<Index>(), end()), 1..5)
}

/// Random steps for a store with `caps`.
///
/// ```
/// use proptest::strategy::{Strategy, ValueTree};
/// use fairq_worker::conformance::differential::{op, Capabilities};
/// let mut runner = proptest::test_runner::TestRunner::default();
/// let _step = op(Capabilities::default()).new_tree(&mut runner).unwrap().current();
/// ```
pub fn op(caps: Capabilities) -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (
            0u8..2,
            prop::option::of(0u8..4),
            prop_oneof![3 => Just(0u64), 1 => 1u64..3_000],
            prop::option::weighted(0.15, 0u8..3),
            prop::option::weighted(0.15, any::<Index>()),
            0u32..3,
        )
            .prop_map(|(queue, key, delay, unique, depends, retries)| Op::Enqueue {
                queue,
                key,
                delay,
                unique,
                depends,
                retries
            }),
        1 => (0u8..2, prop::collection::vec(prop::option::of(0u8..4), 1..6))
            .prop_map(|(q, keys)| Op::EnqueueMany(q, keys)),
        5 => (0u8..2, 1usize..5, 100u64..5_000)
            .prop_map(|(queue, max, lease)| Op::Claim { queue, max, lease }),
        5 => batch().prop_map(Op::Settle),
        1 => (batch(), 0u8..2, 0usize..4).prop_map(|(b, q, max)| Op::SettleAndClaim(b, q, max)),
        1 => prop::collection::vec(any::<Index>(), 1..4).prop_map(Op::Heartbeat),
        1 => prop::collection::vec(any::<Index>(), 1..3).prop_map(Op::Release),
        1 => (0u8..2).prop_map(Op::Rescue),
        3 => (1u64..4_000).prop_map(Op::Advance),
        1 => any::<Index>().prop_map(Op::ReviveOne),
        1 => Just(Op::ReviveAll),
        1 => (prop::option::of(0u8..2), prop::option::of(0u8..6))
            .prop_map(|(q, s)| Op::Purge(q, s)),
        1 => (prop::option::weighted(0.8, 0u64..5_000), prop::option::weighted(0.8, 0u64..5_000))
            .prop_map(|(ok, dead)| Op::Prune(ok, dead)),
        2 => Just(Op::Reopen),
        1 => (0u8..2, 0u64..3_000).prop_map(|(q, ms)| Op::HoldRetries(q, ms)),
    ]
    // Steps a store does not offer become steps it does.
    .prop_map(move |op| match op {
        Op::Release(picks) if !caps.release => Op::Heartbeat(picks),
        Op::Reopen if !caps.reopen => Op::Rescue(0),
        Op::HoldRetries(q, _) if !caps.hold_retries => Op::Rescue(q),
        op => op,
    })
}

/// Runs `cases` random sequences of up to 40 steps against fresh stores from `harness`, each
/// on its own manual clock starting at [`START`]; panics with the failing sequence (shrunk)
/// when the store disagrees with the reference.
pub fn check<H: Differential>(harness: H, cases: u32) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("cannot start a tokio runtime: {e}"));
    let caps = harness.capabilities();
    let config = ProptestConfig {
        cases,
        max_shrink_iters: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(&prop::collection::vec(op(caps), 1..40), |ops| {
        runtime.block_on(async {
            let clock = ManualClock::new(START);
            let store = harness.create(clock.clone()).await;
            let mut run = Run::new(&harness, store, clock);
            let outcome = run.steps(&ops).await;
            if let Some(store) = run.store.take() {
                harness.cleanup(store).await;
            }
            outcome.map_err(TestCaseError::fail)
        })
    });
    if let Err(e) = result {
        panic!("the store disagrees with the reference store: {e}");
    }
}

fn queue(q: u8) -> String {
    format!("q{q}")
}

fn policy(retries: u32) -> RetryPolicy {
    RetryPolicy::new(retries).with_backoff(Backoff::Fixed(Duration::from_millis(500)))
}

/// One differential run: the store under test, the reference, and what both handed out.
struct Run<'h, H: Harness> {
    harness: &'h H,
    /// The store under test (taken out only while it is reopened).
    store: Option<H::Backend>,
    clock: ManualClock,
    reference: Store,
    /// Claim-to-finish times the reference reports (kept here because they must survive a
    /// reopening, which rebuilds the reference from records).
    histograms: BTreeMap<String, Histogram>,
    /// Ids by enqueue position: (reference, store).
    ids: Vec<(JobId, JobId)>,
    /// Claims handed out, maybe stale: (reference job, store job).
    held: Vec<(Job, Job)>,
}

type Step = Result<(), String>;

macro_rules! agree {
    ($left:expr, $right:expr, $($what:tt)+) => {{
        let (left, right) = (&$left, &$right);
        if left != right {
            return Err(format!("{}:\n  reference: {left:?}\n  store:     {right:?}", format!($($what)+)));
        }
    }};
}

impl<'h, H: Differential> Run<'h, H> {
    fn new(harness: &'h H, store: H::Backend, clock: ManualClock) -> Self {
        Run {
            harness,
            store: Some(store),
            clock,
            reference: Store::default(),
            histograms: BTreeMap::new(),
            ids: Vec::new(),
            held: Vec::new(),
        }
    }

    async fn steps(&mut self, ops: &[Op]) -> Step {
        for (n, op) in ops.iter().enumerate() {
            self.step(op)
                .await
                .map_err(|e| format!("step {n} ({op:?}): {e}"))?;
            self.compare()
                .await
                .map_err(|e| format!("after step {n} ({op:?}): {e}"))?;
        }
        Ok(())
    }

    fn store(&self) -> &H::Backend {
        self.store
            .as_ref()
            .unwrap_or_else(|| unreachable!("the store is only taken out while reopening"))
    }

    /// The enqueue position of a reference id.
    fn position_of_reference(&self, id: JobId) -> Option<usize> {
        self.ids.iter().position(|(r, _)| *r == id)
    }

    /// The enqueue position of a store id.
    fn position_of_store(&self, id: JobId) -> Option<usize> {
        self.ids.iter().position(|(_, s)| *s == id)
    }

    /// The batch that settles the held jobs `picks` names, as the reference and as the store
    /// under test see it, and the run each entry ends (for the latency histograms).
    fn settling(
        &self,
        picks: &[(Index, End)],
        now: Millis,
    ) -> (Vec<Finished>, Vec<Finished>, Runs) {
        let chosen = self.held(picks);
        let batch = |side: fn(&(Job, Job, End)) -> &Job| -> Vec<Finished> {
            chosen
                .iter()
                .map(|c| Finished::new(side(c), c.2.result()))
                .collect()
        };
        let runs = chosen
            .iter()
            .map(|(r, _, _)| self.running_for(r.claim.id, now))
            .collect();
        (batch(|c| &c.0), batch(|c| &c.1), runs)
    }

    fn held(&self, picks: &[(Index, End)]) -> Vec<(Job, Job, End)> {
        if self.held.is_empty() {
            return Vec::new();
        }
        picks
            .iter()
            .map(|(i, end)| {
                let (r, s) = &self.held[i.index(self.held.len())];
                (r.clone(), s.clone(), *end)
            })
            .collect()
    }

    /// A result with ids turned into positions, comparable between the two stores.
    fn shape<T: std::fmt::Debug>(
        &self,
        result: &Result<T, BackendError>,
        reference: bool,
    ) -> Result<String, String> {
        let pos = |id: &JobId| {
            let p = if reference {
                self.position_of_reference(*id)
            } else {
                self.position_of_store(*id)
            };
            p.map_or_else(|| "unknown".to_string(), |p| format!("#{p}"))
        };
        Ok(match result {
            Ok(value) => format!("ok {value:?}"),
            Err(BackendError::NotFound(id)) => format!("not found {}", pos(id)),
            Err(BackendError::Transition { id, source }) => {
                format!("refused {} {source:?}", pos(id))
            }
            Err(BackendError::Duplicate {
                queue,
                key,
                existing,
            }) => format!("duplicate {queue} {key} {}", pos(existing)),
            Err(BackendError::UnknownDependency(id)) => format!("unknown dependency {}", pos(id)),
            Err(BackendError::Invalid(m)) => format!("invalid {m}"),
            Err(other) => return Err(format!("unexpected store error: {other}")),
        })
    }

    fn new_job(&self, q: u8, key: Option<u8>, retries: u32) -> NewJob {
        let job = NewJob::new(queue(q), "kind", vec![q, key.unwrap_or(9)]).retry(policy(retries));
        match key {
            Some(k) => job.key(format!("k{k}")),
            None => job,
        }
    }

    /// Records the claim-to-finish time of a reference job about to settle.
    fn running_for(&self, id: JobId, now: Millis) -> Option<(String, Millis)> {
        self.reference
            .record(id)
            .map(|r| (r.queue().to_string(), now.saturating_sub(r.claimed_at())))
    }

    fn claimed(&mut self, reference: Vec<Job>, store: Vec<Job>, what: &str) -> Step {
        let view = |jobs: &[Job], reference: bool| -> Vec<String> {
            jobs.iter()
                .map(|j| {
                    let p = if reference {
                        self.position_of_reference(j.claim.id)
                    } else {
                        self.position_of_store(j.claim.id)
                    };
                    format!(
                        "#{p:?} {:?} {:?} attempt {} token {} deadline {} run_at {} enq {} {:?} {:?} {:?}",
                        j.queue,
                        j.key,
                        j.attempt,
                        j.claim.token.0,
                        j.lease_deadline,
                        j.run_at,
                        j.enqueued_at,
                        j.kind,
                        j.payload,
                        j.retry
                    )
                })
                .collect()
        };
        agree!(view(&reference, true), view(&store, false), "{what}");
        self.held.extend(reference.into_iter().zip(store));
        Ok(())
    }

    async fn settle(&mut self, picks: &[(Index, End)], now: Millis) -> Result<(), String> {
        let (reference, store, runs) = self.settling(picks, now);
        let expected = self.reference.settle(reference, now, &mut || 0);
        let got = self
            .store()
            .settle(store)
            .await
            .map_err(|e| format!("settle failed as a whole: {e}"))?;
        self.after_settle(&expected, &got, runs)
    }

    fn after_settle<T: std::fmt::Debug>(
        &mut self,
        expected: &[Result<T, BackendError>],
        got: &[Result<T, BackendError>],
        runs: Runs,
    ) -> Step {
        agree!(expected.len(), got.len(), "answers per settled batch");
        for (n, ((e, g), run)) in expected.iter().zip(got).zip(runs).enumerate() {
            agree!(self.shape(e, true)?, self.shape(g, false)?, "entry {n}");
            if let (Ok(_), Some((queue, elapsed))) = (e, run) {
                self.histograms.entry(queue).or_default().record(elapsed);
            }
        }
        Ok(())
    }

    async fn step(&mut self, op: &Op) -> Step {
        let now = self.clock.now();
        match op {
            Op::Enqueue {
                queue: q,
                key,
                delay,
                unique,
                depends,
                retries,
            } => {
                let mut job = self.new_job(*q, *key, *retries);
                if *delay > 0 {
                    job = job.delay(Duration::from_millis(*delay));
                }
                if let Some(u) = unique {
                    let on_conflict = if *u == 0 {
                        OnConflict::Ignore
                    } else {
                        OnConflict::Error
                    };
                    job = job.unique(format!("u{u}"), on_conflict);
                }
                let (mut r, mut s) = (job.clone(), job);
                if let (Some(d), false) = (depends, self.ids.is_empty()) {
                    let (rd, sd) = self.ids[d.index(self.ids.len())];
                    r = r.after(rd);
                    s = s.after(sd);
                }
                let expected = self.reference.enqueue_many(vec![r], now).map(|ids| ids[0]);
                let got = self.store().enqueue(s).await;
                match (&expected, &got) {
                    (Ok(r), Ok(s)) => {
                        match (self.position_of_reference(*r), self.position_of_store(*s)) {
                            (None, None) => self.ids.push((*r, *s)),
                            (a, b) => {
                                agree!(a, b, "the existing job an ignored duplicate names")
                            }
                        }
                    }
                    _ => {
                        agree!(
                            self.shape(&expected, true)?,
                            self.shape(&got, false)?,
                            "enqueue"
                        );
                    }
                }
            }
            Op::EnqueueMany(q, keys) => {
                let jobs: Vec<NewJob> = keys.iter().map(|k| self.new_job(*q, *k, 1)).collect();
                let expected = self.reference.enqueue_many(jobs.clone(), now);
                let got = self.store().enqueue_many(jobs).await;
                match (expected, got) {
                    (Ok(r), Ok(s)) => {
                        agree!(r.len(), s.len(), "ids of a batch");
                        self.ids.extend(r.into_iter().zip(s));
                    }
                    (e, g) => {
                        agree!(
                            self.shape(&e, true)?,
                            self.shape(&g, false)?,
                            "enqueue_many"
                        );
                    }
                }
            }
            Op::Claim {
                queue: q,
                max,
                lease,
            } => {
                let lease = Duration::from_millis(*lease);
                let expected = self.reference.claim(&queue(*q), *max, lease, now);
                let got = self
                    .store()
                    .claim(&queue(*q), *max, lease)
                    .await
                    .map_err(|e| format!("claim failed: {e}"))?;
                self.claimed(expected, got, "claimed jobs")?;
            }
            Op::Settle(picks) => self.settle(picks, now).await?,
            Op::SettleAndClaim(picks, q, max) => {
                let lease = Duration::from_millis(2_000);
                let (reference, store, runs) = self.settling(picks, now);
                let expected = self.reference.settle(reference, now, &mut || 0);
                let expected_claim = self.reference.claim(&queue(*q), *max, lease, now);
                let got = self
                    .store()
                    .settle_and_claim(store, &queue(*q), *max, lease)
                    .await
                    .map_err(|e| format!("settle_and_claim failed as a whole: {e}"))?;
                self.after_settle(&expected, &got.settled, runs)?;
                let claimed = got
                    .claimed
                    .map_err(|e| format!("the claim of settle_and_claim failed: {e}"))?;
                self.claimed(expected_claim, claimed, "jobs claimed after settling")?;
            }
            Op::Heartbeat(picks) => {
                if self.held.is_empty() {
                    return Ok(());
                }
                let lease = Duration::from_millis(2_000);
                let chosen: Vec<_> = picks
                    .iter()
                    .map(|i| self.held[i.index(self.held.len())].clone())
                    .collect();
                let expected: Vec<_> = chosen
                    .iter()
                    .map(|(r, _)| self.reference.heartbeat(r.claim, lease, now))
                    .collect();
                let got = self
                    .store()
                    .heartbeat_many(chosen.iter().map(|(_, s)| s.claim).collect(), lease)
                    .await
                    .map_err(|e| format!("heartbeat_many failed as a whole: {e}"))?;
                agree!(expected.len(), got.len(), "answers per heartbeat batch");
                for (n, (e, g)) in expected.iter().zip(&got).enumerate() {
                    agree!(self.shape(e, true)?, self.shape(g, false)?, "heartbeat {n}");
                }
            }
            Op::Release(picks) => {
                if self.held.is_empty() {
                    return Ok(());
                }
                let chosen: Vec<_> = picks
                    .iter()
                    .map(|i| self.held[i.index(self.held.len())].clone())
                    .collect();
                let expected = self
                    .reference
                    .release(chosen.iter().map(|(r, _)| r.claim).collect(), now);
                let got = self
                    .store()
                    .release(chosen.iter().map(|(_, s)| s.claim).collect())
                    .await
                    .map_err(|e| format!("release failed as a whole: {e}"))?;
                agree!(expected.len(), got.len(), "answers per release");
                for (n, (e, g)) in expected.iter().zip(&got).enumerate() {
                    agree!(self.shape(e, true)?, self.shape(g, false)?, "release {n}");
                }
            }
            Op::Rescue(q) => {
                let expected = self.reference.rescue(&queue(*q), now, &mut || 0);
                let got = self
                    .store()
                    .rescue(&queue(*q))
                    .await
                    .map_err(|e| format!("rescue failed: {e}"))?;
                agree!(expected, got, "jobs rescued");
            }
            Op::Advance(ms) => self.clock.advance(Duration::from_millis(*ms)),
            Op::ReviveOne(i) => {
                if self.ids.is_empty() {
                    return Ok(());
                }
                let (r, s) = self.ids[i.index(self.ids.len())];
                let expected = self.reference.revive(ReviveTarget::One(r), now);
                let got = self.store().revive(ReviveTarget::One(s)).await;
                agree!(
                    self.shape(&expected, true)?,
                    self.shape(&got, false)?,
                    "revive one"
                );
            }
            Op::ReviveAll => {
                let target = ReviveTarget::AllDead { queue: None };
                let expected = self.reference.revive(target.clone(), now);
                let got = self.store().revive(target).await;
                agree!(
                    self.shape(&expected, true)?,
                    self.shape(&got, false)?,
                    "revive all"
                );
            }
            Op::Purge(q, s) => {
                let purge = Purge {
                    queue: q.map(queue),
                    status: s.and_then(|s| JobStatus::ALL.get(usize::from(s)).copied()),
                };
                let expected = self.reference.purge(&purge);
                let got = self
                    .store()
                    .purge(purge)
                    .await
                    .map_err(|e| format!("purge failed: {e}"))?;
                agree!(expected, got, "jobs purged");
            }
            Op::Prune(ok, dead) => {
                let older = Retention {
                    succeeded: ok.map(Duration::from_millis),
                    dead: dead.map(Duration::from_millis),
                };
                let expected = self.reference.prune(&older, now);
                let got = self
                    .store()
                    .prune(older)
                    .await
                    .map_err(|e| format!("prune failed: {e}"))?;
                agree!(expected, got, "jobs pruned");
            }
            Op::HoldRetries(q, ms) => {
                let until = now + ms;
                let expected = self.reference.hold_retries(&queue(*q), until, now);
                let got = self
                    .store()
                    .hold_retries(&queue(*q), until)
                    .await
                    .map_err(|e| format!("hold_retries failed: {e}"))?;
                agree!(expected, got, "retries held");
            }
            Op::Reopen => {
                let store = self
                    .store
                    .take()
                    .ok_or("the store was lost in a reopening")?;
                self.store = Some(self.harness.reopen(store, self.clock.clone()).await);
                self.reopen_reference(now);
            }
        }
        Ok(())
    }

    /// What reopening does to the reference: rebuild from records, rescue the dead leases.
    fn reopen_reference(&mut self, now: Millis) {
        let infos = self
            .reference
            .list(&ListFilter::default().limit(usize::MAX));
        let mut records = Vec::new();
        for info in &infos {
            if let Some(record) = self.reference.record(info.id) {
                let mut record = record.clone();
                record.expire_lease(now);
                records.push((info.id, record));
            }
        }
        let stats = self.reference.stats();
        let mut store = Store::restore(records, self.reference.next_id(), now);
        for s in &stats {
            store.set_retry_stats(&s.queue, s.retries);
        }
        for s in &stats {
            store.rescue(&s.queue, now, &mut || 0);
        }
        self.reference = store;
    }

    /// Every job's record and every queue's numbers agree.
    async fn compare(&self) -> Step {
        let all = ListFilter::default().limit(100_000);
        let expected = self.reference.list(&all);
        let got = self
            .store()
            .list(all)
            .await
            .map_err(|e| format!("list failed: {e}"))?;
        let mut got = got;
        got.sort_by_key(|info| self.position_of_store(info.id));
        agree!(expected.len(), got.len(), "number of jobs");
        for (e, g) in expected.iter().zip(&got) {
            agree!(
                self.info_view(e, true),
                self.info_view(g, false),
                "job record"
            );
        }
        let mut stats = self.reference.stats();
        for s in &mut stats {
            s.processing_ms = self
                .histograms
                .get(&s.queue)
                .map(Histogram::summary)
                .unwrap_or_default();
        }
        let got = self
            .store()
            .stats()
            .await
            .map_err(|e| format!("stats failed: {e}"))?;
        let hold = self.harness.capabilities().hold_retries;
        agree!(
            stats_view(&stats, hold),
            stats_view(&got, hold),
            "queue statistics"
        );
        Ok(())
    }

    fn info_view(&self, info: &JobInfo, reference: bool) -> String {
        let pos = |id: JobId| {
            if reference {
                self.position_of_reference(id)
            } else {
                self.position_of_store(id)
            }
        };
        let mut shown = info.clone();
        shown.id = JobId(pos(info.id).map_or(u64::MAX, |p| p as u64));
        shown.depends_on = info
            .depends_on
            .map(|d| JobId(pos(d).map_or(u64::MAX, |p| p as u64)));
        format!("{shown:?}")
    }
}

/// Statistics of the queues that hold or held jobs, in a comparable form (with the next
/// retry time for stores that report it).
fn stats_view(stats: &[QueueStats], next_retry: bool) -> Vec<String> {
    let mut out: Vec<String> = stats
        .iter()
        .filter(|s| s.counts.total() > 0 || s.retries != Default::default())
        .map(|s| {
            format!(
                "{} {:?} {:?} {:?} {:?} {:?}",
                s.queue,
                s.counts,
                s.retries,
                s.processing_ms,
                s.oldest_error_at,
                s.next_retry_at.filter(|_| next_retry)
            )
        })
        .collect();
    out.sort();
    out
}
