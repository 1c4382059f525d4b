//! How long finished jobs are kept: [`Retention`], what [`Backend::prune`] deletes by.
//!
//! [`Backend::prune`]: crate::Backend::prune

use std::time::Duration;

use fairq_core::job::Millis;
use serde::{Deserialize, Serialize};

use crate::job::JobStatus;

/// How long a store keeps finished jobs, per outcome: a prune deletes a succeeded job that
/// finished longer ago than `succeeded`, and a dead job that died longer ago than `dead`.
/// `None` keeps that outcome for good.
///
/// Dead jobs are usually kept longer than succeeded ones: they are what an operator looks
/// at, and revives, after an incident.
///
/// ```
/// use std::time::Duration;
/// use fairq_worker::{JobStatus, Retention};
///
/// let day = Duration::from_secs(86_400);
/// let keep = Retention::finished(day).dead_for(7 * day);
/// assert_eq!(keep.age(JobStatus::Succeeded), Some(day));
/// assert_eq!(keep.age(JobStatus::Dead), Some(7 * day));
/// assert_eq!(keep.shortest(), Some(day));
///
/// // A bare age keeps both outcomes for as long.
/// assert_eq!(Retention::from(day), Retention::finished(day));
/// // Dead jobs kept until an operator deletes them.
/// assert_eq!(Retention::finished(day).keep_dead().age(JobStatus::Dead), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// How long succeeded jobs are kept after they finish; `None`: for good.
    pub succeeded: Option<Duration>,
    /// How long dead jobs are kept after they die; `None`: for good.
    pub dead: Option<Duration>,
}

impl Retention {
    /// Keeps succeeded and dead jobs for `age` after they finish.
    ///
    /// ```
    /// use std::time::Duration;
    /// let r = fairq_worker::Retention::finished(Duration::from_secs(60));
    /// assert_eq!((r.succeeded, r.dead), (Some(Duration::from_secs(60)), Some(Duration::from_secs(60))));
    /// ```
    pub const fn finished(age: Duration) -> Self {
        Retention {
            succeeded: Some(age),
            dead: Some(age),
        }
    }

    /// Keeps every finished job for good: a prune deletes nothing.
    ///
    /// ```
    /// assert!(fairq_worker::Retention::forever().keeps_everything());
    /// ```
    pub const fn forever() -> Self {
        Retention {
            succeeded: None,
            dead: None,
        }
    }

    /// Keeps succeeded jobs for `age` after they finish.
    ///
    /// ```
    /// use std::time::Duration;
    /// let r = fairq_worker::Retention::forever().succeeded_for(Duration::from_secs(5));
    /// assert_eq!((r.succeeded, r.dead), (Some(Duration::from_secs(5)), None));
    /// ```
    pub const fn succeeded_for(mut self, age: Duration) -> Self {
        self.succeeded = Some(age);
        self
    }

    /// Keeps dead jobs for `age` after they die.
    ///
    /// ```
    /// use std::time::Duration;
    /// let r = fairq_worker::Retention::forever().dead_for(Duration::from_secs(5));
    /// assert_eq!((r.succeeded, r.dead), (None, Some(Duration::from_secs(5))));
    /// ```
    pub const fn dead_for(mut self, age: Duration) -> Self {
        self.dead = Some(age);
        self
    }

    /// Keeps dead jobs for good.
    ///
    /// ```
    /// use std::time::Duration;
    /// let r = fairq_worker::Retention::finished(Duration::from_secs(5)).keep_dead();
    /// assert_eq!(r.dead, None);
    /// ```
    pub const fn keep_dead(mut self) -> Self {
        self.dead = None;
        self
    }

