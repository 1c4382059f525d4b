//! The query plan of a claim with a deep backlog: 1,000,000 ready jobs over 10,000 keys.
//! Ignored by default (it loads a million rows); run it by hand to refresh the plan quoted
//! in the README:
//!
//! ```text
//! cargo test --release -p fairq-postgres --test explain -- --ignored --nocapture
//! ```

mod common;

use fairq_worker::{Backend, NewJob};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "loads 1,000,000 jobs; run by hand to refresh the README"]
async fn explain_the_claim_at_a_million_jobs_and_ten_thousand_keys() {
    let t = store_or_skip!("explain");
    const JOBS: usize = 1_000_000;
    const KEYS: usize = 10_000;
    let started = std::time::Instant::now();
    for batch in 0..JOBS / 10_000 {
        let jobs: Vec<NewJob> = (0..10_000)
            .map(|i| {
                NewJob::new("big", "noop", Vec::new())
                    .key(format!("tenant{}", (batch * 7 + i) % KEYS))
            })
            .collect();
        t.store.enqueue_many(jobs).await.unwrap();
    }
    eprintln!("loaded {JOBS} jobs in {:?}", started.elapsed());
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
    let enqueue = t.store.producer();
    let _ = enqueue;
    t.cleanup().await;
}
