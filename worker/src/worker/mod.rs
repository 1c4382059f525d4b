//! The worker: claims jobs fairly, runs their handlers, renews leases, records outcomes,
//! rescues jobs of dead workers and shuts down without losing anything.

mod acker;
mod claimer;
mod config;
mod depth;
mod guard;
mod health;
mod heartbeat;
mod hooks;
mod later;
mod lock;
mod prune;
mod queue;
mod shared;
mod shutdown;
mod slot;
mod stop;
mod supervise;
mod sweep;
mod sweep_state;
mod task_failure;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use fairq_core::health::{Health, HealthPolicy};
use fairq_core::stats::Summary;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};

use crate::backend::Backend;
use crate::clock::{Clock, SystemClock};
use crate::handler::Handlers;
use crate::job::{Failure, Job};

pub use config::QueueConfig;
pub use health::{HealthChange, QueueHealth};
pub use hooks::{DeadJob, JobOutcome, JobReport, Operation, SlowJob, WorkerError};
use queue::QueueRuntime;
use shared::Shared;
pub use shutdown::ShutdownReport;
use shutdown::{QueueTasks, Signals};
pub use stop::StopSignal;
pub use sweep::SweepStatus;
pub use task_failure::{TaskFailure, WorkerTask};

/// A worker whose settings cannot work.
///
/// ```
/// use fairq_worker::{MemoryBackend, Worker, WorkerConfigError};
/// let err = Worker::builder(MemoryBackend::new()).build().unwrap_err();
/// assert!(matches!(err, WorkerConfigError::NoQueues));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerConfigError {
    /// No queue was added.
    #[error("the worker serves no queue: add one with WorkerBuilder::queue")]
    NoQueues,
    /// No handler was registered.
    #[error("the worker has no handler: register one with WorkerBuilder::handle")]
    NoHandlers,
    /// A queue's settings are unusable.
    #[error("queue {queue:?}: {problem}")]
    Queue {
        /// The queue.
        queue: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// A per-kind handler timeout is zero.
    #[error("a handler timeout must not be zero")]
    ZeroTimeout,
    /// The [error backoff](WorkerBuilder::error_backoff) is unusable: its minimum is zero,
    /// or above its maximum.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker, WorkerConfigError};
    /// let err = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default())
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .error_backoff(Duration::ZERO, Duration::from_secs(30))
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(err, WorkerConfigError::ErrorBackoff { .. }));
    /// ```
    #[error("error backoff: {problem}")]
    ErrorBackoff {
        /// What is wrong.
        problem: &'static str,
    },
    /// [`Worker::start`] was called outside a tokio runtime.
    #[error("a worker must be started inside a tokio runtime")]
    NoRuntime,
}

/// Builds a [`Worker`]: queues to serve, handlers per job kind, hooks.
///
/// ```
/// use std::time::Duration;
/// use fairq_worker::{Failure, Job, MemoryBackend, QueueConfig, Worker};
///
/// let worker = Worker::builder(MemoryBackend::new())
///     .queue("mail", QueueConfig::default().concurrency(8))
///     .queue("reports", QueueConfig::default().concurrency(1).lease(Duration::from_secs(300)))
///     .handle_json("welcome", |address: String, _job: Job| async move {
///         if address.contains('@') { Ok(()) } else { Err(Failure::permanent("no @ in address")) }
///     })
///     .handle("monthly", |_job: Job| async { Ok::<_, std::io::Error>(()) })
///     .on_dead(|dead| eprintln!("job {} died: {}", dead.job.claim.id, dead.failure.message))
///     .on_error(|err| eprintln!("{err}"))
///     .slow_after(Duration::from_secs(120))
///     .build()
///     .unwrap();
/// assert_eq!(worker.queues().collect::<Vec<_>>(), ["mail", "reports"]);
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct WorkerBuilder<B> {
    backend: Arc<B>,
    queues: BTreeMap<String, QueueConfig>,
    /// Handlers by kind (`handle_kind` in `kind.rs` registers typed ones too).
    pub(crate) handlers: Handlers,
    hooks: hooks::Hooks,
    clock: Arc<dyn Clock>,
    health: HealthPolicy,
    slow_after: Option<Duration>,
    kind_timeouts: HashMap<String, Duration>,
    error_backoff: (Duration, Duration),
    shutdown_timeout: Duration,
    metrics_key: bool,
    prune_after: Option<crate::Retention>,
}

