//! A store that does not keep succeeded jobs (`keep_succeeded(false)` on the stores that offer
//! it): checks for each such store's own tests on a store made that way, since the shared
//! suite expects succeeded jobs to stay until pruned. One of them,
//! [`an_ignored_duplicate_leaves_its_dependency_alone`], holds on either kind of store and is
//! also in [`conformance_tests!`](crate::conformance_tests).
//!
//! ```ignore
//! #[test]
//! fn succeeded_jobs_are_deleted_and_still_counted() {
//!     fairq_worker::conformance::run(MyHarnessNotKeeping, |store, clock| {
//!         Box::pin(fairq_worker::conformance::keep::succeeded_jobs_are_deleted_and_still_counted(store, clock))
//!     });
//! }
//! ```

use std::time::Duration;

use fairq_core::retry::RetryPolicy;

use crate::backend::{Backend, QueueStats};
use crate::clock::ManualClock;
use crate::error::BackendError;
use crate::job::{Failure, Job, JobId, JobInfo, JobStatus, NewJob, OnConflict};

const LEASE: Duration = Duration::from_secs(30);

async fn claim<B: Backend>(store: &B, queue: &str, max: usize) -> Vec<Job> {
    store.claim(queue, max, LEASE).await.expect("claim")
}

fn of(jobs: &[Job], id: JobId) -> &Job {
    jobs.iter().find(|j| j.claim.id == id).expect("claimed job")
}

fn stats_of(stats: &[QueueStats], queue: &str) -> (u64, u64, u64, u64, u64, u64, u64) {
    let q = stats
        .iter()
        .find(|q| q.queue == queue)
        .expect("queue listed");
    (
        q.retries.ok,
        q.retries.retries,
        q.retries.dead,
        q.retries.failures,
        q.counts.succeeded,
        q.counts.dead,
        q.processing_ms.count,
    )
}

/// Successes are deleted when recorded (`get` finds nothing, the status counts leave them
/// out) yet counted by the statistics (successes, retries, failures, run times); a death is
/// kept; a job with dependents is kept and releases them; a later `depends_on` naming a
/// deleted success is refused as unknown; a deleted job's unique key is free again.
pub async fn succeeded_jobs_are_deleted_and_still_counted<B: Backend>(
    store: &B,
    clock: &ManualClock,
) {
    let once = RetryPolicy::new(0);
    let ids = store
        .enqueue_many(vec![
            NewJob::new("ks", "k", b"a".to_vec()).key("a"),
            NewJob::new("ks", "k", b"b".to_vec()).key("b"),
            NewJob::new("ks", "k", b"c".to_vec()).key("c"),
            NewJob::new("ks", "k", b"d".to_vec()).key("d").retry(once),
        ])
        .await
        .expect("enqueue");
    let jobs = claim(store, "ks", 4).await;
    assert_eq!(jobs.len(), 4);
    clock.advance(Duration::from_millis(7));
    store
        .complete(of(&jobs, ids[0]).claim)
        .await
        .expect("complete");
    store
        .complete(of(&jobs, ids[1]).claim)
        .await
        .expect("complete");
    store
        .fail(of(&jobs, ids[2]), Failure::retryable("again"))
        .await
        .expect("fail");
    store
        .fail(of(&jobs, ids[3]), Failure::retryable("no luck"))
        .await
        .expect("fail");
    clock.advance(Duration::from_secs(3_600));
    let again = claim(store, "ks", 4).await;
    assert_eq!(again.len(), 1, "only the retry: {again:?}");
    assert_eq!(again[0].claim.id, ids[2]);
    store.complete(again[0].claim).await.expect("complete");

    for id in &ids[..3] {
        assert!(
            store.get(*id).await.expect("get").is_none(),
            "succeeded job {id} was kept"
        );
    }
    let dead = store
        .get(ids[3])
        .await
        .expect("get")
        .expect("deaths are kept");
    assert_eq!(dead.status(), JobStatus::Dead);
    // 3 successes (one after a retry), 1 death, 2 failures, 5 attempts timed; no succeeded
    // job left to count by status.
    let stats = store.stats().await.expect("stats");
    assert_eq!(stats_of(&stats, "ks"), (3, 1, 1, 2, 0, 1, 5));

    // A deleted success cannot be depended on: it is unknown, like a pruned job.
    match store
        .enqueue(NewJob::new("ks", "k", vec![]).after(ids[0]))
        .await
    {
        Err(BackendError::UnknownDependency(id)) => assert_eq!(id, ids[0]),
        other => panic!("a dependency on a deleted success answered {other:?}"),
    }

    // A job with dependents is kept, and its success releases them.
    let parent = store
        .enqueue(NewJob::new("ks", "k", vec![]))
        .await
        .expect("enqueue");
    let child = store
        .enqueue(NewJob::new("ks", "k", vec![]).after(parent))
        .await
        .expect("enqueue");
    let jobs = claim(store, "ks", 4).await;
    assert_eq!(jobs.len(), 1, "the child waits: {jobs:?}");
    store.complete(jobs[0].claim).await.expect("complete");
    let kept = store
        .get(parent)
        .await
        .expect("get")
        .expect("a parent is kept");
    assert_eq!(kept.status(), JobStatus::Succeeded);
    let jobs = claim(store, "ks", 4).await;
    assert_eq!(jobs.len(), 1, "the child was released");
    assert_eq!(jobs[0].claim.id, child);
    store.complete(jobs[0].claim).await.expect("complete");
    assert!(store.get(child).await.expect("get").is_none());

    // A deleted job's unique key is free at once.
    let unique = || NewJob::new("ks", "k", vec![]).unique("u", OnConflict::Error);
    let first = store.enqueue(unique()).await.expect("enqueue");
    let jobs = claim(store, "ks", 1).await;
    store.complete(jobs[0].claim).await.expect("complete");
    let second = store
        .enqueue(unique())
        .await
        .expect("the key is free again");
    assert_ne!(first, second);
}

