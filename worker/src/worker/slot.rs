//! Slots: the tasks that run handlers. A slot takes the oldest buffered job, runs its
//! handler (watching for slowness and the timeout), hands the finished attempt to the acker
//! and takes the next job at once: it does not wait for the store to record the attempt.
//!
//! Slots start on demand, up to the queue's concurrency, and live until shutdown.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;
use tracing::Instrument;

use super::hooks::{self, SlowJob};
use super::queue::{Buffered, Done, Pipeline, QueueRuntime, Running, Slot};
use super::shared::Shared;
use super::stop::{StopSignal, with_signal};
use super::supervise::supervised;
use super::task_failure::WorkerTask;
use crate::backend::Backend;
use crate::handler::panic_message;
use crate::job::{Failure, Job};

/// Buffers jobs a claim took (in claim order), wakes idle slots and starts new ones for the
/// rest, and ends the claim in flight.
pub(crate) fn accept<B: Backend>(
    shared: &Arc<Shared<B>>,
    queue: &Arc<QueueRuntime>,
    jobs: Vec<Job>,
) {
    let since = Instant::now();
    let mut st = queue.lock();
    st.claiming = false;
    let claimed = jobs.len();
    let wanted = std::mem::take(&mut st.wanted);
    // Slots waiting on an empty buffer when the claim comes back: the buffer was too shallow
    // for the handlers' pace.
    let starved = st.buffer.is_empty() && st.idle > 0;
    // The time this claim's jobs cover: since the previous claim came back (or, for the
    // first, since this one started).
    let started = st.claim_started.take();
    let flight = started.map_or(Duration::ZERO, |at| since.saturating_duration_since(at));
    let cycle = st
        .claim_returned
        .replace(since)
        .or(started)
        .map_or(Duration::ZERO, |at| since.saturating_duration_since(at));
    st.depth.claimed(wanted, claimed, starved, cycle);
    tracing::trace!(
        queue = %queue.name,
        wanted,
        claimed,
        starved,
        cycle_us = cycle.as_micros() as u64,
        flight_us = flight.as_micros() as u64,
        depth = st.depth.get(),
        "claim returned"
    );
    st.buffer
        .extend(jobs.into_iter().map(|job| Buffered { job, since }));
    if !st.stopping && claimed > 0 {
        for _ in 0..st.idle.min(claimed) {
            queue.job_ready.notify_one();
        }
        let wanted = st.buffer.len().saturating_sub(st.idle);
        let room = queue
            .config
            .get_concurrency()
            .saturating_sub(st.slots.len());
        for _ in 0..wanted.min(room) {
            start_slot(shared, queue, &mut st);
        }
    }
    queue.wake_claimer_if_room(&st);
}

fn start_slot<B: Backend>(shared: &Arc<Shared<B>>, queue: &Arc<QueueRuntime>, st: &mut Pipeline) {
    let Some(acker) = st.acker.clone() else {
        return;
    };
    let index = st.slots.len();
    st.slots.push(Slot {
        running: None,
        task: None,
    });
    // A new slot is idle until it takes its first job.
    st.idle += 1;
    let task = tokio::spawn(
        supervised(
            Arc::clone(shared),
            Arc::clone(queue),
            WorkerTask::Slot,
            serve(Arc::clone(shared), Arc::clone(queue), index, acker),
        )
        .map(drop),
    );
    if let Some(slot) = st.slots.get_mut(index) {
        slot.task = Some(task);
    }
}

/// One slot's life: take a job, run it, repeat until shutdown.
async fn serve<B: Backend>(
    shared: Arc<Shared<B>>,
    queue: Arc<QueueRuntime>,
    index: usize,
    acker: UnboundedSender<Done>,
) {
    let mut finished = None;
    while let Some(job) = next_job(&shared, &queue, index, &acker, finished.take()).await {
        finished = Some(run(&shared, &queue, job).await);
    }
}