impl<B: Backend> WorkerBuilder<B> {
    /// Serves `queue` with `config` (replacing an earlier config of the same queue).
    ///
    /// ```
    /// use fairq_worker::{MemoryBackend, QueueConfig, Worker};
    /// let b = Worker::builder(MemoryBackend::new()).queue("q", QueueConfig::default());
    /// # drop(b);
    /// ```
    pub fn queue(mut self, queue: impl Into<String>, config: QueueConfig) -> Self {
        self.queues.insert(queue.into(), config);
        self
    }

    /// Uses `handlers`, replacing those registered so far.
    ///
    /// ```
    /// use fairq_worker::{Handlers, Job, MemoryBackend, QueueConfig, Worker};
    /// let handlers = Handlers::new().on("k", |_job: Job| async { Ok::<_, String>(()) });
    /// let worker = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default())
    ///     .handlers(handlers)
    ///     .build()
    ///     .unwrap();
    /// # drop(worker);
    /// ```
    pub fn handlers(mut self, handlers: Handlers) -> Self {
        self.handlers = handlers;
        self
    }

    /// Registers a handler for jobs of `kind` (see [`Handlers::on`]).
    ///
    /// ```
    /// use fairq_worker::{Job, MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new())
    ///     .handle("k", |job: Job| async move { Ok::<_, String>(drop(job)) });
    /// # drop(b);
    /// ```
    pub fn handle<F, Fut, E>(mut self, kind: impl Into<String>, handler: F) -> Self
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<Failure> + 'static,
    {
        self.handlers = self.handlers.on(kind, handler);
        self
    }

