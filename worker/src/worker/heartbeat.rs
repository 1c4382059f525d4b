//! The heartbeater: renews the leases of every job a queue holds (running, buffered,
//! finished but not yet recorded by the store, and stopped by shutdown but not yet handed
//! back) with one [`Backend::heartbeat_many`] call per heartbeat interval, and hands
//! buffered jobs that waited too long for a slot back to the store.
//!
//! Renewals never wait for a hand-back: each beat takes the jobs to hand back out of the
//! buffer, renews every other lease, and only then hands them back, giving the store one
//! heartbeat interval to answer. A hand-back unanswered by then is dropped and treated like
//! one that failed as a whole (whether the store took the jobs is unknown): its jobs are not
//! started here, and are sent again at the next beat or by a shutdown. A hand-back stays
//! visible in the queue's state while it is in flight, so that a shutdown that begins
//! meanwhile waits for its answer and reports its jobs; once shutdown began, the
//! heartbeater starts no hand-back (the shutdown hands back what is left).
//!
//! A renewal the store's answer leaves out is reported and tried again at the next beat
//! (whether it landed is unknown, and the lease is not known to be lost).
//!
//! A refused renewal means the lease is lost (the job was rescued and may run elsewhere): a
//! running job's renewals stop and its completion will be refused; a buffered job is
//! dropped from the buffer and never started here; both are reported to `on_error`. A
//! finished job's renewals stop too, unreported: its settlement may simply have landed
//! between the beat reading the claims and the store answering, and a settlement the store
//! refuses is reported by the acker.

use std::collections::HashMap;
use std::sync::Arc;

use fairq_core::job::Millis;
use tokio::sync::watch;
use tokio::time::Instant;

use super::config::ErrorBackoff;
use super::guard;
use super::hooks::Operation;
use super::later::later;
use super::queue::{Buffered, Pipeline, QueueRuntime};
use super::shared::{Shared, raised};
use super::shutdown::handed_back_before;
use crate::backend::Backend;
use crate::error::BackendError;
use crate::job::Claim;

/// Renews one queue's leases until `exit` is raised.
pub(crate) async fn heartbeater<B: Backend>(
    shared: Arc<Shared<B>>,
    queue: Arc<QueueRuntime>,
    mut exit: watch::Receiver<bool>,
) {
    let every = queue.config.get_heartbeat_interval();
    let (min, max) = shared.error_backoff;
    let mut backoff = ErrorBackoff::new(min, max);
    let mut next = later(Instant::now(), every);
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = raised(&mut exit) => return,
        }
        let beat = Instant::now();
        // An error that merely grew old can make the queue unhealthy: judge it every beat.
        super::health::check(&shared, &queue);
        // Jobs whose hand-back failed as a whole are sent again with the newly expired; what
        // fails again waits in the queue's state, where a shutdown finds it. Taken out of the
        // buffer before the renewal (which then leaves them out), sent after it.
        let (releases, resent) = to_release(&queue, beat);
        next = later(beat, every);
        let claims = queue.lock().held_claims();
        if !claims.is_empty() {
            next = renew(&shared, &queue, claims, &mut backoff)
                .await
                .unwrap_or(next);
        }
        if !releases.is_empty() {
            let by = later(Instant::now(), every);
            release_expired(&shared, &queue, releases, resent, by).await;
        }
    }
}

/// Renews the leases of `claims`; after a call that failed as a whole, returns when to beat
/// again (sooner than the interval, with backoff).
async fn renew<B: Backend>(
    shared: &Shared<B>,
    queue: &QueueRuntime,
    claims: Vec<Claim>,
    backoff: &mut ErrorBackoff,
) -> Option<Instant> {
    let every = queue.config.get_heartbeat_interval();
    let lease = queue.config.get_lease();
    match guard::call(
        "heartbeat",
        shared.backend.heartbeat_many(claims.clone(), lease),
    )
    .await
    {
        Ok(answers) => {
            backoff.reset();
            let mut renewed = HashMap::new();
            let mut answers = answers.into_iter();
            for claim in claims {
                match answers.next() {
                    Some(Ok(deadline)) => {
                        renewed.insert(claim, deadline);
                    }
                    Some(Err(source)) => lost(shared, queue, claim, source),
                    // Whether the lease was renewed is unknown, and it is not known lost
                    // either: reported, and renewed again at the next beat.
                    None => shared.report(
                        &queue.name,
                        Operation::Heartbeat,
                        Some(claim.id),
                        guard::missing_answer(),
                    ),
                }
            }
            show_deadlines(queue, &renewed);
            None
        }
        Err(source) => {
            shared.report(&queue.name, Operation::Heartbeat, None, source);
            Some(later(Instant::now(), backoff.next_delay().min(every)))
        }
    }
}

/// Takes out the jobs to hand back at this beat, marked in flight: those whose hand-back
/// failed as a whole (how many is returned too), then buffered jobs that have waited the
/// prefetch time-to-live (oldest first, unless the store cannot take jobs back). None once
/// shutdown began: the shutdown hands back what is left.
fn to_release(queue: &QueueRuntime, now: Instant) -> (Vec<Buffered>, usize) {
    let ttl = queue.config.get_prefetch_ttl();
    let mut st = queue.lock();
    if st.stopping {
        return (Vec::new(), 0);
    }
    let mut out = std::mem::take(&mut st.unreleased);
    let expired_from = out.len();
    while !st.release_unsupported
        && st
            .buffer
            .front()
            .is_some_and(|b| now.saturating_duration_since(b.since) >= ttl)
    {
        out.extend(st.buffer.pop_front());
    }
    if out.len() > expired_from {
        // Slots are busy for longer than the buffer may wait: claim only for free slots
        // until one frees, or the same jobs would come straight back.
        st.prefetch_paused = true;
    }
    st.releasing.extend(out.iter().map(|b| b.job.claim));
    (out, expired_from)
}