/// An enqueue that [`OnConflict::Ignore`] answers with the job already holding its unique
/// key changes nothing, as the reference store does: the job it would have made is not made,
/// so the dependency it names, in another queue, gets no dependent. That dependency's
/// success is then recorded as that of a job without dependents (a control job beside it):
/// deleted by a store that does not keep successes (one that recorded a dependent for it
/// would keep it), kept by one that does. The existing job is left as it was. Alone or in a
/// batch; a row of the same batch that does go in (a unique key not yet taken) still gets its
/// dependency, which keeps it and releases it on success.
///
/// It runs on any store (in [`conformance_tests!`](crate::conformance_tests)); only on a
/// store not keeping successes does it tell whether the dependency was given a dependent, so
/// a store offering that mode should also run it on a store made so:
///
/// ```ignore
/// #[test]
/// fn an_ignored_duplicate_leaves_its_dependency_alone() {
///     fairq_worker::conformance::run(MyHarnessNotKeeping, |store, clock| {
///         Box::pin(fairq_worker::conformance::keep::an_ignored_duplicate_leaves_its_dependency_alone(store, clock))
///     });
/// }
/// ```
pub async fn an_ignored_duplicate_leaves_its_dependency_alone<B: Backend>(
    store: &B,
    _clock: &ManualClock,
) {
    let holder = store
        .enqueue(NewJob::new("ki", "k", vec![]).unique("held", OnConflict::Ignore))
        .await
        .expect("enqueue");
    let deps = store
        .enqueue_many(vec![
            NewJob::new("ki-dep", "k", vec![]),
            NewJob::new("ki-dep", "k", vec![]),
            NewJob::new("ki-dep", "k", vec![]),
        ])
        .await
        .expect("enqueue");
    let (dep, control, needed) = (deps[0], deps[1], deps[2]);
    for _ in 0..2 {
        let answered = store
            .enqueue(
                NewJob::new("ki", "k", vec![])
                    .unique("held", OnConflict::Ignore)
                    .after(dep),
            )
            .await
            .expect("an ignored duplicate is answered");
        assert_eq!(answered, holder, "the holder of the unique key answers");
    }
    let answered = store
        .enqueue_many(vec![
            NewJob::new("ki", "k", vec![]),
            NewJob::new("ki", "k", vec![])
                .unique("held", OnConflict::Ignore)
                .after(dep),
            NewJob::new("ki", "k", vec![])
                .unique("fresh", OnConflict::Ignore)
                .after(needed),
        ])
        .await
        .expect("an ignored duplicate in a batch is answered");
    assert_eq!(answered[1], holder, "the holder answers in a batch too");
    let fresh = answered[2];
    assert!(
        fresh != holder && fresh != answered[0],
        "a free key goes in"
    );
    let jobs = claim(store, "ki-dep", 3).await;
    assert_eq!(jobs.len(), 3);
    for id in [dep, control, needed] {
        store.complete(of(&jobs, id).claim).await.expect("complete");
    }
    let status = |info: Option<JobInfo>| info.map(|i| i.status());
    let kept = status(store.get(control).await.expect("get"));
    assert!(
        kept.is_none() || kept == Some(JobStatus::Succeeded),
        "a success is kept or deleted: {kept:?}"
    );
    assert_eq!(
        status(store.get(dep).await.expect("get")),
        kept,
        "the dependency has no dependent, so its success is kept or deleted as the control's"
    );
    assert_eq!(
        status(store.get(needed).await.expect("get")),
        Some(JobStatus::Succeeded),
        "the dependency of the row that went in has a dependent, so its success is kept"
    );
    let info = store
        .get(fresh)
        .await
        .expect("get")
        .expect("the row that went in stays");
    assert_eq!(
        info.status(),
        JobStatus::Scheduled,
        "its dependency released it"
    );
    assert_eq!(info.depends_on, Some(needed));
    let info = store
        .get(holder)
        .await
        .expect("get")
        .expect("the holder stays");
    assert_eq!(info.status(), JobStatus::Scheduled);
    assert_eq!(info.depends_on, None, "the holder depends on nothing");
}

