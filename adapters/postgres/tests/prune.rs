//! Pruning by a retention per outcome: succeeded and dead jobs each go at their own age, an
//! outcome kept for good is never deleted however old, and the batches of a prune go on past
//! the kept rows in their way. Every test checks which jobs are left and that the counters
//! of the deleted ones were folded into the statistics once.

mod common;

use std::time::Duration;

use fairq_core::job::State;
use fairq_postgres::{PgBackend, PgOptions};
use fairq_worker::{Backend, Failure, JobId, NewJob, QueueStats, Retention};

const LEASE: Duration = Duration::from_secs(30);
const MINUTE: Duration = Duration::from_secs(60);
const OK: bool = true;
const DEAD: bool = false;

/// Runs one job per entry of `outcomes` in queue `q`, in order, finishing each now: `OK`
/// succeeds, `DEAD` fails for good. The archive gets them in that order.
async fn finish(s: &PgBackend, outcomes: &[bool]) -> Vec<JobId> {
    let jobs = outcomes
        .iter()
        .map(|_| NewJob::new("q", "kind", b"{}".to_vec()))
        .collect();
    s.enqueue_many(jobs).await.unwrap();
    let claimed = s.claim("q", outcomes.len(), LEASE).await.unwrap();
    assert_eq!(claimed.len(), outcomes.len());
    let mut ids = Vec::new();
    for (job, &ok) in claimed.iter().zip(outcomes) {
        if ok {
            s.complete(job.claim).await.unwrap();
        } else {
            s.fail(job, Failure::permanent("no")).await.unwrap();
        }
        ids.push(job.claim.id);
    }
    ids
}

/// The ids of `ids` whose entry in `outcomes` is `outcome`.
fn only(ids: &[JobId], outcomes: &[bool], outcome: bool) -> Vec<JobId> {
    ids.iter()
        .zip(outcomes)
        .filter(|(_, o)| **o == outcome)
        .map(|(id, _)| *id)
        .collect()
}

async fn assert_gone(s: &PgBackend, ids: &[JobId]) {
    for id in ids {
        assert!(
            s.get(*id).await.unwrap().is_none(),
            "job {id} should be gone"
        );
    }
}

async fn assert_kept(s: &PgBackend, ids: &[JobId]) {
    for id in ids {
        assert!(
            s.get(*id).await.unwrap().is_some(),
            "job {id} should be kept"
        );
    }
}

async fn stats(s: &PgBackend) -> QueueStats {
    let stats = s.stats().await.unwrap();
    assert_eq!(stats.len(), 1);
    stats.into_iter().next().unwrap()
}

/// The statistics of `after` are those of `before` with `ok` succeeded and `dead` dead jobs
/// fewer in the counts: the counters of every job (retries, failures, run times) stay.
fn assert_folded(before: &QueueStats, after: &QueueStats, ok: u64, dead: u64) {
    assert_eq!(after.counts.succeeded, before.counts.succeeded - ok);
    assert_eq!(after.counts.dead, before.counts.dead - dead);
    assert_eq!(
        after.retries, before.retries,
        "counters outlive pruned jobs"
    );
    assert_eq!(after.processing_ms.count, before.processing_ms.count);
}

