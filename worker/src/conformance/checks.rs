//! The checks of the conformance suite, one public async function each.
//!
//! Every check takes a fresh, empty store whose time comes from `clock` (reading
//! [`START`](super::START) at first) and panics with a message naming the broken rule.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairq_core::job::{DeadReason, MAX_MILLIS, Outcome, State};
use fairq_core::retry::RetryPolicy;

use crate::backend::{Backend, ListFilter, Purge, ReviveTarget};
use crate::clock::{Clock, ManualClock};
use crate::error::BackendError;
use crate::handler::Handlers;
use crate::job::{Failure, Job, JobId, JobStatus, NewJob, OnConflict};
use crate::retention::Retention;
use crate::settle::{Finished, Settled};
use crate::worker::{DeadJob, JobOutcome, JobReport, QueueConfig, Worker, WorkerHandle};
use tokio::sync::mpsc;

use super::PATIENCE;
pub use super::refusals::{
    a_refused_batch_of_one_queue_enqueues_nothing, failure_messages_are_always_recorded,
    impossible_queue_names_are_refused, invalid_jobs_are_refused,
    out_of_range_times_and_nul_characters_are_refused, oversized_calls_are_refused_whole,
};

use super::support::{LEASE, MS, assert_nothing_due, claim_one, new_job, state, status};

/// A job's fields survive the round trip enqueue → claim → get, and completion finishes it.
pub async fn enqueue_claim_complete_round_trip<B: Backend>(store: &B, clock: &ManualClock) {
    let payload = vec![0, 159, 146, 150, 255, b'{'];
    let new = NewJob::new("rt", "resize", payload.clone())
        .key("tenant-1")
        .meta("trace_id", "abc-123")
        .meta("user", "u7");
    let enqueued_at = clock.now();
    let id = store.enqueue(new).await.expect("enqueue");
    assert_eq!(status(store, id).await, JobStatus::Scheduled);

    clock.advance(Duration::from_secs(1));
    let job = claim_one(store, "rt").await;
    assert_eq!(job.claim.id, id);
    assert_eq!(job.queue, "rt");
    assert_eq!(job.kind, "resize");
    assert_eq!(job.key.as_deref(), Some("tenant-1"));
    assert_eq!(
        job.payload, payload,
        "payload bytes must round-trip exactly"
    );
    assert_eq!(job.attempt, 1);
    assert_eq!(job.enqueued_at, enqueued_at);
    assert_eq!(job.run_at, enqueued_at);
    assert_eq!(job.lease_deadline, clock.now() + 30_000);
    assert_eq!(
        job.metadata.get("trace_id").map(String::as_str),
        Some("abc-123")
    );
    assert_eq!(job.metadata.len(), 2);
    assert_eq!(job.retry, RetryPolicy::default());

    let info = store.get(id).await.expect("get").expect("job exists");
    assert!(matches!(info.state, State::Running { lease } if lease.token == job.claim.token));
    assert_eq!(info.attempts, 1);
    assert_eq!(info.payload, payload);
    assert_eq!(info.metadata, job.metadata);

    assert_nothing_due(store, "rt", "a running job must not be claimed again").await;
    clock.advance(Duration::from_secs(2));
    store.complete(job.claim).await.expect("complete");
    assert_eq!(state(store, id).await, State::Succeeded { at: clock.now() });
    assert_nothing_due(store, "rt", "a succeeded job must not run again").await;
    assert!(store.get(JobId(u64::MAX - 7)).await.expect("get").is_none());
}

/// `enqueue_many` returns one id per job, in order, each naming that job.
pub async fn enqueue_many_returns_ids_in_order<B: Backend>(store: &B, _clock: &ManualClock) {
    let jobs: Vec<NewJob> = (0..20)
        .map(|i| NewJob::new("many", format!("kind-{i}"), vec![i as u8]).key(format!("k{}", i % 3)))
        .collect();
    let ids = store.enqueue_many(jobs).await.expect("enqueue_many");
    assert_eq!(ids.len(), 20);
    let mut distinct = ids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 20, "ids must be distinct");
    for (i, id) in ids.iter().enumerate() {
        let info = store.get(*id).await.expect("get").expect("job exists");
        assert_eq!(info.kind, format!("kind-{i}"));
        assert_eq!(info.payload, vec![i as u8]);
    }
    assert!(
        store
            .enqueue_many(Vec::new())
            .await
            .expect("empty batch")
            .is_empty()
    );
}

/// A claim returns at most `max` jobs, only of its queue.
pub async fn claims_respect_max_and_queue<B: Backend>(store: &B, _clock: &ManualClock) {
    let a: Vec<NewJob> = (0..5).map(|_| new_job("qa")).collect();
    let b: Vec<NewJob> = (0..2).map(|_| new_job("qb")).collect();
    let a_ids = store.enqueue_many(a).await.expect("enqueue");
    let b_ids = store.enqueue_many(b).await.expect("enqueue");
    assert!(
        store
            .claim("qa", 0, LEASE)
            .await
            .expect("claim 0")
            .is_empty()
    );
    let first = store.claim("qa", 3, LEASE).await.expect("claim");
    assert_eq!(first.len(), 3);
    let rest = store.claim("qa", 10, LEASE).await.expect("claim");
    assert_eq!(rest.len(), 2);
    let mut got: Vec<JobId> = first.iter().chain(&rest).map(|j| j.claim.id).collect();
    got.sort();
    assert_eq!(got, a_ids);
    assert!(first.iter().chain(&rest).all(|j| j.queue == "qa"));
    assert_nothing_due(store, "qa", "queue qa is drained").await;
    assert_nothing_due(store, "nowhere", "an unknown queue has no jobs").await;
    // `usize::MAX` asks for every job there is.
    let b_jobs = store
        .claim("qb", usize::MAX, LEASE)
        .await
        .expect("claim all");
    let mut got: Vec<JobId> = b_jobs.iter().map(|j| j.claim.id).collect();
    got.sort();
    assert_eq!(got, b_ids);
}

/// Concurrent claimers get every job exactly once.
pub async fn each_job_runs_exactly_once<B: Backend>(store: &B, _clock: &ManualClock) {
    const N: usize = 300;
    let mut ids = Vec::new();
    for i in 0..50 {
        ids.push(
            store
                .enqueue(new_job("once").key(format!("t{}", i % 7)))
                .await
                .expect("enqueue"),
        );
    }
    let batch: Vec<NewJob> = (50..N)
        .map(|i| new_job("once").key(format!("t{}", i % 7)))
        .collect();
    ids.extend(store.enqueue_many(batch).await.expect("enqueue_many"));

    let seen: Mutex<HashMap<JobId, u32>> = Mutex::new(HashMap::new());
    let done = AtomicUsize::new(0);
    let claimer = || async {
        while done.load(Ordering::SeqCst) < N {
            let jobs = store.claim("once", 5, LEASE).await.expect("claim");
            if jobs.is_empty() {
                tokio::task::yield_now().await;
                continue;
            }
            for job in jobs {
                *seen.lock().expect("lock").entry(job.claim.id).or_default() += 1;
                store.complete(job.claim).await.expect("complete");
                done.fetch_add(1, Ordering::SeqCst);
            }
        }
    };
    tokio::time::timeout(
        PATIENCE,
        futures::future::join4(claimer(), claimer(), claimer(), claimer()),
    )
    .await
    .expect("all jobs claimed in time");

    let seen = seen.into_inner().expect("lock");
    assert_eq!(seen.len(), N, "every job must be claimed");
    for id in &ids {
        assert_eq!(
            seen.get(id),
            Some(&1),
            "job {id} must be claimed exactly once"
        );
    }
    let succeeded = store
        .list(
            ListFilter::default()
                .queue("once")
                .status(JobStatus::Succeeded)
                .limit(N + 10),
        )
        .await
        .expect("list");
    assert_eq!(succeeded.len(), N);
    assert!(succeeded.iter().all(|j| j.attempts == 1));
}

/// Failed jobs come back exactly when the policy says: not 1 ms before, and at the delay.
pub async fn retries_follow_the_policy_schedule<B: Backend>(store: &B, clock: &ManualClock) {
    let delays = [
        Duration::from_secs(1),
        Duration::from_secs(5),
        Duration::from_secs(30),
    ];
    let policy = RetryPolicy::new(4).with_delays(delays);
    let id = store
        .enqueue(new_job("retry").retry(policy.clone()))
        .await
        .expect("enqueue");

    // Delays 1 s, 5 s, 30 s, then the last entry repeats.
    for (attempt, delay) in (1..=4).zip(delays.iter().chain([&delays[2]])) {
        let job = claim_one(store, "retry").await;
        assert_eq!(job.attempt, attempt);
        assert_eq!(job.retry, policy);
        let failed_at = clock.now();
        let outcome = store
            .fail(&job, Failure::retryable(format!("failure {attempt}")))
            .await
            .expect("fail");
        let run_at = failed_at + delay.as_millis() as u64;
        assert_eq!(outcome, Outcome::Retry { run_at }, "attempt {attempt}");
        let info = store.get(id).await.expect("get").expect("exists");
        assert_eq!(info.state, State::Retrying { run_at });
        assert_eq!(info.attempts, attempt);
        assert_eq!(
            info.last_error.as_deref(),
            Some(format!("failure {attempt}").as_str())
        );

        clock.advance(*delay - MS);
        assert_nothing_due(store, "retry", "a retry must wait for its full delay").await;
        clock.advance(MS);
        if attempt == 4 {
            break;
        }
    }
    let last = claim_one(store, "retry").await;
    assert_eq!(last.attempt, 5);
    assert_eq!(last.run_at, clock.now());
    store.complete(last.claim).await.expect("complete");
    assert!(matches!(state(store, id).await, State::Succeeded { .. }));
}

/// The job dies when the policy gives up, and is not claimed again.
pub async fn dead_after_the_policy_gives_up<B: Backend>(store: &B, clock: &ManualClock) {
    let id = store
        .enqueue(new_job("dead").retry(RetryPolicy::new(2)))
        .await
        .expect("enqueue");
    for attempt in 1..=3 {
        let job = claim_one(store, "dead").await;
        assert_eq!(job.attempt, attempt);
        clock.advance(Duration::from_millis(10));
        let outcome = store
            .fail(&job, Failure::retryable("boom"))
            .await
            .expect("fail");
        if attempt < 3 {
            assert_eq!(
                outcome,
                Outcome::Retry {
                    run_at: clock.now()
                }
            );
        } else {
            assert_eq!(
                outcome,
                Outcome::Dead {
                    reason: DeadReason::RetriesExhausted
                }
            );
        }
    }
    assert_eq!(
        state(store, id).await,
        State::Dead {
            at: clock.now(),
            reason: DeadReason::RetriesExhausted
        }
    );
    clock.advance(Duration::from_secs(3600));
    assert_nothing_due(store, "dead", "a dead job must not run").await;
    let info = store
        .get(id)
        .await
        .expect("get")
        .expect("dead jobs are kept");
    assert_eq!(info.attempts, 3);
    assert_eq!(info.last_error.as_deref(), Some("boom"));
}

