//! fairq-redis against a raw Redis list on the same server, in one run.
//!
//! * baseline: 100,000 items moved through one list by pipelined `LPUSH` then `RPOP` (1,000
//!   commands per pipeline), the physical floor of "an item in, an item out";
//! * enqueue: 100,000 jobs by `enqueue_many` (script calls of 500 jobs);
//! * burn-down: the same 100,000 no-op jobs settled and claimed by loops of `settle_and_claim`
//!   (each call settles the loop's previous jobs and claims the next ones in one script call),
//!   with 8 and 32 jobs in flight: one job per loop (8 / 32 loops, the shape of a peer that
//!   finishes one job and fetches the next in one call) and batches (2 loops of 4, 4 loops of 8);
//!   each row prints client round trips and Redis commands run inside the scripts per job (from
//!   `INFO commandstats`, so other clients of the same server inflate them);
//! * latency: enqueue-to-start with an idle worker blocked in `wait_for_jobs`;
//! * claim cost: one-job claims with every job in 1 key versus spread over 10,000 keys.
//!
//! Needs a Redis server at `FAIRQ_REDIS_URL` (default `redis://127.0.0.1:6379/`); without one
//! it says so and exits successfully. Run with `cargo bench -p fairq-benches --bench redis`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use fairq_benches::{idle_latency, latency_line};
use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::{random_u64, Backend, Finished, NewJob};

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

/// Calls per command since the server started (`INFO commandstats`).
async fn command_calls(store: &RedisBackend) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut store.connection())
        .await
        .expect("INFO commandstats");
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.split(',').find_map(|f| f.strip_prefix("calls="))?;
            Some((name.to_string(), calls.parse().ok()?))
        })
        .collect()
}

/// What one burn-down cost.
struct Burn {
    took: Duration,
    round_trips: f64,
    in_script: f64,
}

/// `loops` loops of `settle_and_claim`, each holding up to `batch` jobs, until the queue is
/// empty.
async fn burn_down(store: &RedisBackend, queue: &'static str, loops: usize, batch: usize) -> Burn {
    let before = command_calls(store).await;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..loops {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut finished: Vec<Finished> = Vec::new();
            loop {
                let out = store
                    .settle_and_claim(std::mem::take(&mut finished), queue, batch, LEASE)
                    .await
                    .expect("settle and claim");
                for answer in out.settled {
                    answer.expect("settled");
                }
                let jobs = out.claimed.expect("claimed");
                if jobs.is_empty() {
                    return;
                }
                finished = jobs.iter().map(|job| Finished::new(job, Ok(()))).collect();
            }
        }));
    }
    for task in tasks {
        task.await.expect("worker");
    }
    let took = start.elapsed();
    let after = command_calls(store).await;
    let delta =
        |name: &str| after.get(name).copied().unwrap_or(0) - before.get(name).copied().unwrap_or(0);
    let total: u64 = after.keys().map(|name| delta(name)).sum();
    let evalsha = delta("evalsha");
    Burn {
        took,
        round_trips: evalsha as f64 / JOBS as f64,
        in_script: (total - evalsha - delta("info")) as f64 / JOBS as f64,
    }
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

async fn run() {
    let probe = redis::Client::open(url())
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)));
    if probe.is_err() {
        println!("redis bench skipped: no Redis server at {}", url());
        return;
    }
    let raw = raw_baseline(JOBS).await;
    let raw_rate = rate(JOBS, raw);

    let mut enq_rate = 0.0;
    let mut burns = Vec::new();
    for (label, loops, batch) in [
        ("in flight 8: 8 loops of 1 job", 8, 1),
        ("in flight 8: 2 loops of 4 jobs", 2, 4),
        ("in flight 32: 32 loops of 1 job", 32, 1),
        ("in flight 32: 4 loops of 8 jobs", 4, 8),
    ] {
        let s = store().await;
        let took = enqueue(&s, "burn", JOBS, 100).await;
        if enq_rate == 0.0 {
            enq_rate = rate(JOBS, took);
        }
        burns.push((label, burn_down(&s, "burn", loops, batch).await));
        s.destroy().await.expect("cleanup");
    }

    let s = store().await;
    let lat = idle_latency(&s, "lat", 300, Duration::from_millis(2)).await;
    s.destroy().await.expect("cleanup");

    let s = store().await;
    let one_key = claim_cost(&s, "one", 1, 10_000).await;
    let many_keys = claim_cost(&s, "many", 10_000, 10_000).await;
    s.destroy().await.expect("cleanup");

    println!(
        "fairq-redis vs raw Redis list ({JOBS} items, server {})",
        url()
    );
    println!("| measurement | result | ratio |");
    println!("|---|---|---|");
    println!("| raw pipelined LPUSH+RPOP (baseline) | {raw_rate:.0} items/s | 1.00 |");
    println!(
        "| enqueue_many, 500 jobs per script call | {enq_rate:.0} jobs/s | {:.3} of baseline |",
        enq_rate / raw_rate
    );
    for (label, burn) in &burns {
        let r = rate(JOBS, burn.took);
        println!(
            "| burn-down, {label} | {r:.0} jobs/s; {:.2} round trips and {:.1} in-script commands per job | {:.3} of baseline |",
            burn.round_trips,
            burn.in_script,
            r / raw_rate
        );
    }
    println!(
        "| enqueue-to-start, idle worker | {} | |",
        latency_line(&lat)
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
