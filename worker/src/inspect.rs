//! Operator queries beyond [`Backend`]: how each fairness key of a queue is served.
//!
//! A dashboard wants to show, per queue and per key (tenant), the backlog, the oldest job
//! waiting, how many jobs were served lately and how long they waited. [`Inspect`] answers
//! those questions. Every method has a provided version built from [`Backend::list`], so any
//! store gets them with one line (`impl Inspect for MyStore {}`); a store that can answer in
//! one query (a `GROUP BY` in SQL, one pass over its own memory) overrides them.
//!
//! The provided versions read jobs page by page and stop after a *budget* of jobs, so a huge
//! store costs a bounded amount per call; the answer then says it is incomplete
//! ([`Scan::complete`]).
//!
//! Two operator actions live here too, because not every store has them:
//! [`Inspect::cancel`] (delete one job that is not running) and [`Inspect::set_paused`]
//! (stop handing out a queue's jobs). [`Inspect::capabilities`] tells which a store has; both
//! are off by default.
//!
//! ```
//! use fairq_worker::{Backend, Inspect, MemoryBackend, NewJob};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let store = MemoryBackend::new();
//! for _ in 0..3 {
//!     store.enqueue(NewJob::new("mail", "send", vec![]).key("heavy")).await?;
//! }
//! store.enqueue(NewJob::new("mail", "send", vec![]).key("light")).await?;
//! let backlog = store.backlog_by_key("mail", store.now(), 10_000).await?;
//! let heavy = backlog.items.iter().find(|k| k.key.as_deref() == Some("heavy")).unwrap();
//! assert_eq!(heavy.due, 3);
//! assert!(backlog.complete);
//! # Ok::<(), fairq_worker::BackendError>(())
//! # }).unwrap();
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use fairq_core::job::{Millis, State};
use serde::{Deserialize, Serialize};

use crate::backend::{Backend, ListFilter};
use crate::error::BackendError;
use crate::job::{JobId, JobInfo, JobStatus};

/// Jobs read per [`Backend::list`] call by the provided methods.
const PAGE: usize = 500;

/// What a store can do beyond the queries every store answers.
///
/// ```
/// let caps = fairq_worker::Capabilities::default();
/// assert!(!caps.pause && !caps.cancel);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// [`Inspect::set_paused`] works: a paused queue's jobs are not claimed.
    pub pause: bool,
    /// [`Inspect::cancel`] works: one job that is not running can be deleted.
    pub cancel: bool,
}

/// The answer of a query that may stop early: the items found, and whether every job was read.
///
/// ```
/// let scan: fairq_worker::Scan<u32> = fairq_worker::Scan { items: vec![1], complete: false };
/// assert!(!scan.complete);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scan<T> {
    /// What was found.
    pub items: Vec<T>,
    /// False when the query stopped at its budget: counts are then lower bounds.
    pub complete: bool,
}

/// A job waiting to be served, named by id and the time it became due.
///
/// ```
/// let w = fairq_worker::Waiting { id: fairq_worker::JobId(4), since: 1_000 };
/// assert_eq!(w.since, 1_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiting {
    /// The job.
    pub id: JobId,
    /// When it became due (ms since the Unix epoch).
    pub since: Millis,
}

/// One fairness key's jobs in a queue that have not finished.
///
/// ```
/// let k = fairq_worker::KeyBacklog::new(Some("tenant-a".into()));
/// assert_eq!(k.waiting(), 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyBacklog {
    /// The key (`None`: jobs enqueued without one, which share a key).
    pub key: Option<String>,
    /// Due now and waiting for a worker (first runs and retries).
    pub due: u64,
    /// Waiting for their time (delayed first runs and retries).
    pub later: u64,
    /// Of those waiting (due or later), how many are retries.
    pub retrying: u64,
    /// Waiting for a dependency.
    pub blocked: u64,
    /// Held by workers.
    pub running: u64,
    /// The due job that has waited longest.
    pub oldest_due: Option<Waiting>,
}

impl KeyBacklog {
    /// Zero counts for `key`.
    ///
    /// ```
    /// assert_eq!(fairq_worker::KeyBacklog::new(None).running, 0);
    /// ```
    pub fn new(key: Option<String>) -> Self {
        KeyBacklog {
            key,
            due: 0,
            later: 0,
            retrying: 0,
            blocked: 0,
            running: 0,
            oldest_due: None,
        }
    }