/// A permanent failure kills the job at once, whatever retries it had left.
pub async fn permanent_failure_kills_at_once<B: Backend>(store: &B, clock: &ManualClock) {
    let id = store
        .enqueue(new_job("perm").retry(RetryPolicy::forever()))
        .await
        .expect("enqueue");
    let job = claim_one(store, "perm").await;
    let outcome = store
        .fail(&job, Failure::permanent("cannot decode payload: eof"))
        .await
        .expect("fail");
    assert_eq!(
        outcome,
        Outcome::Dead {
            reason: DeadReason::Discarded
        }
    );
    assert_eq!(
        state(store, id).await,
        State::Dead {
            at: clock.now(),
            reason: DeadReason::Discarded
        }
    );
    let info = store.get(id).await.expect("get").expect("exists");
    assert_eq!(
        info.last_error.as_deref(),
        Some("cannot decode payload: eof")
    );
    assert_nothing_due(store, "perm", "a discarded job must not run").await;
}

/// Delayed and scheduled jobs are not claimable before their time, and are at it.
pub async fn delayed_jobs_wait<B: Backend>(store: &B, clock: &ManualClock) {
    let start = clock.now();
    let delayed = store
        .enqueue(new_job("later").delay(Duration::from_secs(10)))
        .await
        .expect("enqueue");
    let at = store
        .enqueue(new_job("later").run_at_millis(start + 20_000))
        .await
        .expect("enqueue");
    assert_eq!(
        state(store, delayed).await,
        State::Scheduled {
            run_at: start + 10_000
        }
    );
    assert_eq!(
        state(store, at).await,
        State::Scheduled {
            run_at: start + 20_000
        }
    );

    clock.advance(Duration::from_secs(10) - MS);
    assert_nothing_due(store, "later", "a delayed job must wait").await;
    clock.advance(MS);
    let job = claim_one(store, "later").await;
    assert_eq!(job.claim.id, delayed);
    assert_eq!(job.run_at, start + 10_000);
    store.complete(job.claim).await.expect("complete");

    clock.set(start + 20_000 - 1);
    assert_nothing_due(store, "later", "a job scheduled at a time must wait").await;
    clock.set(start + 20_000);
    assert_eq!(claim_one(store, "later").await.claim.id, at);

    // A time in the past is due at once.
    let past = store
        .enqueue(new_job("later").run_at_millis(start))
        .await
        .expect("enqueue");
    assert_eq!(claim_one(store, "later").await.claim.id, past);
}

/// A light key's job is claimed within `2 (K - 1)` claims, however deep another key's
/// backlog is.
pub async fn fair_by_key<B: Backend>(store: &B, _clock: &ManualClock) {
    let heavy: Vec<NewJob> = (0..1_000).map(|_| new_job("fair").key("heavy")).collect();
    store.enqueue_many(heavy).await.expect("enqueue heavy");
    for key in ["m1", "m2", "m3"] {
        let batch: Vec<NewJob> = (0..5).map(|_| new_job("fair").key(key)).collect();
        store.enqueue_many(batch).await.expect("enqueue medium");
    }
    // Work a little, so a snapshot may be pending when the light job arrives.
    for _ in 0..3 {
        let job = claim_one(store, "fair").await;
        store.complete(job.claim).await.expect("complete");
    }
    let light = store
        .enqueue(new_job("fair").key("light"))
        .await
        .expect("enqueue light");
    let keys = 5;
    let bound = 2 * (keys - 1);
    let mut others = 0;
    loop {
        let job = claim_one(store, "fair").await;
        store.complete(job.claim).await.expect("complete");
        if job.claim.id == light {
            break;
        }
        others += 1;
        assert!(
            others <= bound,
            "the light key's job waited for more than 2(K-1) = {bound} claims"
        );
    }
    let heavy_left = store
        .list(
            ListFilter::default()
                .queue("fair")
                .status(JobStatus::Scheduled)
                .limit(2_000),
        )
        .await
        .expect("list")
        .into_iter()
        .filter(|j| j.key.as_deref() == Some("heavy"))
        .count();
    assert!(
        heavy_left > 900,
        "the light job must finish before the heavy backlog drains"
    );

    // Batch claims are fair too: a new key's job is in the next batches, not after the backlog.
    let late = store
        .enqueue(new_job("fair").key("late"))
        .await
        .expect("enqueue");
    let mut claimed = 0;
    let mut found = false;
    while claimed <= bound && !found {
        let jobs = store.claim("fair", 4, LEASE).await.expect("claim");
        assert!(!jobs.is_empty());
        for job in jobs {
            found |= job.claim.id == late;
            claimed += 1;
            store.complete(job.claim).await.expect("complete");
        }
    }
    assert!(
        found,
        "a new key's job must come within 2(K-1) claims in batches too"
    );
}

/// Jobs without a key share one key: a keyed job is not stuck behind their backlog.
pub async fn keyless_jobs_share_one_key<B: Backend>(store: &B, _clock: &ManualClock) {
    let keyless: Vec<NewJob> = (0..50).map(|_| new_job("nokey")).collect();
    store.enqueue_many(keyless).await.expect("enqueue");
    let keyed = store
        .enqueue(new_job("nokey").key("vip"))
        .await
        .expect("enqueue");
    let mut order = Vec::new();
    for _ in 0..3 {
        let job = claim_one(store, "nokey").await;
        order.push(job.claim.id);
        store.complete(job.claim).await.expect("complete");
    }
    assert!(
        order.contains(&keyed),
        "two keys: the keyed job must be among the first 3 claims"
    );
}

/// An expired lease is rescued; the old worker's complete, fail and heartbeat are refused as
/// stale, and the new worker's complete counts.
pub async fn lease_expiry_rescues_and_fences_the_stale_worker<B: Backend>(
    store: &B,
    clock: &ManualClock,
) {
    let id = store
        .enqueue(new_job("lease").retry(RetryPolicy::new(3)))
        .await
        .expect("enqueue");
    let stale = claim_one(store, "lease").await;
    assert_eq!(
        store.rescue("lease").await.expect("rescue"),
        0,
        "lease still valid"
    );

    clock.advance(LEASE - MS);
    assert_eq!(
        store.rescue("lease").await.expect("rescue"),
        0,
        "lease valid 1 ms before its end"
    );
    clock.advance(MS);
    assert_eq!(
        store.rescue("lease").await.expect("rescue"),
        1,
        "expired lease is rescued"
    );
    assert_eq!(
        state(store, id).await,
        State::Retrying {
            run_at: clock.now()
        }
    );
    let info = store.get(id).await.expect("get").expect("exists");
    assert!(
        info.last_error.is_some(),
        "a rescue records why the attempt failed"
    );

    let fresh = claim_one(store, "lease").await;
    assert_eq!(fresh.claim.id, id);
    assert_eq!(fresh.attempt, 2, "the lost attempt counts");
    assert!(
        fresh.claim.token > stale.claim.token,
        "a new claim gets a newer token"
    );

    let err = store.complete(stale.claim).await.unwrap_err();
    assert!(
        err.is_stale_lease(),
        "stale completion must be refused as stale: {err}"
    );
    let err = store
        .fail(&stale, Failure::retryable("late"))
        .await
        .unwrap_err();
    assert!(
        err.is_stale_lease(),
        "stale failure must be refused as stale: {err}"
    );
    let err = store.heartbeat(stale.claim, LEASE).await.unwrap_err();
    assert!(
        err.is_stale_lease(),
        "stale heartbeat must be refused as stale: {err}"
    );

    store
        .complete(fresh.claim)
        .await
        .expect("the current lease completes");
    assert!(matches!(state(store, id).await, State::Succeeded { .. }));
    let err = store.complete(stale.claim).await.unwrap_err();
    assert!(
        err.is_stale_lease(),
        "stale completion after success is still stale: {err}"
    );
}

/// A heartbeat moves the lease deadline, so the job is not rescued while its worker lives.
pub async fn heartbeat_extends_the_lease<B: Backend>(store: &B, clock: &ManualClock) {
    let id = store.enqueue(new_job("hb")).await.expect("enqueue");
    let job = claim_one(store, "hb").await;
    clock.advance(Duration::from_secs(20));
    let deadline = store.heartbeat(job.claim, LEASE).await.expect("heartbeat");
    assert_eq!(deadline, clock.now() + 30_000);
    clock.advance(Duration::from_secs(20)); // 40 s after the claim, 20 s after the heartbeat
    assert_eq!(
        store.rescue("hb").await.expect("rescue"),
        0,
        "extended lease is valid"
    );
    assert!(matches!(state(store, id).await, State::Running { .. }));
    clock.advance(Duration::from_secs(10));
    assert_eq!(store.rescue("hb").await.expect("rescue"), 1);
    assert!(matches!(state(store, id).await, State::Retrying { .. }));
}

/// A rescue is a failed attempt under the policy: with no retries left the job dies.
pub async fn rescue_counts_an_attempt<B: Backend>(store: &B, clock: &ManualClock) {
    let id = store
        .enqueue(new_job("rsc").retry(RetryPolicy::new(0)))
        .await
        .expect("enqueue");
    let other = store.enqueue(new_job("rsc-other")).await.expect("enqueue");
    claim_one(store, "rsc").await;
    let other_job = claim_one(store, "rsc-other").await;
    clock.advance(LEASE);
    assert_eq!(store.rescue("rsc").await.expect("rescue"), 1);
    assert_eq!(
        state(store, id).await,
        State::Dead {
            at: clock.now(),
            reason: DeadReason::LeaseExpired
        }
    );
    assert!(
        matches!(state(store, other).await, State::Running { .. }),
        "a rescue touches only its queue"
    );
    store
        .complete(other_job.claim)
        .await
        .expect("the other queue's lease is intact");
    let stats = store.stats().await.expect("stats");
    let rsc = stats
        .iter()
        .find(|s| s.queue == "rsc")
        .expect("queue rsc in stats");
    assert_eq!(rsc.counts.dead, 1);
    assert_eq!(rsc.retries.dead, 1);
    assert_eq!(rsc.retries.failures, 1);
}

