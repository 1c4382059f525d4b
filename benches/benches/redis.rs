//! fairq-redis against a raw Redis list on the same server, in one run.
//!
//! * baseline: 100,000 items moved through one list by pipelined `LPUSH` then `RPOP` (1,000
//!   commands per pipeline), the physical floor of "an item in, an item out";
//! * enqueue: 100,000 jobs by `enqueue_many` (pipelined script calls of 500 jobs);
//! * burn-down: the same 100,000 no-op jobs claimed (batches of 8) and completed by 8 and by
//!   32 concurrent workers on one connection;
//! * latency: enqueue-to-start with an idle worker blocked in `wait_for_jobs`;
//! * claim cost: one-job claims with every job in 1 key versus spread over 10,000 keys.
//!
//! Needs a Redis server at `FAIRQ_REDIS_URL` (default `redis://127.0.0.1:6379/`); without one
//! it says so and exits successfully. Run with `cargo bench -p fairq-benches --bench redis`.

use std::time::{Duration, Instant};

use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::{random_u64, Backend, NewJob};

const JOBS: usize = 100_000;
const LEASE: Duration = Duration::from_secs(300);

fn url() -> String {
    std::env::var("FAIRQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_string())
}

fn prefix() -> String {
    format!("fairq-bench-{:016x}", random_u64())
}

async fn raw_baseline(n: usize) -> Duration {
    let client = redis::Client::open(url()).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let key = format!("{}:raw", prefix());
    let start = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1_000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            pipe.cmd("LPUSH").arg(&key).arg(*i).ignore();
        }
        let _: () = pipe.query_async(&mut conn).await.expect("push");
    }
    let mut popped = 0;
    while popped < n {
        let mut pipe = redis::pipe();
        for _ in 0..1_000 {
            pipe.cmd("RPOP").arg(&key);
        }
        let items: Vec<Option<u64>> = pipe.query_async(&mut conn).await.expect("pop");
        popped += items.iter().flatten().count();
    }
    let took = start.elapsed();
    let _: () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .expect("del");
    took
}

async fn store() -> RedisBackend {
    RedisBackend::connect(&url(), RedisOptions::new().prefix(prefix()))
        .await
        .expect("connect")
}

async fn enqueue(store: &RedisBackend, queue: &str, n: usize, keys: usize) -> Duration {
    let start = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(5_000) {
        let jobs = chunk
            .iter()
            .map(|i| NewJob::new(queue, "noop", Vec::new()).key(format!("k{}", i % keys)))
            .collect();
        store.enqueue_many(jobs).await.expect("enqueue");
    }
    start.elapsed()
}

async fn burn_down(store: &RedisBackend, queue: &'static str, workers: usize) -> Duration {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let jobs = store.claim(queue, 8, LEASE).await.expect("claim");
                if jobs.is_empty() {
                    return;
                }
                let done = jobs.iter().map(|job| store.complete(job.claim));
                for result in futures::future::join_all(done).await {
                    result.expect("complete");
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("worker");
    }
    start.elapsed()
}

async fn latency(store: &RedisBackend, rounds: usize) -> Vec<Duration> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let worker = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut seen = 0;
            while seen < rounds {
                let jobs = store.claim("lat", 1, LEASE).await.expect("claim");
                if jobs.is_empty() {
                    store.wait_for_jobs("lat", Duration::from_secs(5)).await;
                    continue;
                }
                let started = Instant::now();
                for job in jobs {
                    store.complete(job.claim).await.expect("complete");
                    seen += 1;
                }
                tx.send(started).expect("report");
            }
        })
    };
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        // Let the worker finish its claim and block again before the next job.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let sent = Instant::now();
        store
            .enqueue(NewJob::new("lat", "noop", Vec::new()))
            .await
            .expect("enqueue");
        let started = rx.recv().await.expect("worker report");
        out.push(started.saturating_duration_since(sent));
    }
    worker.await.expect("worker");
    out
}

async fn claim_cost(store: &RedisBackend, queue: &str, keys: usize, claims: usize) -> Duration {
    enqueue(store, queue, claims * 2, keys).await;
    let start = Instant::now();
    for _ in 0..claims {
        let jobs = store.claim(queue, 1, LEASE).await.expect("claim");
        assert_eq!(jobs.len(), 1);
    }
    start.elapsed() / claims as u32
}

fn rate(n: usize, took: Duration) -> f64 {
    n as f64 / took.as_secs_f64()
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let index = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

async fn run() {
    let probe = redis::Client::open(url())
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)));
    if probe.is_err() {
        println!("redis bench skipped: no Redis server at {}", url());
        return;
    }
    let raw = raw_baseline(JOBS).await;
    let raw_rate = rate(JOBS, raw);

    let s = store().await;
    let enq = enqueue(&s, "burn8", JOBS, 100).await;
    let burn8 = burn_down(&s, "burn8", 8).await;
    s.destroy().await.expect("cleanup");
    let s = store().await;
    enqueue(&s, "burn32", JOBS, 100).await;
    let burn32 = burn_down(&s, "burn32", 32).await;
    s.destroy().await.expect("cleanup");

    let s = store().await;
    let mut lat = latency(&s, 300).await;
    lat.sort();
    s.destroy().await.expect("cleanup");

    let s = store().await;
    let one_key = claim_cost(&s, "one", 1, 10_000).await;
    let many_keys = claim_cost(&s, "many", 10_000, 10_000).await;
    s.destroy().await.expect("cleanup");

    let enq_rate = rate(JOBS, enq);
    let b8 = rate(JOBS, burn8);
    let b32 = rate(JOBS, burn32);
    println!(
        "fairq-redis vs raw Redis list ({JOBS} items, server {})",
        url()
    );
    println!("| measurement | result | ratio |");
    println!("|---|---|---|");
    println!("| raw pipelined LPUSH+RPOP (baseline) | {raw_rate:.0} items/s | 1.00 |");
    println!(
        "| enqueue_many, pipelined | {enq_rate:.0} jobs/s | {:.3} of baseline |",
        enq_rate / raw_rate
    );
    println!(
        "| burn-down, concurrency 8 | {b8:.0} jobs/s | {:.3} of baseline |",
        b8 / raw_rate
    );
    println!(
        "| burn-down, concurrency 32 | {b32:.0} jobs/s | {:.3} of baseline |",
        b32 / raw_rate
    );
    println!(
        "| enqueue-to-start, idle worker | p50 {:?}, p99 {:?} | |",
        percentile(&lat, 0.5),
        percentile(&lat, 0.99)
    );
    println!("| claim, 1 key | {one_key:?} per claim | 1.00 |");
    println!(
        "| claim, 10,000 keys | {many_keys:?} per claim | {:.2}x the 1-key cost |",
        many_keys.as_secs_f64() / one_key.as_secs_f64()
    );
}

fn main() {
    // Listing (as test runners do) measures nothing.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run());
}
