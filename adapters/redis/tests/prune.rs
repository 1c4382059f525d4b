//! Pruning by a per-outcome [`Retention`]: succeeded jobs indexed in `finished`, dead ones in
//! `dead_at`, each read only up to its own cutoff; dead jobs that versions before `dead_at`
//! indexed in `finished` (the "legacy layout", written here with raw commands) still found;
//! revived and deleted jobs leaving both indexes.

mod common;

use std::time::Duration;

use fairq_core::retry::RetryPolicy;
use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::{
    Backend, Failure, Inspect, JobId, JobStatus, ManualClock, NewJob, Purge, Retention,
    ReviveTarget,
};

const LEASE: Duration = Duration::from_secs(30);
const MINUTE: Duration = Duration::from_secs(60);
const Q: &str = "q";

fn clock() -> ManualClock {
    ManualClock::new(fairq_worker::conformance::START)
}

/// A store on a fresh prefix whose scripts look at `batch` ids per call.
async fn store(clock: &ManualClock, batch: usize) -> common::TestStore {
    common::connect(RedisOptions {
        batch,
        ..common::options(clock.clone())
    })
    .await
}

/// Runs one new job of `queue` to its end now: succeeded, or dead (failed for good).
async fn finish(store: &RedisBackend, queue: &str, ok: bool) -> JobId {
    let job = NewJob::new(queue, "k", vec![]).retry(RetryPolicy::new(0));
    let id = store.enqueue(job).await.unwrap();
    let jobs = store.claim(queue, 1, LEASE).await.unwrap();
    assert_eq!(jobs[0].claim.id, id, "the queue held nothing else");
    if ok {
        store.complete(jobs[0].claim).await.unwrap();
    } else {
        store
            .fail(&jobs[0], Failure::permanent("no"))
            .await
            .unwrap();
    }
    id
}

/// `n` jobs of `queue` that succeed now and `n` that die now: (succeeded, dead).
async fn finish_many(store: &RedisBackend, queue: &str, n: usize) -> (Vec<JobId>, Vec<JobId>) {
    let (mut ok, mut dead) = (Vec::new(), Vec::new());
    for _ in 0..n {
        ok.push(finish(store, queue, true).await);
        dead.push(finish(store, queue, false).await);
    }
    (ok, dead)
}

fn key(store: &RedisBackend, queue: &str, name: &str) -> String {
    format!("{}{name}", store.keys().queue_base(queue))
}

/// The score of `id` in the queue's sorted set `set`.
async fn score(store: &RedisBackend, queue: &str, set: &str, id: JobId) -> Option<u64> {
    let score: Option<f64> = redis::cmd("ZSCORE")
        .arg(key(store, queue, set))
        .arg(id.0)
        .query_async(&mut store.connection())
        .await
        .unwrap();
    score.map(|s| s as u64)
}

async fn card(store: &RedisBackend, queue: &str, set: &str) -> u64 {
    redis::cmd("ZCARD")
        .arg(key(store, queue, set))
        .query_async(&mut store.connection())
        .await
        .unwrap()
}

/// Rewrites dead job `id` the way versions before `dead_at` indexed it: in `finished`, with
/// its death time, and not in `dead_at`.
async fn make_legacy(store: &RedisBackend, queue: &str, id: JobId) {
    let at = score(store, queue, "dead_at", id)
        .await
        .expect("indexed by death");
    let mut pipe = redis::pipe();
    pipe.cmd("ZADD")
        .arg(key(store, queue, "finished"))
        .arg(at)
        .arg(id.0);
    pipe.cmd("ZREM").arg(key(store, queue, "dead_at")).arg(id.0);
    let _: ((), ()) = pipe.query_async(&mut store.connection()).await.unwrap();
}

/// Which of `ids` the store still holds.
async fn kept(store: &RedisBackend, ids: &[JobId]) -> Vec<JobId> {
    let mut out = Vec::new();
    for id in ids {
        if store.get(*id).await.unwrap().is_some() {
            out.push(*id);
        }
    }
    out
}

/// (succeeded, dead) counts of `queue`.
async fn counts(store: &RedisBackend, queue: &str) -> (u64, u64) {
    let stats = store.stats().await.unwrap();
    let s = stats.iter().find(|s| s.queue == queue).expect("the queue");
    (s.counts.succeeded, s.counts.dead)
}

/// Dead jobs of `ids` the queue still indexes in `finished`.
async fn dead_in_finished(store: &RedisBackend, queue: &str, ids: &[JobId]) -> Vec<JobId> {
    let mut out = Vec::new();
    for id in ids {
        if score(store, queue, "finished", *id).await.is_some() {
            out.push(*id);
        }
    }
    out
}

