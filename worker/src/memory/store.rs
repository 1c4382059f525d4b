//! The in-memory store's state: plain data and functions of `(state, request, now)`.
//!
//! [`MemoryBackend`](super::MemoryBackend) wraps one [`Store`] in a mutex and reads the time
//! from its clock; everything that decides lives here, so it can be driven step by step.
//!
//! Durable stores reuse it as their state machine: they apply each request to a [`Store`],
//! ask it which jobs changed ([`Store::take_changed`]), persist those jobs' [`Record`]s (which
//! are `serde` types), and after a restart rebuild the store with [`Store::restore`].
//!
//! ```
//! use fairq_worker::memory::store::Store;
//! use fairq_worker::NewJob;
//!
//! let mut store = Store::default();
//! store.track_changes();
//! let ids = store.enqueue_many(vec![NewJob::new("mail", "welcome", vec![])], 1_000).unwrap();
//! assert_eq!(store.take_changed().into_iter().collect::<Vec<_>>(), ids);
//!
//! // Persist the records, then rebuild an equal store from them.
//! let saved: Vec<_> = ids.iter().map(|id| (*id, store.record(*id).unwrap().clone())).collect();
//! let mut again = Store::restore(saved, store.next_id(), 1_000);
//! assert_eq!(again.claim("mail", 1, std::time::Duration::from_secs(30), 1_000).len(), 1);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fairq_core::fair::FairQueue;
use fairq_core::job::{Lifecycle, Millis, Outcome, Setback, State, TransitionError};
use fairq_core::retry::RetryPolicy;
use fairq_core::stats::{Histogram, RetryStats};
use hashbrown::{HashMap, HashSet};
use serde::{Deserialize, Serialize};

use crate::backend::{ListFilter, Purge, QueueStats, ReviveTarget};
use crate::error::BackendError;
use crate::job::{Claim, Failure, Job, JobId, JobInfo, JobStatus, NewJob, OnConflict};
use crate::retention::Retention;
use crate::retention::expired_at;
use crate::settle::{Each, Finished, Settled};
use crate::status_counts::StatusCounts;

mod inspect;
mod jobs;
mod unique;

use jobs::Jobs;
use unique::UniqueKeys;

/// The message recorded when a job's lease expires.
pub(crate) const LEASE_EXPIRED: &str = "lease expired: the worker stopped renewing it";

/// One stored job: everything a store must persist to rebuild it with [`Store::restore`].
///
/// ```
/// use fairq_worker::memory::store::Store;
/// use fairq_worker::{JobStatus, NewJob};
/// let mut store = Store::default();
/// let id = store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 5).unwrap()[0];
/// let record = store.record(id).unwrap();
/// assert_eq!((record.queue(), record.status()), ("q", JobStatus::Scheduled));
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    queue: String,
    kind: String,
    key: Option<String>,
    payload: Vec<u8>,
    retry: RetryPolicy,
    unique_key: Option<String>,
    depends_on: Option<JobId>,
    metadata: BTreeMap<String, String>,
    enqueued_at: Millis,
    life: Lifecycle,
    last_error: Option<String>,
    /// When the job's current run of failures began (cleared by success or revival).
    error_since: Option<Millis>,
    /// When the current or last attempt was claimed.
    claimed_at: Millis,
    /// When the job last became due (schedule, retry time, release or revival).
    due_at: Millis,
    /// Generation of the job's live entry in the ready queue; older entries are stale.
    #[serde(skip)]
    ready_gen: u64,
}

impl Record {
    /// The job as operators see it.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// let id = store.enqueue_many(vec![NewJob::new("q", "kind", vec![])], 0).unwrap()[0];
    /// assert_eq!(store.record(id).unwrap().info(id).kind, "kind");
    /// ```
    pub fn info(&self, id: JobId) -> JobInfo {
        JobInfo {
            id,
            queue: self.queue.clone(),
            kind: self.kind.clone(),
            key: self.key.clone(),
            state: *self.life.state(),
            attempts: self.life.attempts(),
            enqueued_at: self.enqueued_at,
            last_error: self.last_error.clone(),
            unique_key: self.unique_key.clone(),
            depends_on: self.depends_on,
            payload: self.payload.clone(),
            metadata: self.metadata.clone(),
            // A blocked job has no due time until its dependency succeeds.
            run_at: if *self.life.state() == State::Blocked {
                0
            } else {
                self.due_at
            },
            started_at: (self.life.last_token() > 0).then_some(self.claimed_at),
        }
    }

    /// The running job as its worker receives it; `key` is the record's key (the claim
    /// passes the copy it popped from the fair queue, so no other copy is made).
    fn job(&self, id: JobId, key: Option<String>) -> Option<Job> {
        let State::Running { lease } = *self.life.state() else {
            return None;
        };
        Some(Job {
            claim: Claim {
                id,
                token: lease.token,
            },
            queue: self.queue.clone(),
            kind: self.kind.clone(),
            key,
            payload: self.payload.clone(),
            attempt: lease.attempt,
            lease_deadline: lease.deadline,
            enqueued_at: self.enqueued_at,
            run_at: self.due_at,
            retry: self.retry.clone(),
            metadata: self.metadata.clone(),
        })
    }

    /// The job's status.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::{JobStatus, NewJob};
    /// let mut store = Store::default();
    /// let id = store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap()[0];
    /// assert_eq!(store.record(id).unwrap().status(), JobStatus::Scheduled);
    /// ```
    pub fn status(&self) -> JobStatus {
        JobStatus::of(self.life.state())
    }

    /// The job's queue.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// let id = store.enqueue_many(vec![NewJob::new("mail", "k", vec![])], 0).unwrap()[0];
    /// assert_eq!(store.record(id).unwrap().queue(), "mail");
    /// ```
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The job's lifecycle (state, attempts, last lease token).
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// let id = store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap()[0];
    /// assert_eq!(store.record(id).unwrap().lifecycle().attempts(), 0);
    /// ```
    pub fn lifecycle(&self) -> &Lifecycle {
        &self.life
    }

    /// When the current or last attempt was claimed (0: never).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// let id = store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap()[0];
    /// store.claim("q", 1, Duration::from_secs(1), 7);
    /// assert_eq!(store.record(id).unwrap().claimed_at(), 7);
    /// ```
    pub fn claimed_at(&self) -> Millis {
        self.claimed_at
    }