/// Records the slot's finished attempt (handing it to the acker) and takes the next buffered
/// job, waiting for one if need be; `None` once shutdown began.
async fn next_job<B: Backend>(
    shared: &Shared<B>,
    queue: &QueueRuntime,
    index: usize,
    acker: &UnboundedSender<Done>,
    mut finished: Option<Done>,
) -> Option<Job> {
    let mut yielded = false;
    loop {
        let notified = queue.job_ready.notified();
        tokio::pin!(notified);
        // Register before looking, so a job buffered in between wakes this slot.
        notified.as_mut().enable();
        // One lock records the finished attempt and takes the next job.
        let claim_due = {
            let mut st = queue.lock();
            if let Some(done) = finished.take() {
                record(shared, &mut st, index, done, acker);
            }
            let claim_due = !yielded
                && !st.stopping
                && !st.buffer.is_empty()
                && queue.wake_claimer_if_room(&st);
            if !claim_due && !st.stopping {
                if let Some(next) = st.take_next() {
                    if let Some(slot) = st.slots.get_mut(index) {
                        slot.running = Some(Running {
                            claim: next.job.claim,
                            lost: false,
                        });
                    }
                    st.running += 1;
                    crate::metrics::running(&queue.name, st.running);
                    st.idle = st.idle.saturating_sub(1);
                    queue.wake_claimer_if_room(&st);
                    return Some(next.job);
                }
            }
            if !claim_due {
                queue.wake_claimer_if_room(&st);
                if st.stopping {
                    return None;
                }
            }
            claim_due
        };
        if claim_due {
            // The claimer is due: let it run before taking a job. A handler that returns at
            // once never yields, so a slot would otherwise take job after job while the
            // claimer waits behind it on the same thread, and the claim would only go out
            // once the buffer is empty. (Yielding before the take, not between the take and
            // the handler, keeps jobs starting in the order they are taken.)
            yielded = true;
            tokio::task::yield_now().await;
            continue;
        }
        notified.await;
    }
}

/// Frees the slot of a finished attempt, counts it for health and timings, and hands it to
/// the acker.
pub(crate) fn record<B: Backend>(
    shared: &Shared<B>,
    st: &mut Pipeline,
    index: usize,
    done: Done,
    acker: &UnboundedSender<Done>,
) {
    let lost = st
        .slots
        .get_mut(index)
        .and_then(|slot| slot.running.take())
        .is_some_and(|r| r.lost);
    st.running = st.running.saturating_sub(1);
    crate::metrics::running(&done.job.queue, st.running);
    st.idle += 1;
    st.prefetch_paused = false;
    // A retryable error the handler returns after the stop signal is the handler giving up
    // when asked; a timeout or a panic is not (either would have failed the attempt without
    // a shutdown too).
    let gave_up = done.returned && matches!(&done.result, Err(failure) if !failure.permanent);
    if gave_up && *shared.stop.borrow() {
        // The handler stopped when asked to: not a failure of the job. It goes back to the
        // store, its attempt not counted.
        let _in = done.span.enter();
        tracing::info!("job stopped by shutdown; it will be handed back");
        st.stopped.push(done.job.claim);
        return;
    }
    st.timings.record_duration(done.elapsed);
    match &done.result {
        Ok(()) => st.errors.success(),
        Err(_) => st.errors.failure(shared.clock.now()),
    }
    st.unsettled += 1;
    let claim = done.job.claim;
    st.unanswered.insert(claim);
    // A lost lease stays lost: its settlement will be refused anyway.
    if !lost {
        st.settling.insert(claim);
    }
    let judge = st.sweep.must_judge(&done.job, &done.result);
    if judge {
        st.sweep.judging += 1;
    }
    if acker.send(done).is_err() {
        // The acker gave up at the shutdown deadline: the job is left to lease expiry.
        st.unsettled -= 1;
        st.settling.remove(&claim);
        st.unanswered.remove(&claim);
        if judge {
            st.sweep.judging -= 1;
        }
    }
}

