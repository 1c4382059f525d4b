//! Callbacks a worker makes: final failures, its own errors, slow handlers, finished jobs,
//! queues turning unhealthy and recovering.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use fairq_core::job::Millis;

use crate::error::BackendError;
use crate::job::{Failure, Job};

/// The store call that failed.
///
/// ```
/// assert_eq!(fairq_worker::Operation::Claim.to_string(), "claim");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Claiming jobs.
    Claim,
    /// Recording a success (the store refused this job's entry of a batch).
    Complete,
    /// Recording a failure (the store refused this job's entry of a batch).
    Fail,
    /// Recording a batch of finished attempts (the call failed as a whole and is sent
    /// again).
    Settle,
    /// Renewing leases.
    Heartbeat,
    /// Handing claimed jobs back.
    Release,
    /// Sweeping expired leases.
    Rescue,
    /// Holding a queue's retries back until the next retry sweep.
    HoldRetries,
    /// Reading the store's numbers (for the queue-depth metrics).
    Stats,
    /// Deleting old finished jobs (see
    /// [`WorkerBuilder::prune_finished`](crate::WorkerBuilder::prune_finished)).
    Prune,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Claim => "claim",
            Operation::Complete => "complete",
            Operation::Fail => "fail",
            Operation::Settle => "settle",
            Operation::Heartbeat => "heartbeat",
            Operation::Release => "release",
            Operation::Rescue => "rescue",
            Operation::HoldRetries => "hold retries",
            Operation::Stats => "stats",
            Operation::Prune => "prune",
        })
    }
}

/// A store call of the worker failed (the worker carries on: it backs off and retries, or
/// leaves the job to be rescued).
///
/// ```
/// use fairq_worker::{BackendError, Operation, WorkerError};
/// let err = WorkerError {
///     queue: "mail".into(),
///     operation: Operation::Claim,
///     job: None,
///     source: BackendError::Unavailable("connection refused".into()),
/// };
/// assert_eq!(err.to_string(), "queue mail: claim failed: store unavailable: connection refused");
/// ```
#[derive(Debug, thiserror::Error)]
#[error("queue {queue}: {operation} failed{}: {source}", job.map(|j| format!(" for job {j}")).unwrap_or_default())]
pub struct WorkerError {
    /// The queue being served.
    pub queue: String,
    /// What the worker was doing.
    pub operation: Operation,
    /// The job concerned, if any.
    pub job: Option<crate::JobId>,
    /// The store's error.
    #[source]
    pub source: BackendError,
}

/// A job that failed for good: its retry policy gave up, or the failure was permanent.
///
/// ```
/// use fairq_worker::{DeadJob, Failure, Job};
/// let dead = DeadJob { job: Job::example(vec![]), failure: Failure::permanent("bad input") };
/// assert_eq!(dead.failure.message, "bad input");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct DeadJob {
    /// The job as its last attempt saw it.
    pub job: Job,
    /// Why the last attempt failed.
    pub failure: Failure,
}

/// A handler that has been running longer than the configured threshold (it keeps running).
///
/// ```
/// use std::time::Duration;
/// use fairq_worker::{Job, SlowJob};
/// let slow = SlowJob { job: Job::example(vec![]), running_for: Duration::from_secs(300) };
/// assert_eq!(slow.running_for.as_secs(), 300);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SlowJob {
    /// The job.
    pub job: Job,
    /// How long its handler has been running.
    pub running_for: Duration,
}

/// What became of a job after its handler returned.
///
/// ```
/// use fairq_worker::JobOutcome;
/// assert!(JobOutcome::Succeeded.is_recorded());
/// assert!(!JobOutcome::Unrecorded.is_recorded());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOutcome {
    /// The store recorded the success.
    Succeeded,
    /// The store recorded the failure; the job runs again at `run_at`.
    Retry {
        /// When it becomes due again.
        run_at: Millis,
    },
    /// The store recorded the failure and the job is dead.
    Dead,
    /// The store did not record the result (the lease was lost, or the store kept failing):
    /// the job will be rescued and run again. Also the answer when the store refused an
    /// outcome sent again after a call whose answer was lost, and the job's record did not
    /// show whether that call was recorded (when it shows that it was, the outcome it
    /// recorded is reported instead).
    Unrecorded,
}

impl JobOutcome {
    /// True unless [`JobOutcome::Unrecorded`].
    ///
    /// ```
    /// assert!(fairq_worker::JobOutcome::Dead.is_recorded());
    /// ```
    pub fn is_recorded(&self) -> bool {
        !matches!(self, JobOutcome::Unrecorded)
    }
}

/// One finished attempt, reported once the store answered for it (or gave up on it).
///
/// ```
/// use std::time::Duration;
/// use fairq_worker::{Job, JobOutcome, JobReport};
/// let report = JobReport {
///     job: Job::example(vec![]),
///     result: Ok(()),
///     outcome: JobOutcome::Succeeded,
///     elapsed: Duration::from_millis(3),
/// };
/// assert!(report.result.is_ok());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct JobReport {
    /// The job as the handler saw it.
    pub job: Job,
    /// The handler's result.
    pub result: Result<(), Failure>,
    /// What the store made of it.
    pub outcome: JobOutcome,
    /// How long the handler ran.
    pub elapsed: Duration,
}

type Hook<T> = Arc<dyn Fn(&T) + Send + Sync + 'static>;

/// The callbacks of a worker; each is optional.
#[derive(Clone, Default)]
pub(crate) struct Hooks {
    pub(crate) dead: Option<Hook<DeadJob>>,
    pub(crate) error: Option<Hook<WorkerError>>,
    pub(crate) slow: Option<Hook<SlowJob>>,
    pub(crate) finished: Option<Hook<JobReport>>,
    pub(crate) unhealthy: Option<Hook<super::HealthChange>>,
    pub(crate) recovered: Option<Hook<super::HealthChange>>,
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks")
            .field("dead", &self.dead.is_some())
            .field("error", &self.error.is_some())
            .field("slow", &self.slow.is_some())
            .field("finished", &self.finished.is_some())
            .field("unhealthy", &self.unhealthy.is_some())
            .field("recovered", &self.recovered.is_some())
            .finish()
    }
}

/// Calls a hook; a panicking hook is logged and does not take the worker down.
pub(crate) fn call<T>(hook: &Option<Hook<T>>, value: &T, name: &str) {
    if let Some(hook) = hook {
        if std::panic::catch_unwind(AssertUnwindSafe(|| hook(value))).is_err() {
            tracing::error!(hook = name, "a worker hook panicked");
        }
    }
}
