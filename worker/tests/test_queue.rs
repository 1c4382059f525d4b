//! The step-by-step test helpers and MemoryBackend edge cases.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use fairq_core::job::State;
use fairq_core::retry::RetryPolicy;
use fairq_worker::{
    Backend, BackendError, Clock, Failure, Handlers, Job, JobId, JobStatus, ListFilter,
    ManualClock, MemoryBackend, NewJob, OnConflict, Purge, ReviveTarget, RunOutcome, TestQueue,
    TestQueueError,
};

fn counting(calls: &Arc<AtomicU32>, fail_first: u32) -> Handlers {
    let calls = Arc::clone(calls);
    Handlers::new().on("count", move |_job: Job| {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        async move {
            if n < fail_first {
                Err(format!("failure {n}"))
            } else {
                Ok(())
            }
        }
    })
}

#[tokio::test]
async fn run_one_runs_exactly_one_due_job_fairly() {
    let calls = Arc::new(AtomicU32::new(0));
    let tq = TestQueue::new(counting(&calls, 0));
    for _ in 0..3 {
        tq.enqueue(NewJob::new("q", "count", vec![]).key("heavy"))
            .await
            .unwrap();
    }
    let light = tq
        .enqueue(NewJob::new("q", "count", vec![]).key("light"))
        .await
        .unwrap();
    let first = tq.run_one("q").await.unwrap().unwrap();
    assert_eq!(first.job.key.as_deref(), Some("heavy"));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "exactly one job ran");
    let second = tq.run_one("q").await.unwrap().unwrap();
    assert_eq!(second.job.claim.id, light, "the light key goes second");
    assert_eq!(tq.drain("q").await.unwrap().len(), 2);
    assert!(tq.run_one("q").await.unwrap().is_none());
}

