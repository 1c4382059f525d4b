//! The store abstraction every backend implements.

use std::future::Future;
use std::time::Duration;

use fairq_core::job::{Millis, Outcome};
use fairq_core::stats::{RetryStats, Summary};
use serde::{Deserialize, Serialize};

use crate::error::BackendError;
use crate::job::{Claim, Failure, Job, JobId, JobInfo, JobStatus, NewJob, check_queue_name};
use crate::live_counts::LiveCounts;
use crate::retention::Retention;
use crate::settle::{Each, Finished, Settled, SettledAndClaimed};
use crate::status_counts::StatusCounts;

/// Which jobs [`Backend::list`] returns.
///
/// ```
/// use fairq_worker::{JobStatus, ListFilter};
/// let f = ListFilter::default().queue("mail").status(JobStatus::Dead).limit(10);
/// assert_eq!(f.limit, 10);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListFilter {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this status.
    pub status: Option<JobStatus>,
    /// Only ids greater than this (for paging).
    pub after: Option<JobId>,
    /// At most this many, ordered by id.
    pub limit: usize,
}

impl Default for ListFilter {
    fn default() -> Self {
        ListFilter {
            queue: None,
            status: None,
            after: None,
            limit: 100,
        }
    }
}

impl ListFilter {
    /// Restricts to one queue.
    ///
    /// ```
    /// assert_eq!(fairq_worker::ListFilter::default().queue("q").queue.as_deref(), Some("q"));
    /// ```
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Restricts to one status.
    ///
    /// ```
    /// use fairq_worker::{JobStatus, ListFilter};
    /// assert_eq!(ListFilter::default().status(JobStatus::Dead).status, Some(JobStatus::Dead));
    /// ```
    pub fn status(mut self, status: JobStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Sets the page size.
    ///
    /// ```
    /// assert_eq!(fairq_worker::ListFilter::default().limit(5).limit, 5);
    /// ```
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Refuses a queue filter no job can match (see [`check_queue_name`]): stores call it
    /// before they list, so a misspelled filter is an error on every store alike.
    ///
    /// ```
    /// use fairq_worker::ListFilter;
    /// assert!(ListFilter::default().check().is_ok());
    /// assert!(ListFilter::default().queue("mail").check().is_ok());
    /// assert!(ListFilter::default().queue("").check().is_err());
    /// ```
    pub fn check(&self) -> Result<(), BackendError> {
        check_queue_filter(self.queue.as_deref())
    }
}

/// [`check_queue_name`] for a queue filter that may be absent (every queue).
fn check_queue_filter(queue: Option<&str>) -> Result<(), BackendError> {
    queue.map_or(Ok(()), check_queue_name)
}

/// Which dead jobs [`Backend::revive`] brings back.
///
/// ```
/// use fairq_worker::{JobId, ReviveTarget};
/// let one = ReviveTarget::One(JobId(4));
/// let all = ReviveTarget::AllDead { queue: Some("mail".into()) };
/// assert_ne!(one, all);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReviveTarget {
    /// One dead job.
    One(JobId),
    /// Every dead job, optionally of one queue.
    AllDead {
        /// Only this queue.
        queue: Option<String>,
    },
}

impl ReviveTarget {
    /// Refuses a queue filter no job can match (see [`check_queue_name`]).
    ///
    /// ```
    /// use fairq_worker::{JobId, ReviveTarget};
    /// assert!(ReviveTarget::One(JobId(4)).check().is_ok());
    /// assert!(ReviveTarget::AllDead { queue: Some(String::new()) }.check().is_err());
    /// ```
    pub fn check(&self) -> Result<(), BackendError> {
        match self {
            ReviveTarget::One(_) => Ok(()),
            ReviveTarget::AllDead { queue } => check_queue_filter(queue.as_deref()),
        }
    }
}

/// Which jobs [`Backend::purge`] deletes. Running jobs are never purged.
///
/// ```
/// use fairq_worker::{JobStatus, Purge};
/// let p = Purge { queue: Some("mail".into()), status: Some(JobStatus::Dead) };
/// assert!(p.matches("mail", JobStatus::Dead));
/// assert!(!p.matches("mail", JobStatus::Running));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Purge {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this status (`None`: every status but running).
    pub status: Option<JobStatus>,
}

