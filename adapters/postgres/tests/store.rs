//! Behaviour of the store against a real server: lifecycle, time, retries, leases,
//! dependencies, unique keys and operator calls.

mod common;

use std::time::Duration;

use fairq_core::job::{DeadReason, Outcome, State, TransitionError};
use fairq_core::retry::RetryPolicy;
use fairq_worker::{
    Backend, BackendError, Failure, JobStatus, ListFilter, NewJob, OnConflict, Purge, ReviveTarget,
};

const LEASE: Duration = Duration::from_secs(30);

fn job(queue: &str) -> NewJob {
    NewJob::new(queue, "kind", b"{}".to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_round_trips_with_everything_it_carries() {
    let t = store_or_skip!("roundtrip");
    let s = &t.store;
    let id = s
        .enqueue(
            NewJob::new("mail", "welcome", b"payload".to_vec())
                .key("tenant-1")
                .meta("trace_id", "abc")
                .retry(RetryPolicy::new(2)),
        )
        .await
        .unwrap();
    let info = s.get(id).await.unwrap().unwrap();
    assert_eq!(info.state, State::Scheduled { run_at: 1_000_000 });
    assert_eq!(info.status(), JobStatus::Scheduled);
    t.clock.advance(Duration::from_millis(5));
    let jobs = s.claim("mail", 10, LEASE).await.unwrap();
    assert_eq!(jobs.len(), 1);
    let j = &jobs[0];
    assert_eq!(j.claim.id, id);
    assert_eq!(j.kind, "welcome");
    assert_eq!(j.key.as_deref(), Some("tenant-1"));
    assert_eq!(j.payload, b"payload");
    assert_eq!(j.metadata["trace_id"], "abc");
    assert_eq!(j.retry, RetryPolicy::new(2));
    assert_eq!(j.attempt, 1);
    assert_eq!(j.enqueued_at, 1_000_000);
    assert_eq!(j.run_at, 1_000_000);
    assert_eq!(j.lease_deadline, 1_000_005 + 30_000);
    assert!(s.claim("mail", 10, LEASE).await.unwrap().is_empty());
    let running = s.get(id).await.unwrap().unwrap();
    assert!(matches!(running.state, State::Running { lease } if lease.token == j.claim.token));
    t.clock.advance(Duration::from_millis(7));
    s.complete(j.claim).await.unwrap();
    let done = s.get(id).await.unwrap().unwrap();
    assert_eq!(done.state, State::Succeeded { at: 1_000_012 });
    assert_eq!(done.attempts, 1);
    // Completing twice is refused by the lifecycle.
    let again = s.complete(j.claim).await.unwrap_err();
    assert!(matches!(
        again,
        BackendError::Transition {
            source: TransitionError::NotRunning { state: "succeeded" },
            ..
        }
    ));
    let stats = s.stats().await.unwrap();
    assert_eq!(stats.len(), 1);
    assert_eq!(stats[0].counts.succeeded, 1);
    assert_eq!(stats[0].retries.ok, 1);
    assert_eq!(stats[0].processing_ms.count, 1);
    assert_eq!(stats[0].processing_ms.max, 7);
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_jobs_wait_for_the_clock() {
    let t = store_or_skip!("delay");
    let s = &t.store;
    let later = s
        .enqueue(job("q").delay(Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(s.claim("q", 5, LEASE).await.unwrap().is_empty());
    t.clock.advance(Duration::from_millis(9_999));
    assert!(s.claim("q", 5, LEASE).await.unwrap().is_empty());
    t.clock.advance(Duration::from_millis(1));
    let jobs = s.claim("q", 5, LEASE).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].claim.id, later);
    assert_eq!(jobs[0].run_at, 1_010_000);
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_came_due_goes_before_a_later_enqueue_of_its_key() {
    let t = store_or_skip!("duefirst");
    let s = &t.store;
    let delayed = s
        .enqueue(job("q").key("a").delay(Duration::from_secs(1)))
        .await
        .unwrap();
    t.clock.advance(Duration::from_secs(2));
    let fresh = s.enqueue(job("q").key("a")).await.unwrap();
    let order: Vec<_> = s
        .claim("q", 5, LEASE)
        .await
        .unwrap()
        .iter()
        .map(|j| j.claim.id)
        .collect();
    assert_eq!(order, [delayed, fresh]);
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_came_due_goes_before_a_later_job_whose_dependency_succeeded() {
    let t = store_or_skip!("duedep");
    let s = &t.store;
    let parent = s.enqueue(job("q")).await.unwrap();
    let p = s.claim("q", 1, LEASE).await.unwrap().remove(0);
    s.complete(p.claim).await.unwrap();
    let delayed = s
        .enqueue(job("q").delay(Duration::from_millis(10)))
        .await
        .unwrap();
    t.clock.advance(Duration::from_millis(10));
    let child = s.enqueue(job("q").after(parent)).await.unwrap();
    let order: Vec<_> = s
        .claim("q", 5, LEASE)
        .await
        .unwrap()
        .iter()
        .map(|j| j.claim.id)
        .collect();
    assert_eq!(order, [delayed, child]);
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_retry_on_the_policy_schedule_then_die() {
    let t = store_or_skip!("retry");
    let s = &t.store;
    let policy = RetryPolicy::new(1).with_delays([Duration::from_secs(5)]);
    let id = s.enqueue(job("q").retry(policy)).await.unwrap();
    let first = s.claim("q", 1, LEASE).await.unwrap().remove(0);
    t.clock.advance(Duration::from_millis(3));
    let outcome = s
        .fail(&first, Failure::retryable("smtp down"))
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Retry { run_at: 1_005_003 });
    let info = s.get(id).await.unwrap().unwrap();
    assert_eq!(info.state, State::Retrying { run_at: 1_005_003 });
    assert_eq!(info.last_error.as_deref(), Some("smtp down"));
    let stats = s.stats().await.unwrap();
    assert_eq!(stats[0].oldest_error_at, Some(1_000_003));
    assert_eq!(stats[0].counts.retrying, 1);
    assert!(s.claim("q", 1, LEASE).await.unwrap().is_empty());
    t.clock.advance(Duration::from_secs(5));
    let second = s.claim("q", 1, LEASE).await.unwrap().remove(0);
    assert_eq!(second.attempt, 2);
    assert!(second.claim.token > first.claim.token);
    let outcome = s
        .fail(&second, Failure::retryable("still down"))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Outcome::Dead {
            reason: DeadReason::RetriesExhausted
        }
    );
    let info = s.get(id).await.unwrap().unwrap();
    assert!(matches!(
        info.state,
        State::Dead {
            reason: DeadReason::RetriesExhausted,
            ..
        }
    ));
    let stats = s.stats().await.unwrap();
    assert_eq!(stats[0].counts.dead, 1);
    assert_eq!(stats[0].retries.dead, 1);
    assert_eq!(stats[0].retries.failures, 2);
    assert_eq!(stats[0].retries.retries, 1);
    assert_eq!(stats[0].oldest_error_at, None);
    // An operator revives it with a fresh budget.
    assert_eq!(s.revive(ReviveTarget::One(id)).await.unwrap(), 1);
    let third = s.claim("q", 1, LEASE).await.unwrap().remove(0);
    assert_eq!(third.attempt, 1);
    s.complete(third.claim).await.unwrap();
    let stats = s.stats().await.unwrap();
    assert_eq!(stats[0].retries.ok, 1);
    assert_eq!(stats[0].retries.dead, 1, "the earlier death still counts");
    assert_eq!(stats[0].retries.failures, 2);
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_failure_discards_at_once() {
    let t = store_or_skip!("discard");
    let s = &t.store;
    let id = s
        .enqueue(job("q").retry(RetryPolicy::forever()))
        .await
        .unwrap();
    let j = s.claim("q", 1, LEASE).await.unwrap().remove(0);
    let outcome = s.fail(&j, Failure::permanent("bad payload")).await.unwrap();
    assert_eq!(
        outcome,
        Outcome::Dead {
            reason: DeadReason::Discarded
        }
    );
    let info = s.get(id).await.unwrap().unwrap();
    assert!(matches!(
        info.state,
        State::Dead {
            reason: DeadReason::Discarded,
            ..
        }
    ));
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_leases_are_rescued_and_the_stale_worker_is_fenced_off() {
    let t = store_or_skip!("rescue");
    let s = &t.store;
    let id = s
        .enqueue(job("q").retry(RetryPolicy::new(3)))
        .await
        .unwrap();
    let lease = Duration::from_secs(10);
    let stale = s.claim("q", 1, lease).await.unwrap().remove(0);
    t.clock.advance(Duration::from_secs(4));
    // A heartbeat extends the lease to now + lease.
    assert_eq!(s.heartbeat(stale.claim, lease).await.unwrap(), 1_014_000);
    t.clock.advance(Duration::from_secs(9));
    assert_eq!(s.rescue("q").await.unwrap(), 0, "the lease is still valid");
    t.clock.advance(Duration::from_secs(1));
    assert_eq!(s.rescue("q").await.unwrap(), 1);
    let info = s.get(id).await.unwrap().unwrap();
    assert_eq!(
        info.last_error.as_deref(),
        Some("lease expired: the worker stopped renewing it")
    );
    let fresh = s.claim("q", 1, lease).await.unwrap().remove(0);
    assert_eq!(fresh.claim.id, id);
    assert_eq!(fresh.attempt, 2);
    for err in [
        s.complete(stale.claim).await.unwrap_err(),
        s.heartbeat(stale.claim, lease).await.unwrap_err(),
        s.fail(&stale, Failure::retryable("late"))
            .await
            .unwrap_err(),
    ] {
        assert!(err.is_stale_lease(), "{err}");
    }
    s.complete(fresh.claim).await.unwrap();
    // After success the old token is still stale, not merely "not running".
    assert!(s.complete(stale.claim).await.unwrap_err().is_stale_lease());
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependencies_hold_a_job_until_its_parent_succeeds() {
    let t = store_or_skip!("deps");
    let s = &t.store;
    let parent = s
        .enqueue(job("q").retry(RetryPolicy::new(0)))
        .await
        .unwrap();
    let child = s.enqueue(job("q").after(parent)).await.unwrap();
    assert_eq!(s.get(child).await.unwrap().unwrap().state, State::Blocked);
    let unknown = s
        .enqueue(job("q").after(fairq_worker::JobId(9_999_999)))
        .await;
    assert!(matches!(unknown, Err(BackendError::UnknownDependency(_))));
    // The parent dies: the child stays blocked.
    let p = s.claim("q", 5, LEASE).await.unwrap();
    assert_eq!(p.len(), 1);
    s.fail(&p[0], Failure::retryable("x")).await.unwrap();
    assert!(s.claim("q", 5, LEASE).await.unwrap().is_empty());
    // Revived and succeeding, it releases the child.
    s.revive(ReviveTarget::One(parent)).await.unwrap();
    let p = s.claim("q", 5, LEASE).await.unwrap();
    assert_eq!(p.len(), 1);
    s.complete(p[0].claim).await.unwrap();
    let c = s.claim("q", 5, LEASE).await.unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].claim.id, child);
    // A dependency that already succeeded does not block.
    let free = s.enqueue(job("q").after(parent)).await.unwrap();
    assert_eq!(
        s.get(free).await.unwrap().unwrap().status(),
        JobStatus::Scheduled
    );
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_keys_hold_among_unfinished_jobs() {
    let t = store_or_skip!("unique");
    let s = &t.store;
    let first = s
        .enqueue(job("q").unique("order-1", OnConflict::Error))
        .await
        .unwrap();
    let dup = s
        .enqueue(job("q").unique("order-1", OnConflict::Error))
        .await
        .unwrap_err();
    assert!(
        matches!(&dup, BackendError::Duplicate { existing, key, .. } if *existing == first && key == "order-1"),
        "{dup}"
    );
    let same = s
        .enqueue(job("q").unique("order-1", OnConflict::Ignore))
        .await
        .unwrap();
    assert_eq!(same, first);
    // Another queue has its own keys.
    let other = s
        .enqueue(job("r").unique("order-1", OnConflict::Error))
        .await
        .unwrap();
    assert_ne!(other, first);
    // A batch is all or nothing.
    let before = s.list(ListFilter::default()).await.unwrap().len();
    let batch = s
        .enqueue_many(vec![
            job("q").unique("order-2", OnConflict::Error),
            job("q").unique("order-2", OnConflict::Error),
        ])
        .await;
    assert!(matches!(batch, Err(BackendError::Duplicate { .. })));
    assert_eq!(s.list(ListFilter::default()).await.unwrap().len(), before);
    let ids = s
        .enqueue_many(vec![
            job("q").unique("order-3", OnConflict::Ignore),
            job("q").unique("order-3", OnConflict::Ignore),
            job("q").unique("order-1", OnConflict::Ignore),
        ])
        .await
        .unwrap();
    assert_eq!(ids[0], ids[1]);
    assert_eq!(ids[2], first);
    // Once the holder finishes, the key is free again.
    let claimed = s.claim("q", 10, LEASE).await.unwrap();
    for j in &claimed {
        s.complete(j.claim).await.unwrap();
    }
    let again = s
        .enqueue(job("q").unique("order-1", OnConflict::Error))
        .await
        .unwrap();
    assert_ne!(again, first);
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_list_purge_and_prune() {
    let t = store_or_skip!("ops");
    let s = &t.store;
    let ids = s
        .enqueue_many((0..5).map(|_| job("q")).collect())
        .await
        .unwrap();
    let ids_sorted = {
        let mut v = ids.clone();
        v.sort();
        v
    };
    assert_eq!(ids, ids_sorted, "ids follow batch order");
    let claimed = s.claim("q", 2, LEASE).await.unwrap();
    s.complete(claimed[0].claim).await.unwrap();
    let page = s.list(ListFilter::default().limit(2)).await.unwrap();
    assert_eq!(page.iter().map(|i| i.id).collect::<Vec<_>>(), ids[..2]);
    let next = s
        .list(ListFilter {
            after: Some(ids[1]),
            ..ListFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(next.iter().map(|i| i.id).collect::<Vec<_>>(), ids[2..]);
    let done = s
        .list(ListFilter::default().status(JobStatus::Succeeded))
        .await
        .unwrap();
    assert_eq!(done.len(), 1);
    // Purge never touches running jobs.
    assert_eq!(s.purge(Purge::default()).await.unwrap(), 4);
    let left = s.list(ListFilter::default()).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].status(), JobStatus::Running);
    s.complete(claimed[1].claim).await.unwrap();
    t.clock.advance(Duration::from_secs(60));
    assert_eq!(s.prune(Duration::from_secs(61).into()).await.unwrap(), 0);
    assert_eq!(s.prune(Duration::from_secs(60).into()).await.unwrap(), 1);
    assert!(s.get(claimed[1].claim.id).await.unwrap().is_none());
    let stats = s.stats().await.unwrap();
    assert_eq!(stats[0].counts.total(), 0);
    assert_eq!(stats[0].retries.ok, 2, "counters outlive pruned jobs");
    assert_eq!(stats[0].processing_ms.count, 2);
    t.cleanup().await;
}

/// A prune larger than `prune_batch` runs batch after batch until none is left, deletes only
/// what finished before the cutoff, and folds every pruned job into the counters once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prune_larger_than_its_batch_deletes_everything_old_enough() {
    let t = store_or_skip!(
        "prune_batches",
        fairq_postgres::PgOptions::default().prune_batch(3)
    );
    let s = &t.store;
    s.enqueue_many((0..9).map(|_| job("q")).collect())
        .await
        .unwrap();
    let claimed = s.claim("q", 9, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 9);
    for c in &claimed[..7] {
        s.complete(c.claim).await.unwrap();
    }
    s.fail(&claimed[7], Failure::permanent("no")).await.unwrap();
    t.clock.advance(Duration::from_secs(60));
    s.complete(claimed[8].claim).await.unwrap();

    // Eight finished a minute ago (three batches of at most three); the last just now.
    assert_eq!(s.prune(Duration::from_secs(30).into()).await.unwrap(), 8);
    for c in &claimed[..8] {
        assert!(s.get(c.claim.id).await.unwrap().is_none());
    }
    let last = s.get(claimed[8].claim.id).await.unwrap().unwrap();
    assert_eq!(last.status(), JobStatus::Succeeded);
    assert_eq!(s.prune(Duration::from_secs(30).into()).await.unwrap(), 0);
    let stats = s.stats().await.unwrap();
    assert_eq!(stats[0].counts.total(), 1);
    assert_eq!(stats[0].retries.ok, 8, "each pruned success counted once");
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_jobs_are_refused_with_typed_errors() {
    let t = store_or_skip!("invalid");
    let s = &t.store;
    for bad in [
        NewJob::new("", "k", vec![]),
        NewJob::new("q", "", vec![]),
        NewJob::new("q", "k", vec![]).key("nul\0byte"),
    ] {
        assert!(matches!(
            s.enqueue(bad).await,
            Err(BackendError::Invalid(_))
        ));
    }
    assert!(s.enqueue_many(vec![]).await.unwrap().is_empty());
    assert!(s.claim("q", 0, LEASE).await.unwrap().is_empty());
    assert!(s.claim("never-used", 3, LEASE).await.unwrap().is_empty());
    t.cleanup().await;
}

/// `stats` reads the live jobs and the archive in one snapshot: while jobs finish (moving
/// from one table to the other) every answer still counts each job exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_each_job_once_while_jobs_finish() {
    const JOBS: u64 = 2_000;
    let t = store_or_skip!("stats_snapshot");
    let s = t.store.clone();
    s.enqueue_many(
        (0..JOBS)
            .map(|i| job("q").key(format!("k{}", i % 7)))
            .collect(),
    )
    .await
    .unwrap();
    let finisher = {
        let s = s.clone();
        tokio::spawn(async move {
            loop {
                let jobs = s.claim("q", 20, LEASE).await.unwrap();
                if jobs.is_empty() {
                    break;
                }
                let batch = jobs
                    .iter()
                    .map(|j| fairq_worker::Finished::new(j, Ok(())))
                    .collect();
                for settled in s.settle(batch).await.unwrap() {
                    settled.unwrap();
                }
            }
        })
    };
    let mut reads = 0;
    loop {
        let stats = s.stats().await.unwrap();
        let counts = stats.first().map(|q| q.counts).unwrap_or_default();
        assert_eq!(counts.total(), JOBS, "read {reads}: {counts:?}");
        reads += 1;
        if counts.succeeded == JOBS {
            break;
        }
    }
    finisher.await.unwrap();
    println!("{reads} consistent reads while {JOBS} jobs finished");
}

/// A rescue takes expired leases back in batches of 1,000; jobs it makes due at once (a
/// retry without delay) come back in id order across the batches, as the reference store
/// makes them due, not batch by batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rescued_jobs_come_back_in_id_order_across_batches() {
    let t = store_or_skip!("rescueorder");
    let s = &t.store;
    let policy = RetryPolicy::new(5).with_backoff(fairq_core::retry::Backoff::Immediate);
    let ids = s
        .enqueue_many(
            (0..1_001)
                .map(|_| job("rq").key("k").retry(policy.clone()))
                .collect(),
        )
        .await
        .unwrap();
    let mut claimed = 0;
    while claimed < ids.len() {
        let jobs = s.claim("rq", 500, LEASE).await.unwrap();
        assert!(!jobs.is_empty());
        claimed += jobs.len();
    }
    t.clock.advance(LEASE + Duration::from_secs(1));
    assert_eq!(s.rescue("rq").await.unwrap(), 1_001);
    let mut order = Vec::new();
    while order.len() < ids.len() {
        let jobs = s.claim("rq", 500, LEASE).await.unwrap();
        assert!(!jobs.is_empty());
        order.extend(jobs.iter().map(|j| j.claim.id));
    }
    assert_eq!(order[..2], ids[..2]);
    assert_eq!(order, ids);
    t.cleanup().await;
}