#[tokio::test]
async fn force_retry_covers_every_state() {
    let calls = Arc::new(AtomicU32::new(0));
    let tq = TestQueue::new(counting(&calls, 1));
    let policy = RetryPolicy::new(0);
    // Dead: revived and run.
    let id = tq
        .enqueue(NewJob::new("q", "count", vec![]).retry(policy))
        .await
        .unwrap();
    let run = tq.run_one("q").await.unwrap().unwrap();
    assert_eq!(run.outcome, RunOutcome::Dead);
    let run = tq.force_retry(id).await.unwrap();
    assert_eq!((run.outcome, run.job.attempt), (RunOutcome::Succeeded, 1));
    // Succeeded: replayed without touching the store.
    let run = tq.force_retry(id).await.unwrap();
    assert_eq!(run.outcome, RunOutcome::Replayed);
    assert!(run.result.is_ok());
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(matches!(
        tq.job(id).await.unwrap().unwrap().state,
        State::Succeeded { .. }
    ));
    // Waiting for a delayed retry: run at once.
    let policy = RetryPolicy::new(3).with_delays([Duration::from_secs(3600)]);
    let calls2 = Arc::new(AtomicU32::new(0));
    let tq2 = TestQueue::new(counting(&calls2, 1));
    let id2 = tq2
        .enqueue(NewJob::new("q", "count", vec![]).retry(policy))
        .await
        .unwrap();
    let run = tq2.run_one("q").await.unwrap().unwrap();
    assert!(matches!(run.outcome, RunOutcome::Retry { .. }));
    assert!(tq2.run_one("q").await.unwrap().is_none());
    let run = tq2.force_retry(id2).await.unwrap();
    assert_eq!((run.outcome, run.job.attempt), (RunOutcome::Succeeded, 2));
    // Blocked and running jobs are refused; unknown jobs are not found.
    let blocker = tq2
        .enqueue(NewJob::new("q", "count", vec![]))
        .await
        .unwrap();
    let blocked = tq2
        .enqueue(NewJob::new("q", "count", vec![]).after(blocker))
        .await
        .unwrap();
    assert!(matches!(
        tq2.force_retry(blocked).await,
        Err(TestQueueError::NotRunnable {
            state: "blocked",
            ..
        })
    ));
    let held = tq2
        .backend()
        .claim("q", 1, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(matches!(
        tq2.force_retry(held[0].claim.id).await,
        Err(TestQueueError::NotRunnable {
            state: "running",
            ..
        })
    ));
    assert!(matches!(
        tq2.force_retry(JobId(999)).await,
        Err(TestQueueError::Backend(BackendError::NotFound(_)))
    ));
}

#[tokio::test]
async fn drain_gives_up_on_endless_immediate_retries() {
    let tq =
        TestQueue::new(Handlers::new().on("never", |_job: Job| async { Err::<(), _>("nope") }))
            .max_runs(50);
    tq.enqueue(NewJob::new("q", "never", vec![]).retry(RetryPolicy::forever()))
        .await
        .unwrap();
    assert!(matches!(
        tq.drain("q").await,
        Err(TestQueueError::TooManyRuns(50))
    ));
}

#[tokio::test]
async fn run_to_end_jumps_the_clock_through_retries_and_delays() {
    let calls = Arc::new(AtomicU32::new(0));
    let tq = TestQueue::new(counting(&calls, 2));
    let policy = RetryPolicy::new(5).with_delays([Duration::from_secs(60)]);
    tq.enqueue(NewJob::new("q", "count", vec![]).retry(policy))
        .await
        .unwrap();
    tq.enqueue(NewJob::new("q", "count", vec![]).delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    let runs = tq.run_to_end("q").await.unwrap();
    assert_eq!(runs.len(), 4);
    assert_eq!(runs.iter().filter(|r| r.outcome.is_success()).count(), 2);
    assert_eq!(tq.clock().now(), TestQueue::START + 3_600_000);
    assert_eq!(tq.backend().counts("q").succeeded, 2);
}

#[tokio::test]
async fn panics_and_permanent_failures_through_the_test_queue() {
    let tq = TestQueue::new(
        Handlers::new()
            .on("panic", |_job: Job| async {
                if true {
                    panic!("kaboom");
                }
                Ok::<_, String>(())
            })
            .on("perm", |_job: Job| async {
                Err::<(), _>(Failure::permanent("bad data"))
            }),
    );
    tq.enqueue(NewJob::new("q", "panic", vec![]).retry(RetryPolicy::new(1)))
        .await
        .unwrap();
    let run = tq.run_one("q").await.unwrap().unwrap();
    assert_eq!(run.error(), Some("handler panicked: kaboom"));
    assert!(matches!(run.outcome, RunOutcome::Retry { .. }));
    let perm = tq
        .enqueue(NewJob::new("p", "perm", vec![]).retry(RetryPolicy::forever()))
        .await
        .unwrap();
    let run = tq.run_one("p").await.unwrap().unwrap();
    assert_eq!(run.outcome, RunOutcome::Dead);
    assert_eq!(
        tq.job(perm).await.unwrap().unwrap().last_error.as_deref(),
        Some("bad data")
    );
}

#[tokio::test]
async fn enqueue_many_is_all_or_nothing() {
    let store = MemoryBackend::new();
    store
        .enqueue(NewJob::new("q", "k", vec![]).unique("u", OnConflict::Error))
        .await
        .unwrap();
    let err = store
        .enqueue_many(vec![
            NewJob::new("q", "k", vec![]),
            NewJob::new("q", "k", vec![]).unique("u", OnConflict::Error),
        ])
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::Duplicate { .. }));
    let err = store
        .enqueue_many(vec![
            NewJob::new("q", "k", vec![]).unique("v", OnConflict::Error),
            NewJob::new("q", "k", vec![]).unique("v", OnConflict::Error),
        ])
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::Duplicate { .. }));
    assert_eq!(store.len(), 1, "a refused batch stores nothing");
    // Ids stay dense after refused batches.
    let ids = store
        .enqueue_many(vec![NewJob::new("q", "k", vec![]); 2])
        .await
        .unwrap();
    assert_eq!(ids, [JobId(2), JobId(3)]);
}

