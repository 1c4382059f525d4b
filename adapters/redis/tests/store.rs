//! Redis-specific behaviour: errors, script reloading, key layout, cross-queue dependencies,
//! wake-ups and statistics.

mod common;

use std::time::Duration;

use fairq_core::job::State;
use fairq_core::stats::Histogram;
use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::{
    Backend, BackendError, Clock, JobStatus, ListFilter, ManualClock, NewJob, RetryTarget,
};

const LEASE: Duration = Duration::from_secs(30);

fn clock() -> ManualClock {
    ManualClock::new(fairq_worker::conformance::START)
}

#[tokio::test]
async fn a_malformed_url_is_an_invalid_request() {
    for url in [
        "not a url",
        "http://127.0.0.1:6379/",
        "redis://127.0.0.1:notaport/",
    ] {
        let err = RedisBackend::connect(url, RedisOptions::new())
            .await
            .unwrap_err();
        assert!(matches!(err, BackendError::Invalid(_)), "{url}: {err}");
        assert!(err.to_string().contains("invalid Redis URL"), "{err}");
    }
}

#[tokio::test]
async fn a_bad_prefix_is_an_invalid_request() {
    let err = RedisBackend::connect(&common::url(), RedisOptions::new().prefix("a{b}"))
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::Invalid(_)), "{err}");
}

#[tokio::test]
async fn a_dead_server_is_unavailable_and_named() {
    // Nothing listens on port 1 of the loopback address.
    let options = RedisOptions {
        reconnect_retries: 1,
        ..RedisOptions::new().connect_timeout(Duration::from_secs(1))
    };
    let err = RedisBackend::connect("redis://127.0.0.1:1/", options)
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("cannot connect to Redis at 127.0.0.1:1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_script_error_surfaces_with_the_script_name() {
    require_redis!();
    let store = common::store(clock()).await;
    let id = store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    // Corrupt the job so that the claim script's HINCRBY fails.
    let mut conn = store.connection();
    let _: () = redis::cmd("HSET")
        .arg(store.keys().job("q", id.0))
        .arg("attempts")
        .arg("not a number")
        .query_async(&mut conn)
        .await
        .unwrap();
    let err = store.claim("q", 1, LEASE).await.unwrap_err();
    assert!(matches!(err, BackendError::Store(_)), "{err}");
    assert!(!err.is_transient());
    let text = err.to_string();
    assert!(text.contains("Lua script `claim` failed"), "{text}");
    assert!(text.contains("not an integer"), "{text}");
    store.destroy().await.unwrap();
}

#[tokio::test]
async fn scripts_are_reloaded_after_the_server_forgets_them() {
    require_redis!();
    let store = common::store(clock()).await;
    let mut conn = store.connection();
    let flush = || redis::cmd("SCRIPT").arg("FLUSH").to_owned();
    let _: () = flush().query_async(&mut conn).await.unwrap();
    // Single calls (EVALSHA, then SCRIPT LOAD on NOSCRIPT) ...
    let id = store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    let _: () = flush().query_async(&mut conn).await.unwrap();
    let job = store.claim("q", 1, LEASE).await.unwrap().remove(0);
    let _: () = flush().query_async(&mut conn).await.unwrap();
    store.complete(job.claim).await.unwrap();
    // ... and pipelined batches.
    let _: () = flush().query_async(&mut conn).await.unwrap();
    let ids = store
        .enqueue_many((0..3).map(|_| NewJob::new("q", "k", vec![])).collect())
        .await
        .unwrap();
    assert_eq!(ids.len(), 3);
    assert!(matches!(
        store.get(id).await.unwrap().unwrap().state,
        State::Succeeded { .. }
    ));
    store.destroy().await.unwrap();
}

#[tokio::test]
async fn prefixes_isolate_deployments_and_destroy_removes_every_key() {
    require_redis!();
    let a = common::store(clock()).await;
    let b = common::store(clock()).await;
    a.enqueue(NewJob::new("shared", "k", vec![])).await.unwrap();
    assert!(b.claim("shared", 10, LEASE).await.unwrap().is_empty());
    assert!(b.stats().await.unwrap().is_empty());
    assert_eq!(a.claim("shared", 10, LEASE).await.unwrap().len(), 1);

    let mut conn = a.connection();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(a.keys().pattern())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!keys.is_empty());
    // Every key of the queue carries the queue's hash tag; only the three deployment-wide
    // keys do not.
    let tag = a.keys().queue_base("shared");
    let global = [a.keys().ids(), a.keys().index(), a.keys().queues()];
    for key in &keys {
        assert!(key.starts_with(&tag) || global.contains(key), "{key}");
    }
    assert!(a.destroy().await.unwrap() >= keys.len() as u64);
    let left: Vec<String> = redis::cmd("KEYS")
        .arg(a.keys().pattern())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
    b.destroy().await.unwrap();
}

#[tokio::test]
async fn queue_names_with_braces_stay_apart() {
    require_redis!();
    let store = common::store(clock()).await;
    store
        .enqueue(NewJob::new("a}b", "k", vec![1]))
        .await
        .unwrap();
    store.enqueue(NewJob::new("a", "k", vec![2])).await.unwrap();
    let jobs = store.claim("a}b", 10, LEASE).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].payload, [1]);
    assert_eq!(jobs[0].queue, "a}b");
    store.destroy().await.unwrap();
}

