//! Redis-specific behaviour: errors, script reloading, key layout, cross-queue dependencies,
//! wake-ups and statistics.

mod common;

use std::time::Duration;

use common::proxy::Proxy;
use fairq_core::job::State;
use fairq_core::retry::RetryPolicy;
use fairq_core::stats::Histogram;
use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::{
    Backend, BackendError, Clock, Failure, Inspect, JobStatus, ListFilter, ManualClock, NewJob,
    ReviveTarget,
};

const LEASE: Duration = Duration::from_secs(30);

/// The longest a test waits for something that should happen at once.
const PATIENCE: Duration = Duration::from_secs(30);

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

/// A password holding `?` or `#` unencoded makes a URL the `redis` crate cannot read; the
/// error says so without quoting any of it (the part after the `?` was refused as an unknown
/// parameter by name before).
#[tokio::test]
async fn a_password_is_never_quoted_in_an_error() {
    let options = || RedisOptions {
        reconnect_retries: 0,
        ..RedisOptions::new().connect_timeout(Duration::from_secs(1))
    };
    for url in [
        "redis://:ab?S3cret@127.0.0.1:1/",
        "redis://:ab?S3cret@127.0.0.1:1/?prefx=app",
        "redis://user:ab#S3cret@127.0.0.1:1/0",
        "rediss://:ab?cacert=S3cret@127.0.0.1:1/",
        "redis+cluster://:ab?S3cret@127.0.0.1:1,127.0.0.1:2/",
    ] {
        let err = RedisBackend::connect(url, options()).await.unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(!text.contains("S3cret"), "{url}: {text}");
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

/// A server that accepts connections and never answers (a plain `redis://` URL aimed at a
/// TLS-only port, say) fails the connect as transient and named, as a dead one does: each
/// attempt gives up after `connect_timeout` (here with no reconnection attempts), not after
/// the reply timeout. The outer limit is reached only by a connect that hangs.
#[tokio::test]
async fn a_server_that_never_answers_fails_the_connect_within_its_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts every connection and keeps it open, reading nothing and writing nothing.
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let options = RedisOptions {
        reconnect_retries: 0,
        ..RedisOptions::new().connect_timeout(Duration::from_millis(300))
    };
    let url = format!("redis://127.0.0.1:{port}/");
    let connect = RedisBackend::connect(&url, options);
    let err = tokio::time::timeout(Duration::from_secs(20), connect)
        .await
        .expect("the connect waited out the reply timeout")
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("cannot connect to Redis at 127.0.0.1:{port}")),
        "{err}"
    );
    held.abort();
}

#[tokio::test]
async fn a_script_error_surfaces_with_the_script_name() {
    require_redis!();
    let store = common::store(clock()).await;
    store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    // Replace the queue's ready set by a string: the claim script's ZPOPMIN fails.
    let ready = format!("{}ready", store.keys().queue_base("q"));
    let mut conn = store.connection();
    let _: () = redis::cmd("SET")
        .arg(&ready)
        .arg("not a sorted set")
        .query_async(&mut conn)
        .await
        .unwrap();
    let err = store.claim("q", 1, LEASE).await.unwrap_err();
    assert!(matches!(err, BackendError::Store(_)), "{err}");
    assert!(!err.is_transient());
    let text = err.to_string();
    assert!(text.contains("Lua script `claim` failed"), "{text}");
    assert!(text.contains("WRONGTYPE"), "{text}");
}

/// Sets `field` of job `id` of `queue` to `value`, behind the store's back.
async fn corrupt(store: &RedisBackend, queue: &str, id: u64, field: &str, value: &str) {
    let _: () = redis::cmd("HSET")
        .arg(store.keys().job(queue, id))
        .arg(field)
        .arg(value)
        .query_async(&mut store.connection())
        .await
        .unwrap();
}

