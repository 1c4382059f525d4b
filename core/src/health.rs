//! Queue health and the retry-sweep breaker.
//!
//! A queue is *unhealthy* when it holds a job that has been failing for longer than the allowed
//! error time (default 15 minutes): a flaky downstream service that fails for a minute and
//! recovers does not page anybody, one that has been down for half an hour does. A startup
//! grace period (default 10 minutes) keeps a freshly deployed process healthy while it works
//! through errors left by an earlier version, so rolling upgrades stay possible.
//!
//! ```
//! use core::time::Duration;
//! use fairq_core::health::{Health, HealthPolicy};
//!
//! let policy = HealthPolicy::default().with_startup_grace(Duration::ZERO);
//! let minute = 60_000;
//! // Oldest job in error has been failing for 5 minutes: still within the allowed 15.
//! assert_eq!(policy.evaluate(0, Some(10 * minute), 15 * minute), Health::Degraded { since: 10 * minute });
//! // ... for 20 minutes: unhealthy.
//! assert_eq!(policy.evaluate(0, Some(10 * minute), 30 * minute), Health::Unhealthy { since: 10 * minute });
//! ```

use core::time::Duration;

use crate::job::{millis, Millis};

/// The verdict on one queue.
///
/// ```
/// assert!(fairq_core::health::Health::Healthy.is_healthy());
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// No job in error.
    Healthy,
    /// Jobs are failing, but for less than the allowed time (or within the startup grace).
    Degraded {
        /// When the oldest current error started.
        since: Millis,
    },
    /// A job has been failing for longer than the allowed time.
    Unhealthy {
        /// When the oldest current error started.
        since: Millis,
    },
}

impl Health {
    /// True unless [`Health::Unhealthy`].
    ///
    /// ```
    /// use fairq_core::health::Health;
    /// assert!(Health::Degraded { since: 0 }.is_healthy());
    /// assert!(!Health::Unhealthy { since: 0 }.is_healthy());
    /// ```
    pub fn is_healthy(&self) -> bool {
        !matches!(self, Health::Unhealthy { .. })
    }
}

/// How long errors are tolerated.
///
/// ```
/// let p = fairq_core::health::HealthPolicy::default();
/// assert_eq!(p.allowed_error_time(), core::time::Duration::from_secs(15 * 60));
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthPolicy {
    allowed_error_time: Duration,
    startup_grace: Duration,
}

impl Default for HealthPolicy {
    /// 15 minutes of allowed error time, 10 minutes of startup grace.
    fn default() -> Self {
        HealthPolicy {
            allowed_error_time: Duration::from_secs(15 * 60),
            startup_grace: Duration::from_secs(10 * 60),
        }
    }
}

impl HealthPolicy {
    /// Sets the allowed error time (zero: unhealthy on the first failure).
    ///
    /// ```
    /// use core::time::Duration;
    /// use fairq_core::health::{Health, HealthPolicy};
    /// let p = HealthPolicy::default()
    ///     .with_allowed_error_time(Duration::ZERO)
    ///     .with_startup_grace(Duration::ZERO);
    /// assert_eq!(p.evaluate(0, Some(5), 5), Health::Unhealthy { since: 5 });
    /// ```
    pub fn with_allowed_error_time(mut self, allowed: Duration) -> Self {
        self.allowed_error_time = allowed;
        self
    }

    /// Sets the startup grace period.
    ///
    /// ```
    /// use core::time::Duration;
    /// let p = fairq_core::health::HealthPolicy::default().with_startup_grace(Duration::ZERO);
    /// assert_eq!(p.startup_grace(), Duration::ZERO);
    /// ```
    pub fn with_startup_grace(mut self, grace: Duration) -> Self {
        self.startup_grace = grace;
        self
    }

    /// The allowed error time.
    ///
    /// ```
    /// assert!(fairq_core::health::HealthPolicy::default().allowed_error_time().as_secs() > 0);
    /// ```
    pub fn allowed_error_time(&self) -> Duration {
        self.allowed_error_time
    }

    /// The startup grace period.
    ///
    /// ```
    /// assert_eq!(fairq_core::health::HealthPolicy::default().startup_grace().as_secs(), 600);
    /// ```
    pub fn startup_grace(&self) -> Duration {
        self.startup_grace
    }

    /// Judges a queue at `now`, given when the process started and when the oldest error still
    /// outstanding began (`None`: no job in error).
    ///
    /// ```
    /// use fairq_core::health::{Health, HealthPolicy};
    /// let p = HealthPolicy::default();
    /// assert_eq!(p.evaluate(0, None, 1_000_000_000), Health::Healthy);
    /// // Within the startup grace an old error only degrades.
    /// assert_eq!(p.evaluate(0, Some(0), 60_000 * 9), Health::Degraded { since: 0 });
    /// ```
    pub fn evaluate(
        &self,
        started_at: Millis,
        oldest_error: Option<Millis>,
        now: Millis,
    ) -> Health {
        let Some(since) = oldest_error else {
            return Health::Healthy;
        };
        let in_grace = now < started_at.saturating_add(millis(self.startup_grace));
        let too_old = now.saturating_sub(since) >= millis(self.allowed_error_time);
        if too_old && !in_grace {
            Health::Unhealthy { since }
        } else {
            Health::Degraded { since }
        }
    }
}

