//! What a killed worker leaves behind: the leases of the jobs a store shows as running, for
//! crash tests that kill a worker process and then step their clock to its deadlines.

use fairq_core::job::{Lease, State};

use crate::backend::{Backend, ListFilter};
use crate::job::{JobId, JobStatus};

/// The leases of the jobs of `queue` that `store` lists as running (up to 1,000), in the
/// store's list order. A crash test reads them once the worker that holds them is dead, so
/// they are the leases it last renewed. Panics when the store cannot list, or lists a job as
/// running that is in another state (like the checks, it is test support).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use fairq_worker::conformance::held_leases;
/// use fairq_worker::{Backend, ManualClock, MemoryBackend, NewJob};
///
/// let store = MemoryBackend::with_clock(ManualClock::new(1_000));
/// let id = store.enqueue(NewJob::new("mail", "send", vec![])).await.unwrap();
/// let job = store.claim("mail", 1, Duration::from_secs(30)).await.unwrap().remove(0);
/// let held = held_leases(&store, "mail").await;
/// assert_eq!(held.len(), 1);
/// assert_eq!(held[0].0, id);
/// assert_eq!((held[0].1.token, held[0].1.deadline), (job.claim.token, job.lease_deadline));
/// # });
/// ```
pub async fn held_leases<B: Backend>(store: &B, queue: &str) -> Vec<(JobId, Lease)> {
    let running = ListFilter::default()
        .queue(queue)
        .status(JobStatus::Running)
        .limit(1_000);
    store
        .list(running)
        .await
        .expect("list the running jobs")
        .into_iter()
        .map(|info| match info.state {
            State::Running { lease } => (info.id, lease),
            other => panic!("job {} is listed as running: {other:?}", info.id),
        })
        .collect()
}
