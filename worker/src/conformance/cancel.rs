//! Cancelling one job ([`Inspect::cancel`]): a check for the stores that say they can
//! ([`Capabilities::cancel`](crate::Capabilities)). It is not in
//! [`conformance_tests!`](crate::conformance_tests), which needs only a [`Backend`]; each
//! store that cancels runs it from its own conformance tests:
//!
//! ```ignore
//! #[test]
//! fn cancel_deletes_waiting_jobs_only() {
//!     fairq_worker::conformance::run(MyHarness, |store, clock| {
//!         Box::pin(fairq_worker::conformance::cancel::cancel_deletes_waiting_jobs_only(store, clock))
//!     });
//! }
//! ```

use std::time::Duration;

use fairq_core::job::State;

use super::START;
use crate::backend::Backend;
use crate::clock::ManualClock;
use crate::error::BackendError;
use crate::inspect::Inspect;
use crate::job::{Job, JobId, JobStatus, NewJob, OnConflict};

const LEASE: Duration = Duration::from_secs(30);

fn new_job(queue: &str) -> NewJob {
    NewJob::new(queue, "test", b"{}".to_vec())
}

async fn enqueue<B: Backend>(store: &B, job: NewJob) -> JobId {
    store.enqueue(job).await.expect("enqueue")
}

async fn claim_one<B: Backend>(store: &B, queue: &str) -> Job {
    let mut jobs = store.claim(queue, 1, LEASE).await.expect("claim");
    assert_eq!(jobs.len(), 1, "expected one due job in {queue:?}");
    jobs.remove(0)
}

async fn status<B: Backend>(store: &B, id: JobId) -> Option<JobStatus> {
    let info = store.get(id).await.expect("get");
    info.map(|info| JobStatus::of(&info.state))
}

/// A job that is not running is deleted the way purge deletes it: due, delayed, blocked,
/// holding a unique key (which is free again afterwards) or finished. A running job is
/// refused with [`BackendError::Invalid`] and keeps running; an unknown or already cancelled
/// job is [`BackendError::NotFound`]. Claims never hand out a cancelled job, also after its
/// time comes, and jobs blocked on a cancelled job keep waiting (as after a purge).
pub async fn cancel_deletes_waiting_jobs_only<B: Inspect>(store: &B, clock: &ManualClock) {
    assert!(
        store.capabilities().cancel,
        "the store runs the cancel check, so it must say it can cancel"
    );
    let due = enqueue(store, new_job("cx").key("a")).await;
    let later = enqueue(store, new_job("cx").key("a").run_at_millis(START + 60_000)).await;
    let unique = enqueue(
        store,
        new_job("cx").key("b").unique("order-7", OnConflict::Error),
    )
    .await;
    let kept = enqueue(store, new_job("cx").key("b")).await;
    let parent = enqueue(store, new_job("cx-parent")).await;
    let blocked = enqueue(store, new_job("cx").after(parent)).await;
    let orphan = enqueue(store, new_job("cx-orphan").after(parent)).await;
    enqueue(store, new_job("cx-run")).await;
    let running = claim_one(store, "cx-run").await;

    // A running job is refused, and keeps running.
    let err = store
        .cancel(running.claim.id)
        .await
        .expect_err("a running job cannot be cancelled");
    assert!(
        matches!(&err, BackendError::Invalid(message) if message.contains("running")),
        "cancelling a running job: expected Invalid saying it runs, got {err}"
    );
    assert_eq!(
        status(store, running.claim.id).await,
        Some(JobStatus::Running),
        "a refused cancel leaves the job running"
    );

    // Unknown jobs.
    let ghost = JobId(u64::MAX - 7);
    let err = store.cancel(ghost).await.expect_err("an unknown job");
    assert!(
        matches!(err, BackendError::NotFound(id) if id == ghost),
        "cancelling an unknown job: expected NotFound, got {err}"
    );

    // Waiting jobs of every kind go, and only they.
    for (id, what) in [
        (due, "due"),
        (later, "delayed"),
        (unique, "unique"),
        (blocked, "blocked"),
        (parent, "depended-on"),
    ] {
        store
            .cancel(id)
            .await
            .unwrap_or_else(|e| panic!("cancelling the {what} job {id}: {e}"));
        assert_eq!(
            status(store, id).await,
            None,
            "the cancelled {what} job is gone"
        );
        let err = store.cancel(id).await.expect_err("cancelled already");
        assert!(
            matches!(err, BackendError::NotFound(found) if found == id),
            "cancelling the {what} job {id} again: expected NotFound, got {err}"
        );
    }
    assert_eq!(status(store, kept).await, Some(JobStatus::Scheduled));
    assert_eq!(
        status(store, orphan).await,
        Some(JobStatus::Blocked),
        "a job blocked on a cancelled job keeps waiting, as after a purge"
    );

    // The unique key is free again.
    let reused = store
        .enqueue(new_job("cx").key("b").unique("order-7", OnConflict::Error))
        .await
        .expect("a cancelled job frees its unique key");
    assert_ne!(reused, unique);

    // The counts follow, and claims hand out the jobs left, never a cancelled one, also once
    // the delayed job's time has come.
    let stats = store.stats().await.expect("stats");
    let cx = stats
        .iter()
        .find(|q| q.queue == "cx")
        .expect("stats of queue cx");
    assert_eq!(
        (
            cx.counts.get(JobStatus::Scheduled),
            cx.counts.get(JobStatus::Blocked)
        ),
        (2, 0),
        "counts of cx after the cancels: {:?}",
        cx.counts
    );
    clock.advance(Duration::from_secs(120));
    let mut claimed: Vec<JobId> = store
        .claim("cx", 10, LEASE)
        .await
        .expect("claim")
        .iter()
        .map(|j| j.claim.id)
        .collect();
    claimed.sort();
    let mut left = vec![kept, reused];
    left.sort();
    assert_eq!(claimed, left, "only the jobs not cancelled are claimed");
    assert!(
        store
            .claim("cx-orphan", 10, LEASE)
            .await
            .expect("claim")
            .is_empty(),
        "the orphan stays blocked"
    );

    // The refused job finishes normally; finished, it can be cancelled (deleted).
    store
        .complete(running.claim)
        .await
        .expect("the job a cancel refused completes");
    assert!(matches!(
        store
            .get(running.claim.id)
            .await
            .expect("get")
            .map(|i| i.state),
        Some(State::Succeeded { .. })
    ));
    store
        .cancel(running.claim.id)
        .await
        .expect("a finished job is not running: it is deleted");
    assert_eq!(status(store, running.claim.id).await, None);
}