#[tokio::test]
async fn an_unreadable_job_is_set_aside_and_the_queue_goes_on() {
    require_redis!();
    let store = common::store(clock()).await;
    let ids = store
        .enqueue_many((0..4).map(|_| NewJob::new("q", "k", vec![])).collect())
        .await
        .unwrap();
    // One job's attempt counter is not a number (the script sees it), another's retry policy
    // is not JSON (only the client sees it).
    corrupt(&store, "q", ids[1].0, "attempts", "not a number").await;
    corrupt(&store, "q", ids[2].0, "retry", "{oops").await;
    let jobs = store.claim("q", 4, LEASE).await.unwrap();
    let claimed: Vec<_> = jobs.iter().map(|j| j.claim.id).collect();
    assert_eq!(claimed, [ids[0], ids[3]], "the readable jobs are claimed");
    for bad in [ids[1], ids[2]] {
        let info = store.get(bad).await.unwrap().unwrap();
        assert_eq!(info.status(), JobStatus::Dead, "{bad} is set aside");
        let error = info.last_error.unwrap_or_default();
        assert!(
            error.contains("corrupt") || error.contains("unreadable"),
            "{error}"
        );
    }
    let stats = store.stats().await.unwrap();
    assert_eq!(
        (
            stats[0].counts.running,
            stats[0].counts.dead,
            stats[0].counts.scheduled
        ),
        (2, 2, 0)
    );
    for job in jobs {
        store.complete(job.claim).await.unwrap();
    }
}

#[tokio::test]
async fn one_unparsable_record_does_not_stop_listing_the_others() {
    require_redis!();
    let store = common::store(clock()).await;
    let ids = store
        .enqueue_many((0..3).map(|_| NewJob::new("q", "k", vec![])).collect())
        .await
        .unwrap();
    // The record issue 13 found: a run time written as a float.
    corrupt(&store, "q", ids[1].0, "run_at", "1.8446744073709552e+19").await;
    let listed: Vec<_> = store
        .list(ListFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(listed, [ids[0], ids[2]]);
    let scheduled = store
        .list(ListFilter::default().status(JobStatus::Scheduled))
        .await
        .unwrap();
    assert_eq!(scheduled.len(), 2);
    let err = store.get(ids[1]).await.unwrap_err();
    assert!(
        err.to_string().contains(&format!("job {}", ids[1])),
        "{err}"
    );
    // Claims are not affected: all three run.
    assert_eq!(store.claim("q", 3, LEASE).await.unwrap().len(), 3);
}

#[tokio::test]
async fn run_times_reach_other_clients_when_flushed() {
    require_redis!();
    let clock = clock();
    let options = common::options(clock.clone());
    let worker = common::connect(options.clone()).await;
    let viewer = RedisBackend::connect(&common::url(), options)
        .await
        .unwrap();
    worker.enqueue(NewJob::new("t", "k", vec![])).await.unwrap();
    let job = worker.claim("t", 1, LEASE).await.unwrap().remove(0);
    clock.advance(Duration::from_millis(250));
    worker.complete(job.claim).await.unwrap();
    // Counts are exact at once; the run time waits in the worker's client.
    let seen = viewer.stats().await.unwrap();
    assert_eq!(seen[0].counts.succeeded, 1);
    assert_eq!(seen[0].processing_ms.count, 0);
    // Reading stats on the worker's client flushes it.
    assert_eq!(worker.stats().await.unwrap()[0].processing_ms.max, 250);
    let seen = viewer.stats().await.unwrap();
    assert_eq!(
        (seen[0].processing_ms.count, seen[0].processing_ms.max),
        (1, 250)
    );
}

#[tokio::test]
async fn ids_name_their_queue_and_increase_in_enqueue_order() {
    require_redis!();
    let store = common::store(clock()).await;
    let mut ids = Vec::new();
    for (i, queue) in ["busy", "quiet", "busy", "busy", "quiet", "third"]
        .iter()
        .enumerate()
    {
        ids.push(
            store
                .enqueue(NewJob::new(*queue, "k", vec![i as u8]))
                .await
                .unwrap(),
        );
    }
    let batch = store
        .enqueue_many(
            ["quiet", "busy", "third", "busy"]
                .iter()
                .map(|q| NewJob::new(*q, "k", vec![]))
                .collect(),
        )
        .await
        .unwrap();
    ids.extend(batch);
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, ids, "one client's ids increase across queues");
    for id in &ids {
        assert!(
            store.get(*id).await.unwrap().is_some(),
            "{id} is found by id alone"
        );
    }
    // Another client, which never saw these queues, finds them by id too.
    let other = RedisBackend::connect(
        &common::url(),
        RedisOptions::new().prefix(store.keys().prefix()),
    )
    .await
    .unwrap();
    assert_eq!(other.get(ids[1]).await.unwrap().unwrap().queue, "quiet");
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
    let everything = format!("{}:*", a.keys().prefix());
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(&everything)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!keys.is_empty());
    // Every key of the queue carries the queue's hash tag; only the queue registry does not.
    let tag = a.keys().queue_base("shared");
    for key in &keys {
        assert!(
            key.starts_with(&tag) || *key == a.keys().registry(),
            "{key}"
        );
    }
    assert!(a.destroy().await.unwrap() >= keys.len() as u64);
    let left: Vec<String> = redis::cmd("KEYS")
        .arg(&everything)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}

