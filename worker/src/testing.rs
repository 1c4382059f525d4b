//! Step-by-step job processing for tests: [`TestQueue`].
//!
//! A test queue is a [`MemoryBackend`] on a [`ManualClock`] plus your [`Handlers`], with no
//! background tasks: nothing runs until the test says so, and time moves only when the test
//! advances it. Jobs run through the same code path as in a [`Worker`](crate::Worker)
//! (dispatch by kind, panics caught, outcome recorded by the store through the job's retry
//! policy).

use std::time::Duration;

use fairq_core::job::{Millis, Outcome, State};

use crate::backend::Backend;
use crate::clock::ManualClock;
use crate::error::BackendError;
use crate::handler::Handlers;
use crate::job::{Failure, Job, JobId, JobInfo, NewJob};
use crate::memory::MemoryBackend;

/// What the store made of a run.
///
/// ```
/// use fairq_worker::RunOutcome;
/// assert!(RunOutcome::Succeeded.is_success());
/// assert!(!RunOutcome::Dead.is_success());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// The job succeeded.
    Succeeded,
    /// The job failed and runs again at `run_at`.
    Retry {
        /// When it becomes due again.
        run_at: Millis,
    },
    /// The job failed for good.
    Dead,
    /// The handler ran on a job that had already succeeded; the store was left unchanged.
    Replayed,
}

impl RunOutcome {
    /// True for [`RunOutcome::Succeeded`].
    ///
    /// ```
    /// assert!(fairq_worker::RunOutcome::Succeeded.is_success());
    /// ```
    pub fn is_success(&self) -> bool {
        matches!(self, RunOutcome::Succeeded)
    }
}

impl From<Outcome> for RunOutcome {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Retry { run_at } => RunOutcome::Retry { run_at },
            Outcome::Dead { .. } => RunOutcome::Dead,
        }
    }
}

/// One handler run: the job as the handler saw it, what it returned, and what followed.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use fairq_worker::{Handlers, Job, NewJob, TestQueue};
/// let tq = TestQueue::new(Handlers::new().on("k", |_job: Job| async { Ok::<_, String>(()) }));
/// tq.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
/// let run = tq.run_one("q").await.unwrap().unwrap();
/// assert_eq!((run.job.attempt, run.result.is_ok()), (1, true));
/// # });
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// The job as handed to the handler.
    pub job: Job,
    /// The handler's result.
    pub result: Result<(), Failure>,
    /// What the store did with it.
    pub outcome: RunOutcome,
}

impl RunResult {
    /// The failure message, if the run failed.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use fairq_worker::{Handlers, Job, NewJob, TestQueue};
    /// let tq = TestQueue::new(Handlers::new().on("k", |_job: Job| async { Err::<(), _>("nope") }));
    /// tq.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    /// assert_eq!(tq.run_one("q").await.unwrap().unwrap().error(), Some("nope"));
    /// # });
    /// ```
    pub fn error(&self) -> Option<&str> {
        self.result.as_ref().err().map(|f| f.message.as_str())
    }
}

/// Errors of the test helpers.
///
/// ```
/// use fairq_worker::{JobId, TestQueueError};
/// let err = TestQueueError::NotRunnable { id: JobId(3), state: "running" };
/// assert_eq!(err.to_string(), "job 3 is running and cannot be run now");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum TestQueueError {
    /// The store refused a call.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The job is running or blocked.
    #[error("job {id} is {state} and cannot be run now")]
    NotRunnable {
        /// The job.
        id: JobId,
        /// Its state's name.
        state: &'static str,
    },
    /// [`TestQueue::drain`] ran more jobs than its limit (a job retrying at once forever?).
    #[error("gave up after {0} runs: jobs keep becoming due")]
    TooManyRuns(usize),
}

/// A deterministic job queue for tests: run one job at a time, force retries, move time.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use fairq_core::retry::RetryPolicy;
/// use fairq_worker::{Handlers, Job, NewJob, RunOutcome, TestQueue};
///
/// // A handler that fails on its first call.
/// let calls = Arc::new(AtomicU32::new(0));
/// let seen = calls.clone();
/// let tq = TestQueue::new(Handlers::new().on_json("charge", move |cents: u64, _job: Job| {
///     let n = seen.fetch_add(1, Ordering::SeqCst);
///     async move { if n == 0 { Err(format!("gateway down ({cents})")) } else { Ok(()) } }
/// }));
///
/// let policy = RetryPolicy::new(3).with_delays([Duration::from_secs(10)]);
/// let id = tq.enqueue(NewJob::json("billing", "charge", &250).unwrap().retry(policy)).await.unwrap();
///
/// let first = tq.run_one("billing").await.unwrap().unwrap();
/// assert_eq!(first.error(), Some("gateway down (250)"));
/// assert!(matches!(first.outcome, RunOutcome::Retry { .. }));
/// assert!(tq.run_one("billing").await.unwrap().is_none()); // not due yet
///
/// tq.advance(Duration::from_secs(10));
/// let second = tq.run_one("billing").await.unwrap().unwrap();
/// assert_eq!((second.job.attempt, second.outcome), (2, RunOutcome::Succeeded));
///
/// // Idempotence check: run the finished job's handler once more.
/// let replay = tq.force_retry(id).await.unwrap();
/// assert_eq!(replay.outcome, RunOutcome::Replayed);
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct TestQueue {
    backend: MemoryBackend,
    clock: ManualClock,
    handlers: Handlers,
    lease: Duration,
    max_runs: usize,
}