/// Succeeded jobs go after 90 seconds and dead ones after 150: of three generations a minute
/// apart, the prune deletes the succeeded jobs of the first two and the dead jobs of the
/// first only; half a minute later the rest reach their cutoffs exactly (a job whose finish
/// time equals its cutoff goes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_outcome_is_pruned_at_its_own_age() {
    let t = store_or_skip!("prune_split");
    let s = &t.store;
    let first_outcomes = [OK, DEAD, OK, DEAD];
    let second_outcomes = [DEAD, OK, DEAD, OK];
    let third_outcomes = [OK, DEAD];
    let first = finish(s, &first_outcomes).await;
    t.clock.advance(MINUTE);
    let second = finish(s, &second_outcomes).await;
    t.clock.advance(MINUTE);
    let third = finish(s, &third_outcomes).await;
    t.clock.advance(MINUTE);
    let before = stats(s).await;
    assert_eq!((before.counts.succeeded, before.counts.dead), (5, 5));

    // Three minutes after the first: succeeded cutoff 90 s after it, dead cutoff 30 s after.
    let retention = Retention::finished(Duration::from_secs(90)).dead_for(Duration::from_secs(150));
    assert_eq!(s.prune(retention).await.unwrap(), 6);
    assert_gone(s, &first).await;
    assert_gone(s, &only(&second, &second_outcomes, OK)).await;
    assert_kept(s, &only(&second, &second_outcomes, DEAD)).await;
    assert_kept(s, &third).await;
    let after = stats(s).await;
    assert_folded(&before, &after, 4, 2);
    assert_eq!(
        s.prune(retention).await.unwrap(),
        0,
        "nothing else is old enough"
    );

    // The cutoffs now fall exactly on the second generation's dead jobs and the third's
    // succeeded one.
    t.clock.advance(Duration::from_secs(30));
    assert_eq!(s.prune(retention).await.unwrap(), 3);
    assert_gone(s, &second).await;
    assert_gone(s, &only(&third, &third_outcomes, OK)).await;
    assert_kept(s, &only(&third, &third_outcomes, DEAD)).await;
    assert_folded(&before, &stats(s).await, 5, 4);
    t.cleanup().await;
}

/// Dead jobs kept for good stay however old, while the succeeded jobs behind them in the
/// archive go in batches of two: the kept rows in the way of every batch neither end the
/// prune early nor get deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_dead_jobs_stay_while_batches_prune_past_them() {
    let t = store_or_skip!("prune_keepdead", PgOptions::default().prune_batch(2));
    let s = &t.store;
    // Dead jobs first, so they are the first rows of the archive a batch comes across.
    let old_outcomes = [
        DEAD, DEAD, DEAD, DEAD, DEAD, DEAD, OK, OK, OK, OK, OK, DEAD, DEAD,
    ];
    let old = finish(s, &old_outcomes).await;
    t.clock.advance(60 * MINUTE);
    let recent = finish(s, &[OK, DEAD]).await;
    t.clock.advance(10 * MINUTE);
    let before = stats(s).await;

    let retention = Retention::finished(30 * MINUTE).keep_dead();
    assert_eq!(
        s.prune(retention).await.unwrap(),
        5,
        "batches of 2, 2 and 1"
    );
    assert_gone(s, &only(&old, &old_outcomes, OK)).await;
    assert_kept(s, &only(&old, &old_outcomes, DEAD)).await;
    assert_kept(s, &recent).await;
    assert_folded(&before, &stats(s).await, 5, 0);
    assert_eq!(s.prune(retention).await.unwrap(), 0);

    // Even with no age at all for succeeded jobs, and a year later, dead jobs stay.
    t.clock.advance(Duration::from_secs(365 * 86_400));
    let retention = Retention::finished(Duration::ZERO).keep_dead();
    assert_eq!(s.prune(retention).await.unwrap(), 1);
    assert_gone(s, &recent[..1]).await;
    assert_kept(s, &only(&old, &old_outcomes, DEAD)).await;
    assert_kept(s, &recent[1..]).await;
    let after = stats(s).await;
    assert_eq!((after.counts.succeeded, after.counts.dead), (0, 9));
    assert_folded(&before, &after, 6, 0);
    t.cleanup().await;
}