    /// Registers a handler for jobs of `kind` whose payload is JSON (see
    /// [`Handlers::on_json`]): a payload that does not decode kills the job with a clear
    /// message.
    ///
    /// ```
    /// use fairq_worker::{Job, MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new())
    ///     .handle_json("sum", |xs: Vec<i64>, _job: Job| async move { Ok::<_, String>(drop(xs)) });
    /// # drop(b);
    /// ```
    pub fn handle_json<T, F, Fut, E>(mut self, kind: impl Into<String>, handler: F) -> Self
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(T, Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<Failure> + 'static,
    {
        self.handlers = self.handlers.on_json(kind, handler);
        self
    }

    /// Called when a job fails for good (its policy gave up, or the failure was permanent).
    ///
    /// ```
    /// use fairq_worker::{MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new()).on_dead(|dead| eprintln!("{:?}", dead.failure));
    /// # drop(b);
    /// ```
    pub fn on_dead(mut self, hook: impl Fn(&DeadJob) + Send + Sync + 'static) -> Self {
        self.hooks.dead = Some(Arc::new(hook));
        self
    }

    /// Called when a store call of the worker fails (claim, complete, heartbeat, ...).
    ///
    /// ```
    /// use fairq_worker::{MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new()).on_error(|err| eprintln!("{err}"));
    /// # drop(b);
    /// ```
    pub fn on_error(mut self, hook: impl Fn(&WorkerError) + Send + Sync + 'static) -> Self {
        self.hooks.error = Some(Arc::new(hook));
        self
    }

    /// Called once per job whose handler runs longer than [`slow_after`](Self::slow_after).
    ///
    /// ```
    /// use fairq_worker::{MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new()).on_slow(|slow| eprintln!("{:?}", slow.running_for));
    /// # drop(b);
    /// ```
    pub fn on_slow(mut self, hook: impl Fn(&SlowJob) + Send + Sync + 'static) -> Self {
        self.hooks.slow = Some(Arc::new(hook));
        self
    }

    /// Called when a queue turns unhealthy (see [`WorkerHandle::health`]): once per change,
    /// not once per failed job. yoltq's `on-system-error`.
    ///
    /// ```
    /// use fairq_worker::{MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new())
    ///     .on_unhealthy(|change| eprintln!("queue {} is unhealthy: {:?}", change.queue, change.health));
    /// # drop(b);
    /// ```
    pub fn on_unhealthy(mut self, hook: impl Fn(&HealthChange) + Send + Sync + 'static) -> Self {
        self.hooks.unhealthy = Some(Arc::new(hook));
        self
    }

    /// Called when an unhealthy queue recovers (a handler of the queue succeeded): once per
    /// change. yoltq's `on-system-recovery`.
    ///
    /// ```
    /// use fairq_worker::{MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new())
    ///     .on_recovered(|change| eprintln!("queue {} recovered", change.queue));
    /// # drop(b);
    /// ```
    pub fn on_recovered(mut self, hook: impl Fn(&HealthChange) + Send + Sync + 'static) -> Self {
        self.hooks.recovered = Some(Arc::new(hook));
        self
    }

    /// Called after every attempt, once the store was told its outcome.
    ///
    /// ```
    /// use fairq_worker::{MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new()).on_finished(|report| eprintln!("{:?}", report.outcome));
    /// # drop(b);
    /// ```
    pub fn on_finished(mut self, hook: impl Fn(&JobReport) + Send + Sync + 'static) -> Self {
        self.hooks.finished = Some(Arc::new(hook));
        self
    }

    /// Warns (a `tracing` warning and [`on_slow`](Self::on_slow)) about handlers running longer
    /// than `after` (default: 5 minutes).
    ///
    /// ```
    /// use fairq_worker::{MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new()).slow_after(std::time::Duration::from_secs(10));
    /// # drop(b);
    /// ```
    pub fn slow_after(mut self, after: Duration) -> Self {
        self.slow_after = Some(after);
        self
    }

    /// Stops handlers of jobs of `kind` that run longer than `timeout`: the handler's future
    /// is dropped and the attempt fails (retryably) with a message naming the timeout (also
    /// when dropping the future panics: that panic is logged). Takes precedence over the
    /// queue's [`QueueConfig::timeout`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::{MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new())
    ///     .kind_timeout("resize", Duration::from_secs(60));
    /// # drop(b);
    /// ```
    pub fn kind_timeout(mut self, kind: impl Into<String>, timeout: Duration) -> Self {
        self.kind_timeouts.insert(kind.into(), timeout);
        self
    }

    /// Judges queue health with `policy` (see [`WorkerHandle::health`]).
    ///
    /// ```
    /// use fairq_core::health::HealthPolicy;
    /// use fairq_worker::{MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new()).health_policy(HealthPolicy::default());
    /// # drop(b);
    /// ```
    pub fn health_policy(mut self, policy: HealthPolicy) -> Self {
        self.health = policy;
        self
    }

    /// Reads time for health from `clock` (default: the system clock).
    ///
    /// ```
    /// use fairq_worker::{ManualClock, MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new()).clock(ManualClock::new(0));
    /// # drop(b);
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// After a failed store call, waits `min`, doubling up to `max` while failures go on
    /// (default 100 ms to 30 s), so a store that is down is not hammered.
    ///
    /// `min` must not be zero (the delay would never grow: the claimer, the heartbeater and
    /// the acker would retry a store that is down in a hot loop), and must not exceed `max`:
    /// [`build`](Self::build) refuses either with [`WorkerConfigError::ErrorBackoff`]. Both
    /// may be equal, for a fixed delay.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::{MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new())
    ///     .error_backoff(Duration::from_millis(10), Duration::from_secs(1));
    /// # drop(b);
    /// ```
    pub fn error_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.error_backoff = (min, max);
        self
    }

