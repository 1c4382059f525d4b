//! The yoltq retry sweep through a real [`Worker`]: a check of [`Backend::hold_retries`]
//! as the worker uses it, part of [`conformance_tests!`](crate::conformance_tests).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fairq_core::job::State;
use fairq_core::retry::{Backoff, RetryPolicy};
use tokio::sync::mpsc;

use super::PATIENCE;
use crate::backend::Backend;
use crate::clock::{Clock, ManualClock};
use crate::handler::Handlers;
use crate::job::{Failure, Job, JobId, NewJob};
use crate::worker::{JobOutcome, JobReport, QueueConfig, Worker};

const LEASE: Duration = Duration::from_secs(30);
const SWEEP: Duration = Duration::from_secs(10);

/// Enqueues one job per payload in `queue` and fails each first attempt, so each waits for
/// a retry `delay` later. Returns the ids in payload order.
async fn retrying<B: Backend>(
    store: &B,
    queue: &str,
    payloads: &[&str],
    delay: Duration,
) -> Vec<JobId> {
    let policy = RetryPolicy::new(5).with_delays([delay]);
    let mut ids = Vec::new();
    for payload in payloads {
        let job = NewJob::new(queue, "call", payload.as_bytes().to_vec()).retry(policy.clone());
        ids.push(store.enqueue(job).await.expect("enqueue"));
    }
    for _ in payloads {
        let mut jobs = store.claim(queue, 1, LEASE).await.expect("claim");
        let job = jobs.pop().expect("a due job");
        store
            .fail(&job, Failure::retryable("downstream is down"))
            .await
            .expect("fail");
    }
    ids
}

async fn next_report(rx: &mut mpsc::UnboundedReceiver<JobReport>) -> JobReport {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("a job report within the patience")
        .expect("the worker is running")
}

async fn state<B: Backend>(store: &B, id: JobId) -> State {
    store
        .get(id)
        .await
        .expect("get")
        .expect("the job exists")
        .state
}

fn payload(report: &JobReport) -> String {
    String::from_utf8_lossy(&report.job.payload).into_owned()
}

