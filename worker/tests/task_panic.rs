//! A panic inside one of the worker's own tasks stops the worker and is reported: it is
//! never silent, and it loses no job. The panic is injected through the worker's clock, the
//! one user-supplied piece the worker's tasks call without a guard of their own.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fairq_core::health::Health;
use fairq_core::job::Millis;
use fairq_worker::{
    Backend, Clock, Job, MemoryBackend, NewJob, QueueConfig, SystemClock, Worker, WorkerTask,
};
use tokio::sync::mpsc;

/// A guard against a hang, never a synchronisation: every wait below ends on an event long
/// before this.
const HANG: Duration = Duration::from_secs(30);

/// The system clock, until armed: then every reading panics.
#[derive(Clone, Default)]
struct ArmedClock(Arc<AtomicBool>);

impl ArmedClock {
    fn arm(&self, armed: bool) {
        self.0.store(armed, Ordering::SeqCst);
    }
}

impl Clock for ArmedClock {
    fn now(&self) -> Millis {
        if self.0.load(Ordering::SeqCst) {
            panic!("clock broke");
        }
        SystemClock.now()
    }
}

/// A worker on `store` serving queue `q` with the armed clock; every finished job's id is
/// sent on the returned channel.
fn worker(
    store: &Arc<MemoryBackend>,
    clock: &ArmedClock,
) -> (Worker<Arc<MemoryBackend>>, mpsc::UnboundedReceiver<u64>) {
    let (done, finished) = mpsc::unbounded_channel();
    let worker = Worker::builder(Arc::clone(store))
        .queue("q", QueueConfig::default().concurrency(2))
        .queue("other", QueueConfig::default())
        .clock(clock.clone())
        .handle("k", move |job: Job| {
            let done = done.clone();
            async move {
                let _ = done.send(job.claim.id.0);
                Ok::<_, String>(())
            }
        })
        .build()
        .expect("a valid worker");
    (worker, finished)
}

#[tokio::test]
async fn a_panicking_task_stops_the_worker_and_is_reported() {
    let store = Arc::new(MemoryBackend::new());
    let clock = ArmedClock::default();
    let (worker, mut finished) = worker(&store, &clock);
    let handle = worker.start().unwrap();

    // The worker runs normally first.
    let first = store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    let ran = tokio::time::timeout(HANG, finished.recv()).await.unwrap();
    assert_eq!(ran, Some(first.0));
    assert!(handle.task_failures().is_empty());

    // Now the next task to read the clock panics: the claimer, woken by this job.
    clock.arm(true);
    let second = store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    tokio::time::timeout(HANG, handle.failed())
        .await
        .expect("the worker noticed its task's panic");
    clock.arm(false);

    let failures = handle.task_failures();
    assert!(!failures.is_empty());
    for failure in &failures {
        assert_eq!(failure.message, "clock broke");
        // The clock could not be read when the failure was recorded.
        assert_eq!(failure.at, 0);
    }
    assert!(
        failures.iter().any(|f| f.queue == "q"),
        "the woken queue's task failed: {failures:?}"
    );
    let failed = &failures[0];
    assert!(
        failed.to_string().contains("panicked: clock broke"),
        "{failed}"
    );
    assert_eq!(
        handle.health(&failed.queue),
        Some(Health::Unhealthy { since: 0 })
    );
    assert!(!handle.is_healthy());

    // The worker stopped: nothing more is claimed, and the second job is still in the store,
    // not lost (waiting, or claimed and left to its lease if the panic came after its claim).
    let counts = store.counts("q");
    assert_eq!(counts.succeeded, 1);
    assert_eq!(counts.scheduled + counts.running, 1, "{counts:?}");
    assert!(store.peek(second).is_some() || counts.scheduled == 1);

    let report = handle.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.failed_tasks, failures);
    assert!(!report.is_clean());
    // Nothing ran after the panic.
    assert!(finished.try_recv().is_err());
}

#[tokio::test]
async fn run_until_returns_when_a_task_panics_without_waiting_for_its_signal() {
    let store = Arc::new(MemoryBackend::new());
    let clock = ArmedClock::default();
    let (worker, mut finished) = worker(&store, &clock);
    let arming = {
        let store = Arc::clone(&store);
        let clock = clock.clone();
        tokio::spawn(async move {
            store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
            finished.recv().await;
            clock.arm(true);
            store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
        })
    };
    // The signal never comes: only the failure can end the run.
    let report = tokio::time::timeout(HANG, worker.run_until(std::future::pending()))
        .await
        .expect("the run ended on the failure")
        .unwrap();
    arming.await.unwrap();
    assert!(!report.failed_tasks.is_empty());
    assert!(
        report
            .failed_tasks
            .iter()
            .all(|f| f.message == "clock broke")
    );
    assert!(!report.is_clean());
    let tasks = [
        WorkerTask::Claimer,
        WorkerTask::Rescuer,
        WorkerTask::Heartbeater,
        WorkerTask::Acker,
        WorkerTask::Slot,
    ];
    assert!(report.failed_tasks.iter().all(|f| tasks.contains(&f.task)));
    // One job ran; the other is still in the store.
    assert_eq!(store.counts("q").succeeded, 1);
    assert_eq!(store.len(), 2);
}
