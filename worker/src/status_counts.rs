//! Jobs per status in one queue: what `Backend::stats` reports for each queue.

use serde::{Deserialize, Serialize};

use crate::job::JobStatus;

/// Jobs per status in one queue.
///
/// ```
/// use fairq_worker::{JobStatus, StatusCounts};
/// let mut c = StatusCounts::default();
/// c.add(JobStatus::Dead, 2);
/// assert_eq!(c.get(JobStatus::Dead), 2);
/// assert_eq!(c.total(), 2);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCounts {
    /// Waiting for a dependency.
    pub blocked: u64,
    /// Waiting for a first run.
    pub scheduled: u64,
    /// Held by workers.
    pub running: u64,
    /// Waiting for a retry.
    pub retrying: u64,
    /// Finished successfully (and not yet pruned).
    pub succeeded: u64,
    /// Given up on (and not yet pruned).
    pub dead: u64,
}

impl StatusCounts {
    /// The count of one status.
    ///
    /// ```
    /// assert_eq!(fairq_worker::StatusCounts::default().get(fairq_worker::JobStatus::Running), 0);
    /// ```
    pub fn get(&self, status: JobStatus) -> u64 {
        match status {
            JobStatus::Blocked => self.blocked,
            JobStatus::Scheduled => self.scheduled,
            JobStatus::Running => self.running,
            JobStatus::Retrying => self.retrying,
            JobStatus::Succeeded => self.succeeded,
            JobStatus::Dead => self.dead,
        }
    }

    /// Adds `n` to one status.
    ///
    /// ```
    /// let mut c = fairq_worker::StatusCounts::default();
    /// c.add(fairq_worker::JobStatus::Blocked, 1);
    /// assert_eq!(c.blocked, 1);
    /// ```
    pub fn add(&mut self, status: JobStatus, n: u64) {
        let slot = match status {
            JobStatus::Blocked => &mut self.blocked,
            JobStatus::Scheduled => &mut self.scheduled,
            JobStatus::Running => &mut self.running,
            JobStatus::Retrying => &mut self.retrying,
            JobStatus::Succeeded => &mut self.succeeded,
            JobStatus::Dead => &mut self.dead,
        };
        *slot += n;
    }

    /// All jobs counted.
    ///
    /// ```
    /// assert_eq!(fairq_worker::StatusCounts::default().total(), 0);
    /// ```
    pub fn total(&self) -> u64 {
        JobStatus::ALL.iter().map(|s| self.get(*s)).sum()
    }

    /// Jobs not yet finished.
    ///
    /// ```
    /// let mut c = fairq_worker::StatusCounts::default();
    /// c.add(fairq_worker::JobStatus::Succeeded, 3);
    /// assert_eq!(c.pending(), 0);
    /// ```
    pub fn pending(&self) -> u64 {
        self.blocked + self.scheduled + self.running + self.retrying
    }
}