    /// How long [`Worker::run_until`] lets running jobs finish after its signal (default 30 s).
    ///
    /// ```
    /// use fairq_worker::{MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new()).shutdown_timeout(std::time::Duration::from_secs(5));
    /// # drop(b);
    /// ```
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Labels the per-job [metrics](crate::metrics) with the fairness key too (a `key`
    /// label; default off, since one series per tenant can be very many series). Needs the
    /// crate's `metrics` feature to record anything.
    ///
    /// ```
    /// use fairq_worker::{MemoryBackend, Worker};
    /// let b = Worker::builder(MemoryBackend::new()).metrics_key_label(true);
    /// # drop(b);
    /// ```
    pub fn metrics_key_label(mut self, on: bool) -> Self {
        self.metrics_key = on;
        self
    }

    /// Deletes finished jobs once `retention` no longer keeps them: a [`Duration`] keeps
    /// succeeded and dead jobs for as long, a [`Retention`](crate::Retention) sets an age per
    /// outcome (dead jobs are often kept longer, or for good). The worker calls
    /// [`Backend::prune`] when it starts and then every quarter of the shorter age (at least
    /// every minute, at most every second) until it stops. Without it (the default) finished
    /// jobs stay in the store until something prunes them (`fairq prune`, or a call of your
    /// own), and a store that runs many jobs keeps growing.
    ///
    /// Pruning is store-wide, not limited to the worker's queues; workers sharing a store
    /// may all prune. A prune's failure is reported like any store error (a `tracing`
    /// warning and [`on_error`](Self::on_error), under the worker's first queue).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::{MemoryBackend, Retention, Worker};
    /// let day = Duration::from_secs(24 * 3600);
    /// // Keep finished jobs for a day.
    /// let b = Worker::builder(MemoryBackend::new()).prune_finished(day);
    /// # drop(b);
    /// // Succeeded jobs for a day, dead ones for a week.
    /// let b = Worker::builder(MemoryBackend::new())
    ///     .prune_finished(Retention::finished(day).dead_for(7 * day));
    /// # drop(b);
    /// ```
    pub fn prune_finished(mut self, retention: impl Into<crate::Retention>) -> Self {
        self.prune_after = Some(retention.into());
        self
    }

    /// Checks the settings and makes the worker.
    ///
    /// ```
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker, WorkerConfigError};
    /// let err = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default().concurrency(0))
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(err, WorkerConfigError::Queue { .. }));
    /// ```
    pub fn build(self) -> Result<Worker<B>, WorkerConfigError> {
        if self.queues.is_empty() {
            return Err(WorkerConfigError::NoQueues);
        }
        if !self.handlers.has_any() {
            return Err(WorkerConfigError::NoHandlers);
        }
        for (queue, config) in &self.queues {
            let problem = crate::job::queue_name_problem(queue).or_else(|| config.problem());
            if let Some(problem) = problem {
                return Err(WorkerConfigError::Queue {
                    queue: queue.clone(),
                    problem,
                });
            }
        }
        if self.kind_timeouts.values().any(Duration::is_zero) {
            return Err(WorkerConfigError::ZeroTimeout);
        }
        let (min, max) = self.error_backoff;
        if min.is_zero() {
            return Err(WorkerConfigError::ErrorBackoff {
                problem: "the minimum delay must not be zero (a failing store would be called \
                          again in a hot loop)",
            });
        }
        if min > max {
            return Err(WorkerConfigError::ErrorBackoff {
                problem: "the minimum delay must not exceed the maximum",
            });
        }
        Ok(Worker { config: self })
    }
}

/// Runs jobs from a [`Backend`]: per-queue concurrency, fair claims, lease heartbeats,
/// panics caught as failures, rescue of expired leases, health, and graceful shutdown.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use fairq_worker::{Backend, Job, JobStatus, MemoryBackend, NewJob, QueueConfig, Worker};
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let store = Arc::new(MemoryBackend::new());
/// let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
/// let worker = Worker::builder(Arc::clone(&store))
///     .queue("greetings", QueueConfig::default().concurrency(2))
///     .handle_json("hello", move |name: String, _job: Job| {
///         let done = done_tx.clone();
///         async move {
///             done.send(format!("hello, {name}")).ok();
///             Ok::<_, String>(())
///         }
///     })
///     .build()
///     .unwrap()
///     .start()
///     .unwrap();
///
/// let id = store.enqueue(NewJob::json("greetings", "hello", "Ada").unwrap()).await.unwrap();
/// assert_eq!(done_rx.recv().await.unwrap(), "hello, Ada");
///
/// let report = worker.shutdown(Duration::from_secs(5)).await;
/// assert!(report.is_clean());
/// assert_eq!(store.get(id).await.unwrap().unwrap().status(), JobStatus::Succeeded);
/// # });
/// ```
pub struct Worker<B> {
    config: WorkerBuilder<B>,
}