    /// Ends a running job's lease at `now` at the latest, so that [`Store::rescue`] takes it
    /// back. For a store reopened after its process died: no worker holding a lease survived.
    /// Other states are left alone.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// let id = store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap()[0];
    /// store.claim("q", 1, Duration::from_secs(60), 0);
    /// let mut record = store.record(id).unwrap().clone();
    /// record.expire_lease(10);
    /// let mut reopened = Store::restore(vec![(id, record)], store.next_id(), 10);
    /// assert_eq!(reopened.rescue("q", 10, &mut || 0), 1);
    /// ```
    pub fn expire_lease(&mut self, now: Millis) {
        if let State::Running { mut lease } = *self.life.state() {
            lease.deadline = lease.deadline.min(now);
            self.life = Lifecycle::restore(
                State::Running { lease },
                self.life.attempts(),
                self.life.last_token(),
            );
        }
    }

    fn finished_at(&self) -> Option<Millis> {
        match *self.life.state() {
            State::Succeeded { at } | State::Dead { at, .. } => Some(at),
            _ => None,
        }
    }
}

/// The part of a [`Record`] that changes after the job is enqueued (its lifecycle, last
/// error and times); queue, kind, key, payload, policy and metadata never change. A durable
/// store can persist a job's full record once and only its progress on later changes.
///
/// ```
/// use std::time::Duration;
/// use fairq_worker::memory::store::Store;
/// use fairq_worker::NewJob;
/// let mut store = Store::default();
/// let id = store.enqueue_many(vec![NewJob::new("q", "k", vec![7; 100])], 0).unwrap()[0];
/// let mut saved = store.record(id).unwrap().clone();
/// store.claim("q", 1, Duration::from_secs(30), 5);
/// saved.set_progress(store.record(id).unwrap().progress());
/// assert_eq!(saved.info(id), store.record(id).unwrap().info(id));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    life: Lifecycle,
    last_error: Option<String>,
    error_since: Option<Millis>,
    claimed_at: Millis,
    due_at: Millis,
}

impl Record {
    /// The job's [`Progress`].
    pub fn progress(&self) -> Progress {
        Progress {
            life: self.life,
            last_error: self.last_error.clone(),
            error_since: self.error_since,
            claimed_at: self.claimed_at,
            due_at: self.due_at,
        }
    }

    /// Replaces the job's progress with a saved one (rebuilding a record before
    /// [`Store::restore`]).
    pub fn set_progress(&mut self, progress: Progress) {
        self.life = progress.life;
        self.last_error = progress.last_error;
        self.error_since = progress.error_since;
        self.claimed_at = progress.claimed_at;
        self.due_at = progress.due_at;
    }
}

/// One queue's scheduling structures and counters.
#[derive(Debug)]
struct QueueState {
    /// Due jobs, fair by key. Entries whose generation is no longer the job's are skipped.
    ready: FairQueue<Option<String>, (JobId, u64)>,
    /// Jobs waiting for time (scheduled or retrying), by due time then id.
    timed: BTreeSet<(Millis, JobId)>,
    /// Jobs held by workers.
    running: HashSet<JobId>,
    /// The queue's name, shared with the list of woken queues.
    name: Arc<str>,
    /// True while the queue is in [`Store::woken`].
    woken: bool,
    retries: RetryStats,
    /// Claim-to-finish time of attempts, in milliseconds.
    processing: Box<Histogram>,
}

impl QueueState {
    fn new(name: &str) -> Self {
        QueueState {
            ready: FairQueue::unbounded(),
            timed: BTreeSet::new(),
            running: HashSet::new(),
            name: Arc::from(name),
            woken: false,
            retries: RetryStats::default(),
            processing: Box::new(Histogram::new()),
        }
    }
}

/// How one job of an `enqueue_many` batch resolves.
enum Plan {
    /// A new job gets this id.
    New(JobId),
    /// A duplicate unique key under [`OnConflict::Ignore`]: the existing job's id.
    Existing(JobId),
}

/// Every job and queue of an in-memory store: the reference state machine of fairq's job
/// semantics, with time passed in.
///
/// ```
/// use std::time::Duration;
/// use fairq_worker::memory::store::Store;
/// use fairq_worker::NewJob;
/// let mut store = Store::default();
/// store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap();
/// let jobs = store.claim("q", 10, Duration::from_secs(30), 0);
/// store.complete(jobs[0].claim, 5).unwrap();
/// assert_eq!(store.counts("q").succeeded, 1);
/// ```
#[derive(Debug, Default)]
pub struct Store {
    next_id: u64,
    jobs: Jobs,
    queues: HashMap<String, QueueState>,
    /// Unique keys of unfinished jobs.
    unique: UniqueKeys,
    /// Blocked jobs per dependency.
    dependents: HashMap<JobId, Vec<JobId>>,
    /// Queues that gained due jobs, or an earlier next due time, since the last
    /// [`Store::take_woken`] (each once: its
    /// [`QueueState::woken`] is set while it is listed).
    woken: Vec<Arc<str>>,
    /// Jobs changed since the last [`Store::take_changed`], once tracking is on.
    changed: Option<BTreeSet<JobId>>,
    /// Succeeded jobs are deleted when their success is recorded (see
    /// [`Store::set_keep_succeeded`]).
    forget_succeeded: bool,
}

/// The state of queue `name`, created empty on first use (the name is copied only then).
fn queue_entry<'a>(queues: &'a mut HashMap<String, QueueState>, name: &str) -> &'a mut QueueState {
    queues
        .entry_ref(name)
        .or_insert_with(|| QueueState::new(name))
}

/// Notes that job `id` changed, if changes are tracked.
fn touch(changed: &mut Option<BTreeSet<JobId>>, id: JobId) {
    if let Some(set) = changed {
        set.insert(id);
    }
}

fn transition(id: JobId) -> impl FnOnce(TransitionError) -> BackendError {
    move |source| BackendError::Transition { id, source }
}

