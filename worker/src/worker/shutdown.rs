//! Graceful shutdown: stop claiming, hand buffered jobs back, let running handlers finish
//! and the acker settle them, all within a deadline; then report what was left behind.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::guard;
use super::hooks::Operation;
use super::later::later;
use super::lock::lock;
use super::shared::Shared;
use super::task_failure::TaskFailure;
use crate::backend::Backend;
use crate::error::BackendError;
use crate::job::{Claim, JobId};
use fairq_core::job::State;

/// How long a shutdown may run past its deadline: the last hand-back, the ackers' and the
/// other tasks' ends must all be done by then, whatever the store does. A task still
/// waiting for the store at that point is stopped where it is; what it held is reported.
pub(crate) const HAND_BACK_GRACE: Duration = Duration::from_secs(2);

/// What a shutdown did with the jobs the worker held. Nothing is lost either way: a job the
/// store did not take back stays claimed and comes back when its lease expires (a rescue,
/// which counts an attempt).
///
/// ```
/// let report = fairq_worker::ShutdownReport::default();
/// assert!(report.is_clean());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Jobs still running at the deadline: their handlers were dropped, and the jobs handed
    /// back (they are also in `released` or `left_claimed`).
    pub abandoned: Vec<JobId>,
    /// Jobs handed back to the store, due again at once with their attempt not counted:
    /// prefetched jobs that never started, jobs whose handlers stopped when asked to, and
    /// abandoned ones.
    pub released: Vec<JobId>,
    /// Jobs to hand back that the store could not take (it does not support
    /// [`Backend::release`], or the call failed): rescued once their leases expire.
    pub left_claimed: Vec<JobId>,
    /// Jobs whose handlers finished but whose outcomes the store had not confirmed by the
    /// deadline: they run again once their leases expire (unless the settlement landed).
    pub unsettled: Vec<JobId>,
    /// Worker tasks that panicked while the worker ran, which stopped it (see
    /// [`WorkerHandle::failed`](crate::WorkerHandle::failed)). What a failed task held is
    /// not in the lists above: it stays claimed until its lease expires.
    pub failed_tasks: Vec<TaskFailure>,
}

impl ShutdownReport {
    /// True when every running job finished (or stopped when asked) before the deadline,
    /// every outcome was recorded, every job to hand back was taken back and no worker task
    /// panicked: nothing is left to lease expiry.
    ///
    /// ```
    /// use fairq_worker::{JobId, ShutdownReport};
    /// let report = ShutdownReport { abandoned: vec![JobId(1)], ..Default::default() };
    /// assert!(!report.is_clean());
    /// let report = ShutdownReport { released: vec![JobId(2)], ..Default::default() };
    /// assert!(report.is_clean());
    /// ```
    pub fn is_clean(&self) -> bool {
        self.abandoned.is_empty()
            && self.left_claimed.is_empty()
            && self.unsettled.is_empty()
            && self.failed_tasks.is_empty()
    }
}

/// The tasks of one served queue (slots are kept by the queue itself).
pub(crate) struct QueueTasks {
    /// Each task's handle answers `None` when the task panicked (see `supervise`).
    pub(crate) claimer: JoinHandle<Option<()>>,
    pub(crate) rescuer: JoinHandle<Option<()>>,
    pub(crate) heartbeater: JoinHandle<Option<()>>,
    /// `None` when the acker panicked (its jobs are left to lease expiry).
    pub(crate) acker: JoinHandle<Option<Vec<JobId>>>,
    /// The worker's pruner, among its first queue's tasks when it prunes.
    pub(crate) pruner: Option<JoinHandle<Option<()>>>,
}

/// The signals a running worker is stopped with.
pub(crate) struct Signals {
    /// Raised last: heartbeaters stop.
    pub(crate) exit: watch::Sender<bool>,
    /// Raised at the deadline: ackers give up on what the store has not answered.
    pub(crate) give_up: watch::Sender<bool>,
}