/// Each outcome goes once its own age has passed (at the boundary included), and not before;
/// deaths are indexed by death time in `dead_at`, not in `finished`.
#[tokio::test]
async fn each_outcome_goes_after_its_own_age() {
    require_redis!();
    let clock = clock();
    let t0 = fairq_worker::conformance::START;
    let store = store(&clock, 500).await;
    let (mut ok, mut dead) = (Vec::new(), Vec::new());
    for _ in 0..4 {
        ok.push(finish(&store, Q, true).await);
        dead.push(finish(&store, Q, false).await);
        clock.advance(10 * Duration::from_secs(1));
    }
    // Finished at t0, t0 + 10 s, t0 + 20 s and t0 + 30 s; now t0 + 40 s.
    for (i, id) in dead.iter().enumerate() {
        let at = t0 + 10_000 * i as u64;
        assert_eq!(score(&store, Q, "dead_at", *id).await, Some(at));
        assert_eq!(score(&store, Q, "finished", *id).await, None);
        assert_eq!(score(&store, Q, "finished", ok[i]).await, Some(at));
        assert_eq!(score(&store, Q, "dead_at", ok[i]).await, None);
    }
    let retention = Retention::finished(Duration::from_secs(20)).dead_for(Duration::from_secs(30));
    // Succeeded at or before t0 + 20 s, dead at or before t0 + 10 s.
    assert_eq!(store.prune(retention).await.unwrap(), 5);
    let all: Vec<JobId> = ok.iter().chain(&dead).copied().collect();
    assert_eq!(kept(&store, &all).await, [ok[3], dead[2], dead[3]]);
    assert_eq!(counts(&store, Q).await, (1, 2));
    assert_eq!(
        store.prune(retention).await.unwrap(),
        0,
        "nothing more is due"
    );

    clock.advance(Duration::from_secs(10));
    assert_eq!(store.prune(retention).await.unwrap(), 2);
    assert_eq!(kept(&store, &all).await, [dead[3]]);
    assert_eq!(counts(&store, Q).await, (0, 1));
    assert_eq!(card(&store, Q, "dead_at").await, 1);
    assert_eq!(card(&store, Q, "finished").await, 0);

    // A bare age keeps both outcomes for as long.
    clock.advance(Duration::from_secs(1));
    let fresh = finish(&store, Q, true).await;
    assert_eq!(
        store.prune(Duration::from_secs(1).into()).await.unwrap(),
        1,
        "the dead job finished 11 s ago goes, the one that just succeeded stays"
    );
    assert_eq!(kept(&store, &[dead[3], fresh]).await, [fresh]);
}

/// With dead jobs kept for good, prunes in batches smaller than the number of jobs delete the
/// old succeeded ones and never a dead one, however old; the dead ones an older version
/// indexed in `finished` move to `dead_at` on the way, so no later prune reads them again.
#[tokio::test]
async fn kept_dead_jobs_are_never_deleted() {
    require_redis!();
    let clock = clock();
    let store = store(&clock, 3).await;
    let (ok, dead) = finish_many(&store, Q, 10).await;
    for id in &dead[..4] {
        make_legacy(&store, Q, *id).await;
    }
    clock.advance(Duration::from_secs(3_600));
    let retention = Retention::finished(MINUTE).keep_dead();
    assert_eq!(store.prune(retention).await.unwrap(), 10);
    assert!(kept(&store, &ok).await.is_empty());
    assert_eq!(kept(&store, &dead).await, dead);
    assert_eq!(counts(&store, Q).await, (0, 10));
    assert_eq!(card(&store, Q, "finished").await, 0, "legacy entries moved");
    assert_eq!(card(&store, Q, "dead_at").await, 10);

    clock.advance(Duration::from_secs(365 * 86_400));
    assert_eq!(store.prune(retention).await.unwrap(), 0);
    assert_eq!(store.prune(Retention::forever()).await.unwrap(), 0);
    assert_eq!(kept(&store, &dead).await, dead);
    assert_eq!(counts(&store, Q).await, (0, 10));
}

/// Succeeded jobs kept for good, dead ones for a while: only the old dead jobs go.
#[tokio::test]
async fn kept_succeeded_jobs_are_never_deleted() {
    require_redis!();
    let clock = clock();
    let store = store(&clock, 3).await;
    let (old_ok, old_dead) = finish_many(&store, Q, 7).await;
    clock.advance(Duration::from_secs(3_600));
    let (young_ok, young_dead) = finish_many(&store, Q, 2).await;
    clock.advance(MINUTE);
    let retention = Retention::forever().dead_for(30 * MINUTE);
    assert_eq!(store.prune(retention).await.unwrap(), 7);
    assert!(kept(&store, &old_dead).await.is_empty());
    assert_eq!(kept(&store, &old_ok).await, old_ok);
    assert_eq!(kept(&store, &young_ok).await, young_ok);
    assert_eq!(kept(&store, &young_dead).await, young_dead);
    assert_eq!(counts(&store, Q).await, (9, 2));
    assert_eq!(store.prune(retention).await.unwrap(), 0);
}

