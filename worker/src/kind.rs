//! Typed jobs: a payload type tied to its kind and its defaults.
//!
//! A job kind is a string in the store and a handler's key in the worker; [`JobKind`] ties it
//! to the payload type once, with the kind's defaults: its queue, retry policy, fairness key
//! (from the payload), unique key, dependency (from the payload), time limit and payload
//! validation. [`NewJob::of`] enqueues a payload with those defaults (any of which a job may
//! override afterwards), and [`Handlers::on_kind`] registers a handler that receives the
//! decoded payload, so a mismatch between producer and worker is a compile error instead of a
//! dead job.
//!
//! ```
//! use std::time::Duration;
//! use fairq_core::retry::RetryPolicy;
//! use fairq_worker::{Handlers, Job, JobKind, NewJob};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct SendInvoice {
//!     customer: String,
//!     invoice: u64,
//! }
//!
//! impl JobKind for SendInvoice {
//!     const KIND: &'static str = "send-invoice";
//!     const QUEUE: &'static str = "billing";
//!     fn retry() -> Option<RetryPolicy> {
//!         Some(RetryPolicy::new(5).with_exponential(Duration::from_secs(1), Duration::from_secs(60)))
//!     }
//!     fn key(&self) -> Option<String> {
//!         Some(self.customer.clone()) // fair between customers
//!     }
//!     fn timeout() -> Option<Duration> {
//!         Some(Duration::from_secs(30))
//!     }
//! }
//!
//! let job = NewJob::of(&SendInvoice { customer: "acme".into(), invoice: 7 }).unwrap();
//! assert_eq!((job.queue.as_str(), job.kind.as_str()), ("billing", "send-invoice"));
//! assert_eq!(job.key.as_deref(), Some("acme"));
//! assert_eq!(job.retry.as_ref().unwrap().max_retries(), Some(5));
//!
//! let handlers = Handlers::new().on_kind(|invoice: SendInvoice, _job: Job| async move {
//!     println!("mail invoice {} to {}", invoice.invoice, invoice.customer);
//!     Ok::<_, String>(())
//! });
//! assert!(handlers.contains("send-invoice"));
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use fairq_core::retry::RetryPolicy;
use serde::Serialize;
use serde::de::DeserializeOwned;

use futures::future::{BoxFuture, FutureExt};

use crate::backend::Backend;
use crate::error::BackendError;
use crate::handler::{Handlers, PermanentExt, Ran};
use crate::job::{Failure, Job, JobId, NewJob, OnConflict};
use crate::worker::WorkerBuilder;

/// A payload type and the kind of job it is, with the kind's defaults.
///
/// Only [`KIND`](Self::KIND) is required; everything else has a default: the queue
/// `"default"`, the store's default retry policy, no fairness key (one shared key), no unique
/// key, no dependency, no time limit and every payload valid.
///
/// ```
/// use fairq_worker::{JobKind, NewJob};
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Ping;
/// impl JobKind for Ping {
///     const KIND: &'static str = "ping";
/// }
/// assert_eq!(NewJob::of(&Ping).unwrap().queue, "default");
/// ```
pub trait JobKind: Serialize + DeserializeOwned + Send + 'static {
    /// The kind's name, as stored and as handlers are found.
    const KIND: &'static str;

    /// The queue jobs of this kind go to unless a job says otherwise.
    const QUEUE: &'static str = "default";

    /// The retry policy of this kind's jobs (`None`: the store's default,
    /// [`RetryPolicy::default`]).
    fn retry() -> Option<RetryPolicy> {
        None
    }

    /// The fairness key of a job, from its payload (`None`: the shared key).
    fn key(&self) -> Option<String> {
        None
    }

    /// A key unique among the queue's unfinished jobs, from the payload, and what a taken one
    /// means.
    fn unique(&self) -> Option<(String, OnConflict)> {
        None
    }

    /// A job that must succeed before this one runs, from the payload.
    fn depends_on(&self) -> Option<JobId> {
        None
    }

    /// The longest one attempt may run: at the limit the handler is stopped and the attempt
    /// fails (retryable) with a message saying so.
    fn timeout() -> Option<Duration> {
        None
    }

    /// Refuses a payload that must never be stored: [`NewJob::of`] fails with
    /// [`BackendError::Invalid`] carrying the message, and nothing is enqueued.
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

