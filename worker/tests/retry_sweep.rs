//! The worker's retry sweep and health hooks on the in-memory store, on tokio's paused clock
//! and a manual store clock. (The main sweep scenario runs for every store that can hold
//! retries: `conformance::sweep`, expanded in `memory_conformance.rs` and the file store's
//! tests.)

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Probe;
use fairq_core::health::{Health, HealthPolicy};
use fairq_core::job::{Millis, State};
use fairq_core::retry::RetryPolicy;
use fairq_worker::{
    Backend, Clock, Failure, HealthChange, Job, JobId, JobOutcome, JobReport, ManualClock,
    MemoryBackend, NewJob, Operation, QueueConfig, Worker, WorkerError,
};
use tokio::sync::mpsc;

const START: Millis = 1_700_000_000_000;
const LEASE: Duration = Duration::from_secs(30);
const SWEEP: Duration = Duration::from_secs(10);

/// Enqueues one job per payload and fails each first attempt: each waits for a retry 1 s
/// later.
async fn retrying(store: &impl Backend, queue: &str, payloads: &[&str]) -> Vec<JobId> {
    let policy = RetryPolicy::new(5).with_delays([Duration::from_secs(1)]);
    let mut ids = Vec::new();
    for p in payloads {
        let job = NewJob::new(queue, "call", p.as_bytes().to_vec()).retry(policy.clone());
        ids.push(store.enqueue(job).await.unwrap());
    }
    for _ in payloads {
        let job = store.claim(queue, 1, LEASE).await.unwrap().remove(0);
        store.fail(&job, Failure::retryable("down")).await.unwrap();
    }
    ids
}

/// A handler for kind `call` that fails the payloads in `failing`, and `fresh` jobs that
/// succeed.
fn handlers(failing: &Arc<Mutex<Vec<String>>>) -> fairq_worker::Handlers {
    let failing = Arc::clone(failing);
    fairq_worker::Handlers::new()
        .on("call", move |job: Job| {
            let p = String::from_utf8_lossy(&job.payload).into_owned();
            let fails = failing.lock().unwrap().contains(&p);
            async move {
                if fails {
                    Err(format!("{p}: down"))
                } else {
                    Ok(())
                }
            }
        })
        .on("fresh", |_job: Job| async { Ok::<_, String>(()) })
}

fn reporter() -> (
    impl Fn(&JobReport) + Send + Sync + 'static,
    mpsc::UnboundedReceiver<JobReport>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    (move |r: &JobReport| drop(tx.send(r.clone())), rx)
}

async fn state(store: &impl Backend, id: JobId) -> State {
    store.get(id).await.unwrap().unwrap().state
}

