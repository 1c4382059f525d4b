//! Writes that wait for replicas (`RedisOptions::wait_for_replicas`) against the test server,
//! which has none: the write (here the queue's registration, the first write of an enqueue) is
//! applied on the primary and reported as unconfirmed.

mod common;

use std::time::Duration;

use fairq_redis::RedisStoreError;
use fairq_worker::ManualClock;
use fairq_worker::{Backend, BackendError, NewJob};

fn clock() -> ManualClock {
    ManualClock::new(fairq_worker::conformance::START)
}

/// The reply timeout is shorter than the replicas' timeout here: unless the connection waits
/// for both, the `WAIT` would end as a lost connection (and the enqueue be repeated) instead
/// of as a clear "unconfirmed".
#[tokio::test]
async fn without_replicas_a_waiting_enqueue_is_applied_but_unconfirmed() {
    if !common::available() {
        return;
    }
    let options = common::options(clock())
        .response_timeout(Duration::from_millis(200))
        .wait_for_replicas(1, Duration::from_millis(600));
    let store = common::connect(options).await;
    let err = store
        .enqueue(NewJob::new("unconfirmed", "k", b"once".to_vec()))
        .await
        .expect_err("no replica can confirm");
    let BackendError::Unavailable(inner) = &err else {
        panic!("expected the store to be unavailable, got {err:?}");
    };
    match inner.downcast_ref::<RedisStoreError>() {
        Some(RedisStoreError::Unconfirmed {
            confirmed, wanted, ..
        }) => assert_eq!((*confirmed, *wanted), (0, 1), "{err}"),
        other => panic!("expected Unconfirmed, got {other:?} ({err})"),
    }
}

/// An unconfirmed enqueue stored its job: the error says so (and that a repeat stores it
/// again), and the job is there to claim. Before, the error said only that the write was
/// unconfirmed, and the README that repeating the call was safe: a repeat enqueued a second
/// copy.
#[tokio::test]
async fn an_unconfirmed_enqueue_says_its_jobs_are_stored() {
    if !common::available() {
        return;
    }
    let plain = common::options(clock());
    let waiting = plain
        .clone()
        .response_timeout(Duration::from_secs(30))
        .wait_for_replicas(1, Duration::ZERO);
    // The queue is registered without waiting (a registration waits too, and one unconfirmed
    // fails the enqueue before it stores anything), and the waiting client learns its number
    // from the registry.
    let setup = common::connect(plain).await;
    setup
        .enqueue(NewJob::new("stored", "k", b"setup".to_vec()))
        .await
        .unwrap();
    let store = fairq_redis::RedisBackend::connect(&common::url(), waiting)
        .await
        .unwrap();
    assert_eq!(store.stats().await.unwrap().len(), 1);
    let err = store
        .enqueue(NewJob::new("stored", "k", b"once".to_vec()))
        .await
        .expect_err("no replica can confirm");
    assert!(matches!(err, BackendError::Unavailable(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("the jobs are stored, and repeating the enqueue stores them again"),
        "{text}"
    );
    // The claim waits for no replica.
    let jobs = store
        .claim("stored", 10, Duration::from_secs(30))
        .await
        .unwrap();
    let payloads: Vec<&[u8]> = jobs.iter().map(|j| j.payload.as_slice()).collect();
    assert_eq!(payloads, [&b"setup"[..], &b"once"[..]]);
}

/// Waiting for no replica confirms at once.
#[tokio::test]
async fn waiting_for_zero_replicas_confirms() {
    if !common::available() {
        return;
    }
    let options = common::options(clock()).wait_for_replicas(0, Duration::from_millis(100));
    let store = common::connect(options).await;
    store
        .enqueue(NewJob::new("zero", "k", vec![]))
        .await
        .expect("nothing to wait for");
}

/// A wait of `Duration::MAX` asks for no limit, and a zero one for the shortest: neither
/// reaches Redis as a number it refuses (`Duration::MAX` in milliseconds is past its range)
/// or as its own "no limit" (0).
#[tokio::test]
async fn waits_of_any_length_reach_redis_as_waits_it_takes() {
    if !common::available() {
        return;
    }
    let options = common::options(clock()).wait_for_replicas(0, Duration::MAX);
    let store = common::connect(options).await;
    store
        .enqueue(NewJob::new("forever", "k", vec![]))
        .await
        .expect("no replica to wait for, however long");
    // Zero: a replica that is not there is given up on at once, well inside the reply
    // timeout (which would end it as a lost connection instead).
    let options = common::options(clock())
        .response_timeout(Duration::from_secs(30))
        .wait_for_replicas(1, Duration::ZERO);
    let store = common::connect(options).await;
    let err = store
        .enqueue(NewJob::new("at-once", "k", vec![]))
        .await
        .expect_err("no replica can confirm");
    let BackendError::Unavailable(inner) = &err else {
        panic!("expected the store to be unavailable, got {err:?}");
    };
    assert!(
        matches!(
            inner.downcast_ref::<RedisStoreError>(),
            Some(RedisStoreError::Unconfirmed {
                confirmed: 0,
                wanted: 1,
                ..
            })
        ),
        "{err}"
    );
}
