//! Job handlers: async functions registered per job kind.
//!
//! A handler takes the claimed [`Job`] and returns `Result<(), E>`. Any error that implements
//! [`Display`](std::fmt::Display) converts into a retryable [`Failure`] (the job's retry
//! policy decides what happens next); return [`Failure::permanent`] (or use
//! [`PermanentExt::permanent`] on a `Result`) when retrying cannot help and the job should
//! die at once. A panicking handler counts as a retryable failure.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
use serde::de::DeserializeOwned;

use crate::codec::{Codec, JsonCodec};
use crate::job::{Failure, Job};

impl<E: fmt::Display> From<E> for Failure {
    /// Any displayable error is a retryable failure carrying its message.
    fn from(error: E) -> Self {
        Failure::retryable(error.to_string())
    }
}

/// Marks the error of a `Result` as permanent: the job dies without retries.
///
/// ```
/// use fairq_worker::{Job, PermanentExt};
/// let job = Job::example(b"not json".to_vec());
/// let failure = job.json::<u32>().permanent().unwrap_err();
/// assert!(failure.permanent);
/// assert!(failure.message.contains("cannot decode payload"));
/// ```
pub trait PermanentExt<T> {
    /// Turns `Err(e)` into `Err(Failure::permanent(e.to_string()))`.
    fn permanent(self) -> Result<T, Failure>;
}

impl<T, E: fmt::Display> PermanentExt<T> for Result<T, E> {
    fn permanent(self) -> Result<T, Failure> {
        self.map_err(|e| Failure::permanent(e.to_string()))
    }
}

/// A type-erased handler.
trait Erased: Send + Sync + 'static {
    fn call(&self, job: Job) -> BoxFuture<'static, Ran>;
}

/// A user's handler: whatever it returns is its own result.
struct FnHandler<F>(F);

impl<F, Fut, E> Erased for FnHandler<F>
where
    F: Fn(Job) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<Failure> + 'static,
{
    fn call(&self, job: Job) -> BoxFuture<'static, Ran> {
        let fut = (self.0)(job);
        async move { Ran::returned(fut.await.map_err(Into::into)) }.boxed()
    }
}

/// A handler wrapped by fairq itself (a typed kind's time limit), which says whether the
/// result is the user's handler's own.
struct RanHandler<F>(F);

impl<F> Erased for RanHandler<F>
where
    F: Fn(Job) -> BoxFuture<'static, Ran> + Send + Sync + 'static,
{
    fn call(&self, job: Job) -> BoxFuture<'static, Ran> {
        (self.0)(job)
    }
}

/// Handlers by job kind. Build one, then give it to a [`Worker`](crate::Worker) or a
/// [`TestQueue`](crate::TestQueue).
///
/// ```
/// use fairq_worker::{Failure, Handlers, Job};
///
/// let handlers = Handlers::new()
///     .on("resize", |job: Job| async move {
///         if job.payload.is_empty() {
///             return Err(Failure::permanent("empty image"));
///         }
///         Ok(())
///     })
///     .on_json("welcome", |to: String, _job: Job| async move {
///         if to.contains('@') { Ok(()) } else { Err(format!("bad address {to:?}")) }
///     });
/// assert!(handlers.contains("resize"));
/// assert_eq!(handlers.kinds().collect::<Vec<_>>(), ["resize", "welcome"]);
/// ```
#[derive(Clone, Default)]
pub struct Handlers {
    by_kind: BTreeMap<String, Arc<dyn Erased>>,
    otherwise: Option<Arc<dyn Erased>>,
}

impl fmt::Debug for Handlers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.by_kind.keys())
            .entries(self.otherwise.as_ref().map(|_| "(any other kind)"))
            .finish()
    }
}

