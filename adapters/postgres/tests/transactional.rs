//! Jobs that run inside their own transaction: their writes commit with their success, roll
//! back on an error or a panic, jobs they enqueue exist only if they commit, and a worker
//! whose lease was rescued cannot commit. Other jobs keep being settled in batches.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fairq_core::job::State;
use fairq_core::retry::RetryPolicy;
use fairq_postgres::PgBackend;
use fairq_worker::{
    Backend, Failure, Job, JobOutcome, JobReport, JobStatus, ListFilter, NewJob, QueueConfig,
    Worker, WorkerHandle,
};
use tokio::sync::mpsc;

const LEASE: Duration = Duration::from_secs(30);

/// A table of the test's schema that jobs write to.
async fn ledger(t: &common::TestStore) -> String {
    let table = format!("\"{}\".ledger", t.schema);
    t.admin
        .batch_execute(&format!(
            "CREATE TABLE {table} (job bigint PRIMARY KEY, note text)"
        ))
        .await
        .unwrap();
    table
}

async fn rows(t: &common::TestStore, table: &str) -> Vec<i64> {
    let rows = t
        .admin
        .query(&format!("SELECT job FROM {table} ORDER BY job"), &[])
        .await
        .unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

/// A worker on the store with every finished attempt reported on the returned channel.
fn worker(
    store: &PgBackend,
    configure: impl FnOnce(
        fairq_worker::WorkerBuilder<PgBackend>,
    ) -> fairq_worker::WorkerBuilder<PgBackend>,
) -> (WorkerHandle<PgBackend>, mpsc::UnboundedReceiver<JobReport>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let builder = Worker::builder(store.clone())
        .queue(
            "q",
            QueueConfig::default()
                .concurrency(4)
                .poll_interval(Duration::from_millis(10)),
        )
        .on_finished(move |report| {
            tx.send(report.clone()).ok();
        });
    let handle = configure(builder).build().unwrap().start().unwrap();
    (handle, rx)
}

async fn reports(rx: &mut mpsc::UnboundedReceiver<JobReport>, n: usize) -> Vec<JobReport> {
    let mut out = Vec::new();
    tokio::time::timeout(fairq_worker::conformance::PATIENCE, async {
        while out.len() < n {
            out.push(rx.recv().await.expect("the worker reports"));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("only {} of {n} jobs finished", out.len()));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_commit_with_the_success_and_other_jobs_keep_batching() {
    let t = store_or_skip!("txok");
    let table = ledger(&t).await;
    let insert = format!("INSERT INTO {table} (job, note) VALUES ($1, 'paid')");
    let (handle, mut rx) = worker(&t.store, |b| {
        b.handle(
            "pay",
            t.store.transactional(move |tx, job| {
                let insert = insert.clone();
                Box::pin(async move {
                    tx.execute(&insert, &[&(job.claim.id.0 as i64)]).await?;
                    Ok::<_, tokio_postgres::Error>(())
                })
            }),
        )
        .handle("plain", |_job: Job| async move { Ok::<_, String>(()) })
    });
    let jobs: Vec<NewJob> = (0..40)
        .map(|i| NewJob::new("q", if i % 2 == 0 { "pay" } else { "plain" }, vec![]))
        .collect();
    let ids = t.store.enqueue_many(jobs).await.unwrap();
    let done = reports(&mut rx, ids.len()).await;
    assert!(
        done.iter().all(|r| r.outcome == JobOutcome::Succeeded),
        "every job's success is recorded once: {:?}",
        done.iter().map(|r| &r.outcome).collect::<Vec<_>>()
    );
    let paid: Vec<i64> = ids.iter().step_by(2).map(|id| id.0 as i64).collect();
    assert_eq!(
        rows(&t, &table).await,
        paid,
        "each transactional job wrote once"
    );
    let stats = t.store.stats().await.unwrap();
    assert_eq!(stats[0].counts.succeeded, 40);
    assert!(handle.shutdown(Duration::from_secs(10)).await.is_clean());
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_or_a_panic_rolls_the_writes_back_and_records_the_failure() {
    let t = store_or_skip!("txerr");
    let table = ledger(&t).await;
    let insert = format!("INSERT INTO {table} (job, note) VALUES ($1, 'tried')");
    let (handle, mut rx) = worker(&t.store, |b| {
        b.handle(
            "fails",
            t.store.transactional({
                let insert = insert.clone();
                move |tx, job| {
                    let insert = insert.clone();
                    Box::pin(async move {
                        tx.execute(&insert, &[&(job.claim.id.0 as i64)])
                            .await
                            .map_err(|e| e.to_string())?;
                        Err::<(), _>("the card was declined".to_string())
                    })
                }
            }),
        )
        .handle(
            "panics",
            t.store.transactional(move |tx, job| {
                let insert = insert.clone();
                Box::pin(async move {
                    tx.execute(&insert, &[&(job.claim.id.0 as i64)]).await?;
                    panic!("the handler blew up");
                    #[allow(unreachable_code)]
                    Ok::<_, tokio_postgres::Error>(())
                })
            }),
        )
    });
    let once = RetryPolicy::new(0);
    let failing = t
        .store
        .enqueue(NewJob::new("q", "fails", vec![]).retry(once.clone()))
        .await
        .unwrap();
    let panicking = t
        .store
        .enqueue(NewJob::new("q", "panics", vec![]).retry(once))
        .await
        .unwrap();
    let done = reports(&mut rx, 2).await;
    assert!(
        done.iter().all(|r| r.outcome == JobOutcome::Dead),
        "{done:?}"
    );
    assert!(
        rows(&t, &table).await.is_empty(),
        "no write of a failed job is visible"
    );
    for (id, message) in [
        (failing, "the card was declined"),
        (panicking, "the handler blew up"),
    ] {
        let info = t.store.get(id).await.unwrap().unwrap();
        assert_eq!(info.status(), JobStatus::Dead);
        let error = info.last_error.unwrap_or_default();
        assert!(error.contains(message), "{error}");
    }
    assert!(handle.shutdown(Duration::from_secs(10)).await.is_clean());
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_job_exists_only_if_its_parent_commits() {
    let t = store_or_skip!("txfollow");
    let succeed = Arc::new(AtomicBool::new(false));
    let (handle, mut rx) = worker(&t.store, |b| {
        let producer = t.store.producer();
        let succeed = succeed.clone();
        b.handle(
            "parent",
            t.store.transactional(move |tx, job| {
                let producer = producer.clone();
                let succeed = succeed.load(Ordering::SeqCst);
                Box::pin(async move {
                    let note = format!("follow-up of {}", job.claim.id);
                    producer
                        .enqueue(tx, NewJob::new("later", "mail", note.into_bytes()))
                        .await
                        .map_err(|e| Failure::retryable(e.to_string()))?;
                    if succeed {
                        Ok(())
                    } else {
                        Err(Failure::permanent("declined"))
                    }
                })
            }),
        )
    });
    let failed = t
        .store
        .enqueue(NewJob::new("q", "parent", vec![]))
        .await
        .unwrap();
    assert_eq!(reports(&mut rx, 1).await[0].outcome, JobOutcome::Dead);
    let later = t
        .store
        .list(ListFilter::default().queue("later"))
        .await
        .unwrap();
    assert!(
        later.is_empty(),
        "the failed job's follow-up never appeared: {later:?}"
    );

    succeed.store(true, Ordering::SeqCst);
    let ok = t
        .store
        .enqueue(NewJob::new("q", "parent", vec![]))
        .await
        .unwrap();
    assert_eq!(reports(&mut rx, 1).await[0].outcome, JobOutcome::Succeeded);
    let later = t
        .store
        .list(ListFilter::default().queue("later"))
        .await
        .unwrap();
    assert_eq!(later.len(), 1);
    assert_eq!(later[0].payload, format!("follow-up of {ok}").into_bytes());
    assert_ne!(ok, failed);
    assert!(handle.shutdown(Duration::from_secs(10)).await.is_clean());
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rescued_jobs_old_worker_cannot_commit() {
    let t = store_or_skip!("txstale");
    let table = ledger(&t).await;
    let id = t
        .store
        .enqueue(NewJob::new("q", "pay", vec![]).retry(RetryPolicy::new(3)))
        .await
        .unwrap();
    let stale = t
        .store
        .claim("q", 1, Duration::from_secs(5))
        .await
        .unwrap()
        .remove(0);
    let insert = format!("INSERT INTO {table} (job, note) VALUES ($1, 'stale')");
    let (store, clock) = (t.store.clone(), t.clock.clone());
    let claimed_again: Arc<std::sync::Mutex<Option<Job>>> = Arc::default();
    let slot = claimed_again.clone();
    let result = t
        .store
        .run_in_transaction(&stale, move |tx, job| {
            Box::pin(async move {
                tx.execute(&insert, &[&(job.claim.id.0 as i64)])
                    .await
                    .map_err(|e| e.to_string())?;
                // Meanwhile the lease runs out, the job is rescued and another worker takes it.
                clock.advance(Duration::from_secs(5));
                assert_eq!(store.rescue("q").await.map_err(|e| e.to_string())?, 1);
                let again = store
                    .claim("q", 1, LEASE)
                    .await
                    .map_err(|e| e.to_string())?;
                *slot.lock().unwrap() = again.into_iter().next();
                Ok::<_, String>(())
            })
        })
        .await;
    let failure = result.expect_err("the fenced worker's transaction does not commit");
    assert!(
        failure.message.contains("rolled back"),
        "{}",
        failure.message
    );
    assert!(
        rows(&t, &table).await.is_empty(),
        "the stale worker's write never landed"
    );
    let again = claimed_again
        .lock()
        .unwrap()
        .clone()
        .expect("claimed again");
    assert_eq!(again.claim.id, id);
    let info = t.store.get(id).await.unwrap().unwrap();
    assert!(matches!(info.state, State::Running { lease } if lease.token == again.claim.token));
    // The worker's settlement of the stale attempt is refused too.
    let refused = t.store.fail(&stale, failure).await.unwrap_err();
    assert!(refused.is_stale_lease(), "{refused}");
    // The new holder commits.
    let ok = t
        .store
        .run_in_transaction(&again, |tx, job| {
            let insert = format!("INSERT INTO {table} (job, note) VALUES ($1, 'fresh')");
            Box::pin(async move {
                tx.execute(&insert, &[&(job.claim.id.0 as i64)]).await?;
                Ok::<_, tokio_postgres::Error>(())
            })
        })
        .await;
    assert!(ok.is_ok(), "{ok:?}");
    t.store
        .complete(again.claim)
        .await
        .expect("answered as already settled");
    assert_eq!(rows(&t, &table).await, vec![id.0 as i64]);
    assert_eq!(
        t.store.get(id).await.unwrap().unwrap().status(),
        JobStatus::Succeeded
    );
    t.cleanup().await;
}