/// A job whose dependents were all deleted before it succeeded (purged here) has none left:
/// its success is deleted like any other. A store that still counted the deleted dependents
/// (an empty list of them) would keep it until a prune.
///
/// ```ignore
/// #[test]
/// fn a_success_whose_dependents_were_purged_is_deleted() {
///     fairq_worker::conformance::run(MyHarnessNotKeeping, |store, clock| {
///         Box::pin(fairq_worker::conformance::keep::a_success_whose_dependents_were_purged_is_deleted(store, clock))
///     });
/// }
/// ```
pub async fn a_success_whose_dependents_were_purged_is_deleted<B: Backend>(
    store: &B,
    _clock: &ManualClock,
) {
    let dep = store
        .enqueue(NewJob::new("kp", "k", vec![]))
        .await
        .expect("enqueue");
    store
        .enqueue(NewJob::new("kp-after", "k", vec![]).after(dep))
        .await
        .expect("enqueue");
    let purged = store
        .purge(crate::backend::Purge {
            queue: Some("kp-after".into()),
            status: None,
        })
        .await
        .expect("purge");
    assert_eq!(purged, 1, "the blocked dependent is purged");
    let jobs = claim(store, "kp", 1).await;
    store
        .complete(of(&jobs, dep).claim)
        .await
        .expect("complete");
    assert_eq!(
        store.get(dep).await.expect("get").map(|i| i.status()),
        None,
        "a success whose only dependent was purged is deleted when recorded"
    );
}

/// [`a_success_whose_dependents_were_purged_is_deleted`] with the dependents cancelled one by
/// one ([`Inspect::cancel`](crate::inspect::Inspect::cancel)) rather than purged: of two
/// dependents, the first cancelled leaves the success with one to keep it for, the second
/// leaves it none. A store that cleared its record of dependents at the first cancel would
/// delete the success while a dependent still waits on it (and, where the release reads
/// that record, leave the dependent blocked); one that never cleared it keeps the success.
///
/// ```ignore
/// #[test]
/// fn a_success_whose_dependents_were_cancelled_is_deleted() {
///     fairq_worker::conformance::run(MyHarnessNotKeeping, |store, clock| {
///         Box::pin(fairq_worker::conformance::keep::a_success_whose_dependents_were_cancelled_is_deleted(store, clock))
///     });
/// }
/// ```
pub async fn a_success_whose_dependents_were_cancelled_is_deleted<B: crate::inspect::Inspect>(
    store: &B,
    _clock: &ManualClock,
) {
    let status = |info: Option<JobInfo>| info.map(|i| i.status());
    // Round one: one of two dependents cancelled; the other still waits, so the success
    // stays and the remaining dependent is released.
    let first = store
        .enqueue(NewJob::new("kc", "k", vec![]))
        .await
        .expect("enqueue");
    let gone = store
        .enqueue(NewJob::new("kc-after", "k", vec![]).after(first))
        .await
        .expect("enqueue");
    let waiting = store
        .enqueue(NewJob::new("kc-after", "k", vec![]).after(first))
        .await
        .expect("enqueue");
    store.cancel(gone).await.expect("cancel");
    let jobs = claim(store, "kc", 1).await;
    store
        .complete(of(&jobs, first).claim)
        .await
        .expect("complete");
    assert_eq!(
        status(store.get(first).await.expect("get")),
        Some(JobStatus::Succeeded),
        "a success with a dependent left after a cancel is kept"
    );
    assert_eq!(
        status(store.get(waiting).await.expect("get")),
        Some(JobStatus::Scheduled),
        "the dependent left is released"
    );
    // Round two: the only dependent cancelled; the success is deleted when recorded.
    let second = store
        .enqueue(NewJob::new("kc", "k", vec![]))
        .await
        .expect("enqueue");
    let only = store
        .enqueue(NewJob::new("kc-after", "k2", vec![]).after(second))
        .await
        .expect("enqueue");
    store.cancel(only).await.expect("cancel");
    let jobs = claim(store, "kc", 1).await;
    store
        .complete(of(&jobs, second).claim)
        .await
        .expect("complete");
    assert_eq!(
        status(store.get(second).await.expect("get")),
        None,
        "a success whose only dependent was cancelled is deleted when recorded"
    );
}