/// Runs one job's handler in its tracing span.
async fn run<B: Backend>(shared: &Shared<B>, queue: &QueueRuntime, job: Job) -> Done {
    let span = tracing::info_span!(
        "fairq.job",
        job.id = %job.claim.id,
        queue = %job.queue,
        kind = %job.kind,
        key = job.key.as_deref().unwrap_or(""),
        attempt = job.attempt,
        trace_id = tracing::field::Empty,
    );
    if let Some(trace) = job.metadata.get("trace_id") {
        span.record("trace_id", trace.as_str());
    }
    let wait_ms = shared.clock.now().saturating_sub(job.run_at);
    crate::metrics::started(&job, wait_ms, shared.metrics_key);
    let started = Instant::now();
    let (result, returned) = supervise(shared, queue, &job)
        .instrument(span.clone())
        .await;
    let elapsed = started.elapsed();
    crate::metrics::ran(&job, elapsed, shared.metrics_key);
    if let Err(failure) = &result {
        if !*shared.stop.borrow() {
            let _in = span.enter();
            tracing::warn!(error = %failure.message, permanent = failure.permanent, "job failed");
        }
    }
    Done {
        job,
        result,
        elapsed,
        span,
        returned,
    }
}

/// The handler timeout of `job`: its kind's, else its queue's.
fn timeout_of<B>(shared: &Shared<B>, queue: &QueueRuntime, job: &Job) -> Option<Duration> {
    shared
        .kind_timeouts
        .get(&job.kind)
        .copied()
        .or(queue.config.get_timeout())
}

/// Runs the handler, warning once when it is slow and stopping it at its timeout; the flag
/// says the handler returned the result itself (see [`Ran`](crate::handler::Ran)).
async fn supervise<B: Backend>(
    shared: &Shared<B>,
    queue: &QueueRuntime,
    job: &Job,
) -> (Result<(), Failure>, bool) {
    let signal = StopSignal::from_worker(shared.stop.subscribe());
    let handler = with_signal(job.claim, signal, shared.handlers.run_caught(job.clone()));
    let timeout = timeout_of(shared, queue, job);
    let slow_after = shared
        .slow_after
        .filter(|slow| timeout.is_none_or(|limit| *slow < limit));
    if slow_after.is_none() && timeout.is_none() {
        let ran = handler.await;
        return (ran.result, ran.returned);
    }
    // Boxed, so that it can be dropped at the timeout under `catch_unwind`.
    let mut handler = Box::pin(handler);
    let started = Instant::now();
    let slow = sleep_or_never(slow_after);
    tokio::pin!(slow);
    let limit = sleep_or_never(timeout);
    tokio::pin!(limit);
    let mut watching = slow_after.is_some();
    loop {
        tokio::select! {
            biased;
            ran = &mut handler => return (ran.result, ran.returned),
            () = &mut limit => break,
            () = &mut slow, if watching => {
                watching = false;
                let running_for = started.elapsed();
                tracing::warn!(running_ms = running_for.as_millis() as u64, "job handler is slow");
                let slow = SlowJob { job: job.clone(), running_for };
                hooks::call(&shared.hooks.slow, &slow, "on_slow");
            }
        }
    }
    let limit = timeout.unwrap_or_default();
    tracing::warn!(
        timeout_ms = limit.as_millis() as u64,
        "job handler timed out"
    );
    // Stopping the handler drops its future, which runs the handler's own code (its locals'
    // destructors): a panic there is the handler's, as a panic while it ran would be, and
    // must not end the slot. The attempt failed by timing out either way.
    if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(move || drop(handler))) {
        tracing::warn!(
            panic = %panic_message(panic.as_ref()),
            "job handler panicked while being stopped at its timeout"
        );
    }
    let failure = Failure::retryable(format!(
        "timed out after {limit:?}: the handler was stopped"
    ));
    (Err(failure), false)
}

async fn sleep_or_never(after: Option<Duration>) {
    match after {
        Some(after) => tokio::time::sleep(after).await,
        None => std::future::pending().await,
    }
}
