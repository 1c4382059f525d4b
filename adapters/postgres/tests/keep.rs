//! A store that does not keep succeeded jobs (`PgOptions::keep_succeeded(false)`): successes
//! are deleted, not archived, and still counted; deaths and jobs with dependents are archived;
//! a dependency that was deleted is unknown; the rescuer folds the appended counters.

mod common;

use std::time::Duration;

use fairq_core::retry::RetryPolicy;
use fairq_postgres::PgOptions;
use fairq_worker::{Backend, BackendError, Failure, JobStatus, NewJob};

const LEASE: Duration = Duration::from_secs(30);

async fn store(tag: &str) -> Option<common::TestStore> {
    common::TestStore::with_options(tag, PgOptions::default().pool_size(4).keep_succeeded(false))
        .await
}

/// Rows of counters that settlements appended and the rescuer has not folded yet.
async fn appended(t: &common::TestStore) -> i64 {
    t.admin
        .query_one(
            &format!("SELECT count(*) FROM \"{}\".stats_settled", t.schema),
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn successes_are_deleted_and_still_counted_deaths_are_archived() {
    let Some(t) = store("nokeep").await else {
        return;
    };
    let s = &t.store;
    let once = RetryPolicy::new(0);
    let ids = s
        .enqueue_many(vec![
            NewJob::new("q", "k", b"a".to_vec()).key("a"),
            NewJob::new("q", "k", b"b".to_vec()).key("b"),
            NewJob::new("q", "k", b"c".to_vec()).key("c"),
            NewJob::new("q", "k", b"d".to_vec()).key("d").retry(once),
        ])
        .await
        .unwrap();
    let jobs = s.claim("q", 4, LEASE).await.unwrap();
    assert_eq!(jobs.len(), 4);
    let by_id = |i: usize| jobs.iter().find(|j| j.claim.id == ids[i]).unwrap();
    // a and b succeed after 7 ms; c fails once (a retry, immediately due); d fails for good.
    t.clock.advance(Duration::from_millis(7));
    s.complete(by_id(0).claim).await.unwrap();
    s.complete(by_id(1).claim).await.unwrap();
    s.fail(by_id(2), Failure::retryable("try again"))
        .await
        .unwrap();
    s.fail(by_id(3), Failure::retryable("no luck"))
        .await
        .unwrap();
    t.clock.advance(Duration::from_secs(3_600));
    let again = s.claim("q", 4, LEASE).await.unwrap();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].claim.id, ids[2]);
    t.clock.advance(Duration::from_millis(3));
    s.complete(again[0].claim).await.unwrap();

    // The successes are gone; the death is archived.
    for (i, id) in ids.iter().take(3).enumerate() {
        assert!(s.get(*id).await.unwrap().is_none(), "job {i} was kept");
    }
    let dead = s.get(ids[3]).await.unwrap().expect("the dead job is kept");
    assert_eq!(dead.status(), JobStatus::Dead);

    let counted = |stats: &[fairq_worker::QueueStats]| {
        let q = stats.iter().find(|q| q.queue == "q").expect("queue q");
        (
            q.retries.ok,
            q.retries.retries,
            q.retries.dead,
            q.retries.failures,
            q.counts.succeeded,
            q.counts.dead,
            q.processing_ms.count,
            q.processing_ms.max,
        )
    };
    // 3 successes, one of them after a retry; 1 death; failures: c's first attempt and d's;
    // attempts timed: a, b, c twice and d, the longest 7 ms (c's second took 3).
    let expected = (3, 1, 1, 2, 0, 1, 5, 7);
    let before = counted(&s.stats().await.unwrap());
    assert_eq!(before, expected);

    // The rescuer folds the settlements' rows into the base counters; nothing changes.
    assert!(appended(&t).await > 0, "settlements appended no counters");
    s.rescue("q").await.unwrap();
    assert_eq!(
        appended(&t).await,
        0,
        "the rescuer did not fold the counters"
    );
    assert_eq!(counted(&s.stats().await.unwrap()), expected);

    // Removing the queue (no live job left) removes its counters, folded or not.
    let a = s.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    let job = s.claim("q", 1, LEASE).await.unwrap().pop().unwrap();
    assert_eq!(job.claim.id, a);
    s.complete(job.claim).await.unwrap();
    s.remove_queue("q").await.unwrap();
    assert!(s.stats().await.unwrap().iter().all(|q| q.queue != "q"));
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_with_dependents_is_archived_and_a_deleted_dependency_is_unknown() {
    let Some(t) = store("nokeepdeps").await else {
        return;
    };
    let s = &t.store;
    let parent = s.enqueue(NewJob::new("d", "k", vec![])).await.unwrap();
    let child = s
        .enqueue(NewJob::new("d", "k", vec![]).after(parent))
        .await
        .unwrap();
    let lone = s.enqueue(NewJob::new("d", "k", vec![])).await.unwrap();
    let first = s.claim("d", 10, LEASE).await.unwrap();
    let ids: Vec<_> = first.iter().map(|j| j.claim.id).collect();
    assert_eq!(ids, vec![parent, lone]);
    for job in &first {
        s.complete(job.claim).await.unwrap();
    }
    // The parent had a dependent: archived, and its success released the child.
    let kept = s
        .get(parent)
        .await
        .unwrap()
        .expect("the parent is archived");
    assert_eq!(kept.status(), JobStatus::Succeeded);
    assert!(s.get(lone).await.unwrap().is_none());
    let next = s.claim("d", 10, LEASE).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].claim.id, child);
    // A later dependent of the archived parent is ready at once; one of the deleted job is
    // refused, as one of a pruned job is.
    let late = s
        .enqueue(NewJob::new("d", "k", vec![]).after(parent))
        .await
        .unwrap();
    assert_eq!(
        s.get(late).await.unwrap().unwrap().status(),
        JobStatus::Scheduled
    );
    match s.enqueue(NewJob::new("d", "k", vec![]).after(lone)).await {
        Err(BackendError::UnknownDependency(id)) => assert_eq!(id, lone),
        other => panic!("expected UnknownDependency, got {other:?}"),
    }
    t.cleanup().await;
}