/// A deployment whose prefix is another's plus `:` and more (`app` and `app:staging`) keeps
/// every key when the shorter one is destroyed: `destroy` used to delete whatever matched
/// `<prefix>:*`, and with it the longer prefix's queues, jobs, registry and paused listing.
#[tokio::test]
async fn destroy_leaves_a_deployment_whose_prefix_extends_this_one_alone() {
    require_redis!();
    let a = common::store(clock()).await;
    let staging = format!("{}:staging", a.keys().prefix());
    let b = common::connect(common::options(clock()).prefix(staging.clone())).await;
    for store in [&a, &b] {
        store
            .enqueue(NewJob::new("mail", "k", vec![1]))
            .await
            .unwrap();
        store
            .enqueue(NewJob::new("held", "k", vec![2]))
            .await
            .unwrap();
        store.set_paused("held", true).await.unwrap();
    }
    let conn = a.connection();
    let keys_of = |prefix: String| {
        let mut conn = conn.clone();
        async move {
            let mut keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{prefix}:*"))
                .query_async(&mut conn)
                .await
                .unwrap();
            keys.sort();
            keys
        }
    };
    let b_before = keys_of(staging.clone()).await;
    assert!(b_before.contains(&b.keys().registry()), "{b_before:?}");
    assert!(b_before.contains(&b.keys().paused()), "{b_before:?}");

    assert!(a.destroy().await.unwrap() > 0);
    // Nothing of A is left: whatever still starts with its prefix is B's.
    let left = keys_of(a.keys().prefix().to_string()).await;
    assert_eq!(left, b_before);
    // B works as before.
    assert_eq!(b.paused().await.unwrap(), ["held"]);
    let queues: Vec<String> = b
        .stats()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.queue)
        .collect();
    assert_eq!(queues.len(), 2, "{queues:?}");
    assert_eq!(b.claim("mail", 10, LEASE).await.unwrap().len(), 1);
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
                .fail(&job, fairq_worker::Failure::permanent("x"))
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
}

#[tokio::test]
async fn operator_calls_page_and_revive_across_batches() {
    require_redis!();
    let clock = clock();
    let options = common::options(clock.clone());
    let store = common::connect(RedisOptions {
        batch: 7,
        ..options
    })
    .await;
    let policy = fairq_core::retry::RetryPolicy::new(0);
    let jobs: Vec<NewJob> = (0..30)
        .map(|i| NewJob::new(format!("q{}", i % 2), "k", vec![]).retry(policy.clone()))
        .collect();
    store.enqueue_many(jobs).await.unwrap();
    for queue in ["q0", "q1"] {
        for job in store.claim(queue, 100, LEASE).await.unwrap() {
            store
                .fail(&job, fairq_worker::Failure::retryable("no"))
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
        .revive(ReviveTarget::AllDead { queue: None })
        .await
        .unwrap();
    assert_eq!(revived, 30);
    assert!(store.list(dead).await.unwrap().is_empty());
    let purged = store.purge(fairq_worker::Purge::default()).await.unwrap();
    assert_eq!(purged, 30);
    assert!(store.get(seen[0]).await.unwrap().is_none());
    assert!(clock.now() > 0);
}

/// Issue 13.1: a run time past the year 9999 is refused at enqueue (it used to be stored as
/// 1.8446744073709552e+19 and break listings), and a retry backoff that long is clamped to
/// the last representable time; either way the other jobs go on.
#[tokio::test]
async fn run_times_past_the_year_9999_are_refused_or_clamped() {
    require_redis!();
    let clock = clock();
    let store = common::store(clock.clone()).await;
    let far = Duration::from_secs(500_000_000_000 * 365 * 86_400);
    let err = store
        .enqueue(NewJob::new("q", "k", vec![]).delay(far))
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::Invalid(_)), "{err:?}");
    assert!(err.to_string().contains("year 9999"), "{err}");

    let policy = fairq_core::retry::RetryPolicy::new(1).with_delays([far]);
    let id = store
        .enqueue(NewJob::new("q", "k", vec![]).retry(policy))
        .await
        .unwrap();
    let other = store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    let job = store.claim("q", 1, LEASE).await.unwrap().remove(0);
    assert_eq!(job.claim.id, id);
    store
        .fail(&job, fairq_worker::Failure::retryable("down"))
        .await
        .unwrap();
    let max = fairq_core::job::MAX_MILLIS;
    assert_eq!(
        store.get(id).await.unwrap().unwrap().state,
        State::Retrying { run_at: max }
    );
    assert_eq!(store.list(ListFilter::default()).await.unwrap().len(), 2);
    assert_eq!(store.stats().await.unwrap()[0].next_retry_at, Some(max));
    let next = store.claim("q", 5, LEASE).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].claim.id, other);
}