/// Completing twice, or completing an unknown job, is an error, never a panic.
pub async fn finishing_twice_is_refused<B: Backend>(store: &B, _clock: &ManualClock) {
    store.enqueue(new_job("twice")).await.expect("enqueue");
    let job = claim_one(store, "twice").await;
    store.complete(job.claim).await.expect("complete");
    let err = store.complete(job.claim).await.unwrap_err();
    assert!(!err.is_transient(), "a second completion is refused: {err}");
    let err = store.fail(&job, Failure::retryable("x")).await.unwrap_err();
    assert!(
        !err.is_transient(),
        "failing a finished job is refused: {err}"
    );
    let mut ghost = job.claim;
    ghost.id = JobId(u64::MAX - 3);
    let err = store.complete(ghost).await.unwrap_err();
    assert!(
        matches!(err, BackendError::NotFound(id) if id == ghost.id),
        "unknown job: {err}"
    );
}

/// A job that depends on another waits until that one succeeds, through its failures.
pub async fn dependencies_wait_for_success<B: Backend>(store: &B, _clock: &ManualClock) {
    dependencies_wait_for_success_in(store, "dep", "dep-b").await;
}

/// [`dependencies_wait_for_success`] with a line break in the queue names, the dependent's
/// above all: a store that files a dependent of another queue's job under its queue's name
/// must not take the name apart at the line break (queue names may hold any character but
/// NUL).
pub async fn dependencies_wait_for_success_whatever_the_queue_names<B: Backend>(
    store: &B,
    _clock: &ManualClock,
) {
    dependencies_wait_for_success_in(store, "dep\nfirst", "dep\nb\n").await;
}

/// A job of queue `other` that depends on one of queue `queue` waits until that one
/// succeeds, through its failures.
async fn dependencies_wait_for_success_in<B: Backend>(store: &B, queue: &str, other: &str) {
    let first = store
        .enqueue(new_job(queue).retry(RetryPolicy::new(1)))
        .await
        .expect("enqueue");
    let second = store
        .enqueue(new_job(other).after(first))
        .await
        .expect("enqueue");
    assert_eq!(status(store, second).await, JobStatus::Blocked);
    assert_nothing_due(store, other, "a blocked job must wait").await;

    let claimed = claim_one(store, queue).await;
    store
        .fail(&claimed, Failure::retryable("not yet"))
        .await
        .expect("fail");
    assert_eq!(
        status(store, second).await,
        JobStatus::Blocked,
        "a failure does not release"
    );
    assert_nothing_due(store, other, "a failed dependency does not release").await;

    let claimed = claim_one(store, queue).await;
    store.complete(claimed.claim).await.expect("complete");
    assert_eq!(status(store, second).await, JobStatus::Scheduled);
    let released = claim_one(store, other).await;
    assert_eq!(released.claim.id, second);
    let info = store.get(second).await.expect("get").expect("exists");
    assert_eq!(info.depends_on, Some(first));
    assert_eq!(info.queue, other);

    // A dependency that already succeeded does not block.
    let third = store
        .enqueue(new_job(other).after(first))
        .await
        .expect("enqueue");
    assert_eq!(status(store, third).await, JobStatus::Scheduled);
}

/// The dependents one success releases are served in the order they were enqueued, in
/// their own queue as in another queue than the dependency's.
pub async fn dependents_are_released_in_enqueue_order<B: Backend>(store: &B, _clock: &ManualClock) {
    let first = store.enqueue(new_job("ro")).await.expect("enqueue");
    let mut same = Vec::new();
    let mut other = Vec::new();
    for _ in 0..12 {
        other.push(
            store
                .enqueue(new_job("ro-b").after(first))
                .await
                .expect("enqueue"),
        );
        same.push(
            store
                .enqueue(new_job("ro").after(first))
                .await
                .expect("enqueue"),
        );
    }
    let claimed = claim_one(store, "ro").await;
    store.complete(claimed.claim).await.expect("complete");
    for (queue, expected) in [("ro-b", other), ("ro", same)] {
        let jobs = store.claim(queue, 20, LEASE).await.expect("claim");
        let ids: Vec<JobId> = jobs.iter().map(|j| j.claim.id).collect();
        assert_eq!(
            ids, expected,
            "released dependents of {queue} in enqueue order"
        );
    }
}

/// When a dependency dies its dependents stay blocked; reviving it and its success release
/// them.
pub async fn dependents_of_a_dead_job_wait_for_its_revival<B: Backend>(
    store: &B,
    _clock: &ManualClock,
) {
    let first = store
        .enqueue(new_job("dd").retry(RetryPolicy::new(0)))
        .await
        .expect("enqueue");
    let second = store
        .enqueue(new_job("dd-b").after(first))
        .await
        .expect("enqueue");
    let job = claim_one(store, "dd").await;
    assert_eq!(
        store
            .fail(&job, Failure::retryable("x"))
            .await
            .expect("fail"),
        Outcome::Dead {
            reason: DeadReason::RetriesExhausted
        }
    );
    assert_eq!(status(store, second).await, JobStatus::Blocked);
    assert_nothing_due(store, "dd-b", "dependents of a dead job stay blocked").await;

    assert_eq!(
        store.revive(ReviveTarget::One(first)).await.expect("retry"),
        1
    );
    assert_eq!(status(store, second).await, JobStatus::Blocked);
    let job = claim_one(store, "dd").await;
    store.complete(job.claim).await.expect("complete");
    assert_eq!(claim_one(store, "dd-b").await.claim.id, second);
}

/// A dependency on a job that does not exist is refused.
pub async fn unknown_dependency_is_refused<B: Backend>(store: &B, _clock: &ManualClock) {
    let missing = JobId(u64::MAX - 11);
    let err = store
        .enqueue(new_job("ud").after(missing))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BackendError::UnknownDependency(id) if id == missing),
        "expected UnknownDependency, got {err}"
    );
    assert!(
        store
            .list(ListFilter::default())
            .await
            .expect("list")
            .is_empty()
    );
}

/// Unique keys hold among a queue's unfinished jobs.
pub async fn unique_keys<B: Backend>(store: &B, _clock: &ManualClock) {
    let first = store
        .enqueue(new_job("uq").unique("order-1", OnConflict::Error))
        .await
        .expect("enqueue");
    let err = store
        .enqueue(new_job("uq").unique("order-1", OnConflict::Error))
        .await
        .unwrap_err();
    match err {
        BackendError::Duplicate {
            queue,
            key,
            existing,
        } => {
            assert_eq!(
                (queue.as_str(), key.as_str(), existing),
                ("uq", "order-1", first)
            );
        }
        other => panic!("expected Duplicate, got {other}"),
    }
    let ignored = store
        .enqueue(new_job("uq").unique("order-1", OnConflict::Ignore))
        .await
        .expect("enqueue ignore");
    assert_eq!(ignored, first, "Ignore returns the existing job");
    let other_queue = store
        .enqueue(new_job("uq-other").unique("order-1", OnConflict::Error))
        .await
        .expect("the key is per queue");
    assert_ne!(other_queue, first);
    let listed = store
        .list(ListFilter::default().queue("uq"))
        .await
        .expect("list");
    assert_eq!(listed.len(), 1, "duplicates are not stored");
    assert_eq!(listed[0].unique_key.as_deref(), Some("order-1"));

    let job = claim_one(store, "uq").await;
    let err = store.enqueue(job_with_key("order-1")).await.unwrap_err();
    assert!(
        matches!(err, BackendError::Duplicate { .. }),
        "a running job holds its key"
    );
    store.complete(job.claim).await.expect("complete");
    let again = store
        .enqueue(job_with_key("order-1"))
        .await
        .expect("a finished job frees its key");
    assert_ne!(again, first);

    // Within one batch, a repeated key resolves to the batch's first job.
    let ids = store
        .enqueue_many(vec![
            NewJob::new("uq-batch", "test", vec![]).unique("b", OnConflict::Ignore),
            NewJob::new("uq-batch", "test", vec![]).unique("b", OnConflict::Ignore),
        ])
        .await
        .expect("enqueue_many");
    assert_eq!(ids[0], ids[1]);
}

fn job_with_key(key: &str) -> NewJob {
    new_job("uq").unique(key, OnConflict::Error)
}

/// `list` filters by queue and status, pages by id, and `get` sees every state.
pub async fn list_and_get<B: Backend>(store: &B, clock: &ManualClock) {
    let ids = store
        .enqueue_many(
            (0..6)
                .map(|i| new_job(if i % 2 == 0 { "la" } else { "lb" }))
                .collect(),
        )
        .await
        .expect("enqueue");
    let running = claim_one(store, "la").await;
    let all = store.list(ListFilter::default()).await.expect("list");
    assert_eq!(
        all.iter().map(|j| j.id).collect::<Vec<_>>(),
        ids,
        "ordered by id"
    );
    let la = store
        .list(ListFilter::default().queue("la"))
        .await
        .expect("list");
    assert_eq!(la.len(), 3);
    assert!(la.iter().all(|j| j.queue == "la"));
    let running_list = store
        .list(ListFilter::default().status(JobStatus::Running))
        .await
        .expect("list");
    assert_eq!(running_list.len(), 1);
    assert_eq!(running_list[0].id, running.claim.id);

    let page1 = store
        .list(ListFilter::default().limit(4))
        .await
        .expect("list");
    assert_eq!(page1.len(), 4);
    let mut next = ListFilter::default().limit(4);
    next.after = Some(page1[3].id);
    let page2 = store.list(next).await.expect("list");
    assert_eq!(
        page1.iter().chain(&page2).map(|j| j.id).collect::<Vec<_>>(),
        ids,
        "pages cover every job once"
    );
    clock.advance(Duration::from_secs(1));
    let info = store.get(ids[1]).await.expect("get").expect("exists");
    assert_eq!(info.status(), JobStatus::Scheduled);
    assert_eq!(info.queue, "lb");
}

/// Stats answer from one consistent view of a queue: while jobs finish (which may move them
/// between tables, keys or files), every answer counts each job of the queue exactly once.
pub async fn stats_count_each_job_once_while_jobs_finish<B: Backend>(
    store: &B,
    _clock: &ManualClock,
) {
    const JOBS: u64 = 600;
    store
        .enqueue_many(
            (0..JOBS)
                .map(|i| new_job("snap").key(format!("k{}", i % 5)))
                .collect(),
        )
        .await
        .expect("enqueue");
    let finished = std::sync::atomic::AtomicBool::new(false);
    let finish = async {
        loop {
            let jobs = store.claim("snap", 10, LEASE).await.expect("claim");
            if jobs.is_empty() {
                break;
            }
            let batch = jobs.iter().map(|j| Finished::new(j, Ok(()))).collect();
            for settled in store.settle(batch).await.expect("settle") {
                settled.expect("each job settles");
            }
        }
        finished.store(true, Ordering::SeqCst);
    };
    let read = async {
        let mut reads = 0;
        loop {
            let last = finished.load(Ordering::SeqCst);
            let stats = store.stats().await.expect("stats");
            let counts = stats
                .iter()
                .find(|s| s.queue == "snap")
                .map(|s| s.counts)
                .unwrap_or_default();
            assert_eq!(counts.total(), JOBS, "stats read {reads}: {counts:?}");
            reads += 1;
            if last {
                assert_eq!(counts.succeeded, JOBS, "every job finished");
                break;
            }
            // An in-process store answers without waiting: let the finishing side go on.
            tokio::task::yield_now().await;
        }
    };
    tokio::join!(finish, read);
}

