//! fairq-postgres against a hand-written minimal queue on the same server, in one run.
//!
//! * baseline: 100,000 rows deleted one per statement, `DELETE ... WHERE id = (SELECT id ...
//!   FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id`, by 8 and by 32 concurrent connections
//!   (each statement its own transaction, as a minimal queue runs it), and the batched floor:
//!   the same with 100 rows per statement on 8 connections;
//! * burn-down: 100,000 no-op jobs run by the fairq `Worker` with concurrency 8 and 32
//!   (batched claims, batched settlement into the archive), and the same jobs through the
//!   store alone: loops that settle 100 jobs and claim the next 100 in one transaction
//!   (`settle_and_claim`), with the share of HOT updates on the jobs table;
//! * enqueue: `enqueue_many` in batches of 1,000 against a bare `INSERT ... SELECT unnest`;
//! * latency: enqueue-to-start with an idle worker waiting in `wait_for_jobs` (LISTEN/NOTIFY);
//! * claim cost: one-job claims with 1 key versus 10,000 keys, and with 10,000 versus
//!   1,000,000 jobs queued.
//!
//! Needs PostgreSQL at `FAIRQ_PG_URL` (default `postgres://postgres@127.0.0.1:5432/test`);
//! without one it says so and exits successfully. Everything runs in a schema of its own,
//! dropped at the end. Run with `cargo bench -p fairq-benches --bench postgres`; name parts
//! to run only those (`-- latency`, or any of `burn-down enqueue latency claims`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use fairq_benches::{idle_latency, latency_line};
use fairq_postgres::{PgBackend, PgOptions};
use fairq_worker::{random_u64, Backend, Finished, Job, NewJob, QueueConfig, Worker};
use tokio_postgres::NoTls;

const JOBS: usize = 100_000;
const LEASE: Duration = Duration::from_secs(300);