    /// Jobs not yet finished and not running: due, later and blocked.
    ///
    /// ```
    /// let mut k = fairq_worker::KeyBacklog::new(None);
    /// k.due = 2;
    /// k.blocked = 1;
    /// assert_eq!(k.waiting(), 3);
    /// ```
    pub fn waiting(&self) -> u64 {
        self.due + self.later + self.blocked
    }

    /// Counts one unfinished job in state `state` (finished states are ignored) at `now`.
    ///
    /// ```
    /// use fairq_core::job::State;
    /// use fairq_worker::{JobId, KeyBacklog};
    /// let mut k = KeyBacklog::new(None);
    /// k.add(JobId(1), &State::Scheduled { run_at: 10 }, 20);
    /// k.add(JobId(2), &State::Retrying { run_at: 30 }, 20);
    /// assert_eq!((k.due, k.later, k.retrying), (1, 1, 1));
    /// assert_eq!(k.oldest_due.unwrap().id, JobId(1));
    /// ```
    pub fn add(&mut self, id: JobId, state: &State, now: Millis) {
        match *state {
            State::Blocked => self.blocked += 1,
            State::Running { .. } => self.running += 1,
            State::Scheduled { run_at } | State::Retrying { run_at } => {
                if matches!(state, State::Retrying { .. }) {
                    self.retrying += 1;
                }
                if run_at <= now {
                    self.due += 1;
                    let older = self
                        .oldest_due
                        .is_none_or(|w| (run_at, id) < (w.since, w.id));
                    if older {
                        self.oldest_due = Some(Waiting { id, since: run_at });
                    }
                } else {
                    self.later += 1;
                }
            }
            State::Succeeded { .. } | State::Dead { .. } => {}
        }
    }
}

/// The last attempt of one job: when it became due, when a worker took it, and when it
/// finished. Its wait is `started_at - run_at`.
///
/// ```
/// let s = fairq_worker::Started {
///     id: fairq_worker::JobId(1), key: None, run_at: 100, started_at: 130, finished_at: Some(150),
///     succeeded: true,
/// };
/// assert_eq!(s.wait_ms(), 30);
/// assert_eq!(s.run_ms(), Some(20));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    /// The job.
    pub id: JobId,
    /// Its fairness key.
    pub key: Option<String>,
    /// When the attempt became due.
    pub run_at: Millis,
    /// When a worker claimed it.
    pub started_at: Millis,
    /// When the attempt ended, if it did and the store knows (succeeded or dead jobs).
    pub finished_at: Option<Millis>,
    /// True when the attempt succeeded.
    pub succeeded: bool,
}

impl Started {
    /// How long the attempt waited for a worker after it became due.
    ///
    /// ```
    /// let s = fairq_worker::Started {
    ///     id: fairq_worker::JobId(1), key: None, run_at: 100, started_at: 90, finished_at: None,
    ///     succeeded: false,
    /// };
    /// assert_eq!(s.wait_ms(), 0); // claimed early by a forced run: no wait
    /// ```
    pub fn wait_ms(&self) -> u64 {
        self.started_at.saturating_sub(self.run_at)
    }

    /// How long the attempt ran, once it finished.
    ///
    /// ```
    /// let s = fairq_worker::Started {
    ///     id: fairq_worker::JobId(1), key: None, run_at: 0, started_at: 5, finished_at: None,
    ///     succeeded: false,
    /// };
    /// assert_eq!(s.run_ms(), None);
    /// ```
    pub fn run_ms(&self) -> Option<u64> {
        self.finished_at.map(|f| f.saturating_sub(self.started_at))
    }
}

/// The times of a job's last attempt as a store reports them: `(run_at, started_at)`, or
/// `None` when the job never started.
///
/// ```
/// use fairq_core::job::State;
/// use fairq_worker::{JobId, JobInfo};
/// let mut info = JobInfo::example(JobId(1), State::Scheduled { run_at: 5 });
/// assert_eq!(fairq_worker::inspect::attempt_times(&info), None);
/// info.run_at = 5;
/// info.started_at = Some(9);
/// assert_eq!(fairq_worker::inspect::attempt_times(&info), Some((5, 9)));
/// ```
pub fn attempt_times(info: &JobInfo) -> Option<(Millis, Millis)> {
    info.started_at.map(|started| (info.run_at, started))
}

