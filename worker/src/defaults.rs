//! Default retry policies per queue and per kind, applied at enqueue.
//!
//! A job's retry policy is stored with it when it is enqueued. One that says nothing gets,
//! in order: the default of its kind, the default of its queue, and finally the store's
//! default ([`RetryPolicy::default`]: 24 retries over about three weeks). [`Defaults`] holds
//! the first two, and [`Defaults::wrap`] puts them in front of a store, so producers stop
//! repeating a policy at every enqueue.
//!
//! ```
//! use fairq_core::retry::RetryPolicy;
//! use fairq_worker::{Backend, Defaults, MemoryBackend, NewJob};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let store = Defaults::new()
//!     .queue("mail", RetryPolicy::new(3))
//!     .kind("receipt", RetryPolicy::new(10))
//!     .wrap(MemoryBackend::new());
//! store.enqueue(NewJob::new("mail", "welcome", vec![])).await.unwrap(); // 3 retries
//! store.enqueue(NewJob::new("mail", "receipt", vec![])).await.unwrap(); // 10: the kind wins
//! store
//!     .enqueue(NewJob::new("mail", "receipt", vec![]).retry(RetryPolicy::new(0)))
//!     .await
//!     .unwrap(); // its own: never retried
//! # });
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use fairq_core::job::{Millis, Outcome};
use fairq_core::retry::RetryPolicy;

use crate::backend::{Backend, ListFilter, Purge, QueueStats, ReviveTarget};
use crate::error::BackendError;
use crate::job::{Claim, Failure, Job, JobId, JobInfo, NewJob};
use crate::settle::{Each, Finished, Settled, SettledAndClaimed};

/// Retry policies by queue and by kind, for jobs enqueued without one.
///
/// ```
/// use fairq_core::retry::RetryPolicy;
/// use fairq_worker::{Defaults, NewJob};
/// let defaults = Defaults::new().queue("q", RetryPolicy::new(2));
/// assert_eq!(defaults.apply(NewJob::new("q", "k", vec![])).retry, Some(RetryPolicy::new(2)));
/// assert_eq!(defaults.apply(NewJob::new("other", "k", vec![])).retry, None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaults {
    by_queue: BTreeMap<String, RetryPolicy>,
    by_kind: BTreeMap<String, RetryPolicy>,
}

impl Defaults {
    /// No defaults: every job without a policy gets the store's.
    ///
    /// ```
    /// assert_eq!(fairq_worker::Defaults::new(), fairq_worker::Defaults::default());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Jobs of `queue` without a policy (and whose kind has no default) get `policy`.
    ///
    /// ```
    /// use fairq_core::retry::RetryPolicy;
    /// let d = fairq_worker::Defaults::new().queue("q", RetryPolicy::new(1));
    /// # drop(d);
    /// ```
    pub fn queue(mut self, queue: impl Into<String>, policy: RetryPolicy) -> Self {
        self.by_queue.insert(queue.into(), policy);
        self
    }

    /// Jobs of `kind` without a policy get `policy`, whatever their queue.
    ///
    /// ```
    /// use fairq_core::retry::RetryPolicy;
    /// use fairq_worker::{Defaults, NewJob};
    /// let d = Defaults::new().queue("q", RetryPolicy::new(1)).kind("k", RetryPolicy::new(9));
    /// assert_eq!(d.apply(NewJob::new("q", "k", vec![])).retry, Some(RetryPolicy::new(9)));
    /// ```
    pub fn kind(mut self, kind: impl Into<String>, policy: RetryPolicy) -> Self {
        self.by_kind.insert(kind.into(), policy);
        self
    }

    /// Gives `job` the default policy of its kind or queue if it has none of its own.
    ///
    /// ```
    /// use fairq_core::retry::RetryPolicy;
    /// use fairq_worker::{Defaults, NewJob};
    /// let d = Defaults::new().kind("k", RetryPolicy::new(9));
    /// let own = NewJob::new("q", "k", vec![]).retry(RetryPolicy::new(0));
    /// assert_eq!(d.apply(own).retry, Some(RetryPolicy::new(0)));
    /// ```
    pub fn apply(&self, mut job: NewJob) -> NewJob {
        if job.retry.is_none() {
            job.retry = self
                .by_kind
                .get(&job.kind)
                .or_else(|| self.by_queue.get(&job.queue))
                .cloned();
        }
        job
    }

    /// `store`, with these defaults applied to every job enqueued through it.
    ///
    /// ```
    /// use fairq_worker::{Defaults, MemoryBackend};
    /// let store = Defaults::new().wrap(MemoryBackend::new());
    /// assert!(store.inner().is_empty());
    /// ```
    pub fn wrap<B: Backend>(self, store: B) -> WithDefaults<B> {
        WithDefaults {
            inner: store,
            defaults: Arc::new(self),
        }
    }
}

/// A store that applies [`Defaults`] to the jobs enqueued through it; every other call goes
/// straight to the store.
///
/// ```
/// use fairq_worker::{Defaults, MemoryBackend};
/// let store = Defaults::new().wrap(MemoryBackend::new());
/// assert_eq!(store.defaults(), &Defaults::new());
/// ```
#[derive(Debug, Clone)]
pub struct WithDefaults<B> {
    inner: B,
    defaults: Arc<Defaults>,
}

impl<B> WithDefaults<B> {
    /// The wrapped store.
    ///
    /// ```
    /// let store = fairq_worker::Defaults::new().wrap(fairq_worker::MemoryBackend::new());
    /// assert_eq!(store.inner().len(), 0);
    /// ```
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// The defaults applied.
    ///
    /// ```
    /// let store = fairq_worker::Defaults::new().wrap(fairq_worker::MemoryBackend::new());
    /// assert_eq!(store.defaults(), &fairq_worker::Defaults::new());
    /// ```
    pub fn defaults(&self) -> &Defaults {
        &self.defaults
    }
}

impl<B: Backend> Backend for WithDefaults<B> {
    fn enqueue(&self, job: NewJob) -> impl Future<Output = Result<JobId, BackendError>> + Send {
        self.inner.enqueue(self.defaults.apply(job))
    }

    fn enqueue_many(
        &self,
        jobs: Vec<NewJob>,
    ) -> impl Future<Output = Result<Vec<JobId>, BackendError>> + Send {
        let jobs = jobs.into_iter().map(|j| self.defaults.apply(j)).collect();
        self.inner.enqueue_many(jobs)
    }

    crate::forward::forward_backend_except_enqueue!();
}