impl TestQueue {
    /// The clock's starting time: 2023-11-14T22:13:20Z, in milliseconds.
    pub const START: Millis = 1_700_000_000_000;

    /// A test queue with `handlers`, an empty store and a manual clock at [`TestQueue::START`].
    ///
    /// ```
    /// use fairq_worker::{Clock, Handlers, TestQueue};
    /// let tq = TestQueue::new(Handlers::new());
    /// assert_eq!(tq.clock().now(), TestQueue::START);
    /// ```
    pub fn new(handlers: Handlers) -> Self {
        let clock = ManualClock::new(Self::START);
        TestQueue {
            backend: MemoryBackend::with_clock(clock.clone()),
            clock,
            handlers,
            lease: Duration::from_secs(30),
            max_runs: 10_000,
        }
    }

    /// Sets the lease length of claims (default 30 s), for tests of lease expiry.
    ///
    /// ```
    /// let tq = fairq_worker::TestQueue::new(fairq_worker::Handlers::new())
    ///     .lease(std::time::Duration::from_secs(5));
    /// # drop(tq);
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets how many runs [`drain`](Self::drain) allows before giving up (default 10,000).
    ///
    /// ```
    /// let tq = fairq_worker::TestQueue::new(fairq_worker::Handlers::new()).max_runs(5);
    /// # drop(tq);
    /// ```
    pub fn max_runs(mut self, max_runs: usize) -> Self {
        self.max_runs = max_runs;
        self
    }

    /// The store, for direct calls (stats, list, purge, ...).
    ///
    /// ```
    /// let tq = fairq_worker::TestQueue::new(fairq_worker::Handlers::new());
    /// assert!(tq.backend().is_empty());
    /// ```
    pub fn backend(&self) -> &MemoryBackend {
        &self.backend
    }