/// Stats count jobs per queue and status, retries, processing time and the oldest error.
pub async fn stats_count_and_time<B: Backend>(store: &B, clock: &ManualClock) {
    let policy = RetryPolicy::new(1).with_delays([Duration::from_secs(60)]);
    let ok = store.enqueue(new_job("st")).await.expect("enqueue");
    let flaky = store
        .enqueue(new_job("st").retry(policy))
        .await
        .expect("enqueue");
    store
        .enqueue(new_job("st").delay(Duration::from_secs(3600)))
        .await
        .expect("enqueue");
    store.enqueue(new_job("st-other")).await.expect("enqueue");

    let mut jobs = store.claim("st", 2, LEASE).await.expect("claim");
    assert_eq!(jobs.len(), 2);
    jobs.sort_by_key(|j| j.claim.id);
    clock.advance(Duration::from_secs(2));
    store.complete(jobs[0].claim).await.expect("complete");
    let failed_at = clock.now();
    store
        .fail(&jobs[1], Failure::retryable("flaky"))
        .await
        .expect("fail");
    assert_eq!((jobs[0].claim.id, jobs[1].claim.id), (ok, flaky));

    let stats = store.stats().await.expect("stats");
    let st = stats.iter().find(|s| s.queue == "st").expect("queue st");
    assert_eq!(st.counts.succeeded, 1);
    assert_eq!(st.counts.retrying, 1);
    assert_eq!(st.counts.scheduled, 1);
    assert_eq!(st.counts.total(), 3);
    assert_eq!(st.retries.ok, 1);
    assert_eq!(st.retries.failures, 1);
    assert_eq!(st.oldest_error_at, Some(failed_at));
    assert_eq!(
        st.processing_ms.count, 2,
        "both finished attempts are timed"
    );
    let max = st.processing_ms.max as f64;
    assert!(
        (max - 2_000.0).abs() <= 20.0,
        "processing time ~2000 ms, got {max}"
    );
    let other = stats
        .iter()
        .find(|s| s.queue == "st-other")
        .expect("queue st-other");
    assert_eq!(other.counts.scheduled, 1);
    assert_eq!(other.oldest_error_at, None);

    clock.advance(Duration::from_secs(60));
    let retry = claim_one(store, "st").await;
    assert_eq!(retry.claim.id, flaky);
    store.complete(retry.claim).await.expect("complete");
    let stats = store.stats().await.expect("stats");
    let st = stats.iter().find(|s| s.queue == "st").expect("queue st");
    assert_eq!(st.counts.succeeded, 2);
    assert_eq!(st.retries.ok, 2);
    assert_eq!(st.retries.retries, 1, "one retry ran");
    assert_eq!(st.oldest_error_at, None, "a success ends the error");
}

/// Operators revive dead jobs, one or all, with a fresh retry budget.
pub async fn operator_retry_revives_dead_jobs<B: Backend>(store: &B, clock: &ManualClock) {
    let mut dead = Vec::new();
    for queue in ["rv", "rv", "rv-other"] {
        let id = store
            .enqueue(new_job(queue).retry(RetryPolicy::new(0)))
            .await
            .expect("enqueue");
        let job = claim_one(store, queue).await;
        store
            .fail(&job, Failure::retryable("down"))
            .await
            .expect("fail");
        dead.push(id);
    }
    let alive = store.enqueue(new_job("rv")).await.expect("enqueue");
    let err = store.revive(ReviveTarget::One(alive)).await.unwrap_err();
    assert!(!err.is_transient(), "only dead jobs can be retried: {err}");
    let err = store
        .revive(ReviveTarget::One(JobId(u64::MAX - 5)))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BackendError::NotFound(_)),
        "unknown job: {err}"
    );

    clock.advance(Duration::from_secs(5));
    assert_eq!(
        store
            .revive(ReviveTarget::One(dead[0]))
            .await
            .expect("retry"),
        1
    );
    assert_eq!(
        state(store, dead[0]).await,
        State::Scheduled {
            run_at: clock.now()
        }
    );
    assert_eq!(
        store
            .get(dead[0])
            .await
            .expect("get")
            .expect("exists")
            .attempts,
        0
    );
    let revived = store
        .revive(ReviveTarget::AllDead {
            queue: Some("rv".into()),
        })
        .await
        .expect("retry all");
    assert_eq!(revived, 1, "only rv's remaining dead job");
    assert_eq!(
        status(store, dead[2]).await,
        JobStatus::Dead,
        "other queues untouched"
    );
    assert_eq!(
        store
            .revive(ReviveTarget::AllDead { queue: None })
            .await
            .expect("retry all"),
        1
    );
    let mut claimed: Vec<JobId> = store
        .claim("rv", 10, LEASE)
        .await
        .expect("claim")
        .iter()
        .map(|j| {
            assert_eq!(j.attempt, 1, "a revived job starts over");
            j.claim.id
        })
        .collect();
    claimed.sort();
    assert_eq!(claimed, vec![dead[0], dead[1], alive]);
}

/// Purge deletes matching jobs but never running ones.
pub async fn purge_spares_running_jobs<B: Backend>(store: &B, _clock: &ManualClock) {
    let ids = store
        .enqueue_many((0..4).map(|_| new_job("pg")).collect())
        .await
        .expect("enqueue");
    store.enqueue(new_job("pg-keep")).await.expect("enqueue");
    let running = claim_one(store, "pg").await;
    let purged = store
        .purge(Purge {
            queue: Some("pg".into()),
            status: None,
        })
        .await
        .expect("purge");
    assert_eq!(purged, 3, "every job of pg but the running one");
    assert!(matches!(
        state(store, running.claim.id).await,
        State::Running { .. }
    ));
    for id in ids.iter().filter(|id| **id != running.claim.id) {
        assert!(
            store.get(*id).await.expect("get").is_none(),
            "job {id} purged"
        );
    }
    assert_nothing_due(store, "pg", "purged jobs are not claimed").await;
    store
        .complete(running.claim)
        .await
        .expect("a running job survives purge");
    let purged = store
        .purge(Purge {
            queue: None,
            status: Some(JobStatus::Succeeded),
        })
        .await
        .expect("purge");
    assert_eq!(purged, 1);
    let left = store.list(ListFilter::default()).await.expect("list");
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].queue, "pg-keep");
}

/// Expects `remove_queue` to refuse with [`BackendError::QueueNotEmpty`] and `live` jobs.
async fn assert_not_removable<B: Backend>(store: &B, queue: &str, live: u64, why: &str) {
    match store.remove_queue(queue).await {
        Err(BackendError::QueueNotEmpty { queue: q, live: n }) => {
            assert_eq!((q.as_str(), n), (queue, live), "{why}");
        }
        other => panic!("{why}: removing {queue:?} answered {other:?}"),
    }
}

/// A queue is removed only once none of its jobs is live (blocked, scheduled, running or
/// retrying); its finished jobs and counters go with it, other queues keep theirs, and a
/// later job of the same name starts a fresh queue.
pub async fn remove_queue_only_when_it_has_no_live_jobs<B: Backend>(
    store: &B,
    clock: &ManualClock,
) {
    match store.remove_queue("rq-never").await {
        Err(BackendError::UnknownQueue(name)) => assert_eq!(name, "rq-never"),
        other => panic!("removing a queue that never existed answered {other:?}"),
    }
    let keep = store.enqueue(new_job("rq-keep")).await.expect("enqueue");
    let policy = RetryPolicy::new(1).with_delays([Duration::from_secs(10)]);
    let first = store
        .enqueue(new_job("rq").retry(policy))
        .await
        .expect("enqueue");
    let delayed = store
        .enqueue(new_job("rq").delay(Duration::from_secs(60)))
        .await
        .expect("enqueue");
    let blocked = store
        .enqueue(new_job("rq-blocked").after(keep))
        .await
        .expect("enqueue");
    assert_not_removable(store, "rq", 2, "a ready and a delayed job are live").await;
    assert_not_removable(store, "rq-blocked", 1, "a blocked job is live").await;

    let running = claim_one(store, "rq").await;
    assert_eq!(running.claim.id, first);
    assert_not_removable(store, "rq", 2, "a running job is live").await;
    let outcome = store
        .fail(&running, Failure::retryable("once"))
        .await
        .expect("fail");
    assert!(matches!(outcome, Outcome::Retry { .. }), "{outcome:?}");
    assert_not_removable(store, "rq", 2, "a retrying job is live").await;
    clock.advance(Duration::from_secs(10));
    let retried = claim_one(store, "rq").await;
    store
        .fail(&retried, Failure::permanent("gone"))
        .await
        .expect("fail");
    clock.advance(Duration::from_secs(50));
    let last = claim_one(store, "rq").await;
    assert_eq!(last.claim.id, delayed);
    store.complete(last.claim).await.expect("complete");

    // One dead and one succeeded job left: history, not live work.
    let removed = store
        .remove_queue("rq")
        .await
        .expect("remove an idle queue");
    assert_eq!(removed, 2, "its two finished jobs are deleted");
    for id in [first, delayed] {
        assert!(
            store.get(id).await.expect("get").is_none(),
            "job {id} went with its queue"
        );
    }
    let listed = store
        .list(ListFilter::default().queue("rq"))
        .await
        .expect("list");
    assert!(listed.is_empty(), "left behind: {listed:?}");
    let stats = store.stats().await.expect("stats");
    assert!(
        stats.iter().all(|s| s.queue != "rq"),
        "a removed queue is not listed: {stats:?}"
    );
    let kept = stats
        .iter()
        .find(|s| s.queue == "rq-keep")
        .expect("other queues stay");
    assert_eq!(kept.counts.scheduled, 1);
    assert!(stats.iter().any(|s| s.queue == "rq-blocked"));
    assert_eq!(status(store, blocked).await, JobStatus::Blocked);
    match store.remove_queue("rq").await {
        Err(BackendError::UnknownQueue(name)) => assert_eq!(name, "rq"),
        other => panic!("removing a removed queue answered {other:?}"),
    }

    // The name starts afresh: no counter of the removed queue comes back.
    let again = store.enqueue(new_job("rq")).await.expect("enqueue");
    let job = claim_one(store, "rq").await;
    assert_eq!(job.claim.id, again);
    store.complete(job.claim).await.expect("complete");
    let stats = store.stats().await.expect("stats");
    let fresh = stats.iter().find(|s| s.queue == "rq").expect("queue rq");
    assert_eq!(fresh.counts.total(), 1);
    assert_eq!(
        (fresh.retries.ok, fresh.retries.dead, fresh.retries.failures),
        (1, 0, 0),
        "counters of the removed queue came back"
    );
    assert_eq!(fresh.processing_ms.count, 1);
}