impl Handlers {
    /// No handlers.
    ///
    /// ```
    /// assert_eq!(fairq_worker::Handlers::new().kinds().count(), 0);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `handler` for jobs of `kind` (replacing an earlier one). The handler gets
    /// the whole [`Job`]: payload bytes, attempt, metadata captured at enqueue, and so on.
    ///
    /// ```
    /// use fairq_worker::{Handlers, Job};
    /// let handlers = Handlers::new().on("ping", |job: Job| async move {
    ///     let trace = job.metadata.get("trace_id").cloned().unwrap_or_default();
    ///     Ok::<_, std::io::Error>(drop(trace))
    /// });
    /// assert!(handlers.contains("ping"));
    /// ```
    pub fn on<F, Fut, E>(mut self, kind: impl Into<String>, handler: F) -> Self
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<Failure> + 'static,
    {
        self.by_kind
            .insert(kind.into(), Arc::new(FnHandler(handler)));
        self
    }

    /// Registers `handler`, which says itself whether its result is the user's handler's
    /// own (see [`Ran`]), for jobs of `kind`.
    pub(crate) fn on_ran<F>(mut self, kind: impl Into<String>, handler: F) -> Self
    where
        F: Fn(Job) -> BoxFuture<'static, Ran> + Send + Sync + 'static,
    {
        self.by_kind
            .insert(kind.into(), Arc::new(RanHandler(handler)));
        self
    }

