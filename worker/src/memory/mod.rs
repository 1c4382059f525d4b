//! The in-memory store: the reference [`Backend`] that every other store is compared with.
//!
//! [`MemoryBackend`] keeps every job in process memory, so it loses everything when the
//! process exits: use it for tests, examples and work that may be lost. Its semantics are
//! those every store must have (the [conformance suite](crate#writing-a-store) runs against it
//! first):
//!
//! * **Fair by key.** Each queue keeps its due jobs in a [`fairq_core::fair::FairQueue`]
//!   keyed by the job's fairness key, so a key with one job waits for at most `2 (K - 1)`
//!   claims of other keys' jobs. Except after a purge, a cancel or a
//!   [`hold_retries`](Backend::hold_retries): a ready job taken out of the fair order keeps
//!   its key's place until claims pass it (its stale entry is skipped then), so the key's
//!   next job waits behind it too (see [`Backend`] for the bound then). Jobs waiting for time (delayed or retrying) sit in a
//!   time-ordered set and join the fair queue when the store's [`Clock`] reaches their time,
//!   earliest first.
//! * **One state machine.** Every change goes through [`fairq_core::job::Lifecycle`]: claims
//!   hand out fresh lease tokens, stale tokens are refused, expired leases are rescued by
//!   [`Backend::rescue`] and count as failed attempts.
//! * **Dependencies.** A job enqueued with [`NewJob::after`](crate::NewJob::after) stays
//!   blocked until its dependency *succeeds*. When the dependency dies, its dependents stay
//!   blocked: revive the dependency with [`Backend::revive`] (they run once it succeeds) or
//!   delete them with [`Backend::purge`]. Deleting a dependency that has not succeeded leaves
//!   its dependents blocked for good. Once released, a dependent is due at the later of its
//!   own run time (its delay or [`run_at_millis`](crate::NewJob::run_at_millis)) and its
//!   release: a delayed dependent keeps its delay, and one whose time has passed shows
//!   `State::Scheduled { run_at }` with its release time (see
//!   [`Lifecycle::dependency_succeeded`](fairq_core::job::Lifecycle::dependency_succeeded)).
//! * **Unique keys** hold among a queue's unfinished jobs; a dead job that is revived takes
//!   its key back, and stays dead if another job holds it meanwhile.
//! * **Wake-ups.** [`Backend::wait_for_jobs`] returns as soon as a job of the queue becomes
//!   claimable through this store (enqueue, retry, rescue, release, revival), without
//!   polling. Time passing on a [`ManualClock`](crate::ManualClock) is not an event: call
//!   [`MemoryBackend::wake_all`] after advancing one while a worker waits.
//!
//! ```
//! use std::time::Duration;
//! use fairq_worker::{Backend, MemoryBackend, NewJob};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let store = MemoryBackend::new();
//! store.enqueue(NewJob::new("mail", "welcome", b"{}".to_vec()).key("tenant-a")).await?;
//! let jobs = store.claim("mail", 10, Duration::from_secs(30)).await?;
//! assert_eq!(jobs.len(), 1);
//! store.complete(jobs[0].claim).await?;
//! # Ok::<(), fairq_worker::BackendError>(())
//! # }).unwrap();
//! ```

mod inspect;
pub mod store;

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use fairq_core::job::Millis;
use tokio::sync::Notify;

use crate::backend::{Backend, ListFilter, Purge, QueueStats, ReviveTarget};
use crate::clock::{Clock, SystemClock};
use crate::error::BackendError;
use crate::job::{Claim, Job, JobId, JobInfo, NewJob, check_hold_until, check_queue_name};
use crate::random::{Random, SystemRandom};
use crate::retention::Retention;
use crate::settle::{Each, Finished, Settled, SettledAndClaimed};
use crate::status_counts::StatusCounts;

use store::Store;

struct Inner {
    clock: Arc<dyn Clock>,
    random: Arc<dyn Random>,
    store: Mutex<Store>,
    wakers: Mutex<HashMap<String, Arc<Notify>>>,
    /// Queues whose jobs are not handed out (see [`Inspect::set_paused`](crate::Inspect)).
    paused: Mutex<BTreeSet<String>>,
}

/// A complete [`Backend`] in process memory. Clones share the same store.
///
/// ```
/// use fairq_worker::{Backend, Clock, ManualClock, MemoryBackend, NewJob};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let clock = ManualClock::new(0);
/// let store = MemoryBackend::with_clock(clock.clone());
/// store.enqueue(NewJob::new("q", "k", vec![]).delay(Duration::from_secs(5))).await.unwrap();
/// assert!(store.claim("q", 1, Duration::from_secs(30)).await.unwrap().is_empty());
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(store.claim("q", 1, Duration::from_secs(30)).await.unwrap().len(), 1);
/// # });
/// ```
#[derive(Clone)]
pub struct MemoryBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBackend")
            .field("jobs", &self.store().len())
            .finish_non_exhaustive()
    }
}

