//! A store wrapper for worker tests: counts and records the worker's calls, fails some of
//! them on demand, and can hold settlements in flight.

#![allow(dead_code)]

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairq_core::job::Millis;
use fairq_worker::{
    Backend, BackendError, Claim, Each, Finished, Job, JobId, JobInfo, ListFilter, MemoryBackend,
    NewJob, Purge, QueueStats, Retention, ReviveTarget, Settled, SettledAndClaimed,
};
use tokio::sync::Semaphore;

/// Calls the worker made, in order.
#[derive(Debug, Default)]
pub struct Calls {
    /// Job ids of every claim's answer (plain claims and combined settle-and-claims), in
    /// the order the store answered.
    pub claimed: Vec<Vec<JobId>>,
    /// The claims of every settlement call (plain or combined), failed ones included.
    pub settles: Vec<Vec<Claim>>,
    /// How many settlement calls were combined with a claim.
    pub settle_and_claims: usize,
    /// The claims of every `heartbeat_many` call.
    pub heartbeats: Vec<Vec<Claim>>,
    /// The claims of every `release` call that had any.
    pub releases: Vec<Vec<Claim>>,
    /// How many jobs each claim asked for (plain and combined), in call order.
    pub asked: Vec<usize>,
    /// Every `warm_up` call: the calls it was asked to ready.
    pub warm_ups: Vec<usize>,
    /// Every `prune` call: its age, and how many jobs it deleted (`None`: it failed).
    pub prunes: Vec<(Retention, Option<u64>)>,
    /// How many `prune` calls began (each waits for the prune gate, if any, first).
    pub prunes_begun: usize,
}

/// A [`MemoryBackend`] behind switches.
#[derive(Clone)]
pub struct Probe {
    pub inner: MemoryBackend,
    pub calls: Arc<Mutex<Calls>>,
    /// Fail this many of the next claims with a transient error.
    pub fail_claims: Arc<AtomicUsize>,
    /// Fail this many of the next settlement calls as a whole (transient).
    pub fail_settles: Arc<AtomicUsize>,
    /// Panic in this many of the next claims (plain or combined), as a buggy store would.
    pub panic_claims: Arc<AtomicUsize>,
    /// Panic in this many of the next settlement calls (plain or combined).
    pub panic_settles: Arc<AtomicUsize>,
    /// Fail this many of the next settlement calls that carry a success (transient).
    pub fail_completes: Arc<AtomicUsize>,
    /// When set, every settlement call first takes a permit (so a test holds calls in
    /// flight by giving none).
    pub settle_gate: Option<Arc<Semaphore>>,
    /// When set, every claim (plain or combined) first takes a permit, so a test decides
    /// when claims come back.
    pub claim_gate: Option<Arc<Semaphore>>,
    /// The next settlement applies the first half of its entries, then never answers (the
    /// process "dies" mid-call).
    pub half_settle: Arc<AtomicBool>,
    /// `release` answers `Unsupported`, as PostgreSQL and Redis did.
    pub no_release: bool,
    /// Fail this many of the next `warm_up` calls (the server cannot be reached).
    pub fail_warm_ups: Arc<AtomicUsize>,
    /// Fail this many of the next `prune` calls (transient).
    pub fail_prunes: Arc<AtomicUsize>,
    /// When set, every `prune` first takes a permit (so a test holds a prune in flight).
    pub prune_gate: Option<Arc<Semaphore>>,
    /// When set, every settlement takes a permit after the store applied it and before it
    /// answers (the store has recorded the outcomes; the worker does not know yet).
    pub answer_gate: Option<Arc<Semaphore>>,
    /// What [`Backend::claims_cost_mostly_fixed`] answers.
    pub fixed_cost_claims: bool,
    /// When set, the probe holds retries (through the inner store) after taking a permit;
    /// when not, it cannot hold them (`Unsupported`), as a store written before the sweep.
    pub hold_gate: Option<Arc<Semaphore>>,
    /// When set, every `rescue` first takes a permit.
    pub rescue_gate: Option<Arc<Semaphore>>,
    /// When set, every `heartbeat_many` takes a permit after it was recorded.
    pub heartbeat_gate: Option<Arc<Semaphore>>,
    /// Fail this many of the next `release` calls that carry jobs, as a whole (transient).
    pub fail_releases: Arc<AtomicUsize>,
    /// When set, every `release` call that carries jobs takes a permit after it was recorded
    /// (so a test holds a hand-back in flight).
    pub release_gate: Option<Arc<Semaphore>>,
    /// This many of the next `release` calls that carry jobs are applied to the store and
    /// then never answer (the answer is lost on the way).
    pub lose_release_answers: Arc<AtomicUsize>,
    /// This many of the next `release` calls that carry jobs are applied to the store and
    /// then fail as a whole (transient): the store took the jobs back, and the answer is lost.
    pub apply_then_fail_releases: Arc<AtomicUsize>,
    /// This many of the next `heartbeat_many` calls are applied to the store and answered
    /// with their last entry left out (a store that answers short).
    pub short_heartbeats: Arc<AtomicUsize>,
    /// This many of the next `release` calls that carry jobs are applied to the store and
    /// answered with their last entry left out.
    pub short_releases: Arc<AtomicUsize>,
    /// This many of the next `get` calls never answer.
    pub hang_gets: Arc<AtomicUsize>,
    /// This many of the next settlement calls are applied to the store and then fail as a
    /// whole (transient): the store recorded them, and the answer is lost. (A combined
    /// settle-and-claim so affected settles only: its claim is not made.)
    pub lose_settle_answers: Arc<AtomicUsize>,
}