impl Store {
    /// Rebuilds a store from persisted records (in any order) and the id counter
    /// ([`Store::next_id`]) at the time they were saved; new jobs get ids above both.
    ///
    /// Jobs waiting for time go back to the time-ordered set; jobs already due join their
    /// queue's fair queue ordered by the time they became due (then by id), which is the order
    /// in which the store pushed them, so a restored queue serves the same per-key order and
    /// starts a fresh fair round. Blocked jobs wait for their dependency again, running jobs
    /// keep their leases, and unique keys of unfinished jobs are taken again. Queue counters
    /// start from zero unless set with [`Store::set_retry_stats`].
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::{JobStatus, NewJob};
    /// let mut store = Store::default();
    /// let id = store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap()[0];
    /// let record = store.record(id).unwrap().clone();
    /// let mut restored = Store::restore(vec![(id, record)], store.next_id(), 0);
    /// assert_eq!(restored.counts("q").get(JobStatus::Scheduled), 1);
    /// let new = restored.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap()[0];
    /// assert!(new > id);
    /// ```
    pub fn restore(
        records: impl IntoIterator<Item = (JobId, Record)>,
        next_id: u64,
        now: Millis,
    ) -> Store {
        let mut store = Store {
            next_id,
            ..Store::default()
        };
        let records: BTreeMap<JobId, Record> = records.into_iter().collect();
        let mut due: Vec<(Millis, JobId)> = Vec::new();
        for (&id, record) in &records {
            store.next_id = store.next_id.max(id.0);
            let queue = queue_entry(&mut store.queues, &record.queue);
            match *record.life.state() {
                State::Running { .. } => {
                    queue.running.insert(id);
                }
                State::Blocked => {
                    if let Some(dep) = record.depends_on.filter(|d| records.contains_key(d)) {
                        store.dependents.entry(dep).or_default().push(id);
                    }
                }
                _ => match record.life.due_at() {
                    Some(at) if at > now => {
                        queue.timed.insert((at, id));
                    }
                    Some(_) => due.push((record.due_at, id)),
                    None => {}
                },
            }
            if !record.life.state().is_final() {
                if let Some(unique) = &record.unique_key {
                    store.unique.insert(&record.queue, unique, id);
                }
            }
        }
        store.jobs = Jobs::from_records(records);
        due.sort_unstable();
        for (_, id) in due {
            let Some(record) = store.jobs.get_mut(&id) else {
                continue;
            };
            record.ready_gen = 1;
            if let Some(queue) = store.queues.get_mut(record.queue.as_str()) {
                // An unbounded queue never refuses a push.
                queue.ready.push(record.key.clone(), (id, 1)).ok();
            }
        }
        store
    }

    /// Starts recording which jobs change, for [`Store::take_changed`]. Off by default, so a
    /// store that persists nothing pays nothing.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap();
    /// assert!(store.take_changed().is_empty()); // not tracked yet
    /// store.track_changes();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap();
    /// assert_eq!(store.take_changed().len(), 1);
    /// ```
    pub fn track_changes(&mut self) {
        self.changed.get_or_insert_with(BTreeSet::new);
    }

