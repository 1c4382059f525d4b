//! A queue paused through one client is held for every client of the deployment, and
//! resuming it wakes their idle workers at once. (What a pause holds and lets through is the
//! conformance check `pause_holds_claims_until_resumed`.)

mod common;

use std::time::Duration;

use fairq_redis::RedisBackend;
use fairq_worker::{Backend, Inspect, ManualClock, NewJob};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_from_another_client_holds_the_queue_and_the_resume_wakes_the_worker() {
    require_redis!();
    let options = common::options(ManualClock::new(1_700_000_000_000));
    // The operator's client (it deletes the deployment's keys when dropped).
    let operator = common::connect(options.clone()).await;
    let store = RedisBackend::connect(&common::url(), options)
        .await
        .expect("connect");
    operator.set_paused("q", true).await.unwrap();
    assert_eq!(store.paused().await.unwrap(), ["q"]);
    let id = operator
        .enqueue(NewJob::new("q", "test", vec![]))
        .await
        .unwrap();
    assert!(
        store
            .claim("q", 10, Duration::from_secs(30))
            .await
            .unwrap()
            .is_empty(),
        "the pause holds the queue for the worker's client too"
    );

    // The enqueue left a wake-up token: take it, so that only the resume's can wake the
    // worker. An idle worker polls once an hour. (While the queue is paused its worker blocks
    // for a token, rather than finding the ready job and claiming in a loop: without the
    // resume's tokens this test times out.)
    let mut raw = redis::Client::open(common::url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let signal = format!("{}signal", store.keys().queue_base("q"));
    let _: i64 = redis::cmd("DEL")
        .arg(&signal)
        .query_async(&mut raw)
        .await
        .unwrap();
    fairq_worker::conformance::pause::resume_wakes_an_idle_worker(store, &*operator, "q", id).await;
}

#[tokio::test]
async fn a_removed_queue_is_no_longer_paused() {
    require_redis!();
    let store = common::store(ManualClock::new(1_700_000_000_000)).await;
    store.set_paused("gone", true).await.unwrap();
    assert_eq!(store.paused().await.unwrap(), ["gone"]);
    store.remove_queue("gone").await.unwrap();
    assert!(store.paused().await.unwrap().is_empty());
    // A queue of the same name starts unpaused.
    store
        .enqueue(NewJob::new("gone", "k", vec![]))
        .await
        .unwrap();
    assert_eq!(
        store
            .claim("gone", 1, Duration::from_secs(30))
            .await
            .unwrap()
            .len(),
        1
    );
}

/// A job that fell due while its queue was paused was never moved to the ready set (no claim
/// ran), so counting ready jobs finds nothing to wake for: the resume must still wake a
/// blocked waiter, which then finds the job due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resume_wakes_a_waiter_for_a_job_that_fell_due_during_the_pause() {
    require_redis!();
    let clock = ManualClock::new(1_700_000_000_000);
    let store = common::store(clock.clone()).await;
    store.set_paused("late", true).await.unwrap();
    store
        .enqueue(NewJob::new("late", "test", vec![]).delay(Duration::from_secs(1)))
        .await
        .unwrap();
    // Take the enqueue's wake-up token, so that only the resume's can end the wait.
    let mut raw = store.connection();
    let signal = format!("{}signal", store.keys().queue_base("late"));
    let _: i64 = redis::cmd("DEL")
        .arg(&signal)
        .query_async(&mut raw)
        .await
        .unwrap();
    let waiter: RedisBackend = (*store).clone();
    let waiting = tokio::spawn(async move {
        waiter
            .wait_for_jobs("late", Duration::from_secs(3_600))
            .await;
    });
    // The wait blocks for a token (the only one in this file that does).
    assert!(
        common::someone_blocks_in_blpop(&mut raw).await,
        "the waiter never blocked"
    );
    clock.advance(Duration::from_secs(2));
    store.set_paused("late", false).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), waiting)
        .await
        .expect("the resume did not wake the waiter, which would sleep out its poll interval")
        .unwrap();
    let claimed = store
        .claim("late", 10, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1, "the job that fell due is claimable");
}
