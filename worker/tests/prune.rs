//! A worker that prunes finished jobs (`WorkerBuilder::prune_finished`): it deletes jobs that
//! finished longer ago than the age it keeps them for, and nothing else, at start and then
//! at its interval, reports a failing prune and tries again, and stops with the worker.
//!
//! Job ages come from the store's manual clock; the worker's intervals run on tokio's paused
//! clock, which the test moves on by sleeping (virtual time, no real waiting).

mod common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Probe, until};
use fairq_core::job::Millis;
use fairq_worker::{
    Backend, Failure, Handlers, Job, JobReport, JobStatus, ManualClock, MemoryBackend, NewJob,
    Operation, QueueConfig, Retention, Worker, WorkerError, WorkerHandle,
};
use tokio::sync::mpsc;

const START: Millis = 1_700_000_000_000;
const HOUR: Duration = Duration::from_secs(3_600);
const MINUTE: Duration = Duration::from_secs(60);

fn handlers() -> Handlers {
    Handlers::new()
        .on("ok", |_job: Job| async { Ok::<_, String>(()) })
        .on("bad", |_job: Job| async {
            Err::<(), _>(Failure::permanent("cannot be done"))
        })
}

/// An error the worker reported: what it was doing, the queue, whether it named a job.
type Seen = (Operation, String, bool);

/// A worker on `store` serving queues "a" and "b", keeping finished jobs for an hour when
/// `prune` is set; its finished reports and errors.
fn start(
    store: &Probe,
    prune: bool,
) -> (
    WorkerHandle<Probe>,
    mpsc::UnboundedReceiver<JobReport>,
    Arc<Mutex<Vec<Seen>>>,
) {
    start_keeping(store, prune.then_some(HOUR.into()))
}

/// [`start`] with a retention of its own (`None`: no pruning).
fn start_keeping(
    store: &Probe,
    prune: Option<Retention>,
) -> (
    WorkerHandle<Probe>,
    mpsc::UnboundedReceiver<JobReport>,
    Arc<Mutex<Vec<Seen>>>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let errors: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let sink = Arc::clone(&errors);
    let mut builder = Worker::builder(store.clone())
        .queue("a", QueueConfig::default())
        .queue("b", QueueConfig::default())
        .handlers(handlers())
        .on_finished(move |r: &JobReport| {
            tx.send(r.clone()).ok();
        })
        .on_error(move |e: &WorkerError| {
            sink.lock()
                .unwrap()
                .push((e.operation, e.queue.clone(), e.job.is_some()));
        });
    if let Some(retention) = prune {
        builder = builder.prune_finished(retention);
    }
    let worker = builder.build().unwrap().start().unwrap();
    (worker, rx, errors)
}

/// Lets `d` of the worker's (paused) time pass, and a second more, so that the worker's
/// timers due within `d` have fired and their tasks run before this returns.
async fn pass(d: Duration) {
    tokio::time::sleep(d + Duration::from_secs(1)).await;
    tokio::task::yield_now().await;
}