/// Prune deletes finished jobs that finished long enough ago, and nothing else.
pub async fn prune_deletes_old_finished_jobs<B: Backend>(store: &B, clock: &ManualClock) {
    let old_ok = store.enqueue(new_job("pr")).await.expect("enqueue");
    let old_dead = store
        .enqueue(new_job("pr").retry(RetryPolicy::new(0)))
        .await
        .expect("enqueue");
    let mut jobs = store.claim("pr", 2, LEASE).await.expect("claim");
    jobs.sort_by_key(|j| j.claim.id);
    store.complete(jobs[0].claim).await.expect("complete");
    store
        .fail(&jobs[1], Failure::retryable("x"))
        .await
        .expect("fail");

    clock.advance(Duration::from_secs(1800));
    let young = store.enqueue(new_job("pr")).await.expect("enqueue");
    let claimed = claim_one(store, "pr").await;
    store.complete(claimed.claim).await.expect("complete");
    let waiting = store.enqueue(job_named("pr")).await.expect("enqueue");
    let old_waiting = store
        .enqueue(new_job("pr").delay(Duration::from_secs(86_400)))
        .await
        .expect("enqueue");

    clock.advance(Duration::from_secs(1800) + MS);
    let pruned = store
        .prune(Duration::from_secs(3600).into())
        .await
        .expect("prune");
    assert_eq!(pruned, 2, "the two jobs finished over an hour ago");
    assert!(store.get(old_ok).await.expect("get").is_none());
    assert!(store.get(old_dead).await.expect("get").is_none());
    for id in [young, waiting, old_waiting] {
        assert!(store.get(id).await.expect("get").is_some(), "job {id} kept");
    }
    clock.advance(Duration::from_secs(1800));
    assert_eq!(
        store
            .prune(Duration::from_secs(3600).into())
            .await
            .expect("prune"),
        1
    );
    assert!(store.get(young).await.expect("get").is_none());
}

/// Finishes one job of queue `queue`: it succeeds, or dies at its first failure.
async fn finish_one<B: Backend>(store: &B, queue: &str, succeed: bool) -> JobId {
    let id = store
        .enqueue(new_job(queue).retry(RetryPolicy::new(0)))
        .await
        .expect("enqueue");
    let job = claim_one(store, queue).await;
    assert_eq!(job.claim.id, id);
    if succeed {
        store.complete(job.claim).await.expect("complete");
    } else {
        store
            .fail(&job, Failure::retryable("x"))
            .await
            .expect("fail");
    }
    id
}

/// A dead job that other jobs wait for is kept by `prune` while they wait, whatever its
/// age (deleting it would leave them blocked for good: reviving it is what releases them);
/// once the last of them is gone, the next prune deletes it. Jobs of its own queue and of
/// another count alike.
pub async fn prune_keeps_a_dead_job_others_wait_for<B: Backend>(store: &B, clock: &ManualClock) {
    prune_keeps_a_dead_job_others_wait_for_in(store, clock, "pk", "pk-other").await;
}

/// [`prune_keeps_a_dead_job_others_wait_for`] with a line break in the queue names, the
/// waiting job's above all: a store that files a dependent of another queue's job under its
/// queue's name must not take the name apart at the line break, and so forget that it waits.
pub async fn prune_keeps_a_dead_job_others_wait_for_whatever_the_queue_names<B: Backend>(
    store: &B,
    clock: &ManualClock,
) {
    prune_keeps_a_dead_job_others_wait_for_in(store, clock, "pk\nfirst", "pk\nother\n").await;
}

/// A dead job of queue `queue` that jobs of `queue` and of `other` wait for is kept by
/// `prune` until the last of them is gone.
async fn prune_keeps_a_dead_job_others_wait_for_in<B: Backend>(
    store: &B,
    clock: &ManualClock,
    queue: &str,
    other: &str,
) {
    let once = RetryPolicy::new(0);
    let dep = store
        .enqueue(new_job(queue).retry(once.clone()))
        .await
        .expect("enqueue");
    let lone = store
        .enqueue(new_job(queue).retry(once))
        .await
        .expect("enqueue");
    for waiting in [queue, other] {
        store
            .enqueue(new_job(waiting).after(dep))
            .await
            .expect("enqueue a dependent");
    }
    for id in [dep, lone] {
        let job = claim_one(store, queue).await;
        assert_eq!(job.claim.id, id);
        store
            .fail(&job, Failure::retryable("down"))
            .await
            .expect("fail");
        assert_eq!(status(store, id).await, JobStatus::Dead);
    }
    clock.advance(Duration::from_secs(60));
    let retention = Retention::finished(Duration::from_secs(1));
    assert_eq!(
        store.prune(retention).await.expect("prune"),
        1,
        "only the dead job nobody waits for goes"
    );
    assert!(store.get(lone).await.expect("get").is_none());
    assert_eq!(status(store, dep).await, JobStatus::Dead);
    let blocked = |queue: &str| Purge {
        queue: Some(queue.to_owned()),
        status: Some(JobStatus::Blocked),
    };
    assert_eq!(store.purge(blocked(queue)).await.expect("purge"), 1);
    assert_eq!(
        store.prune(retention).await.expect("prune"),
        0,
        "a job of another queue still waits"
    );
    assert_eq!(status(store, dep).await, JobStatus::Dead);
    assert_eq!(store.purge(blocked(other)).await.expect("purge"), 1);
    assert_eq!(store.prune(retention).await.expect("prune"), 1);
    assert!(store.get(dep).await.expect("get").is_none());
}

/// A prune keeps each outcome for its own age: succeeded and dead jobs go at different
/// times, an outcome kept for good is never deleted however old, a retention that keeps
/// everything deletes nothing, and a revived job is live again (never pruned). The status
/// counts follow.
pub async fn prune_keeps_each_outcome_for_its_own_age<B: Backend>(store: &B, clock: &ManualClock) {
    const HOUR: Duration = Duration::from_secs(3600);
    let prune = |retention: Retention| async move { store.prune(retention).await.expect("prune") };
    let counts = || async {
        let stats = store.stats().await.expect("stats");
        let s = stats.iter().find(|s| s.queue == "po").expect("queue po");
        (s.counts.succeeded, s.counts.dead)
    };
    let ok_1 = finish_one(store, "po", true).await;
    let dead_1 = finish_one(store, "po", false).await;
    clock.advance(HOUR);
    let ok_2 = finish_one(store, "po", true).await;
    let dead_2 = finish_one(store, "po", false).await;
    clock.advance(HOUR + MS);
    assert_eq!(counts().await, (2, 2));

    // Two hours after the first pair: succeeded jobs go after 90 minutes, dead after 3 hours.
    let split = Retention::finished(HOUR * 3 / 2).dead_for(HOUR * 3);
    assert_eq!(prune(split).await, 1, "only the old succeeded job");
    assert!(store.get(ok_1).await.expect("get").is_none());
    for id in [dead_1, ok_2, dead_2] {
        assert!(store.get(id).await.expect("get").is_some(), "job {id} kept");
    }
    assert_eq!(prune(Retention::forever()).await, 0);

    // Four hours after the first pair; dead jobs kept for good.
    clock.advance(HOUR * 2);
    let keep_dead = Retention::finished(HOUR * 3 / 2).keep_dead();
    assert_eq!(prune(keep_dead).await, 1, "the second succeeded job");
    assert!(store.get(ok_2).await.expect("get").is_none());
    assert_eq!(prune(keep_dead).await, 0, "dead jobs stay, however old");
    assert_eq!(counts().await, (0, 2));

    // Succeeded jobs kept for good; dead ones after 3.5 hours: only the first dead job.
    let ok_3 = finish_one(store, "po", true).await;
    clock.advance(HOUR * 10);
    assert_eq!(
        store
            .revive(ReviveTarget::One(dead_2))
            .await
            .expect("revive"),
        1
    );
    let dead_only = Retention::forever().dead_for(HOUR * 7 / 2);
    assert_eq!(
        prune(dead_only).await,
        1,
        "the first dead job; the revived one is live"
    );
    assert!(store.get(dead_1).await.expect("get").is_none());
    assert!(
        store.get(ok_3).await.expect("get").is_some(),
        "succeeded kept"
    );
    assert_eq!(status(store, dead_2).await, JobStatus::Scheduled);
    assert_eq!(
        prune(Retention::finished(Duration::ZERO).keep_dead()).await,
        1
    );
    assert!(store.get(ok_3).await.expect("get").is_none());
    assert_eq!(status(store, dead_2).await, JobStatus::Scheduled);
    assert_eq!(counts().await, (0, 0));
}

fn job_named(queue: &str) -> NewJob {
    NewJob::new(queue, "named", b"1".to_vec())
}

/// `wait_for_jobs` returns by its timeout when nothing is due, at once when a job is due,
/// and a long wait that is still pending wakes soon after an enqueue: a store's wake-up, not
/// its timeout (an hour here), ends it.
pub async fn wait_for_jobs_returns<B: Backend>(store: &B, _clock: &ManualClock) {
    tokio::time::timeout(
        PATIENCE,
        store.wait_for_jobs("wq", Duration::from_millis(20)),
    )
    .await
    .expect("wait_for_jobs with nothing due returns by its timeout");

    let waiting = store.wait_for_jobs("wq", Duration::from_secs(3600));
    tokio::pin!(waiting);
    for _ in 0..8 {
        assert!(
            futures::poll!(waiting.as_mut()).is_pending(),
            "wait_for_jobs returned while nothing was due"
        );
        tokio::task::yield_now().await;
    }
    store.enqueue(new_job("wq")).await.expect("enqueue");
    tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("an enqueue wakes a pending wait_for_jobs long before its timeout");

    tokio::time::timeout(
        PATIENCE,
        store.wait_for_jobs("wq", Duration::from_secs(3600)),
    )
    .await
    .expect("wait_for_jobs with a due job returns at once");
}

