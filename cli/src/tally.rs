//! What a demo or bench run counts as its workers finish jobs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use fairq_worker::{JobOutcome, JobReport};
use indicatif::ProgressBar;
use tokio::sync::watch;

/// Locks a mutex, carrying on past a panicked holder (the data are plain counters).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Finished jobs and failure messages, and a signal raised once `expected` jobs finished.
///
/// The count is a plain atomic and the signal is raised once: a run's waiter is woken by its
/// last job, not by every one (waking it per job cost the bench a cross-thread wake-up per
/// acknowledged batch and a notification per job, time the peers' harnesses do not spend).
pub(crate) struct Tally {
    finished: AtomicUsize,
    expected: usize,
    all_finished: watch::Sender<bool>,
    failures: Mutex<Vec<String>>,
}

impl Tally {
    /// A tally that signals once `expected` jobs finished.
    pub(crate) fn new(expected: usize) -> Self {
        Tally {
            finished: AtomicUsize::new(0),
            expected,
            all_finished: watch::Sender::new(expected == 0),
            failures: Mutex::new(Vec::new()),
        }
    }

    /// Waits until the expected number of jobs finished.
    pub(crate) async fn all_finished(&self) {
        let mut finished = self.all_finished.subscribe();
        // The sender lives as long as `self`: the wait ends only by the signal.
        let _ = finished.wait_for(|done| *done).await;
    }

    /// Records one finished job from a worker's `on_finished` hook and advances `bar`.
    pub(crate) fn record(&self, report: &JobReport, bar: &ProgressBar) {
        match (&report.outcome, &report.result) {
            (JobOutcome::Succeeded, _) => {}
            (_, Err(failure)) => lock(&self.failures).push(failure.message.clone()),
            (outcome, Ok(())) => lock(&self.failures).push(format!("job outcome {outcome:?}")),
        }
        if report.outcome.is_recorded() {
            let n = self.finished.fetch_add(1, Ordering::AcqRel) + 1;
            if n == self.expected {
                self.all_finished.send_replace(true);
            }
            bar.inc(1);
        }
    }

    /// The first failure recorded, if any.
    pub(crate) fn first_failure(&self) -> Option<String> {
        lock(&self.failures).first().cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairq_worker::{Job, JobReport};
    use std::time::Duration;

    fn succeeded() -> JobReport {
        JobReport {
            job: Job::example(Vec::new()),
            result: Ok(()),
            outcome: JobOutcome::Succeeded,
            elapsed: Duration::ZERO,
        }
    }

    #[tokio::test]
    async fn the_signal_rises_with_the_expected_job_and_not_before() {
        let tally = Tally::new(3);
        let bar = ProgressBar::hidden();
        let mut signal = tally.all_finished.subscribe();
        for _ in 0..2 {
            tally.record(&succeeded(), &bar);
        }
        assert!(!*signal.borrow_and_update(), "two of three jobs finished");
        tally.record(&succeeded(), &bar);
        tally.all_finished().await;
        // A duplicate completion (at-least-once) leaves the count honest.
        tally.record(&succeeded(), &bar);
        assert_eq!(tally.finished.load(Ordering::Acquire), 4);
        assert_eq!(bar.position(), 4);
        assert!(tally.first_failure().is_none());
    }

    #[tokio::test]
    async fn nothing_expected_is_finished_at_once() {
        Tally::new(0).all_finished().await;
    }
}