/// Dead jobs indexed the old way (in `finished`) are pruned by their own age under every kind
/// of retention, however their finish time falls against the two cutoffs: the prune reads
/// them in `finished` up to the succeeded cutoff, and walks `st:dead` for the others when a
/// dead cutoff is set. A dead job written the old way after that walk (an older version
/// still running next to this one) is found by the next prune.
#[tokio::test]
async fn dead_jobs_indexed_by_older_versions_are_pruned_by_their_own_age() {
    require_redis!();
    let cases = [
        // (retention, whether the old/mid/young succeeded jobs go, and the dead ones)
        (
            Retention::finished(20 * MINUTE).dead_for(45 * MINUTE),
            [true, true, false],
            [true, false, false],
        ),
        (
            Retention::finished(45 * MINUTE).dead_for(15 * MINUTE),
            [true, false, false],
            [true, true, false],
        ),
        (
            Retention::finished(20 * MINUTE).keep_dead(),
            [true, true, false],
            [false, false, false],
        ),
        (
            Retention::forever().dead_for(15 * MINUTE),
            [false, false, false],
            [true, true, false],
        ),
        (
            Retention::finished(15 * MINUTE),
            [true, true, false],
            [true, true, false],
        ),
    ];
    for (retention, ok_goes, dead_goes) in cases {
        let clock = clock();
        let store = store(&clock, 2).await;
        // Two jobs of each outcome at t0, t0 + 20 min and t0 + 40 min; now t0 + 50 min.
        let mut slots = Vec::new();
        for step in [20, 20, 10] {
            let (ok, dead) = finish_many(&store, Q, 2).await;
            for id in &dead {
                make_legacy(&store, Q, *id).await;
            }
            slots.push((ok, dead));
            clock.advance(step * MINUTE);
        }
        let (mut gone, mut stay): (Vec<JobId>, Vec<JobId>) = (Vec::new(), Vec::new());
        for (i, (ok, dead)) in slots.iter().enumerate() {
            for (ids, goes) in [(ok, ok_goes[i]), (dead, dead_goes[i])] {
                if goes {
                    gone.extend(ids);
                } else {
                    stay.extend(ids);
                }
            }
        }
        let all: Vec<JobId> = slots
            .iter()
            .flat_map(|(ok, dead)| ok.iter().chain(dead))
            .copied()
            .collect();
        let all_dead: Vec<JobId> = slots.iter().flat_map(|(_, dead)| dead.clone()).collect();
        assert_eq!(
            store.prune(retention).await.unwrap(),
            gone.len() as u64,
            "{retention:?}"
        );
        stay.sort();
        let mut left = kept(&store, &all).await;
        left.sort();
        assert_eq!(left, stay, "{retention:?}");
        let dead_left = dead_goes.iter().filter(|g| !**g).count() as u64 * 2;
        let ok_left = ok_goes.iter().filter(|g| !**g).count() as u64 * 2;
        assert_eq!(
            counts(&store, Q).await,
            (ok_left, dead_left),
            "{retention:?}"
        );
        if retention.dead.is_some() {
            assert!(
                dead_in_finished(&store, Q, &all_dead).await.is_empty(),
                "{retention:?}: every old entry moved to dead_at"
            );
        }
        assert_eq!(store.prune(retention).await.unwrap(), 0, "{retention:?}");

        // An older version kills a job after the walk.
        let late = finish(&store, Q, false).await;
        make_legacy(&store, Q, late).await;
        clock.advance(60 * MINUTE);
        let late_goes = retention.dead.is_some();
        let pruned = store.prune(retention).await.unwrap();
        assert_eq!(
            kept(&store, &[late]).await.is_empty(),
            late_goes,
            "{retention:?}: late legacy job"
        );
        assert!(pruned >= u64::from(late_goes), "{retention:?}");
    }
}