impl NewJob {
    /// A job of kind `K` carrying `payload` as JSON, with the kind's defaults: its queue,
    /// retry policy, fairness key, unique key and dependency. Any of them can be overridden
    /// afterwards with the usual builder methods. An invalid payload (see
    /// [`JobKind::validate`]) or one that does not encode is refused.
    ///
    /// ```
    /// use fairq_worker::{JobKind, NewJob};
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Resize { width: u32 }
    /// impl JobKind for Resize {
    ///     const KIND: &'static str = "resize";
    ///     fn validate(&self) -> Result<(), String> {
    ///         if self.width == 0 { Err("width must be positive".into()) } else { Ok(()) }
    ///     }
    /// }
    /// let err = NewJob::of(&Resize { width: 0 }).unwrap_err();
    /// assert_eq!(err.to_string(), "invalid request: resize payload: width must be positive");
    /// let job = NewJob::of(&Resize { width: 64 }).unwrap().queue("images");
    /// assert_eq!(job.queue, "images");
    /// ```
    pub fn of<K: JobKind>(payload: &K) -> Result<NewJob, BackendError> {
        payload
            .validate()
            .map_err(|why| BackendError::Invalid(format!("{} payload: {why}", K::KIND)))?;
        let mut job = NewJob::json(K::QUEUE, K::KIND, payload).map_err(|e| {
            BackendError::Invalid(format!("{} payload does not encode: {e}", K::KIND))
        })?;
        job.retry = K::retry();
        job.key = payload.key();
        if let Some((unique, on_conflict)) = payload.unique() {
            job = job.unique(unique, on_conflict);
        }
        job.depends_on = payload.depends_on();
        Ok(job)
    }

    /// Moves the job to `queue`.
    ///
    /// ```
    /// let job = fairq_worker::NewJob::new("a", "k", vec![]).queue("b");
    /// assert_eq!(job.queue, "b");
    /// ```
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }
}

/// Runs `handler` under the kind's time limit, if it has one. A handler stopped at the limit
/// did not return its failure itself: during a shutdown, it is a failed attempt as any
/// timeout is, not a handler giving up when asked.
async fn limited<K: JobKind>(handler: impl Future<Output = Result<(), Failure>>) -> Ran {
    match K::timeout() {
        None => Ran::returned(handler.await),
        Some(limit) => match tokio::time::timeout(limit, handler).await {
            Ok(result) => Ran::returned(result),
            Err(_) => Ran::not_returned(Failure::retryable(format!(
                "timed out: a {} job may run for at most {limit:?}",
                K::KIND
            ))),
        },
    }
}

/// Decodes a job's payload as `K`; an undecodable payload is a permanent failure.
fn decode<K: JobKind>(job: &Job) -> Result<K, Failure> {
    job.json::<K>()
        .map_err(|e| format!("a {} payload: {e}", K::KIND))
        .permanent()
}

/// A handler of whole jobs that decodes the payload as `K` and runs `handler` under the
/// kind's time limit.
fn typed<K, F, Fut, E>(handler: F) -> impl Fn(Job) -> BoxFuture<'static, Ran>
where
    K: JobKind,
    F: Fn(K, Job) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<Failure> + 'static,
{
    let handler = Arc::new(handler);
    move |job: Job| {
        let handler = Arc::clone(&handler);
        async move {
            let payload = match decode::<K>(&job) {
                Ok(payload) => payload,
                Err(failure) => return Ran::returned(Err(failure)),
            };
            limited::<K>(async move { handler(payload, job).await.map_err(Into::into) }).await
        }
        .boxed()
    }
}