/// Takes a permit of `gate`, if any, for good.
async fn pass(gate: &Option<Arc<Semaphore>>) {
    if let Some(gate) = gate {
        gate.acquire().await.expect("gate open").forget();
    }
}

impl Probe {
    pub fn new(inner: MemoryBackend) -> Self {
        Probe {
            inner,
            calls: Arc::default(),
            fail_claims: Arc::default(),
            fail_settles: Arc::default(),
            panic_claims: Arc::default(),
            panic_settles: Arc::default(),
            fail_completes: Arc::default(),
            settle_gate: None,
            claim_gate: None,
            half_settle: Arc::default(),
            no_release: false,
            fail_warm_ups: Arc::default(),
            fail_prunes: Arc::default(),
            prune_gate: None,
            answer_gate: None,
            fixed_cost_claims: false,
            hold_gate: None,
            rescue_gate: None,
            heartbeat_gate: None,
            fail_releases: Arc::default(),
            release_gate: None,
            lose_release_answers: Arc::default(),
            apply_then_fail_releases: Arc::default(),
            short_heartbeats: Arc::default(),
            short_releases: Arc::default(),
            hang_gets: Arc::default(),
            lose_settle_answers: Arc::default(),
        }
    }

    /// Takes a permit of the answer gate, if any.
    async fn before_answer(&self) {
        if let Some(gate) = &self.answer_gate {
            gate.acquire().await.expect("gate open").forget();
        }
    }

    pub fn gated(inner: MemoryBackend, gate: Arc<Semaphore>) -> Self {
        Probe {
            settle_gate: Some(gate),
            ..Probe::new(inner)
        }
    }

    /// Records a claim asking for `max` jobs and waits for the claim gate, if any.
    async fn before_claim(&self, max: usize) {
        self.calls().asked.push(max);
        if let Some(gate) = &self.claim_gate {
            gate.acquire().await.expect("gate open").forget();
        }
        if take_one(&self.panic_claims) {
            panic!("injected panic in a claim");
        }
    }