/// The heartbeater's hand-back of `claims` was answered: they are no longer in flight.
/// Returns whether shutdown began, and which of them a shutdown has not taken over (only
/// those are its to report).
fn answered(st: &mut Pipeline, claims: &[Claim]) -> (bool, Vec<bool>) {
    let ours = claims
        .iter()
        .map(|claim| {
            let at = st.releasing.iter().position(|c| c == claim);
            at.map(|at| st.releasing.swap_remove(at)).is_some()
        })
        .collect();
    (st.stopping, ours)
}

/// Hands expired buffered jobs back (they are marked in flight, see [`to_release`]); the
/// first `resent` of them are sent again after a call that failed as a whole. Those of a
/// call that fails as a whole, or is still unanswered at `by`, wait to be sent again
/// (whether the store took them is unknown: they are not started here), at the next beat or
/// by a shutdown; so do those the store's answer leaves out (reported). A job sent again that
/// the store refuses because it no longer holds it was taken by the earlier call when its
/// record says so (read by `by`), and is not reported then. When shutdown began meanwhile,
/// the answers are left for its report.
async fn release_expired<B: Backend>(
    shared: &Shared<B>,
    queue: &QueueRuntime,
    expired: Vec<Buffered>,
    resent: usize,
    by: Instant,
) {
    let claims: Vec<Claim> = expired.iter().map(|b| b.job.claim).collect();
    let answer = guard::by(by, "release", shared.backend.release(claims.clone())).await;
    match answer {
        Ok(answers) => {
            let mut answers = answers.into_iter();
            // Per job: taken back, refused, or `None`: left out of the answer (unknown).
            let mut taken: Vec<Option<bool>> = Vec::with_capacity(claims.len());
            for (i, b) in expired.iter().enumerate() {
                let claim = b.job.claim;
                let Some(answer) = answers.next() else {
                    shared.report(
                        &queue.name,
                        Operation::Release,
                        Some(claim.id),
                        guard::missing_answer(),
                    );
                    taken.push(None);
                    continue;
                };
                let Err(source) = answer else {
                    taken.push(Some(true));
                    continue;
                };
                if i < resent
                    && source.is_not_held()
                    && handed_back_before(shared, claim, b.job.attempt, by).await
                {
                    tracing::debug!(job.id = %claim.id, "handed back by an earlier call, whose answer was lost");
                    taken.push(Some(true));
                    continue;
                }
                taken.push(Some(false));
                shared.report(&queue.name, Operation::Release, Some(claim.id), source);
            }
            tracing::info!(
                queue = %queue.name,
                released = taken.iter().filter(|t| **t == Some(true)).count(),
                "handed back prefetched jobs that waited too long for a slot"
            );
            let mut st = queue.lock();
            let (stopping, ours) = answered(&mut st, &claims);
            for ((b, taken), ours) in expired.into_iter().zip(taken).zip(ours) {
                match taken {
                    // Whether the store took it is unknown: sent again.
                    None => st.unreleased.push(b),
                    Some(taken) if stopping && ours => {
                        st.released_in_shutdown.push((b.job.claim.id, taken));
                    }
                    Some(_) => {}
                }
            }
        }
        Err(BackendError::Unsupported(_)) => {
            // They are still ours: back to the head of the buffer, in order, and buffered
            // jobs never expire again.
            tracing::debug!(queue = %queue.name, "the store cannot take jobs back; buffered jobs wait for a slot");
            let mut st = queue.lock();
            answered(&mut st, &claims);
            st.release_unsupported = true;
            st.prefetch_paused = false;
            for b in expired.into_iter().rev() {
                st.buffer.push_front(b);
            }
            if !st.stopping {
                queue.job_ready.notify_one();
            }
        }
        Err(source) => {
            shared.report(&queue.name, Operation::Release, None, source);
            let mut st = queue.lock();
            answered(&mut st, &claims);
            st.unreleased.extend(expired);
        }
    }
    queue.release_answered.notify_one();
}

/// A refused renewal: the lease is lost.
fn lost<B: Backend>(shared: &Shared<B>, queue: &QueueRuntime, claim: Claim, source: BackendError) {
    if queue.lose_running(claim) {
        tracing::warn!(job.id = %claim.id, error = %source, "lease lost; heartbeats stop");
    } else if queue.unbuffer(claim) {
        tracing::warn!(job.id = %claim.id, error = %source, "lease of a buffered job lost; it will not start here");
    } else if queue.lose_settling(claim) {
        // Its settlement is in flight, or landed after this beat read the claims (the
        // store then refuses a renewal of a finished job): only the settlement's answer
        // tells whether the lease was lost, and a refused settlement is reported then.
        tracing::debug!(job.id = %claim.id, error = %source, "renewal of a finished job refused; its settlement will tell");
        return;
    } else {
        // It finished meanwhile (its settlement tells the rest), or it was stopped by
        // shutdown (its hand-back is refused and reported then).
        return;
    }
    shared.report(&queue.name, Operation::Heartbeat, Some(claim.id), source);
}

/// Records the renewed deadlines on buffered jobs, so their handlers see them.
fn show_deadlines(queue: &QueueRuntime, renewed: &HashMap<Claim, Millis>) {
    if renewed.is_empty() {
        return;
    }
    let mut st = queue.lock();
    for b in &mut st.buffer {
        if let Some(&deadline) = renewed.get(&b.job.claim) {
            b.job.lease_deadline = deadline;
        }
    }
}