impl<B> std::fmt::Debug for Worker<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("queues", &self.config.queues)
            .field("handlers", &self.config.handlers)
            .field("hooks", &self.config.hooks)
            .finish_non_exhaustive()
    }
}

impl<B: Backend> Worker<B> {
    /// Starts building a worker on `backend`.
    ///
    /// ```
    /// let builder = fairq_worker::Worker::builder(fairq_worker::MemoryBackend::new());
    /// # drop(builder);
    /// ```
    pub fn builder(backend: B) -> WorkerBuilder<B> {
        WorkerBuilder {
            backend: Arc::new(backend),
            queues: BTreeMap::new(),
            handlers: Handlers::new(),
            hooks: hooks::Hooks::default(),
            clock: Arc::new(SystemClock),
            health: HealthPolicy::default(),
            slow_after: Some(Duration::from_secs(300)),
            kind_timeouts: HashMap::new(),
            error_backoff: (Duration::from_millis(100), Duration::from_secs(30)),
            shutdown_timeout: Duration::from_secs(30),
            metrics_key: false,
            prune_after: None,
        }
    }

    /// The served queues, sorted.
    ///
    /// ```
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker};
    /// let w = Worker::builder(MemoryBackend::new())
    ///     .queue("b", QueueConfig::default())
    ///     .queue("a", QueueConfig::default())
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(w.queues().collect::<Vec<_>>(), ["a", "b"]);
    /// ```
    pub fn queues(&self) -> impl Iterator<Item = &str> {
        self.config.queues.keys().map(String::as_str)
    }

    /// Readies the store for this worker before it starts: the store opens the connections
    /// the worker's calls will use at once (per queue, a claim, its settlements in flight, a
    /// heartbeat and a rescue) and prepares its statements on them (see
    /// [`Backend::warm_up`]), so the first jobs do not wait for connections to open. Optional:
    /// a worker started cold opens them as its calls need them. A store that cannot be
    /// reached answers with its error here, before any task has started.
    ///
    /// ```
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let worker = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default())
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build()
    ///     .unwrap();
    /// worker.warm_up().await.unwrap();
    /// let handle = worker.start().unwrap();
    /// # handle.shutdown(std::time::Duration::from_secs(1)).await;
    /// # });
    /// ```
    pub async fn warm_up(&self) -> Result<(), crate::BackendError> {
        let calls: usize = self
            .config
            .queues
            .values()
            .map(|q| q.get_settles_in_flight().saturating_add(3))
            .sum();
        self.config.backend.warm_up(calls).await
    }

    /// Starts the worker's tasks on the current tokio runtime and returns its handle.
    /// Dropping the handle leaves the worker running; call [`WorkerHandle::shutdown`] to stop.
    ///
    /// ```
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker, WorkerConfigError};
    /// let w = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default())
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build()
    ///     .unwrap();
    /// // Outside a runtime:
    /// assert!(matches!(w.start(), Err(WorkerConfigError::NoRuntime)));
    /// ```
    pub fn start(self) -> Result<WorkerHandle<B>, WorkerConfigError> {
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| WorkerConfigError::NoRuntime)?;
        let config = self.config;
        let (stop, _) = watch::channel(false);
        let mut inboxes = Vec::new();
        let queues: Vec<Arc<QueueRuntime>> = config
            .queues
            .into_iter()
            .map(|(name, cfg)| {
                let (tx, rx) = mpsc::unbounded_channel();
                inboxes.push(rx);
                Arc::new(QueueRuntime::new(name, cfg, tx))
            })
            .collect();
        let shared = Arc::new(Shared {
            backend: config.backend,
            handlers: config.handlers,
            hooks: config.hooks,
            started_at: config.clock.now(),
            clock: config.clock,
            health: config.health,
            slow_after: config.slow_after,
            kind_timeouts: config.kind_timeouts,
            error_backoff: config.error_backoff,
            queues,
            metrics_key: config.metrics_key,
            stop,
            failures: std::sync::Mutex::new(Vec::new()),
            failed: watch::channel(false).0,
        });
        let (exit, _) = watch::channel(false);
        let (give_up, _) = watch::channel(false);
        let tasks = shared
            .queues
            .iter()
            .zip(inboxes)
            .enumerate()
            .map(|(i, (queue, inbox))| QueueTasks {
                // The worker's store-wide pruner runs as one of its first queue's tasks.
                pruner: config.prune_after.filter(|_| i == 0).map(|retention| {
                    supervise::spawn(
                        &runtime,
                        &shared,
                        queue,
                        WorkerTask::Pruner,
                        prune::pruner(Arc::clone(&shared), Arc::clone(queue), retention),
                    )
                }),
                claimer: supervise::spawn(
                    &runtime,
                    &shared,
                    queue,
                    WorkerTask::Claimer,
                    claimer::claimer(Arc::clone(&shared), Arc::clone(queue)),
                ),
                rescuer: supervise::spawn(
                    &runtime,
                    &shared,
                    queue,
                    WorkerTask::Rescuer,
                    claimer::rescuer(Arc::clone(&shared), Arc::clone(queue)),
                ),
                heartbeater: supervise::spawn(
                    &runtime,
                    &shared,
                    queue,
                    WorkerTask::Heartbeater,
                    heartbeat::heartbeater(
                        Arc::clone(&shared),
                        Arc::clone(queue),
                        exit.subscribe(),
                    ),
                ),
                acker: supervise::spawn(
                    &runtime,
                    &shared,
                    queue,
                    WorkerTask::Acker,
                    acker::acker(
                        Arc::clone(&shared),
                        Arc::clone(queue),
                        inbox,
                        give_up.subscribe(),
                    ),
                ),
            })
            .collect();
        Ok(WorkerHandle {
            shared,
            tasks,
            signals: Signals { exit, give_up },
            shutdown_timeout: config.shutdown_timeout,
        })
    }

    /// Starts the worker, runs until `signal` completes (for example `tokio::signal::ctrl_c()`)
    /// or one of the worker's own tasks panics ([`WorkerHandle::failed`]; the report's
    /// `failed_tasks` then says which), then shuts down gracefully within the configured
    /// [`shutdown_timeout`](WorkerBuilder::shutdown_timeout).
    ///
    /// ```
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let w = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default())
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build()
    ///     .unwrap();
    /// let report = w.run_until(async {}).await.unwrap();
    /// assert!(report.is_clean());
    /// # });
    /// ```
    pub async fn run_until(
        self,
        signal: impl Future<Output = ()>,
    ) -> Result<ShutdownReport, WorkerConfigError> {
        let handle = self.start()?;
        tokio::select! {
            () = signal => {}
            () = handle.failed() => {}
        }
        let timeout = handle.shutdown_timeout;
        Ok(handle.shutdown(timeout).await)
    }
}

