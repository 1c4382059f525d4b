//! The live jobs of one queue per status: what a queue-depth gauge shows.

use serde::{Deserialize, Serialize};

use crate::status_counts::StatusCounts;

/// How many of a queue's jobs wait or run, per status; finished jobs are not counted.
///
/// Read by [`Backend::live_counts`](crate::Backend::live_counts), which a store answers
/// from the one queue's jobs (or counters), unlike [`Backend::stats`](crate::Backend::stats),
/// which sums every queue's history.
///
/// ```
/// use fairq_worker::{LiveCounts, StatusCounts};
/// let counts = StatusCounts { scheduled: 3, running: 2, succeeded: 40, ..StatusCounts::default() };
/// let live = LiveCounts::from(counts);
/// assert_eq!((live.scheduled, live.running), (3, 2));
/// assert_eq!(live.total(), 5);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveCounts {
    /// Waiting for a dependency.
    pub blocked: u64,
    /// Waiting for a first run.
    pub scheduled: u64,
    /// Held by workers.
    pub running: u64,
    /// Waiting for a retry.
    pub retrying: u64,
}

impl LiveCounts {
    /// All live jobs of the queue.
    ///
    /// ```
    /// let live = fairq_worker::LiveCounts { blocked: 1, scheduled: 2, running: 3, retrying: 4 };
    /// assert_eq!(live.total(), 10);
    /// ```
    pub fn total(&self) -> u64 {
        self.blocked + self.scheduled + self.running + self.retrying
    }
}

impl From<StatusCounts> for LiveCounts {
    /// The live statuses of `counts`.
    fn from(counts: StatusCounts) -> Self {
        LiveCounts {
            blocked: counts.blocked,
            scheduled: counts.scheduled,
            running: counts.running,
            retrying: counts.retrying,
        }
    }
}
