//! Settlement: how a worker tells a store how attempts ended, many at a time.
//!
//! A worker frees a job's slot as soon as its handler returns and hands the attempt's
//! [`Finished`] record to a per-queue acker, which settles a batch of them with one
//! [`Backend::settle`](crate::Backend::settle) call. Each entry carries its own lease token,
//! so fencing is checked per job: a stale lease refuses that job only and the rest of the
//! batch commits. For a failure the entry also carries the attempt number and the job's retry
//! policy (both fixed by the claim the token names), so a store can apply core's
//! [`verdict`](fairq_core::job::verdict) without reading the job first.
//!
//! ```
//! use fairq_worker::{Failure, Finished, Job, Settled};
//!
//! let job = Job::example(vec![]);
//! let ok = Finished::new(&job, Ok(()));
//! let failed = Finished::new(&job, Err(Failure::permanent("bad payload")));
//! assert!(ok.is_success() && !failed.is_success());
//! assert_eq!(Settled::Succeeded.to_string(), "succeeded");
//! ```

use std::fmt;

use fairq_core::job::{DeadReason, Millis, Outcome, Setback};
use fairq_core::retry::RetryPolicy;
use serde::{Deserialize, Serialize};

use crate::error::BackendError;
use crate::job::{Claim, Failure, Job};

/// One answer per entry of a batch call, in the batch's order.
pub type Each<T> = Vec<Result<T, BackendError>>;

/// How one attempt ended, as its worker reports it.
///
/// ```
/// use fairq_worker::{Ending, Failure};
/// let e = Ending::Failed { failure: Failure::retryable("timeout"), attempt: 1, policy: Default::default() };
/// assert!(matches!(e, Ending::Failed { .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ending {
    /// The handler succeeded.
    Succeeded,
    /// The handler failed.
    Failed {
        /// What went wrong (stored as the job's last error).
        failure: Failure,
        /// The 1-based attempt that failed (the claim's).
        attempt: u32,
        /// The job's retry policy.
        policy: RetryPolicy,
    },
}

/// A finished attempt to settle: the claim's proof and how it ended.
///
/// ```
/// use fairq_worker::{Finished, Job};
/// let job = Job::example(vec![]);
/// assert_eq!(Finished::new(&job, Ok(())).claim, job.claim);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    /// The job and the token of the lease the attempt ran under.
    pub claim: Claim,
    /// How it ended.
    pub ending: Ending,
}

impl Finished {
    /// The record of `job`'s attempt that ended with `result`.
    ///
    /// ```
    /// use fairq_worker::{Ending, Failure, Finished, Job};
    /// let job = Job::example(vec![]);
    /// let f = Finished::new(&job, Err(Failure::retryable("x")));
    /// assert!(matches!(f.ending, Ending::Failed { attempt: 1, .. }));
    /// ```
    pub fn new(job: &Job, result: Result<(), Failure>) -> Finished {
        Finished {
            claim: job.claim,
            ending: match result {
                Ok(()) => Ending::Succeeded,
                Err(failure) => Ending::Failed {
                    failure,
                    attempt: job.attempt,
                    policy: job.retry.clone(),
                },
            },
        }
    }

    /// A success of the attempt `claim` names.
    ///
    /// ```
    /// use fairq_core::job::LeaseToken;
    /// use fairq_worker::{Claim, Finished, JobId};
    /// let f = Finished::succeeded(Claim { id: JobId(1), token: LeaseToken(1) });
    /// assert!(f.is_success());
    /// ```
    pub fn succeeded(claim: Claim) -> Finished {
        Finished {
            claim,
            ending: Ending::Succeeded,
        }
    }

    /// True when the attempt succeeded.
    ///
    /// ```
    /// let job = fairq_worker::Job::example(vec![]);
    /// assert!(fairq_worker::Finished::new(&job, Ok(())).is_success());
    /// ```
    pub fn is_success(&self) -> bool {
        matches!(self.ending, Ending::Succeeded)
    }