impl Default for MemoryBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryBackend {
    /// An empty store on the system clock.
    ///
    /// ```
    /// let store = fairq_worker::MemoryBackend::new();
    /// assert!(store.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_clock(SystemClock)
    }

    /// An empty store reading time from `clock` (a [`ManualClock`](crate::ManualClock) in
    /// tests).
    ///
    /// ```
    /// use fairq_worker::{Clock, ManualClock, MemoryBackend};
    /// let store = MemoryBackend::with_clock(ManualClock::new(42));
    /// assert_eq!(store.now(), 42);
    /// ```
    pub fn with_clock(clock: impl Clock) -> Self {
        Self::with_shared_clock(Arc::new(clock))
    }

    /// An empty store reading time from a shared clock.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use fairq_worker::{Clock, MemoryBackend, SystemClock};
    /// let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    /// assert!(MemoryBackend::with_shared_clock(clock).now() > 0);
    /// ```
    pub fn with_shared_clock(clock: Arc<dyn Clock>) -> Self {
        MemoryBackend {
            inner: Arc::new(Inner {
                clock,
                random: Arc::new(SystemRandom),
                store: Mutex::new(Store::default()),
                wakers: Mutex::new(HashMap::new()),
                paused: Mutex::new(BTreeSet::new()),
            }),
        }
    }

    /// An empty store reading time from `clock` and retry jitter from `random`
    /// (a [`FixedRandom`](crate::FixedRandom) makes retry times exact in tests).
    ///
    /// ```
    /// use fairq_worker::{FixedRandom, ManualClock, MemoryBackend};
    /// let store = MemoryBackend::with_clock_and_random(ManualClock::new(1), FixedRandom(0));
    /// assert_eq!(store.now(), 1);
    /// ```
    pub fn with_clock_and_random(clock: impl Clock, random: impl Random) -> Self {
        MemoryBackend {
            inner: Arc::new(Inner {
                clock: Arc::new(clock),
                random: Arc::new(random),
                store: Mutex::new(Store::default()),
                wakers: Mutex::new(HashMap::new()),
                paused: Mutex::new(BTreeSet::new()),
            }),
        }
    }

    /// Whether succeeded jobs are kept (the default) until a prune deletes them, or deleted
    /// when their success is recorded, as BullMQ's `removeOnComplete` and graphile-worker
    /// do: the memory of every succeeded job goes at once. A job with dependents is kept.
    /// Statistics count deleted successes all the same (retries, run times); `get`, `list`,
    /// the status counts and a later `depends_on` naming one no longer find it.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use fairq_worker::{Backend, MemoryBackend, NewJob};
    /// let store = MemoryBackend::new().keep_succeeded(false);
    /// let id = store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    /// let job = store.claim("q", 1, Duration::from_secs(30)).await.unwrap().remove(0);
    /// store.complete(job.claim).await.unwrap();
    /// assert!(store.get(id).await.unwrap().is_none());
    /// # });
    /// ```
    pub fn keep_succeeded(self, keep: bool) -> Self {
        self.store().set_keep_succeeded(keep);
        self
    }

    /// The store's current time.
    ///
    /// ```
    /// let store = fairq_worker::MemoryBackend::with_clock(fairq_worker::ManualClock::new(7));
    /// assert_eq!(store.now(), 7);
    /// ```
    pub fn now(&self) -> Millis {
        self.inner.clock.now()
    }

    /// Number of stored jobs, finished ones included.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use fairq_worker::{Backend, MemoryBackend, NewJob};
    /// let store = MemoryBackend::new();
    /// store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    /// assert_eq!(store.len(), 1);
    /// # });
    /// ```
    pub fn len(&self) -> usize {
        self.store().len()
    }

    /// True when no job is stored.
    ///
    /// ```
    /// assert!(fairq_worker::MemoryBackend::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Jobs per status in `queue` (all zero for a queue never used).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use fairq_worker::{Backend, MemoryBackend, NewJob};
    /// let store = MemoryBackend::new();
    /// store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    /// assert_eq!(store.counts("q").scheduled, 1);
    /// # });
    /// ```
    pub fn counts(&self, queue: &str) -> StatusCounts {
        self.store().counts(queue)
    }

    /// When the next job of `queue` that waits for time becomes due, if any.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use fairq_worker::{Backend, ManualClock, MemoryBackend, NewJob};
    /// let store = MemoryBackend::with_clock(ManualClock::new(100));
    /// store.enqueue(NewJob::new("q", "k", vec![]).delay(Duration::from_millis(50))).await.unwrap();
    /// assert_eq!(store.next_due("q"), Some(150));
    /// # });
    /// ```
    pub fn next_due(&self, queue: &str) -> Option<Millis> {
        self.store().next_due(queue)
    }

    /// Wakes every task waiting in [`Backend::wait_for_jobs`], so it looks again. Call it after
    /// advancing a manual clock while a worker runs.
    ///
    /// ```
    /// fairq_worker::MemoryBackend::new().wake_all();
    /// ```
    pub fn wake_all(&self) {
        let wakers = self
            .inner
            .wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for notify in wakers.values() {
            notify.notify_waiters();
        }
    }

    /// Claims one particular job now, whatever its due time (it must be scheduled or retrying).
    /// For test helpers that force a run; workers use [`Backend::claim`].
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use fairq_worker::{Backend, MemoryBackend, NewJob};
    /// let store = MemoryBackend::new();
    /// let id = store.enqueue(NewJob::new("q", "k", vec![]).delay(Duration::from_secs(3600))).await.unwrap();
    /// let job = store.claim_now(id, Duration::from_secs(30)).unwrap();
    /// assert_eq!(job.claim.id, id);
    /// # });
    /// ```
    pub fn claim_now(&self, id: JobId, lease: Duration) -> Result<Job, BackendError> {
        self.with_store(|store, now| store.claim_id(id, lease, now))
    }

    /// The job `id` as a worker would receive it for its next attempt, without claiming it.
    /// For test helpers that replay a job.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use fairq_worker::{Backend, JobId, MemoryBackend, NewJob};
    /// let store = MemoryBackend::new();
    /// let id = store.enqueue(NewJob::new("q", "kind", vec![])).await.unwrap();
    /// assert_eq!(store.peek(id).unwrap().kind, "kind");
    /// assert!(store.peek(JobId(99)).is_none());
    /// # });
    /// ```
    pub fn peek(&self, id: JobId) -> Option<Job> {
        self.store().peek(id)
    }

    fn store(&self) -> MutexGuard<'_, Store> {
        self.inner
            .store
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn waker(&self, queue: &str) -> Arc<Notify> {
        let mut wakers = self
            .inner
            .wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        wakers
            .entry(queue.to_string())
            .or_insert_with(|| Arc::new(Notify::new()))
            .clone()
    }

    /// Runs `f` on the store at the clock's current time, then wakes queues that gained work.
    ///
    /// The wakers are notified with the store still locked (the lock order is store, then
    /// wakers; nothing takes them the other way round), so no list of woken queues is built.
    fn with_store<R>(&self, f: impl FnOnce(&mut Store, Millis) -> R) -> R {
        let mut store = self.store();
        let now = self.inner.clock.now();
        let result = f(&mut store, now);
        let mut wakers = None;
        store.drain_woken(|queue| {
            let wakers = wakers.get_or_insert_with(|| {
                self.inner
                    .wakers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
            });
            if let Some(notify) = wakers.get(queue) {
                notify.notify_waiters();
            }
        });
        result
    }
}