/// Retries already claimed ahead of a free slot when a retry fails again are handed back and
/// wait for the next sweep too; only the failed one ran.
#[tokio::test(start_paused = true)]
async fn buffered_retries_are_handed_back_and_held() {
    let clock = ManualClock::new(START);
    let store = Arc::new(MemoryBackend::with_clock(clock.clone()));
    let ids = retrying(&*store, "q", &["bad", "r2", "r3"]).await;
    clock.advance(Duration::from_secs(1));
    let failing = Arc::new(Mutex::new(vec!["bad".to_string()]));
    let (hook, mut rx) = reporter();
    let worker = Worker::builder(Arc::clone(&store))
        .queue(
            "q",
            QueueConfig::default()
                .concurrency(1)
                .prefetch(2)
                .retry_sweep(SWEEP),
        )
        .handlers(handlers(&failing))
        .clock(clock.clone())
        .on_finished(hook)
        .build()
        .unwrap()
        .start()
        .unwrap();
    let report = rx.recv().await.unwrap();
    assert_eq!(report.job.claim.id, ids[0]);
    let until = clock.now() + SWEEP.as_millis() as u64;
    for id in &ids {
        assert_eq!(state(&*store, *id).await, State::Retrying { run_at: until });
    }
    // Handed back without counting an attempt: each has the one failed first attempt.
    assert_eq!(store.get(ids[1]).await.unwrap().unwrap().attempts, 1);
    // A new job runs (and is the only thing that does) while the retries wait.
    let fresh = store
        .enqueue(NewJob::new("q", "fresh", vec![]))
        .await
        .unwrap();
    assert_eq!(rx.recv().await.unwrap().job.claim.id, fresh);
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

/// Buffered retries the sweep handed back, whose answer had not come when the shutdown
/// deadline passed, are handed back again by the shutdown; the store refuses them because
/// the first hand-back did land, and the report says they were handed back (not left
/// claimed), without an error.
#[tokio::test(start_paused = true)]
async fn retries_whose_hand_back_lost_its_answer_are_reported_released_at_shutdown() {
    let clock = ManualClock::new(START);
    let store = Arc::new(Probe::new(MemoryBackend::with_clock(clock.clone())));
    store
        .lose_release_answers
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let ids = retrying(&*store, "q", &["bad", "r2", "r3"]).await;
    clock.advance(Duration::from_secs(1));
    let failing = Arc::new(Mutex::new(vec!["bad".to_string()]));
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = Arc::clone(&errors);
    let worker = Worker::builder(Arc::clone(&store))
        .queue(
            "q",
            QueueConfig::default()
                .concurrency(1)
                .prefetch(2)
                .retry_sweep(SWEEP),
        )
        .handlers(handlers(&failing))
        .clock(clock.clone())
        .on_error(move |e: &WorkerError| seen.lock().unwrap().push(e.to_string()))
        .build()
        .unwrap()
        .start()
        .unwrap();
    // The failed retry stopped the sweep, and the hand-back of the two buffered retries
    // landed in the store; its answer never comes.
    common::until("handed back", || !store.calls().releases.is_empty()).await;
    assert_eq!(
        store.calls().releases[0]
            .iter()
            .map(|c| c.id)
            .collect::<Vec<_>>(),
        ids[1..]
    );
    assert_eq!(
        state(&*store, ids[1]).await,
        State::Retrying {
            run_at: clock.now()
        }
    );
    let report = worker.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report.released, ids[1..], "{report:?}");
    assert!(report.is_clean(), "{report:?}");
    assert!(
        errors.lock().unwrap().is_empty(),
        "{:?}",
        errors.lock().unwrap()
    );
    for id in &ids[1..] {
        let info = store.get(*id).await.unwrap().unwrap();
        assert_eq!(info.attempts, 1, "handed back, the attempt not counted");
    }
}

/// Store errors passed to `on_error`: the operation, and the job if one.
type Reported = Arc<Mutex<Vec<(Operation, Option<JobId>)>>>;

/// A store whose calls the tests watch and steer, over a memory store on `clock`, with holds
/// of retries that answer at once (the gate has room for them all).
fn gated_probe(clock: &ManualClock) -> Probe {
    Probe {
        hold_gate: Some(Arc::new(tokio::sync::Semaphore::new(100))),
        ..Probe::new(MemoryBackend::with_clock(clock.clone()))
    }
}

/// Starts the worker of the tests of a sweep's hand-back: queue `q` with one slot, two jobs
/// prefetched, lease `LEASE` and sweep `SWEEP` (then changed by `config`), on `clock`. The
/// errors it reports (operation and job) go to the list returned, finished jobs to the
/// receiver.
fn start_sweeping(
    store: &Probe,
    clock: &ManualClock,
    handlers: fairq_worker::Handlers,
    config: impl FnOnce(QueueConfig) -> QueueConfig,
) -> (
    fairq_worker::WorkerHandle<Probe>,
    Reported,
    mpsc::UnboundedReceiver<JobReport>,
) {
    let errors: Reported = Arc::default();
    let seen = Arc::clone(&errors);
    let (hook, rx) = reporter();
    let worker = Worker::builder(store.clone())
        .queue(
            "q",
            config(
                QueueConfig::default()
                    .concurrency(1)
                    .prefetch(2)
                    .lease(LEASE)
                    .retry_sweep(SWEEP),
            ),
        )
        .handlers(handlers)
        .clock(clock.clone())
        .on_error(move |e: &WorkerError| seen.lock().unwrap().push((e.operation, e.job)))
        .on_finished(hook)
        .build()
        .unwrap()
        .start()
        .unwrap();
    (worker, errors, rx)
}