#[tokio::test]
async fn a_promote_limit_of_zero_still_lets_a_claim_promote_due_jobs() {
    // The limit went to the claim script as `LIMIT 0 0`: a claim promoted nothing, and a
    // delayed job waited for the next rescue sweep to be promoted instead.
    require_redis!();
    let clock = clock();
    let options = RedisOptions {
        promote_limit: 0,
        ..common::options(clock.clone())
    };
    let store = common::connect(options).await;
    let id = store
        .enqueue(NewJob::new("q", "k", vec![]).delay(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(
        store.claim("q", 1, LEASE).await.unwrap().is_empty(),
        "not due yet"
    );
    clock.advance(Duration::from_secs(5));
    let claimed = store.claim("q", 1, LEASE).await.unwrap();
    assert_eq!(claimed.iter().map(|j| j.claim.id).collect::<Vec<_>>(), [id]);
}

/// A proxy in front of the test server, and the URL that reaches the server through it.
fn proxied() -> (Proxy, String) {
    let info = redis::Client::open(common::url().as_str())
        .expect("test server URL")
        .get_connection_info()
        .clone();
    let redis::ConnectionAddr::Tcp(host, port) = info.addr else {
        panic!("the test server must be reached over plain TCP");
    };
    let proxy = Proxy::start(format!("{host}:{port}"));
    let url = format!("redis://127.0.0.1:{}/{}", proxy.port(), info.redis.db);
    (proxy, url)
}

/// On a server that reads blocking timeouts in whole seconds only (Redis 5, played by the
/// proxy: it answers a `BLPOP` with a fractional timeout as Redis 5 does), the first wait
/// learns it and the next ones send whole seconds, which block until an enqueue wakes them.
/// Before, every wait sent a fraction (`0.500`) and was refused, so waits returned within
/// 100 ms and idle workers polled.
#[test]
fn waits_on_a_server_that_reads_whole_seconds_only_block() {
    if !common::available() {
        return;
    }
    let (proxy, url) = proxied();
    common::runtime().block_on(async {
        let options = common::options(clock());
        let _guard = common::Guard::new(options.prefix.clone());
        let store = RedisBackend::connect(&url, options).await.expect("connect");
        proxy.refuse_fractional_timeouts();
        let first = store.wait_for_jobs("w5", Duration::from_millis(500));
        tokio::time::timeout(PATIENCE, first)
            .await
            .expect("the refused wait returns");
        assert_eq!(proxy.blpops(), (1, 0), "the first wait sent a fraction");
        for round in 0..2 {
            let waiting = store.wait_for_jobs("w5", Duration::from_secs(3_600));
            tokio::pin!(waiting);
            // Until the proxy has sent the pop on, the wait has not blocked yet.
            while proxy.blpops().1 <= round {
                assert!(
                    futures::poll!(waiting.as_mut()).is_pending(),
                    "wait {round} returned before it blocked: {:?}",
                    proxy.blpops()
                );
                tokio::task::yield_now().await;
            }
            let job = NewJob::new("w5", "k", vec![]);
            store.enqueue(job).await.expect("enqueue");
            tokio::time::timeout(PATIENCE, waiting)
                .await
                .expect("an enqueue wakes the wait");
            let jobs = store.claim("w5", 1, LEASE).await.expect("claim");
            assert_eq!(jobs.len(), 1);
        }
        assert_eq!(
            proxy.blpops(),
            (1, 2),
            "whole seconds from the second wait on"
        );
    });
}

/// A hand-back and revivals (of one job, and of a queue's dead jobs) whose replies a proxy
/// cuts are repeated and answered as their first tries went through. Before, the repeat of a
/// hand-back found the job handed back and answered `StaleLease`, that of a revival found it
/// live and answered `NotDead`, and that of a queue's revival counted nothing.
#[test]
fn hand_backs_and_revivals_repeated_after_their_replies_were_lost_answer_as_they_went() {
    if !common::available() {
        return;
    }
    let (proxy, url) = proxied();
    common::runtime().block_on(async {
        // Run times are not flushed behind the test's back: nothing but its own calls
        // crosses the proxy, so the cut falls on the call that follows it.
        let options = RedisOptions {
            timing_flush: Duration::from_secs(3_600),
            ..common::options(clock())
        };
        let _guard = common::Guard::new(options.prefix.clone());
        let store = RedisBackend::connect(&url, options).await.expect("connect");
        let once = RetryPolicy::new(0);
        let job = |key: &str| {
            NewJob::new("lost", "k", vec![])
                .key(key)
                .retry(once.clone())
        };
        let ids = store
            .enqueue_many(["a", "b", "c", "d", "e"].map(job).to_vec())
            .await
            .expect("enqueue");
        let mut jobs = store.claim("lost", 5, LEASE).await.expect("claim");
        jobs.sort_by_key(|j| j.claim.id);
        assert_eq!(jobs.iter().map(|j| j.claim.id).collect::<Vec<_>>(), ids);
        // A whole hand-back first, so the cut falls on the script of the next one.
        let answers = store.release(vec![jobs[0].claim]).await.expect("release");
        assert!(matches!(answers[..], [Ok(())]), "{answers:?}");

        let cut = || {
            proxy.cut_next_reply();
            proxy.accepted()
        };
        let assert_cut = |opened: u64| {
            assert!(!proxy.cut_pending(), "no reply was cut");
            assert!(
                proxy.accepted() > opened,
                "the repeat went over a new connection"
            );
        };
        let opened = cut();
        let answers = store.release(vec![jobs[1].claim]).await.expect("release");
        assert_cut(opened);
        assert!(matches!(answers[..], [Ok(())]), "{answers:?}");
        let info = store.get(ids[1]).await.expect("get").expect("job");
        assert_eq!((info.status(), info.attempts), (JobStatus::Scheduled, 0));
        // A first try with the handed-back claim is still refused.
        let answers = store.release(vec![jobs[1].claim]).await.expect("release");
        assert!(matches!(answers[..], [Err(_)]), "{answers:?}");

        for job in &jobs[2..] {
            store
                .fail(job, Failure::permanent("no"))
                .await
                .expect("fail");
        }
        let opened = cut();
        let revived = store.revive(ReviveTarget::One(ids[2])).await;
        assert_cut(opened);
        assert_eq!(revived.expect("revive one"), 1);
        assert_eq!(
            store.get(ids[2]).await.expect("get").expect("job").status(),
            JobStatus::Scheduled
        );

        let opened = cut();
        let all = ReviveTarget::AllDead {
            queue: Some("lost".to_string()),
        };
        let revived = store.revive(all).await;
        assert_cut(opened);
        assert_eq!(revived.expect("revive all"), 2);
        for id in &ids[3..] {
            let info = store.get(*id).await.expect("get").expect("job");
            assert_eq!(info.status(), JobStatus::Scheduled);
        }
    });
}

/// The source of a per-queue script, as the store sends it: the prelude, then its body.
fn queue_script(body: &str) -> String {
    format!("{}\n{body}", include_str!("../src/lua/prelude.lua"))
}

/// Runs `source` on `queue`'s keys as the store does (the key base and its never-written
/// second key), with `args`.
async fn eval(store: &RedisBackend, source: &str, queue: &str, args: &[String]) -> redis::Value {
    let [base, absent] = store.keys().script_keys(queue);
    redis::cmd("EVAL")
        .arg(source)
        .arg(2)
        .arg(base)
        .arg(absent)
        .arg(args)
        .query_async(&mut store.connection())
        .await
        .expect("the script runs")
}

/// The time to live of `queue`'s kept reply of request `rid`, in milliseconds.
async fn request_ttl(store: &RedisBackend, queue: &str, rid: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(format!("{}req:{rid}", store.keys().queue_base(queue)))
        .query_async(&mut store.connection())
        .await
        .unwrap()
}

/// A try of an enqueue or a hand-back that reaches the server only after its repeat went
/// through (held up behind a long script, say, while the client timed out and repeated)
/// answers what the repeat did. Before, only a try marked as a repeat looked for the kept
/// reply: the late first try enqueued every job a second time, and a late hand-back was
/// refused. Each script runs here as the store sends it, twice with one request id, the
/// second time as the late try.
#[tokio::test]
async fn a_try_arriving_after_its_repeat_answers_what_the_repeat_did() {
    require_redis!();
    let store = common::store(clock()).await;
    let first = store
        .enqueue(NewJob::new("late", "k", vec![]))
        .await
        .unwrap();
    let number = first.0 & 0xffff;
    let now = clock().now();
    let retry = serde_json::to_string(&RetryPolicy::default()).unwrap();
    let keep_ms = 120_000;
    let mut args = vec![
        now.to_string(),
        "1".to_string(),
        "late-enqueue".to_string(),
        keep_ms.to_string(),
        number.to_string(),
    ];
    args.extend([
        "k".to_string(),
        "+t".to_string(),
        "payload".to_string(),
        now.to_string(),
        retry,
        String::new(),
        "error".to_string(),
        String::new(),
        "{}".to_string(),
        "0".to_string(),
    ]);
    let enqueue = queue_script(include_str!("../src/lua/enqueue.lua"));
    let repeat = eval(&store, &enqueue, "late", &args).await;
    let late = eval(&store, &enqueue, "late", &args).await;
    assert_eq!(late, repeat);
    let stats = store.stats().await.unwrap();
    assert_eq!(stats[0].counts.scheduled, 2, "one job enqueued, not two");
    let ttl = request_ttl(&store, "late", "late-enqueue").await;
    assert!(ttl > 60_000 && ttl <= keep_ms, "kept {ttl} ms");

    let claimed = store.claim("late", 1, LEASE).await.unwrap();
    let claim = claimed[0].claim;
    let args = [
        now.to_string(),
        "late-release".to_string(),
        keep_ms.to_string(),
        claim.id.0.to_string(),
        claim.token.0.to_string(),
    ];
    let handback = queue_script(include_str!("../src/lua/handback.lua"));
    let repeat = eval(&store, &handback, "late", &args).await;
    let late = eval(&store, &handback, "late", &args).await;
    assert_eq!(late, repeat);
    let info = store.get(claim.id).await.unwrap().unwrap();
    assert_eq!((info.status(), info.attempts), (JobStatus::Scheduled, 0));
}

/// The replies kept under request ids live for the client's whole retry window (its tries
/// times its connect and reply timeouts, plus the backoff between them), not a fixed minute
/// that a patient client's repeats can outlast.
#[tokio::test]
async fn requests_are_kept_for_the_clients_whole_retry_window() {
    require_redis!();
    let options = RedisOptions {
        retries: 10,
        ..common::options(clock()).response_timeout(Duration::from_secs(20))
    };
    // 11 tries of 5 s connect + 20 s reply, backing off 40 + 80 + 160 + 320 + 6 * 500 ms.
    let window = 11 * 25_000 + 3_600;
    let store = common::connect(options).await;
    store
        .enqueue(NewJob::new("kept", "k", vec![]))
        .await
        .unwrap();
    let jobs = store.claim("kept", 1, LEASE).await.unwrap();
    store.release(vec![jobs[0].claim]).await.unwrap();
    let pattern = format!("{}req:*", store.keys().queue_base("kept"));
    let kept: Vec<String> = redis::cmd("KEYS")
        .arg(pattern)
        .query_async(&mut store.connection())
        .await
        .unwrap();
    assert_eq!(kept.len(), 2, "{kept:?}");
    for key in kept {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut store.connection())
            .await
            .unwrap();
        assert!(ttl > window - 10_000 && ttl <= window, "{key}: {ttl} ms");
    }
}

/// In a batch over two queues, the entries of a queue whose script failed for good (its
/// `leased` set made a string behind the store's back) get that failure as it is, a
/// permanent store error, while the other queue's entries go through. Before, every failed
/// queue's entries were relabelled as the store being unavailable, which invites a repeat
/// that can only fail again.
#[tokio::test]
async fn a_queue_failing_for_good_in_a_batch_keeps_its_errors_kind() {
    require_redis!();
    let store = common::store(clock()).await;
    for queue in ["good", "broken"] {
        store
            .enqueue(NewJob::new(queue, "k", vec![]))
            .await
            .unwrap();
    }
    let good = store.claim("good", 1, LEASE).await.unwrap().remove(0);
    let broken = store.claim("broken", 1, LEASE).await.unwrap().remove(0);
    let _: () = redis::cmd("SET")
        .arg(format!("{}leased", store.keys().queue_base("broken")))
        .arg("not a sorted set")
        .query_async(&mut store.connection())
        .await
        .unwrap();

    let answers = store
        .heartbeat_many(vec![good.claim, broken.claim], LEASE)
        .await
        .expect("one queue answered");
    assert!(answers[0].is_ok(), "{answers:?}");
    let err = answers[1]
        .as_ref()
        .expect_err("the broken queue's script fails");
    assert!(matches!(err, BackendError::Store(_)), "{err:?}");
    assert!(err.to_string().contains("WRONGTYPE"), "{err}");

    let settled = store
        .settle(vec![
            fairq_worker::Finished::new(&good, Ok(())),
            fairq_worker::Finished::new(&broken, Ok(())),
        ])
        .await
        .expect("one queue answered");
    assert!(settled[0].is_ok(), "{settled:?}");
    let err = settled[1]
        .as_ref()
        .expect_err("the broken queue's script fails");
    assert!(matches!(err, BackendError::Store(_)), "{err:?}");
    assert!(err.to_string().contains("WRONGTYPE"), "{err}");
}

/// Attempt counters and lease tokens must be whole numbers. A fractional one (`1.5`, which
/// Lua's `tonumber` takes) was claimed before: the claim handed out the token rounded down,
/// which no longer matched the stored one, so the job could never be settled. Now the claim
/// sets such jobs aside as it sets aside other unreadable records.
#[tokio::test]
async fn a_claim_sets_aside_jobs_whose_counts_are_not_whole_numbers() {
    require_redis!();
    let store = common::store(clock()).await;
    let ids = store
        .enqueue_many((0..4).map(|_| NewJob::new("q", "k", vec![])).collect())
        .await
        .unwrap();
    corrupt(&store, "q", ids[1].0, "attempts", "1.5").await;
    corrupt(&store, "q", ids[2].0, "token", "0.5").await;
    corrupt(&store, "q", ids[3].0, "token", "-1").await;
    let jobs = store.claim("q", 4, LEASE).await.unwrap();
    let claimed: Vec<_> = jobs.iter().map(|j| j.claim.id).collect();
    assert_eq!(claimed, [ids[0]]);
    for bad in &ids[1..] {
        let info = store.get(*bad).await.unwrap().unwrap();
        assert_eq!(info.status(), JobStatus::Dead, "{bad} is set aside");
        let error = info.last_error.unwrap_or_default();
        assert!(error.contains("corrupt record"), "{error}");
    }
    let counts = &store.stats().await.unwrap()[0].counts;
    assert_eq!((counts.running, counts.dead, counts.scheduled), (1, 3, 0));
    store.complete(jobs[0].claim).await.unwrap();
}

/// A running job whose token or attempt counter was made unreadable behind the store's back
/// fails neither the settlement of its batch nor the rescue of its queue. Before, a
/// fractional attempt counter failed the whole batch's script (`HINCRBY` by a fraction),
/// and any such field failed every rescue of the queue (the expired jobs' fields were read
/// as integers all at once), so no lease of the queue was ever taken back again.
#[tokio::test]
async fn unreadable_counts_of_running_jobs_stop_neither_settling_nor_rescue() {
    require_redis!();
    let clock = clock();
    let store = common::store(clock.clone()).await;
    let ids = store
        .enqueue_many((0..4).map(|_| NewJob::new("q", "k", vec![])).collect())
        .await
        .unwrap();
    let mut jobs = store.claim("q", 4, LEASE).await.unwrap();
    jobs.sort_by_key(|j| j.claim.id);
    corrupt(&store, "q", ids[1].0, "token", "2.5").await;
    corrupt(&store, "q", ids[2].0, "attempts", "1.5").await;
    // A lease whose job is gone altogether.
    let leased = format!("{}leased", store.keys().queue_base("q"));
    let gone = ids[3].0 + 65_536 * 100;
    let _: () = redis::cmd("ZADD")
        .arg(&leased)
        .arg(1)
        .arg(gone)
        .query_async(&mut store.connection())
        .await
        .unwrap();

    // The job whose token is intact settles, and its batch with it.
    let settled = store
        .settle(vec![
            fairq_worker::Finished::new(&jobs[2], Ok(())),
            fairq_worker::Finished::new(&jobs[3], Ok(())),
        ])
        .await
        .unwrap();
    assert!(settled.iter().all(Result::is_ok), "{settled:?}");

    clock.advance(LEASE + Duration::from_secs(1));
    // The expired lease is taken back, the unreadable job set aside.
    assert_eq!(store.rescue("q").await.unwrap(), 2);
    assert_ne!(
        store.get(ids[0]).await.unwrap().unwrap().status(),
        JobStatus::Running
    );
    let info = store.get(ids[1]).await.unwrap().unwrap();
    assert_eq!(info.status(), JobStatus::Dead);
    let error = info.last_error.unwrap_or_default();
    assert!(error.contains("corrupt record"), "{error}");
    let left: Vec<String> = redis::cmd("ZRANGE")
        .arg(&leased)
        .arg(0)
        .arg(-1)
        .query_async(&mut store.connection())
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(store.rescue("q").await.unwrap(), 0);
    let counts = &store.stats().await.unwrap()[0].counts;
    assert_eq!((counts.running, counts.succeeded), (0, 2));
}

/// A success whose reply a proxy cuts is repeated, and the repeat answers the dependents in
/// another queue that its first try released, so the store releases them at once. Before,
/// the repeat answered the success alone (the first try had deleted the registrations), and
/// the dependent stayed blocked until its queue's recheck, a minute later.
#[test]
fn a_success_repeated_after_its_reply_was_lost_still_releases_its_dependents_elsewhere() {
    if !common::available() {
        return;
    }
    let (proxy, url) = proxied();
    common::runtime().block_on(async {
        // Run times are not flushed behind the test's back: nothing but its own calls
        // crosses the proxy, so the cut falls on the call that follows it.
        let options = RedisOptions {
            timing_flush: Duration::from_secs(3_600),
            ..common::options(clock())
        };
        let _guard = common::Guard::new(options.prefix.clone());
        let store = RedisBackend::connect(&url, options).await.expect("connect");
        let warm = store.enqueue(NewJob::new("a", "k", vec![])).await.unwrap();
        let dep = store.enqueue(NewJob::new("a", "k", vec![])).await.unwrap();
        let dependent = store
            .enqueue(NewJob::new("b", "k", vec![]).after(dep))
            .await
            .unwrap();
        let mut jobs = store.claim("a", 2, LEASE).await.unwrap();
        jobs.sort_by_key(|j| j.claim.id);
        assert_eq!(
            jobs.iter().map(|j| j.claim.id).collect::<Vec<_>>(),
            [warm, dep]
        );
        // A whole settlement first, so the cut falls on the script of the next one.
        store.complete(jobs[0].claim).await.unwrap();

        let opened = proxy.accepted();
        proxy.cut_next_reply();
        store
            .complete(jobs[1].claim)
            .await
            .expect("the repeat answers that the job succeeded");
        assert!(!proxy.cut_pending(), "no reply was cut");
        assert!(
            proxy.accepted() > opened,
            "the repeat went over a new connection"
        );
        assert_eq!(
            store.get(dependent).await.unwrap().unwrap().status(),
            JobStatus::Scheduled,
            "the dependent is released"
        );
        let released = store.claim("b", 1, LEASE).await.unwrap();
        assert_eq!(
            released.iter().map(|j| j.claim.id).collect::<Vec<_>>(),
            [dependent]
        );
    });
}

/// Run times another client took before a queue was removed, flushed afterwards, are
/// dropped: they used to bring back the removed queue's `pstat` and `hist`, and with them the
/// queue in `stats`.
#[tokio::test]
async fn run_times_flushed_after_their_queue_was_removed_do_not_bring_it_back() {
    require_redis!();
    let options = RedisOptions {
        timing_flush: Duration::from_secs(3_600),
        ..common::options(clock())
    };
    let operator = common::connect(options.clone()).await;
    let worker = RedisBackend::connect(&common::url(), options)
        .await
        .expect("connect");
    worker
        .enqueue(NewJob::new("gone", "k", vec![]))
        .await
        .unwrap();
    let job = worker.claim("gone", 1, LEASE).await.unwrap().remove(0);
    // The worker holds the run time; the flush is an hour off.
    worker.complete(job.claim).await.unwrap();
    assert_eq!(operator.remove_queue("gone").await.unwrap(), 1);
    assert!(operator.stats().await.unwrap().is_empty());
    // The worker's own stats call flushes its run times first.
    let listed: Vec<String> = worker
        .stats()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.queue)
        .collect();
    assert!(listed.is_empty(), "{listed:?}");
    assert!(operator.stats().await.unwrap().is_empty());
}