impl Backend for MemoryBackend {
    async fn enqueue(&self, job: NewJob) -> Result<JobId, BackendError> {
        self.with_store(|s, now| s.enqueue(job, now))
    }

    fn enqueue_many(
        &self,
        jobs: Vec<NewJob>,
    ) -> impl Future<Output = Result<Vec<JobId>, BackendError>> + Send {
        let this = self.clone();
        async move { this.with_store(|s, now| s.enqueue_many(jobs, now)) }
    }

    async fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        check_queue_name(queue)?;
        if self.is_paused(queue) {
            return Ok(Vec::new());
        }
        Ok(self.with_store(|s, now| s.claim(queue, max, lease, now)))
    }

    /// `settle` with one success, without the batch's vectors.
    async fn complete(&self, claim: Claim) -> Result<(), BackendError> {
        self.with_store(|s, now| s.complete(claim, now))
    }

    fn settle(
        &self,
        batch: Vec<Finished>,
    ) -> impl Future<Output = Result<Each<Settled>, BackendError>> + Send {
        let this = self.clone();
        async move {
            let random = Arc::clone(&this.inner.random);
            Ok(this.with_store(|s, now| s.settle(batch, now, &mut || random.next_u64())))
        }
    }

    fn release(
        &self,
        claims: Vec<Claim>,
    ) -> impl Future<Output = Result<Each<()>, BackendError>> + Send {
        let this = self.clone();
        async move { Ok(this.with_store(|s, now| s.release(claims, now))) }
    }

    fn heartbeat(
        &self,
        claim: Claim,
        lease: Duration,
    ) -> impl Future<Output = Result<Millis, BackendError>> + Send {
        let this = self.clone();
        async move { this.with_store(|s, now| s.heartbeat(claim, lease, now)) }
    }

    fn heartbeat_many(
        &self,
        claims: Vec<Claim>,
        lease: Duration,
    ) -> impl Future<Output = Result<Each<Millis>, BackendError>> + Send {
        let this = self.clone();
        async move {
            Ok(this.with_store(|s, now| {
                claims
                    .into_iter()
                    .map(|claim| s.heartbeat(claim, lease, now))
                    .collect()
            }))
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
            let random = Arc::clone(&this.inner.random);
            // A paused queue hands out nothing here either (the acker claims this way).
            let max = if this.is_paused(&queue) { 0 } else { max };
            let checked = check_queue_name(&queue);
            Ok(this.with_store(|s, now| {
                let settled = s.settle(batch, now, &mut || random.next_u64());
                let claimed = checked.map(|()| s.claim(&queue, max, lease, now));
                SettledAndClaimed { settled, claimed }
            }))
        }
    }

    fn rescue(&self, queue: &str) -> impl Future<Output = Result<u64, BackendError>> + Send {
        let this = self.clone();
        let queue = queue.to_string();
        async move {
            check_queue_name(&queue)?;
            let random = Arc::clone(&this.inner.random);
            Ok(this.with_store(|s, now| s.rescue(&queue, now, &mut || random.next_u64())))
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
            check_queue_name(&queue)?;
            check_hold_until(until)?;
            Ok(this.with_store(|s, now| s.hold_retries(&queue, until, now)))
        }
    }

    fn wait_for_jobs(&self, queue: &str, timeout: Duration) -> impl Future<Output = ()> + Send {
        let this = self.clone();
        let notify = self.waker(queue);
        let queue = queue.to_string();
        async move {
            let notified = notify.notified();
            tokio::pin!(notified);
            // Register before looking, so an enqueue in between is not missed.
            notified.as_mut().enable();
            let now = this.now();
            let wait = match this.store().due(&queue, now) {
                // A paused queue has nothing to hand out until it is resumed (a wake-up).
                Ok(()) if this.is_paused(&queue) => timeout,
                Ok(()) => return,
                Err(Some(at)) => timeout.min(Duration::from_millis(at.saturating_sub(now))),
                Err(None) => timeout,
            };
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    fn stats(&self) -> impl Future<Output = Result<Vec<QueueStats>, BackendError>> + Send {
        let this = self.clone();
        async move { Ok(this.store().stats()) }
    }

    fn live_counts(
        &self,
        queue: &str,
    ) -> impl Future<Output = Result<crate::LiveCounts, BackendError>> + Send {
        let counts = check_queue_name(queue).map(|()| self.store().counts(queue).into());
        async move { counts }
    }

    fn list(
        &self,
        filter: ListFilter,
    ) -> impl Future<Output = Result<Vec<JobInfo>, BackendError>> + Send {
        let this = self.clone();
        async move {
            filter.check()?;
            Ok(this.store().list(&filter))
        }
    }

    fn get(&self, id: JobId) -> impl Future<Output = Result<Option<JobInfo>, BackendError>> + Send {
        let this = self.clone();
        async move { Ok(this.store().get(id)) }
    }

    fn revive(
        &self,
        target: ReviveTarget,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send {
        let this = self.clone();
        async move {
            target.check()?;
            this.with_store(|s, now| s.revive(target, now))
        }
    }

    fn purge(&self, purge: Purge) -> impl Future<Output = Result<u64, BackendError>> + Send {
        let this = self.clone();
        async move {
            purge.check()?;
            Ok(this.with_store(|s, _| s.purge(&purge)))
        }
    }

    fn prune(
        &self,
        retention: Retention,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send {
        let this = self.clone();
        async move { Ok(this.with_store(|s, now| s.prune(&retention, now))) }
    }

    fn remove_queue(&self, queue: &str) -> impl Future<Output = Result<u64, BackendError>> + Send {
        let this = self.clone();
        let queue = queue.to_string();
        async move {
            check_queue_name(&queue)?;
            let removed = this.with_store(|s, _| s.remove_queue(&queue));
            // A paused queue is a queue too, even before its first job.
            let was_paused = match &removed {
                Ok(_) | Err(BackendError::UnknownQueue(_)) => this
                    .inner
                    .paused
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&queue),
                Err(_) => false,
            };
            match removed {
                Err(BackendError::UnknownQueue(_)) if was_paused => Ok(0),
                other => other,
            }
        }
    }
}