fn url() -> String {
    std::env::var("FAIRQ_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

async fn connect() -> Option<tokio_postgres::Client> {
    let url = url();
    let attempt = tokio_postgres::connect(&url, NoTls);
    match tokio::time::timeout(Duration::from_secs(5), attempt).await {
        Ok(Ok((client, connection))) => {
            tokio::spawn(connection);
            Some(client)
        }
        _ => None,
    }
}

async fn must_connect() -> tokio_postgres::Client {
    connect().await.expect("connect to PostgreSQL")
}

/// The minimal queue: a table of ids, drained by deletes of `batch` rows at a time.
async fn baseline(schema: &str, concurrency: usize, batch: usize) -> Duration {
    let admin = must_connect().await;
    admin
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS \"{schema}\".raw;
             CREATE TABLE \"{schema}\".raw (id bigserial PRIMARY KEY, payload bytea NOT NULL);
             INSERT INTO \"{schema}\".raw (payload) SELECT '' FROM generate_series(1, {JOBS});"
        ))
        .await
        .expect("load the baseline table");
    admin
        .batch_execute(&format!("VACUUM ANALYZE \"{schema}\".raw"))
        .await
        .expect("vacuum the baseline table");
    let sql = Arc::new(format!(
        "DELETE FROM \"{schema}\".raw WHERE id IN \
         (SELECT id FROM \"{schema}\".raw ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {batch}) \
         RETURNING id"
    ));
    let mut clients = Vec::new();
    for _ in 0..concurrency {
        clients.push(must_connect().await);
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for client in clients {
        let sql = sql.clone();
        tasks.push(tokio::spawn(async move {
            let statement = client.prepare(&sql).await.expect("prepare");
            let mut done = 0usize;
            loop {
                let rows = client.query(&statement, &[]).await.expect("delete");
                if rows.is_empty() {
                    break done;
                }
                done += rows.len();
            }
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.expect("task");
    }
    let took = start.elapsed();
    assert_eq!(total, JOBS, "the baseline drained every row");
    took
}

async fn store(schema: &str, pool: usize) -> PgBackend {
    PgBackend::connect(
        &url(),
        PgOptions::default()
            .schema(schema)
            .pool_size(pool)
            .migrate(true),
    )
    .await
    .expect("connect the store")
}

/// Enqueues `n` jobs over `keys` keys in batches of 1,000; returns the time taken.
async fn fill(store: &PgBackend, queue: &str, n: usize, keys: usize) -> Duration {
    let start = Instant::now();
    let mut i = 0;
    while i < n {
        let batch = (n - i).min(1_000);
        let jobs = (i..i + batch)
            .map(|j| NewJob::new(queue, "noop", Vec::new()).key(format!("k{}", j % keys)))
            .collect();
        store.enqueue_many(jobs).await.expect("enqueue");
        i += batch;
    }
    start.elapsed()
}

/// The peer of `fill`: bare rows through the same kind of batched statement.
async fn raw_insert(schema: &str, n: usize) -> Duration {
    let client = must_connect().await;
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS \"{schema}\".raw_in (id bigserial PRIMARY KEY, \
             key text, payload bytea NOT NULL)"
        ))
        .await
        .expect("create");
    let sql = format!(
        "INSERT INTO \"{schema}\".raw_in (key, payload) SELECT * FROM unnest($1::text[], $2::bytea[])"
    );
    let statement = client.prepare(&sql).await.expect("prepare");
    let start = Instant::now();
    let mut i = 0;
    while i < n {
        let batch = (n - i).min(1_000);
        let keys: Vec<String> = (i..i + batch).map(|j| format!("k{}", j % 100)).collect();
        let payloads: Vec<&[u8]> = (0..batch).map(|_| &b""[..]).collect();
        client
            .execute(&statement, &[&keys, &payloads])
            .await
            .expect("insert");
        i += batch;
    }
    start.elapsed()
}

/// 100,000 no-op jobs through the fairq worker at `concurrency`.
async fn burn_down(schema: &str, concurrency: usize) -> Duration {
    let store = store(schema, 8).await;
    let queue = format!("burn{concurrency}");
    fill(&store, &queue, JOBS, 100).await;
    let (done_tx, mut done_rx) = tokio::sync::watch::channel(0usize);
    let done_tx = Arc::new(done_tx);
    let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let start = Instant::now();
    let handle = Worker::builder(store.clone())
        .queue(
            &queue,
            QueueConfig::default().concurrency(concurrency).lease(LEASE),
        )
        .handle("noop", move |_job: Job| {
            let counter = counter.clone();
            let done_tx = done_tx.clone();
            async move {
                let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if n.is_multiple_of(1_000) {
                    done_tx.send_replace(n);
                }
                Ok::<_, String>(())
            }
        })
        .build()
        .expect("worker")
        .start()
        .expect("start");
    done_rx
        .wait_for(|n| *n >= JOBS)
        .await
        .expect("all jobs ran");
    // Finished means completed in the store, not just run.
    loop {
        let stats = store.stats().await.expect("stats");
        let s = stats
            .iter()
            .find(|s| s.queue == queue)
            .expect("queue stats");
        if s.counts.succeeded as usize == JOBS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = start.elapsed();
    handle.shutdown(Duration::from_secs(10)).await;
    took
}

/// 100,000 no-op jobs through the store alone: `loops` tasks, each settling its last 100 jobs
/// and claiming the next 100 in one transaction. Returns the time and the share of the jobs
/// table's updates that were HOT.
async fn store_loop(schema: &str, loops: usize) -> (Duration, f64) {
    let store = store(schema, loops + 2).await;
    let queue = format!("loop{loops}");
    fill(&store, &queue, JOBS, 100).await;
    let admin = must_connect().await;
    let counters = format!(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables \
         WHERE schemaname = '{schema}' AND relname = 'jobs'"
    );
    let before = admin.query_one(&counters, &[]).await.expect("counters");
    let (upd0, hot0): (i64, i64) = (before.get(0), before.get(1));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..loops {
        let store = store.clone();
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            let mut done = 0usize;
            let mut jobs = store.claim(&queue, 100, LEASE).await.expect("claim");
            while !jobs.is_empty() {
                let batch = jobs.iter().map(|j| Finished::new(j, Ok(()))).collect();
                let out = store
                    .settle_and_claim(batch, &queue, 100, LEASE)
                    .await
                    .expect("settle and claim");
                done += out.settled.iter().filter(|a| a.is_ok()).count();
                jobs = out.claimed.expect("claimed");
            }
            done
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.expect("task");
    }
    let took = start.elapsed();
    assert_eq!(total, JOBS, "every job was settled once");
    drop(store);
    // The store's connections report their counters as they close.
    let mut share = 0.0;
    for _ in 0..200 {
        let after = admin.query_one(&counters, &[]).await.expect("counters");
        let (upd, hot): (i64, i64) = (after.get(0), after.get(1));
        if upd - upd0 >= JOBS as i64 {
            share = (hot - hot0) as f64 / (upd - upd0) as f64;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (took, share)
}

/// Mean time of `claims` one-job claims from a queue prepared by `prepare`.
async fn claim_cost(store: &PgBackend, queue: &str, claims: usize) -> Duration {
    // Warm up the plan and the cache.
    for _ in 0..50 {
        store.claim(queue, 1, LEASE).await.expect("claim");
    }
    let start = Instant::now();
    for _ in 0..claims {
        let jobs = store.claim(queue, 1, LEASE).await.expect("claim");
        assert_eq!(jobs.len(), 1);
    }
    start.elapsed() / claims as u32
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

/// The parts of the bench, in the order they run.
const PARTS: [&str; 4] = ["burn-down", "enqueue", "latency", "claims"];

async fn run(parts: &[&str]) {
    let Some(admin) = connect().await else {
        eprintln!(
            "postgres bench: no PostgreSQL at {} (set FAIRQ_PG_URL); skipping",
            url()
        );
        return;
    };
    let schema = format!("fqbench_{:08x}", random_u64() as u32);
    admin
        .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
        .await
        .expect("create the bench schema");
    let version: String = admin
        .query_one("SHOW server_version", &[])
        .await
        .expect("version")
        .get(0);
    println!(
        "PostgreSQL {version}, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    if parts.contains(&"burn-down") {
        burn_downs(&schema).await;
    }
    let store = store(&schema, 4).await;
    if parts.contains(&"enqueue") {
        enqueues(&schema, &store).await;
    }
    if parts.contains(&"latency") {
        latency(&store).await;
    }
    if parts.contains(&"claims") {
        claims(&schema, &store, &admin).await;
    }
    drop(store);
    admin
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .await
        .expect("drop the bench schema");
}

/// The minimal queue against the fairq worker and the store alone.
async fn burn_downs(schema: &str) {
    println!("\n== burn-down of {JOBS} no-op jobs ==");
    let floor = baseline(schema, 8, 100).await;
    println!(
        "batched floor (100-row deletes, 8 connections): {:.0} rows/s",
        JOBS as f64 / floor.as_secs_f64()
    );
    println!(
        "{:<14} {:>12} {:>12} {:>12} {:>8} {:>14}",
        "concurrency", "baseline", "fairq", "fairq jobs/s", "ratio", "vs floor"
    );
    for concurrency in [8, 32] {
        let base = baseline(schema, concurrency, 1).await;
        let fairq = burn_down(schema, concurrency).await;
        println!(
            "{:<14} {:>10.0}ms {:>10.0}ms {:>12.0} {:>7.2}x {:>13.2}x",
            concurrency,
            ms(base),
            ms(fairq),
            JOBS as f64 / fairq.as_secs_f64(),
            base.as_secs_f64() / fairq.as_secs_f64(),
            floor.as_secs_f64() / fairq.as_secs_f64()
        );
    }
    for loops in [4, 8] {
        let (took, hot) = store_loop(schema, loops).await;
        println!(
            "store alone, {loops} loops of settle_and_claim(100): {:.0} jobs/s, {:.2}x the floor, \
             {:.0}% of job updates HOT",
            JOBS as f64 / took.as_secs_f64(),
            floor.as_secs_f64() / took.as_secs_f64(),
            hot * 100.0
        );
    }
}

/// `enqueue_many` against a bare insert.
async fn enqueues(schema: &str, store: &PgBackend) {
    println!("\n== enqueue_many, {JOBS} jobs in batches of 1,000 ==");
    let raw = raw_insert(schema, JOBS).await;
    let fairq = fill(store, "enqueue", JOBS, 100).await;
    println!(
        "bare INSERT unnest: {:.0} rows/s; fairq enqueue_many: {:.0} jobs/s; ratio {:.2}x",
        JOBS as f64 / raw.as_secs_f64(),
        JOBS as f64 / fairq.as_secs_f64(),
        raw.as_secs_f64() / fairq.as_secs_f64()
    );
}

/// Enqueue-to-start latency with an idle consumer.
async fn latency(store: &PgBackend) {
    println!("\n== enqueue-to-start latency, idle worker (LISTEN/NOTIFY) ==");
    // Let the listener start, so the first samples do not measure polling.
    while !store.is_listening() {
        store
            .wait_for_jobs("latency", Duration::from_millis(5))
            .await;
    }
    let h = idle_latency(store, "latency", 300, Duration::from_millis(3)).await;
    println!("{}", latency_line(&h));
}

/// One-job claims at few and many keys, and at few and many queued jobs.
async fn claims(schema: &str, store: &PgBackend, admin: &tokio_postgres::Client) {
    println!("\n== claim cost (one-job claims) ==");
    fill(store, "one-key", 100_000, 1).await;
    fill(store, "many-keys", 100_000, 10_000).await;
    fill(store, "small", 10_000, 100).await;
    fill(store, "huge", 1_000_000, 100).await;
    admin
        .batch_execute(&format!("ANALYZE \"{schema}\".jobs"))
        .await
        .expect("analyze");
    let one = claim_cost(store, "one-key", 2_000).await;
    let many = claim_cost(store, "many-keys", 2_000).await;
    println!(
        "1 key: {:.3} ms; 10,000 keys: {:.3} ms; ratio {:.2}x",
        ms(one),
        ms(many),
        many.as_secs_f64() / one.as_secs_f64()
    );
    let small = claim_cost(store, "small", 2_000).await;
    let huge = claim_cost(store, "huge", 2_000).await;
    println!(
        "10,000 queued: {:.3} ms; 1,000,000 queued: {:.3} ms; ratio {:.2}x",
        ms(small),
        ms(huge),
        huge.as_secs_f64() / small.as_secs_f64()
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a filter that excludes this bench skips it.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let named: Vec<&str> = PARTS
        .into_iter()
        .filter(|part| args.iter().any(|a| a == part))
        .collect();
    let parts = if args.is_empty() || args.iter().any(|a| "postgres".contains(a.as_str())) {
        PARTS.to_vec()
    } else if !named.is_empty() {
        named
    } else {
        return;
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(run(&parts));
}