/// A pending `wait_for_jobs` ends when a job that is due soon joins the queue, a delayed job
/// or a retry with a backoff, long before its timeout: a wait that slept until the due time
/// it saw at its start would miss both, and a worker would pick them up a poll interval late
/// (never, with an endless one). The store may wake the wait when the job is filed or when it
/// is due; the failure bound is [`PATIENCE`], never a measured speed.
pub async fn a_pending_wait_for_jobs_wakes_for_a_delayed_job_or_retry<B: Backend>(
    store: &B,
    clock: &ManualClock,
) {
    const SOON: Duration = Duration::from_millis(200);
    /// A wait of an hour on `queue` that stayed pending over a few polls. A store may end a
    /// wait early (a wake-up left by an earlier call, which costs a worker one empty claim):
    /// such a wait is replaced, so the one handed back has worked out its sleep.
    async fn pending<'a, B: Backend>(
        store: &'a B,
        queue: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        'fresh: for _ in 0..100 {
            let mut waiting = Box::pin(store.wait_for_jobs(queue, Duration::from_secs(3600)));
            for _ in 0..8 {
                if futures::poll!(waiting.as_mut()).is_ready() {
                    continue 'fresh;
                }
                tokio::task::yield_now().await;
            }
            return waiting;
        }
        panic!("wait_for_jobs on {queue:?} keeps returning while nothing is due");
    }

    // A delayed job, enqueued while a wait is pending.
    let waiting = pending(store, "soon").await;
    let delayed = store
        .enqueue(new_job("soon").delay(SOON))
        .await
        .expect("enqueue");
    tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("a pending wait_for_jobs ends when a delayed job is due, before its timeout");
    clock.advance(SOON);
    let job = claim_one(store, "soon").await;
    assert_eq!(job.claim.id, delayed);

    // A retry with a backoff, recorded while a wait is pending.
    let policy = RetryPolicy::new(1).with_delays([SOON]);
    let retried = store
        .enqueue(new_job("soon").retry(policy))
        .await
        .expect("enqueue");
    let job = claim_one(store, "soon").await;
    assert_eq!(job.claim.id, retried);
    let waiting = pending(store, "soon").await;
    store
        .fail(&job, Failure::retryable("later"))
        .await
        .expect("fail");
    tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("a pending wait_for_jobs ends when a retry is due, before its timeout");
    clock.advance(SOON);
    assert_eq!(claim_one(store, "soon").await.claim.id, retried);
}

/// A released dependent is due at the later of its own run time and its release, in its own
/// queue and in another: one due before its release shows the release time (never 0, which
/// a dashboard reads as waiting since 1970) and runs at once; a delayed one keeps its delay.
pub async fn a_released_dependent_is_due_at_its_own_time_or_its_release<B: Backend>(
    store: &B,
    clock: &ManualClock,
) {
    const HOUR: Duration = Duration::from_secs(3600);
    let start = clock.now();
    let dep = store.enqueue(new_job("rel")).await.expect("enqueue");
    let mut now_ids = Vec::new();
    let mut later_ids = Vec::new();
    for queue in ["rel", "rel-other"] {
        now_ids.push(
            store
                .enqueue(new_job(queue).after(dep))
                .await
                .expect("enqueue"),
        );
        later_ids.push(
            store
                .enqueue(new_job(queue).after(dep).delay(HOUR))
                .await
                .expect("enqueue"),
        );
    }
    clock.advance(Duration::from_secs(60));
    let released = clock.now();
    let job = claim_one(store, "rel").await;
    assert_eq!(job.claim.id, dep);
    store.complete(job.claim).await.expect("complete");

    for (queue, (soon, later)) in ["rel", "rel-other"]
        .into_iter()
        .zip(now_ids.into_iter().zip(later_ids))
    {
        assert_eq!(
            state(store, soon).await,
            State::Scheduled { run_at: released },
            "a dependent due before its release is due from its release ({queue:?})"
        );
        assert_eq!(
            state(store, later).await,
            State::Scheduled {
                run_at: start + 3_600_000
            },
            "a delayed dependent keeps its delay ({queue:?})"
        );
        assert_eq!(claim_one(store, queue).await.claim.id, soon);
        assert_nothing_due(store, queue, "a delayed dependent waits for its delay").await;
    }
    clock.set(start + 3_600_000 - 1);
    assert_nothing_due(store, "rel", "a delayed dependent waits for its delay").await;
    assert_nothing_due(
        store,
        "rel-other",
        "a delayed dependent waits for its delay",
    )
    .await;
    clock.set(start + 3_600_000);
    for queue in ["rel", "rel-other"] {
        let job = claim_one(store, queue).await;
        assert_eq!(job.run_at, start + 3_600_000, "{queue:?}");
    }
}

/// `wait_for_jobs` takes any timeout, up to `Duration::MAX` ("until there is something to
/// claim"): such a wait is pending while nothing is due, an enqueue wakes it, and it returns
/// at once while a job is due. (Worker durations may be `Duration::MAX`, and a worker passes
/// its queue's poll interval here.)
pub async fn an_endless_wait_for_jobs_ends_with_a_job<B: Backend>(store: &B, _clock: &ManualClock) {
    let waiting = store.wait_for_jobs("endless", Duration::MAX);
    tokio::pin!(waiting);
    for _ in 0..8 {
        assert!(
            futures::poll!(waiting.as_mut()).is_pending(),
            "an endless wait_for_jobs returned while nothing was due"
        );
        tokio::task::yield_now().await;
    }
    store.enqueue(new_job("endless")).await.expect("enqueue");
    tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("an enqueue wakes an endless wait_for_jobs");
    tokio::time::timeout(PATIENCE, store.wait_for_jobs("endless", Duration::MAX))
        .await
        .expect("an endless wait_for_jobs with a due job returns at once");
}

/// One settlement mixes successes, retryable and permanent failures and a stale lease: each
/// entry is answered on its own, in order, and the stale one does not stop the others.
pub async fn settle_applies_each_entry_on_its_own<B: Backend>(store: &B, clock: &ManualClock) {
    let policy = RetryPolicy::new(1).with_delays([Duration::from_secs(5)]);
    let ids = store
        .enqueue_many(
            (0..4)
                .map(|_| new_job("settle").retry(policy.clone()))
                .collect(),
        )
        .await
        .expect("enqueue");
    let jobs = store.claim("settle", 3, LEASE).await.expect("claim");
    assert_eq!(jobs.len(), 3);
    // The fourth runs under a short lease that runs out: it is rescued, its claim is stale.
    let short = store
        .claim("settle", 1, Duration::from_secs(1))
        .await
        .expect("claim")
        .remove(0);
    clock.advance(Duration::from_secs(2));
    assert_eq!(store.rescue("settle").await.expect("rescue"), 1);
    let now = clock.now();

    let batch = vec![
        Finished::new(&jobs[0], Ok(())),
        Finished::new(&jobs[1], Err(Failure::retryable("try later"))),
        Finished::new(&short, Ok(())),
        Finished::new(&jobs[2], Err(Failure::permanent("cannot work"))),
    ];
    let answers = store.settle(batch).await.expect("settle");
    assert_eq!(answers.len(), 4, "one answer per entry");
    assert_eq!(answers[0].as_ref().expect("a success"), &Settled::Succeeded);
    assert_eq!(
        answers[1].as_ref().expect("a retry"),
        &Settled::Retry {
            run_at: now + 5_000
        }
    );
    let stale = answers[2]
        .as_ref()
        .expect_err("the rescued job's lease is stale");
    assert!(stale.is_stale_lease(), "stale lease, got {stale}");
    assert_eq!(
        answers[3].as_ref().expect("a death"),
        &Settled::Dead {
            reason: DeadReason::Discarded
        }
    );

    assert_eq!(status(store, jobs[0].claim.id).await, JobStatus::Succeeded);
    assert_eq!(status(store, jobs[1].claim.id).await, JobStatus::Retrying);
    assert_eq!(status(store, jobs[2].claim.id).await, JobStatus::Dead);
    // The rescued job was not completed by its stale worker.
    assert_eq!(status(store, short.claim.id).await, JobStatus::Retrying);
    let order: Vec<JobId> = jobs
        .iter()
        .map(|j| j.claim.id)
        .chain([short.claim.id])
        .collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(sorted, ids);

    // Settling the same attempts again is refused entry by entry, and nothing changes.
    let again = store
        .settle(vec![
            Finished::new(&jobs[0], Ok(())),
            Finished::new(&jobs[2], Ok(())),
        ])
        .await
        .expect("settle");
    assert!(again.iter().all(Result::is_err), "{again:?}");
    assert_eq!(status(store, jobs[2].claim.id).await, JobStatus::Dead);
    // An empty batch is a valid batch.
    assert!(store.settle(Vec::new()).await.expect("settle").is_empty());
}

/// A batch holding an unknown job and the same claim twice: those entries fail, the rest of
/// the batch commits.
pub async fn settle_survives_bad_entries<B: Backend>(store: &B, _clock: &ManualClock) {
    store
        .enqueue_many(vec![new_job("bad"), new_job("bad")])
        .await
        .expect("enqueue");
    let jobs = store.claim("bad", 2, LEASE).await.expect("claim");
    let mut ghost = jobs[0].clone();
    ghost.claim.id = JobId(u64::MAX - 7);
    let answers = store
        .settle(vec![
            Finished::new(&ghost, Ok(())),
            Finished::new(&jobs[0], Ok(())),
            Finished::new(&jobs[0], Ok(())),
            Finished::new(&jobs[1], Ok(())),
        ])
        .await
        .expect("settle");
    assert!(answers[0].is_err(), "an unknown job is refused");
    assert_eq!(answers[1].as_ref().expect("first"), &Settled::Succeeded);
    assert!(
        answers[2].is_err(),
        "the second settlement of one claim is refused"
    );
    assert_eq!(answers[3].as_ref().expect("last"), &Settled::Succeeded);
    assert_eq!(status(store, jobs[1].claim.id).await, JobStatus::Succeeded);
}

/// `settle_and_claim` settles, then claims the next jobs fairly.
pub async fn settle_and_claim_hands_out_the_next_jobs<B: Backend>(store: &B, _clock: &ManualClock) {
    for key in ["a", "a", "a", "b"] {
        store
            .enqueue(new_job("sc").key(key))
            .await
            .expect("enqueue");
    }
    let first = claim_one(store, "sc").await;
    assert_eq!(first.key.as_deref(), Some("a"));
    let out = store
        .settle_and_claim(vec![Finished::new(&first, Ok(()))], "sc", 2, LEASE)
        .await
        .expect("settle and claim");
    assert_eq!(out.settled.len(), 1);
    assert_eq!(
        out.settled[0].as_ref().expect("settled"),
        &Settled::Succeeded
    );
    let next = out.claimed.expect("claimed");
    let keys: Vec<_> = next
        .iter()
        .map(|j| j.key.clone().unwrap_or_default())
        .collect();
    assert_eq!(keys, ["b", "a"], "b's only job overtakes a's backlog");
    assert_eq!(status(store, first.claim.id).await, JobStatus::Succeeded);
    // `usize::MAX` asks for every job there is: a's last one.
    let finished = next.iter().map(|j| Finished::new(j, Ok(()))).collect();
    let out = store
        .settle_and_claim(finished, "sc", usize::MAX, LEASE)
        .await
        .expect("settle and claim all");
    assert!(out.settled.iter().all(Result::is_ok), "{:?}", out.settled);
    let last = out.claimed.expect("claimed");
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].key.as_deref(), Some("a"));
}