/// Tracks when a queue's current run of errors began, for stores that do not keep per-job
/// error times. A success ends the run.
///
/// Failures may be reported out of order (several settle batches in flight): the run began
/// at the earliest failure recorded, whichever arrived first. A success carries no time, so
/// it ends the run whenever it is reported: report it in order with the failures, as a
/// success reported after a newer failure ends that failure's run too.
///
/// ```
/// use fairq_core::health::ErrorClock;
/// let mut clock = ErrorClock::default();
/// clock.failure(10);
/// clock.failure(20);
/// assert_eq!(clock.since(), Some(10));
/// clock.success();
/// assert_eq!(clock.since(), None);
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrorClock {
    since: Option<Millis>,
}

impl ErrorClock {
    /// Records a failure at `now`; the run began at the earliest failure recorded in it.
    ///
    /// ```
    /// let mut c = fairq_core::health::ErrorClock::default();
    /// c.failure(3);
    /// assert_eq!(c.since(), Some(3));
    /// c.failure(2); // reported late
    /// assert_eq!(c.since(), Some(2));
    /// ```
    pub fn failure(&mut self, now: Millis) {
        self.since = Some(self.since.map_or(now, |since| since.min(now)));
    }

    /// Records a success: the queue is out of error, whatever failures were recorded before
    /// (see the [ordering note](ErrorClock)).
    ///
    /// ```
    /// let mut c = fairq_core::health::ErrorClock::default();
    /// c.failure(3);
    /// c.success();
    /// assert!(c.since().is_none());
    /// ```
    pub fn success(&mut self) {
        self.since = None;
    }

    /// When the current run of errors began.
    ///
    /// ```
    /// assert_eq!(fairq_core::health::ErrorClock::default().since(), None);
    /// ```
    pub fn since(&self) -> Option<Millis> {
        self.since
    }
}

/// Stops a retry sweep at its first failure, so a dead downstream service gets one request per
/// sweep instead of one per waiting job. Each queue has its own breaker, so one queue's outage
/// does not hold back the others.
///
/// ```
/// use fairq_core::health::SweepBreaker;
/// let mut breaker = SweepBreaker::new();
/// let mut tried = 0;
/// for outcome in [true, true, false, true, true] {
///     if !breaker.allows() {
///         break;
///     }
///     tried += 1;
///     breaker.record(outcome);
/// }
/// assert_eq!(tried, 3);
/// assert!(breaker.tripped());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepBreaker {
    tripped: bool,
    attempted: u32,
}

impl SweepBreaker {
    /// A closed breaker at the start of a sweep.
    ///
    /// ```
    /// assert!(fairq_core::health::SweepBreaker::new().allows());
    /// ```
    pub const fn new() -> Self {
        SweepBreaker {
            tripped: false,
            attempted: 0,
        }
    }

    /// True while the sweep may try another job.
    ///
    /// ```
    /// let mut b = fairq_core::health::SweepBreaker::new();
    /// b.record(false);
    /// assert!(!b.allows());
    /// ```
    pub fn allows(&self) -> bool {
        !self.tripped
    }

    /// Records the outcome of one retried job (`true`: it succeeded).
    ///
    /// ```
    /// let mut b = fairq_core::health::SweepBreaker::new();
    /// b.record(true);
    /// assert_eq!(b.attempted(), 1);
    /// ```
    pub fn record(&mut self, succeeded: bool) {
        // A sweep whose retries keep succeeding runs for as long as the queue lives.
        self.attempted = self.attempted.saturating_add(1);
        if !succeeded {
            self.tripped = true;
        }
    }

    /// True once a failure stopped the sweep.
    ///
    /// ```
    /// assert!(!fairq_core::health::SweepBreaker::new().tripped());
    /// ```
    pub fn tripped(&self) -> bool {
        self.tripped
    }

    /// Jobs tried in this sweep.
    ///
    /// ```
    /// assert_eq!(fairq_core::health::SweepBreaker::new().attempted(), 0);
    /// ```
    pub fn attempted(&self) -> u32 {
        self.attempted
    }
}

#[cfg(test)]
mod tests {
    use super::SweepBreaker;

    #[test]
    fn a_sweep_that_never_fails_counts_up_to_the_limit_and_stays_there() {
        let mut b = SweepBreaker {
            attempted: u32::MAX - 1,
            ..SweepBreaker::new()
        };
        b.record(true);
        b.record(true);
        assert_eq!(b.attempted(), u32::MAX);
        assert!(!b.tripped());
    }
}
