//! What a demo or bench run counts as its workers finish jobs.

use std::sync::{Mutex, MutexGuard, PoisonError};

use fairq_worker::{JobOutcome, JobReport};
use indicatif::ProgressBar;
use tokio::sync::watch;

/// Locks a mutex, carrying on past a panicked holder (the data are plain counters).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Finished jobs (watchable, so a run can wait for its last job) and failure messages.
pub(crate) struct Tally {
    pub(crate) finished: watch::Sender<usize>,
    failures: Mutex<Vec<String>>,
}

impl Tally {
    pub(crate) fn new() -> Self {
        Tally {
            finished: watch::Sender::new(0),
            failures: Mutex::new(Vec::new()),
        }
    }

    /// Records one finished job from a worker's `on_finished` hook and advances `bar`.
    pub(crate) fn record(&self, report: &JobReport, bar: &ProgressBar) {
        match (&report.outcome, &report.result) {
            (JobOutcome::Succeeded, _) => {}
            (_, Err(failure)) => lock(&self.failures).push(failure.message.clone()),
            (outcome, Ok(())) => lock(&self.failures).push(format!("job outcome {outcome:?}")),
        }
        if report.outcome.is_recorded() {
            self.finished.send_modify(|n| *n += 1);
            bar.inc(1);
        }
    }

    /// The first failure recorded, if any.
    pub(crate) fn first_failure(&self) -> Option<String> {
        lock(&self.failures).first().cloned()
    }
}