/// What a job's last attempt looked like, if it started at or after `since`.
fn started_since(info: &JobInfo, since: Millis) -> Option<Started> {
    let (run_at, started_at) = attempt_times(info)?;
    if started_at < since {
        return None;
    }
    let (finished_at, succeeded) = match info.state {
        State::Succeeded { at } => (Some(at), true),
        State::Dead { at, .. } => (Some(at), false),
        State::Running { .. } => (None, false),
        // Waiting for a retry (or handed back, or revived): its `run_at` is its next due
        // time and its last attempt's end is not kept, so it is left out, as the memory
        // store leaves it out.
        _ => return None,
    };
    Some(Started {
        id: info.id,
        key: info.key.clone(),
        run_at,
        started_at,
        finished_at,
        succeeded,
    })
}

/// Reads the jobs of `queue` in each of `statuses`, page by page, until `budget` jobs were
/// read; calls `each` on every job. Returns false when the budget ran out first.
async fn scan_jobs<B: Backend + ?Sized>(
    store: &B,
    queue: &str,
    statuses: &[JobStatus],
    budget: usize,
    mut each: impl FnMut(&JobInfo) + Send,
) -> Result<bool, BackendError> {
    let mut left = budget;
    for &status in statuses {
        let mut after = None;
        loop {
            if left == 0 {
                return Ok(false);
            }
            let limit = PAGE.min(left);
            let page = store
                .list(ListFilter {
                    queue: Some(queue.to_string()),
                    status: Some(status),
                    after,
                    limit,
                })
                .await?;
            left -= page.len();
            for info in &page {
                each(info);
            }
            match page.last() {
                Some(last) if page.len() == limit => after = Some(last.id),
                _ => break,
            }
        }
    }
    Ok(true)
}

/// Operator queries per fairness key, and the actions only some stores have.
///
/// Implement it with one line to get the provided versions, which read jobs through
/// [`Backend::list`]:
///
/// ```
/// # use fairq_worker::*;
/// # use std::time::Duration;
/// # use fairq_core::job::Millis;
/// # struct MyStore(MemoryBackend);
/// # impl Backend for MyStore {
/// #     async fn enqueue(&self, j: NewJob) -> Result<JobId, BackendError> { self.0.enqueue(j).await }
/// #     async fn enqueue_many(&self, j: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> { self.0.enqueue_many(j).await }
/// #     async fn claim(&self, q: &str, m: usize, l: Duration) -> Result<Vec<Job>, BackendError> { self.0.claim(q, m, l).await }
/// #     async fn settle(&self, b: Vec<Finished>) -> Result<Each<Settled>, BackendError> { self.0.settle(b).await }
/// #     async fn heartbeat(&self, c: Claim, l: Duration) -> Result<Millis, BackendError> { self.0.heartbeat(c, l).await }
/// #     async fn rescue(&self, q: &str) -> Result<u64, BackendError> { self.0.rescue(q).await }
/// #     async fn stats(&self) -> Result<Vec<QueueStats>, BackendError> { self.0.stats().await }
/// #     async fn list(&self, f: ListFilter) -> Result<Vec<JobInfo>, BackendError> { self.0.list(f).await }
/// #     async fn get(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> { self.0.get(id).await }
/// #     async fn revive(&self, t: ReviveTarget) -> Result<u64, BackendError> { self.0.revive(t).await }
/// #     async fn purge(&self, p: Purge) -> Result<u64, BackendError> { self.0.purge(p).await }
/// #     async fn prune(&self, r: fairq_worker::Retention) -> Result<u64, BackendError> { self.0.prune(r).await }
/// # }
/// impl Inspect for MyStore {}
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MyStore(MemoryBackend::new());
/// store.enqueue(NewJob::new("q", "k", vec![]).key("a")).await.unwrap();
/// let backlog = store.backlog_by_key("q", store.0.now(), 1_000).await.unwrap();
/// assert_eq!(backlog.items[0].due, 1);
/// assert!(!store.capabilities().cancel);
/// # });
/// ```
pub trait Inspect: Backend {
    /// Which optional actions this store supports (none by default).
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// The unfinished jobs of `queue` per fairness key at `now`, ordered by key (`None`
    /// first). Reads at most `budget` jobs.
    fn backlog_by_key(
        &self,
        queue: &str,
        now: Millis,
        budget: usize,
    ) -> impl Future<Output = Result<Scan<KeyBacklog>, BackendError>> + Send {
        async move {
            let mut keys: BTreeMap<Option<String>, KeyBacklog> = BTreeMap::new();
            let statuses = [
                JobStatus::Scheduled,
                JobStatus::Retrying,
                JobStatus::Running,
                JobStatus::Blocked,
            ];
            let complete = scan_jobs(self, queue, &statuses, budget, |info| {
                keys.entry(info.key.clone())
                    .or_insert_with(|| KeyBacklog::new(info.key.clone()))
                    .add(info.id, &info.state, now);
            })
            .await?;
            Ok(Scan {
                items: keys.into_values().collect(),
                complete,
            })
        }
    }

