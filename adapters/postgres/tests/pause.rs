//! A queue paused through one connection is held for every process that shares the store,
//! and resuming it wakes their idle workers at once. (What a pause holds and lets through is
//! the conformance check `pause_holds_claims_until_resumed`.)

mod common;

use std::time::Duration;

use fairq_postgres::{PgBackend, PgOptions};
use fairq_worker::{Backend, Inspect, NewJob};

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
        .enqueue(NewJob::new("q", "test", vec![]))
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

    // The worker's side (an idle worker polls once an hour, so only the resume's
    // notification can start the job; without it this check times out).
    fairq_worker::conformance::pause::resume_wakes_an_idle_worker(
        t.store.clone(),
        &operator,
        "q",
        id,
    )
    .await;
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
