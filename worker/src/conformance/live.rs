//! [`Backend::live_counts`]: one queue's waiting and running jobs, as [`Backend::stats`]
//! counts them, whatever else the store holds.

use std::time::Duration;

use fairq_core::retry::RetryPolicy;

use crate::backend::Backend;
use crate::clock::ManualClock;
use crate::job::{Failure, NewJob};
use crate::live_counts::LiveCounts;

const LEASE: Duration = Duration::from_secs(30);

fn job(queue: &str) -> NewJob {
    NewJob::new(queue, "test", b"{}".to_vec())
}

/// Each live status of one queue is counted (a delayed job as scheduled, a job waiting for
/// its dependency as blocked), finished jobs and other queues are not, the numbers agree
/// with [`Backend::stats`], and an unknown queue counts nothing.
pub async fn live_counts_count_one_queues_live_jobs<B: Backend>(store: &B, _clock: &ManualClock) {
    let q = "live";
    store.enqueue(job(q)).await.expect("enqueue");
    let done = store.claim(q, 1, LEASE).await.expect("claim");
    store.complete(done[0].claim).await.expect("complete");
    store
        .enqueue(job(q).retry(RetryPolicy::new(0)))
        .await
        .expect("enqueue");
    let dies = store.claim(q, 1, LEASE).await.expect("claim");
    store
        .fail(&dies[0], Failure::retryable("gone"))
        .await
        .expect("fail");
    store
        .enqueue(job(q).retry(RetryPolicy::new(3).with_delays([Duration::from_secs(60)])))
        .await
        .expect("enqueue");
    let retries = store.claim(q, 1, LEASE).await.expect("claim");
    store
        .fail(&retries[0], Failure::retryable("again"))
        .await
        .expect("fail");
    store.enqueue(job(q)).await.expect("enqueue");
    assert_eq!(store.claim(q, 1, LEASE).await.expect("claim").len(), 1);
    let first = store.enqueue(job(q)).await.expect("enqueue");
    store.enqueue(job(q)).await.expect("enqueue");
    store
        .enqueue(job(q).delay(Duration::from_secs(60)))
        .await
        .expect("enqueue");
    store.enqueue(job(q).after(first)).await.expect("enqueue");
    for _ in 0..4 {
        store.enqueue(job("live-other")).await.expect("enqueue");
    }
    assert_eq!(
        store
            .claim("live-other", 2, LEASE)
            .await
            .expect("claim")
            .len(),
        2
    );

    let live = store.live_counts(q).await.expect("live counts");
    assert_eq!(
        live,
        LiveCounts {
            blocked: 1,
            scheduled: 3,
            running: 1,
            retrying: 1,
        }
    );
    let stats = store.stats().await.expect("stats");
    let listed = stats.iter().find(|s| s.queue == q).expect("queue listed");
    assert_eq!(live, LiveCounts::from(listed.counts));
    assert_eq!((listed.counts.succeeded, listed.counts.dead), (1, 1));
    let other = store.live_counts("live-other").await.expect("live counts");
    assert_eq!((other.scheduled, other.running, other.total()), (2, 2, 4));
    assert_eq!(
        store.live_counts("live-nobody").await.expect("live counts"),
        LiveCounts::default()
    );
}
