//! The per-queue retry sweep, applied: core's
//! [`RetrySweep`](fairq_core::sweep::RetrySweep) decides when a failed retry stops the
//! sweep; the worker holds the queue's other retries in the store until the next
//! sweep ([`Backend::hold_retries`]), hands back retries it had already claimed ahead of a
//! free slot, and (when so configured) claims nothing at all until then.
//!
//! Claims wait while a failed retry's outcome is on its way to the store: the sweep is
//! judged once the store answered, and a claim made in between could take a retry the hold
//! is about to move. So that a store that does not answer cannot stall the queue (and its
//! acker) for good, each of the hold's store calls gets one heartbeat interval, as the
//! heartbeater's hand-back does; one unanswered by then is dropped and reported.

use fairq_core::job::Millis;
use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::guard;
use super::hooks::Operation;
use super::later::later;
use super::queue::{Buffered, QueueRuntime};
use super::shared::{Shared, raised};
use super::sweep_state::is_retry;
use crate::backend::Backend;
use crate::error::BackendError;
use crate::job::{Claim, Failure, Job};

/// A queue's sweep as [`WorkerHandle::health_report`](crate::WorkerHandle::health_report)
/// shows it.
///
/// ```
/// use std::time::Duration;
/// use fairq_worker::SweepStatus;
/// let status = SweepStatus {
///     every: Duration::from_secs(10),
///     held_until: Some(12_000),
///     stops: 1,
///     holds_new_jobs: false,
///     store_holds: true,
/// };
/// assert!(status.is_held());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepStatus {
    /// The time between sweeps.
    pub every: Duration,
    /// When the next sweep begins, while a failed retry has stopped the current one.
    pub held_until: Option<Millis>,
    /// How many times a failed retry stopped a sweep of this worker.
    pub stops: u64,
    /// Whether a stopped sweep holds new jobs back too.
    pub holds_new_jobs: bool,
    /// False once the store answered that it cannot hold retries back
    /// ([`BackendError::Unsupported`]): retries then run when their own backoff ends.
    pub store_holds: bool,
}

impl SweepStatus {
    /// True while the queue's retries wait for the next sweep.
    ///
    /// ```
    /// let status = fairq_worker::SweepStatus {
    ///     every: std::time::Duration::from_secs(1),
    ///     held_until: None,
    ///     stops: 0,
    ///     holds_new_jobs: false,
    ///     store_holds: true,
    /// };
    /// assert!(!status.is_held());
    /// ```
    pub fn is_held(&self) -> bool {
        self.held_until.is_some()
    }
}

/// What a finished attempt tells the sweep: `Some(true)` a retry succeeded, `Some(false)` a
/// retry failed again; `None` nothing (a first attempt, or a permanent failure, which is the
/// job's fault, not the downstream service's).
pub(crate) fn signal(job: &Job, result: &Result<(), Failure>) -> Option<bool> {
    if !is_retry(job) {
        return None;
    }
    match result {
        Ok(()) => Some(true),
        Err(failure) if !failure.permanent => Some(false),
        Err(_) => None,
    }
}

