//! [`Metered`]: a store wrapper that counts the jobs enqueued through it in the
//! [metrics](crate::metrics) (`fairq_jobs_enqueued_total`); every other call passes through.
//! The worker counts what it runs itself; enqueues happen wherever an application enqueues,
//! so that is where a store is wrapped.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use fairq_core::job::{Millis, Outcome};

use crate::backend::{Backend, BackendError, ListFilter, Purge, QueueStats, ReviveTarget};
use crate::job::{Claim, Failure, Job, JobId, JobInfo, NewJob};
use crate::metrics;
use crate::settle::{Each, Finished, Settled, SettledAndClaimed};

/// A store whose enqueues are counted in `fairq_jobs_enqueued_total{queue, kind}` (with the
/// crate's `metrics` feature; without it, a plain pass-through). Jobs count once the store
/// accepted them.
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
        let (queue, kind) = (job.queue.clone(), job.kind.clone());
        let enqueue = self.inner.enqueue(job);
        async move {
            let id = enqueue.await?;
            metrics::enqueued(&queue, &kind, 1);
            Ok(id)
        }
    }

    fn enqueue_many(
        &self,
        jobs: Vec<NewJob>,
    ) -> impl Future<Output = Result<Vec<JobId>, BackendError>> + Send {
        let mut counts: BTreeMap<(String, String), u64> = BTreeMap::new();
        for job in &jobs {
            *counts
                .entry((job.queue.clone(), job.kind.clone()))
                .or_default() += 1;
        }
        let enqueue = self.inner.enqueue_many(jobs);
        async move {
            let ids = enqueue.await?;
            for ((queue, kind), n) in counts {
                metrics::enqueued(&queue, &kind, n);
            }
            Ok(ids)
        }
    }

    fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> impl Future<Output = Result<Vec<Job>, BackendError>> + Send {
        self.inner.claim(queue, max, lease)
    }

    fn settle(
        &self,
        batch: Vec<Finished>,
    ) -> impl Future<Output = Result<Each<Settled>, BackendError>> + Send {
        self.inner.settle(batch)
    }

    fn complete(&self, claim: Claim) -> impl Future<Output = Result<(), BackendError>> + Send {
        self.inner.complete(claim)
    }

    fn fail(
        &self,
        job: &Job,
        failure: Failure,
    ) -> impl Future<Output = Result<Outcome, BackendError>> + Send {
        self.inner.fail(job, failure)
    }

    fn release(
        &self,
        claims: Vec<Claim>,
    ) -> impl Future<Output = Result<Each<()>, BackendError>> + Send {
        self.inner.release(claims)
    }

    fn heartbeat(
        &self,
        claim: Claim,
        lease: Duration,
    ) -> impl Future<Output = Result<Millis, BackendError>> + Send {
        self.inner.heartbeat(claim, lease)
    }

    fn heartbeat_many(
        &self,
        claims: Vec<Claim>,
        lease: Duration,
    ) -> impl Future<Output = Result<Each<Millis>, BackendError>> + Send {
        self.inner.heartbeat_many(claims, lease)
    }

    fn settle_and_claim(
        &self,
        batch: Vec<Finished>,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> impl Future<Output = Result<SettledAndClaimed, BackendError>> + Send {
        self.inner.settle_and_claim(batch, queue, max, lease)
    }

    fn rescue(&self, queue: &str) -> impl Future<Output = Result<u64, BackendError>> + Send {
        self.inner.rescue(queue)
    }

    fn hold_retries(
        &self,
        queue: &str,
        until: Millis,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send {
        self.inner.hold_retries(queue, until)
    }

    fn wait_for_jobs(&self, queue: &str, timeout: Duration) -> impl Future<Output = ()> + Send {
        self.inner.wait_for_jobs(queue, timeout)
    }

    fn stats(&self) -> impl Future<Output = Result<Vec<QueueStats>, BackendError>> + Send {
        self.inner.stats()
    }

    fn list(
        &self,
        filter: ListFilter,
    ) -> impl Future<Output = Result<Vec<JobInfo>, BackendError>> + Send {
        self.inner.list(filter)
    }

    fn get(&self, id: JobId) -> impl Future<Output = Result<Option<JobInfo>, BackendError>> + Send {
        self.inner.get(id)
    }

    fn revive(
        &self,
        target: ReviveTarget,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send {
        self.inner.revive(target)
    }

    fn purge(&self, purge: Purge) -> impl Future<Output = Result<u64, BackendError>> + Send {
        self.inner.purge(purge)
    }

    fn prune(
        &self,
        older_than: Duration,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send {
        self.inner.prune(older_than)
    }
}