    pub fn calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().unwrap()
    }

    /// Every job id claimed, in claim order.
    pub fn claim_order(&self) -> Vec<JobId> {
        self.calls().claimed.iter().flatten().copied().collect()
    }

    /// Gate, failure injection and recording shared by both settlement paths; `Some` is
    /// an injected failure.
    async fn before_settle(&self, batch: &[Finished]) -> Result<(), BackendError> {
        self.calls()
            .settles
            .push(batch.iter().map(|f| f.claim).collect());
        if let Some(gate) = &self.settle_gate {
            gate.acquire().await.expect("gate open").forget();
        }
        if take_one(&self.panic_settles) {
            panic!("injected panic in a settlement");
        }
        if take_one(&self.fail_settles)
            || (batch.iter().any(Finished::is_success) && take_one(&self.fail_completes))
        {
            return Err(down());
        }
        if self.half_settle.swap(false, Ordering::SeqCst) {
            let half = batch.len() / 2;
            self.inner
                .settle(batch[..half].to_vec())
                .await
                .expect("half settled");
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

pub fn take_one(counter: &AtomicUsize) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

pub fn down() -> BackendError {
    BackendError::Unavailable("connection refused".into())
}

impl Backend for Probe {
    fn enqueue(&self, job: NewJob) -> impl Future<Output = Result<JobId, BackendError>> + Send {
        self.inner.enqueue(job)
    }
    fn enqueue_many(
        &self,
        jobs: Vec<NewJob>,
    ) -> impl Future<Output = Result<Vec<JobId>, BackendError>> + Send {
        self.inner.enqueue_many(jobs)
    }
    fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> impl Future<Output = Result<Vec<Job>, BackendError>> + Send {
        let this = self.clone();
        let queue = queue.to_string();
        async move {
            this.before_claim(max).await;
            if take_one(&this.fail_claims) {
                return Err(down());
            }
            let jobs = this.inner.claim(&queue, max, lease).await?;
            this.calls()
                .claimed
                .push(jobs.iter().map(|j| j.claim.id).collect());
            Ok(jobs)
        }
    }
    fn settle(
        &self,
        batch: Vec<Finished>,
    ) -> impl Future<Output = Result<Each<Settled>, BackendError>> + Send {
        let this = self.clone();
        async move {
            this.before_settle(&batch).await?;
            let answers = this.inner.settle(batch).await;
            this.before_answer().await;
            if take_one(&this.lose_settle_answers) {
                return Err(down());
            }
            answers
        }
    }
    fn settle_and_claim(
        &self,
        batch: Vec<Finished>,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> impl Future<Output = Result<SettledAndClaimed, BackendError>> + Send {
        let this = self.clone();
        let queue = queue.to_string();
        async move {
            this.before_settle(&batch).await?;
            if take_one(&this.lose_settle_answers) {
                this.inner.settle(batch).await?;
                return Err(down());
            }
            this.before_claim(max).await;
            let both = this
                .inner
                .settle_and_claim(batch, &queue, max, lease)
                .await?;
            this.before_answer().await;
            let mut calls = this.calls();
            calls.settle_and_claims += 1;
            if let Ok(jobs) = &both.claimed {
                calls
                    .claimed
                    .push(jobs.iter().map(|j| j.claim.id).collect());
            }
            drop(calls);
            Ok(both)
        }
    }
    fn release(
        &self,
        claims: Vec<Claim>,
    ) -> impl Future<Output = Result<Each<()>, BackendError>> + Send {
        let this = self.clone();
        async move {
            if !claims.is_empty() {
                this.calls().releases.push(claims.clone());
            }
            if this.no_release {
                return Err(BackendError::Unsupported("handing back claimed jobs"));
            }
            if !claims.is_empty() {
                pass(&this.release_gate).await;
            }
            if !claims.is_empty() && take_one(&this.fail_releases) {
                return Err(down());
            }
            if !claims.is_empty() && take_one(&this.apply_then_fail_releases) {
                this.inner.release(claims.clone()).await?;
                return Err(down());
            }
            if !claims.is_empty() && take_one(&this.lose_release_answers) {
                this.inner.release(claims.clone()).await?;
                std::future::pending::<()>().await;
            }
            let short = !claims.is_empty() && take_one(&this.short_releases);
            let mut answers = this.inner.release(claims).await?;
            if short {
                answers.pop();
            }
            Ok(answers)
        }
    }
    fn heartbeat(
        &self,
        claim: Claim,
        lease: Duration,
    ) -> impl Future<Output = Result<Millis, BackendError>> + Send {
        self.inner.heartbeat(claim, lease)
    }
    fn heartbeat_many(
        &self,
        claims: Vec<Claim>,
        lease: Duration,
    ) -> impl Future<Output = Result<Each<Millis>, BackendError>> + Send {
        let this = self.clone();
        async move {
            this.calls().heartbeats.push(claims.clone());
            pass(&this.heartbeat_gate).await;
            let short = take_one(&this.short_heartbeats);
            let mut answers = this.inner.heartbeat_many(claims, lease).await?;
            if short {
                answers.pop();
            }
            Ok(answers)
        }
    }
    fn rescue(&self, queue: &str) -> impl Future<Output = Result<u64, BackendError>> + Send {
        let this = self.clone();
        let queue = queue.to_string();
        async move {
            pass(&this.rescue_gate).await;
            this.inner.rescue(&queue).await
        }
    }
    fn hold_retries(
        &self,
        queue: &str,
        until: Millis,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send {
        let this = self.clone();
        let queue = queue.to_string();
        async move {
            let Some(gate) = &this.hold_gate else {
                return Err(BackendError::Unsupported("holding retries back"));
            };
            gate.acquire().await.expect("gate open").forget();
            this.inner.hold_retries(&queue, until).await
        }
    }
    fn warm_up(&self, calls: usize) -> impl Future<Output = Result<(), BackendError>> + Send {
        self.calls().warm_ups.push(calls);
        let failed = take_one(&self.fail_warm_ups);
        async move {
            if failed {
                return Err(down());
            }
            Ok(())
        }
    }
    fn wait_for_jobs(&self, queue: &str, timeout: Duration) -> impl Future<Output = ()> + Send {
        self.inner.wait_for_jobs(queue, timeout)
    }
    fn claims_cost_mostly_fixed(&self) -> bool {
        self.fixed_cost_claims
    }
    fn stats(&self) -> impl Future<Output = Result<Vec<QueueStats>, BackendError>> + Send {
        self.inner.stats()
    }
    fn live_counts(
        &self,
        queue: &str,
    ) -> impl Future<Output = Result<fairq_worker::LiveCounts, BackendError>> + Send {
        self.inner.live_counts(queue)
    }
    fn list(
        &self,
        filter: ListFilter,
    ) -> impl Future<Output = Result<Vec<JobInfo>, BackendError>> + Send {
        self.inner.list(filter)
    }
    fn get(&self, id: JobId) -> impl Future<Output = Result<Option<JobInfo>, BackendError>> + Send {
        let hang = take_one(&self.hang_gets);
        let get = self.inner.get(id);
        async move {
            if hang {
                std::future::pending::<()>().await;
            }
            get.await
        }
    }
    fn revive(
        &self,
        target: ReviveTarget,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send {
        self.inner.revive(target)
    }
    fn purge(&self, purge: Purge) -> impl Future<Output = Result<u64, BackendError>> + Send {
        self.inner.purge(purge)
    }
    async fn prune(&self, retention: Retention) -> Result<u64, BackendError> {
        self.calls().prunes_begun += 1;
        if let Some(gate) = &self.prune_gate {
            gate.acquire().await.expect("gate open").forget();
        }
        let result = if take_one(&self.fail_prunes) {
            Err(down())
        } else {
            self.inner.prune(retention).await
        };
        let pruned = result.as_ref().ok().copied();
        self.calls().prunes.push((retention, pruned));
        result
    }
}

/// Lets other tasks run until `done` holds (at most 10,000 yields, then fails): waits for a
/// state the worker reaches without any time passing.
pub async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("never reached: {what}");
}