#[tokio::test]
async fn purged_ready_jobs_are_skipped_and_revived_keys_are_guarded() {
    let clock = ManualClock::new(0);
    let store = MemoryBackend::with_clock(clock.clone());
    let doomed = store
        .enqueue(NewJob::new("q", "k", vec![]).key("a"))
        .await
        .unwrap();
    let kept = store
        .enqueue(NewJob::new("q", "k", vec![]).key("a"))
        .await
        .unwrap();
    assert_eq!(
        store
            .purge(Purge {
                queue: None,
                status: Some(JobStatus::Scheduled)
            })
            .await
            .unwrap(),
        2
    );
    assert!(store.get(doomed).await.unwrap().is_none());
    assert!(store.get(kept).await.unwrap().is_none());
    let fresh = store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    let jobs = store.claim("q", 10, Duration::from_secs(1)).await.unwrap();
    assert_eq!(jobs.iter().map(|j| j.claim.id).collect::<Vec<_>>(), [fresh]);

    // A dead job whose unique key was taken meanwhile stays dead on retry.
    let first = store
        .enqueue(
            NewJob::new("u", "k", vec![])
                .unique("x", OnConflict::Error)
                .retry(RetryPolicy::new(0)),
        )
        .await
        .unwrap();
    let job = store.claim("u", 1, Duration::from_secs(1)).await.unwrap();
    store.fail(&job[0], Failure::retryable("x")).await.unwrap();
    let second = store
        .enqueue(NewJob::new("u", "k", vec![]).unique("x", OnConflict::Error))
        .await
        .unwrap();
    let err = store.revive(ReviveTarget::One(first)).await.unwrap_err();
    assert!(matches!(err, BackendError::Duplicate { existing, .. } if existing == second));
    assert_eq!(
        store
            .revive(ReviveTarget::AllDead { queue: None })
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store.get(first).await.unwrap().unwrap().status(),
        JobStatus::Dead
    );
}

#[tokio::test]
async fn clock_going_backwards_does_not_break_the_store() {
    let clock = ManualClock::new(10_000);
    let store = MemoryBackend::with_clock(clock.clone());
    store
        .enqueue(NewJob::new("q", "k", vec![]).delay(Duration::from_secs(5)))
        .await
        .unwrap();
    clock.set(0);
    assert!(
        store
            .claim("q", 1, Duration::from_secs(1))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.rescue("q").await.unwrap(), 0);
    clock.set(15_000);
    assert_eq!(
        store
            .claim("q", 1, Duration::from_secs(1))
            .await
            .unwrap()
            .len(),
        1
    );
    let listed = store.list(ListFilter::default()).await.unwrap();
    assert_eq!(listed.len(), 1);
}

#[tokio::test]
async fn a_handler_that_panics_before_returning_its_future_is_caught() {
    let tq = TestQueue::new(Handlers::new().on("sync-panic", |job: Job| {
        if job.attempt > 0 {
            panic!("panicked while building the future");
        }
        std::future::ready(Ok::<(), String>(()))
    }));
    tq.enqueue(NewJob::new("q", "sync-panic", vec![]).retry(RetryPolicy::new(0)))
        .await
        .unwrap();
    let run = tq.run_one("q").await.unwrap().unwrap();
    assert_eq!(
        run.error(),
        Some("handler panicked: panicked while building the future")
    );
    assert_eq!(run.outcome, RunOutcome::Dead);
}

/// Jumping the test clock by "forever" lands in the far future, never in the past.
#[tokio::test]
async fn advancing_by_forever_never_moves_time_backwards() {
    let tq = TestQueue::new(Handlers::new());
    let before = tq.clock().now();
    tq.advance(Duration::MAX);
    assert!(tq.clock().now() > before);
    assert_eq!(tq.clock().now(), u64::MAX);
}