#[tokio::test(start_paused = true)]
async fn each_outcome_is_kept_for_its_own_age() {
    let clock = ManualClock::new(START);
    let store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    // Succeeded jobs for 8 minutes, dead ones for a day: prunes every 2 minutes.
    let retention = Retention::finished(8 * MINUTE).dead_for(24 * HOUR);
    let (worker, mut finished, errors) = start_keeping(&store, Some(retention));
    until("the first prune", || !store.calls().prunes.is_empty()).await;
    assert_eq!(store.calls().prunes[0], (retention, Some(0)));
    let ok = store.enqueue(NewJob::new("a", "ok", vec![])).await.unwrap();
    let bad = store
        .enqueue(NewJob::new("b", "bad", vec![]))
        .await
        .unwrap();
    for _ in 0..2 {
        finished.recv().await.unwrap();
    }

    clock.advance(9 * MINUTE);
    let before = store.calls().prunes.len();
    pass(2 * MINUTE).await;
    assert!(
        store.calls().prunes.len() > before,
        "pruned at a quarter of the shorter age"
    );
    assert!(store.get(ok).await.unwrap().is_none(), "succeeded job gone");
    let dead = store.get(bad).await.unwrap().expect("the dead job is kept");
    assert_eq!(dead.status(), JobStatus::Dead);

    clock.advance(24 * HOUR);
    pass(2 * MINUTE).await;
    assert!(store.get(bad).await.unwrap().is_none(), "gone after a day");
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
    assert!(errors.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn finished_jobs_are_deleted_once_older_than_the_age_and_nothing_else_is() {
    let clock = ManualClock::new(START);
    let store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    let (worker, mut finished, errors) = start(&store, true);
    // The first prune runs as the worker starts.
    until("the first prune", || !store.calls().prunes.is_empty()).await;
    assert_eq!(store.calls().prunes[0], (HOUR.into(), Some(0)));

    let ok = store.enqueue(NewJob::new("a", "ok", vec![])).await.unwrap();
    let bad = store
        .enqueue(NewJob::new("b", "bad", vec![]))
        .await
        .unwrap();
    let later = store
        .enqueue(NewJob::new("a", "ok", vec![]).delay(10 * HOUR))
        .await
        .unwrap();
    for _ in 0..2 {
        finished.recv().await.unwrap();
    }
    assert_eq!(store.inner.len(), 3);

    // Half an hour after they finished: prunes run, and keep both.
    clock.advance(30 * MINUTE);
    let before = store.calls().prunes.len();
    pass(2 * MINUTE).await;
    assert!(store.calls().prunes.len() > before, "pruned every minute");
    assert_eq!(store.inner.len(), 3, "nothing finished an hour ago yet");

    // Past the hour: the next prune deletes the succeeded and the dead job, not the one
    // still waiting for its time.
    clock.advance(31 * MINUTE);
    pass(MINUTE).await;
    let prunes = store.calls().prunes.clone();
    assert_eq!(
        prunes.iter().filter_map(|p| p.1).sum::<u64>(),
        2,
        "{prunes:?}"
    );
    assert!(store.get(ok).await.unwrap().is_none());
    assert!(store.get(bad).await.unwrap().is_none());
    let waiting = store.get(later).await.unwrap().expect("kept");
    assert_eq!(waiting.status(), JobStatus::Scheduled);

    let report = worker.shutdown(Duration::from_secs(5)).await;
    assert!(report.is_clean(), "{report:?}");
    assert!(errors.lock().unwrap().is_empty());
    // Stopped with the worker.
    let after = store.calls().prunes.len();
    pass(10 * MINUTE).await;
    assert_eq!(store.calls().prunes.len(), after);
}

#[tokio::test(start_paused = true)]
async fn a_failed_prune_is_reported_under_the_first_queue_and_tried_again() {
    let clock = ManualClock::new(START);
    let store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    store.fail_prunes.store(1, Ordering::SeqCst);
    let (worker, mut finished, errors) = start(&store, true);
    let id = store.enqueue(NewJob::new("b", "ok", vec![])).await.unwrap();
    finished.recv().await.unwrap();
    until("the failed prune", || !store.calls().prunes.is_empty()).await;
    assert_eq!(store.calls().prunes[0], (HOUR.into(), None));
    {
        let errors = errors.lock().unwrap();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0], (Operation::Prune, "a".to_string(), false));
    }
    clock.advance(2 * HOUR);
    pass(MINUTE).await;
    assert!(
        store.get(id).await.unwrap().is_none(),
        "pruned by the next try"
    );
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}

/// A prune that takes long (a store deleting a large backlog batch by batch) is dropped at
/// the stop signal: the shutdown does not wait for it.
#[tokio::test(start_paused = true)]
async fn a_prune_in_flight_does_not_hold_up_a_shutdown() {
    let mut store = Probe::new(MemoryBackend::new());
    store.prune_gate = Some(Arc::new(tokio::sync::Semaphore::new(0)));
    let (worker, _finished, errors) = start(&store, true);
    until("a prune begun", || store.calls().prunes_begun == 1).await;
    let report = tokio::time::timeout(HOUR, worker.shutdown(Duration::from_secs(5)))
        .await
        .expect("the shutdown ends although the prune never does");
    assert!(report.is_clean(), "{report:?}");
    assert!(store.calls().prunes.is_empty(), "the prune never finished");
    assert!(errors.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn without_the_option_a_worker_never_prunes() {
    let clock = ManualClock::new(START);
    let store = Probe::new(MemoryBackend::with_clock(clock.clone()));
    let (worker, mut finished, _) = start(&store, false);
    let id = store.enqueue(NewJob::new("a", "ok", vec![])).await.unwrap();
    finished.recv().await.unwrap();
    clock.advance(1_000 * HOUR);
    pass(HOUR).await;
    assert!(store.calls().prunes.is_empty());
    let info = store.get(id).await.unwrap().expect("kept");
    assert_eq!(info.status(), JobStatus::Succeeded);
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());
}