/// A lease of `Duration::MAX` ("it never expires") ends at the latest time a store records,
/// [`MAX_MILLIS`], whether a claim, `settle_and_claim`, `heartbeat` or `heartbeat_many`
/// grants it; the job runs and settles like any other.
pub async fn an_endless_lease_ends_at_the_latest_time<B: Backend>(store: &B, _clock: &ManualClock) {
    let ids = store
        .enqueue_many(vec![new_job("endless"), new_job("endless")])
        .await
        .expect("enqueue");
    let jobs = store
        .claim("endless", 1, Duration::MAX)
        .await
        .expect("claim");
    assert_eq!(jobs.len(), 1, "the claim handed out no job");
    let job = &jobs[0];
    assert_eq!((job.claim.id, job.lease_deadline), (ids[0], MAX_MILLIS));
    let renewed = store
        .heartbeat(job.claim, Duration::MAX)
        .await
        .expect("heartbeat");
    assert_eq!(renewed, MAX_MILLIS);
    let many = store
        .heartbeat_many(vec![job.claim], Duration::MAX)
        .await
        .expect("heartbeat_many");
    assert_eq!(*many[0].as_ref().expect("renewed"), MAX_MILLIS);
    let out = store
        .settle_and_claim(
            vec![Finished::new(job, Ok(()))],
            "endless",
            1,
            Duration::MAX,
        )
        .await
        .expect("settle and claim");
    assert_eq!(
        out.settled[0].as_ref().expect("settled"),
        &Settled::Succeeded
    );
    let next = out.claimed.expect("claimed");
    assert_eq!(next.len(), 1, "the second job was not handed out");
    assert_eq!(
        (next[0].claim.id, next[0].lease_deadline),
        (ids[1], MAX_MILLIS)
    );
    store
        .settle(vec![Finished::new(&next[0], Ok(()))])
        .await
        .expect("settle");
    for id in ids {
        assert_eq!(status(store, id).await, JobStatus::Succeeded);
    }
}

/// `heartbeat_many` extends every current lease and refuses stale ones, each on its own.
pub async fn heartbeat_many_extends_each_lease<B: Backend>(store: &B, clock: &ManualClock) {
    store
        .enqueue_many(vec![new_job("hb"), new_job("hb"), new_job("hb")])
        .await
        .expect("enqueue");
    let jobs = store.claim("hb", 2, LEASE).await.expect("claim");
    let done = claim_one(store, "hb").await;
    store.complete(done.claim).await.expect("complete");
    clock.advance(Duration::from_secs(10));
    let now = clock.now();
    let answers = store
        .heartbeat_many(vec![jobs[0].claim, done.claim, jobs[1].claim], LEASE)
        .await
        .expect("heartbeat_many");
    assert_eq!(answers.len(), 3);
    assert_eq!(*answers[0].as_ref().expect("current"), now + 30_000);
    assert!(
        answers[1].is_err(),
        "a finished job's lease is not extended"
    );
    assert_eq!(*answers[2].as_ref().expect("current"), now + 30_000);
    // The extended leases hold past their first deadline.
    clock.advance(Duration::from_secs(25));
    assert_eq!(store.rescue("hb").await.expect("rescue"), 0);
}

/// Holding a queue's retries back moves its due and soon-due retries to the hold's end,
/// leaves new jobs, later retries and other queues alone, and shows in `stats`. Every store
/// in this workspace offers [`Backend::hold_retries`], so the suite requires it.
pub async fn hold_retries_holds_back_due_retries_only<B: Backend>(store: &B, clock: &ManualClock) {
    let soon = RetryPolicy::new(3).with_delays([Duration::from_secs(1)]);
    let late = RetryPolicy::new(3).with_delays([Duration::from_secs(600)]);
    let ids = store
        .enqueue_many(vec![
            new_job("hold").retry(soon.clone()),
            new_job("hold").retry(late),
            new_job("hold-other").retry(soon),
        ])
        .await
        .expect("enqueue");
    for queue in ["hold", "hold", "hold-other"] {
        let job = claim_one(store, queue).await;
        store
            .fail(&job, Failure::retryable("downstream is down"))
            .await
            .expect("fail");
    }
    let fresh = store.enqueue(new_job("hold")).await.expect("enqueue");
    clock.advance(Duration::from_secs(2));
    let now = clock.now();
    let until = now + 60_000;
    assert_eq!(
        store.hold_retries("hold", until).await.expect("hold"),
        1,
        "only the due retry of the queue moves"
    );
    // The new job runs; the held retry does not.
    let job = claim_one(store, "hold").await;
    assert_eq!(job.claim.id, fresh);
    assert_nothing_due(store, "hold", "a held retry").await;
    // Another queue's retries are not held.
    assert_eq!(claim_one(store, "hold-other").await.claim.id, ids[2]);
    let stats = store.stats().await.expect("stats");
    let hold = stats.iter().find(|s| s.queue == "hold").expect("queue");
    assert_eq!(hold.next_retry_at, Some(until));
    assert_eq!(
        state(store, ids[0]).await,
        State::Retrying { run_at: until }
    );
    clock.advance(Duration::from_secs(60));
    assert_eq!(claim_one(store, "hold").await.claim.id, ids[0]);
    assert_eq!(
        store.hold_retries("nowhere", until).await.expect("hold"),
        0,
        "an unknown queue holds nothing"
    );
    // A time past the end of the year 9999 is refused and moves nothing; that end itself
    // holds the late retry until then.
    let late = state(store, ids[1]).await;
    for until in [MAX_MILLIS + 1, u64::MAX] {
        match store.hold_retries("hold", until).await {
            Err(BackendError::Invalid(_)) => {}
            other => panic!("holding retries until {until} answered {other:?}"),
        }
    }
    assert_eq!(state(store, ids[1]).await, late);
    assert_eq!(
        store.hold_retries("hold", MAX_MILLIS).await.expect("hold"),
        1
    );
    assert_eq!(
        state(store, ids[1]).await,
        State::Retrying { run_at: MAX_MILLIS }
    );
}

/// A claimed job handed back before it ran is due again at once, its attempt refunded, and
/// its old lease fenced. Every store in this workspace offers [`Backend::release`], so the
/// suite requires it.
pub async fn release_hands_back_without_an_attempt<B: Backend>(store: &B, _clock: &ManualClock) {
    store
        .enqueue_many(vec![new_job("rel"), new_job("rel")])
        .await
        .expect("enqueue");
    let jobs = store.claim("rel", 2, LEASE).await.expect("claim");
    let answers = store
        .release(vec![jobs[1].claim, jobs[1].claim])
        .await
        .expect("release");
    assert!(answers[0].is_ok(), "{:?}", answers[0]);
    assert!(
        answers[1].is_err(),
        "a second release of one claim is refused"
    );
    let info = store
        .get(jobs[1].claim.id)
        .await
        .expect("get")
        .expect("job");
    assert_eq!((info.status(), info.attempts), (JobStatus::Scheduled, 0));
    let again = claim_one(store, "rel").await;
    assert_eq!(again.claim.id, jobs[1].claim.id);
    assert_eq!(again.attempt, 1, "the released attempt was refunded");
    assert!(again.claim.token > jobs[1].claim.token);
    let stale = store.complete(jobs[1].claim).await.expect_err("fenced");
    assert!(stale.is_stale_lease(), "{stale}");
    store.complete(again.claim).await.expect("complete");
    store.complete(jobs[0].claim).await.expect("complete");
    let stats = store.stats().await.expect("stats");
    let rel = stats.iter().find(|q| q.queue == "rel").expect("queue");
    assert_eq!(rel.counts.succeeded, 2);
    assert_eq!(rel.retries.failures, 0, "a release is not a failure");
}

/// A worker on the store: concurrency 4, quick polling, the given handlers, and every
/// finished attempt reported on the returned channel.
fn start_worker<B: Backend>(
    store: &Arc<B>,
    handlers: Handlers,
) -> (WorkerHandle<Arc<B>>, mpsc::UnboundedReceiver<JobReport>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let worker = Worker::builder(Arc::clone(store))
        .queue(
            "work",
            QueueConfig::default()
                .concurrency(4)
                .poll_interval(Duration::from_millis(10))
                .rescue_interval(Duration::from_millis(20)),
        )
        .handlers(handlers)
        .on_finished(move |report| {
            tx.send(report.clone()).ok();
        })
        .error_backoff(Duration::from_millis(5), Duration::from_millis(50))
        .build()
        .expect("valid worker settings")
        .start()
        .expect("inside a runtime");
    (worker, rx)
}