impl<B: Backend> WorkerBuilder<B> {
    /// Registers a handler for jobs of kind `K` (see [`Handlers::on_kind`]).
    ///
    /// ```
    /// use fairq_worker::{Job, JobKind, MemoryBackend, Worker};
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Ping;
    /// impl JobKind for Ping { const KIND: &'static str = "ping"; }
    /// let b = Worker::builder(MemoryBackend::new())
    ///     .handle_kind(|_ping: Ping, _job: Job| async { Ok::<_, String>(()) });
    /// # drop(b);
    /// ```
    pub fn handle_kind<K, F, Fut, E>(mut self, handler: F) -> Self
    where
        K: JobKind,
        F: Fn(K, Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<Failure> + 'static,
    {
        let handlers = std::mem::take(&mut self.handlers);
        self.handlers = handlers.on_ran(K::KIND, typed::<K, F, Fut, E>(handler));
        self
    }
}

impl Handlers {
    /// Registers `handler` for jobs of kind `K`: it receives the decoded payload and the
    /// job, and runs under the kind's time limit. A payload that does not decode as `K` kills
    /// the job with a clear message (retrying cannot help).
    ///
    /// ```
    /// use fairq_worker::{Handlers, Job, JobKind};
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Ping(u8);
    /// impl JobKind for Ping { const KIND: &'static str = "ping"; }
    /// let handlers = Handlers::new().on_kind(|ping: Ping, _job: Job| async move {
    ///     Ok::<_, String>(drop(ping))
    /// });
    /// assert!(handlers.contains("ping"));
    /// ```
    pub fn on_kind<K, F, Fut, E>(self, handler: F) -> Self
    where
        K: JobKind,
        F: Fn(K, Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<Failure> + 'static,
    {
        self.on_ran(K::KIND, typed::<K, F, Fut, E>(handler))
    }

    /// Starts registering handlers that share `state` (a database pool, a mail client, ...):
    /// each handler receives an `Arc` of it, given once here instead of cloned into every
    /// closure. [`WithState::done`] (or `Handlers::from`) gives the handlers back.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use fairq_worker::{Handlers, Job, JobKind};
    ///
    /// struct App { greeting: String }
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Greet { name: String }
    /// impl JobKind for Greet { const KIND: &'static str = "greet"; }
    ///
    /// let handlers: Handlers = Handlers::with_state(App { greeting: "hello".into() })
    ///     .on_kind(|greet: Greet, _job: Job, app: Arc<App>| async move {
    ///         println!("{}, {}", app.greeting, greet.name);
    ///         Ok::<_, String>(())
    ///     })
    ///     .on("raw", |_job: Job, _app: Arc<App>| async { Ok::<_, String>(()) })
    ///     .done();
    /// assert_eq!(handlers.kinds().collect::<Vec<_>>(), ["greet", "raw"]);
    /// ```
    pub fn with_state<S: Send + Sync + 'static>(state: S) -> WithState<S> {
        WithState {
            state: Arc::new(state),
            handlers: Handlers::new(),
        }
    }
}

/// Handlers being registered with a shared state (see [`Handlers::with_state`]).
#[must_use = "give the handlers to a worker with `done()`"]
pub struct WithState<S> {
    state: Arc<S>,
    handlers: Handlers,
}

impl<S> std::fmt::Debug for WithState<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithState")
            .field("handlers", &self.handlers)
            .finish_non_exhaustive()
    }
}

impl<S: Send + Sync + 'static> WithState<S> {
    /// Registers a handler for jobs of kind `K` that also receives the shared state.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use fairq_worker::{Handlers, Job, JobKind};
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Tick;
    /// impl JobKind for Tick { const KIND: &'static str = "tick"; }
    /// let h = Handlers::with_state(5u32).on_kind(|_t: Tick, _j: Job, n: Arc<u32>| async move {
    ///     Ok::<_, String>(drop(n))
    /// });
    /// assert!(h.done().contains("tick"));
    /// ```
    pub fn on_kind<K, F, Fut, E>(self, handler: F) -> Self
    where
        K: JobKind,
        F: Fn(K, Job, Arc<S>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<Failure> + 'static,
    {
        let state = Arc::clone(&self.state);
        WithState {
            handlers: self
                .handlers
                .on_kind(move |payload: K, job: Job| handler(payload, job, Arc::clone(&state))),
            state: self.state,
        }
    }

    /// Registers an untyped handler for jobs of `kind` that also receives the shared state.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use fairq_worker::{Handlers, Job};
    /// let h = Handlers::with_state(()).on("k", |_job: Job, _s: Arc<()>| async { Ok::<_, String>(()) });
    /// assert!(h.done().contains("k"));
    /// ```
    pub fn on<F, Fut, E>(self, kind: impl Into<String>, handler: F) -> Self
    where
        F: Fn(Job, Arc<S>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<Failure> + 'static,
    {
        let state = Arc::clone(&self.state);
        WithState {
            handlers: self
                .handlers
                .on(kind, move |job: Job| handler(job, Arc::clone(&state))),
            state: self.state,
        }
    }

    /// The handlers registered so far.
    ///
    /// ```
    /// assert_eq!(fairq_worker::Handlers::with_state(1).done().kinds().count(), 0);
    /// ```
    pub fn done(self) -> Handlers {
        self.handlers
    }
}

impl<S> From<WithState<S>> for Handlers {
    fn from(with: WithState<S>) -> Handlers {
        with.handlers
    }
}