    /// Registers a handler that receives the payload decoded as JSON. A payload that does not
    /// decode fails the job permanently with a message naming the job and the decode error;
    /// the handler is not called.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use fairq_worker::{Handlers, Job};
    /// let handlers = Handlers::new().on_json("add", |pair: (u32, u32), _job: Job| async move {
    ///     assert!(pair.0 + pair.1 > 0);
    ///     Ok::<_, String>(())
    /// });
    /// let mut bad = Job::example(b"[1,".to_vec());
    /// bad.kind = "add".into();
    /// let failure = handlers.run(bad).await.unwrap_err();
    /// assert!(failure.permanent && failure.message.contains("cannot decode payload"));
    /// # });
    /// ```
    pub fn on_json<T, F, Fut, E>(self, kind: impl Into<String>, handler: F) -> Self
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(T, Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<Failure> + 'static,
    {
        self.on_decoded(kind, JsonCodec, handler)
    }

    /// Like [`on_json`](Self::on_json) with any [`Codec`].
    ///
    /// ```
    /// use fairq_worker::{Handlers, Job, JsonCodec};
    /// let handlers = Handlers::new()
    ///     .on_decoded("n", JsonCodec, |n: u64, _job: Job| async move { Ok::<_, String>(drop(n)) });
    /// assert!(handlers.contains("n"));
    /// ```
    pub fn on_decoded<C, T, F, Fut, E>(self, kind: impl Into<String>, codec: C, handler: F) -> Self
    where
        C: Codec,
        T: DeserializeOwned + Send + 'static,
        F: Fn(T, Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<Failure> + 'static,
    {
        let handler = Arc::new(handler);
        let codec = Arc::new(codec);
        self.on(kind, move |job: Job| {
            let handler = Arc::clone(&handler);
            let codec = Arc::clone(&codec);
            async move {
                let value: T = job.decode(&*codec).map_err(|e| {
                    Failure::permanent(format!("job {} of kind {:?}: {e}", job.claim.id, job.kind))
                })?;
                handler(value, job).await.map_err(Into::into)
            }
        })
    }

    /// Registers `handler` for jobs of every kind that has no handler of its own (a
    /// dispatcher that serves any kind, like the CLI's `fairq work --exec`). Jobs keep their
    /// kind, so logs, spans and metrics name it. Without one, a kind without a handler
    /// fails (see [`run`](Self::run)).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use fairq_worker::{Handlers, Job};
    /// let handlers = Handlers::new()
    ///     .on("known", |_job: Job| async { Ok::<_, String>(()) })
    ///     .otherwise(|job: Job| async move { Err::<(), _>(format!("no luck with {}", job.kind)) });
    /// let failure = handlers.run(Job::example(vec![])).await.unwrap_err();
    /// assert_eq!(failure.message, "no luck with example");
    /// assert!(handlers.has_any());
    /// # });
    /// ```
    pub fn otherwise<F, Fut, E>(mut self, handler: F) -> Self
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<Failure> + 'static,
    {
        self.otherwise = Some(Arc::new(FnHandler(handler)));
        self
    }

    /// True when any job can find a handler: a kind is registered, or a handler for every
    /// other kind ([`otherwise`](Self::otherwise)).
    ///
    /// ```
    /// assert!(!fairq_worker::Handlers::new().has_any());
    /// ```
    pub fn has_any(&self) -> bool {
        !self.by_kind.is_empty() || self.otherwise.is_some()
    }

    /// True when `kind` has a handler.
    ///
    /// ```
    /// assert!(!fairq_worker::Handlers::new().contains("x"));
    /// ```
    pub fn contains(&self, kind: &str) -> bool {
        self.by_kind.contains_key(kind)
    }

    /// The registered kinds, sorted.
    ///
    /// ```
    /// let h = fairq_worker::Handlers::new().on("b", |_| async { Ok::<_, String>(()) });
    /// assert_eq!(h.kinds().collect::<Vec<_>>(), ["b"]);
    /// ```
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.by_kind.keys().map(String::as_str)
    }

    /// Runs the handler of `job.kind` on `job` (or the [`otherwise`](Self::otherwise)
    /// handler). A kind without a handler is a retryable
    /// failure (another worker, or a later version of this one, may know it); a panic is a
    /// retryable failure whose message carries the panic's.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use fairq_worker::{Handlers, Job};
    /// let handlers = Handlers::new().on("example", |_job: Job| async move {
    ///     if true { panic!("boom") }
    ///     Ok::<_, String>(())
    /// });
    /// let failure = handlers.run(Job::example(vec![])).await.unwrap_err();
    /// assert_eq!(failure.message, "handler panicked: boom");
    /// assert!(!failure.permanent);
    /// # });
    /// ```
    pub async fn run(&self, job: Job) -> Result<(), Failure> {
        self.run_caught(job).await.result
    }

    /// Runs the handler of `job.kind` as [`run`](Self::run) does, and says whether the
    /// result is the handler's own: false for a missing handler or a panic. The worker asks,
    /// because only a handler that returns a retryable error after the stop signal has given
    /// up when asked (its attempt not counted); a panic then is a failure like any other.
    pub(crate) async fn run_caught(&self, job: Job) -> Ran {
        let found = self.by_kind.get(&job.kind).or(self.otherwise.as_ref());
        let Some(handler) = found.cloned() else {
            return Ran::not_returned(Failure::retryable(format!(
                "no handler for job kind {:?}",
                job.kind
            )));
        };
        let started = std::panic::catch_unwind(AssertUnwindSafe(|| handler.call(job)));
        let outcome = match started {
            Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await,
            Err(panic) => Err(panic),
        };
        match outcome {
            Ok(ran) => ran,
            Err(panic) => Ran::not_returned(Failure::retryable(format!(
                "handler panicked: {}",
                panic_message(panic.as_ref())
            ))),
        }
    }
}

/// What running a handler came to.
pub(crate) struct Ran {
    /// The attempt's result.
    pub(crate) result: Result<(), Failure>,
    /// The handler returned `result` itself (rather than panicking, or there being none).
    pub(crate) returned: bool,
}

impl Ran {
    /// A result the handler returned itself.
    pub(crate) fn returned(result: Result<(), Failure>) -> Ran {
        Ran {
            result,
            returned: true,
        }
    }

    /// A failure the handler did not return itself (a panic, a timeout, no handler).
    pub(crate) fn not_returned(failure: Failure) -> Ran {
        Ran {
            result: Err(failure),
            returned: false,
        }
    }
}

/// The message of a panic payload (`&str` or `String`), or a placeholder.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}