impl Purge {
    /// Refuses a queue filter no job can match (see [`check_queue_name`]).
    ///
    /// ```
    /// use fairq_worker::Purge;
    /// assert!(Purge::default().check().is_ok());
    /// let purge = Purge { queue: Some("a\0b".into()), status: None };
    /// assert!(purge.check().is_err());
    /// ```
    pub fn check(&self) -> Result<(), BackendError> {
        check_queue_filter(self.queue.as_deref())
    }

    /// Whether a job of `queue` in `status` is purged.
    ///
    /// ```
    /// use fairq_worker::{JobStatus, Purge};
    /// assert!(Purge::default().matches("any", JobStatus::Scheduled));
    /// ```
    pub fn matches(&self, queue: &str, status: JobStatus) -> bool {
        status != JobStatus::Running
            && self.queue.as_deref().is_none_or(|q| q == queue)
            && self.status.is_none_or(|s| s == status)
    }
}

/// One queue's numbers, as [`Backend::stats`] reports them.
///
/// ```
/// let s = fairq_worker::QueueStats::empty("mail");
/// assert_eq!(s.counts.total(), 0);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    /// The queue.
    pub queue: String,
    /// Jobs per status.
    pub counts: StatusCounts,
    /// Retry counters of finished jobs.
    pub retries: RetryStats,
    /// Run time of finished attempts (claim to completion), in milliseconds.
    pub processing_ms: Summary,
    /// When the oldest job now waiting for a retry first failed, if any (for health).
    pub oldest_error_at: Option<Millis>,
    /// When the next job waiting for a retry becomes due, if any: after a retry sweep
    /// stopped (see [`Backend::hold_retries`]), the time of the next sweep.
    #[serde(default)]
    pub next_retry_at: Option<Millis>,
}

impl QueueStats {
    /// Zero counts for `queue`.
    ///
    /// ```
    /// assert_eq!(fairq_worker::QueueStats::empty("q").queue, "q");
    /// ```
    pub fn empty(queue: impl Into<String>) -> Self {
        QueueStats {
            queue: queue.into(),
            counts: StatusCounts::default(),
            retries: RetryStats::default(),
            processing_ms: Summary::default(),
            oldest_error_at: None,
            next_retry_at: None,
        }
    }
}