    /// How long jobs that finished in `status` are kept (`None`: for good, or `status` is
    /// not a finished one).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::{JobStatus, Retention};
    /// let r = Retention::finished(Duration::from_secs(5));
    /// assert_eq!(r.age(JobStatus::Dead), Some(Duration::from_secs(5)));
    /// assert_eq!(r.age(JobStatus::Running), None);
    /// ```
    pub fn age(&self, status: JobStatus) -> Option<Duration> {
        match status {
            JobStatus::Succeeded => self.succeeded,
            JobStatus::Dead => self.dead,
            _ => None,
        }
    }

    /// The shorter of the two ages (`None`: everything is kept).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::Retention;
    /// let r = Retention::forever().dead_for(Duration::from_secs(9));
    /// assert_eq!(r.shortest(), Some(Duration::from_secs(9)));
    /// ```
    pub fn shortest(&self) -> Option<Duration> {
        match (self.succeeded, self.dead) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// True when a prune deletes nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert!(!fairq_worker::Retention::finished(Duration::ZERO).keeps_everything());
    /// ```
    pub fn keeps_everything(&self) -> bool {
        self.succeeded.is_none() && self.dead.is_none()
    }

    /// The finish times at or before which jobs of each outcome go, at `now` (milliseconds
    /// since the epoch): `(succeeded, dead)`, `None` where nothing of that outcome goes: the
    /// outcome is kept, or its age is longer than `now` (no job can have finished that long
    /// ago, not even one that finished at time 0).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::Retention;
    /// let r = Retention::finished(Duration::from_millis(300)).keep_dead();
    /// assert_eq!(r.cutoffs(1_000), (Some(700), None));
    /// assert_eq!(r.cutoffs(300), (Some(0), None));
    /// assert_eq!(r.cutoffs(100), (None, None));
    /// ```
    pub fn cutoffs(&self, now: Millis) -> (Option<Millis>, Option<Millis>) {
        let cutoff = |age: Duration| {
            let age = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
            now.checked_sub(age)
        };
        (self.succeeded.and_then(cutoff), self.dead.and_then(cutoff))
    }

    /// Whether a job that finished in `status` at `finished_at` goes at `now`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::{JobStatus, Retention};
    /// let r = Retention::finished(Duration::from_millis(300)).dead_for(Duration::from_millis(500));
    /// assert!(r.expired(JobStatus::Succeeded, 700, 1_000));
    /// assert!(!r.expired(JobStatus::Dead, 700, 1_000));
    /// assert!(r.expired(JobStatus::Dead, 500, 1_000));
    /// assert!(!r.expired(JobStatus::Scheduled, 0, 1_000));
    /// ```
    pub fn expired(&self, status: JobStatus, finished_at: Millis, now: Millis) -> bool {
        expired_at(self.cutoffs(now), status, finished_at)
    }
}

/// Whether a job that finished in `status` at `finished_at` is at or before its outcome's
/// cutoff in `(succeeded, dead)` (from [`Retention::cutoffs`]): a prune that judges many jobs
/// computes the cutoffs once and asks this per job.
pub(crate) fn expired_at(
    (succeeded, dead): (Option<Millis>, Option<Millis>),
    status: JobStatus,
    finished_at: Millis,
) -> bool {
    let cutoff = match status {
        JobStatus::Succeeded => succeeded,
        JobStatus::Dead => dead,
        _ => None,
    };
    cutoff.is_some_and(|c| finished_at <= c)
}

impl From<Duration> for Retention {
    /// Both outcomes kept for the same age ([`Retention::finished`]).
    fn from(age: Duration) -> Self {
        Retention::finished(age)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_finished_at_time_zero_goes_only_once_its_age_has_passed() {
        let r = Retention::finished(Duration::from_millis(300));
        assert!(!r.expired(JobStatus::Succeeded, 0, 100));
        assert!(!r.expired(JobStatus::Dead, 0, 299));
        assert!(r.expired(JobStatus::Succeeded, 0, 300));
        assert!(r.expired(JobStatus::Dead, 0, 1_000));
        let forever = Retention::finished(Duration::MAX);
        assert!(!forever.expired(JobStatus::Succeeded, 0, Millis::MAX - 1));
    }
}