/// Succeeded jobs kept for good stay however old while dead jobs go after an hour, one per
/// batch; a retention that keeps everything deletes nothing and sends no statement (it
/// answers even once the schema is gone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_succeeded_jobs_stay_while_dead_ones_go() {
    let t = store_or_skip!("prune_keepok", PgOptions::default().prune_batch(1));
    let s = &t.store;
    // Succeeded jobs first, in the way of the dead ones.
    let old_outcomes = [OK, OK, OK, DEAD, DEAD];
    let old = finish(s, &old_outcomes).await;
    t.clock.advance(120 * MINUTE);
    let recent = finish(s, &[DEAD, OK]).await;
    t.clock.advance(30 * MINUTE);
    let before = stats(s).await;

    let retention = Retention::forever().dead_for(60 * MINUTE);
    assert_eq!(s.prune(retention).await.unwrap(), 2);
    assert_gone(s, &only(&old, &old_outcomes, DEAD)).await;
    assert_kept(s, &only(&old, &old_outcomes, OK)).await;
    assert_kept(s, &recent).await;
    assert_folded(&before, &stats(s).await, 0, 2);

    // Thirty minutes: the cutoff falls exactly on the recent dead job.
    assert_eq!(
        s.prune(Retention::forever().dead_for(30 * MINUTE))
            .await
            .unwrap(),
        1
    );
    assert_gone(s, &recent[..1]).await;
    assert_kept(s, &only(&old, &old_outcomes, OK)).await;
    assert_kept(s, &recent[1..]).await;
    let after = stats(s).await;
    assert_eq!((after.counts.succeeded, after.counts.dead), (4, 0));
    assert_folded(&before, &after, 0, 3);

    // Keeping everything touches nothing: not even a schema that is no longer there.
    assert_eq!(s.prune(Retention::forever()).await.unwrap(), 0);
    common::drop_schema(&t.admin, &t.schema).await;
    assert_eq!(s.prune(Retention::forever()).await.unwrap(), 0);
    assert!(s
        .prune(Retention::forever().dead_for(MINUTE))
        .await
        .is_err());
    t.cleanup().await;
}

/// A dependent enqueued while its dependency's success is being recorded can stay blocked
/// (the settlement read the jobs before the dependent committed); the rescue's straggler
/// repair releases it by finding the success in the archive. A prune in between must keep
/// that row, or the dependent never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_that_a_blocked_straggler_names_is_kept_until_the_repair() {
    let t = store_or_skip!("prunestraggler");
    let (s, clock) = (&t.store, &t.clock);
    let a = s.enqueue(NewJob::new("q", "k", vec![1])).await.unwrap();
    let job = s.claim("q", 1, LEASE).await.unwrap().remove(0);
    let mut other = common::admin().await.expect("admin connection");
    let holder: i32 = other
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let observer = common::admin().await.expect("observer connection");
    let tx = other.transaction().await.unwrap();
    let producer = fairq_postgres::Producer::new(&t.schema)
        .unwrap()
        .with_clock(clock.clone());
    let b = producer
        .enqueue(&tx, NewJob::new("q2", "k", vec![2]).after(a))
        .await
        .unwrap();
    let store = s.clone();
    let settling = tokio::spawn(async move { store.complete(job.claim).await });
    // The settlement waits for the dependent's transaction, which holds the dependency's row.
    common::someone_waits_for(&observer, holder).await;
    tx.commit().await.unwrap();
    settling.await.unwrap().unwrap();
    assert_eq!(
        s.get(b).await.unwrap().unwrap().state,
        State::Blocked,
        "the settlement left the dependent blocked (a straggler), as this test needs"
    );
    clock.advance(MINUTE);
    let pruned = s
        .prune(Retention {
            succeeded: Some(Duration::ZERO),
            dead: None,
        })
        .await
        .unwrap();
    assert_eq!(pruned, 0, "the success a blocked job names is kept");
    s.rescue("q2").await.unwrap();
    let claimed = s.claim("q2", 5, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 1, "the straggler is released and runs");
    assert_eq!(claimed[0].claim.id, b);
    // Once it is released, the success goes at the next prune.
    assert_eq!(
        s.prune(Retention {
            succeeded: Some(Duration::ZERO),
            dead: None,
        })
        .await
        .unwrap(),
        1
    );
    t.cleanup().await;
}