pub(crate) async fn shutdown<B: Backend>(
    shared: Arc<Shared<B>>,
    tasks: Vec<QueueTasks>,
    signals: Signals,
    deadline: Duration,
) -> ShutdownReport {
    // Before the first await: the first poll stops claiming and starting jobs, and tells
    // handlers.
    shared.stop_all();
    let until = later(Instant::now(), deadline);
    // Nothing waits past this, not even for a store call that never answers.
    let hard = later(until, HAND_BACK_GRACE);
    // A step after the graceful part gets the grace, within the hard end.
    let grace = || (Instant::now() + HAND_BACK_GRACE).min(hard);
    let mut report = ShutdownReport::default();
    let mut claimers = Vec::new();
    let mut rescuers = Vec::new();
    let mut heartbeaters = Vec::new();
    let mut ackers = Vec::new();
    for t in tasks {
        claimers.push(Some(t.claimer));
        rescuers.push(t.rescuer);
        // The pruner stops with the rescuers (at the stop signal, after a prune in flight).
        rescuers.extend(t.pruner);
        heartbeaters.push(t.heartbeater);
        ackers.push(Some(t.acker));
    }

    // A claim in flight finishes (its jobs are buffered), then the buffer goes back.
    if tokio::time::timeout_at(until, join_all(&mut claimers))
        .await
        .is_err()
    {
        abort_all(&mut claimers).await;
    }
    hand_back(&shared, &mut report, until.max(grace())).await;

    // Running handlers finish; the acker settles them and ends once every slot is gone.
    let mut slots: Vec<Option<JoinHandle<()>>> = shared
        .queues
        .iter()
        .flat_map(|q| q.take_slot_tasks())
        .map(Some)
        .collect();
    let graceful = tokio::time::timeout_at(until, async {
        join_all(&mut slots).await;
        let mut unsettled = Vec::new();
        for acker in &mut ackers {
            if let Some(task) = acker {
                if let Ok(Some(left)) = task.await {
                    unsettled.extend(left);
                }
                *acker = None;
            }
        }
        unsettled
    })
    .await;
    match graceful {
        Ok(unsettled) => report.unsettled = unsettled,
        Err(_) => {
            abort_all(&mut slots).await;
            let interrupted: Vec<Claim> =
                shared.queues.iter().flat_map(|q| q.interrupted()).collect();
            for claim in &interrupted {
                tracing::warn!(job.id = %claim.id, "shutdown deadline passed; job stopped and handed back");
            }
            report.abandoned = interrupted.iter().map(|c| c.id).collect();
            signals.give_up.send_replace(true);
            let by = grace();
            for (queue, slot) in shared.queues.iter().zip(&mut ackers) {
                let Some(mut task) = slot.take() else {
                    continue;
                };
                match tokio::time::timeout_at(by, &mut task).await {
                    Ok(Ok(Some(left))) => report.unsettled.extend(left),
                    // It panicked: its jobs are left to lease expiry (see `failed_tasks`).
                    Ok(_) => {}
                    Err(_) => {
                        task.abort();
                        let _ = task.await;
                        let left = queue.unsettled_ids();
                        tracing::warn!(queue = %queue.name, jobs = left.len(), "the acker did not stop in time; its jobs are left to lease expiry");
                        report.unsettled.extend(left);
                    }
                }
            }
        }
    }
    // A hand-back of expired buffered jobs the heartbeater had in flight: its answer, or
    // (failed as a whole) its jobs for the hand-back below.
    hand_backs_in_flight(&shared, &mut report, grace()).await;
    // Jobs stopped by shutdown, and any a last combined settle-and-claim brought in.
    hand_back(&shared, &mut report, grace()).await;

    signals.exit.send_replace(true);
    let by = grace();
    for mut task in heartbeaters.into_iter().chain(rescuers) {
        // A task that panicked has nothing left to stop; one stuck in a store call is
        // stopped there (what it renews was handed back or is reported already).
        if tokio::time::timeout_at(by, &mut task).await.is_err() {
            tracing::warn!(
                "a heartbeat or rescue call did not answer by the end of the shutdown; dropped"
            );
            task.abort();
            let _ = task.await;
        }
    }
    report.failed_tasks = lock(&shared.failures).clone();
    for list in [
        &mut report.abandoned,
        &mut report.released,
        &mut report.left_claimed,
        &mut report.unsettled,
    ] {
        list.sort_unstable();
    }
    report
}

/// Waits for every task still listed, marking each one done.
async fn join_all<T>(tasks: &mut [Option<JoinHandle<T>>]) {
    for slot in tasks.iter_mut() {
        if let Some(task) = slot {
            let _ = task.await;
            *slot = None;
        }
    }
}