/// Waits for `n` reports of recorded outcomes.
async fn reports(rx: &mut mpsc::UnboundedReceiver<JobReport>, n: usize) -> Vec<JobReport> {
    let mut out = Vec::with_capacity(n);
    tokio::time::timeout(PATIENCE, async {
        while out.len() < n {
            match rx.recv().await {
                Some(report) => out.push(report),
                None => break,
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("only {} of {n} jobs finished in time", out.len()));
    assert_eq!(out.len(), n, "the worker stopped reporting");
    out
}

/// The worker runs every job once and the store records every success.
pub async fn worker_runs_each_job_once<B: Backend>(store: &Arc<B>, _clock: &ManualClock) {
    const N: usize = 100;
    let runs: Arc<Mutex<HashMap<JobId, u32>>> = Arc::default();
    let seen = Arc::clone(&runs);
    let handlers = Handlers::new().on("count", move |job: Job| {
        *seen.lock().expect("lock").entry(job.claim.id).or_default() += 1;
        async { Ok::<_, String>(()) }
    });
    let (worker, mut rx) = start_worker(store, handlers);
    let ids = store
        .enqueue_many(
            (0..N)
                .map(|i| NewJob::new("work", "count", vec![]).key(format!("t{}", i % 5)))
                .collect(),
        )
        .await
        .expect("enqueue");
    let done = reports(&mut rx, N).await;
    assert!(done.iter().all(|r| r.outcome == JobOutcome::Succeeded));
    assert!(worker.shutdown(PATIENCE).await.is_clean());
    let runs = runs.lock().expect("lock").clone();
    for id in &ids {
        assert_eq!(runs.get(id), Some(&1), "job {id} must run exactly once");
        assert_eq!(status(store.as_ref(), *id).await, JobStatus::Succeeded);
    }
}

/// Failing and panicking handlers go through the retry policy; dead jobs reach `on_dead`,
/// and other jobs are unharmed.
pub async fn worker_retries_and_reports_dead_jobs<B: Backend>(
    store: &Arc<B>,
    _clock: &ManualClock,
) {
    let (dead_tx, mut dead_rx) = mpsc::unbounded_channel();
    let handlers = Handlers::new()
        .on("fails", |_job: Job| async {
            Err::<(), _>("downstream said no")
        })
        .on("panics", |job: Job| async move {
            if job.attempt > 0 {
                panic!("handler bug");
            }
            Ok::<_, String>(())
        })
        .on("fine", |_job: Job| async { Ok::<_, String>(()) });
    let (tx, mut rx) = mpsc::unbounded_channel();
    let worker = Worker::builder(Arc::clone(store))
        .queue(
            "work",
            QueueConfig::default()
                .concurrency(2)
                .poll_interval(Duration::from_millis(10)),
        )
        .handlers(handlers)
        .on_dead(move |dead| {
            dead_tx.send(dead.clone()).ok();
        })
        .on_finished(move |report| {
            tx.send(report.clone()).ok();
        })
        .build()
        .expect("valid")
        .start()
        .expect("runtime");
    let fails = store
        .enqueue(NewJob::new("work", "fails", vec![]).retry(RetryPolicy::new(2)))
        .await
        .expect("enqueue");
    let panics = store
        .enqueue(NewJob::new("work", "panics", vec![]).retry(RetryPolicy::new(0)))
        .await
        .expect("enqueue");
    let fine = store
        .enqueue(NewJob::new("work", "fine", vec![]))
        .await
        .expect("enqueue");
    // 3 attempts of `fails`, 1 of `panics`, 1 of `fine`.
    let done = reports(&mut rx, 5).await;
    assert!(worker.shutdown(PATIENCE).await.is_clean());

    let mut dead: Vec<DeadJob> = Vec::new();
    while let Ok(d) = dead_rx.try_recv() {
        dead.push(d);
    }
    dead.sort_by_key(|d| d.job.claim.id);
    assert_eq!(dead.len(), 2, "two jobs died");
    assert_eq!(dead[0].job.claim.id, fails);
    assert_eq!(dead[0].job.attempt, 3);
    assert_eq!(dead[0].failure.message, "downstream said no");
    assert_eq!(dead[1].job.claim.id, panics);
    assert_eq!(dead[1].failure.message, "handler panicked: handler bug");
    // Reports of consecutive attempts come from different tasks, in any order.
    let mut attempts: Vec<u32> = done
        .iter()
        .filter(|r| r.job.claim.id == fails)
        .map(|r| r.job.attempt)
        .collect();
    attempts.sort();
    assert_eq!(attempts, [1, 2, 3]);
    assert_eq!(status(store.as_ref(), fails).await, JobStatus::Dead);
    assert_eq!(status(store.as_ref(), panics).await, JobStatus::Dead);
    assert_eq!(status(store.as_ref(), fine).await, JobStatus::Succeeded);
    let info = store.get(panics).await.expect("get").expect("exists");
    assert_eq!(
        info.last_error.as_deref(),
        Some("handler panicked: handler bug")
    );
}

/// A payload that does not decode kills that job at once with a clear message; the jobs
/// around it run normally.
pub async fn undecodable_payload_fails_only_that_job<B: Backend>(
    store: &Arc<B>,
    _clock: &ManualClock,
) {
    #[derive(serde::Deserialize)]
    struct Order {
        id: u64,
    }
    let handlers = Handlers::new().on_json("order", |order: Order, _job: Job| async move {
        if order.id == 0 {
            return Err("order 0 is invalid".to_string());
        }
        Ok(())
    });
    let (worker, mut rx) = start_worker(store, handlers);
    let good = store
        .enqueue(NewJob::json("work", "order", &serde_json::json!({"id": 1})).expect("json"))
        .await
        .expect("enqueue");
    let bad = store
        .enqueue(
            NewJob::new("work", "order", b"{\"id\": oops".to_vec()).retry(RetryPolicy::forever()),
        )
        .await
        .expect("enqueue");
    let also_good = store
        .enqueue(NewJob::json("work", "order", &serde_json::json!({"id": 2})).expect("json"))
        .await
        .expect("enqueue");
    let done = reports(&mut rx, 3).await;
    assert!(worker.shutdown(PATIENCE).await.is_clean());
    let bad_report = done
        .iter()
        .find(|r| r.job.claim.id == bad)
        .expect("bad job ran");
    assert_eq!(
        bad_report.outcome,
        JobOutcome::Dead,
        "no retries for an undecodable payload"
    );
    let failure = bad_report.result.clone().expect_err("decoding failed");
    assert!(failure.permanent);
    assert!(
        failure.message.contains("cannot decode payload")
            && failure.message.contains(&bad.to_string()),
        "the message names the job and the cause: {}",
        failure.message
    );
    assert_eq!(status(store.as_ref(), bad).await, JobStatus::Dead);
    let info = store.get(bad).await.expect("get").expect("exists");
    assert!(
        info.last_error
            .unwrap_or_default()
            .contains("cannot decode payload")
    );
    assert_eq!(info.attempts, 1);
    for id in [good, also_good] {
        assert_eq!(status(store.as_ref(), id).await, JobStatus::Succeeded);
    }
}

/// Shutdown stops claiming, lets running jobs finish until its deadline and stops the rest,
/// handing them back to the store (their attempt not counted) or, where the store cannot
/// take jobs back, leaving them claimed until their leases expire and another worker
/// rescues them (which counts the attempt). No job is lost and no finished job runs again.
pub async fn graceful_shutdown_loses_nothing<B: Backend>(store: &Arc<B>, clock: &ManualClock) {
    let runs: Arc<Mutex<HashMap<JobId, u32>>> = Arc::default();
    let (started_tx, mut started_rx) = mpsc::unbounded_channel();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let handlers = |first_life: bool| {
        let (runs_a, runs_b, runs_c) = (Arc::clone(&runs), Arc::clone(&runs), Arc::clone(&runs));
        let started = started_tx.clone();
        let started_c = started_tx.clone();
        let gate = Arc::clone(&gate);
        Handlers::new()
            .on("fast", move |job: Job| {
                *runs_a
                    .lock()
                    .expect("lock")
                    .entry(job.claim.id)
                    .or_default() += 1;
                async { Ok::<_, String>(()) }
            })
            .on("finishes-late", move |job: Job| {
                *runs_b
                    .lock()
                    .expect("lock")
                    .entry(job.claim.id)
                    .or_default() += 1;
                started.send(job.claim.id).ok();
                let gate = Arc::clone(&gate);
                async move {
                    if first_life {
                        gate.acquire().await.map_err(|e| e.to_string())?.forget();
                    }
                    Ok::<_, String>(())
                }
            })
            .on("stuck", move |job: Job| {
                *runs_c
                    .lock()
                    .expect("lock")
                    .entry(job.claim.id)
                    .or_default() += 1;
                started_c.send(job.claim.id).ok();
                async move {
                    if first_life {
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, String>(())
                }
            })
    };
    let immediate = RetryPolicy::new(3);
    let (worker, mut rx) = start_worker(store, handlers(true));
    let mut fast = Vec::new();
    for _ in 0..20 {
        fast.push(
            store
                .enqueue(NewJob::new("work", "fast", vec![]))
                .await
                .expect("enqueue"),
        );
    }
    let late = store
        .enqueue(NewJob::new("work", "finishes-late", vec![]))
        .await
        .expect("enqueue");
    let stuck = vec![
        store
            .enqueue(NewJob::new("work", "stuck", vec![]).retry(immediate.clone()))
            .await
            .expect("enqueue"),
        store
            .enqueue(NewJob::new("work", "stuck", vec![]).retry(immediate.clone()))
            .await
            .expect("enqueue"),
    ];
    reports(&mut rx, 20).await;
    // Wait until the late job and both stuck jobs have started (a claimed job may still
    // wait in the worker's prefetch buffer, and would be handed back at shutdown).
    let mut begun = Vec::new();
    while begun.len() < 3 {
        let id = tokio::time::timeout(PATIENCE, started_rx.recv())
            .await
            .expect("the late and stuck jobs started")
            .expect("channel open");
        begun.push(id);
    }
    begun.sort();
    assert_eq!(begun, [late, stuck[0], stuck[1]]);

    // Shut down; the late job is let go now and finishes within the deadline.
    gate.add_permits(1);
    let report = worker.shutdown(Duration::from_millis(500)).await;
    let mut abandoned = report.abandoned.clone();
    abandoned.sort();
    assert_eq!(abandoned, stuck, "exactly the stuck jobs are abandoned");
    let late_report = reports(&mut rx, 1).await;
    assert_eq!(late_report[0].job.claim.id, late);
    assert_eq!(status(store.as_ref(), late).await, JobStatus::Succeeded);
    let handed_back = |id: &JobId| report.released.contains(id);
    for id in &stuck {
        let expected = if handed_back(id) {
            JobStatus::Scheduled
        } else {
            assert!(report.left_claimed.contains(id), "{report:?}");
            JobStatus::Running
        };
        assert_eq!(status(store.as_ref(), *id).await, expected, "job {id}");
    }
    let after: Vec<JobId> = store
        .enqueue_many(
            (0..5)
                .map(|_| NewJob::new("work", "fast", vec![]))
                .collect(),
        )
        .await
        .expect("enqueue");
    for id in &after {
        assert_eq!(
            status(store.as_ref(), *id).await,
            JobStatus::Scheduled,
            "nobody claims after shutdown"
        );
    }

    // Leases of jobs left claimed expire; a new worker rescues them and runs everything.
    clock.advance(LEASE);
    let (worker, mut rx) = start_worker(store, handlers(false));
    let done = reports(&mut rx, stuck.len() + after.len()).await;
    assert!(worker.shutdown(PATIENCE).await.is_clean());
    for report in &done {
        assert_eq!(report.outcome, JobOutcome::Succeeded);
        if stuck.contains(&report.job.claim.id) {
            let expected = if handed_back(&report.job.claim.id) {
                1
            } else {
                2
            };
            assert_eq!(
                report.job.attempt, expected,
                "an attempt handed back is not counted; a rescued one is"
            );
        }
    }
    let runs = runs.lock().expect("lock").clone();
    for id in fast.iter().chain(&after).chain([&late]) {
        assert_eq!(runs.get(id), Some(&1), "job {id} ran exactly once");
    }
    for id in fast.iter().chain(&after).chain(&stuck).chain([&late]) {
        assert_eq!(
            status(store.as_ref(), *id).await,
            JobStatus::Succeeded,
            "job {id} finished"
        );
    }
}