    /// The manual clock.
    ///
    /// ```
    /// use fairq_worker::Clock;
    /// let tq = fairq_worker::TestQueue::new(fairq_worker::Handlers::new());
    /// assert!(tq.clock().now() > 0);
    /// ```
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// Moves time forward.
    ///
    /// ```
    /// use fairq_worker::{Clock, TestQueue};
    /// let tq = TestQueue::new(fairq_worker::Handlers::new());
    /// tq.advance(std::time::Duration::from_millis(5));
    /// assert_eq!(tq.clock().now(), TestQueue::START + 5);
    /// ```
    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }

    /// Enqueues a job.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let tq = fairq_worker::TestQueue::new(fairq_worker::Handlers::new());
    /// let id = tq.enqueue(fairq_worker::NewJob::new("q", "k", vec![])).await.unwrap();
    /// assert!(tq.job(id).await.unwrap().is_some());
    /// # });
    /// ```
    pub async fn enqueue(&self, job: NewJob) -> Result<JobId, BackendError> {
        self.backend.enqueue(job).await
    }

    /// The stored job.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let tq = fairq_worker::TestQueue::new(fairq_worker::Handlers::new());
    /// assert!(tq.job(fairq_worker::JobId(1)).await.unwrap().is_none());
    /// # });
    /// ```
    pub async fn job(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        self.backend.get(id).await
    }

    /// Claims the next due job of `queue` (fairly by key), runs its handler and records the
    /// outcome. `None` when no job is due.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let tq = fairq_worker::TestQueue::new(fairq_worker::Handlers::new());
    /// assert!(tq.run_one("empty").await.unwrap().is_none());
    /// # });
    /// ```
    pub async fn run_one(&self, queue: &str) -> Result<Option<RunResult>, BackendError> {
        let Some(job) = self.backend.claim(queue, 1, self.lease).await?.pop() else {
            return Ok(None);
        };
        self.settle(job).await.map(Some)
    }

    /// Runs job `id` now, whatever its due time, and returns the result:
    ///
    /// * a job waiting for its first run or a retry is claimed at once and settled as a normal
    ///   attempt;
    /// * a dead job is revived (fresh retry budget) and run;
    /// * a succeeded job's handler runs once more on the same job and the store is left
    ///   unchanged ([`RunOutcome::Replayed`]), to check that the handler is idempotent.
    ///
    /// Running and blocked jobs are refused.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use fairq_worker::{Handlers, Job, NewJob, RunOutcome, TestQueue};
    /// let tq = TestQueue::new(Handlers::new().on("k", |_job: Job| async { Ok::<_, String>(()) }));
    /// let id = tq.enqueue(NewJob::new("q", "k", vec![]).delay(Duration::from_secs(3600))).await.unwrap();
    /// assert_eq!(tq.force_retry(id).await.unwrap().outcome, RunOutcome::Succeeded);
    /// # });
    /// ```
    pub async fn force_retry(&self, id: JobId) -> Result<RunResult, TestQueueError> {
        let info = self
            .backend
            .get(id)
            .await?
            .ok_or(BackendError::NotFound(id))?;
        match info.state {
            State::Succeeded { .. } => {
                let job = self.backend.peek(id).ok_or(BackendError::NotFound(id))?;
                let result = self.handlers.run(job.clone()).await;
                Ok(RunResult {
                    job,
                    result,
                    outcome: RunOutcome::Replayed,
                })
            }
            State::Running { .. } | State::Blocked => Err(TestQueueError::NotRunnable {
                id,
                state: info.state.name(),
            }),
            State::Dead { .. } => {
                self.backend
                    .revive(crate::backend::ReviveTarget::One(id))
                    .await?;
                let job = self.backend.claim_now(id, self.lease)?;
                Ok(self.settle(job).await?)
            }
            State::Scheduled { .. } | State::Retrying { .. } => {
                let job = self.backend.claim_now(id, self.lease)?;
                Ok(self.settle(job).await?)
            }
        }
    }

    /// Runs due jobs of `queue` one by one until none is due, without moving time. Jobs that
    /// fail and retry at once run again; delayed retries wait for [`advance`](Self::advance).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use fairq_worker::{Handlers, Job, NewJob, TestQueue};
    /// let tq = TestQueue::new(Handlers::new().on("k", |_job: Job| async { Ok::<_, String>(()) }));
    /// for _ in 0..3 {
    ///     tq.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    /// }
    /// assert_eq!(tq.drain("q").await.unwrap().len(), 3);
    /// # });
    /// ```
    pub async fn drain(&self, queue: &str) -> Result<Vec<RunResult>, TestQueueError> {
        let mut runs = Vec::new();
        while let Some(run) = self.run_one(queue).await? {
            runs.push(run);
            if runs.len() >= self.max_runs {
                return Err(TestQueueError::TooManyRuns(runs.len()));
            }
        }
        Ok(runs)
    }

    /// Runs `queue` to the end: drains it, then jumps the clock to the next job waiting for
    /// time (a delayed job or a retry) and drains again, until no job waits for time.
    /// Blocked jobs whose dependency died are left as they are.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use fairq_core::retry::RetryPolicy;
    /// use fairq_worker::{Handlers, Job, NewJob, RunOutcome, TestQueue};
    /// let tq = TestQueue::new(Handlers::new().on("k", |_job: Job| async { Err::<(), _>("down") }));
    /// let policy = RetryPolicy::new(2).with_delays([Duration::from_secs(60)]);
    /// tq.enqueue(NewJob::new("q", "k", vec![]).retry(policy)).await.unwrap();
    /// let runs = tq.run_to_end("q").await.unwrap();
    /// assert_eq!(runs.len(), 3);
    /// assert_eq!(runs[2].outcome, RunOutcome::Dead);
    /// # });
    /// ```
    pub async fn run_to_end(&self, queue: &str) -> Result<Vec<RunResult>, TestQueueError> {
        let mut runs = Vec::new();
        loop {
            runs.extend(self.drain(queue).await?);
            if runs.len() >= self.max_runs {
                return Err(TestQueueError::TooManyRuns(runs.len()));
            }
            let Some(at) = self.backend.next_due(queue) else {
                return Ok(runs);
            };
            self.clock.set(at.max(self.backend.now()));
        }
    }

    async fn settle(&self, job: Job) -> Result<RunResult, BackendError> {
        let result = self.handlers.run(job.clone()).await;
        let outcome = match &result {
            Ok(()) => {
                self.backend.complete(job.claim).await?;
                RunOutcome::Succeeded
            }
            Err(failure) => self.backend.fail(&job, failure.clone()).await?.into(),
        };
        Ok(RunResult {
            job,
            result,
            outcome,
        })
    }
}
