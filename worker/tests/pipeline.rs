//! The worker's pipeline on the in-memory store: prefetch, batched settlement, heartbeats of
//! buffered jobs, hand-back at shutdown, fair start order, and what a killed worker leaves.
//! Tests run on tokio's paused clock, or wait for observable states; none sleeps to
//! synchronise.

mod common;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Probe, until};
use fairq_core::job::{Millis, State};
use fairq_core::retry::RetryPolicy;
use fairq_worker::{
    Backend, Handlers, Job, JobId, JobOutcome, JobReport, JobStatus, ListFilter, ManualClock,
    MemoryBackend, NewJob, Operation, QueueConfig, Worker, WorkerBuilder, WorkerError,
    WorkerHandle,
};
use tokio::sync::{Semaphore, mpsc};

const START: Millis = 1_700_000_000_000;
const LEASE: Duration = Duration::from_secs(30);

/// Handlers whose "wait" jobs each hold until the gate gives a permit, and whose "ok" jobs
/// return at once; every start is recorded in order.
fn gated(gate: &Arc<Semaphore>, started: &Arc<Mutex<Vec<JobId>>>) -> Handlers {
    let (g, s) = (Arc::clone(gate), Arc::clone(started));
    let s2 = Arc::clone(started);
    Handlers::new()
        .on("wait", move |job: Job| {
            s.lock().unwrap().push(job.claim.id);
            let gate = Arc::clone(&g);
            async move {
                gate.acquire().await.map_err(|e| e.to_string())?.forget();
                Ok::<_, String>(())
            }
        })
        .on("ok", move |job: Job| {
            s2.lock().unwrap().push(job.claim.id);
            async { Ok::<_, String>(()) }
        })
}

fn reporter() -> (
    impl Fn(&JobReport) + Send + Sync + 'static,
    mpsc::UnboundedReceiver<JobReport>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        move |r: &JobReport| {
            tx.send(r.clone()).ok();
        },
        rx,
    )
}

/// A worker over a copy of `store` running queue "q" with `config` and `handlers`, and the
/// receiver of its job reports.
fn start<B: Backend + Clone>(
    store: &B,
    config: QueueConfig,
    handlers: Handlers,
) -> (WorkerHandle<B>, mpsc::UnboundedReceiver<JobReport>) {
    start_with(store, config, handlers, |b| b)
}

/// [`start`], with `tune` setting more of the builder (error hooks, backoff).
fn start_with<B: Backend + Clone>(
    store: &B,
    config: QueueConfig,
    handlers: Handlers,
    tune: impl FnOnce(WorkerBuilder<B>) -> WorkerBuilder<B>,
) -> (WorkerHandle<B>, mpsc::UnboundedReceiver<JobReport>) {
    let (hook, reports) = reporter();
    let builder = Worker::builder(store.clone())
        .queue("q", config)
        .handlers(handlers)
        .on_finished(hook);
    let worker = tune(builder).build().unwrap().start().unwrap();
    (worker, reports)
}

type Errors = Arc<Mutex<Vec<(Operation, Option<JobId>, bool)>>>;

fn errors() -> (impl Fn(&WorkerError) + Send + Sync + 'static, Errors) {
    let seen: Errors = Arc::default();
    let sink = Arc::clone(&seen);
    (
        move |e: &WorkerError| {
            sink.lock()
                .unwrap()
                .push((e.operation, e.job, e.source.is_stale_lease()));
        },
        seen,
    )
}

async fn recv_n(rx: &mut mpsc::UnboundedReceiver<JobReport>, n: usize) -> Vec<JobReport> {
    let mut out = Vec::new();
    while out.len() < n {
        out.push(rx.recv().await.expect("worker running"));
    }
    out
}

/// Enqueues `n` jobs of `kind` to queue "q"; a failed or rescued one is due again at once.
async fn enqueue(store: &impl Backend, kind: &str, n: usize) -> Vec<JobId> {
    store
        .enqueue_many(
            (0..n)
                .map(|_| NewJob::new("q", kind, vec![]).retry(RetryPolicy::new(3)))
                .collect(),
        )
        .await
        .unwrap()
}

async fn status(store: &impl Backend, id: JobId) -> JobStatus {
    store.get(id).await.unwrap().unwrap().status()
}