    /// The jobs whose [`Record`] changed (or that were deleted) since the last call, once
    /// [`Store::track_changes`] is on. A job in the set without a record was deleted.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::{NewJob, Purge};
    /// let mut store = Store::default();
    /// store.track_changes();
    /// let id = store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap()[0];
    /// store.take_changed();
    /// store.purge(&Purge::default());
    /// assert!(store.take_changed().contains(&id));
    /// assert!(store.record(id).is_none());
    /// ```
    pub fn take_changed(&mut self) -> BTreeSet<JobId> {
        self.changed
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The stored record of job `id`.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// assert!(Store::default().record(fairq_worker::JobId(1)).is_none());
    /// ```
    pub fn record(&self, id: JobId) -> Option<&Record> {
        self.jobs.get(&id)
    }

    /// The highest id handed out so far (0 when none): the counter to persist next to the
    /// records for [`Store::restore`].
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![]); 3], 0).unwrap();
    /// assert_eq!(store.next_id(), 3);
    /// ```
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// The retry counters of `queue`, if the queue exists.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap();
    /// assert_eq!(store.retry_stats("q").unwrap().ok, 0);
    /// assert!(store.retry_stats("other").is_none());
    /// ```
    pub fn retry_stats(&self, queue: &str) -> Option<RetryStats> {
        self.queues.get(queue).map(|q| q.retries)
    }

    /// Sets the retry counters of `queue` (creating the queue), to restore persisted ones.
    ///
    /// ```
    /// use fairq_core::stats::RetryStats;
    /// use fairq_worker::memory::store::Store;
    /// let mut store = Store::default();
    /// store.set_retry_stats("q", RetryStats { ok: 4, ..Default::default() });
    /// assert_eq!(store.stats()[0].retries.ok, 4);
    /// ```
    pub fn set_retry_stats(&mut self, queue: &str, retries: RetryStats) {
        queue_entry(&mut self.queues, queue).retries = retries;
    }

    /// Queues that may have new due jobs since the last call, or whose earliest job waiting
    /// for time became due sooner (a waiter then works out its sleep again).
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap();
    /// assert!(store.take_woken().contains("q"));
    /// ```
    pub fn take_woken(&mut self) -> BTreeSet<String> {
        let mut woken = BTreeSet::new();
        self.drain_woken(|queue| {
            woken.insert(queue.to_string());
        });
        woken
    }

    /// Hands each queue that may have new due jobs since the last call to `f`, once, and
    /// forgets them: [`Store::take_woken`] without building a set.
    pub(crate) fn drain_woken(&mut self, mut f: impl FnMut(&str)) {
        for name in self.woken.drain(..) {
            if let Some(queue) = self.queues.get_mut(&*name) {
                queue.woken = false;
            }
            f(&name);
        }
    }

    /// Lists `queue` as woken (once until the next drain).
    fn wake(woken: &mut Vec<Arc<str>>, queue: &mut QueueState) {
        if !queue.woken {
            queue.woken = true;
            woken.push(Arc::clone(&queue.name));
        }
    }

    /// Adds one job: [`Store::enqueue_many`] with a batch of one, without the batch's
    /// vectors.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// let id = store.enqueue(NewJob::new("q", "k", vec![]), 0).unwrap();
    /// assert_eq!(store.next_id(), id.0);
    /// assert!(store.enqueue(NewJob::new("", "k", vec![]), 0).is_err());
    /// ```
    pub fn enqueue(&mut self, job: NewJob, now: Millis) -> Result<JobId, BackendError> {
        match self.plan(&job, now, &HashMap::new(), self.next_id)? {
            Plan::Existing(id) => Ok(id),
            Plan::New(id) => {
                self.insert(id, job, now);
                self.next_id = id.0;
                Ok(id)
            }
        }
    }

    /// How `job` would resolve if enqueued now, `next` being the last id handed out and
    /// `batch` the unique keys taken by earlier jobs of its batch. Changes nothing.
    fn plan(
        &self,
        job: &NewJob,
        now: Millis,
        batch: &HashMap<(&str, &str), JobId>,
        next: u64,
    ) -> Result<Plan, BackendError> {
        job.check(now)?;
        if let Some(dep) = job.depends_on {
            if !self.jobs.contains_key(&dep) {
                return Err(BackendError::UnknownDependency(dep));
            }
        }
        if let Some(unique) = &job.unique_key {
            let taken = self
                .unique
                .get(&job.queue, unique)
                .or_else(|| batch.get(&(job.queue.as_str(), unique.as_str())).copied());
            if let Some(existing) = taken {
                return match job.on_conflict {
                    OnConflict::Error => Err(BackendError::Duplicate {
                        queue: job.queue.clone(),
                        key: unique.clone(),
                        existing,
                    }),
                    OnConflict::Ignore => Ok(Plan::Existing(existing)),
                };
            }
        }
        Ok(Plan::New(JobId(next + 1)))
    }

    /// Adds jobs, all or nothing.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// let ids = store.enqueue_many(vec![NewJob::new("q", "k", vec![]); 2], 0).unwrap();
    /// assert_eq!(ids.len(), 2);
    /// assert!(store.enqueue_many(vec![NewJob::new("", "k", vec![])], 0).is_err());
    /// ```
    pub fn enqueue_many(
        &mut self,
        jobs: Vec<NewJob>,
        now: Millis,
    ) -> Result<Vec<JobId>, BackendError> {
        // Validate the whole batch before changing anything.
        crate::job::check_call_size(&jobs)?;
        let mut plans = Vec::with_capacity(jobs.len());
        let mut batch_unique: HashMap<(&str, &str), JobId> = HashMap::new();
        let mut next = self.next_id;
        for job in &jobs {
            let plan = self.plan(job, now, &batch_unique, next)?;
            if let Plan::New(id) = plan {
                next = id.0;
                if let Some(unique) = &job.unique_key {
                    batch_unique.insert((job.queue.as_str(), unique.as_str()), id);
                }
            }
            plans.push(plan);
        }
        drop(batch_unique); // it borrows the batch's names

        let mut ids = Vec::with_capacity(plans.len());
        for (job, plan) in jobs.into_iter().zip(plans) {
            match plan {
                Plan::Existing(id) => ids.push(id),
                Plan::New(id) => {
                    self.insert(id, job, now);
                    ids.push(id);
                }
            }
        }
        self.next_id = next;
        Ok(ids)
    }

    fn insert(&mut self, id: JobId, job: NewJob, now: Millis) {
        let run_at = job.schedule.run_at(now);
        let blocked = job.depends_on.is_some_and(|dep| {
            !matches!(
                self.jobs.get(&dep).map(|r| r.life.state()),
                Some(State::Succeeded { .. })
            )
        });
        let life = if blocked {
            Lifecycle::blocked()
        } else {
            Lifecycle::scheduled(run_at)
        };
        let retry = job.effective_retry();
        if let Some(unique) = &job.unique_key {
            self.unique.insert(&job.queue, unique, id);
        }
        if let (true, Some(dep)) = (blocked, job.depends_on) {
            self.dependents.entry(dep).or_default().push(id);
        }
        touch(&mut self.changed, id);
        if blocked {
            // `schedule` makes the queue otherwise.
            queue_entry(&mut self.queues, &job.queue);
        }
        self.jobs.insert(
            id,
            Record {
                queue: job.queue,
                kind: job.kind,
                key: job.key,
                payload: job.payload,
                retry,
                unique_key: job.unique_key,
                depends_on: job.depends_on,
                metadata: job.metadata,
                enqueued_at: now,
                life,
                last_error: None,
                error_since: None,
                claimed_at: 0,
                due_at: run_at,
                ready_gen: 0,
            },
        );
        if !blocked {
            self.schedule(id, run_at, now);
        }
    }

    /// Files a job that waits for time only: ready now, or in the timed set.
    fn schedule(&mut self, id: JobId, run_at: Millis, now: Millis) {
        let Some(record) = self.jobs.get_mut(&id) else {
            return;
        };
        record.due_at = run_at;
        touch(&mut self.changed, id);
        let queue = queue_entry(&mut self.queues, &record.queue);
        if run_at <= now {
            // Jobs that became due earlier go first (none is waiting in the common case, and
            // then the job's record needs no second lookup).
            let record = if queue.timed.first().is_some_and(|&(at, _)| at <= now) {
                Self::promote_into(queue, &mut self.jobs, now);
                let Some(record) = self.jobs.get_mut(&id) else {
                    return;
                };
                record
            } else {
                record
            };
            record.ready_gen += 1;
            queue
                .ready
                .push(record.key.clone(), (id, record.ready_gen))
                .ok();
            Self::wake(&mut self.woken, queue);
        } else {
            // A pending wait sleeps until the earliest due time it saw: a job due sooner
            // wakes it, so that it looks again (a delayed job, a retry, a rescue).
            if queue.timed.first().is_none_or(|&(at, _)| run_at < at) {
                Self::wake(&mut self.woken, queue);
            }
            queue.timed.insert((run_at, id));
        }
    }

    /// Moves every job of `queue` whose time has come into the fair ready queue, oldest due
    /// time first.
    fn promote_into(queue: &mut QueueState, jobs: &mut Jobs, now: Millis) {
        while let Some(&(at, id)) = queue.timed.first() {
            if at > now {
                break;
            }
            queue.timed.pop_first();
            if let Some(record) = jobs.get_mut(&id) {
                if record.life.due_at() == Some(at) {
                    record.ready_gen += 1;
                    // An unbounded queue never refuses a push.
                    queue
                        .ready
                        .push(record.key.clone(), (id, record.ready_gen))
                        .ok();
                }
            }
        }
    }

    /// Claims up to `max` due jobs of `queue`, fairly by key.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![]); 3], 0).unwrap();
    /// assert_eq!(store.claim("q", 2, Duration::from_secs(30), 0).len(), 2);
    /// ```
    pub fn claim(
        &mut self,
        queue_name: &str,
        max: usize,
        lease: Duration,
        now: Millis,
    ) -> Vec<Job> {
        let Some(queue) = self.queues.get_mut(queue_name) else {
            return Vec::new();
        };
        Self::promote_into(queue, &mut self.jobs, now);
        let mut claimed = Vec::new();
        while claimed.len() < max {
            let Some((key, (id, generation))) = queue.ready.pop_with_key() else {
                break;
            };
            let Some(record) = self.jobs.get_mut(&id) else {
                continue; // purged
            };
            if record.ready_gen != generation || !record.life.is_claimable(now) {
                continue; // superseded entry
            }
            if record.life.claim(now, lease).is_err() {
                continue;
            }
            record.claimed_at = now;
            queue.running.insert(id);
            touch(&mut self.changed, id);
            // The fair queue's copy of the key (equal to the record's) goes to the worker.
            if let Some(job) = record.job(id, key) {
                claimed.push(job);
            }
        }
        claimed
    }

    /// Claims one particular job, making it due first if it waits for time (test helpers).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// let job = NewJob::new("q", "k", vec![]).run_at_millis(1_000);
    /// let id = store.enqueue_many(vec![job], 0).unwrap()[0];
    /// assert_eq!(store.claim_id(id, Duration::from_secs(1), 0).unwrap().claim.id, id);
    /// ```
    pub fn claim_id(
        &mut self,
        id: JobId,
        lease: Duration,
        now: Millis,
    ) -> Result<Job, BackendError> {
        let record = self.jobs.get_mut(&id).ok_or(BackendError::NotFound(id))?;
        if let Some(at) = record.life.due_at() {
            if at > now {
                if let Some(queue) = self.queues.get_mut(record.queue.as_str()) {
                    queue.timed.remove(&(at, id));
                }
                let attempts = record.life.attempts();
                let last_token = record.life.last_token();
                let state = match *record.life.state() {
                    State::Retrying { .. } => State::Retrying { run_at: now },
                    _ => State::Scheduled { run_at: now },
                };
                record.life = Lifecycle::restore(state, attempts, last_token);
            }
        }
        record.life.claim(now, lease).map_err(transition(id))?;
        // Any ready-queue entry of the job is now stale.
        record.ready_gen += 1;
        record.claimed_at = now;
        if let Some(queue) = self.queues.get_mut(record.queue.as_str()) {
            queue.running.insert(id);
        }
        touch(&mut self.changed, id);
        record
            .job(id, record.key.clone())
            .ok_or(BackendError::NotFound(id))
    }

    /// A job as a worker would receive it, without changing it (test helpers).
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// let id = store.enqueue_many(vec![NewJob::new("q", "kind", vec![])], 0).unwrap()[0];
    /// assert_eq!(store.peek(id).unwrap().attempt, 1);
    /// ```
    pub fn peek(&self, id: JobId) -> Option<Job> {
        let record = self.jobs.get(&id)?;
        let mut job = Job::example(record.payload.clone());
        job.claim = Claim {
            id,
            token: fairq_core::job::LeaseToken(record.life.last_token()),
        };
        job.queue = record.queue.clone();
        job.kind = record.kind.clone();
        job.key = record.key.clone();
        job.attempt = record.life.attempts().saturating_add(1);
        job.lease_deadline = 0;
        job.enqueued_at = record.enqueued_at;
        job.run_at = record.due_at;
        job.retry = record.retry.clone();
        job.metadata = record.metadata.clone();
        Some(job)
    }

    /// Marks a claimed job succeeded.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap();
    /// let job = store.claim("q", 1, Duration::from_secs(30), 0).remove(0);
    /// store.complete(job.claim, 1).unwrap();
    /// assert!(store.complete(job.claim, 2).is_err());
    /// ```
    pub fn complete(&mut self, claim: Claim, now: Millis) -> Result<(), BackendError> {
        let id = claim.id;
        let record = self.jobs.get_mut(&id).ok_or(BackendError::NotFound(id))?;
        let attempt = record.life.attempts();
        record
            .life
            .complete(claim.token, now)
            .map_err(transition(id))?;
        touch(&mut self.changed, id);
        record.error_since = None;
        let elapsed = now.saturating_sub(record.claimed_at);
        if let Some(queue) = self.queues.get_mut(record.queue.as_str()) {
            queue.running.remove(&id);
            queue.retries.succeeded(attempt);
            queue.processing.record(elapsed);
        }
        if let Some(unique) = &record.unique_key {
            self.unique.release(&record.queue, unique, id);
        }
        // A job with dependents is kept: they were enqueued naming it.
        let had_dependents = !self.dependents.is_empty() && self.dependents.contains_key(&id);
        self.release_dependents(id, now);
        if self.forget_succeeded && !had_dependents {
            // Its unique key is released above and it is blocked on nothing: only the
            // record goes (a tracked change, so a durable layer deletes it too).
            self.jobs.remove(&id);
        }
        Ok(())
    }

    /// Whether succeeded jobs are kept (the default) until a prune deletes them, or deleted
    /// when their success is recorded, except one that has dependents. Statistics count
    /// deleted successes all the same (retries, run times); the status counts, like `get`,
    /// `list` and a later `depends_on`, no longer see them.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.set_keep_succeeded(false);
    /// let id = store.enqueue(NewJob::new("q", "k", vec![]), 0).unwrap();
    /// let job = store.claim("q", 1, Duration::from_secs(30), 0).remove(0);
    /// store.complete(job.claim, 5).unwrap();
    /// assert!(store.record(id).is_none());
    /// assert_eq!(store.counts("q").succeeded, 0);
    /// ```
    pub fn set_keep_succeeded(&mut self, keep: bool) {
        self.forget_succeeded = !keep;
    }

    /// Whether succeeded jobs are kept ([`Store::set_keep_succeeded`]).
    ///
    /// ```
    /// assert!(fairq_worker::memory::store::Store::default().keeps_succeeded());
    /// ```
    pub fn keeps_succeeded(&self) -> bool {
        !self.forget_succeeded
    }

    /// Records a failed attempt (`random` drives the policy's jitter): core's verdict,
    /// applied through the job's lifecycle.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_core::job::{DeadReason, Outcome};
    /// use fairq_core::retry::RetryPolicy;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::{Failure, NewJob};
    /// let mut store = Store::default();
    /// let job = NewJob::new("q", "k", vec![]).retry(RetryPolicy::new(0));
    /// store.enqueue_many(vec![job], 0).unwrap();
    /// let job = store.claim("q", 1, Duration::from_secs(30), 0).remove(0);
    /// let outcome = store.fail(job.claim, Failure::retryable("boom"), 1, 0).unwrap();
    /// assert_eq!(outcome, Outcome::Dead { reason: DeadReason::RetriesExhausted });
    /// ```
    pub fn fail(
        &mut self,
        claim: Claim,
        failure: Failure,
        now: Millis,
        random: u64,
    ) -> Result<Outcome, BackendError> {
        let id = claim.id;
        let record = self.jobs.get_mut(&id).ok_or(BackendError::NotFound(id))?;
        let attempt = record.life.attempts();
        let setback = if failure.permanent {
            Setback::Permanent
        } else {
            Setback::Failed
        };
        let policy = record.retry.clone();
        let outcome = record
            .life
            .setback(claim.token, setback, now, &policy, random)
            .map_err(transition(id))?;
        record.last_error = Some(match failure.stored_message() {
            std::borrow::Cow::Borrowed(_) => failure.message,
            std::borrow::Cow::Owned(kept) => kept,
        });
        touch(&mut self.changed, id);
        let elapsed = now.saturating_sub(record.claimed_at);
        if let Some(queue) = self.queues.get_mut(record.queue.as_str()) {
            queue.processing.record(elapsed);
        }
        self.after_failure(id, attempt, outcome, now);
        Ok(outcome)
    }

    /// Settles a batch of finished attempts, each on its own: one answer per entry, in order
    /// (`random` drives the jitter of each retry).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::{Failure, Finished, NewJob, Settled};
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![]); 2], 0).unwrap();
    /// let jobs = store.claim("q", 2, Duration::from_secs(30), 0);
    /// let batch = vec![
    ///     Finished::new(&jobs[0], Ok(())),
    ///     Finished::new(&jobs[1], Err(Failure::permanent("no"))),
    ///     Finished::new(&jobs[0], Ok(())), // settled twice: refused on its own
    /// ];
    /// let answers = store.settle(batch, 5, &mut || 0);
    /// assert_eq!(answers[0].as_ref().unwrap(), &Settled::Succeeded);
    /// assert!(matches!(answers[1], Ok(Settled::Dead { .. })));
    /// assert!(answers[2].is_err());
    /// ```
    pub fn settle(
        &mut self,
        batch: Vec<Finished>,
        now: Millis,
        random: &mut dyn FnMut() -> u64,
    ) -> Each<Settled> {
        batch
            .into_iter()
            .map(|finished| match finished.ending {
                crate::settle::Ending::Succeeded => self
                    .complete(finished.claim, now)
                    .map(|()| Settled::Succeeded),
                crate::settle::Ending::Failed { failure, .. } => self
                    .fail(finished.claim, failure, now, random())
                    .map(Settled::from),
            })
            .collect()
    }

    /// Hands claimed jobs back before they ran: each is due again at `now` with its attempt
    /// refunded, and its lease is fenced. One answer per claim.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap();
    /// let job = store.claim("q", 1, Duration::from_secs(30), 0).remove(0);
    /// assert!(store.release(vec![job.claim], 1)[0].is_ok());
    /// let again = store.claim("q", 1, Duration::from_secs(30), 2).remove(0);
    /// assert_eq!(again.attempt, 1);
    /// assert!(store.complete(job.claim, 3).is_err()); // the released lease is fenced
    /// ```
    pub fn release(&mut self, claims: Vec<Claim>, now: Millis) -> Each<()> {
        claims
            .into_iter()
            .map(|claim| {
                let id = claim.id;
                let record = self.jobs.get_mut(&id).ok_or(BackendError::NotFound(id))?;
                record
                    .life
                    .release(claim.token, now)
                    .map_err(transition(id))?;
                touch(&mut self.changed, id);
                if let Some(queue) = self.queues.get_mut(record.queue.as_str()) {
                    queue.running.remove(&id);
                }
                self.schedule(id, now, now);
                Ok(())
            })
            .collect()
    }

    /// Shared bookkeeping of a failed or rescued attempt.
    fn after_failure(&mut self, id: JobId, attempt: u32, outcome: Outcome, now: Millis) {
        let Some(record) = self.jobs.get_mut(&id) else {
            return;
        };
        record.error_since.get_or_insert(now);
        if let Some(queue) = self.queues.get_mut(record.queue.as_str()) {
            queue.running.remove(&id);
            queue.retries.failed();
            if outcome.is_dead() {
                queue.retries.died();
                queue.retries.retries += u64::from(attempt.saturating_sub(1));
            }
        }
        match outcome {
            Outcome::Retry { run_at } => self.schedule(id, run_at, now),
            Outcome::Dead { .. } => self.release_unique(id),
        }
    }

    /// Extends a lease.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap();
    /// let job = store.claim("q", 1, Duration::from_millis(10), 0).remove(0);
    /// assert_eq!(store.heartbeat(job.claim, Duration::from_millis(10), 5).unwrap(), 15);
    /// ```
    pub fn heartbeat(
        &mut self,
        claim: Claim,
        lease: Duration,
        now: Millis,
    ) -> Result<Millis, BackendError> {
        let record = self
            .jobs
            .get_mut(&claim.id)
            .ok_or(BackendError::NotFound(claim.id))?;
        let deadline = record
            .life
            .heartbeat(claim.token, now, lease)
            .map_err(transition(claim.id))?;
        touch(&mut self.changed, claim.id);
        Ok(deadline)
    }

    /// Takes back every job of `queue` whose lease has expired (`random` drives the jitter of
    /// each retry).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap();
    /// store.claim("q", 1, Duration::from_millis(10), 0);
    /// assert_eq!(store.rescue("q", 9, &mut || 0), 0);
    /// assert_eq!(store.rescue("q", 10, &mut || 0), 1);
    /// ```
    pub fn rescue(
        &mut self,
        queue_name: &str,
        now: Millis,
        random: &mut dyn FnMut() -> u64,
    ) -> u64 {
        let Some(queue) = self.queues.get(queue_name) else {
            return 0;
        };
        let mut expired: Vec<JobId> = queue
            .running
            .iter()
            .copied()
            .filter(|id| {
                self.jobs.get(id).is_some_and(
                    |r| matches!(r.life.state(), State::Running { lease } if lease.deadline <= now),
                )
            })
            .collect();
        // Oldest id first, so rescued jobs are due in a fixed order.
        expired.sort_unstable();
        let mut rescued = 0;
        for id in expired {
            let Some(record) = self.jobs.get_mut(&id) else {
                continue;
            };
            let attempt = record.life.attempts();
            let policy = record.retry.clone();
            let Ok(outcome) = record.life.rescue(now, &policy, random()) else {
                continue;
            };
            record.last_error = Some(LEASE_EXPIRED.to_string());
            touch(&mut self.changed, id);
            self.after_failure(id, attempt, outcome, now);
            rescued += 1;
        }
        rescued
    }

    /// Holds back the retries of `queue` until `until`: every retrying job that would be due
    /// earlier (whether it already waits in the fair queue or still for its time) becomes due
    /// at `until`. Returns how many moved.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_core::retry::RetryPolicy;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::{Failure, NewJob};
    /// let mut store = Store::default();
    /// let job = NewJob::new("q", "k", vec![]).retry(RetryPolicy::new(3));
    /// store.enqueue_many(vec![job, NewJob::new("q", "k", vec![])], 0).unwrap();
    /// let first = store.claim("q", 1, Duration::from_secs(30), 0).remove(0);
    /// store.fail(first.claim, Failure::retryable("down"), 5, 0).unwrap(); // retry due at 5
    /// assert_eq!(store.hold_retries("q", 1_000, 5), 1);
    /// // The new job still runs; the retry waits.
    /// assert_eq!(store.claim("q", 10, Duration::from_secs(30), 5).len(), 1);
    /// assert_eq!(store.claim("q", 10, Duration::from_secs(30), 999).len(), 0);
    /// assert_eq!(store.claim("q", 10, Duration::from_secs(30), 1_000).len(), 1);
    /// ```
    pub fn hold_retries(&mut self, queue_name: &str, until: Millis, now: Millis) -> u64 {
        let Some(queue) = self.queues.get_mut(queue_name) else {
            return 0;
        };
        let mut held = 0;
        for id in self.jobs.ids_where(|record| record.queue == queue_name) {
            let Some(record) = self.jobs.get_mut(&id) else {
                continue;
            };
            let id = &id;
            let Some(at) = record.life.due_at() else {
                continue;
            };
            if !record.life.postpone_retry(until) {
                continue;
            }
            // Out of the timed set, and any entry in the fair queue goes stale.
            queue.timed.remove(&(at, *id));
            record.ready_gen += 1;
            record.due_at = until;
            if until <= now {
                record.ready_gen += 1;
                queue
                    .ready
                    .push(record.key.clone(), (*id, record.ready_gen))
                    .ok();
            } else {
                queue.timed.insert((until, *id));
            }
            touch(&mut self.changed, *id);
            held += 1;
        }
        held
    }

    /// True when `queue` has a job that can be claimed at `now`; else the next due time.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![]).run_at_millis(50)], 0).unwrap();
    /// assert_eq!(store.due("q", 0), Err(Some(50)));
    /// assert_eq!(store.due("q", 50), Ok(()));
    /// ```
    pub fn due(&self, queue_name: &str, now: Millis) -> Result<(), Option<Millis>> {
        let Some(queue) = self.queues.get(queue_name) else {
            return Err(None);
        };
        let next = queue.timed.first().map(|&(at, _)| at);
        if !queue.ready.is_empty() || next.is_some_and(|at| at <= now) {
            Ok(())
        } else {
            Err(next)
        }
    }

    /// Earliest time any waiting job of `queue` becomes due.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![]).run_at_millis(50)], 0).unwrap();
    /// assert_eq!(store.next_due("q"), Some(50));
    /// ```
    pub fn next_due(&self, queue_name: &str) -> Option<Millis> {
        self.queues
            .get(queue_name)?
            .timed
            .first()
            .map(|&(at, _)| at)
    }

    /// Numbers per queue, by queue name.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap();
    /// assert_eq!(store.stats()[0].counts.scheduled, 1);
    /// ```
    pub fn stats(&self) -> Vec<QueueStats> {
        let mut out: BTreeMap<&str, QueueStats> = self
            .queues
            .iter()
            .map(|(name, q)| {
                let mut stats = QueueStats::empty(name.clone());
                stats.retries = q.retries;
                stats.processing_ms = q.processing.summary();
                (name.as_str(), stats)
            })
            .collect();
        for record in self.jobs.values() {
            let Some(stats) = out.get_mut(record.queue.as_str()) else {
                continue;
            };
            stats.counts.add(record.status(), 1);
            if let State::Retrying { run_at } = *record.life.state() {
                stats.next_retry_at = Some(stats.next_retry_at.map_or(run_at, |n| n.min(run_at)));
            }
            if !record.life.state().is_final() {
                if let Some(since) = record.error_since {
                    stats.oldest_error_at =
                        Some(stats.oldest_error_at.map_or(since, |o| o.min(since)));
                }
            }
        }
        out.into_values().collect()
    }

    /// Counts per status of one queue (zero for an unknown queue).
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// assert_eq!(Store::default().counts("q").total(), 0);
    /// ```
    pub fn counts(&self, queue_name: &str) -> StatusCounts {
        let mut counts = StatusCounts::default();
        for record in self.jobs.values().filter(|r| r.queue == queue_name) {
            counts.add(record.status(), 1);
        }
        counts
    }

    /// Jobs matching `filter`, by id.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::{ListFilter, NewJob};
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![]); 3], 0).unwrap();
    /// assert_eq!(store.list(&ListFilter::default().limit(2)).len(), 2);
    /// ```
    pub fn list(&self, filter: &ListFilter) -> Vec<JobInfo> {
        self.jobs
            .after(filter.after)
            .filter(|(_, r)| filter.queue.as_deref().is_none_or(|q| q == r.queue))
            .filter(|(_, r)| filter.status.is_none_or(|s| s == r.status()))
            .take(filter.limit)
            .map(|(id, r)| r.info(id))
            .collect()
    }

    /// One job.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// assert!(Store::default().get(fairq_worker::JobId(1)).is_none());
    /// ```
    pub fn get(&self, id: JobId) -> Option<JobInfo> {
        self.jobs.get(&id).map(|r| r.info(id))
    }

    /// Revives dead jobs.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::ReviveTarget;
    /// let mut store = Store::default();
    /// assert_eq!(store.revive(ReviveTarget::AllDead { queue: None }, 0).unwrap(), 0);
    /// ```
    pub fn revive(&mut self, target: ReviveTarget, now: Millis) -> Result<u64, BackendError> {
        match target {
            ReviveTarget::One(id) => {
                self.revive_one(id, now)?;
                Ok(1)
            }
            ReviveTarget::AllDead { queue } => {
                let dead = self.jobs.ids_where(|r| {
                    r.status() == JobStatus::Dead && queue.as_deref().is_none_or(|q| q == r.queue)
                });
                let mut revived = 0;
                for id in dead {
                    // A job whose unique key was taken meanwhile stays dead.
                    if self.revive_one(id, now).is_ok() {
                        revived += 1;
                    }
                }
                Ok(revived)
            }
        }
    }

    fn revive_one(&mut self, id: JobId, now: Millis) -> Result<(), BackendError> {
        let record = self.jobs.get(&id).ok_or(BackendError::NotFound(id))?;
        if !matches!(record.life.state(), State::Dead { .. }) {
            return Err(BackendError::Transition {
                id,
                source: TransitionError::NotDead {
                    state: record.life.state().name(),
                },
            });
        }
        if let Some(unique) = &record.unique_key {
            if let Some(existing) = self.unique.get(&record.queue, unique) {
                return Err(BackendError::Duplicate {
                    queue: record.queue.clone(),
                    key: unique.clone(),
                    existing,
                });
            }
            self.unique.insert(&record.queue, unique, id);
        }
        let record = self.jobs.get_mut(&id).ok_or(BackendError::NotFound(id))?;
        record.life.revive(now).map_err(transition(id))?;
        record.error_since = None;
        touch(&mut self.changed, id);
        self.schedule(id, now, now);
        Ok(())
    }

    /// Deletes matching jobs that are not running.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::{NewJob, Purge};
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap();
    /// assert_eq!(store.purge(&Purge::default()), 1);
    /// ```
    pub fn purge(&mut self, purge: &Purge) -> u64 {
        let doomed = self.jobs.ids_where(|r| purge.matches(&r.queue, r.status()));
        let n = doomed.len() as u64;
        for id in doomed {
            self.remove(id);
        }
        n
    }

    /// Deletes the finished jobs `retention` no longer keeps at `now` (see
    /// [`Backend::prune`](crate::Backend::prune)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::Retention;
    /// let mut store = Store::default();
    /// assert_eq!(store.prune(&Retention::finished(Duration::from_secs(60)), 0), 0);
    /// ```
    pub fn prune(&mut self, retention: &Retention, now: Millis) -> u64 {
        if retention.keeps_everything() {
            return 0;
        }
        let cutoffs = retention.cutoffs(now);
        let mut n = 0;
        let Store {
            jobs,
            unique,
            dependents,
            changed,
            ..
        } = self;
        // One pass, dropping records in place (the order of removals is not observable).
        jobs.retain(|id, record| {
            let expired = record
                .finished_at()
                .is_some_and(|at| expired_at(cutoffs, record.status(), at));
            // A dead job others wait for stays while they wait: deleting it would leave them
            // blocked for good (its revival is what releases them).
            let waited_for = || dependents.get(&id).is_some_and(|w| !w.is_empty());
            if !expired || (record.status() == JobStatus::Dead && waited_for()) {
                return true;
            }
            Self::forget_finished(id, record, unique, dependents, changed);
            n += 1;
            false
        });
        n
    }

    /// Removes queue `queue_name` when it has no live job: its finished jobs and its
    /// counters; returns how many finished jobs went. See
    /// [`Backend::remove_queue`](crate::Backend::remove_queue).
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::{BackendError, NewJob};
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 0).unwrap();
    /// assert!(matches!(store.remove_queue("q"), Err(BackendError::QueueNotEmpty { live: 1, .. })));
    /// assert!(matches!(store.remove_queue("other"), Err(BackendError::UnknownQueue(_))));
    /// ```
    pub fn remove_queue(&mut self, queue_name: &str) -> Result<u64, BackendError> {
        if !self.queues.contains_key(queue_name) {
            return Err(BackendError::UnknownQueue(queue_name.to_string()));
        }
        let live = self.counts(queue_name).pending();
        if live > 0 {
            return Err(BackendError::QueueNotEmpty {
                queue: queue_name.to_string(),
                live,
            });
        }
        let n = self.purge(&Purge {
            queue: Some(queue_name.to_string()),
            status: None,
        });
        self.queues.remove(queue_name);
        Ok(n)
    }

    fn remove(&mut self, id: JobId) {
        let Some(record) = self.jobs.remove(&id) else {
            return;
        };
        Self::forget(
            id,
            &record,
            &mut self.queues,
            &mut self.unique,
            &mut self.dependents,
            &mut self.changed,
        );
    }

    /// Everything but the record that refers to job `id`, which is being deleted.
    fn forget(
        id: JobId,
        record: &Record,
        queues: &mut HashMap<String, QueueState>,
        unique: &mut UniqueKeys,
        dependents: &mut HashMap<JobId, Vec<JobId>>,
        changed: &mut Option<BTreeSet<JobId>>,
    ) {
        if let Some(key) = &record.unique_key {
            unique.release(&record.queue, key, id);
        }
        touch(changed, id);
        if let Some(queue) = queues.get_mut(record.queue.as_str()) {
            if let Some(at) = record.life.due_at() {
                queue.timed.remove(&(at, id));
            }
            queue.running.remove(&id);
            // Its ready entry, if any, is skipped when reached.
        }
        if let (State::Blocked, Some(dep)) = (record.life.state(), record.depends_on) {
            if let Some(waiting) = dependents.get_mut(&dep) {
                waiting.retain(|w| *w != id);
                // An empty list would still count as "has dependents" when `dep` succeeds.
                if waiting.is_empty() {
                    dependents.remove(&dep);
                }
            }
        }
        // Jobs blocked on this one keep waiting (see the module docs); the list goes.
        if !dependents.is_empty() {
            dependents.remove(&id);
        }
    }

    /// [`forget`](Self::forget) for a finished job: it has no place in its queue's timed
    /// set, running set or fair order, and is blocked on nothing, so the queue is not looked
    /// up (a prune of many jobs saves a hash of the queue's name per job).
    fn forget_finished(
        id: JobId,
        record: &Record,
        unique: &mut UniqueKeys,
        dependents: &mut HashMap<JobId, Vec<JobId>>,
        changed: &mut Option<BTreeSet<JobId>>,
    ) {
        debug_assert!(record.finished_at().is_some(), "only finished jobs");
        if let Some(key) = &record.unique_key {
            unique.release(&record.queue, key, id);
        }
        touch(changed, id);
        // Jobs blocked on this one keep waiting (see the module docs); the list goes.
        if !dependents.is_empty() {
            dependents.remove(&id);
        }
    }

    fn release_unique(&mut self, id: JobId) {
        let Some(record) = self.jobs.get(&id) else {
            return;
        };
        if let Some(unique) = &record.unique_key {
            self.unique.release(&record.queue, unique, id);
        }
    }

    fn release_dependents(&mut self, id: JobId, now: Millis) {
        if self.dependents.is_empty() {
            return;
        }
        let Some(waiting) = self.dependents.remove(&id) else {
            return;
        };
        for dependent in waiting {
            let Some(record) = self.jobs.get_mut(&dependent) else {
                continue;
            };
            // A blocked job's `due_at` is its own run time, as enqueued: it waits for that
            // as well as for its dependency.
            if record.life.dependency_succeeded(record.due_at, now).is_ok() {
                let run_at = record.life.due_at().unwrap_or(now);
                self.schedule(dependent, run_at, now);
            }
        }
    }

    /// Number of jobs stored (finished ones included).
    ///
    /// ```
    /// assert_eq!(fairq_worker::memory::store::Store::default().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// True when no job is stored.
    ///
    /// ```
    /// assert!(fairq_worker::memory::store::Store::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}