/// A revived job leaves both indexes and is never pruned as dead: neither by this version,
/// nor when an older version's revival (which knew nothing of `dead_at`) left its entry
/// there.
#[tokio::test]
async fn revived_jobs_are_not_pruned() {
    require_redis!();
    let clock = clock();
    let store = store(&clock, 500).await;
    let new = finish(&store, Q, false).await;
    let legacy = finish(&store, Q, false).await;
    make_legacy(&store, Q, legacy).await;
    let stale = finish(&store, Q, false).await;
    let died = score(&store, Q, "dead_at", stale).await.unwrap();
    clock.advance(Duration::from_secs(3_600));
    for id in [new, legacy, stale] {
        store.revive(ReviveTarget::One(id)).await.unwrap();
        assert_eq!(score(&store, Q, "dead_at", id).await, None, "{id}");
        assert_eq!(score(&store, Q, "finished", id).await, None, "{id}");
    }
    // What an older version's revival leaves behind.
    let _: () = redis::cmd("ZADD")
        .arg(key(&store, Q, "dead_at"))
        .arg(died)
        .arg(stale.0)
        .query_async(&mut store.connection())
        .await
        .unwrap();
    assert_eq!(
        store
            .prune(Retention::finished(Duration::ZERO))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        kept(&store, &[new, legacy, stale]).await,
        [new, legacy, stale]
    );
    assert_eq!(
        card(&store, Q, "dead_at").await,
        0,
        "the stale entry is dropped"
    );
    let stats = store.stats().await.unwrap();
    assert_eq!(stats[0].counts.scheduled, 3);

    // They run again and succeed: then they go by the succeeded age.
    for job in store.claim(Q, 3, LEASE).await.unwrap() {
        store.complete(job.claim).await.unwrap();
    }
    let retention = Retention::finished(MINUTE).keep_dead();
    assert_eq!(store.prune(retention).await.unwrap(), 0);
    clock.advance(MINUTE);
    assert_eq!(store.prune(retention).await.unwrap(), 3);
}

/// Cancelling, purging and removing the queue take dead jobs out of `dead_at` too.
#[tokio::test]
async fn deleted_dead_jobs_leave_the_death_index() {
    require_redis!();
    let clock = clock();
    let store = store(&clock, 500).await;
    let (_, dead) = finish_many(&store, Q, 3).await;
    store.cancel(dead[0]).await.unwrap();
    assert_eq!(score(&store, Q, "dead_at", dead[0]).await, None);
    assert_eq!(card(&store, Q, "dead_at").await, 2);
    let purged = store
        .purge(Purge {
            status: Some(JobStatus::Dead),
            ..Purge::default()
        })
        .await
        .unwrap();
    assert_eq!(purged, 2);
    assert_eq!(card(&store, Q, "dead_at").await, 0);

    let last = finish(&store, Q, false).await;
    make_legacy(&store, Q, last).await;
    // A walk left part way (as an interrupted prune leaves it).
    let _: () = redis::cmd("HSET")
        .arg(key(&store, Q, "meta"))
        .arg("dwalk")
        .arg(last.0 - 1)
        .query_async(&mut store.connection())
        .await
        .unwrap();
    finish(&store, Q, false).await;
    // The entry of a job an older version deleted without knowing `dead_at`.
    let _: () = redis::cmd("ZADD")
        .arg(key(&store, Q, "dead_at"))
        .arg(0)
        .arg(last.0 - 1)
        .query_async(&mut store.connection())
        .await
        .unwrap();
    assert_eq!(card(&store, Q, "dead_at").await, 2);
    assert_eq!(store.remove_queue(Q).await.unwrap(), 5);
    let mut conn = store.connection();
    let exists: u64 = redis::cmd("EXISTS")
        .arg(key(&store, Q, "dead_at"))
        .arg(key(&store, Q, "finished"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0);
    let walk: Option<String> = redis::cmd("HGET")
        .arg(key(&store, Q, "meta"))
        .arg("dwalk")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(walk, None);
}

/// A walk over the dead jobs that an earlier prune left part way (its connection broke) goes on
/// where it stopped, and the same prune then walks from the start for what it skipped.
#[tokio::test]
async fn a_walk_left_part_way_goes_on_and_misses_nothing() {
    require_redis!();
    let clock = clock();
    let store = store(&clock, 2).await;
    let (_, dead) = finish_many(&store, Q, 6).await;
    for id in &dead {
        make_legacy(&store, Q, *id).await;
    }
    let _: () = redis::cmd("HSET")
        .arg(key(&store, Q, "meta"))
        .arg("dwalk")
        .arg(dead[3].0)
        .query_async(&mut store.connection())
        .await
        .unwrap();
    clock.advance(MINUTE);
    let retention = Retention::forever().dead_for(Duration::ZERO);
    assert_eq!(store.prune(retention).await.unwrap(), 6);
    assert!(kept(&store, &dead).await.is_empty());
    assert_eq!(counts(&store, Q).await, (6, 0));
}
