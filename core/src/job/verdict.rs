//! The one decision every store applies after an attempt ends without success.
//!
//! A failed handler, a permanent failure and an expired lease all end an attempt; what happens
//! next (run again at a time, or die with a reason) is decided here and nowhere else, from the
//! job's retry policy, the attempt that ended, the time and a caller-supplied random number.
//! Stores apply the [`Outcome`]: the in-memory and file stores through [`Lifecycle`], the
//! PostgreSQL adapter as the parameters of one `UPDATE`, the Redis adapter as the arguments of
//! one Lua script. None of them calls the retry policy itself.
//!
//! ```
//! use core::time::Duration;
//! use fairq_core::job::{verdict, DeadReason, Outcome, Setback};
//! use fairq_core::retry::RetryPolicy;
//!
//! let policy = RetryPolicy::new(2).with_delays([Duration::from_secs(10)]);
//! // The first attempt failed at t = 1 s: run again 10 s later.
//! assert_eq!(verdict(&policy, 1, Setback::Failed, 1_000, 0), Outcome::Retry { run_at: 11_000 });
//! // The third attempt's worker vanished: no retries left.
//! assert_eq!(
//!     verdict(&policy, 3, Setback::LeaseExpired, 5_000, 0),
//!     Outcome::Dead { reason: DeadReason::LeaseExpired }
//! );
//! // A permanent failure dies whatever the policy.
//! assert_eq!(
//!     verdict(&policy, 1, Setback::Permanent, 5_000, 0),
//!     Outcome::Dead { reason: DeadReason::Discarded }
//! );
//! ```
//!
//! [`Lifecycle`]: super::Lifecycle

use super::time::{clamp_after, Millis};
use super::{DeadReason, Outcome};
use crate::retry::{Decision, RetryPolicy};

/// How an attempt ended without success.
///
/// ```
/// use fairq_core::job::Setback;
/// assert_ne!(Setback::Failed, Setback::LeaseExpired);
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Setback {
    /// The handler returned an error that retrying may cure.
    Failed,
    /// The handler said retrying cannot help (an undecodable payload, say).
    Permanent,
    /// The lease ran out: the worker died, hung or lost its connection.
    LeaseExpired,
}

impl Setback {
    /// The reason a job dies of this setback when its policy gives up.
    ///
    /// ```
    /// use fairq_core::job::{DeadReason, Setback};
    /// assert_eq!(Setback::LeaseExpired.dead_reason(), DeadReason::LeaseExpired);
    /// ```
    pub fn dead_reason(self) -> DeadReason {
        match self {
            Setback::Failed => DeadReason::RetriesExhausted,
            Setback::Permanent => DeadReason::Discarded,
            Setback::LeaseExpired => DeadReason::LeaseExpired,
        }
    }
}

/// What an attempt that ended in `setback` at `now` leads to, for a job under `policy` whose
/// 1-based attempt `attempt` it was. `random` drives the policy's jitter.
///
/// The retry time is clamped to [`MAX_MILLIS`](super::MAX_MILLIS), so a policy with an
/// absurd delay gives a time every store can hold (and a job that runs again in the year
/// 9999) instead of a corrupt record.
///
/// ```
/// use core::time::Duration;
/// use fairq_core::job::{verdict, Outcome, Setback, MAX_MILLIS};
/// use fairq_core::retry::{Backoff, RetryPolicy};
///
/// let forever = RetryPolicy::new(1).with_backoff(Backoff::Fixed(Duration::MAX));
/// assert_eq!(verdict(&forever, 1, Setback::Failed, 7, 0), Outcome::Retry { run_at: MAX_MILLIS });
/// ```
pub fn verdict(
    policy: &RetryPolicy,
    attempt: u32,
    setback: Setback,
    now: Millis,
    random: u64,
) -> Outcome {
    if setback == Setback::Permanent {
        return Outcome::Dead {
            reason: DeadReason::Discarded,
        };
    }
    match policy.decide_with_random(attempt, random) {
        Decision::Retry { after } => Outcome::Retry {
            run_at: clamp_after(now, after),
        },
        Decision::GiveUp => Outcome::Dead {
            reason: setback.dead_reason(),
        },
    }
}