#[tokio::test(start_paused = true)]
async fn attempts_that_finish_while_a_settlement_is_in_flight_go_out_together() {
    let settle_gate = Arc::new(Semaphore::new(0));
    let store = Probe::gated(MemoryBackend::new(), Arc::clone(&settle_gate));
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let (worker, mut rx) = start(
        &store,
        QueueConfig::default()
            .concurrency(8)
            .prefetch(0)
            .settles_in_flight(1),
        gated(&gate, &started),
    );
    let ids = enqueue(&store, "wait", 8).await;
    until("8 running", || worker.running() == 8).await;
    // The first attempt to finish is sent at once, and its settlement hangs.
    gate.add_permits(1);
    until("one settlement in flight", || {
        store.calls().settles.len() == 1
    })
    .await;
    // The other seven finish while it is in flight: they wait, gathered.
    gate.add_permits(7);
    until("all handlers done", || worker.running() == 0).await;
    tokio::task::yield_now().await;
    assert_eq!(
        store.calls().settles.len(),
        1,
        "no second call while one is in flight"
    );
    settle_gate.add_permits(100);
    let reports = recv_n(&mut rx, 8).await;
    let sizes: Vec<usize> = store.calls().settles.iter().map(Vec::len).collect();
    assert_eq!(sizes, [1, 7], "the seven went out in one call");
    assert!(reports.iter().all(|r| r.outcome == JobOutcome::Succeeded));
    for id in ids {
        assert_eq!(status(&store, id).await, JobStatus::Succeeded);
    }
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn a_second_batch_goes_out_at_the_count_or_the_window() {
    let settle_gate = Arc::new(Semaphore::new(0));
    let store = Probe::gated(MemoryBackend::new(), Arc::clone(&settle_gate));
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let (worker, mut rx) = start(
        &store,
        QueueConfig::default()
            .concurrency(10)
            .prefetch(0)
            .settle_batch(4)
            .settle_window(Duration::from_millis(50))
            .settles_in_flight(3),
        gated(&gate, &started),
    );
    enqueue(&store, "wait", 10).await;
    until("10 running", || worker.running() == 10).await;
    gate.add_permits(1);
    until("first call", || store.calls().settles.len() == 1).await;
    // Five finish: four make a full batch at once, one waits for the window.
    gate.add_permits(5);
    until("second call", || store.calls().settles.len() == 2).await;
    assert_eq!(store.calls().settles[1].len(), 4);
    tokio::time::sleep(Duration::from_millis(49)).await;
    assert_eq!(store.calls().settles.len(), 2, "the window has not passed");
    tokio::time::sleep(Duration::from_millis(2)).await;
    until("third call", || store.calls().settles.len() == 3).await;
    assert_eq!(store.calls().settles[2].len(), 1);
    gate.add_permits(4);
    settle_gate.add_permits(1_000);
    recv_n(&mut rx, 10).await;
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn a_batch_that_fails_as_a_whole_is_sent_again_unchanged() {
    let store = Probe::new(MemoryBackend::new());
    store.fail_settles.store(2, Ordering::SeqCst);
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let (on_error, seen) = errors();
    let (worker, mut rx) = start_with(
        &store,
        QueueConfig::default().concurrency(5).prefetch(0),
        gated(&gate, &started),
        |b| {
            b.on_error(on_error)
                .error_backoff(Duration::from_millis(100), Duration::from_secs(1))
        },
    );
    let ids = enqueue(&store, "wait", 5).await;
    until("5 running", || worker.running() == 5).await;
    gate.add_permits(5);
    let reports = recv_n(&mut rx, 5).await;
    let calls = store.calls().settles.clone();
    assert_eq!(calls.len(), 3, "two failed calls, then the one that worked");
    assert!(
        calls.iter().all(|c| *c == calls[0]),
        "the same batch each time"
    );
    assert_eq!(calls[0].len(), 5);
    let mut reported: Vec<JobId> = reports.iter().map(|r| r.job.claim.id).collect();
    reported.sort();
    assert_eq!(reported, ids, "each job reported once");
    assert!(reports.iter().all(|r| r.outcome == JobOutcome::Succeeded));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (Operation::Settle, None, false),
            (Operation::Settle, None, false)
        ]
    );
    for id in ids {
        let info = store.get(id).await.unwrap().unwrap();
        assert_eq!((info.status(), info.attempts), (JobStatus::Succeeded, 1));
    }
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn a_stale_entry_is_reported_and_the_rest_of_its_batch_settles() {
    let clock = ManualClock::new(START);
    let store = Arc::new(MemoryBackend::with_clock(clock.clone()));
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let (on_error, seen) = errors();
    let (worker, mut rx) = start_with(
        &store,
        QueueConfig::default()
            .concurrency(3)
            .prefetch(0)
            .lease(LEASE)
            // No beat before the test's end: tokio's paused clock does not move meanwhile.
            .heartbeat_interval(LEASE - Duration::from_secs(1))
            .rescue_interval(Duration::from_secs(3600)),
        gated(&gate, &started),
        |b| b.on_error(on_error),
    );
    let ids = enqueue(&*store, "wait", 3).await;
    until("3 running", || worker.running() == 3).await;
    let running = store
        .list(ListFilter::default().status(JobStatus::Running))
        .await
        .unwrap();
    let claim_of = |id: JobId| {
        let info = running.iter().find(|i| i.id == id).unwrap();
        let State::Running { lease } = info.state else {
            panic!("running")
        };
        fairq_worker::Claim {
            id,
            token: lease.token,
        }
    };
    // Two leases are renewed; the third expires and another worker takes the job.
    clock.advance(Duration::from_secs(20));
    for id in &ids[..2] {
        store.heartbeat(claim_of(*id), LEASE).await.unwrap();
    }
    clock.advance(Duration::from_secs(11));
    assert_eq!(store.rescue("q").await.unwrap(), 1);
    let other = store.claim("q", 1, LEASE).await.unwrap();
    assert_eq!(other[0].claim.id, ids[2]);

    gate.add_permits(3);
    let reports = recv_n(&mut rx, 3).await;
    let outcome: HashMap<JobId, JobOutcome> = reports
        .iter()
        .map(|r| (r.job.claim.id, r.outcome))
        .collect();
    assert_eq!(outcome[&ids[0]], JobOutcome::Succeeded);
    assert_eq!(outcome[&ids[1]], JobOutcome::Succeeded);
    assert_eq!(outcome[&ids[2]], JobOutcome::Unrecorded);
    assert_eq!(
        seen.lock().unwrap().clone(),
        [(Operation::Complete, Some(ids[2]), true)],
        "the stale entry alone is reported, and not retried"
    );
    assert_eq!(status(&*store, ids[0]).await, JobStatus::Succeeded);
    assert_eq!(
        status(&*store, ids[2]).await,
        JobStatus::Running,
        "the other worker's"
    );
    store.complete(other[0].claim).await.unwrap();
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn the_worker_holds_at_most_concurrency_plus_prefetch() {
    for prefetch in [0, 3] {
        let store = Probe::new(MemoryBackend::new());
        let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
        let (worker, mut rx) = start(
            &store,
            QueueConfig::default().concurrency(2).prefetch(prefetch),
            gated(&gate, &started),
        );
        enqueue(&store, "wait", 20).await;
        let mut most = 0;
        for finished in 0..20usize {
            let left = 20 - finished;
            until("the slots busy", || worker.running() == left.min(2)).await;
            tokio::task::yield_now().await;
            let held = store.inner.counts("q").running as usize;
            assert!(held <= 2 + prefetch, "{held} held with prefetch {prefetch}");
            most = most.max(held);
            gate.add_permits(1);
            rx.recv().await.unwrap();
        }
        assert_eq!(most, 2 + prefetch, "the buffer fills to its depth");
        assert!(
            store
                .calls()
                .claimed
                .iter()
                .all(|c| c.len() <= 2 + prefetch),
            "no claim asked for more than the room"
        );
        assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
    }
}

/// Runs 600 quick jobs at concurrency 2 on the default (adaptive) depth, answering each
/// claim only once the slots have started every job claimed before it and wait, on a store
/// whose claims cost mostly the same whatever their size if `fixed_cost`; returns what
/// each claim asked for.
async fn asked_while_claims_starve(fixed_cost: bool) -> Vec<usize> {
    let gate = Arc::new(Semaphore::new(0));
    let store = Probe {
        claim_gate: Some(Arc::clone(&gate)),
        fixed_cost_claims: fixed_cost,
        ..Probe::new(MemoryBackend::new())
    };
    let config = QueueConfig::default().concurrency(2);
    assert_eq!(config.get_max_prefetch(), 64);
    let started: Arc<Mutex<Vec<JobId>>> = Arc::default();
    let (worker, _reports) = start(
        &store,
        config,
        gated(&Arc::new(Semaphore::new(0)), &started),
    );
    enqueue(&store, "ok", 600).await;
    // The handlers are quick next to the claim, so the buffer deepens (time stands still
    // here, so every trial pays).
    let mut claimed = 0;
    while claimed < 600 {
        until("a claim waits at the gate", || {
            let calls = store.calls();
            calls.asked.len() > calls.claimed.len()
        })
        .await;
        until("every claimed job started", || {
            started.lock().unwrap().len() == claimed && worker.running() == 0
        })
        .await;
        let answered = store.calls().claimed.len();
        gate.add_permits(1);
        until("the claim answered", || {
            store.calls().claimed.len() > answered
        })
        .await;
        claimed += store.calls().claimed.last().unwrap().len();
    }
    gate.add_permits(100);
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
    store.calls().asked.clone()
}

#[tokio::test(start_paused = true)]
async fn the_default_depth_grows_while_slots_wait_for_claims_and_stays_bounded() {
    let ceiling = 64;
    let asked = asked_while_claims_starve(false).await;
    // The depth doubled (from 2) up to the ceiling: at once to twice the concurrency, then
    // on trial. Claims asked for more than half the ceiling's depth allows (claims go out
    // at the low-water mark, so they ask for about half the depth), and never for more
    // than the ceiling allows.
    assert!(asked.iter().any(|&n| n > 2 + ceiling / 2), "{asked:?}");
    assert!(asked.iter().all(|&n| n <= 2 + ceiling), "{asked:?}");
    // The trials took their claims: a baseline and a trial per doubling past 4.
    let deep = asked.iter().position(|&n| n > 2 + ceiling / 2).unwrap();
    assert!(deep > 12, "{asked:?}");
}

#[tokio::test(start_paused = true)]
async fn on_a_store_whose_claims_cost_mostly_the_same_the_depth_grows_without_trials() {
    let ceiling = 64;
    let asked = asked_while_claims_starve(true).await;
    // Five doublings from 2 reach the ceiling: the claims after them ask for the depth.
    let deep = asked.iter().position(|&n| n > 2 + ceiling / 2).unwrap();
    assert!(deep <= 7, "{asked:?}");
    assert!(asked.iter().all(|&n| n <= 2 + ceiling), "{asked:?}");
}

#[tokio::test(start_paused = true)]
async fn buffered_jobs_are_renewed_with_running_ones_in_one_call() {
    let clock = ManualClock::new(START);
    let store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let (worker, _reports) = start(
        &store,
        QueueConfig::default()
            .concurrency(1)
            .prefetch(2)
            .lease(LEASE)
            .heartbeat_interval(Duration::from_secs(10))
            .rescue_interval(Duration::from_secs(3600)),
        gated(&gate, &started),
    );
    enqueue(&store, "wait", 3).await;
    until("3 held", || store.inner.counts("q").running == 3).await;
    assert_eq!(worker.running(), 1);
    clock.advance(Duration::from_secs(25));
    // Just past the first beat, 10 s after the worker started.
    tokio::time::sleep(Duration::from_millis(10_001)).await;
    let beats = store.calls().heartbeats.clone();
    assert_eq!(beats.len(), 1, "one call per interval");
    assert_eq!(beats[0].len(), 3, "the running job and both buffered ones");
    let held = store
        .list(ListFilter::default().status(JobStatus::Running))
        .await
        .unwrap();
    for info in &held {
        let State::Running { lease } = info.state else {
            panic!("running")
        };
        assert_eq!(
            lease.deadline,
            START + 25_000 + 30_000,
            "job {} renewed",
            info.id
        );
    }
    // 45 s after the claims, 20 s after the renewal: nothing to rescue.
    clock.advance(Duration::from_secs(20));
    assert_eq!(store.rescue("q").await.unwrap(), 0);
    gate.add_permits(3);
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

/// A worker of one slot, no prefetch, a 30 s lease renewed every 10 s and (practically) no
/// rescues of its own, on `store` (a probe that holds settlements or their answers); with its
/// finished reports and errors.
fn settling_worker(
    store: Probe,
) -> (
    Probe,
    WorkerHandle<Probe>,
    mpsc::UnboundedReceiver<JobReport>,
    Errors,
) {
    let (on_error, seen) = errors();
    let (worker, reports) = start_with(
        &store,
        QueueConfig::default()
            .concurrency(1)
            .prefetch(0)
            .lease(LEASE)
            .heartbeat_interval(Duration::from_secs(10))
            .rescue_interval(Duration::from_secs(3600)),
        gated(&Arc::new(Semaphore::new(0)), &Arc::default()),
        |b| b.on_error(on_error),
    );
    (store, worker, reports, seen)
}

#[tokio::test(start_paused = true)]
async fn a_finished_job_keeps_its_lease_until_its_outcome_is_recorded() {
    let clock = ManualClock::new(START);
    let settle_gate = Arc::new(Semaphore::new(0));
    let (store, worker, mut reports, _) = settling_worker(Probe::gated(
        MemoryBackend::with_clock(clock.clone()),
        Arc::clone(&settle_gate),
    ));
    let id = enqueue(&store, "ok", 1).await[0];
    // The handler returned; its settlement waits at the gate.
    until("settling", || store.calls().settles.len() == 1).await;
    assert_eq!(worker.running(), 0);
    clock.advance(Duration::from_secs(25));
    tokio::time::sleep(Duration::from_millis(10_001)).await;
    let beats = store.calls().heartbeats.clone();
    assert_eq!(beats.len(), 1, "the unsettled job is renewed");
    assert_eq!(beats[0].iter().map(|c| c.id).collect::<Vec<_>>(), [id]);
    // 45 s after the claim, past its first lease: still held, nobody may rescue it.
    clock.advance(Duration::from_secs(20));
    assert_eq!(store.rescue("q").await.unwrap(), 0);
    settle_gate.add_permits(1);
    let report = recv_n(&mut reports, 1).await.remove(0);
    assert_eq!(report.outcome, JobOutcome::Succeeded);
    let info = store.get(id).await.unwrap().unwrap();
    assert_eq!(info.status(), JobStatus::Succeeded);
    assert_eq!(info.attempts, 1, "it ran once");
    // Once recorded, its lease is no longer renewed.
    let beats_before = store.calls().heartbeats.len();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(store.calls().heartbeats.len(), beats_before);
    settle_gate.add_permits(100);
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn a_finished_job_whose_lease_was_lost_is_no_longer_renewed() {
    let clock = ManualClock::new(START);
    let settle_gate = Arc::new(Semaphore::new(0));
    let (store, worker, mut reports, seen) = settling_worker(Probe::gated(
        MemoryBackend::with_clock(clock.clone()),
        Arc::clone(&settle_gate),
    ));
    let id = enqueue(&store, "ok", 1).await[0];
    until("settling", || store.calls().settles.len() == 1).await;
    // The lease runs out before the first beat and another worker's rescue takes the job.
    clock.advance(Duration::from_secs(31));
    assert_eq!(store.rescue("q").await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(10_001)).await;
    assert_eq!(store.calls().heartbeats.len(), 1);
    // Not reported by the heartbeater: a refused renewal of a finished job is as likely a
    // settlement that landed meanwhile (see the next test).
    assert!(seen.lock().unwrap().is_empty());
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(store.calls().heartbeats.len(), 1, "renewals stopped");
    settle_gate.add_permits(100);
    let report = recv_n(&mut reports, 1).await.remove(0);
    assert_eq!(report.outcome, JobOutcome::Unrecorded);
    assert_eq!(
        seen.lock().unwrap().clone(),
        [(Operation::Complete, Some(id), true)],
        "the refused settlement is reported, once"
    );
    worker.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn a_renewal_refused_because_the_settlement_landed_meanwhile_is_no_error() {
    let clock = ManualClock::new(START);
    let answer_gate = Arc::new(Semaphore::new(0));
    let (store, worker, mut reports, seen) = settling_worker(Probe {
        answer_gate: Some(Arc::clone(&answer_gate)),
        ..Probe::new(MemoryBackend::with_clock(clock.clone()))
    });
    let id = enqueue(&store, "ok", 1).await[0];
    // The store recorded the success; its answer has not reached the worker.
    until("recorded", || store.inner.counts("q").succeeded == 1).await;
    // The beat still holds the claim; the store refuses to renew a finished job.
    tokio::time::sleep(Duration::from_millis(10_001)).await;
    let beats = store.calls().heartbeats.clone();
    assert_eq!(beats.len(), 1);
    assert_eq!(beats[0].iter().map(|c| c.id).collect::<Vec<_>>(), [id]);
    answer_gate.add_permits(100);
    let report = recv_n(&mut reports, 1).await.remove(0);
    assert_eq!(report.outcome, JobOutcome::Succeeded);
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing went wrong: {:?}",
        seen.lock().unwrap()
    );
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn a_settlement_failing_for_longer_than_a_lease_leaves_its_jobs_to_a_rescue() {
    let clock = ManualClock::new(START);
    let store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    store.fail_settles.store(usize::MAX, Ordering::SeqCst);
    let (store, worker, mut reports, seen) = settling_worker(store);
    let id = enqueue(&store, "ok", 1).await[0];
    until("failing", || !seen.lock().unwrap().is_empty()).await;
    let renewed = |beat: &Vec<fairq_worker::Claim>| beat.iter().any(|c| c.id == id);
    // A short stall: the finished job's lease is renewed while its settlement is retried.
    tokio::time::sleep(Duration::from_millis(20_001)).await;
    let beats = store.calls().heartbeats.clone();
    assert!(beats.len() >= 2 && beats.iter().all(renewed), "{beats:?}");
    // Failing for longer than the 30 s lease: the renewals stop.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let renewals = || {
        store
            .calls()
            .heartbeats
            .iter()
            .filter(|b| renewed(b))
            .count()
    };
    let after_a_lease = renewals();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        renewals(),
        after_a_lease,
        "still renewed after a lease of failures"
    );
    // So another worker's rescue can take the job once its lease runs out.
    clock.advance(Duration::from_secs(31));
    assert_eq!(store.rescue("q").await.unwrap(), 1);
    // The store recovers: the late settlement is refused, and the job runs again here.
    store.fail_settles.store(0, Ordering::SeqCst);
    let mut outcomes: Vec<JobOutcome> = recv_n(&mut reports, 2)
        .await
        .into_iter()
        .map(|r| r.outcome)
        .collect();
    outcomes.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(outcomes, [JobOutcome::Succeeded, JobOutcome::Unrecorded]);
    let info = store.get(id).await.unwrap().unwrap();
    assert_eq!((info.status(), info.attempts), (JobStatus::Succeeded, 2));
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

/// A settlement the store recorded but whose answer was lost is sent again, and the store
/// refuses each entry as no longer running: the worker reads the jobs and reports what they
/// became, once, with the hooks of a recorded outcome and no error of its own.
#[tokio::test(start_paused = true)]
async fn a_settlement_recorded_before_its_answer_was_lost_is_reported_as_recorded() {
    let clock = ManualClock::new(START);
    let store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    store.lose_settle_answers.store(3, Ordering::SeqCst);
    let (on_error, seen) = errors();
    let dead: Arc<Mutex<Vec<JobId>>> = Arc::default();
    let died = Arc::clone(&dead);
    let (worker, mut reports) = start_with(
        &store,
        QueueConfig::default().concurrency(1).prefetch(0),
        Handlers::new()
            .on("ok", |_job: Job| async { Ok::<_, String>(()) })
            .on("bad", |_job: Job| async {
                Err::<(), _>(fairq_worker::Failure::permanent("bad payload"))
            })
            .on("flaky", |_job: Job| async { Err::<(), _>("try later") }),
        |b| {
            b.on_error(on_error)
                .on_dead(move |d| died.lock().unwrap().push(d.job.claim.id))
        },
    );
    let mut ids = Vec::new();
    for kind in ["ok", "bad", "flaky"] {
        // The retry is due a minute later, so the record read below is the first attempt's.
        let policy = RetryPolicy::new(3).with_delays([Duration::from_secs(60)]);
        let job = NewJob::new("q", kind, vec![]).retry(policy);
        ids.push(store.enqueue(job).await.unwrap());
        let report = recv_n(&mut reports, 1).await.remove(0);
        assert_eq!(report.job.claim.id, *ids.last().unwrap());
        let info = store.get(report.job.claim.id).await.unwrap().unwrap();
        let expected = match info.state {
            State::Succeeded { .. } => JobOutcome::Succeeded,
            State::Dead { .. } => JobOutcome::Dead,
            State::Retrying { run_at } => JobOutcome::Retry { run_at },
            other => panic!("{kind}: {other:?}"),
        };
        assert_eq!(report.outcome, expected, "{kind}");
    }
    assert_eq!(
        store.calls().settles.len(),
        6,
        "each batch went twice: recorded, then refused"
    );
    assert_eq!(dead.lock().unwrap().clone(), [ids[1]], "on_dead once");
    assert_eq!(
        seen.lock().unwrap().clone(),
        [(Operation::Settle, None, false); 3],
        "only the calls that failed are errors"
    );
    assert!(reports.try_recv().is_err(), "each attempt reported once");
    let report = worker.shutdown(Duration::from_secs(5)).await;
    assert!(report.is_clean(), "{report:?}");
}

/// When the read of a job whose settlement was sent again and refused never answers, the
/// acker waits one heartbeat interval for it, then reports the outcome as unrecorded (its
/// record does not tell) and carries on: later attempts are settled and reported.
#[tokio::test(start_paused = true)]
async fn a_read_back_that_never_answers_does_not_stall_the_acker() {
    const EVERY: Duration = Duration::from_secs(10);
    let store = Probe::new(MemoryBackend::new());
    store.lose_settle_answers.store(1, Ordering::SeqCst);
    store.hang_gets.store(1, Ordering::SeqCst);
    let (on_error, seen) = errors();
    let (worker, mut reports) = start_with(
        &store,
        QueueConfig::default()
            .concurrency(1)
            .prefetch(0)
            .heartbeat_interval(EVERY),
        Handlers::new().on("ok", |_job: Job| async { Ok::<_, String>(()) }),
        |b| b.on_error(on_error),
    );
    let begun = tokio::time::Instant::now();
    let first = enqueue(&store, "ok", 1).await[0];
    let report = tokio::time::timeout(Duration::from_secs(600), reports.recv())
        .await
        .expect("reported within 10 minutes")
        .unwrap();
    assert_eq!(
        (report.job.claim.id, report.outcome),
        (first, JobOutcome::Unrecorded)
    );
    assert!(
        begun.elapsed() <= EVERY + Duration::from_secs(1),
        "{:?}",
        begun.elapsed()
    );
    assert_eq!(
        seen.lock().unwrap().clone(),
        [
            (Operation::Settle, None, false),
            (Operation::Complete, Some(first), false)
        ]
    );
    assert_eq!(status(&store, first).await, JobStatus::Succeeded);
    let second = enqueue(&store, "ok", 1).await[0];
    let report = recv_n(&mut reports, 1).await.remove(0);
    assert_eq!(
        (report.job.claim.id, report.outcome),
        (second, JobOutcome::Succeeded)
    );
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn a_job_buffered_too_long_is_handed_back() {
    let store = Probe::new(MemoryBackend::new());
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let (worker, _reports) = start(
        &store,
        QueueConfig::default()
            .concurrency(1)
            .prefetch(2)
            .heartbeat_interval(Duration::from_secs(1))
            .prefetch_ttl(Duration::from_secs(5)),
        gated(&gate, &started),
    );
    let ids = enqueue(&store, "wait", 3).await;
    until("3 held", || store.inner.counts("q").running == 3).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let releases = store.calls().releases.clone();
    assert_eq!(releases.len(), 1);
    let handed: Vec<JobId> = releases[0].iter().map(|c| c.id).collect();
    assert_eq!(handed, ids[1..], "the buffered two, oldest first");
    for id in &ids[1..] {
        let info = store.get(*id).await.unwrap().unwrap();
        assert_eq!((info.status(), info.attempts), (JobStatus::Scheduled, 0));
    }
    // While the slot stays busy the worker claims only for free slots: none.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(store.inner.counts("q").running, 1);
    gate.add_permits(10);
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn shutdown_hands_back_buffered_jobs_and_settles_finished_ones() {
    let store = Probe::new(MemoryBackend::new());
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let (worker, mut rx) = start(
        &store,
        QueueConfig::default().concurrency(1).prefetch(3),
        gated(&gate, &started),
    );
    let ids = enqueue(&store, "wait", 4).await;
    until("4 held", || store.inner.counts("q").running == 4).await;
    let shutdown = tokio::spawn(worker.shutdown(Duration::from_secs(10)));
    until("handed back", || !store.calls().releases.is_empty()).await;
    gate.add_permits(1);
    let report = shutdown.await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.released, ids[1..]);
    // The finished job was settled before shutdown returned.
    assert_eq!(rx.try_recv().unwrap().outcome, JobOutcome::Succeeded);
    assert_eq!(status(&store, ids[0]).await, JobStatus::Succeeded);
    for id in &ids[1..] {
        let info = store.get(*id).await.unwrap().unwrap();
        assert_eq!(
            (info.status(), info.attempts),
            (JobStatus::Scheduled, 0),
            "handed back without an attempt"
        );
    }
    assert_eq!(*started.lock().unwrap(), ids[..1]);
}

#[tokio::test(start_paused = true)]
async fn a_store_that_cannot_take_jobs_back_leaves_them_to_lease_expiry() {
    let clock = ManualClock::new(START);
    let mut store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    store.no_release = true;
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let (worker, _reports) = start(
        &store,
        QueueConfig::default()
            .concurrency(1)
            .prefetch(2)
            .lease(LEASE),
        gated(&gate, &started),
    );
    let ids = enqueue(&store, "wait", 3).await;
    until("3 held", || store.inner.counts("q").running == 3).await;
    gate.add_permits(1);
    let report = worker.shutdown(Duration::from_secs(10)).await;
    assert_eq!(report.left_claimed, ids[1..]);
    assert!(report.released.is_empty() && !report.is_clean());
    clock.advance(LEASE);
    assert_eq!(store.rescue("q").await.unwrap(), 2);
    for id in &ids[1..] {
        let info = store.get(*id).await.unwrap().unwrap();
        assert_eq!(
            (info.status(), info.attempts),
            (JobStatus::Retrying, 1),
            "a rescue counts the attempt"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn prefetch_is_off_by_default_where_jobs_cannot_be_handed_back() {
    for (no_release, held) in [(false, 8), (true, 4)] {
        let mut store = Probe::new(MemoryBackend::new());
        store.no_release = no_release;
        let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
        let (worker, _reports) = start(
            &store,
            QueueConfig::default().concurrency(4),
            gated(&gate, &started),
        );
        enqueue(&store, "wait", 20).await;
        until("the slots busy", || worker.running() == 4).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            store.inner.counts("q").running,
            held,
            "no_release: {no_release}"
        );
        gate.add_permits(100);
        let report = worker.shutdown(Duration::from_secs(5)).await;
        assert!(report.is_clean(), "{report:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn claims_pause_while_the_store_owes_answers() {
    let store = Probe::new(MemoryBackend::new());
    store.fail_settles.store(usize::MAX, Ordering::SeqCst);
    let (gate, started) = (Arc::new(Semaphore::new(100)), Arc::default());
    let (worker, mut rx) = start_with(
        &store,
        QueueConfig::default()
            .concurrency(2)
            .prefetch(0)
            .max_unsettled(3),
        gated(&gate, &started),
        |b| b.error_backoff(Duration::from_millis(100), Duration::from_secs(1)),
    );
    enqueue(&store, "wait", 20).await;
    // Settlements keep failing and are sent again for a minute.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let ran = started.lock().unwrap().len();
    assert!(
        (3..=4).contains(&ran),
        "claims stop once 3 attempts wait for the store: {ran} ran"
    );
    assert_eq!(store.inner.counts("q").running as usize, ran);
    assert!(store.calls().settles.len() > 10, "sent again and again");
    store.fail_settles.store(0, Ordering::SeqCst);
    recv_n(&mut rx, 20).await;
    assert_eq!(store.inner.counts("q").succeeded, 20);
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn the_acker_claims_in_the_same_call_when_the_buffer_runs_low() {
    let store = Probe::new(MemoryBackend::new());
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let (worker, mut rx) = start(
        &store,
        QueueConfig::default().concurrency(4).prefetch(4),
        gated(&gate, &started),
    );
    let ids = enqueue(&store, "ok", 200).await;
    let reports = recv_n(&mut rx, 200).await;
    assert!(reports.iter().all(|r| r.outcome == JobOutcome::Succeeded));
    assert!(
        store.calls().settle_and_claims > 0,
        "some claims rode on settlements"
    );
    assert_eq!(
        store.claim_order(),
        ids,
        "one claim at a time: jobs claimed in queue order"
    );
    assert_eq!(*started.lock().unwrap(), ids, "and started in claim order");
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

/// Handlers that return at once must not starve the claimer of the runtime: the next claim
/// goes out when the buffer reaches its low-water mark (half the depth), while jobs are
/// still buffered, not once slots have drained everything. Before, a slot taking one
/// instant job after another never yielded, so every claim asked for the whole
/// concurrency plus depth.
#[tokio::test(start_paused = true)]
async fn the_next_claim_goes_out_at_the_low_water_mark_even_with_instant_handlers() {
    const CONCURRENCY: usize = 4;
    const DEPTH: usize = 64;
    let store = Probe::new(MemoryBackend::new());
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let (worker, mut rx) = start(
        &store,
        QueueConfig::default()
            .concurrency(CONCURRENCY)
            .prefetch(DEPTH),
        gated(&gate, &started),
    );
    enqueue(&store, "ok", 2_000).await;
    recv_n(&mut rx, 2_000).await;
    let asked = store.calls().asked.clone();
    // The claims of the drain (the first fills an empty worker; the last ones find the
    // queue empty and ask for everything again).
    let drain = &asked[1..asked.len() - 2];
    let early = drain.iter().filter(|&&n| n < CONCURRENCY + DEPTH).count();
    assert!(
        early * 10 >= drain.len() * 9,
        "claims should go out while half the buffer is left: asked {asked:?}"
    );
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

/// Heavy keys with deep backlogs and light keys with one job each: jobs start in exactly
/// the order the store claimed them, so a light key's job starts within `2 (K - 1)` starts.
#[tokio::test(start_paused = true)]
async fn jobs_start_in_claim_order_within_the_fair_bound() {
    let store = Probe::new(MemoryBackend::new());
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let (worker, mut rx) = start(
        &store,
        QueueConfig::default().concurrency(3).prefetch(6),
        gated(&gate, &started),
    );
    let heavy = 4;
    let light = 3;
    let k = heavy + light;
    let mut jobs = Vec::new();
    for h in 0..heavy {
        for _ in 0..30 {
            jobs.push(NewJob::new("q", "ok", vec![]).key(format!("heavy-{h}")));
        }
    }
    for l in 0..light {
        jobs.push(NewJob::new("q", "ok", vec![]).key(format!("light-{l}")));
    }
    let ids = store.enqueue_many(jobs).await.unwrap();
    let total = ids.len();
    recv_n(&mut rx, total).await;
    let starts = started.lock().unwrap().clone();
    assert_eq!(starts, store.claim_order(), "jobs start in claim order");
    for light_id in &ids[heavy * 30..] {
        let position = starts.iter().position(|id| id == light_id).unwrap();
        assert!(
            position <= 2 * (k - 1),
            "light job {light_id} started {position}th"
        );
    }

    // A light job enqueued while the heavy backlogs run: it waits for at most the jobs
    // held (running or buffered) when it arrived plus 2 (K - 1) claims.
    let mut jobs = Vec::new();
    for h in 0..heavy {
        for _ in 0..30 {
            jobs.push(NewJob::new("q", "wait", vec![]).key(format!("heavy-{h}")));
        }
    }
    store.enqueue_many(jobs).await.unwrap();
    gate.add_permits(20);
    until("20 ran", || started.lock().unwrap().len() >= total + 20).await;
    let held = store.inner.counts("q").running as usize;
    let before = started.lock().unwrap().len();
    let late = store
        .enqueue(NewJob::new("q", "ok", vec![]).key("light-late"))
        .await
        .unwrap();
    gate.add_permits(1_000);
    recv_n(&mut rx, 121).await;
    let starts = started.lock().unwrap().clone();
    let waited = starts[before..].iter().position(|id| *id == late).unwrap();
    assert!(
        waited <= held + 2 * (heavy + 1 - 1),
        "the late light job waited {waited} starts (held {held})"
    );
    assert_eq!(starts, store.claim_order());
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

/// A runtime of its own for a worker, so a test can kill every task of it at once.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

/// Runs a worker until `ready`, then drops its runtime: every task of the worker stops at
/// its current await, as when the process is killed.
fn kill_when(
    store: &Probe,
    config: QueueConfig,
    handlers: Handlers,
    on_finished: impl Fn(&JobReport) + Send + Sync + 'static,
    ready: impl FnMut() -> bool,
) {
    let rt = runtime();
    rt.block_on(async {
        let worker = Worker::builder(store.clone())
            .queue("q", config)
            .handlers(handlers)
            .on_finished(on_finished)
            .build()
            .unwrap()
            .start()
            .unwrap();
        until("ready to be killed", ready).await;
        std::mem::forget(worker);
    });
    drop(rt);
}

/// After the leases of a killed worker expire, a fresh worker finishes everything; returns
/// the reports.
fn recover(store: &Probe, clock: &ManualClock, n: usize) -> Vec<JobReport> {
    clock.advance(LEASE);
    runtime().block_on(async {
        let (worker, mut rx) = start(
            store,
            QueueConfig::default()
                .lease(LEASE)
                .rescue_interval(Duration::from_secs(1)),
            Handlers::new().on("wait", |_job: Job| async { Ok::<_, String>(()) }),
        );
        let reports = recv_n(&mut rx, n).await;
        assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
        reports
    })
}

#[test]
fn a_worker_killed_with_a_full_buffer_loses_nothing() {
    let clock = ManualClock::new(START);
    let store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    let ids = runtime().block_on(enqueue(&store, "wait", 10));
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let inner = store.inner.clone();
    kill_when(
        &store,
        QueueConfig::default()
            .concurrency(2)
            .prefetch(4)
            .lease(LEASE),
        gated(&gate, &started),
        |_| {},
        move || inner.counts("q").running == 6,
    );
    let counts = store.inner.counts("q");
    assert_eq!((counts.running, counts.scheduled), (6, 4));
    let reports = recover(&store, &clock, 10);
    assert!(reports.iter().all(|r| r.outcome == JobOutcome::Succeeded));
    let attempts: HashMap<JobId, u32> = reports
        .iter()
        .map(|r| (r.job.claim.id, r.job.attempt))
        .collect();
    let held: Vec<JobId> = store.claim_order()[..6].to_vec();
    for id in &ids {
        let expected = if held.contains(id) { 2 } else { 1 };
        assert_eq!(
            attempts[id], expected,
            "job {id}: a rescue counts the lost attempt"
        );
        assert_eq!(
            runtime().block_on(status(&store, *id)),
            JobStatus::Succeeded
        );
    }
}

#[test]
fn a_worker_killed_mid_settlement_loses_no_acknowledged_outcome() {
    let clock = ManualClock::new(START);
    let store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    let ids = runtime().block_on(enqueue(&store, "wait", 8));
    let (gate, started) = (Arc::new(Semaphore::new(4)), Arc::default());
    let acknowledged: Arc<Mutex<Vec<JobId>>> = Arc::default();
    let sink = Arc::clone(&acknowledged);
    let (store2, gate2, sink2) = (store.clone(), Arc::clone(&gate), Arc::clone(&acknowledged));
    let mut stage = 0;
    kill_when(
        &store,
        QueueConfig::default()
            .concurrency(4)
            .prefetch(0)
            .lease(LEASE),
        gated(&gate, &started),
        move |r: &JobReport| {
            assert_eq!(r.outcome, JobOutcome::Succeeded);
            sink.lock().unwrap().push(r.job.claim.id);
        },
        move || match stage {
            // The first four finish and are acknowledged.
            0 if sink2.lock().unwrap().len() == 4 => {
                stage = 1;
                false
            }
            // The next four start; their batch will be half settled when the worker dies.
            1 if store2.inner.counts("q").running == 4 => {
                store2.half_settle.store(true, Ordering::SeqCst);
                gate2.add_permits(4);
                stage = 2;
                false
            }
            2 => store2.inner.counts("q").running == 2,
            _ => false,
        },
    );
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert_eq!(acknowledged.len(), 4);
    let half: Vec<JobId> = store.calls().settles.last().unwrap()[..2]
        .iter()
        .map(|c| c.id)
        .collect();
    for id in acknowledged.iter().chain(&half) {
        assert_eq!(
            runtime().block_on(status(&store, *id)),
            JobStatus::Succeeded,
            "job {id} was recorded before the kill"
        );
    }
    let reports = recover(&store, &clock, 2);
    for r in &reports {
        assert!(!acknowledged.contains(&r.job.claim.id) && !half.contains(&r.job.claim.id));
        assert_eq!(r.job.attempt, 2, "the unsettled attempt is run again");
    }
    for id in &ids {
        assert_eq!(
            runtime().block_on(status(&store, *id)),
            JobStatus::Succeeded
        );
    }
}

/// Calls `on_drop` when dropped: shows a handler's future was dropped.
struct DropFlag(Arc<std::sync::atomic::AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// What a handler does when the worker shuts down.
#[derive(Clone, Copy)]
enum OnStop {
    /// Returns a retryable error.
    GiveUp,
    /// Returns a permanent error.
    Refuse,
    /// Finishes its work.
    Finish,
    /// Ignores the signal and never returns.
    Ignore,
    /// Panics.
    Panic,
}

fn stoppable(on_stop: OnStop, dropped: &Arc<std::sync::atomic::AtomicBool>) -> Handlers {
    let dropped = Arc::clone(dropped);
    Handlers::new().on("long", move |job: Job| {
        let flag = DropFlag(Arc::clone(&dropped));
        async move {
            let _flag = flag;
            let stop = job.stop_signal();
            assert!(!stop.is_raised());
            stop.raised().await;
            assert!(job.stop_signal().is_raised());
            match on_stop {
                OnStop::GiveUp => Err(fairq_worker::Failure::retryable("stopped early")),
                OnStop::Refuse => Err(fairq_worker::Failure::permanent("cannot resume")),
                OnStop::Finish => Ok(()),
                OnStop::Ignore => std::future::pending().await,
                OnStop::Panic => panic!("bug on the way out"),
            }
        }
    })
}

/// Runs one "long" job under `on_stop`, shuts the worker down with a 10 s deadline once it
/// started, and returns the report, the job and what `on_finished` saw.
async fn stop_one(
    store: &Probe,
    on_stop: OnStop,
) -> (fairq_worker::ShutdownReport, JobId, Vec<JobReport>, bool) {
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (worker, mut rx) = start(
        store,
        QueueConfig::default().lease(LEASE),
        stoppable(on_stop, &dropped),
    );
    let id = enqueue(store, "long", 1).await[0];
    until("started", || worker.running() == 1).await;
    let report = worker.shutdown(Duration::from_secs(10)).await;
    let mut finished = Vec::new();
    while let Ok(r) = rx.try_recv() {
        finished.push(r);
    }
    (report, id, finished, dropped.load(Ordering::SeqCst))
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_stops_when_asked_is_handed_back_uncounted() {
    let store = Probe::new(MemoryBackend::new());
    let started = tokio::time::Instant::now();
    let (report, id, finished, _) = stop_one(&store, OnStop::GiveUp).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "no wait for the deadline"
    );
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.released, [id]);
    assert!(report.abandoned.is_empty());
    assert!(finished.is_empty(), "no outcome was recorded");
    let info = store.get(id).await.unwrap().unwrap();
    assert_eq!((info.status(), info.attempts), (JobStatus::Scheduled, 0));
    assert_eq!(info.last_error, None, "not a failure");
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_finishes_or_refuses_when_asked_is_recorded() {
    let store = Probe::new(MemoryBackend::new());
    let (report, id, finished, _) = stop_one(&store, OnStop::Finish).await;
    assert!(report.is_clean() && report.released.is_empty());
    assert_eq!(finished[0].outcome, JobOutcome::Succeeded);
    assert_eq!(status(&store, id).await, JobStatus::Succeeded);

    let (report, id, finished, _) = stop_one(&store, OnStop::Refuse).await;
    assert!(report.is_clean() && report.released.is_empty());
    assert_eq!(finished[0].outcome, JobOutcome::Dead);
    assert_eq!(status(&store, id).await, JobStatus::Dead);
}

/// A panic is a bug, not a handler giving up when asked: a handler that panics after the
/// stop signal has failed its attempt, which counts, rather than being handed back.
#[tokio::test(start_paused = true)]
async fn a_handler_that_panics_when_asked_to_stop_fails_its_attempt() {
    let store = Probe::new(MemoryBackend::new());
    let (report, id, finished, dropped) = stop_one(&store, OnStop::Panic).await;
    assert!(dropped, "the handler's state was dropped by the unwind");
    assert!(report.is_clean(), "{report:?}");
    assert!(report.released.is_empty(), "not handed back: {report:?}");
    assert!(matches!(finished[0].outcome, JobOutcome::Retry { .. }));
    let info = store.get(id).await.unwrap().unwrap();
    assert_eq!((info.status(), info.attempts), (JobStatus::Retrying, 1));
    assert_eq!(
        info.last_error.as_deref(),
        Some("handler panicked: bug on the way out")
    );
}

#[tokio::test(start_paused = true)]
async fn a_handler_still_running_at_the_deadline_is_dropped_and_handed_back() {
    let store = Probe::new(MemoryBackend::new());
    let started = tokio::time::Instant::now();
    let (report, id, finished, dropped) = stop_one(&store, OnStop::Ignore).await;
    assert!(
        started.elapsed() >= Duration::from_secs(10),
        "waited for the deadline"
    );
    assert!(dropped, "the handler's future was dropped");
    assert_eq!(report.abandoned, [id]);
    assert_eq!(report.released, [id]);
    assert!(!report.is_clean());
    assert!(finished.is_empty());
    let info = store.get(id).await.unwrap().unwrap();
    assert_eq!(
        (info.status(), info.attempts),
        (JobStatus::Scheduled, 0),
        "handed back, the interrupted attempt not counted"
    );
    // Another worker runs it as a first attempt.
    let again = store.claim("q", 1, LEASE).await.unwrap();
    assert_eq!((again[0].claim.id, again[0].attempt), (id, 1));
}

/// A job whose handler gave up when asked keeps its lease while the shutdown waits for
/// another handler for longer than a lease: a rescue elsewhere finds nothing to take, and
/// the job is handed back, its attempt not counted.
#[tokio::test(start_paused = true)]
async fn a_stopped_job_keeps_its_lease_while_the_shutdown_waits_for_others() {
    let clock = ManualClock::new(START);
    let store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    let (wind_down, gate) = (Arc::new(Semaphore::new(0)), Arc::new(Semaphore::new(0)));
    let (wound, hold) = (Arc::clone(&wind_down), Arc::clone(&gate));
    // "long" gives up when asked, once its wind-down gate opens (after the shutdown handed
    // the buffer back); "wait" ignores the signal until its gate opens.
    let handlers = Handlers::new()
        .on("long", move |job: Job| {
            let wound = Arc::clone(&wound);
            async move {
                job.stop_signal().raised().await;
                wound.acquire().await.map_err(|e| e.to_string())?.forget();
                Err(fairq_worker::Failure::retryable("stopped early"))
            }
        })
        .on("wait", move |_job: Job| {
            let gate = Arc::clone(&hold);
            async move {
                gate.acquire().await.map_err(|e| e.to_string())?.forget();
                Ok::<_, String>(())
            }
        });
    let (worker, mut rx) = start(
        &store,
        QueueConfig::default()
            .concurrency(2)
            .lease(LEASE)
            .heartbeat_interval(Duration::from_secs(1)),
        handlers,
    );
    let stopped = store
        .enqueue(NewJob::new("q", "long", vec![]).retry(RetryPolicy::new(0)))
        .await
        .unwrap();
    let waiting = enqueue(&store, "wait", 1).await[0];
    until("both started", || worker.running() == 2).await;
    let shutdown = tokio::spawn(worker.shutdown(Duration::from_secs(600)));
    // Paused time moves only once every task is idle: the shutdown has handed the (empty)
    // buffer back and waits for the slots.
    tokio::time::sleep(Duration::from_secs(1)).await;
    wind_down.add_permits(1);
    // Twice the lease passes on the store's clock while "wait" still runs, with a heartbeat
    // interval of tokio's paused time at every step.
    for _ in 0..12 {
        clock.advance(Duration::from_secs(5));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(
        store.rescue("q").await.unwrap(),
        0,
        "no lease of the worker expired"
    );
    gate.add_permits(1);
    let report = shutdown.await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.released, [stopped]);
    let info = store.get(stopped).await.unwrap().unwrap();
    assert_eq!((info.status(), info.attempts), (JobStatus::Scheduled, 0));
    let finished = rx.recv().await.unwrap();
    assert_eq!(
        (finished.job.claim.id, finished.outcome),
        (waiting, JobOutcome::Succeeded)
    );
}

/// How long a shutdown may overrun its deadline (the worker's `HAND_BACK_GRACE`).
const GRACE: Duration = Duration::from_secs(2);

/// Store calls that never answer (a heartbeat, a rescue) do not hold a shutdown past its
/// deadline and grace: the calls are dropped, and the job that finished is still recorded.
#[tokio::test(start_paused = true)]
async fn a_shutdown_is_not_held_up_by_heartbeats_or_rescues_that_never_answer() {
    let mut store = Probe::new(MemoryBackend::new());
    store.rescue_gate = Some(Arc::new(Semaphore::new(0)));
    store.heartbeat_gate = Some(Arc::new(Semaphore::new(0)));
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (worker, mut rx) = start(
        &store,
        QueueConfig::default()
            .lease(LEASE)
            .heartbeat_interval(Duration::from_secs(1)),
        stoppable(OnStop::Finish, &dropped),
    );
    let id = enqueue(&store, "long", 1).await[0];
    until("started", || worker.running() == 1).await;
    // Paused time moves once every task waits: the first beat goes out and hangs.
    tokio::time::sleep(Duration::from_secs(1)).await;
    until("a beat in flight", || !store.calls().heartbeats.is_empty()).await;
    let deadline = Duration::from_secs(10);
    let begun = tokio::time::Instant::now();
    // A shutdown that never ends fails here, once the paused clock has run an hour ahead.
    let report = tokio::time::timeout(Duration::from_secs(3600), worker.shutdown(deadline))
        .await
        .expect("the shutdown ended");
    assert!(begun.elapsed() <= deadline + GRACE, "{:?}", begun.elapsed());
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(rx.recv().await.unwrap().outcome, JobOutcome::Succeeded);
    assert_eq!(status(&store, id).await, JobStatus::Succeeded);
}

/// An acker waiting for the store to hold the queue's retries (a retry failed again) gives
/// up at the deadline like one waiting for a settlement: the shutdown ends within its grace,
/// and an attempt that finished meanwhile is reported unsettled.
#[tokio::test(start_paused = true)]
async fn a_shutdown_is_not_held_up_by_a_hold_of_retries_that_never_answers() {
    let clock = ManualClock::new(START);
    let mut store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    store.hold_gate = Some(Arc::new(Semaphore::new(0)));
    let policy = RetryPolicy::new(5).with_delays([Duration::from_secs(1)]);
    let retry = store
        .enqueue(NewJob::new("q", "call", vec![]).retry(policy))
        .await
        .unwrap();
    let job = store.claim("q", 1, LEASE).await.unwrap().remove(0);
    store
        .fail(&job, fairq_worker::Failure::retryable("down"))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(1));
    let long = enqueue(&store, "long", 1).await[0];
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let handlers = stoppable(OnStop::Finish, &dropped)
        .on("call", |_job: Job| async { Err::<(), _>("still down") });
    let (worker, mut rx) = start_with(
        &store,
        QueueConfig::default()
            .concurrency(2)
            .lease(LEASE)
            .retry_sweep(Duration::from_secs(10)),
        handlers,
        |b| b.clock(clock.clone()),
    );
    until("the retry failed again and stopped the sweep", || {
        worker.health_report()[0]
            .retry_sweep
            .is_some_and(|s| s.stops == 1)
    })
    .await;
    let deadline = Duration::from_secs(10);
    let begun = tokio::time::Instant::now();
    let report = tokio::time::timeout(Duration::from_secs(3600), worker.shutdown(deadline))
        .await
        .expect("the shutdown ended");
    assert!(begun.elapsed() <= deadline + GRACE, "{:?}", begun.elapsed());
    assert_eq!(report.unsettled, [long], "{report:?}");
    assert!(!report.is_clean());
    let finished = rx.recv().await.unwrap();
    assert_eq!(finished.job.claim.id, retry);
    assert!(matches!(finished.outcome, JobOutcome::Retry { .. }));
    assert_eq!(status(&store, long).await, JobStatus::Running);
}

/// A buffered job that waited too long and whose hand-back failed is not forgotten when the
/// worker stops before the next beat: the shutdown hands it back.
#[tokio::test(start_paused = true)]
async fn an_expired_job_whose_hand_back_failed_is_handed_back_at_shutdown() {
    let store = Probe::new(MemoryBackend::new());
    store.fail_releases.store(1, Ordering::SeqCst);
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (worker, _rx) = start(
        &store,
        QueueConfig::default()
            .concurrency(1)
            .prefetch(1)
            .prefetch_ttl(Duration::from_secs(1))
            .heartbeat_interval(Duration::from_secs(1))
            .lease(LEASE),
        stoppable(OnStop::Finish, &dropped),
    );
    let ids = enqueue(&store, "long", 2).await;
    until("one runs, one is buffered", || {
        worker.running() == 1 && store.claim_order().len() == 2
    })
    .await;
    // Paused time moves once every task waits: the beat at 1 s finds the buffered job
    // expired, and its hand-back fails.
    tokio::time::sleep(Duration::from_secs(1)).await;
    until("the hand-back failed", || {
        !store.calls().releases.is_empty()
    })
    .await;
    let buffered = store.calls().releases[0][0].id;
    assert!(ids.contains(&buffered));
    let report = worker.shutdown(Duration::from_secs(10)).await;
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.released, [buffered]);
    let info = store.get(buffered).await.unwrap().unwrap();
    assert_eq!((info.status(), info.attempts), (JobStatus::Scheduled, 0));
}

/// A worker whose buffered job waited too long: the beat's hand-back of it is in flight (held
/// at the probe's release gate, and failing as a whole when it answers) while the worker
/// shuts down. The gate opens once every task waits, if `open` (the shutdown's own
/// hand-back passes it too); returns the shutdown's report and the buffered job.
async fn stop_during_a_hand_back(open: bool) -> (fairq_worker::ShutdownReport, JobId, Probe) {
    let gate = Arc::new(Semaphore::new(0));
    let store = Probe {
        release_gate: Some(Arc::clone(&gate)),
        ..Probe::new(MemoryBackend::new())
    };
    store.fail_releases.store(1, Ordering::SeqCst);
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (worker, _rx) = start(
        &store,
        QueueConfig::default()
            .concurrency(1)
            .prefetch(1)
            .prefetch_ttl(Duration::from_secs(1))
            .heartbeat_interval(Duration::from_secs(1))
            .lease(LEASE),
        stoppable(OnStop::Finish, &dropped),
    );
    let ids = enqueue(&store, "long", 2).await;
    until("one runs, one is buffered", || {
        worker.running() == 1 && store.claim_order().len() == 2
    })
    .await;
    // The beat at 1 s hands the buffered job back; the store has not answered.
    tokio::time::sleep(Duration::from_secs(1)).await;
    until("the hand-back is in flight", || {
        !store.calls().releases.is_empty()
    })
    .await;
    let buffered = store.calls().releases[0][0].id;
    assert!(ids.contains(&buffered));
    let shutdown = tokio::spawn(worker.shutdown(Duration::from_secs(10)));
    // Paused time moves once every task waits: the running job finished and was settled,
    // and the shutdown has done all it can without the hand-back's answer.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !shutdown.is_finished(),
        "the shutdown waits for the hand-back"
    );
    if open {
        gate.add_permits(10);
    }
    (shutdown.await.unwrap(), buffered, store)
}

/// A hand-back by the heartbeater that is in flight when the worker shuts down, and fails
/// after the shutdown's own hand-back began, is not lost: the shutdown waits for its answer
/// and hands the job back itself.
#[tokio::test(start_paused = true)]
async fn a_hand_back_in_flight_at_shutdown_that_fails_is_sent_again_by_the_shutdown() {
    let (report, buffered, store) = stop_during_a_hand_back(true).await;
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.released, [buffered]);
    let info = store.get(buffered).await.unwrap().unwrap();
    assert_eq!((info.status(), info.attempts), (JobStatus::Scheduled, 0));
}

/// A hand-back by the heartbeater that never answers before the shutdown ends leaves its job
/// to lease expiry, and the report says so.
#[tokio::test(start_paused = true)]
async fn a_hand_back_in_flight_at_shutdown_that_never_answers_is_reported() {
    let (report, buffered, store) = stop_during_a_hand_back(false).await;
    assert_eq!(report.left_claimed, [buffered], "{report:?}");
    assert!(!report.is_clean());
    assert_eq!(status(&store, buffered).await, JobStatus::Running);
}

/// A hand-back of an expired buffered job whose answer never comes (the store took the job)
/// neither stops nor delays the renewal of the job still running: each beat renews first,
/// the hand-back gets one interval, and the job is sent again at the next beat (the store's
/// refusal then checked against its record). The running job is never rescued.
#[tokio::test(start_paused = true)]
async fn a_hand_back_that_never_answers_delays_no_renewal() {
    const EVERY: Duration = Duration::from_secs(10);
    let clock = ManualClock::new(START);
    let store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    store.lose_release_answers.store(1, Ordering::SeqCst);
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let (on_error, seen) = errors();
    let (worker, mut rx) = start_with(
        &store,
        QueueConfig::default()
            .concurrency(1)
            .prefetch(1)
            .lease(LEASE)
            .heartbeat_interval(EVERY)
            .prefetch_ttl(Duration::from_secs(5))
            .rescue_interval(Duration::from_secs(3600)),
        gated(&gate, &started),
        |b| b.on_error(on_error),
    );
    let ids = enqueue(&store, "wait", 2).await;
    until("one runs, one is buffered", || {
        worker.running() == 1 && store.claim_order().len() == 2
    })
    .await;
    let running = started.lock().unwrap()[0];
    let buffered = ids.iter().copied().find(|id| *id != running).unwrap();
    let begun = tokio::time::Instant::now();
    // Five beats; the store's clock moves with them, well past the first lease.
    for beat in 1..=5u32 {
        tokio::time::sleep_until(begun + EVERY * beat + Duration::from_millis(1)).await;
        clock.advance(EVERY);
        let calls = store.calls();
        assert_eq!(
            calls.heartbeats.len(),
            beat as usize,
            "a renewal at every beat"
        );
        assert_eq!(
            calls
                .heartbeats
                .last()
                .unwrap()
                .iter()
                .map(|c| c.id)
                .collect::<Vec<_>>(),
            [running],
            "beat {beat}"
        );
        // The hand-back at the first beat, sent again once its interval passed.
        let releases: Vec<Vec<JobId>> = calls
            .releases
            .iter()
            .map(|r| r.iter().map(|c| c.id).collect())
            .collect();
        assert_eq!(releases, vec![vec![buffered]; beat.min(2) as usize]);
    }
    assert_eq!(
        store.rescue("q").await.unwrap(),
        0,
        "the running job's lease held"
    );
    let info = store.get(buffered).await.unwrap().unwrap();
    assert_eq!((info.status(), info.attempts), (JobStatus::Scheduled, 0));
    assert_eq!(
        seen.lock().unwrap().clone(),
        [(Operation::Release, None, false)],
        "the hand-back that did not answer in time, and nothing else"
    );
    gate.add_permits(10);
    assert_eq!(rx.recv().await.unwrap().job.claim.id, running);
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

/// A renewal the store's answer leaves out is reported (whether it landed is unknown), and
/// the lease is renewed again at the next beat rather than given up: the job is not rescued.
#[tokio::test(start_paused = true)]
async fn a_renewal_left_out_of_the_answer_is_reported_and_tried_again() {
    const EVERY: Duration = Duration::from_secs(10);
    let clock = ManualClock::new(START);
    let store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    store.short_heartbeats.store(1, Ordering::SeqCst);
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let (on_error, seen) = errors();
    let (worker, mut rx) = start_with(
        &store,
        QueueConfig::default()
            .concurrency(1)
            .prefetch(0)
            .lease(LEASE)
            .heartbeat_interval(EVERY)
            .rescue_interval(Duration::from_secs(3600)),
        gated(&gate, &started),
        |b| b.on_error(on_error),
    );
    let id = enqueue(&store, "wait", 1).await[0];
    until("running", || worker.running() == 1).await;
    let begun = tokio::time::Instant::now();
    // The first beat's answer leaves the job's renewal out.
    tokio::time::sleep_until(begun + EVERY + Duration::from_millis(1)).await;
    assert_eq!(store.calls().heartbeats.len(), 1);
    assert_eq!(
        seen.lock().unwrap().clone(),
        [(Operation::Heartbeat, Some(id), false)]
    );
    // The next beat renews it again; the store's clock goes past the first renewal's lease.
    clock.advance(Duration::from_secs(20));
    tokio::time::sleep_until(begun + EVERY * 2 + Duration::from_millis(1)).await;
    let beats = store.calls().heartbeats.clone();
    assert_eq!(beats.len(), 2);
    assert_eq!(beats[1].iter().map(|c| c.id).collect::<Vec<_>>(), [id]);
    clock.advance(Duration::from_secs(15));
    assert_eq!(store.rescue("q").await.unwrap(), 0, "the lease held");
    assert_eq!(seen.lock().unwrap().len(), 1, "{:?}", seen.lock().unwrap());
    gate.add_permits(1);
    assert_eq!(rx.recv().await.unwrap().outcome, JobOutcome::Succeeded);
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

/// An expired buffered job the store's answer to its hand-back leaves out is not dropped as
/// if handed back: it is reported and sent again at the next beat (the store took it, so
/// the refusal is checked against its record and not reported again).
#[tokio::test(start_paused = true)]
async fn an_expired_job_left_out_of_the_hand_back_answer_is_sent_again() {
    const EVERY: Duration = Duration::from_secs(10);
    let store = Probe::new(MemoryBackend::new());
    store.short_releases.store(1, Ordering::SeqCst);
    let (gate, started) = (Arc::new(Semaphore::new(0)), Arc::default());
    let (on_error, seen) = errors();
    let (worker, _rx) = start_with(
        &store,
        QueueConfig::default()
            .concurrency(1)
            .prefetch(1)
            .lease(LEASE)
            .heartbeat_interval(EVERY)
            .prefetch_ttl(Duration::from_secs(5)),
        gated(&gate, &started),
        |b| b.on_error(on_error),
    );
    enqueue(&store, "wait", 2).await;
    until("one runs, one is buffered", || {
        worker.running() == 1 && store.claim_order().len() == 2
    })
    .await;
    let begun = tokio::time::Instant::now();
    tokio::time::sleep_until(begun + EVERY + Duration::from_millis(1)).await;
    let buffered = store.calls().releases[0][0].id;
    assert_eq!(
        seen.lock().unwrap().clone(),
        [(Operation::Release, Some(buffered), false)]
    );
    tokio::time::sleep_until(begun + EVERY * 2 + Duration::from_millis(1)).await;
    let releases = store.calls().releases.clone();
    assert_eq!(releases.len(), 2, "sent again at the next beat");
    assert_eq!(
        releases[1].iter().map(|c| c.id).collect::<Vec<_>>(),
        [buffered]
    );
    assert_eq!(seen.lock().unwrap().len(), 1, "{:?}", seen.lock().unwrap());
    let info = store.get(buffered).await.unwrap().unwrap();
    assert_eq!((info.status(), info.attempts), (JobStatus::Scheduled, 0));
    gate.add_permits(10);
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn without_release_a_stopped_job_waits_for_its_lease() {
    let clock = ManualClock::new(START);
    let mut store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    store.no_release = true;
    let (report, id, _, dropped) = stop_one(&store, OnStop::Ignore).await;
    assert!(dropped);
    assert_eq!(report.abandoned, [id]);
    assert_eq!(report.left_claimed, [id]);
    assert_eq!(status(&store, id).await, JobStatus::Running);
    clock.advance(LEASE);
    assert_eq!(store.rescue("q").await.unwrap(), 1);
    let info = store.get(id).await.unwrap().unwrap();
    assert_eq!((info.status(), info.attempts), (JobStatus::Retrying, 1));
}

#[tokio::test(start_paused = true)]
async fn a_handler_past_its_timeout_is_dropped_and_its_attempt_fails() {
    let store = Probe::new(MemoryBackend::new());
    let (dropped_a, dropped_b) = (
        Arc::new(std::sync::atomic::AtomicBool::new(false)),
        Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let (a, b) = (Arc::clone(&dropped_a), Arc::clone(&dropped_b));
    let handlers = Handlers::new()
        .on("short-limit", move |_job: Job| {
            let flag = DropFlag(Arc::clone(&a));
            async move {
                let _flag = flag;
                std::future::pending::<Result<(), String>>().await
            }
        })
        .on("queue-limit", move |_job: Job| {
            let flag = DropFlag(Arc::clone(&b));
            async move {
                let _flag = flag;
                std::future::pending::<Result<(), String>>().await
            }
        });
    let (worker, mut rx) = start_with(
        &store,
        QueueConfig::default().timeout(Duration::from_secs(30)),
        handlers,
        |b| b.kind_timeout("short-limit", Duration::from_secs(2)),
    );
    let begun = tokio::time::Instant::now();
    let short = store
        .enqueue(NewJob::new("q", "short-limit", vec![]).retry(RetryPolicy::new(0)))
        .await
        .unwrap();
    let long = store
        .enqueue(NewJob::new("q", "queue-limit", vec![]).retry(RetryPolicy::new(0)))
        .await
        .unwrap();
    let first = rx.recv().await.unwrap();
    assert_eq!(first.job.claim.id, short);
    assert_eq!(begun.elapsed(), Duration::from_secs(2));
    assert!(dropped_a.load(Ordering::SeqCst), "the handler was dropped");
    assert_eq!(
        first.outcome,
        JobOutcome::Dead,
        "a timeout is a failed attempt"
    );
    assert_eq!(
        first.result.unwrap_err().message,
        "timed out after 2s: the handler was stopped"
    );
    let second = rx.recv().await.unwrap();
    assert_eq!(second.job.claim.id, long);
    assert_eq!(begun.elapsed(), Duration::from_secs(30));
    assert!(dropped_b.load(Ordering::SeqCst));
    let info = store.get(short).await.unwrap().unwrap();
    assert_eq!(info.attempts, 1);
    assert_eq!(
        info.last_error.as_deref(),
        Some("timed out after 2s: the handler was stopped")
    );
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

/// The next job report, failing the test if the worker fails first (or nothing comes within
/// a minute of paused time).
async fn next_unless_failed<B: Backend>(
    worker: &WorkerHandle<B>,
    rx: &mut mpsc::UnboundedReceiver<JobReport>,
) -> JobReport {
    let report = async {
        tokio::select! {
            biased;
            () = worker.failed() => panic!("the worker failed: {:?}", worker.task_failures()),
            report = rx.recv() => report.expect("worker running"),
        }
    };
    tokio::time::timeout(Duration::from_secs(60), report)
        .await
        .expect("a job was reported")
}

/// A handler whose future panics when it is dropped at its timeout fails its attempt as
/// timed out: the panic stays the handler's, and the worker's slot (and the worker) go on.
#[tokio::test(start_paused = true)]
async fn a_handler_that_panics_when_dropped_at_its_timeout_only_times_out() {
    struct PanicOnDrop;
    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            panic!("the handler's guard panicked while dropped");
        }
    }
    let store = Probe::new(MemoryBackend::new());
    let handlers = Handlers::new()
        .on("stuck", |_job: Job| async {
            let _guard = PanicOnDrop;
            std::future::pending::<Result<(), String>>().await
        })
        .on("ok", |_job: Job| async { Ok::<_, String>(()) });
    let (worker, mut rx) = start_with(
        &store,
        QueueConfig::default().concurrency(1),
        handlers,
        |b| b.kind_timeout("stuck", Duration::from_secs(1)),
    );
    let policy = RetryPolicy::new(3).with_delays([Duration::from_secs(60)]);
    let stuck = store
        .enqueue(NewJob::new("q", "stuck", vec![]).retry(policy))
        .await
        .unwrap();
    let report = next_unless_failed(&worker, &mut rx).await;
    assert_eq!(report.job.claim.id, stuck);
    assert!(
        matches!(report.outcome, JobOutcome::Retry { .. }),
        "{report:?}"
    );
    assert_eq!(
        report.result.unwrap_err().message,
        "timed out after 1s: the handler was stopped"
    );
    // The slot goes on with the next job.
    let ok = enqueue(&store, "ok", 1).await[0];
    let report = next_unless_failed(&worker, &mut rx).await;
    assert_eq!(
        (report.job.claim.id, report.outcome),
        (ok, JobOutcome::Succeeded)
    );
    assert!(worker.task_failures().is_empty());
    let report = worker.shutdown(Duration::from_secs(5)).await;
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn a_zero_timeout_is_refused() {
    let err = Worker::builder(MemoryBackend::new())
        .queue("q", QueueConfig::default())
        .kind_timeout("k", Duration::ZERO)
        .handle("k", |_job: Job| async { Ok::<_, String>(()) })
        .build()
        .unwrap_err();
    assert_eq!(err, fairq_worker::WorkerConfigError::ZeroTimeout);
    let err = Worker::builder(MemoryBackend::new())
        .queue("q", QueueConfig::default().timeout(Duration::ZERO))
        .handle("k", |_job: Job| async { Ok::<_, String>(()) })
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("timeout"), "{err}");
}

/// A handler that ignores the stop signal and reaches its timeout while the shutdown waits
/// has failed its attempt, as it would have without a shutdown: the attempt counts and the
/// failure is recorded, rather than the job being handed back as stopped by the shutdown.
#[tokio::test(start_paused = true)]
async fn a_timeout_during_shutdown_fails_the_attempt() {
    let store = Probe::new(MemoryBackend::new());
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (worker, mut rx) = start_with(
        &store,
        QueueConfig::default().lease(LEASE),
        stoppable(OnStop::Ignore, &dropped),
        |b| b.kind_timeout("long", Duration::from_secs(5)),
    );
    let policy = RetryPolicy::new(3).with_delays([Duration::from_secs(60)]);
    let id = store
        .enqueue(NewJob::new("q", "long", vec![]).retry(policy))
        .await
        .unwrap();
    until("started", || worker.running() == 1).await;
    let report = worker.shutdown(Duration::from_secs(30)).await;
    assert!(dropped.load(Ordering::SeqCst), "the handler was dropped");
    assert!(report.is_clean(), "{report:?}");
    assert!(report.released.is_empty() && report.abandoned.is_empty());
    let finished = rx.recv().await.unwrap();
    assert!(matches!(finished.outcome, JobOutcome::Retry { .. }));
    let info = store.get(id).await.unwrap().unwrap();
    assert_eq!((info.status(), info.attempts), (JobStatus::Retrying, 1));
    assert_eq!(
        info.last_error.as_deref(),
        Some("timed out after 5s: the handler was stopped")
    );
}

#[tokio::test(start_paused = true)]
async fn warming_up_readies_the_store_once_for_all_its_calls_and_reports_a_dead_store() {
    let store = Probe::new(MemoryBackend::new());
    enqueue(&store, "ok", 3).await;
    let worker = Worker::builder(store.clone())
        .queue("a", QueueConfig::default().settles_in_flight(2))
        .queue("b", QueueConfig::default().settles_in_flight(5))
        .handlers(gated(&Arc::new(Semaphore::new(0)), &Arc::default()))
        .build()
        .unwrap();
    worker.warm_up().await.unwrap();
    // Per queue a claim, a heartbeat, a rescue and its settlements in flight, and the two
    // queues share the store's connections: one call for (2 + 3) + (5 + 3).
    assert_eq!(store.calls().warm_ups, vec![13]);
    assert!(store.calls().claimed.is_empty(), "warming up claims no job");
    assert_eq!(store.inner.counts("q").scheduled, 3, "and changes none");

    // A store that cannot be reached answers here, before any task runs.
    store.fail_warm_ups.store(1, Ordering::SeqCst);
    let err = worker.warm_up().await.unwrap_err();
    assert!(err.to_string().contains("connection refused"), "{err}");
    assert!(store.calls().claimed.is_empty());
}

/// A queue configuration with every duration at `Duration::MAX`, the natural way to write
/// "never" or "as long as it takes"; the heartbeat interval, which must be shorter than the
/// lease, is left at its default, a third of it (still far more than an instant holds).
fn durations_at_max() -> QueueConfig {
    let max = Duration::MAX;
    QueueConfig::default()
        .lease(max)
        .poll_interval(max)
        .rescue_interval(max)
        .prefetch_ttl(max)
        .settle_window(max)
        .timeout(max)
        .retry_sweep(max)
}

/// Waits for `n` job reports, failing at once if a worker task panics meanwhile.
async fn reports_or_failure<B: Backend>(
    worker: &WorkerHandle<B>,
    rx: &mut mpsc::UnboundedReceiver<JobReport>,
    n: usize,
) -> Vec<JobReport> {
    tokio::select! {
        reports = recv_n(rx, n) => reports,
        () = worker.failed() => panic!("a worker task failed: {:?}", worker.task_failures()),
    }
}

#[tokio::test(start_paused = true)]
async fn durations_too_long_for_an_instant_run_jobs_and_shut_down() {
    // An instant `Duration::MAX` away does not exist: the worker used to panic in its acker
    // (the lease), its heartbeater (the interval) and in `shutdown` (the deadline).
    let store = MemoryBackend::new();
    let max = Duration::MAX;
    let (worker, mut rx) = start_with(
        &store,
        durations_at_max().concurrency(2),
        gated(&Arc::new(Semaphore::new(0)), &Arc::default()),
        |b| {
            b.slow_after(max)
                .kind_timeout("ok", max)
                .error_backoff(max, max)
                .shutdown_timeout(max)
        },
    );
    let ids = enqueue(&store, "ok", 3).await;
    let reports = reports_or_failure(&worker, &mut rx, 3).await;
    assert!(reports.iter().all(|r| r.outcome == JobOutcome::Succeeded));
    for id in ids {
        assert_eq!(status(&store, id).await, JobStatus::Succeeded);
    }
    let report = worker.shutdown(max).await;
    assert!(report.is_clean(), "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn a_failed_settlement_waits_out_an_endless_backoff_then_settles() {
    let store = Probe::new(MemoryBackend::new());
    store.fail_settles.store(1, Ordering::SeqCst);
    let (on_error, seen) = errors();
    let (worker, mut rx) = start_with(
        &store,
        durations_at_max().concurrency(1).prefetch(0),
        gated(&Arc::new(Semaphore::new(0)), &Arc::default()),
        |b| {
            b.on_error(on_error)
                .error_backoff(Duration::MAX, Duration::MAX)
        },
    );
    let ids = enqueue(&store, "ok", 1).await;
    // The paused clock runs through the backoff (capped at about 30 years) at once.
    let reports = reports_or_failure(&worker, &mut rx, 1).await;
    assert_eq!(reports[0].outcome, JobOutcome::Succeeded);
    assert_eq!(status(&store, ids[0]).await, JobStatus::Succeeded);
    assert_eq!(
        store.calls().settles.len(),
        2,
        "the failed call, then the retry"
    );
    assert_eq!(
        seen.lock().unwrap().clone(),
        [(Operation::Settle, None, false)]
    );
    assert!(worker.shutdown(Duration::MAX).await.is_clean());
}
