//! The acker: records finished attempts in the store in batches, off the slots' path.
//!
//! Slots hand finished attempts over and move on. The acker sends what it has at once when
//! no settlement is in flight (no added latency when the queue is quiet); while one is in
//! flight it gathers more and sends another batch when [`settle_batch`] attempts have
//! gathered or the oldest has waited [`settle_window`], with at most [`settles_in_flight`]
//! calls outstanding. A call that fails as a whole is sent again with backoff, never dropped:
//! its jobs stay claimed, so giving up (only at the shutdown deadline) leaves them to lease
//! expiry. An entry the store refuses on its own (a stale lease) is reported and not retried,
//! except that when a batch was sent again, a refusal because the job is no longer held may
//! only mean that the first call was recorded and its answer lost: the acker then reads the
//! job and reports the outcome its record shows, as if the first answer had arrived.
//!
//! The heartbeater renews the leases of finished jobs until their batch is answered, so a
//! short stall of the store costs no second run. Once a batch has been failing for longer
//! than a lease, its leases are no longer renewed: a failure that lasts is left to other
//! workers' rescues (the jobs run again, and the late settlement, if it ever lands, is
//! refused), instead of holding the jobs here until the worker stops.
//!
//! When a batch goes out while the prefetch buffer is at or below its low-water mark, the
//! acker asks for the next jobs in the same call ([`Backend::settle_and_claim`]), which a
//! store may answer in one round trip.
//!
//! [`settle_batch`]: crate::QueueConfig::settle_batch
//! [`settle_window`]: crate::QueueConfig::settle_window
//! [`settles_in_flight`]: crate::QueueConfig::settles_in_flight

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;
use tokio::time::Instant;

use super::config::ErrorBackoff;
use super::guard;
use super::health;
use super::hooks::{self, DeadJob, JobOutcome, JobReport, Operation};
use super::later::later;
use super::queue::{Done, QueueRuntime};
use super::shared::{Shared, raised};
use super::slot::accept;
use super::sweep;
use crate::backend::Backend;
use crate::error::BackendError;
use crate::job::{Claim, JobId};
use crate::settle::{Each, Finished, Settled};
use fairq_core::job::{Millis, Outcome, State};

/// A batch the store answered.
struct Answered {
    flight: u64,
    batch: Vec<Done>,
    answers: Each<Settled>,
    /// The batch was sent again after a call that failed as a whole: that call may have been
    /// recorded, and its answer lost.
    resent: bool,
}

