//! Worker behaviour on the in-memory store. Tests run on tokio's paused clock: timers fire
//! in virtual time as soon as every task is idle, so waits are deterministic and instant.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Probe;
use fairq_core::health::{Health, HealthPolicy};
use fairq_core::job::Millis;
use fairq_core::retry::RetryPolicy;
use fairq_worker::{
    Backend, Clock, Handlers, Job, JobOutcome, JobReport, JobStatus, ManualClock, MemoryBackend,
    NewJob, Operation, QueueConfig, Worker, WorkerConfigError, WorkerError,
};
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

const START: Millis = 1_700_000_000_000;

fn ok_handler() -> Handlers {
    Handlers::new().on("ok", |_job: Job| async { Ok::<_, String>(()) })
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

/// Reported worker errors: operation, transient, stale lease.
type Seen = Arc<Mutex<Vec<(Operation, bool, bool)>>>;

fn errors() -> (impl Fn(&WorkerError) + Send + Sync + 'static, Seen) {
    let seen: Seen = Arc::default();
    let sink = Arc::clone(&seen);
    (
        move |e: &WorkerError| {
            sink.lock().unwrap().push((
                e.operation,
                e.source.is_transient(),
                e.source.is_stale_lease(),
            ));
        },
        seen,
    )
}

#[test]
fn configuration_errors_are_typed() {
    let err = Worker::builder(MemoryBackend::new())
        .handlers(ok_handler())
        .build()
        .unwrap_err();
    assert_eq!(err, WorkerConfigError::NoQueues);
    let err = Worker::builder(MemoryBackend::new())
        .queue("q", QueueConfig::default())
        .build()
        .unwrap_err();
    assert_eq!(err, WorkerConfigError::NoHandlers);
    let err = Worker::builder(MemoryBackend::new())
        .queue("q", QueueConfig::default().lease(Duration::ZERO))
        .handlers(ok_handler())
        .build()
        .unwrap_err();
    assert!(matches!(err, WorkerConfigError::Queue { ref queue, .. } if queue == "q"));
    assert!(err.to_string().contains("lease"));
    // A name no job can have is refused before the worker starts, not by every claim.
    for (name, why) in [
        (String::new(), "empty"),
        ("a\0b".to_owned(), "NUL"),
        ("q".repeat(256), "255 bytes"),
    ] {
        let err = Worker::builder(MemoryBackend::new())
            .queue(name.clone(), QueueConfig::default())
            .handlers(ok_handler())
            .build()
            .unwrap_err();
        assert!(matches!(err, WorkerConfigError::Queue { ref queue, .. } if *queue == name));
        assert!(err.to_string().contains(why), "{err}");
    }
}

/// A heartbeat interval at or past the lease would let a running job's lease expire between
/// two beats (and another worker rescue and run it again): refused when the worker is built.
#[test]
fn a_heartbeat_interval_at_or_past_the_lease_is_refused() {
    let lease = Duration::from_secs(30);
    let build = |every: Option<Duration>| {
        let mut config = QueueConfig::default().lease(lease);
        if let Some(every) = every {
            config = config.heartbeat_interval(every);
        }
        Worker::builder(MemoryBackend::new())
            .queue("q", config)
            .handlers(ok_handler())
            .build()
            .map(drop)
    };
    for every in [lease, lease * 2, Duration::MAX] {
        let err = build(Some(every)).unwrap_err();
        assert!(
            matches!(err, WorkerConfigError::Queue { ref queue, .. } if queue == "q"),
            "{every:?}: {err:?}"
        );
        assert!(err.to_string().contains("heartbeat interval"), "{err}");
    }
    for every in [
        None,
        Some(lease / 2),
        Some(lease - Duration::from_millis(1)),
    ] {
        build(every).unwrap_or_else(|err| panic!("{every:?}: {err}"));
    }
}

/// An error backoff starting at zero never grows (0 × 2 = 0): a store that is down would be
/// called in a hot loop. It is refused when the worker is built, as is a minimum above the
/// maximum; equal bounds (a fixed delay) are fine.
#[test]
fn an_error_backoff_from_zero_or_upside_down_is_refused() {
    let build = |min: Duration, max: Duration| {
        Worker::builder(MemoryBackend::new())
            .queue("q", QueueConfig::default())
            .handlers(ok_handler())
            .error_backoff(min, max)
            .build()
            .map(drop)
    };
    let ms = Duration::from_millis;
    for (min, max) in [(ms(0), ms(30_000)), (ms(0), ms(0)), (ms(200), ms(100))] {
        let err = build(min, max).unwrap_err();
        assert!(
            matches!(err, WorkerConfigError::ErrorBackoff { .. }),
            "{min:?}..{max:?}: {err:?}"
        );
        assert!(err.to_string().contains("minimum delay"), "{err}");
    }
    for (min, max) in [
        (ms(1), ms(1)),
        (ms(100), ms(30_000)),
        (Duration::MAX, Duration::MAX),
    ] {
        build(min, max).unwrap_or_else(|err| panic!("{min:?}..{max:?}: {err}"));
    }
}

#[tokio::test(start_paused = true)]
async fn wakes_on_enqueue_without_polling() {
    let store = Arc::new(MemoryBackend::new());
    let (hook, mut rx) = reporter();
    let worker = Worker::builder(Arc::clone(&store))
        .queue(
            "q",
            QueueConfig::default().poll_interval(Duration::from_secs(3600)),
        )
        .handlers(ok_handler())
        .on_finished(hook)
        .build()
        .unwrap()
        .start()
        .unwrap();
    // Let the worker reach its wait.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = Instant::now();
    store.enqueue(NewJob::new("q", "ok", vec![])).await.unwrap();
    let report = rx.recv().await.unwrap();
    assert_eq!(report.outcome, JobOutcome::Succeeded);
    assert!(
        before.elapsed() < Duration::from_secs(1),
        "woken by the enqueue, not by the hour-long poll: {:?}",
        before.elapsed()
    );
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn respects_concurrency() {
    let store = Arc::new(MemoryBackend::new());
    let gate = Arc::new(Semaphore::new(0));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (g, f, p) = (Arc::clone(&gate), Arc::clone(&in_flight), Arc::clone(&peak));
    let handlers = Handlers::new().on("wait", move |_job: Job| {
        let (gate, in_flight, peak) = (Arc::clone(&g), Arc::clone(&f), Arc::clone(&p));
        async move {
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            gate.acquire().await.map_err(|e| e.to_string())?.forget();
            in_flight.fetch_sub(1, Ordering::SeqCst);
            Ok::<_, String>(())
        }
    });
    let (hook, mut rx) = reporter();
    let worker = Worker::builder(Arc::clone(&store))
        .queue("q", QueueConfig::default().concurrency(3).prefetch(0))
        .handlers(handlers)
        .on_finished(hook)
        .build()
        .unwrap()
        .start()
        .unwrap();
    store
        .enqueue_many((0..10).map(|_| NewJob::new("q", "wait", vec![])).collect())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(in_flight.load(Ordering::SeqCst), 3);
    assert_eq!(store.counts("q").running, 3, "claims stop at free capacity");
    assert_eq!(worker.running(), 3);
    gate.add_permits(10);
    for _ in 0..10 {
        rx.recv().await.unwrap();
    }
    assert_eq!(peak.load(Ordering::SeqCst), 3);
    assert_eq!(store.counts("q").succeeded, 10);
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

/// A store call that panics (a bug in a custom store) fails like a store error: reported,
/// retried with backoff, and the queue goes on claiming and settling. Before, the panic
/// ended the task that made the call and the queue stopped without a word.
#[tokio::test(start_paused = true)]
async fn a_store_call_that_panics_is_an_error_not_a_stopped_queue() {
    let store = Probe::new(MemoryBackend::new());
    store.panic_claims.store(2, Ordering::SeqCst);
    store.panic_settles.store(1, Ordering::SeqCst);
    let (on_error, seen) = errors();
    let (hook, mut rx) = reporter();
    let messages = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&messages);
    let worker = Worker::builder(store.clone())
        .queue("q", QueueConfig::default().concurrency(2))
        .handlers(ok_handler())
        .on_error(move |e: &WorkerError| {
            on_error(e);
            sink.lock().unwrap().push(e.source.to_string());
        })
        .on_finished(hook)
        .error_backoff(Duration::from_millis(10), Duration::from_millis(100))
        .build()
        .unwrap()
        .start()
        .unwrap();
    let mut ids = Vec::new();
    for _ in 0..10 {
        ids.push(store.enqueue(NewJob::new("q", "ok", vec![])).await.unwrap());
    }
    let mut reported = Vec::new();
    for _ in 0..10 {
        // A minute of the paused clock: with a task gone, the queue would never finish.
        let report = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("the queue stopped")
            .unwrap();
        assert_eq!(report.outcome, JobOutcome::Succeeded);
        reported.push(report.job.claim.id);
    }
    reported.sort();
    assert_eq!(reported, ids, "every job ran and was recorded once");
    assert_eq!(store.panic_claims.load(Ordering::SeqCst), 0);
    assert_eq!(store.panic_settles.load(Ordering::SeqCst), 0);
    let seen = seen.lock().unwrap().clone();
    let claims = seen
        .iter()
        .filter(|(op, ..)| *op == Operation::Claim)
        .count();
    let settles = seen
        .iter()
        .filter(|(op, ..)| *op == Operation::Settle)
        .count();
    assert_eq!((claims, settles), (2, 1), "{seen:?}");
    let messages = messages.lock().unwrap().clone();
    assert!(
        messages
            .iter()
            .all(|m| m.contains("the store panicked during") && m.contains("injected panic")),
        "{messages:?}"
    );
    assert_eq!(store.inner.counts("q").succeeded, 10);
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn survives_transient_store_errors_and_backs_off() {
    let flaky = Probe::new(MemoryBackend::new());
    flaky.fail_claims.store(20, Ordering::SeqCst);
    let (on_error, seen) = errors();
    let (hook, mut rx) = reporter();
    let worker = Worker::builder(flaky.clone())
        .queue(
            "q",
            QueueConfig::default().poll_interval(Duration::from_millis(10)),
        )
        .handlers(ok_handler())
        .on_error(on_error)
        .on_finished(hook)
        .error_backoff(Duration::from_millis(100), Duration::from_secs(5))
        .build()
        .unwrap()
        .start()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(20)).await;
    let calls = 20 - flaky.fail_claims.load(Ordering::SeqCst);
    // 100 ms doubling to 5 s: 0.1+0.2+0.4+0.8+1.6+3.2 then every 5 s -> about 9 calls in 20 s,
    // where 10 ms polling would make 2,000.
    assert!(
        (6..=12).contains(&calls),
        "claims while the store is down: {calls}"
    );
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .all(|(op, transient, _)| *op == Operation::Claim && *transient)
    );

    // The store comes back; one settlement still fails as a whole and is sent again.
    flaky.fail_completes.store(1, Ordering::SeqCst);
    flaky.fail_claims.store(0, Ordering::SeqCst);
    let id = flaky.enqueue(NewJob::new("q", "ok", vec![])).await.unwrap();
    let report = rx.recv().await.unwrap();
    assert_eq!(report.job.claim.id, id);
    assert_eq!(report.outcome, JobOutcome::Succeeded);
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .any(|(op, transient, _)| *op == Operation::Settle && *transient)
    );
    assert_eq!(
        flaky.get(id).await.unwrap().unwrap().status(),
        JobStatus::Succeeded
    );
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn heartbeats_keep_the_lease_and_stop_when_it_is_lost() {
    let clock = ManualClock::new(START);
    let store = Arc::new(MemoryBackend::with_clock(clock.clone()));
    let gate = Arc::new(Semaphore::new(0));
    let g = Arc::clone(&gate);
    let handlers = Handlers::new().on("wait", move |_job: Job| {
        let gate = Arc::clone(&g);
        async move {
            gate.acquire().await.map_err(|e| e.to_string())?.forget();
            Ok::<_, String>(())
        }
    });
    let (on_error, seen) = errors();
    let (hook, mut rx) = reporter();
    let worker = Worker::builder(Arc::clone(&store))
        .queue(
            "q",
            QueueConfig::default()
                .lease(Duration::from_secs(30))
                .heartbeat_interval(Duration::from_secs(1))
                .rescue_interval(Duration::from_secs(3600)),
        )
        .handlers(handlers)
        .on_error(on_error)
        .on_finished(hook)
        .build()
        .unwrap()
        .start()
        .unwrap();
    let id = store
        .enqueue(NewJob::new("q", "wait", vec![]).retry(RetryPolicy::new(5)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(store.counts("q").running, 1);

    // Store time passes; the next heartbeat renews the lease from the new "now".
    clock.advance(Duration::from_secs(25));
    tokio::time::sleep(Duration::from_secs(1)).await;
    clock.advance(Duration::from_secs(25)); // 50 s after the claim, 25 s after the heartbeat
    assert_eq!(store.rescue("q").await.unwrap(), 0, "the lease was renewed");

    // The worker's lease is lost: rescue after expiry, and another claimant takes the job.
    clock.advance(Duration::from_secs(31));
    // Heartbeats now move the deadline again unless the job is rescued first, so rescue
    // before the worker's next beat.
    assert_eq!(store.rescue("q").await.unwrap(), 1);
    let other = store.claim("q", 1, Duration::from_secs(30)).await.unwrap();
    assert_eq!(other.len(), 1);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let heartbeat_errors: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(op, _, _)| *op == Operation::Heartbeat)
        .copied()
        .collect();
    assert_eq!(
        heartbeat_errors.len(),
        1,
        "heartbeats stop after the lease is lost"
    );
    assert!(heartbeat_errors[0].2, "the refusal is a stale lease");

    // The old attempt finishes: its completion is refused and reported unrecorded.
    gate.add_permits(1);
    let report = rx.recv().await.unwrap();
    assert_eq!(report.job.claim.id, id);
    assert_eq!(report.outcome, JobOutcome::Unrecorded);
    store.complete(other[0].claim).await.unwrap();
    assert_eq!(
        store.get(id).await.unwrap().unwrap().status(),
        JobStatus::Succeeded
    );
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn warns_once_about_slow_handlers() {
    let store = Arc::new(MemoryBackend::new());
    let slow_seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&slow_seen);
    let handlers = Handlers::new().on("slow", |_job: Job| async {
        tokio::time::sleep(Duration::from_secs(10)).await;
        Ok::<_, String>(())
    });
    let (hook, mut rx) = reporter();
    let worker = Worker::builder(Arc::clone(&store))
        .queue("q", QueueConfig::default().lease(Duration::from_secs(60)))
        .handlers(handlers)
        .slow_after(Duration::from_secs(2))
        .on_slow(move |slow| sink.lock().unwrap().push(slow.running_for))
        .on_finished(hook)
        .build()
        .unwrap()
        .start()
        .unwrap();
    store
        .enqueue(NewJob::new("q", "slow", vec![]))
        .await
        .unwrap();
    let report = rx.recv().await.unwrap();
    assert_eq!(report.outcome, JobOutcome::Succeeded);
    assert!(report.elapsed >= Duration::from_secs(10));
    let slow = slow_seen.lock().unwrap().clone();
    assert_eq!(slow.len(), 1, "one warning per job");
    assert!(slow[0] >= Duration::from_secs(2) && slow[0] < Duration::from_secs(10));
    let timing = worker.processing_time("q").unwrap();
    assert_eq!(timing.count, 1);
    assert!(timing.max >= 10_000_000, "run time in microseconds");
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn health_follows_failures() {
    let clock = ManualClock::new(START);
    let store = Arc::new(MemoryBackend::with_clock(clock.clone()));
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let f = Arc::clone(&fail);
    let handlers = Handlers::new().on("flaky", move |_job: Job| {
        let failing = f.load(Ordering::SeqCst);
        async move {
            if failing {
                Err("downstream is down")
            } else {
                Ok(())
            }
        }
    });
    let (hook, mut rx) = reporter();
    let worker = Worker::builder(Arc::clone(&store))
        .queue("q", QueueConfig::default())
        .handlers(handlers)
        .clock(clock.clone())
        .health_policy(
            HealthPolicy::default()
                .with_allowed_error_time(Duration::from_secs(60))
                .with_startup_grace(Duration::ZERO),
        )
        .on_finished(hook)
        .build()
        .unwrap()
        .start()
        .unwrap();
    assert_eq!(worker.health("q"), Some(Health::Healthy));
    let policy = RetryPolicy::forever().with_delays([Duration::from_secs(30)]);
    store
        .enqueue(NewJob::new("q", "flaky", vec![]).retry(policy))
        .await
        .unwrap();
    rx.recv().await.unwrap();
    let failed_at = clock.now();
    assert_eq!(
        worker.health("q"),
        Some(Health::Degraded { since: failed_at })
    );
    assert!(worker.is_healthy());
    clock.advance(Duration::from_secs(61));
    assert_eq!(
        worker.health("q"),
        Some(Health::Unhealthy { since: failed_at })
    );
    assert!(!worker.is_healthy());
    assert_eq!(
        worker.store_health("q").await.unwrap(),
        Health::Unhealthy { since: failed_at },
        "the store saw the same failure"
    );

    fail.store(false, Ordering::SeqCst);
    store.wake_all();
    let report = rx.recv().await.unwrap();
    assert_eq!(report.outcome, JobOutcome::Succeeded);
    assert_eq!(worker.health("q"), Some(Health::Healthy));
    assert_eq!(worker.store_health("q").await.unwrap(), Health::Healthy);
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn unknown_kinds_fail_and_panicking_hooks_do_no_harm() {
    let store = Arc::new(MemoryBackend::new());
    let (hook, mut rx) = reporter();
    let worker = Worker::builder(Arc::clone(&store))
        .queue("q", QueueConfig::default().concurrency(1))
        .handlers(ok_handler())
        .on_dead(|_dead| panic!("a buggy hook"))
        .on_finished(hook)
        .build()
        .unwrap()
        .start()
        .unwrap();
    let unknown = store
        .enqueue(NewJob::new("q", "mystery", vec![]).retry(RetryPolicy::new(0)))
        .await
        .unwrap();
    let report = rx.recv().await.unwrap();
    assert_eq!(report.job.claim.id, unknown);
    assert_eq!(report.outcome, JobOutcome::Dead);
    assert_eq!(
        report.result.unwrap_err().message,
        "no handler for job kind \"mystery\""
    );
    // The worker still runs after the hook panicked.
    store.enqueue(NewJob::new("q", "ok", vec![])).await.unwrap();
    assert_eq!(rx.recv().await.unwrap().outcome, JobOutcome::Succeeded);
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn handlers_see_metadata_and_stop_claiming_on_shutdown() {
    let store = Arc::new(MemoryBackend::new());
    let seen = Arc::new(Mutex::new(None));
    let sink = Arc::clone(&seen);
    let handlers = Handlers::new().on("traced", move |job: Job| {
        *sink.lock().unwrap() = job.metadata.get("trace_id").cloned();
        async { Ok::<_, String>(()) }
    });
    let (hook, mut rx) = reporter();
    let worker = Worker::builder(Arc::clone(&store))
        .queue("q", QueueConfig::default())
        .handlers(handlers)
        .on_finished(hook)
        .build()
        .unwrap()
        .start()
        .unwrap();
    store
        .enqueue(NewJob::new("q", "traced", vec![]).meta("trace_id", "4bf92f35"))
        .await
        .unwrap();
    rx.recv().await.unwrap();
    assert_eq!(seen.lock().unwrap().as_deref(), Some("4bf92f35"));
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
    let later = store
        .enqueue(NewJob::new("q", "traced", vec![]))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        store.get(later).await.unwrap().unwrap().status(),
        JobStatus::Scheduled
    );
}

#[tokio::test(start_paused = true)]
async fn rescues_jobs_of_a_dead_worker() {
    let clock = ManualClock::new(START);
    let store = Arc::new(MemoryBackend::with_clock(clock.clone()));
    let id = store
        .enqueue(NewJob::new("q", "ok", vec![]).retry(RetryPolicy::new(1)))
        .await
        .unwrap();
    // A worker that died: claimed and vanished.
    let lost = store.claim("q", 1, Duration::from_secs(30)).await.unwrap();
    assert_eq!(lost.len(), 1);
    clock.advance(Duration::from_secs(31));
    let (hook, mut rx) = reporter();
    let worker = Worker::builder(Arc::clone(&store))
        .queue(
            "q",
            QueueConfig::default().rescue_interval(Duration::from_secs(1)),
        )
        .handlers(ok_handler())
        .on_finished(hook)
        .build()
        .unwrap()
        .start()
        .unwrap();
    let report = rx.recv().await.unwrap();
    assert_eq!((report.job.claim.id, report.job.attempt), (id, 2));
    assert_eq!(report.outcome, JobOutcome::Succeeded);
    assert!(worker.shutdown(Duration::from_secs(1)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn run_until_stops_on_the_signal() {
    let store = Arc::new(MemoryBackend::new());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (hook, mut reports) = reporter();
    let worker = Worker::builder(Arc::clone(&store))
        .queue("q", QueueConfig::default())
        .handlers(ok_handler())
        .on_finished(hook)
        .build()
        .unwrap();
    store.enqueue(NewJob::new("q", "ok", vec![])).await.unwrap();
    let running = tokio::spawn(worker.run_until(async {
        rx.await.ok();
    }));
    reports.recv().await.unwrap();
    tx.send(()).unwrap();
    let report = running.await.unwrap().unwrap();
    assert!(report.is_clean());
}
