//! [`Metered`]: a store wrapper that counts the jobs enqueued through it in the
//! [metrics](crate::metrics) (`fairq_jobs_enqueued_total`); every other call passes through.
//! The worker counts what it runs itself; enqueues happen wherever an application enqueues,
//! so that is where a store is wrapped.

use std::future::Future;
use std::time::Duration;

use fairq_core::job::{Millis, Outcome};

use crate::backend::{Backend, ListFilter, Purge, QueueStats, ReviveTarget};
use crate::error::BackendError;
use crate::job::{Claim, Failure, Job, JobId, JobInfo, NewJob};
use crate::metrics::EnqueueTally;
use crate::settle::{Each, Finished, Settled, SettledAndClaimed};

/// A store whose enqueues are counted in `fairq_jobs_enqueued_total{queue, kind}` (with the
/// crate's `metrics` feature; without it, a plain pass-through). Jobs count once the store
/// accepted them.
///
/// What counts is every job of a call the store answered with `Ok`, once per job handed
/// over. That includes a job with a unique key under
/// [`OnConflict::Ignore`](crate::OnConflict::Ignore) that the store answered with the
/// existing job's id (nothing was enqueued), and each repeat of such a key within one
/// `enqueue_many`: the store's answer does not say which ids are new. A call answered with an
/// error counts nothing, even where the store kept part of it (Redis keeps the jobs of a
/// batch's other queues when one queue's jobs are refused). With ignored duplicates the
/// counter is therefore an upper bound of the jobs stored, not their number.
///
/// The `fairq` facade's `Store` (what `fairq::connect` opens) counts its own enqueues; wrap
/// the stores an application builds itself, not that one, which would count every job twice.
///
/// ```
/// use fairq_worker::{Backend, Metered, MemoryBackend, NewJob};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = Metered::new(MemoryBackend::new());
/// store.enqueue(NewJob::new("mail", "welcome", vec![])).await.unwrap();
/// assert_eq!(store.inner().len(), 1);
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct Metered<B> {
    inner: B,
}

impl<B> Metered<B> {
    /// Wraps `inner`.
    ///
    /// ```
    /// let store = fairq_worker::Metered::new(fairq_worker::MemoryBackend::new());
    /// # drop(store);
    /// ```
    pub fn new(inner: B) -> Self {
        Metered { inner }
    }

    /// The wrapped store.
    ///
    /// ```
    /// let store = fairq_worker::Metered::new(fairq_worker::MemoryBackend::new());
    /// assert!(store.inner().is_empty());
    /// ```
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// Unwraps the store.
    ///
    /// ```
    /// let store = fairq_worker::Metered::new(fairq_worker::MemoryBackend::new()).into_inner();
    /// assert!(store.is_empty());
    /// ```
    pub fn into_inner(self) -> B {
        self.inner
    }
}

impl<B: Backend> Backend for Metered<B> {
    fn enqueue(&self, job: NewJob) -> impl Future<Output = Result<JobId, BackendError>> + Send {
        let tally = EnqueueTally::of(std::slice::from_ref(&job));
        let enqueue = self.inner.enqueue(job);
        async move {
            let id = enqueue.await?;
            tally.record();
            Ok(id)
        }
    }

    fn enqueue_many(
        &self,
        jobs: Vec<NewJob>,
    ) -> impl Future<Output = Result<Vec<JobId>, BackendError>> + Send {
        let tally = EnqueueTally::of(&jobs);
        let enqueue = self.inner.enqueue_many(jobs);
        async move {
            let ids = enqueue.await?;
            tally.record();
            Ok(ids)
        }
    }

    crate::forward::forward_backend_except_enqueue!();
}