/// A queue's due retries run while they succeed; the first that fails again (the third
/// call to the queue's downstream) stops the sweep: the queue's other due retries (the failed one included) wait for the next sweep,
/// while new jobs of the queue and another queue's retries carry on; at the next sweep the
/// held retries run.
pub async fn retry_sweep_stops_at_a_failed_retry<B: Backend>(store: &Arc<B>, clock: &ManualClock) {
    let t0 = clock.now();
    let q = retrying(
        store.as_ref(),
        "sweep",
        &["r1", "r2", "r3", "r4", "r5"],
        Duration::from_secs(1),
    )
    .await;
    let other = retrying(
        store.as_ref(),
        "sweep-other",
        &["o1", "o2"],
        Duration::from_secs(5),
    )
    .await;
    clock.advance(Duration::from_secs(1));

    // The downstream of queue "sweep" fails the third call made to it, whichever job that
    // is (stores may order retries that became due together differently).
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let handlers = Handlers::new()
        .on("call", move |job: Job| {
            let fails = job.queue == "sweep" && counter.fetch_add(1, Ordering::SeqCst) == 2;
            async move {
                if fails {
                    Err("downstream is down")
                } else {
                    Ok(())
                }
            }
        })
        .on("fresh", |_job: Job| async { Ok::<_, String>(()) });
    let (tx, mut rx) = mpsc::unbounded_channel();
    let one_at_a_time = QueueConfig::default()
        .concurrency(1)
        .prefetch(0)
        .poll_interval(Duration::from_millis(10))
        .retry_sweep(SWEEP);
    let worker = Worker::builder(Arc::clone(store))
        .queue("sweep", one_at_a_time.clone())
        .queue("sweep-other", one_at_a_time)
        .handlers(handlers)
        .clock(clock.clone())
        .on_finished(move |report| {
            tx.send(report.clone()).ok();
        })
        .build()
        .expect("valid")
        .start()
        .expect("runtime");

    // Successes let the sweep go on; the failed retry stops it.
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(next_report(&mut rx).await);
    }
    // Reports come as settlements are recorded, which a pipelined worker may do out of call
    // order; the calls themselves were two successes and then the failure.
    let failures: Vec<JobId> = seen
        .iter()
        .filter(|r| r.result.is_err())
        .map(|r| r.job.claim.id)
        .collect();
    assert_eq!(
        failures.len(),
        1,
        "retries run while they succeed: {seen:?}"
    );
    let ran: Vec<JobId> = seen.iter().map(|r| r.job.claim.id).collect();
    let failed = failures[0];
    let waiting: Vec<JobId> = q.iter().copied().filter(|id| !ran.contains(id)).collect();
    assert_eq!(waiting.len(), 2);
    let until = t0 + 1_000 + SWEEP.as_millis() as u64;
    for id in waiting.iter().copied().chain([failed]) {
        assert_eq!(
            state(store.as_ref(), id).await,
            State::Retrying { run_at: until },
            "job {id}: the queue's retries wait for the next sweep"
        );
    }
    let report = worker.health_report();
    let sweep = report[0].retry_sweep.expect("the queue has a sweep");
    assert_eq!(
        (report[0].queue.as_str(), sweep.held_until, sweep.stops),
        ("sweep", Some(until), 1)
    );
    assert!(sweep.store_holds);
    let stats = store.stats().await.expect("stats");
    let stats = stats.iter().find(|s| s.queue == "sweep").expect("queue");
    assert_eq!(
        stats.next_retry_at,
        Some(until),
        "stats show the next sweep"
    );

    // New jobs are not held back.
    let fresh = store
        .enqueue(NewJob::new("sweep", "fresh", vec![]))
        .await
        .expect("enqueue");
    let report = next_report(&mut rx).await;
    assert_eq!(
        (report.job.claim.id, report.outcome),
        (fresh, JobOutcome::Succeeded)
    );
    assert_eq!(
        state(store.as_ref(), waiting[0]).await,
        State::Retrying { run_at: until }
    );

    // Another queue's retries carry on while this one's wait.
    clock.advance(Duration::from_secs(4));
    let mut ran: Vec<JobId> = Vec::new();
    for _ in 0..2 {
        let report = next_report(&mut rx).await;
        assert_eq!(report.outcome, JobOutcome::Succeeded);
        ran.push(report.job.claim.id);
    }
    ran.sort_unstable();
    assert_eq!(ran, other, "the other queue's retries ran");
    assert_eq!(
        state(store.as_ref(), waiting[0]).await,
        State::Retrying { run_at: until }
    );
    assert_eq!(
        worker.health_report()[1].retry_sweep.map(|s| s.stops),
        Some(0)
    );

    // The next sweep: the downstream is back, every held retry runs.
    clock.advance(Duration::from_secs(6));
    let mut ran: Vec<JobId> = Vec::new();
    for _ in 0..3 {
        let report = next_report(&mut rx).await;
        assert_eq!(
            report.outcome,
            JobOutcome::Succeeded,
            "{}",
            payload(&report)
        );
        ran.push(report.job.claim.id);
    }
    ran.sort_unstable();
    let mut held: Vec<JobId> = waiting.iter().copied().chain([failed]).collect();
    held.sort_unstable();
    assert_eq!(ran, held, "the held retries ran at the next sweep");
    let sweep = worker.health_report()[0].retry_sweep.expect("sweep");
    assert_eq!((sweep.held_until, sweep.stops), (None, 1));
    assert!(worker.shutdown(PATIENCE).await.is_clean());
}

/// Retries held until the next sweep come back in id order (as delayed jobs due at the same
/// time do), whatever backoff made them retry: one that retried at once and had its place in
/// the fair order, and a later one still waiting for its own delay.
pub async fn held_retries_come_back_in_id_order<B: Backend>(store: &Arc<B>, clock: &ManualClock) {
    let queue = "held-order";
    let at_once = RetryPolicy::new(5).with_backoff(Backoff::Immediate);
    let later = RetryPolicy::new(5).with_backoff(Backoff::Fixed(Duration::from_millis(500)));
    let ids = store
        .enqueue_many(vec![
            NewJob::new(queue, "call", vec![]).key("k").retry(at_once),
            NewJob::new(queue, "call", vec![]).key("k").retry(later),
        ])
        .await
        .expect("enqueue");
    let jobs = store.claim(queue, 2, LEASE).await.expect("claim");
    assert_eq!(jobs.len(), 2);
    for job in &jobs {
        store
            .fail(job, Failure::retryable("downstream is down"))
            .await
            .expect("fail");
    }
    let until = clock.now() + 1_000;
    assert_eq!(store.hold_retries(queue, until).await.expect("hold"), 2);
    clock.advance(Duration::from_secs(1));
    for (n, id) in ids.iter().enumerate() {
        let jobs = store.claim(queue, 1, LEASE).await.expect("claim");
        let claimed: Vec<JobId> = jobs.iter().map(|j| j.claim.id).collect();
        assert_eq!(claimed, vec![*id], "held retry {n} comes back in id order");
    }
}
