//! The documented exception to the `2 (K - 1)` fairness bound (see `Backend`'s docs): a ready
//! job purged, cancelled or held back before its turn keeps its key's place in the fair order
//! until claims pass it, and the key's next job queues behind it.

use std::time::Duration;

use fairq_core::retry::{Backoff, RetryPolicy};
use fairq_worker::{
    Backend, Clock, Failure, JobId, JobStatus, ManualClock, MemoryBackend, NewJob, Purge,
};

const LEASE: Duration = Duration::from_secs(30);

fn job(key: &str) -> NewJob {
    NewJob::new("f", "k", vec![]).key(key)
}

/// Claims one job at a time until `target` comes out; returns how many other jobs came first.
async fn claims_before(store: &MemoryBackend, target: JobId) -> usize {
    let mut others = 0;
    loop {
        let j = store.claim("f", 1, LEASE).await.unwrap().remove(0);
        store.complete(j.claim).await.unwrap();
        if j.claim.id == target {
            return others;
        }
        others += 1;
    }
}

/// With `K = 2` keys, `v`'s job waits one round (one claim of `h`) per place `v` still holds,
/// not the `2 (K - 1) = 2` claims of a fresh queue.
#[tokio::test]
async fn purged_jobs_keep_their_keys_place_until_claims_pass_them() {
    let store = MemoryBackend::with_clock(ManualClock::new(0));
    store
        .enqueue_many((0..50).map(|_| job("v")).collect())
        .await
        .unwrap();
    store.enqueue(job("h")).await.unwrap();
    let purge = Purge {
        queue: Some("f".into()),
        status: Some(JobStatus::Scheduled),
    };
    assert_eq!(store.purge(purge).await.unwrap(), 51);
    store
        .enqueue_many((0..200).map(|_| job("h")).collect())
        .await
        .unwrap();
    let light = store.enqueue(job("v")).await.unwrap();
    let waited = claims_before(&store, light).await;
    assert!(
        (3..=2 + 50).contains(&waited),
        "v's job waits behind its 50 purged places: {waited} claims"
    );
}

/// The same for retries held back by `hold_retries` (the worker's retry sweep).
#[tokio::test]
async fn held_retries_keep_their_keys_place_until_claims_pass_them() {
    let clock = ManualClock::new(0);
    let store = MemoryBackend::with_clock(clock.clone());
    let at_once = RetryPolicy::new(5).with_backoff(Backoff::Immediate);
    store
        .enqueue_many((0..50).map(|_| job("v").retry(at_once.clone())).collect())
        .await
        .unwrap();
    for j in store.claim("f", 50, LEASE).await.unwrap() {
        store.fail(&j, Failure::retryable("down")).await.unwrap();
    }
    assert_eq!(
        store.hold_retries("f", clock.now() + 60_000).await.unwrap(),
        50
    );
    store
        .enqueue_many((0..200).map(|_| job("h")).collect())
        .await
        .unwrap();
    let fresh = store.enqueue(job("v")).await.unwrap();
    let waited = claims_before(&store, fresh).await;
    assert!(
        (3..=2 + 50).contains(&waited),
        "v's job waits behind its 50 held places: {waited} claims"
    );
}
