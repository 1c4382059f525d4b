//! Holding retries back (the retry sweep) keeps the fair order of the reference store: a held
//! job that had a place in the fair order leaves it taken, so its key's later jobs and the
//! job's own new place stay behind it.

mod common;

use std::time::Duration;

use fairq_core::retry::{Backoff, RetryPolicy};
use fairq_worker::{Backend, Clock, NewJob};

fn policy(retries: u32) -> RetryPolicy {
    RetryPolicy::new(retries).with_backoff(Backoff::Fixed(Duration::from_millis(500)))
}

/// The sequence the differential test (`tests/model.rs`) shrank a disagreement to: two jobs
/// rescued into retries, a new job of one of their keys while the retries are due, the
/// retries held back by a millisecond, then a claim of one job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_retry_does_not_jump_ahead_of_a_job_that_was_ready_before_it() {
    let Some(t) = common::TestStore::new("hold").await else {
        return;
    };
    let (s, clock) = (&t.store, &t.clock);
    let lease = Duration::from_millis(2_000);
    let first = s
        .enqueue_many(vec![
            NewJob::new("q", "kind", vec![0]).key("k0").retry(policy(1)),
            NewJob::new("q", "kind", vec![1]).retry(policy(1)),
        ])
        .await
        .unwrap();
    assert_eq!(s.claim("q", 2, lease).await.unwrap().len(), 2);
    clock.advance(Duration::from_millis(2_000));
    assert_eq!(s.rescue("q").await.unwrap(), 2, "both leases ran out");
    clock.advance(Duration::from_millis(500));
    // Both retries are due now; a new job of the shared (empty) key arrives.
    let late = s
        .enqueue(NewJob::new("q", "kind", vec![2]).retry(policy(0)))
        .await
        .unwrap();
    assert_eq!(s.hold_retries("q", clock.now() + 1).await.unwrap(), 2);
    clock.advance(Duration::from_millis(1));
    let next = s.claim("q", 1, lease).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(
        next[0].claim.id, late,
        "a held retry ({:?}) went ahead of the job ready before it",
        first
    );
    t.cleanup().await;
}