/// Stops every task still listed and waits until each is gone.
async fn abort_all<T>(tasks: &mut [Option<JoinHandle<T>>]) {
    for task in tasks.iter().flatten() {
        task.abort();
    }
    join_all(tasks).await;
}

/// Waits, until `until` at the latest, for the hand-backs the heartbeaters had in flight
/// when shutdown began, and reports what the store did with them; one still unanswered then
/// is left to lease expiry (whether the store took it is unknown). Those that failed as a
/// whole are back among the jobs to hand back.
async fn hand_backs_in_flight<B: Backend>(
    shared: &Shared<B>,
    report: &mut ShutdownReport,
    until: Instant,
) {
    for queue in &shared.queues {
        let _ = tokio::time::timeout_at(until, queue.hand_back_answered()).await;
        let (answered, unanswered) = queue.take_hand_backs_in_flight();
        for (id, taken) in answered {
            if taken {
                report.released.push(id);
            } else {
                report.left_claimed.push(id);
            }
        }
        if !unanswered.is_empty() {
            tracing::warn!(queue = %queue.name, jobs = unanswered.len(), "a hand-back of expired buffered jobs did not answer by the end of the shutdown; left to lease expiry");
            report.left_claimed.extend(unanswered);
        }
    }
}

/// Whether the job of `claim`, at `attempt` when it was handed back by a call whose answer
/// never came, was taken back by that call, as its record shows (read by `until`): its
/// attempt refunded and not claimed since, or claimed again once (a rescue would have counted
/// the attempt instead, and a claim after it would be one further). False when the record
/// cannot tell.
pub(crate) async fn handed_back_before<B: Backend>(
    shared: &Shared<B>,
    claim: Claim,
    attempt: u32,
    until: Instant,
) -> bool {
    let read = guard::call("get", shared.backend.get(claim.id));
    let Ok(Ok(Some(info))) = tokio::time::timeout_at(until, read).await else {
        return false;
    };
    match info.state {
        State::Scheduled { .. } | State::Retrying { .. } => info.attempts + 1 == attempt,
        State::Running { lease } => lease.token != claim.token && info.attempts == attempt,
        State::Succeeded { .. } => info.attempts == attempt,
        _ => false,
    }
}

/// Hands every buffered job and every job stopped by shutdown back to the store, by `until`
/// at the latest.
async fn hand_back<B: Backend>(shared: &Shared<B>, report: &mut ShutdownReport, until: Instant) {
    for queue in &shared.queues {
        let (claims, handed_back_maybe) = queue.take_hand_backs();
        if claims.is_empty() {
            continue;
        }
        let ids = claims.iter().map(|c| c.id);
        let release = guard::call("release", shared.backend.release(claims.clone()));
        match tokio::time::timeout_at(until, release).await {
            Ok(Ok(answers)) => {
                let mut answers = answers.into_iter();
                for claim in &claims {
                    match answers.next() {
                        Some(Ok(())) => report.released.push(claim.id),
                        Some(Err(source)) => {
                            let earlier = handed_back_maybe.get(claim).copied();
                            if let Some(attempt) = earlier.filter(|_| source.is_not_held()) {
                                if handed_back_before(shared, *claim, attempt, until).await {
                                    tracing::debug!(job.id = %claim.id, "handed back by the retry sweep's call, whose answer was cut off");
                                    report.released.push(claim.id);
                                    continue;
                                }
                            }
                            shared.report(&queue.name, Operation::Release, Some(claim.id), source);
                            report.left_claimed.push(claim.id);
                        }
                        None => report.left_claimed.push(claim.id),
                    }
                }
            }
            Ok(Err(BackendError::Unsupported(what))) => {
                tracing::info!(
                    queue = %queue.name,
                    jobs = claims.len(),
                    "the store does not support {what}; the jobs are left to lease expiry"
                );
                report.left_claimed.extend(ids);
            }
            Ok(Err(source)) => {
                shared.report(&queue.name, Operation::Release, None, source);
                report.left_claimed.extend(ids);
            }
            Err(_) => {
                tracing::warn!(queue = %queue.name, "handing jobs back timed out; left to lease expiry");
                report.left_claimed.extend(ids);
            }
        }
    }
}
