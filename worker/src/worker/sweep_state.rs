//! One queue's retry-sweep bookkeeping, kept in its pipeline (`queue.rs`); `sweep.rs` applies
//! the sweep to it.

use std::time::Duration;

use fairq_core::job::Millis;
use fairq_core::sweep::RetrySweep;

use crate::job::{Failure, Job};

/// One queue's sweep state, kept in its pipeline.
#[derive(Debug)]
pub(crate) struct SweepState {
    /// `None`: the sweep is off.
    pub(crate) sweep: Option<RetrySweep>,
    /// Failed retries that finished but whose outcome the store has not answered for yet:
    /// claims wait for them.
    pub(crate) judging: usize,
    /// The store cannot hold retries back (said once in the log).
    pub(crate) store_cannot_hold: bool,
    /// With `sweep_holds_new_jobs`: no claim at all before this time.
    pub(crate) paused_until: Option<Millis>,
}

impl SweepState {
    pub(crate) fn new(every: Option<Duration>) -> Self {
        SweepState {
            sweep: every.map(RetrySweep::new),
            judging: 0,
            store_cannot_hold: false,
            paused_until: None,
        }
    }

    /// True when `job`'s finished attempt, with `result`, is a failed retry the sweep must
    /// judge before the queue claims again.
    pub(crate) fn must_judge(&self, job: &Job, result: &Result<(), Failure>) -> bool {
        self.sweep.is_some() && is_retry(job) && matches!(result, Err(f) if !f.permanent)
    }
}

/// A job that failed before (or lost a lease): its attempt is a retry.
pub(crate) fn is_retry(job: &Job) -> bool {
    job.attempt > 1
}