/// Runs one queue's acker until its inbox closes and everything is settled, or until
/// `give_up` is raised; returns the jobs whose outcomes the store never confirmed (pending,
/// in flight, or still in the inbox).
pub(crate) async fn acker<B: Backend>(
    shared: Arc<Shared<B>>,
    queue: Arc<QueueRuntime>,
    mut inbox: UnboundedReceiver<Done>,
    mut give_up: watch::Receiver<bool>,
) -> Vec<JobId> {
    let batch_max = queue.config.get_settle_batch();
    let window = queue.config.get_settle_window();
    let max_flights = queue.config.get_settles_in_flight();
    let mut pending: VecDeque<Done> = VecDeque::new();
    // When the oldest pending attempt arrived.
    let mut oldest: Option<Instant> = None;
    let mut flights = FuturesUnordered::new();
    let mut flying: HashMap<u64, Vec<JobId>> = HashMap::new();
    let mut next_flight = 0u64;
    let mut open = true;
    loop {
        while !pending.is_empty() && flights.len() < max_flights {
            let due = flights.is_empty()
                || pending.len() >= batch_max
                || oldest.is_some_and(|at| at.elapsed() >= window);
            if !due {
                break;
            }
            let take = pending.len().min(batch_max);
            let batch: Vec<Done> = pending.drain(..take).collect();
            if pending.is_empty() {
                oldest = None;
            }
            let claim = queue.reserve_claim();
            flying.insert(next_flight, batch.iter().map(|d| d.job.claim.id).collect());
            flights.push(flush(
                Arc::clone(&shared),
                Arc::clone(&queue),
                next_flight,
                batch,
                claim,
            ));
            next_flight += 1;
        }
        if !open && pending.is_empty() && flights.is_empty() {
            return Vec::new();
        }
        // Waiting for a fuller batch: only while a settlement is in flight and another may go.
        let window_ends = oldest
            .filter(|_| !flights.is_empty() && flights.len() < max_flights)
            .map(|at| later(at, window));
        tokio::select! {
            biased;
            () = raised(&mut give_up) => {
                let mut left: Vec<JobId> = pending.iter().map(|d| d.job.claim.id).collect();
                left.extend(flying.into_values().flatten());
                // Attempts the slots handed over that were never received: just as unsettled.
                while let Ok(done) = inbox.try_recv() {
                    left.push(done.job.claim.id);
                }
                left.sort_unstable();
                return left;
            }
            Some(answered) = flights.next(), if !flights.is_empty() => {
                flying.remove(&answered.flight);
                report(&shared, &queue, answered, give_up.clone()).await;
            }
            received = inbox.recv(), if open => match received {
                Some(done) => {
                    oldest.get_or_insert_with(Instant::now);
                    pending.push_back(done);
                    while let Ok(done) = inbox.try_recv() {
                        pending.push_back(done);
                    }
                }
                None => open = false,
            },
            () = sleep_until(window_ends), if window_ends.is_some() => {}
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// Settles one batch (claiming `claim` more jobs in the same call if given), sending it
/// again with backoff for as long as the call fails as a whole.
async fn flush<B: Backend>(
    shared: Arc<Shared<B>>,
    queue: Arc<QueueRuntime>,
    flight: u64,
    batch: Vec<Done>,
    mut claim: Option<usize>,
) -> Answered {
    let (min, max) = shared.error_backoff;
    let mut backoff = ErrorBackoff::new(min, max);
    let lease = queue.config.get_lease();
    // Past this, a batch still failing leaves its jobs' leases to expire.
    let mut renew_until = Some(later(Instant::now(), lease));
    let mut resent = false;
    loop {
        let entries: Vec<Finished> = batch
            .iter()
            .map(|d| Finished::new(&d.job, d.result.clone()))
            .collect();
        let answer = match claim.take() {
            Some(max) => {
                match guard::call(
                    "settle_and_claim",
                    shared
                        .backend
                        .settle_and_claim(entries, &queue.name, max, lease),
                )
                .await
                {
                    Ok(both) => {
                        let jobs = match both.claimed {
                            Ok(jobs) => jobs,
                            Err(source) => {
                                shared.report(&queue.name, Operation::Claim, None, source);
                                Vec::new()
                            }
                        };
                        accept(&shared, &queue, jobs);
                        Ok(both.settled)
                    }
                    Err(source) => {
                        // Nothing was claimed: the claim is the claimer's again.
                        accept(&shared, &queue, Vec::new());
                        Err(source)
                    }
                }
            }
            None => guard::call("settle", shared.backend.settle(entries)).await,
        };
        match answer {
            Ok(answers) => {
                return Answered {
                    flight,
                    batch,
                    answers,
                    resent,
                };
            }
            Err(source) => {
                shared.report(&queue.name, Operation::Settle, None, source);
                resent = true;
                let wake = later(Instant::now(), backoff.next_delay());
                if let Some(until) = renew_until.filter(|until| *until <= wake) {
                    tokio::time::sleep_until(until).await;
                    stop_renewing(&queue, &batch);
                    renew_until = None;
                }
                tokio::time::sleep_until(wake).await;
            }
        }
    }
}

/// Stops renewing the leases of a batch that has been failing for longer than a lease.
fn stop_renewing(queue: &QueueRuntime, batch: &[Done]) {
    let mut n = 0;
    for done in batch {
        n += usize::from(queue.lose_settling(done.job.claim));
    }
    if n == 0 {
        // Every lease was already let go of (refused renewals): nothing changes.
        return;
    }
    tracing::warn!(
        queue = %queue.name,
        jobs = n,
        "settlement failing for longer than a lease; its jobs' leases are left to expire"
    );
}

/// Turns the store's answers into outcomes, lets the retry sweep judge them (holding the
/// queue's retries if a retry failed again: each of the hold's store calls gets one
/// heartbeat interval, and ends when `give_up` is raised, so that a store that does not
/// answer stalls neither the queue's claims nor the shutdown), then calls the hooks, in
/// batch order, and judges the queue's health.
async fn report<B: Backend>(
    shared: &Shared<B>,
    queue: &QueueRuntime,
    answered: Answered,
    mut give_up: watch::Receiver<bool>,
) {
    let claims: Vec<Claim> = answered.batch.iter().map(|d| d.job.claim).collect();
    queue.answered(&claims);
    let mut answers = answered.answers.into_iter();
    let mut reports = Vec::with_capacity(claims.len());
    for done in answered.batch {
        let answer = answers
            .next()
            .unwrap_or_else(|| Err(guard::missing_answer()));
        let outcome = match answer {
            Ok(Settled::Succeeded) => JobOutcome::Succeeded,
            Ok(Settled::Retry { run_at }) => JobOutcome::Retry { run_at },
            Ok(Settled::Dead { .. }) => JobOutcome::Dead,
            Err(source) => {
                refused(shared, queue, &done, source, answered.resent, &mut give_up).await
            }
        };
        reports.push((done, outcome));
    }
    let (hold, judged) = judge_sweep(shared, queue, &reports);
    if let Some(until) = hold {
        sweep::hold(shared, queue, until, &mut give_up).await;
    }
    queue.judged(judged);
    for (done, outcome) in reports {
        let Done {
            job,
            result,
            elapsed,
            span,
            ..
        } = done;
        let _in = span.enter();
        match outcome {
            JobOutcome::Succeeded => crate::metrics::settled(&job, true, false, shared.metrics_key),
            JobOutcome::Retry { .. } => {
                crate::metrics::settled(&job, false, false, shared.metrics_key)
            }
            JobOutcome::Dead => crate::metrics::settled(&job, false, true, shared.metrics_key),
            JobOutcome::Unrecorded => {}
        }
        match (&outcome, &result) {
            (JobOutcome::Dead, Err(failure)) => {
                tracing::error!(error = %failure.message, "job is dead");
                if shared.hooks.dead.is_some() {
                    let dead = DeadJob {
                        job: job.clone(),
                        failure: failure.clone(),
                    };
                    hooks::call(&shared.hooks.dead, &dead, "on_dead");
                }
            }
            (JobOutcome::Succeeded, _) => {
                tracing::debug!(elapsed_ms = elapsed.as_millis() as u64, "job succeeded")
            }
            _ => {}
        }
        if shared.hooks.finished.is_some() {
            let report = JobReport {
                job,
                result,
                outcome,
                elapsed,
            };
            hooks::call(&shared.hooks.finished, &report, "on_finished");
        }
    }
    queue.settled(claims.into_iter());
    health::check(shared, queue);
}

/// The outcome of an entry the store refused. A refusal of an entry sent again, because the
/// job is no longer held under the attempt's lease, may only mean that the first call was
/// recorded and its answer lost: the job's record then shows this attempt's outcome, which
/// is reported as recorded (hooks and metrics once, no error). Otherwise the refusal is
/// reported to `on_error` and the outcome is unrecorded.
async fn refused<B: Backend>(
    shared: &Shared<B>,
    queue: &QueueRuntime,
    done: &Done,
    source: BackendError,
    resent: bool,
    give_up: &mut watch::Receiver<bool>,
) -> JobOutcome {
    let no_longer_held = source.is_not_held();
    let recorded = if resent && no_longer_held {
        recorded_before(shared, queue, done, give_up).await
    } else {
        None
    };
    let _in = done.span.enter();
    if let Some(outcome) = recorded {
        tracing::info!(
            ?outcome,
            "a settlement sent again was refused, but the store had recorded the first one"
        );
        return outcome;
    }
    let operation = if done.result.is_ok() {
        Operation::Complete
    } else {
        Operation::Fail
    };
    shared.report(&queue.name, operation, Some(done.job.claim.id), source);
    if resent && no_longer_held {
        tracing::warn!(
            "the store refused the outcome sent again after a failed call: the first call may \
             have recorded it, or the job's lease was lost; the job's record does not tell"
        );
    } else {
        tracing::warn!("the store did not record the outcome; the job will be rescued");
    }
    JobOutcome::Unrecorded
}

/// What the store recorded for `done`'s attempt, read from the job: `Some` when the job's
/// record is this attempt's outcome (no later attempt started, and the state and error are
/// what this attempt's settlement makes of it); `None` when that cannot be told (the job was
/// rescued, has moved on, or the store did not answer within one heartbeat interval, or
/// before `give_up`: the acker waits for nothing else meanwhile).
async fn recorded_before<B: Backend>(
    shared: &Shared<B>,
    queue: &QueueRuntime,
    done: &Done,
    give_up: &mut watch::Receiver<bool>,
) -> Option<JobOutcome> {
    let id = done.job.claim.id;
    let by = later(Instant::now(), queue.config.get_heartbeat_interval());
    let read = guard::by(by, "get", shared.backend.get(id));
    let info = match sweep::unless_given_up(read, give_up).await? {
        Ok(Some(info)) => info,
        Ok(None) => return None,
        Err(error) => {
            tracing::debug!(job.id = %id, %error, "could not read the job whose settlement was refused");
            return None;
        }
    };
    if info.attempts != done.job.attempt {
        return None;
    }
    match (&done.result, info.state) {
        (Ok(()), State::Succeeded { .. }) => Some(JobOutcome::Succeeded),
        (Err(failure), state) => {
            // A rescue leaves a lease-expired error of its own.
            if info.last_error.as_deref() != Some(&*failure.stored_message()) {
                return None;
            }
            // Whether the policy retries depends on the attempt only, not on time or jitter.
            let verdict = Finished::new(&done.job, Err(failure.clone())).verdict(0, 0)?;
            match (verdict, state) {
                (Outcome::Retry { .. }, State::Retrying { run_at }) => {
                    Some(JobOutcome::Retry { run_at })
                }
                (Outcome::Dead { reason }, State::Dead { reason: was, .. }) if reason == was => {
                    Some(JobOutcome::Dead)
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Feeds the recorded retries of a batch to the queue's sweep, in batch order; returns when
/// to hold the queue's retries until (if a failed retry stopped the sweep) and how many
/// failed retries were judged (claims waited for them).
fn judge_sweep<B>(
    shared: &Shared<B>,
    queue: &QueueRuntime,
    reports: &[(Done, JobOutcome)],
) -> (Option<Millis>, usize) {
    let mut st = queue.lock();
    let judged = reports
        .iter()
        .filter(|(d, _)| st.sweep.must_judge(&d.job, &d.result))
        .count();
    let Some(retry_sweep) = st.sweep.sweep.as_mut() else {
        return (None, judged);
    };
    let now = shared.clock.now();
    let mut hold = None;
    for (done, outcome) in reports {
        if !outcome.is_recorded() {
            continue;
        }
        if let Some(succeeded) = sweep::signal(&done.job, &done.result) {
            if let Some(until) = retry_sweep.retried(succeeded, now) {
                hold = Some(until);
            }
        }
    }
    // Jobs that failed while the sweep was already stopped wait for the next one too, not
    // only for their own backoff.
    if let Some(until) = retry_sweep.held_until(now) {
        let sooner = reports
            .iter()
            .any(|(_, o)| matches!(o, JobOutcome::Retry { run_at } if *run_at < until));
        if sooner {
            hold = Some(until);
        }
    }
    (hold, judged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Backend;
    use crate::clock::ManualClock;
    use crate::handler::Handlers;
    use crate::job::{Job, NewJob};
    use crate::memory::MemoryBackend;
    use crate::worker::config::QueueConfig;
    use std::time::Duration;

    /// A worker's shared state over `store` serving `queue`.
    fn shared(store: MemoryBackend, queue: &Arc<QueueRuntime>) -> Arc<Shared<MemoryBackend>> {
        Arc::new(Shared {
            backend: Arc::new(store),
            handlers: Handlers::new(),
            hooks: Default::default(),
            clock: Arc::new(ManualClock::new(0)),
            health: Default::default(),
            started_at: 0,
            slow_after: None,
            kind_timeouts: Default::default(),
            error_backoff: (Duration::from_millis(100), Duration::from_secs(30)),
            queues: vec![Arc::clone(queue)],
            metrics_key: false,
            stop: watch::channel(false).0,
            failures: Default::default(),
            failed: watch::channel(false).0,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn giving_up_reports_attempts_still_in_the_inbox() {
        let store = MemoryBackend::new();
        store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
        let job = store
            .claim("q", 1, Duration::from_secs(30))
            .await
            .unwrap()
            .remove(0);
        let id = job.claim.id;
        let (tx, inbox) = tokio::sync::mpsc::unbounded_channel();
        let queue = Arc::new(QueueRuntime::new(
            "q".into(),
            QueueConfig::default(),
            tx.clone(),
        ));
        let shared = shared(store.clone(), &queue);
        // A slot handed the attempt over, and the deadline passed before the acker took it.
        tx.send(Done {
            job,
            result: Ok(()),
            elapsed: Duration::ZERO,
            span: tracing::Span::none(),
            returned: true,
        })
        .unwrap();
        let (give_up, raised) = watch::channel(true);
        let left = acker(shared, queue, inbox, raised).await;
        drop(give_up);
        assert_eq!(left, [id]);
        let info = store.get(id).await.unwrap().unwrap();
        assert_eq!(info.status(), crate::JobStatus::Running, "never settled");
    }

    /// What a shutdown that had to stop the acker reports as unsettled: every finished
    /// attempt whose batch the store has not answered, whether or not its lease is still
    /// renewed, and none whose batch was answered (even while its hooks run).
    #[tokio::test(start_paused = true)]
    async fn unsettled_attempts_are_those_the_store_has_not_answered() {
        use crate::worker::queue::{Running, Slot};
        use crate::worker::slot::record;
        let store = MemoryBackend::new();
        for _ in 0..4 {
            store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
        }
        let jobs = store.claim("q", 4, Duration::from_secs(30)).await.unwrap();
        let ids: Vec<JobId> = jobs.iter().map(|j| j.claim.id).collect();
        let (tx, mut inbox) = tokio::sync::mpsc::unbounded_channel();
        let queue = Arc::new(QueueRuntime::new(
            "q".into(),
            QueueConfig::default(),
            tx.clone(),
        ));
        let mut shared = shared(store, &queue);
        // What the shutdown would report, read while the answered attempt's hook runs.
        let seen: Arc<std::sync::Mutex<Vec<Vec<JobId>>>> = Arc::default();
        let (q, s) = (Arc::clone(&queue), Arc::clone(&seen));
        Arc::get_mut(&mut shared).unwrap().hooks.finished = Some(Arc::new(move |_| {
            s.lock().unwrap().push(q.unsettled_ids());
        }));
        let done = |job: Job| Done {
            job,
            result: Ok(()),
            elapsed: Duration::ZERO,
            span: tracing::Span::none(),
            returned: true,
        };
        {
            let mut st = queue.lock();
            // The second job's lease was lost while it ran (a renewal was refused).
            st.slots.push(Slot {
                running: Some(Running {
                    claim: jobs[1].claim,
                    lost: true,
                }),
                task: None,
            });
            st.slots.push(Slot {
                running: None,
                task: None,
            });
            for (i, job) in jobs.iter().enumerate() {
                let slot = if i == 1 { 0 } else { 1 };
                record(&shared, &mut st, slot, done(job.clone()), &tx);
            }
        }
        // The third's batch has been failing for longer than a lease (or a renewal was
        // refused): its lease is no longer renewed, its outcome is still unknown.
        assert!(queue.lose_settling(jobs[2].claim));
        // The fourth's batch is answered.
        let mut sent = Vec::new();
        while let Ok(d) = inbox.try_recv() {
            sent.push(d);
        }
        let fourth = sent.pop().unwrap();
        assert_eq!(fourth.job.claim.id, ids[3]);
        let answered = Answered {
            flight: 0,
            batch: vec![fourth],
            answers: vec![Ok(Settled::Succeeded)],
            resent: false,
        };
        let (_give_up, raised) = watch::channel(false);
        report(&shared, &queue, answered, raised).await;
        assert_eq!(seen.lock().unwrap().clone(), [ids[..3].to_vec()]);
        assert_eq!(queue.unsettled_ids(), ids[..3]);
        // Leases are renewed apart from that: only the first's.
        assert_eq!(queue.lock().held_claims(), [jobs[0].claim]);
    }
}
