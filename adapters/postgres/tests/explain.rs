//! The query plan of a claim with a deep backlog. A CI-sized check (50,000 ready jobs over
//! 1,000 keys, analysed) runs with every test run and asserts the claim is driven by the
//! ready index; the full one (1,000,000 jobs over 10,000 keys) is ignored by default (it loads
//! a million rows): run it by hand to refresh the plan quoted in the README:
//!
//! ```text
//! cargo test --release -p fairq-postgres --test explain -- --ignored --nocapture
//! ```

mod common;

use fairq_worker::{Backend, NewJob};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "loads 1,000,000 jobs; run by hand to refresh the README"]
async fn explain_the_claim_at_a_million_jobs_and_ten_thousand_keys() {
    explain_the_claim(1_000_000, 10_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_is_index_driven_at_fifty_thousand_jobs_and_a_thousand_keys() {
    explain_the_claim(50_000, 1_000).await;
}

async fn explain_the_claim(total: usize, keys: usize) {
    let t = store_or_skip!("explain");
    let started = std::time::Instant::now();
    for batch in 0..total / 10_000 {
        let jobs: Vec<NewJob> = (0..10_000)
            .map(|i| {
                NewJob::new("big", "noop", Vec::new())
                    .key(format!("tenant{}", (batch * 7 + i) % keys))
            })
            .collect();
        t.store.enqueue_many(jobs).await.unwrap();
    }
    eprintln!("loaded {total} jobs in {:?}", started.elapsed());
    t.admin
        .batch_execute(&format!("ANALYZE \"{}\".jobs", t.schema))
        .await
        .unwrap();
    // Warm up (and let the first claims mark nothing dead yet), then explain.
    t.store
        .claim("big", 10, std::time::Duration::from_secs(30))
        .await
        .unwrap();
    let plan = t.store.explain_claim("big", 10).await.unwrap();
    println!("{plan}");
    assert!(
        plan.contains("Index Scan using jobs_ready"),
        "the claim must be driven by the ready index:\n{plan}"
    );
    assert!(!plan.contains("Seq Scan on jobs"), "{plan}");
    // The update finds each locked row by its tuple id, not by a second descent of the
    // primary key.
    assert!(
        plan.contains("Tid Scan on jobs") && !plan.contains("jobs_pkey"),
        "the claim's update must reach the locked rows by tuple id:\n{plan}"
    );
    t.cleanup().await;
}

/// A lone enqueue (what wakes an idle worker) runs a statement whose plan the server keeps:
/// after a few runs on a connection its prepared statement uses one generic plan. The batch
/// statement's arrays make the server plan it anew on every call, which costs more than
/// running it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_enqueue_is_not_planned_on_every_call() {
    let t = store_or_skip!("oneplan", fairq_postgres::PgOptions::default().pool_size(1));
    for i in 0..12 {
        let job = NewJob::new("q", "noop", Vec::new());
        let job = if i % 2 == 0 {
            job.key(format!("k{i}"))
        } else {
            job
        };
        t.store.enqueue(job).await.unwrap();
    }
    // The pool's only connection: the one that ran the enqueues.
    let client = t.store.pool().get().await.unwrap();
    let rows = client
        .query(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements \
             WHERE statement LIKE '%$13::jsonb' || ' AS payload_json%'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "the one-job insert is prepared once");
    let (generic, custom): (i64, i64) = (rows[0].get(0), rows[0].get(1));
    assert!(
        generic > 0 && custom + generic == 12,
        "generic {generic}, custom {custom}"
    );
    drop(client);
    t.cleanup().await;
}

/// A claim that takes a large share of a small table (a queue near the end of a drain, or a
/// worker with a deep prefetch buffer) still reaches its rows by tuple id: the planner once
/// judged a scan of the whole table cheaper there, which made such claims three times slower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_claim_from_a_small_table_reaches_its_rows_by_tuple_id() {
    let t = store_or_skip!("explainbig");
    let jobs: Vec<NewJob> = (0..4_000)
        .map(|i| NewJob::new("q", "noop", Vec::new()).key(format!("k{}", i % 16)))
        .collect();
    t.store.enqueue_many(jobs).await.unwrap();
    t.admin
        .batch_execute(&format!("ANALYZE \"{}\".jobs", t.schema))
        .await
        .unwrap();
    let plan = t.store.explain_claim("q", 1_000).await.unwrap();
    assert!(!plan.contains("Seq Scan on jobs"), "{plan}");
    assert!(plan.contains("Tid Scan on jobs"), "{plan}");
    t.cleanup().await;
}
