//! Pausing a queue ([`Inspect::set_paused`]): a check for the stores that say they can
//! ([`Capabilities::pause`](crate::Capabilities)), and [`resume_wakes_an_idle_worker`], the
//! worker's side of a resume, for each store's own tests. Like the [`cancel`](super::cancel) check it
//! needs [`Inspect`], so each store that pauses runs it from its own conformance tests:
//!
//! ```ignore
//! #[test]
//! fn pause_holds_claims_until_resumed() {
//!     fairq_worker::conformance::run(MyHarness, |store, clock| {
//!         Box::pin(fairq_worker::conformance::pause::pause_holds_claims_until_resumed(store, clock))
//!     });
//! }
//! ```

use std::time::Duration;

use crate::backend::Backend;
use crate::clock::ManualClock;
use crate::error::BackendError;
use crate::inspect::Inspect;
use crate::job::{Job, JobStatus, MAX_NAME_LEN, NewJob};
use crate::settle::{Finished, Settled};

const LEASE: Duration = Duration::from_secs(30);

fn new_job(queue: &str, key: &str) -> NewJob {
    NewJob::new(queue, "test", b"{}".to_vec()).key(key)
}

async fn claim<B: Backend>(store: &B, queue: &str, max: usize) -> Vec<Job> {
    store.claim(queue, max, LEASE).await.expect("claim")
}

async fn status<B: Backend>(store: &B, job: &Job) -> JobStatus {
    status_of(store, job.claim.id).await
}

/// A paused queue hands out nothing, through a plain claim or a combined settle-and-claim,
/// while its jobs stay stored in their fair order and other queues go on. What was already
/// running when the pause came still settles. Pausing twice and resuming a queue that is
/// not paused are no-ops; `paused` lists exactly the paused queues. Resuming hands the jobs
/// out again, fairly, as if the pause had not happened.
pub async fn pause_holds_claims_until_resumed<B: Inspect>(store: &B, _clock: &ManualClock) {
    assert!(store.capabilities().pause, "the store says it cannot pause");
    assert!(store.paused().await.expect("paused").is_empty());
    for key in ["a", "a", "b"] {
        store.enqueue(new_job("held", key)).await.expect("enqueue");
    }
    store.enqueue(new_job("free", "a")).await.expect("enqueue");
    // Running before the pause: the first of `a`.
    let running = claim(store, "held", 1).await;
    assert_eq!(running.len(), 1);

    store.set_paused("held", true).await.expect("pause");
    store.set_paused("held", true).await.expect("pausing twice");
    assert_eq!(store.paused().await.expect("paused"), ["held"]);
    assert!(
        claim(store, "held", 10).await.is_empty(),
        "a paused queue hands out nothing"
    );

    // Another queue is not held; settling the running job of the paused queue, combined
    // with a claim of that queue, records the outcome and claims nothing.
    let free = claim(store, "free", 10).await;
    assert_eq!(free.len(), 1);
    let out = store
        .settle_and_claim(vec![Finished::new(&running[0], Ok(()))], "held", 10, LEASE)
        .await
        .expect("settle and claim");
    assert_eq!(
        out.settled[0].as_ref().expect("settled"),
        &Settled::Succeeded
    );
    assert!(out.claimed.expect("claimed").is_empty());
    assert_eq!(status(store, &running[0]).await, JobStatus::Succeeded);
    assert!(claim(store, "held", 10).await.is_empty());

    store
        .set_paused("free", false)
        .await
        .expect("resuming a running queue");
    assert_eq!(store.paused().await.expect("paused"), ["held"]);

    store.set_paused("held", false).await.expect("resume");
    assert!(store.paused().await.expect("paused").is_empty());
    let resumed = claim(store, "held", 10).await;
    let keys: Vec<_> = resumed
        .iter()
        .map(|j| j.key.clone().unwrap_or_default())
        .collect();
    assert_eq!(keys, ["b", "a"], "the held jobs come back in fair order");
    for job in &resumed {
        assert_eq!(job.attempt, 1, "a pause costs no attempt");
    }

    // A name no job could have is refused as an enqueue would refuse it, pausing or
    // resuming, and nothing is paused.
    for queue in [String::new(), "a\0b".into(), "q".repeat(MAX_NAME_LEN + 1)] {
        for paused in [true, false] {
            let err = store.set_paused(&queue, paused).await.unwrap_err();
            assert!(
                matches!(err, BackendError::Invalid(_)),
                "{} bytes, {paused}: {err}",
                queue.len()
            );
        }
    }
    assert!(store.paused().await.expect("paused").is_empty());
}

/// The longest [`resume_wakes_an_idle_worker`] waits for the job to start: a guard against a
/// hang, never a synchronisation.
const HANG: Duration = Duration::from_secs(30);

/// A worker on `store` whose queue `queue` is paused, with `job` (its only job) waiting,
/// starts nothing; once `operator` (another handle on the same store, as another process
/// would hold, or `store` itself) resumes the queue, the job starts at once. The worker
/// polls once an hour, so only the resume's wake-up can start it, and its first empty claim
/// must leave it waiting rather than claiming in a loop. Call it with the queue paused and
/// any wake-up the enqueue left already consumed (a store whose wake-ups queue up, as
/// Redis's tokens do, must drop them first).
///
/// ```ignore
/// operator.set_paused("q", true).await?;
/// let id = operator.enqueue(NewJob::new("q", "k", vec![])).await?;
/// fairq_worker::conformance::pause::resume_wakes_an_idle_worker(store, &operator, "q", id).await;
/// ```
pub async fn resume_wakes_an_idle_worker<B: Backend, O: Inspect>(
    store: B,
    operator: &O,
    queue: &str,
    job: crate::job::JobId,
) {
    use crate::worker::{QueueConfig, Worker};
    let (started, mut starts) = tokio::sync::mpsc::unbounded_channel();
    let handle = Worker::builder(store)
        .queue(
            queue,
            QueueConfig::default().poll_interval(Duration::from_secs(3_600)),
        )
        .handle("test", move |job: Job| {
            let started = started.clone();
            async move {
                let _ = started.send(job.claim.id);
                Ok::<_, String>(())
            }
        })
        .build()
        .expect("a worker")
        .start()
        .expect("started in a runtime");
    // Let the worker's first (empty) claim and its wait begin.
    tokio::task::yield_now().await;
    assert!(
        starts.try_recv().is_err(),
        "a job of a paused queue started"
    );
    assert_eq!(
        status_of(operator, job).await,
        JobStatus::Scheduled,
        "the paused queue's job is still waiting"
    );
    operator.set_paused(queue, false).await.expect("resume");
    let ran = tokio::time::timeout(HANG, starts.recv())
        .await
        .expect("the resume woke the worker");
    assert_eq!(ran, Some(job));
    assert!(handle.shutdown(Duration::from_secs(10)).await.is_clean());
    assert!(operator.paused().await.expect("paused").is_empty());
}

async fn status_of<B: Backend>(store: &B, id: crate::job::JobId) -> JobStatus {
    let info = store.get(id).await.expect("get").expect("stored");
    JobStatus::of(&info.state)
}
