//! Many claimers and workers on one queue, each with its own store (as separate processes
//! would have): nobody shares a job, nothing is lost, nothing runs twice.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairq_postgres::{PgBackend, PgOptions};
use fairq_worker::{Backend, Job, JobId, JobStatus, NewJob, QueueConfig, Worker};

const LEASE: Duration = Duration::from_secs(300);

async fn another_store(t: &common::TestStore, pool: usize) -> PgBackend {
    PgBackend::connect(
        &common::url(),
        PgOptions::default()
            .schema(&t.schema)
            .pool_size(pool)
            .clock(t.clock.clone()),
    )
    .await
    .expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_concurrent_claimers_never_share_a_job() {
    let t = store_or_skip!("share");
    let jobs: Vec<NewJob> = (0..2_000)
        .map(|i| NewJob::new("q", "k", vec![]).key(format!("tenant{}", i % 37)))
        .collect();
    let all: HashSet<JobId> = t
        .store
        .enqueue_many(jobs)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let mut claimers = Vec::new();
    for _ in 0..4 {
        let store = another_store(&t, 2).await;
        claimers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let batch = store.claim("q", 7, LEASE).await.expect("claim");
                if batch.is_empty() {
                    break;
                }
                for job in batch {
                    assert_eq!(job.attempt, 1, "a job was claimed twice");
                    store.complete(job.claim).await.expect("complete");
                    mine.push(job.claim.id);
                }
            }
            mine
        }));
    }
    let mut seen = HashSet::new();
    let mut busy = 0;
    for claimer in claimers {
        let mine = claimer.await.unwrap();
        busy += usize::from(!mine.is_empty());
        for id in mine {
            assert!(seen.insert(id), "job {id} went to two claimers");
        }
    }
    assert_eq!(seen, all, "every job was claimed");
    assert!(busy >= 2, "the claimers did run concurrently");
    let stats = t.store.stats().await.unwrap();
    assert_eq!(stats[0].counts.succeeded, 2_000);
    assert_eq!(stats[0].counts.pending(), 0);
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_jobs_over_eight_workers_each_complete_exactly_once() {
    let t = store_or_skip!("tenk");
    const N: usize = 10_000;
    let runs: Arc<Mutex<HashMap<JobId, u32>>> = Arc::default();
    let (done_tx, mut done_rx) = tokio::sync::watch::channel(0usize);
    let done_tx = Arc::new(done_tx);
    let mut handles = Vec::new();
    for _ in 0..8 {
        let store = another_store(&t, 3).await;
        let runs = runs.clone();
        let done_tx = done_tx.clone();
        let handle = Worker::builder(store)
            .queue(
                "bulk",
                QueueConfig::default()
                    .concurrency(4)
                    .lease(LEASE)
                    .poll_interval(Duration::from_millis(200)),
            )
            .handle("noop", move |job: Job| {
                let runs = runs.clone();
                let done_tx = done_tx.clone();
                async move {
                    let total = {
                        let mut runs = runs.lock().unwrap();
                        *runs.entry(job.claim.id).or_insert(0) += 1;
                        runs.len()
                    };
                    done_tx.send_replace(total);
                    Ok::<_, String>(())
                }
            })
            .build()
            .unwrap()
            .start()
            .unwrap();
        handles.push(handle);
    }
    let ids: Vec<JobId> = {
        let mut ids = Vec::new();
        for chunk in 0..10 {
            let jobs: Vec<NewJob> = (0..N / 10)
                .map(|i| NewJob::new("bulk", "noop", vec![]).key(format!("t{}", (chunk + i) % 50)))
                .collect();
            ids.extend(t.store.enqueue_many(jobs).await.unwrap());
        }
        ids
    };
    tokio::time::timeout(Duration::from_secs(120), done_rx.wait_for(|n| *n >= N))
        .await
        .expect("all jobs ran in time")
        .unwrap();
    for handle in handles {
        assert!(handle.shutdown(Duration::from_secs(30)).await.is_clean());
    }
    {
        let runs = runs.lock().unwrap();
        assert_eq!(runs.len(), N);
        assert!(runs.values().all(|&n| n == 1), "a job ran twice");
        assert!(ids.iter().all(|id| runs.contains_key(id)));
    }
    let stats = t.store.stats().await.unwrap();
    assert_eq!(stats[0].counts.get(JobStatus::Succeeded), N as u64);
    assert_eq!(stats[0].counts.pending(), 0);
    t.cleanup().await;
}

/// A rescue pass releases blocked jobs whose dependency succeeded (a repair for a raced
/// release). If another session releases and claims such a job between the statement's
/// snapshot and its row lock, the rescue must leave the now running job alone: set back to
/// `scheduled` while it runs, it could be claimed a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rescue_leaves_alone_a_stuck_dependent_claimed_meanwhile() {
    let t = store_or_skip!("straggler");
    let schema = &t.schema;
    let parent = t
        .store
        .enqueue(NewJob::new("q", "k", vec![]))
        .await
        .unwrap();
    let child = t
        .store
        .enqueue(NewJob::new("q", "k", vec![]).after(parent))
        .await
        .unwrap();
    let job = t.store.claim("q", 1, LEASE).await.unwrap().remove(0);
    assert_eq!(job.claim.id, parent);
    t.store.complete(job.claim).await.unwrap();
    // The dependent is stuck: blocked although its dependency succeeded.
    let child_db = i64::try_from(child.0).unwrap();
    t.admin
        .execute(
            &format!(
                "UPDATE \"{schema}\".jobs SET state = 'blocked', round = NULL, \
                 ready_seq = NULL, due_at = 9223372036854775807 WHERE id = $1"
            ),
            &[&child_db],
        )
        .await
        .unwrap();

    // Another session releases and claims it, and holds the row until it commits.
    let (mut other, connection) = tokio_postgres::connect(&common::url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let holder: i32 = other
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let tx = other.transaction().await.unwrap();
    let now = i64::try_from(fairq_worker::Clock::now(&t.clock)).unwrap();
    tx.execute(
        &format!(
            "UPDATE \"{schema}\".jobs SET state = 'running', round = 1, ready_seq = id, \
             due_at = $2::int8, attempts = 1, token = token + 1, claimed_at = $2::int8, \
             lease_deadline = $2::int8 + 300000 WHERE id = $1"
        ),
        &[&child_db, &now],
    )
    .await
    .unwrap();

    let rescuer = t.store.clone();
    let rescue = tokio::spawn(async move { rescuer.rescue("q").await });
    common::someone_waits_for(&t.admin, holder).await;
    tx.commit().await.unwrap();
    assert_eq!(rescue.await.unwrap().unwrap(), 0);

    let info = t.store.get(child).await.unwrap().expect("the job exists");
    assert!(
        matches!(info.state, fairq_core::job::State::Running { .. }),
        "{:?}",
        info.state
    );
    assert!(
        t.store.claim("q", 10, LEASE).await.unwrap().is_empty(),
        "a running job is claimed again"
    );
    t.cleanup().await;
}