#[tokio::test]
async fn a_dependency_in_another_queue_releases_its_dependent() {
    require_redis!();
    let store = common::store(clock()).await;
    let first = store.enqueue(NewJob::new("a", "k", vec![])).await.unwrap();
    let second = store
        .enqueue(NewJob::new("b", "k", vec![]).after(first))
        .await
        .unwrap();
    assert_eq!(
        store.get(second).await.unwrap().unwrap().status(),
        JobStatus::Blocked
    );
    assert!(store.claim("b", 1, LEASE).await.unwrap().is_empty());
    let job = store.claim("a", 1, LEASE).await.unwrap().remove(0);
    store.complete(job.claim).await.unwrap();
    let released = store.claim("b", 1, LEASE).await.unwrap();
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].claim.id, second);
    // Depending on a job that already succeeded does not block.
    let third = store
        .enqueue(NewJob::new("c", "k", vec![]).after(first))
        .await
        .unwrap();
    assert_eq!(store.claim("c", 1, LEASE).await.unwrap()[0].claim.id, third);
    store.destroy().await.unwrap();
}

#[tokio::test]
async fn an_enqueue_wakes_a_waiting_worker() {
    require_redis!();
    let store = common::store(clock()).await;
    let waiter = {
        let store = store.clone();
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            store.wait_for_jobs("wake", Duration::from_secs(60)).await;
            started.elapsed()
        })
    };
    // Enqueue until the waiter returns: the first enqueue may land before it blocks, and its
    // wake-up token then makes the wait return at once.
    let mut enqueued = 0;
    while !waiter.is_finished() && enqueued < 10_000 {
        store
            .enqueue(NewJob::new("wake", "k", vec![]))
            .await
            .unwrap();
        enqueued += 1;
        tokio::task::yield_now().await;
    }
    let waited = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("the wait returns once a job is enqueued")
        .unwrap();
    assert!(
        waited < Duration::from_secs(60),
        "woke by the enqueue, not the timeout"
    );
    store.destroy().await.unwrap();
}

#[tokio::test]
async fn processing_percentiles_match_the_core_histogram() {
    require_redis!();
    let clock = clock();
    let store = common::store(clock.clone()).await;
    let durations = [3u64, 90, 150, 700, 1_300, 45_000, 2_000_000];
    let mut reference = Histogram::new();
    for (i, ms) in durations.iter().enumerate() {
        store
            .enqueue(NewJob::new("t", "k", vec![]).key(format!("{i}")))
            .await
            .unwrap();
        let job = store.claim("t", 1, LEASE).await.unwrap().remove(0);
        clock.advance(Duration::from_millis(*ms));
        if i % 2 == 0 {
            store.complete(job.claim).await.unwrap();
        } else {
            store
                .fail(job.claim, fairq_worker::Failure::permanent("x"))
                .await
                .unwrap();
        }
        reference.record(*ms);
    }
    let stats = store.stats().await.unwrap();
    assert_eq!(stats.len(), 1);
    assert_eq!(stats[0].processing_ms, reference.summary());
    assert_eq!(stats[0].counts.succeeded, 4);
    assert_eq!(stats[0].counts.dead, 3);
    store.destroy().await.unwrap();
}

#[tokio::test]
async fn operator_calls_page_and_revive_across_batches() {
    require_redis!();
    let clock = clock();
    let options = common::options(clock.clone());
    let store = RedisBackend::connect(
        &common::url(),
        RedisOptions {
            batch: 7,
            ..options
        },
    )
    .await
    .unwrap();
    let policy = fairq_core::retry::RetryPolicy::new(0);
    let jobs: Vec<NewJob> = (0..30)
        .map(|i| NewJob::new(format!("q{}", i % 2), "k", vec![]).retry(policy.clone()))
        .collect();
    store.enqueue_many(jobs).await.unwrap();
    for queue in ["q0", "q1"] {
        for job in store.claim(queue, 100, LEASE).await.unwrap() {
            store
                .fail(job.claim, fairq_worker::Failure::retryable("no"))
                .await
                .unwrap();
        }
    }
    let dead = ListFilter::default().status(JobStatus::Dead).limit(1_000);
    let mut page = ListFilter {
        limit: 4,
        ..dead.clone()
    };
    let mut seen = Vec::new();
    loop {
        let jobs = store.list(page.clone()).await.unwrap();
        if jobs.is_empty() {
            break;
        }
        page.after = jobs.last().map(|j| j.id);
        seen.extend(jobs.into_iter().map(|j| j.id));
    }
    assert_eq!(seen.len(), 30);
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "ordered by id");
    let revived = store
        .retry(RetryTarget::AllDead { queue: None })
        .await
        .unwrap();
    assert_eq!(revived, 30);
    assert!(store.list(dead).await.unwrap().is_empty());
    let purged = store.purge(fairq_worker::Purge::default()).await.unwrap();
    assert_eq!(purged, 30);
    assert!(store.get(seen[0]).await.unwrap().is_none());
    assert!(clock.now() > 0);
    store.destroy().await.unwrap();
}