    /// The last attempts of `queue`'s jobs that started at or after `since`, in no particular
    /// order: running, succeeded and dead jobs. A job that ran several times counts once,
    /// with its last attempt. A job waiting for a retry is left out (its last attempt's
    /// times are gone: its due time is the next attempt's). Reads at most `budget` jobs.
    fn started_since(
        &self,
        queue: &str,
        since: Millis,
        budget: usize,
    ) -> impl Future<Output = Result<Scan<Started>, BackendError>> + Send {
        async move {
            let mut items = Vec::new();
            let statuses = [JobStatus::Running, JobStatus::Succeeded, JobStatus::Dead];
            let complete = scan_jobs(self, queue, &statuses, budget, |info| {
                items.extend(started_since(info, since));
            })
            .await?;
            Ok(Scan { items, complete })
        }
    }

    /// Deletes job `id` unless it is running (a waiting job is cancelled this way). Stores
    /// without [`Capabilities::cancel`] refuse with [`BackendError::Invalid`].
    fn cancel(&self, id: JobId) -> impl Future<Output = Result<(), BackendError>> + Send {
        let _ = id;
        async {
            Err(BackendError::Invalid(
                "this store cannot cancel one job".into(),
            ))
        }
    }

    /// Pauses (`true`) or resumes (`false`) handing out `queue`'s jobs. Stores without
    /// [`Capabilities::pause`] refuse with [`BackendError::Invalid`].
    fn set_paused(
        &self,
        queue: &str,
        paused: bool,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        let _ = (queue, paused);
        async {
            Err(BackendError::Invalid(
                "this store cannot pause queues".into(),
            ))
        }
    }

    /// The queues paused now (none for stores that cannot pause).
    fn paused(&self) -> impl Future<Output = Result<Vec<String>, BackendError>> + Send {
        async { Ok(Vec::new()) }
    }
}

/// A shared store answers the same queries.
///
/// ```
/// use std::sync::Arc;
/// use fairq_worker::{Inspect, MemoryBackend};
/// assert!(Arc::new(MemoryBackend::new()).capabilities().cancel);
/// ```
impl<B: Inspect> Inspect for Arc<B> {
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }

    fn backlog_by_key(
        &self,
        queue: &str,
        now: Millis,
        budget: usize,
    ) -> impl Future<Output = Result<Scan<KeyBacklog>, BackendError>> + Send {
        (**self).backlog_by_key(queue, now, budget)
    }

    fn started_since(
        &self,
        queue: &str,
        since: Millis,
        budget: usize,
    ) -> impl Future<Output = Result<Scan<Started>, BackendError>> + Send {
        (**self).started_since(queue, since, budget)
    }

    fn cancel(&self, id: JobId) -> impl Future<Output = Result<(), BackendError>> + Send {
        (**self).cancel(id)
    }

    fn set_paused(
        &self,
        queue: &str,
        paused: bool,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        (**self).set_paused(queue, paused)
    }

    fn paused(&self) -> impl Future<Output = Result<Vec<String>, BackendError>> + Send {
        (**self).paused()
    }
}