    /// The failure, if the attempt failed.
    ///
    /// ```
    /// use fairq_worker::{Failure, Finished, Job};
    /// let job = Job::example(vec![]);
    /// assert_eq!(Finished::new(&job, Err(Failure::retryable("x"))).failure().unwrap().message, "x");
    /// ```
    pub fn failure(&self) -> Option<&Failure> {
        match &self.ending {
            Ending::Succeeded => None,
            Ending::Failed { failure, .. } => Some(failure),
        }
    }

    /// Core's verdict for a failed attempt settled at `now` (`None` for a success): what every
    /// store applies.
    ///
    /// ```
    /// use fairq_core::job::{DeadReason, Outcome};
    /// use fairq_worker::{Failure, Finished, Job};
    /// let job = Job::example(vec![]);
    /// let f = Finished::new(&job, Err(Failure::permanent("no")));
    /// assert_eq!(f.verdict(10, 0), Some(Outcome::Dead { reason: DeadReason::Discarded }));
    /// ```
    pub fn verdict(&self, now: Millis, random: u64) -> Option<Outcome> {
        match &self.ending {
            Ending::Succeeded => None,
            Ending::Failed {
                failure,
                attempt,
                policy,
            } => {
                let setback = if failure.permanent {
                    Setback::Permanent
                } else {
                    Setback::Failed
                };
                Some(fairq_core::job::verdict(
                    policy, *attempt, setback, now, random,
                ))
            }
        }
    }
}

/// What a settled attempt led to.
///
/// ```
/// use fairq_core::job::{DeadReason, Outcome};
/// use fairq_worker::Settled;
/// assert_eq!(Settled::from(Outcome::Retry { run_at: 5 }), Settled::Retry { run_at: 5 });
/// assert_eq!(Settled::Dead { reason: DeadReason::Discarded }.to_string(), "dead (discarded)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Settled {
    /// The job succeeded.
    Succeeded,
    /// The job runs again at `run_at`.
    Retry {
        /// When it becomes due.
        run_at: Millis,
    },
    /// The job is dead.
    Dead {
        /// Why.
        reason: DeadReason,
    },
}

impl Settled {
    /// The failure outcome, if the attempt failed.
    ///
    /// ```
    /// use fairq_core::job::Outcome;
    /// use fairq_worker::Settled;
    /// assert_eq!(Settled::Succeeded.outcome(), None);
    /// assert_eq!(Settled::Retry { run_at: 3 }.outcome(), Some(Outcome::Retry { run_at: 3 }));
    /// ```
    pub fn outcome(self) -> Option<Outcome> {
        match self {
            Settled::Succeeded => None,
            Settled::Retry { run_at } => Some(Outcome::Retry { run_at }),
            Settled::Dead { reason } => Some(Outcome::Dead { reason }),
        }
    }
}

impl From<Outcome> for Settled {
    fn from(outcome: Outcome) -> Settled {
        match outcome {
            Outcome::Retry { run_at } => Settled::Retry { run_at },
            Outcome::Dead { reason } => Settled::Dead { reason },
        }
    }
}

impl fmt::Display for Settled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Settled::Succeeded => f.write_str("succeeded"),
            Settled::Retry { run_at } => write!(f, "retry at {run_at} ms"),
            Settled::Dead { reason } => write!(f, "dead ({reason})"),
        }
    }
}

/// What [`Backend::settle_and_claim`](crate::Backend::settle_and_claim) returns: the answers
/// for the settled batch, and the claim that followed it.
///
/// ```
/// use fairq_worker::SettledAndClaimed;
/// let s = SettledAndClaimed { settled: vec![], claimed: Ok(vec![]) };
/// assert!(s.claimed.unwrap().is_empty());
/// ```
#[derive(Debug)]
pub struct SettledAndClaimed {
    /// One answer per settled entry, in order.
    pub settled: Each<Settled>,
    /// The jobs claimed after settling (an error here leaves the settlement valid).
    pub claimed: Result<Vec<Job>, BackendError>,
}
