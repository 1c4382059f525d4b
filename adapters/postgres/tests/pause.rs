//! A queue paused through one connection is held for every process that shares the store,
//! and resuming it wakes their idle workers at once. (What a pause holds and lets through is
//! the conformance check `pause_holds_claims_until_resumed`.)

mod common;

use std::time::Duration;

use fairq_postgres::{PgBackend, PgOptions};
use fairq_worker::{Backend, Inspect, Job, JobStatus, NewJob, QueueConfig, Worker};
use tokio::sync::mpsc;

/// A guard against a hang, never a synchronisation: the job starts on the resume's
/// notification long before this.
const HANG: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_from_another_process_holds_the_queue_and_the_resume_wakes_the_worker() {
    let t = store_or_skip!("pause");
    // The operator's process: its own connection to the same schema.
    let operator = PgBackend::connect(
        &common::url(),
        PgOptions::default()
            .schema(&t.schema)
            .pool_size(2)
            .clock(t.clock.clone()),
    )
    .await
    .expect("connect");
    operator.set_paused("q", true).await.unwrap();
    assert_eq!(t.store.paused().await.unwrap(), ["q"]);
    let id = operator
        .enqueue(NewJob::new("q", "k", vec![]))
        .await
        .unwrap();
    assert!(
        t.store
            .claim("q", 10, Duration::from_secs(30))
            .await
            .unwrap()
            .is_empty(),
        "the pause holds the queue for the worker's store too"
    );

    // An idle worker polls once an hour: only a notification can wake it. (While the queue
    // is paused its worker waits for one, rather than finding the ready job and claiming in
    // a loop: without the resume's notification this test times out.)
    let (started, mut starts) = mpsc::unbounded_channel();
    let handle = Worker::builder(t.store.clone())
        .queue(
            "q",
            QueueConfig::default().poll_interval(Duration::from_secs(3_600)),
        )
        .handle("k", move |job: Job| {
            let started = started.clone();
            async move {
                let _ = started.send(job.claim.id);
                Ok::<_, String>(())
            }
        })
        .build()
        .unwrap()
        .start()
        .unwrap();
    assert!(starts.try_recv().is_err());
    assert_eq!(
        JobStatus::of(&t.store.get(id).await.unwrap().unwrap().state),
        JobStatus::Scheduled
    );

    operator.set_paused("q", false).await.unwrap();
    let ran = tokio::time::timeout(HANG, starts.recv())
        .await
        .expect("the resume woke the worker");
    assert_eq!(ran, Some(id));
    assert!(handle.shutdown(Duration::from_secs(10)).await.is_clean());
    assert!(operator.paused().await.unwrap().is_empty());
    drop(operator);
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_queue_is_no_longer_paused() {
    let t = store_or_skip!("pause_removed");
    t.store.set_paused("gone", true).await.unwrap();
    assert_eq!(t.store.paused().await.unwrap(), ["gone"]);
    t.store.remove_queue("gone").await.unwrap();
    assert!(t.store.paused().await.unwrap().is_empty());
    // A queue of the same name starts unpaused.
    t.store
        .enqueue(NewJob::new("gone", "k", vec![]))
        .await
        .unwrap();
    assert_eq!(
        t.store
            .claim("gone", 1, Duration::from_secs(30))
            .await
            .unwrap()
            .len(),
        1
    );
    t.cleanup().await;
}