/// Holds the queue's retries until `until`: retries already buffered here are handed back
/// (where the store can take jobs back) and the store moves every due retry to `until`.
///
/// A hand-back that fails as a whole may still have landed (its answer lost), and so may one
/// whose answer leaves a retry out: such retries are not started here, since the store may
/// have made them due again and a claim would then run them a second time. Like the
/// heartbeater's hand-back that failed, they wait to be sent again at the next beat (or by
/// a shutdown), where a refusal because the job is no longer held is checked against its
/// record.
///
/// A hand-back or hold the store has not answered within one heartbeat interval is dropped
/// and reported: the hand-back's retries are then treated as above (unknown), and the hold
/// is left undone. Raising `give_up` (the shutdown deadline) ends the wait for the store too:
/// retries whose hand-back had not been answered then go to the shutdown's own hand-back
/// (which tells a refusal because this one landed from a lost lease), and the hold is left
/// undone.
pub(crate) async fn hold<B: Backend>(
    shared: &Shared<B>,
    queue: &QueueRuntime,
    until: Millis,
    give_up: &mut watch::Receiver<bool>,
) {
    tracing::info!(
        queue = %queue.name,
        until,
        "a retried job failed again: the queue's other retries wait for the next sweep"
    );
    let limit = queue.config.get_heartbeat_interval();
    let buffered: Vec<Buffered> = {
        let mut st = queue.lock();
        if queue.config.get_sweep_holds_new_jobs() {
            st.sweep.paused_until = Some(until);
            // The claimer may be waiting for room, which no one signals while the pause
            // lasts: wake it so that it waits for the pause's end instead, on a timer.
            queue.room.notify_one();
        }
        if st.release_unsupported {
            Vec::new()
        } else {
            let (retries, rest): (Vec<Buffered>, Vec<Buffered>) = std::mem::take(&mut st.buffer)
                .into_iter()
                .partition(|b| is_retry(&b.job));
            st.buffer = rest.into();
            retries
        }
    };
    if !buffered.is_empty() {
        let claims: Vec<Claim> = buffered.iter().map(|b| b.job.claim).collect();
        let by = later(Instant::now(), limit);
        let release = guard::by(by, "release", shared.backend.release(claims.clone()));
        let Some(released) = unless_given_up(release, give_up).await else {
            // Whether the store took them is unknown: the shutdown hands them back again.
            let attempts = buffered.iter().map(|b| (b.job.claim, b.job.attempt));
            queue.lock().release_unknown.extend(attempts);
            return;
        };
        match released {
            Ok(answers) => {
                let mut answers = answers.into_iter();
                let mut unknown = Vec::new();
                for b in buffered {
                    let id = b.job.claim.id;
                    match answers.next() {
                        Some(Ok(())) => {}
                        // The lease was lost already: someone else has the job.
                        Some(Err(source)) => {
                            shared.report(&queue.name, Operation::Release, Some(id), source);
                        }
                        // Left out of the answer: whether the store took it is unknown, so it
                        // is sent again, like the jobs of a call that failed as a whole.
                        None => {
                            let source = guard::missing_answer();
                            shared.report(&queue.name, Operation::Release, Some(id), source);
                            unknown.push(b);
                        }
                    }
                }
                queue.lock().unreleased.extend(unknown);
            }
            Err(BackendError::Unsupported(_)) => {
                // The store took nothing back: still ours, they run from the buffer after all
                // (and buffered jobs never expire again).
                let mut st = queue.lock();
                st.release_unsupported = true;
                for b in buffered.into_iter().rev() {
                    st.buffer.push_front(b);
                }
            }
            Err(source) => {
                // Failed as a whole, or not answered in time.
                shared.report(&queue.name, Operation::Release, None, source);
                // Whether the store took them is unknown: never started here; sent again.
                queue.lock().unreleased.extend(buffered);
            }
        }
    }
    if queue.lock().sweep.store_cannot_hold {
        return;
    }
    let held = guard::by(
        later(Instant::now(), limit),
        "hold_retries",
        shared.backend.hold_retries(&queue.name, until),
    );
    let Some(held) = unless_given_up(held, give_up).await else {
        tracing::warn!(queue = %queue.name, "the shutdown deadline passed before the store held the queue's retries");
        return;
    };
    match held {
        Ok(held) => tracing::debug!(queue = %queue.name, held, "retries held until the next sweep"),
        Err(BackendError::Unsupported(what)) => {
            queue.lock().sweep.store_cannot_hold = true;
            tracing::warn!(
                queue = %queue.name,
                "the store does not support {what}: the retry sweep cannot hold retries back, \
                 each retry runs when its own backoff ends"
            );
        }
        Err(source) => shared.report(&queue.name, Operation::HoldRetries, None, source),
    }
}

/// The output of `call`, or `None` if `give_up` is raised first.
pub(crate) async fn unless_given_up<T>(
    call: impl Future<Output = T>,
    give_up: &mut watch::Receiver<bool>,
) -> Option<T> {
    tokio::select! {
        biased;
        () = raised(give_up) => None,
        out = call => Some(out),
    }
}

/// The sweep's state at `now`, if the queue has a sweep.
pub(crate) fn status(queue: &QueueRuntime, now: Millis) -> Option<SweepStatus> {
    let mut st = queue.lock();
    let store_holds = !st.sweep.store_cannot_hold;
    let sweep = st.sweep.sweep.as_mut()?;
    Some(SweepStatus {
        every: sweep.every(),
        held_until: sweep.held_until(now),
        stops: sweep.stops(),
        holds_new_jobs: queue.config.get_sweep_holds_new_jobs(),
        store_holds,
    })
}