/// Buffered retries whose hand-back by the sweep failed as a whole, after the store had taken
/// them back (the answer was lost), are not run here under their old leases: they wait for
/// the next sweep in the store, the next beat sends the hand-back again (and reads the
/// records when the store refuses it), and each runs once, under a lease of its own.
#[tokio::test(start_paused = true)]
async fn retries_whose_sweep_hand_back_failed_as_a_whole_are_not_run_here() {
    let clock = ManualClock::new(START);
    let store = gated_probe(&clock);
    store
        .apply_then_fail_releases
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let ids = retrying(&store, "q", &["bad", "r2", "r3"]).await;
    clock.advance(Duration::from_secs(1));
    // Each run, and whether the store held the job under that run's lease meanwhile.
    let ran: Arc<Mutex<Vec<(JobId, bool)>>> = Arc::default();
    // The downstream service `bad` calls is down until the next sweep.
    let down = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (runs, inner, is_down) = (Arc::clone(&ran), store.inner.clone(), Arc::clone(&down));
    let handlers = fairq_worker::Handlers::new().on("call", move |job: Job| {
        let (runs, inner) = (Arc::clone(&runs), inner.clone());
        let fails = job.payload == b"bad" && is_down.load(std::sync::atomic::Ordering::SeqCst);
        async move {
            let state = inner.get(job.claim.id).await.unwrap().unwrap().state;
            let held = matches!(state, State::Running { lease } if lease.token == job.claim.token);
            runs.lock().unwrap().push((job.claim.id, held));
            if fails {
                Err("bad: down".to_string())
            } else {
                Ok(())
            }
        }
    });
    let (worker, errors, mut rx) = start_sweeping(&store, &clock, handlers, |c| c);
    let failed = rx.recv().await.unwrap();
    assert_eq!(failed.job.claim.id, ids[0]);
    let until = clock.now() + SWEEP.as_millis() as u64;
    // Past the first beat (a third of the lease), which sends the hand-back again.
    tokio::time::sleep(LEASE / 3 + Duration::from_secs(1)).await;
    assert_eq!(
        ran.lock().unwrap().clone(),
        [(ids[0], true)],
        "only the failed retry ran: the others were handed back"
    );
    assert_eq!(store.calls().releases.len(), 2, "the hand-back, sent again");
    for id in &ids[1..] {
        let info = store.get(*id).await.unwrap().unwrap();
        assert_eq!(info.state, State::Retrying { run_at: until });
        assert_eq!(info.attempts, 1, "handed back, the attempt not counted");
    }
    assert!(rx.try_recv().is_err(), "nothing else ran");
    // The next sweep, with the service back: each retry runs once more.
    down.store(false, std::sync::atomic::Ordering::SeqCst);
    clock.advance(SWEEP);
    let mut rest: Vec<(JobId, JobOutcome)> = Vec::new();
    for _ in 0..3 {
        let r = rx.recv().await.unwrap();
        rest.push((r.job.claim.id, r.outcome));
    }
    rest.sort_by_key(|(id, _)| *id);
    let succeeded: Vec<_> = ids.iter().map(|id| (*id, JobOutcome::Succeeded)).collect();
    assert_eq!(rest, succeeded);
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
    let mut ran = ran.lock().unwrap().clone();
    ran.sort();
    assert_eq!(
        ran,
        [
            (ids[0], true),
            (ids[0], true),
            (ids[1], true),
            (ids[2], true)
        ],
        "the failed retry twice, the others once, each under its own lease"
    );
    assert_eq!(
        errors.lock().unwrap().clone(),
        [(Operation::Release, None)],
        "the failed hand-back alone is reported"
    );
}

/// Retries whose sweep hand-back failed as a whole, after the store had taken them back, and
/// that a shutdown hands back before the next beat sends them again: the store refuses them,
/// their records show the first hand-back landed, and the report says they were handed back,
/// with no error beyond the failed call.
#[tokio::test(start_paused = true)]
async fn retries_whose_sweep_hand_back_failed_as_a_whole_are_reported_released_at_shutdown() {
    let clock = ManualClock::new(START);
    let store = gated_probe(&clock);
    store
        .apply_then_fail_releases
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let ids = retrying(&store, "q", &["bad", "r2", "r3"]).await;
    clock.advance(Duration::from_secs(1));
    let failing = Arc::new(Mutex::new(vec!["bad".to_string()]));
    let (worker, errors, mut rx) = start_sweeping(&store, &clock, handlers(&failing), |c| c);
    assert_eq!(rx.recv().await.unwrap().job.claim.id, ids[0]);
    let report = worker.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report.released, ids[1..], "{report:?}");
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(errors.lock().unwrap().clone(), [(Operation::Release, None)]);
    assert!(rx.try_recv().is_err(), "the retries did not run here");
    for id in &ids[1..] {
        let info = store.get(*id).await.unwrap().unwrap();
        assert_eq!(info.attempts, 1, "handed back, the attempt not counted");
    }
}