/// A job store: durable (or not) home of jobs, shared by producers, workers and operators.
///
/// Every state change follows [`fairq_core::job::Lifecycle`], and what a failure or an
/// expired lease leads to is core's [`verdict`](fairq_core::job::verdict), so all stores agree
/// on semantics; the [conformance suite](crate#writing-a-store) checks that they do. Time comes
/// from the store's [`Clock`](crate::Clock), jitter from its [`Random`](crate::Random).
///
/// Claims are fair by key within a queue, with the snapshot-of-heads rule of
/// [`fairq_core::fair`]: a key that has one ready job waits for at most `2 (K - 1)` claims of
/// other keys' jobs, whatever their backlogs.
///
/// One exception, the same on every store: a ready job that leaves the fair order before its
/// turn, deleted ([`purge`](Self::purge), [`Inspect::cancel`](crate::Inspect::cancel)) or a
/// due retry held back by [`hold_retries`](Self::hold_retries), keeps its key's place there
/// until claims pass it. The key's next job queues behind such places as behind live jobs,
/// so until then it may wait one round (up to `K - 1` claims) longer for each place its key
/// still holds: after 50 jobs of one key are purged, that key's next job may wait for about
/// 50 claims of another key's backlog. (PostgreSQL keeps those places as `ghosts` on purpose,
/// so that the stores agree; the file store drops them when it is reopened, which starts a
/// fresh fair round.)
///
/// The worker's path is batched: [`claim`](Self::claim) takes many jobs,
/// [`settle`](Self::settle) records many finished attempts (successes and failures mixed)
/// and [`heartbeat_many`](Self::heartbeat_many) extends many leases, each in one call where
/// the store allows it. Fencing is per job: a stale lease refuses its own entry only.
///
/// A call that names one queue ([`claim`](Self::claim), the claim of
/// [`settle_and_claim`](Self::settle_and_claim), [`rescue`](Self::rescue),
/// [`hold_retries`](Self::hold_retries), [`live_counts`](Self::live_counts),
/// [`remove_queue`](Self::remove_queue)) or filters by one ([`list`](Self::list),
/// [`revive`](Self::revive), [`purge`](Self::purge)) refuses a name no job can have
/// ([`check_queue_name`]) with [`BackendError::Invalid`] and changes nothing, on every store.
pub trait Backend: Send + Sync + 'static {
    /// Adds one job; returns its id (or, for a duplicate unique key under
    /// [`OnConflict::Ignore`](crate::OnConflict::Ignore), the existing job's id).
    fn enqueue(&self, job: NewJob) -> impl Future<Output = Result<JobId, BackendError>> + Send;

    /// Adds many jobs at once, returning their ids in order.
    ///
    /// All or nothing where the store allows it: a job that cannot go in (malformed, a
    /// unique key held under [`OnConflict::Error`](crate::OnConflict::Error), an unknown
    /// dependency) refuses the call, and the memory, file and PostgreSQL stores then store
    /// none of its jobs. A store whose queues live apart may manage that per queue only: on
    /// Redis (each queue may be on another cluster node) the refused queue's jobs are left
    /// out and those of the call's other queues stay enqueued (see its README, "Enqueueing
    /// many jobs").
    fn enqueue_many(
        &self,
        jobs: Vec<NewJob>,
    ) -> impl Future<Output = Result<Vec<JobId>, BackendError>> + Send;

    /// Claims up to `max` due jobs of `queue`, fairly by key, each under a lease of `lease`.
    /// Returns fewer (or none) when fewer are due, and may return fewer than are due when
    /// all of them would not fit in one answer (the file store's client handle, whose
    /// answers come in messages of bounded size): a caller claims again for the rest.
    fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> impl Future<Output = Result<Vec<Job>, BackendError>> + Send;

    /// Records how each attempt of `batch` ended: a success finishes the job (and releases
    /// its dependents); a failure applies core's verdict (retry at a time, or dead).
    ///
    /// Returns one answer per entry, in order. An entry whose lease is no longer current
    /// (the job was rescued, released or finished) gets an error of its own, typically a
    /// stale-lease [`BackendError::Transition`], and the other entries still take effect. An
    /// `Err` for the whole call means nothing is known (the connection failed): the caller
    /// may send the batch again, and an entry that did take effect the first time is then
    /// refused as no longer running.
    fn settle(
        &self,
        batch: Vec<Finished>,
    ) -> impl Future<Output = Result<Each<Settled>, BackendError>> + Send;

    /// Marks a claimed job succeeded: [`settle`](Self::settle) with one entry. Refused with a
    /// stale-lease error when the lease was lost.
    fn complete(&self, claim: Claim) -> impl Future<Output = Result<(), BackendError>> + Send {
        async move {
            match one(self.settle(vec![Finished::succeeded(claim)]).await?)? {
                Settled::Succeeded => Ok(()),
                other => Err(BackendError::Store(
                    format!("a completion was settled as {other}").into(),
                )),
            }
        }
    }

    /// Records a failed attempt of `job`: [`settle`](Self::settle) with one entry; core's
    /// verdict decides between a retry and death.
    fn fail(
        &self,
        job: &Job,
        failure: Failure,
    ) -> impl Future<Output = Result<Outcome, BackendError>> + Send {
        let finished = Finished::new(job, Err(failure));
        async move {
            one(self.settle(vec![finished]).await?)?
                .outcome()
                .ok_or_else(|| BackendError::Store("a failure was settled as a success".into()))
        }
    }

    /// Hands claimed jobs back before their handlers started (a worker's prefetched jobs at
    /// shutdown): each becomes due again at once, its attempt refunded, its lease fenced.
    /// One answer per claim, in order.
    ///
    /// The default answers [`BackendError::Unsupported`]: such jobs then come back when their
    /// leases expire, as a rescue (which counts the attempt).
    fn release(
        &self,
        claims: Vec<Claim>,
    ) -> impl Future<Output = Result<Each<()>, BackendError>> + Send {
        let _ = claims;
        async { Err(BackendError::Unsupported("handing back claimed jobs")) }
    }

    /// Extends a lease to `now + lease`; returns the new deadline.
    fn heartbeat(
        &self,
        claim: Claim,
        lease: Duration,
    ) -> impl Future<Output = Result<Millis, BackendError>> + Send;

    /// Extends many leases to `now + lease`; one answer (the new deadline, or why not) per
    /// claim, in order. The default calls [`heartbeat`](Self::heartbeat) for each.
    fn heartbeat_many(
        &self,
        claims: Vec<Claim>,
        lease: Duration,
    ) -> impl Future<Output = Result<Each<Millis>, BackendError>> + Send {
        async move {
            let mut out = Vec::with_capacity(claims.len());
            for claim in claims {
                match self.heartbeat(claim, lease).await {
                    Err(e) if e.is_transient() => return Err(e),
                    answer => out.push(answer),
                }
            }
            Ok(out)
        }
    }

    /// Settles `batch`, then claims up to `max` due jobs of `queue`: a store may do both in
    /// one round trip (the default makes two calls). The claim happens only if the
    /// settlement succeeded as a whole.
    fn settle_and_claim(
        &self,
        batch: Vec<Finished>,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> impl Future<Output = Result<SettledAndClaimed, BackendError>> + Send {
        async move {
            let settled = self.settle(batch).await?;
            let claimed = self.claim(queue, max, lease).await;
            Ok(SettledAndClaimed { settled, claimed })
        }
    }

    /// Takes back every job of `queue` whose lease has expired (each counts as a failed
    /// attempt and goes through core's verdict); returns how many.
    fn rescue(&self, queue: &str) -> impl Future<Output = Result<u64, BackendError>> + Send;

    /// Holds back the retries of `queue`: every job waiting for a retry that would become due
    /// before `until` becomes due at `until` instead (jobs waiting for a first run, running
    /// jobs and later retries are left alone); returns how many moved. A worker calls it when
    /// a queue's [retry sweep](fairq_core::sweep) stops at a failed retry. An `until` past
    /// the end of the year 9999 is refused with [`BackendError::Invalid`]
    /// ([`check_hold_until`](crate::check_hold_until)).
    ///
    /// The default answers [`BackendError::Unsupported`]: the sweep then cannot hold retries
    /// back on this store, and each retry runs when its own backoff ends.
    fn hold_retries(
        &self,
        queue: &str,
        until: Millis,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send {
        let _ = (queue, until);
        async { Err(BackendError::Unsupported("holding retries back")) }
    }

    /// Readies the store for up to `calls` calls in flight at once, so that a worker's first
    /// claims and settlements do not pay for connecting: a store that keeps a pool of
    /// connections opens that many (up to the pool's size) and prepares its claim and
    /// settlement statements on each (statements do not depend on the queue). It changes no
    /// job. The default does nothing (a store with nothing to open).
    ///
    /// [`Worker::warm_up`](crate::Worker::warm_up) calls it once, with the calls of all its
    /// queues.
    ///
    /// ```
    /// use fairq_worker::{Backend, MemoryBackend};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryBackend::new();
    /// store.warm_up(6).await.unwrap();
    /// # });
    /// ```
    fn warm_up(&self, calls: usize) -> impl Future<Output = Result<(), BackendError>> + Send {
        let _ = calls;
        async { Ok(()) }
    }

    /// Waits until `queue` may have new due jobs, or `timeout`. Stores that can push
    /// notifications wake early; the default just sleeps, which makes the worker poll.
    fn wait_for_jobs(&self, queue: &str, timeout: Duration) -> impl Future<Output = ()> + Send {
        let _ = queue;
        tokio::time::sleep(timeout)
    }

    /// Whether a claim costs the store mostly the same whatever its size (a round trip and
    /// a durable commit), so that claiming more jobs at once is cheaper per job. A worker's
    /// adaptive prefetch depth (see [`QueueConfig::prefetch`](crate::QueueConfig::prefetch))
    /// then grows straight to its ceiling while slots wait for claims, instead of trying
    /// each doubling past twice its floor and keeping it only if it paid: the trials cost a
    /// fresh worker the first couple of dozen claims. The default, `false`, suits stores
    /// whose claim costs grow with its size (a Redis script runs as long as it has jobs to
    /// move, and blocks the server meanwhile), and in-process ones.
    ///
    /// ```
    /// use fairq_worker::{Backend, MemoryBackend};
    /// assert!(!MemoryBackend::new().claims_cost_mostly_fixed());
    /// ```
    fn claims_cost_mostly_fixed(&self) -> bool {
        false
    }

    /// Numbers per queue.
    fn stats(&self) -> impl Future<Output = Result<Vec<QueueStats>, BackendError>> + Send;

    /// How many of `queue`'s jobs wait or run, per status (all zero for an unknown queue).
    /// The worker reads it for its queue-depth gauges every rescue interval, so a store
    /// should answer it from the one queue's live jobs or counters: the default takes it
    /// from [`stats`](Backend::stats), which on the server stores reads every queue's
    /// history.
    ///
    /// ```
    /// use fairq_worker::{Backend, MemoryBackend, NewJob};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryBackend::new();
    /// store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    /// assert_eq!(store.live_counts("q").await.unwrap().scheduled, 1);
    /// assert_eq!(store.live_counts("other").await.unwrap().total(), 0);
    /// # });
    /// ```
    fn live_counts(
        &self,
        queue: &str,
    ) -> impl Future<Output = Result<LiveCounts, BackendError>> + Send {
        async move {
            check_queue_name(queue)?;
            Ok(self
                .stats()
                .await?
                .into_iter()
                .find(|s| s.queue == queue)
                .map(|s| LiveCounts::from(s.counts))
                .unwrap_or_default())
        }
    }

    /// Jobs matching `filter`, ordered by id.
    fn list(
        &self,
        filter: ListFilter,
    ) -> impl Future<Output = Result<Vec<JobInfo>, BackendError>> + Send;

    /// One job, finished or not (`None` once pruned or purged).
    fn get(&self, id: JobId) -> impl Future<Output = Result<Option<JobInfo>, BackendError>> + Send;

    /// Revives dead jobs (fresh retry budget, due now); returns how many.
    fn revive(
        &self,
        target: ReviveTarget,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send;

    /// Deletes matching jobs (never running ones); returns how many.
    fn purge(&self, purge: Purge) -> impl Future<Output = Result<u64, BackendError>> + Send;

    /// Deletes the finished jobs `retention` no longer keeps (succeeded jobs that finished,
    /// and dead jobs that died, longer ago than their ages; an age of `None` keeps that
    /// outcome); returns how many. Never touches a live job, nor a dead job that jobs are
    /// blocked on (deleting it would leave them blocked for good; it goes with the first
    /// prune after they are gone). A store may delete in steps (each its own transaction); a
    /// failure part way leaves the rest for the next prune.
    ///
    /// A bare [`Duration`] converts into a [`Retention`] that keeps both outcomes for as
    /// long: `store.prune(age.into())`.
    fn prune(&self, retention: Retention)
    -> impl Future<Output = Result<u64, BackendError>> + Send;

    /// Removes queue `queue` from the store, if it has no live job: its finished jobs
    /// (succeeded and dead, the queue's history), its counters and statistics, and whatever
    /// else the store keeps for it. Afterwards [`stats`](Self::stats) no longer lists it; a
    /// later enqueue to the same name starts a fresh queue. Returns how many finished jobs
    /// were deleted.
    ///
    /// Refused, changing nothing, with [`BackendError::QueueNotEmpty`] while the queue has a
    /// blocked, scheduled, running or retrying job, and with [`BackendError::UnknownQueue`]
    /// when the store has nothing of that name. Removing a queue never deletes a live job,
    /// even one enqueued while the removal runs (a store that deletes a long history in steps,
    /// as Redis does, may then have deleted part of the finished jobs before it refuses).
    /// Jobs of other queues that wait for a dead job of this queue keep waiting, as after
    /// [`purge`](Self::purge).
    ///
    /// The default answers [`BackendError::Unsupported`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::{Backend, BackendError, MemoryBackend, NewJob};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryBackend::new();
    /// store.enqueue(NewJob::new("typo", "k", vec![])).await?;
    /// let err = store.remove_queue("typo").await.unwrap_err();
    /// assert!(matches!(err, BackendError::QueueNotEmpty { live: 1, .. }));
    /// let job = store.claim("typo", 1, Duration::from_secs(30)).await?.remove(0);
    /// store.complete(job.claim).await?;
    /// assert_eq!(store.remove_queue("typo").await?, 1); // its one finished job went too
    /// assert!(store.stats().await?.is_empty());
    /// # Ok::<(), BackendError>(())
    /// # }).unwrap();
    /// ```
    fn remove_queue(&self, queue: &str) -> impl Future<Output = Result<u64, BackendError>> + Send {
        let _ = queue;
        async { Err(BackendError::Unsupported("removing queues")) }
    }
}

/// The single answer of a one-entry batch.
fn one<T>(answers: Each<T>) -> Result<T, BackendError> {
    answers
        .into_iter()
        .next()
        .unwrap_or_else(|| Err(BackendError::Store("the store answered nothing".into())))
}

/// A shared store is a store: lets a [`Worker`](crate::Worker) and other code use one
/// `Arc`-wrapped backend.
///
/// ```
/// use std::sync::Arc;
/// use fairq_worker::{Backend, MemoryBackend, NewJob};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = Arc::new(MemoryBackend::new());
/// let id = Backend::enqueue(&store, NewJob::new("q", "k", vec![])).await.unwrap();
/// assert!(store.get(id).await.unwrap().is_some());
/// # });
/// ```
impl<B: Backend> Backend for std::sync::Arc<B> {
    fn enqueue(&self, job: NewJob) -> impl Future<Output = Result<JobId, BackendError>> + Send {
        (**self).enqueue(job)
    }

    fn enqueue_many(
        &self,
        jobs: Vec<NewJob>,
    ) -> impl Future<Output = Result<Vec<JobId>, BackendError>> + Send {
        (**self).enqueue_many(jobs)
    }

    fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> impl Future<Output = Result<Vec<Job>, BackendError>> + Send {
        (**self).claim(queue, max, lease)
    }

    fn settle(
        &self,
        batch: Vec<Finished>,
    ) -> impl Future<Output = Result<Each<Settled>, BackendError>> + Send {
        (**self).settle(batch)
    }

    fn complete(&self, claim: Claim) -> impl Future<Output = Result<(), BackendError>> + Send {
        (**self).complete(claim)
    }

    fn fail(
        &self,
        job: &Job,
        failure: Failure,
    ) -> impl Future<Output = Result<Outcome, BackendError>> + Send {
        (**self).fail(job, failure)
    }

    fn release(
        &self,
        claims: Vec<Claim>,
    ) -> impl Future<Output = Result<Each<()>, BackendError>> + Send {
        (**self).release(claims)
    }

    fn heartbeat(
        &self,
        claim: Claim,
        lease: Duration,
    ) -> impl Future<Output = Result<Millis, BackendError>> + Send {
        (**self).heartbeat(claim, lease)
    }

    fn heartbeat_many(
        &self,
        claims: Vec<Claim>,
        lease: Duration,
    ) -> impl Future<Output = Result<Each<Millis>, BackendError>> + Send {
        (**self).heartbeat_many(claims, lease)
    }

    fn settle_and_claim(
        &self,
        batch: Vec<Finished>,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> impl Future<Output = Result<SettledAndClaimed, BackendError>> + Send {
        (**self).settle_and_claim(batch, queue, max, lease)
    }

    fn rescue(&self, queue: &str) -> impl Future<Output = Result<u64, BackendError>> + Send {
        (**self).rescue(queue)
    }

    fn hold_retries(
        &self,
        queue: &str,
        until: Millis,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send {
        (**self).hold_retries(queue, until)
    }

    fn warm_up(&self, calls: usize) -> impl Future<Output = Result<(), BackendError>> + Send {
        (**self).warm_up(calls)
    }

    fn wait_for_jobs(&self, queue: &str, timeout: Duration) -> impl Future<Output = ()> + Send {
        (**self).wait_for_jobs(queue, timeout)
    }

    fn claims_cost_mostly_fixed(&self) -> bool {
        (**self).claims_cost_mostly_fixed()
    }

    fn stats(&self) -> impl Future<Output = Result<Vec<QueueStats>, BackendError>> + Send {
        (**self).stats()
    }

    fn live_counts(
        &self,
        queue: &str,
    ) -> impl Future<Output = Result<LiveCounts, BackendError>> + Send {
        (**self).live_counts(queue)
    }

    fn list(
        &self,
        filter: ListFilter,
    ) -> impl Future<Output = Result<Vec<JobInfo>, BackendError>> + Send {
        (**self).list(filter)
    }

    fn get(&self, id: JobId) -> impl Future<Output = Result<Option<JobInfo>, BackendError>> + Send {
        (**self).get(id)
    }

    fn revive(
        &self,
        target: ReviveTarget,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send {
        (**self).revive(target)
    }

    fn purge(&self, purge: Purge) -> impl Future<Output = Result<u64, BackendError>> + Send {
        (**self).purge(purge)
    }

    fn prune(
        &self,
        retention: Retention,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send {
        (**self).prune(retention)
    }

    fn remove_queue(&self, queue: &str) -> impl Future<Output = Result<u64, BackendError>> + Send {
        (**self).remove_queue(queue)
    }
}
