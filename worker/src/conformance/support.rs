//! Helpers the checks of [`checks`](super::checks) and [`refusals`](super::refusals) share.

use std::time::Duration;

use fairq_core::job::State;

use crate::backend::Backend;
use crate::job::{Job, JobId, JobStatus, NewJob};

pub(super) const LEASE: Duration = Duration::from_secs(30);
pub(super) const MS: Duration = Duration::from_millis(1);

pub(super) fn new_job(queue: &str) -> NewJob {
    NewJob::new(queue, "test", b"{}".to_vec())
}

pub(super) async fn claim_one<B: Backend>(store: &B, queue: &str) -> Job {
    let mut jobs = store.claim(queue, 1, LEASE).await.expect("claim");
    assert_eq!(jobs.len(), 1, "expected one due job in {queue:?}");
    jobs.remove(0)
}

pub(super) async fn assert_nothing_due<B: Backend>(store: &B, queue: &str, why: &str) {
    let jobs = store.claim(queue, 10, LEASE).await.expect("claim");
    assert!(
        jobs.is_empty(),
        "{why}: claimed {:?}",
        jobs.iter().map(|j| j.claim.id).collect::<Vec<_>>()
    );
}

pub(super) async fn state<B: Backend>(store: &B, id: JobId) -> State {
    store
        .get(id)
        .await
        .expect("get")
        .unwrap_or_else(|| panic!("job {id} vanished"))
        .state
}

pub(super) async fn status<B: Backend>(store: &B, id: JobId) -> JobStatus {
    JobStatus::of(&state(store, id).await)
}