/// A hand-back of buffered retries, or a hold of the queue's retries, that the store never
/// answers stalls the queue (its claims wait for the sweep's verdict, and its acker for the
/// hold) for one heartbeat interval at most: the call is dropped and reported, the failed
/// retry's outcome is reported, and a new job runs.
#[tokio::test(start_paused = true)]
async fn a_sweep_call_that_never_answers_stalls_the_queue_one_beat_at_most() {
    const EVERY: Duration = Duration::from_secs(10);
    for lost_release in [true, false] {
        let clock = ManualClock::new(START);
        let store = Probe {
            // Holds answer at once unless it is the hold that never answers.
            hold_gate: Some(Arc::new(tokio::sync::Semaphore::new(if lost_release {
                100
            } else {
                0
            }))),
            ..Probe::new(MemoryBackend::with_clock(clock.clone()))
        };
        if lost_release {
            store
                .lose_release_answers
                .store(1, std::sync::atomic::Ordering::SeqCst);
        }
        let ids = retrying(&store, "q", &["bad", "r2", "r3"]).await;
        clock.advance(Duration::from_secs(1));
        let failing = Arc::new(Mutex::new(vec!["bad".to_string()]));
        let (worker, errors, mut rx) = start_sweeping(&store, &clock, handlers(&failing), |c| {
            c.heartbeat_interval(EVERY)
        });
        let begun = tokio::time::Instant::now();
        let first = tokio::time::timeout(Duration::from_secs(600), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("lost release {lost_release}: no outcome in 10 minutes"))
            .unwrap();
        assert_eq!(first.job.claim.id, ids[0]);
        assert!(
            begun.elapsed() <= EVERY + Duration::from_secs(1),
            "{:?}",
            begun.elapsed()
        );
        let stalled = if lost_release {
            Operation::Release
        } else {
            Operation::HoldRetries
        };
        assert_eq!(errors.lock().unwrap().clone(), [(stalled, None)]);
        // Claims go on: a new job runs at once (after the retries, when the hold was not
        // made and they are due).
        let fresh = store
            .enqueue(NewJob::new("q", "fresh", vec![]))
            .await
            .unwrap();
        let outcome = tokio::time::timeout(Duration::from_secs(1), async {
            loop {
                let r = rx.recv().await.unwrap();
                if r.job.claim.id == fresh {
                    return r.outcome;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("lost release {lost_release}: the new job did not run"));
        assert_eq!(outcome, JobOutcome::Succeeded);
        worker.shutdown(Duration::from_secs(1)).await;
        if lost_release {
            // The store took the retries back; they were not run here.
            for id in &ids[1..] {
                assert_eq!(store.get(*id).await.unwrap().unwrap().attempts, 1);
            }
        }
    }
}

/// A retry the store's answer to the sweep's hand-back leaves out is not taken as handed back:
/// it is reported and sent again at the next beat (where the store's refusal, since it did
/// take the job, is checked against its record and not reported); it never runs here.
#[tokio::test(start_paused = true)]
async fn a_retry_left_out_of_the_hand_back_answer_is_sent_again() {
    let clock = ManualClock::new(START);
    let store = gated_probe(&clock);
    store
        .short_releases
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let ids = retrying(&store, "q", &["bad", "r2", "r3"]).await;
    clock.advance(Duration::from_secs(1));
    let failing = Arc::new(Mutex::new(vec!["bad".to_string()]));
    let (worker, errors, mut rx) = start_sweeping(&store, &clock, handlers(&failing), |c| c);
    assert_eq!(rx.recv().await.unwrap().job.claim.id, ids[0]);
    let until = clock.now() + SWEEP.as_millis() as u64;
    let left_out = store.calls().releases[0].last().unwrap().id;
    assert!(ids[1..].contains(&left_out));
    assert_eq!(
        errors.lock().unwrap().clone(),
        [(Operation::Release, Some(left_out))]
    );
    // Past the first beat (a third of the lease): the left-out retry is sent again.
    tokio::time::sleep(LEASE / 3 + Duration::from_secs(1)).await;
    let releases = store.calls().releases.clone();
    assert_eq!(releases.len(), 2);
    assert_eq!(
        releases[1].iter().map(|c| c.id).collect::<Vec<_>>(),
        [left_out]
    );
    assert_eq!(
        errors.lock().unwrap().len(),
        1,
        "{:?}",
        errors.lock().unwrap()
    );
    let info = store.get(left_out).await.unwrap().unwrap();
    assert_eq!(
        (info.state, info.attempts),
        (State::Retrying { run_at: until }, 1)
    );
    assert!(rx.try_recv().is_err(), "nothing else ran");
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

/// With `sweep_holds_new_jobs`, a stopped sweep holds every job of the queue back until the
/// next sweep, new ones included.
#[tokio::test(start_paused = true)]
async fn a_stopped_sweep_can_hold_new_jobs_too() {
    let clock = ManualClock::new(START);
    let store = Arc::new(MemoryBackend::with_clock(clock.clone()));
    let ids = retrying(&*store, "q", &["bad"]).await;
    clock.advance(Duration::from_secs(1));
    let failing = Arc::new(Mutex::new(vec!["bad".to_string()]));
    let (hook, mut rx) = reporter();
    let worker = Worker::builder(Arc::clone(&store))
        .queue(
            "q",
            QueueConfig::default()
                .concurrency(1)
                .poll_interval(Duration::from_millis(50))
                .retry_sweep(SWEEP)
                .sweep_holds_new_jobs(true),
        )
        .handlers(handlers(&failing))
        .clock(clock.clone())
        .on_finished(hook)
        .build()
        .unwrap()
        .start()
        .unwrap();
    assert_eq!(rx.recv().await.unwrap().job.claim.id, ids[0]);
    let fresh = store
        .enqueue(NewJob::new("q", "fresh", vec![]))
        .await
        .unwrap();
    // Many poll intervals pass on tokio's paused clock (timers fire only once every task is
    // idle, so the claimer has looked again each time): the new job is still waiting.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(rx.try_recv().is_err(), "nothing ran during the hold");
    assert!(matches!(
        state(&*store, fresh).await,
        State::Scheduled { .. }
    ));
    assert!(
        worker.health_report()[0]
            .retry_sweep
            .unwrap()
            .holds_new_jobs
    );
    // The next sweep: both run.
    failing.lock().unwrap().clear();
    clock.advance(SWEEP);
    let mut ran = vec![
        rx.recv().await.unwrap().job.claim.id,
        rx.recv().await.unwrap().job.claim.id,
    ];
    ran.sort_unstable();
    assert_eq!(ran, [ids[0], fresh]);
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

/// A stopped sweep that holds new jobs ends at the next sweep even when the claimer was
/// waiting for a free slot as the sweep stopped (no prefetch: the failed retry filled the
/// only slot, so no claim came back short and no poll was due).
#[tokio::test(start_paused = true)]
async fn a_hold_that_began_while_the_claimer_waited_for_room_ends() {
    let clock = ManualClock::new(START);
    let store = Arc::new(MemoryBackend::with_clock(clock.clone()));
    let ids = retrying(&*store, "q", &["bad"]).await;
    clock.advance(Duration::from_secs(1));
    let failing = Arc::new(Mutex::new(vec!["bad".to_string()]));
    let (hook, mut rx) = reporter();
    let worker = Worker::builder(Arc::clone(&store))
        .queue(
            "q",
            QueueConfig::default()
                .concurrency(1)
                .prefetch(0)
                .poll_interval(Duration::from_millis(50))
                .retry_sweep(SWEEP)
                .sweep_holds_new_jobs(true),
        )
        .handlers(handlers(&failing))
        .clock(clock.clone())
        .on_finished(hook)
        .build()
        .unwrap()
        .start()
        .unwrap();
    assert_eq!(rx.recv().await.unwrap().job.claim.id, ids[0]);
    let fresh = store
        .enqueue(NewJob::new("q", "fresh", vec![]))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(rx.try_recv().is_err(), "nothing ran during the hold");
    // The next sweep: both run.
    failing.lock().unwrap().clear();
    clock.advance(SWEEP);
    let mut ran = Vec::new();
    for _ in 0..2 {
        let report = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("the hold ended at the next sweep")
            .unwrap();
        ran.push(report.job.claim.id);
    }
    ran.sort_unstable();
    assert_eq!(ran, [ids[0], fresh]);
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

/// On a store that cannot hold retries back, the worker says so (in its health report and
/// once in the log, not through `on_error`) and carries on: retries run on their own
/// backoff.
#[tokio::test(start_paused = true)]
async fn a_store_that_cannot_hold_retries_degrades_gracefully() {
    let clock = ManualClock::new(START);
    let store = Arc::new(Probe::new(MemoryBackend::with_clock(clock.clone())));
    let ids = retrying(&*store, "q", &["bad", "next"]).await;
    clock.advance(Duration::from_secs(1));
    let failing = Arc::new(Mutex::new(vec!["bad".to_string()]));
    let (hook, mut rx) = reporter();
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = Arc::clone(&errors);
    let worker = Worker::builder(Arc::clone(&store))
        .queue(
            "q",
            QueueConfig::default()
                .concurrency(1)
                .prefetch(0)
                .retry_sweep(SWEEP),
        )
        .handlers(handlers(&failing))
        .clock(clock.clone())
        .on_finished(hook)
        .on_error(move |e: &WorkerError| seen.lock().unwrap().push(e.to_string()))
        .build()
        .unwrap()
        .start()
        .unwrap();
    let mut ran = [rx.recv().await.unwrap(), rx.recv().await.unwrap()];
    ran.sort_by_key(|r| r.job.claim.id);
    assert_eq!(ran[0].job.claim.id, ids[0]);
    assert!(ran[0].result.is_err());
    assert_eq!(
        (ran[1].job.claim.id, ran[1].outcome),
        (ids[1], JobOutcome::Succeeded),
        "the next retry was not held"
    );
    let sweep = worker.health_report()[0].retry_sweep.unwrap();
    assert!(!sweep.store_holds);
    assert_eq!(
        sweep.stops, 1,
        "the sweep still stopped, in the worker's view"
    );
    assert!(
        errors.lock().unwrap().is_empty(),
        "{:?}",
        errors.lock().unwrap()
    );
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

/// `on_unhealthy` and `on_recovered` are called once per change of a queue's health, not
/// once per failed job; other queues are judged on their own.
#[tokio::test(start_paused = true)]
async fn health_hooks_fire_once_per_change() {
    let clock = ManualClock::new(START);
    let store = Arc::new(MemoryBackend::with_clock(clock.clone()));
    let failing = Arc::new(Mutex::new(vec!["bad".to_string()]));
    let (hook, mut rx) = reporter();
    let (changes_tx, mut changes) = mpsc::unbounded_channel::<(bool, HealthChange)>();
    let recovered_tx = changes_tx.clone();
    let worker = Worker::builder(Arc::clone(&store))
        .queue("q", QueueConfig::default().concurrency(1))
        .queue("calm", QueueConfig::default())
        .handlers(handlers(&failing))
        .clock(clock.clone())
        .health_policy(
            HealthPolicy::default()
                .with_allowed_error_time(Duration::ZERO)
                .with_startup_grace(Duration::ZERO),
        )
        .on_finished(hook)
        .on_unhealthy(move |c| drop(changes_tx.send((false, c.clone()))))
        .on_recovered(move |c| drop(recovered_tx.send((true, c.clone()))))
        .build()
        .unwrap()
        .start()
        .unwrap();
    let bad = || NewJob::new("q", "call", b"bad".to_vec()).retry(RetryPolicy::new(0));
    store.enqueue_many(vec![bad(), bad(), bad()]).await.unwrap();
    for _ in 0..3 {
        assert!(rx.recv().await.unwrap().result.is_err());
    }
    let (healthy, change) = changes.recv().await.unwrap();
    assert!(!healthy);
    assert_eq!(change.queue, "q");
    assert_eq!(change.health, Health::Unhealthy { since: START });
    // A success: recovered. Its hook is the next change, so the three failures made one.
    store
        .enqueue(NewJob::new("q", "fresh", vec![]))
        .await
        .unwrap();
    rx.recv().await.unwrap();
    let (healthy, change) = changes.recv().await.unwrap();
    assert!(healthy, "{change:?}");
    assert_eq!(change.health, Health::Healthy);
    // Failing again: unhealthy again.
    store.enqueue(bad()).await.unwrap();
    rx.recv().await.unwrap();
    assert!(!changes.recv().await.unwrap().0);
    assert!(!worker.is_healthy());
    assert_eq!(worker.health("calm"), Some(Health::Healthy));
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
    assert!(changes.try_recv().is_err(), "no other change was reported");
}