/// A running worker: health, timings, and shutdown.
pub struct WorkerHandle<B> {
    shared: Arc<Shared<B>>,
    tasks: Vec<QueueTasks>,
    signals: Signals,
    shutdown_timeout: Duration,
}

impl<B> std::fmt::Debug for WorkerHandle<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerHandle")
            .field(
                "queues",
                &self
                    .shared
                    .queues
                    .iter()
                    .map(|q| &q.name)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl<B: Backend> WorkerHandle<B> {
    /// The store the worker uses.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker};
    /// let handle = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default())
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build().unwrap().start().unwrap();
    /// assert!(handle.backend().is_empty());
    /// handle.shutdown(std::time::Duration::from_secs(1)).await;
    /// # });
    /// ```
    pub fn backend(&self) -> &Arc<B> {
        &self.shared.backend
    }

    /// The health of `queue` (`None` if the worker does not serve it): unhealthy once its
    /// handlers have been failing, with no success since, for longer than the health
    /// policy's allowed error time (after the startup grace).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_core::health::Health;
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker};
    /// let handle = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default())
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build().unwrap().start().unwrap();
    /// assert_eq!(handle.health("q"), Some(Health::Healthy));
    /// assert_eq!(handle.health("other"), None);
    /// handle.shutdown(std::time::Duration::from_secs(1)).await;
    /// # });
    /// ```
    pub fn health(&self, queue: &str) -> Option<Health> {
        let q = self.shared.queues.iter().find(|q| q.name == queue)?;
        Some(health::check(&self.shared, q))
    }

    /// Every served queue's health and retry sweep, sorted by queue: whether the queue is
    /// healthy, and, where it has a [retry sweep](QueueConfig::retry_sweep), whether a
    /// failed retry holds its retries until the next sweep, and until when.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use fairq_core::health::Health;
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker};
    /// let handle = Worker::builder(MemoryBackend::new())
    ///     .queue("a", QueueConfig::default())
    ///     .queue("b", QueueConfig::default().retry_sweep(Duration::from_secs(10)))
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build().unwrap().start().unwrap();
    /// let report = handle.health_report();
    /// assert_eq!(report[0].health, Health::Healthy);
    /// assert!(report[0].retry_sweep.is_none());
    /// let sweep = report[1].retry_sweep.unwrap();
    /// assert_eq!((sweep.every, sweep.held_until), (Duration::from_secs(10), None));
    /// handle.shutdown(Duration::from_secs(1)).await;
    /// # });
    /// ```
    pub fn health_report(&self) -> Vec<QueueHealth> {
        self.shared
            .queues
            .iter()
            .map(|q| health::report(&self.shared, q))
            .collect()
    }

    /// The health of `queue` as the store sees it: judged from the time the oldest job of
    /// the queue that is still retrying first failed ([`QueueStats::oldest_error_at`]), so
    /// it covers failures seen by every worker of the queue, not only this one.
    ///
    /// [`QueueStats::oldest_error_at`]: crate::QueueStats::oldest_error_at
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_core::health::Health;
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker};
    /// let handle = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default())
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build().unwrap().start().unwrap();
    /// assert_eq!(handle.store_health("q").await.unwrap(), Health::Healthy);
    /// handle.shutdown(std::time::Duration::from_secs(1)).await;
    /// # });
    /// ```
    pub async fn store_health(&self, queue: &str) -> Result<Health, crate::BackendError> {
        let stats = self.shared.backend.stats().await?;
        let since = stats
            .iter()
            .find(|s| s.queue == queue)
            .and_then(|s| s.oldest_error_at);
        Ok(self
            .shared
            .health
            .evaluate(self.shared.started_at, since, self.shared.clock.now()))
    }

    /// True when every served queue is healthy.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker};
    /// let handle = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default())
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build().unwrap().start().unwrap();
    /// assert!(handle.is_healthy());
    /// handle.shutdown(std::time::Duration::from_secs(1)).await;
    /// # });
    /// ```
    pub fn is_healthy(&self) -> bool {
        self.shared
            .queues
            .iter()
            .all(|q| self.health(&q.name).is_none_or(|h| h.is_healthy()))
    }

    /// Handler run times of `queue` in microseconds (`None` if the worker does not serve it).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker};
    /// let handle = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default())
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build().unwrap().start().unwrap();
    /// assert_eq!(handle.processing_time("q").unwrap().count, 0);
    /// handle.shutdown(std::time::Duration::from_secs(1)).await;
    /// # });
    /// ```
    pub fn processing_time(&self, queue: &str) -> Option<Summary> {
        let q = self.shared.queues.iter().find(|q| q.name == queue)?;
        let summary = q.lock().timings.summary();
        Some(summary)
    }

    /// Jobs running now.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker};
    /// let handle = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default())
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build().unwrap().start().unwrap();
    /// assert_eq!(handle.running(), 0);
    /// handle.shutdown(std::time::Duration::from_secs(1)).await;
    /// # });
    /// ```
    pub fn running(&self) -> usize {
        self.shared.queues.iter().map(|q| q.lock().running).sum()
    }

    /// Resolves once one of the worker's own tasks (a queue's claimer, rescuer,
    /// heartbeater, acker or one of its slots) has panicked; never while none has. Such a
    /// panic is a bug (in fairq, or in a user-supplied [`Clock`]): store calls, handlers and
    /// hooks catch their own. The worker has then stopped as the first step of a shutdown
    /// does (no new claims, running handlers told to stop), the failed task's queue is
    /// unhealthy, and [`task_failures`](Self::task_failures) says what happened. Call
    /// [`shutdown`](Self::shutdown) to hand buffered jobs back; what the failed task held
    /// comes back when its lease expires. [`Worker::run_until`] waits for this as well as
    /// for its signal.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker};
    /// let handle = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default())
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build().unwrap().start().unwrap();
    /// // A healthy worker never resolves it:
    /// let waited = tokio::time::timeout(Duration::from_millis(10), handle.failed()).await;
    /// assert!(waited.is_err());
    /// assert!(handle.task_failures().is_empty());
    /// handle.shutdown(Duration::from_secs(1)).await;
    /// # });
    /// ```
    pub async fn failed(&self) {
        let mut failed = self.shared.failed.subscribe();
        // The sender lives as long as `self`: the wait cannot end otherwise.
        let _ = failed.wait_for(|failed| *failed).await;
    }

    /// The worker's own tasks that panicked so far, in the order they did (see
    /// [`failed`](Self::failed)).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker};
    /// let handle = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default())
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build().unwrap().start().unwrap();
    /// assert!(handle.task_failures().is_empty());
    /// handle.shutdown(std::time::Duration::from_secs(1)).await;
    /// # });
    /// ```
    pub fn task_failures(&self) -> Vec<TaskFailure> {
        lock::lock(&self.shared.failures).clone()
    }

    /// Stops gracefully within `deadline`: stops claiming, raises every running handler's
    /// [`StopSignal`], hands prefetched jobs that never started back to the store (when it
    /// supports [`Backend::release`]), lets running jobs finish and the store record their
    /// outcomes, then drops the handlers still running at the deadline.
    ///
    /// A job stopped by the shutdown (its handler returned a retryable error after the
    /// signal, or was dropped at the deadline) is handed back like a prefetched one: due
    /// again at once, **its attempt not counted** (`report.released`, and
    /// `report.abandoned` for the dropped ones). On a store without `release` it stays
    /// claimed until its lease expires, and the rescue then counts the attempt
    /// (`report.left_claimed`); nothing is lost either way. A handler that reaches its
    /// own timeout during the shutdown has failed its attempt as usual, and a permanent
    /// error or a success after the signal is recorded as usual.
    ///
    /// The future resolves at most 2 seconds after the deadline, whatever the store does:
    /// store calls still unanswered by then are dropped, and the jobs they concerned are
    /// reported (`report.unsettled`, `report.left_claimed`).
    ///
    /// The first poll of the returned future already stops claiming.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_worker::{Job, MemoryBackend, QueueConfig, Worker};
    /// let handle = Worker::builder(MemoryBackend::new())
    ///     .queue("q", QueueConfig::default())
    ///     .handle("k", |_job: Job| async { Ok::<_, String>(()) })
    ///     .build().unwrap().start().unwrap();
    /// let report = handle.shutdown(std::time::Duration::from_secs(1)).await;
    /// assert!(report.is_clean());
    /// # });
    /// ```
    pub async fn shutdown(self, deadline: Duration) -> ShutdownReport {
        shutdown::shutdown(self.shared, self.tasks, self.signals, deadline).await
    }
}
