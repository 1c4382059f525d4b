//! The worker's tasks: one claim loop and one rescue loop per queue, one task per job.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fairq_core::health::{ErrorClock, HealthPolicy};
use fairq_core::job::{Millis, Outcome};
use fairq_core::stats::Histogram;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tracing::Instrument;

use super::config::{ErrorBackoff, QueueConfig};
use super::hooks::{self, DeadJob, Hooks, JobOutcome, JobReport, Operation, SlowJob, WorkerError};
use crate::backend::{Backend, BackendError};
use crate::clock::Clock;
use crate::handler::Handlers;
use crate::job::{Claim, Failure, Job, JobId};

/// How many times a completion or failure is sent when the store is unavailable.
const SETTLE_TRIES: u32 = 5;

/// Locks a mutex, ignoring poisoning (the data are counters that stay consistent).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One served queue.
pub(crate) struct QueueRuntime {
    pub(crate) name: String,
    pub(crate) config: QueueConfig,
    /// One permit per job slot.
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) errors: Mutex<ErrorClock>,
    /// Handler run time in microseconds.
    pub(crate) timings: Mutex<Histogram>,
}

impl QueueRuntime {
    pub(crate) fn new(name: String, config: QueueConfig) -> Self {
        QueueRuntime {
            slots: Arc::new(Semaphore::new(config.get_concurrency())),
            name,
            config,
            errors: Mutex::new(ErrorClock::default()),
            timings: Mutex::new(Histogram::new()),
        }
    }
}

/// Everything the worker's tasks share.
pub(crate) struct Shared<B> {
    pub(crate) backend: Arc<B>,
    pub(crate) handlers: Handlers,
    pub(crate) hooks: Hooks,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) health: HealthPolicy,
    pub(crate) started_at: Millis,
    pub(crate) slow_after: Option<Duration>,
    pub(crate) error_backoff: (Duration, Duration),
    pub(crate) queues: Vec<Arc<QueueRuntime>>,
    /// `true` once shutdown began: stop claiming.
    pub(crate) stop: watch::Sender<bool>,
    /// Running job tasks, so a shutdown past its deadline can abort them.
    pub(crate) tasks: Mutex<HashMap<u64, (JobId, AbortHandle)>>,
    pub(crate) next_task: AtomicU64,
}

impl<B: Backend> Shared<B> {
    fn report(&self, queue: &str, operation: Operation, job: Option<JobId>, source: BackendError) {
        let error = WorkerError {
            queue: queue.to_string(),
            operation,
            job,
            source,
        };
        tracing::warn!(error = %error, "fairq worker error");
        hooks::call(&self.hooks.error, &error, "on_error");
    }
}

/// Claims jobs of one queue while there is capacity, until shutdown.
pub(crate) async fn serve_queue<B: Backend>(shared: Arc<Shared<B>>, queue: Arc<QueueRuntime>) {
    let mut stop = shared.stop.subscribe();
    let (min, max) = shared.error_backoff;
    let mut backoff = ErrorBackoff::new(min, max);
    let lease = queue.config.get_lease();
    loop {
        if *stop.borrow() {
            break;
        }
        let free = queue.slots.available_permits();
        if free == 0 {
            tokio::select! {
                permit = queue.slots.acquire() => drop(permit),
                _ = stop.changed() => {}
            }
            continue;
        }
        // A claim is never cancelled half-way: jobs it takes are run even during shutdown.
        match shared.backend.claim(&queue.name, free, lease).await {
            Ok(jobs) => {
                backoff.reset();
                let got = jobs.len();
                for job in jobs {
                    let permit = match Arc::clone(&queue.slots).try_acquire_owned() {
                        Ok(permit) => permit,
                        Err(_) => match Arc::clone(&queue.slots).acquire_owned().await {
                            Ok(permit) => permit,
                            Err(_) => return,
                        },
                    };
                    spawn_job(&shared, &queue, job, permit);
                }
                if got < free {
                    tokio::select! {
                        _ = shared.backend.wait_for_jobs(&queue.name, queue.config.get_poll_interval()) => {}
                        _ = stop.changed() => {}
                    }
                }
            }
            Err(source) => {
                shared.report(&queue.name, Operation::Claim, None, source);
                tokio::select! {
                    _ = tokio::time::sleep(backoff.next_delay()) => {}
                    _ = stop.changed() => {}
                }
            }
        }
    }
}

/// Takes back jobs of dead workers every rescue interval, until shutdown.
pub(crate) async fn rescue_loop<B: Backend>(shared: Arc<Shared<B>>, queue: Arc<QueueRuntime>) {
    let mut stop = shared.stop.subscribe();
    let every = queue.config.get_rescue_interval();
    loop {
        if *stop.borrow() {
            break;
        }
        match shared.backend.rescue(&queue.name).await {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(queue = %queue.name, rescued = n, "rescued jobs with expired leases")
            }
            Err(source) => shared.report(&queue.name, Operation::Rescue, None, source),
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => {}
        }
    }
}

/// Removes a job task from the registry when the task ends, however it ends.
struct Registered<B> {
    shared: Arc<Shared<B>>,
    task: u64,
}

impl<B> Drop for Registered<B> {
    fn drop(&mut self) {
        lock(&self.shared.tasks).remove(&self.task);
    }
}

fn spawn_job<B: Backend>(
    shared: &Arc<Shared<B>>,
    queue: &Arc<QueueRuntime>,
    job: Job,
    permit: OwnedSemaphorePermit,
) {
    let task = shared.next_task.fetch_add(1, Ordering::Relaxed);
    let id = job.claim.id;
    let registered = Registered {
        shared: Arc::clone(shared),
        task,
    };
    let future = run_job(Arc::clone(shared), Arc::clone(queue), job);
    // Hold the registry lock across the spawn so the task cannot deregister before it is
    // registered.
    let mut tasks = lock(&shared.tasks);
    let handle = tokio::spawn(async move {
        let _registered = registered;
        let _permit = permit;
        future.await;
    });
    tasks.insert(task, (id, handle.abort_handle()));
}

/// Runs one claimed job: the handler under heartbeats, then its outcome to the store.
async fn run_job<B: Backend>(shared: Arc<Shared<B>>, queue: Arc<QueueRuntime>, job: Job) {
    let span = tracing::info_span!(
        "fairq.job",
        job.id = %job.claim.id,
        queue = %job.queue,
        kind = %job.kind,
        key = job.key.as_deref().unwrap_or(""),
        attempt = job.attempt,
        trace_id = tracing::field::Empty,
    );
    if let Some(trace) = job.metadata.get("trace_id") {
        span.record("trace_id", trace.as_str());
    }
    async move {
        let started = Instant::now();
        let result = supervise(&shared, &queue, &job).await;
        let elapsed = started.elapsed();
        lock(&queue.timings).record_duration(elapsed);
        match &result {
            Ok(()) => lock(&queue.errors).success(),
            Err(failure) => {
                tracing::warn!(error = %failure.message, permanent = failure.permanent, "job failed");
                lock(&queue.errors).failure(shared.clock.now());
            }
        }
        let outcome = settle(&shared, &queue, &job, &result).await;
        match (&outcome, &result) {
            (JobOutcome::Dead, Err(failure)) => {
                tracing::error!(error = %failure.message, "job is dead");
                let dead = DeadJob {
                    job: job.clone(),
                    failure: failure.clone(),
                };
                hooks::call(&shared.hooks.dead, &dead, "on_dead");
            }
            (JobOutcome::Succeeded, _) => tracing::debug!(elapsed_ms = elapsed.as_millis() as u64, "job succeeded"),
            _ => {}
        }
        let report = JobReport {
            job,
            result,
            outcome,
            elapsed,
        };
        hooks::call(&shared.hooks.finished, &report, "on_finished");
    }
    .instrument(span)
    .await;
}

/// Runs the handler while renewing the lease and watching for slowness.
async fn supervise<B: Backend>(
    shared: &Arc<Shared<B>>,
    queue: &Arc<QueueRuntime>,
    job: &Job,
) -> Result<(), Failure> {
    let handler = shared.handlers.run(job.clone());
    tokio::pin!(handler);
    let heartbeat = heartbeat_loop(shared, queue, job.claim);
    tokio::pin!(heartbeat);
    let mut beating = true;
    let slow_after = shared.slow_after;
    let slow = async move {
        match slow_after {
            Some(after) => tokio::time::sleep(after).await,
            None => std::future::pending::<()>().await,
        }
    };
    tokio::pin!(slow);
    let mut watching = slow_after.is_some();
    let started = Instant::now();
    loop {
        tokio::select! {
            biased;
            result = &mut handler => return result,
            _ = &mut heartbeat, if beating => beating = false,
            _ = &mut slow, if watching => {
                watching = false;
                let running_for = started.elapsed();
                tracing::warn!(running_ms = running_for.as_millis() as u64, "job handler is slow");
                let slow = SlowJob { job: job.clone(), running_for };
                hooks::call(&shared.hooks.slow, &slow, "on_slow");
            }
        }
    }
}

/// Renews the lease every heartbeat interval; returns when the lease is lost.
async fn heartbeat_loop<B: Backend>(
    shared: &Arc<Shared<B>>,
    queue: &Arc<QueueRuntime>,
    claim: Claim,
) {
    let every = queue.config.get_heartbeat_interval();
    let lease = queue.config.get_lease();
    loop {
        tokio::time::sleep(every).await;
        match shared.backend.heartbeat(claim, lease).await {
            Ok(deadline) => tracing::trace!(deadline, "lease renewed"),
            Err(source) if source.is_transient() => {
                shared.report(&queue.name, Operation::Heartbeat, Some(claim.id), source);
            }
            Err(source) => {
                tracing::warn!(error = %source, "lease lost; heartbeats stop");
                shared.report(&queue.name, Operation::Heartbeat, Some(claim.id), source);
                return;
            }
        }
    }
}

/// Tells the store how the attempt went, retrying while it is unavailable.
async fn settle<B: Backend>(
    shared: &Arc<Shared<B>>,
    queue: &Arc<QueueRuntime>,
    job: &Job,
    result: &Result<(), Failure>,
) -> JobOutcome {
    let (min, max) = shared.error_backoff;
    let mut backoff = ErrorBackoff::new(min, max);
    let operation = if result.is_ok() {
        Operation::Complete
    } else {
        Operation::Fail
    };
    for attempt in 1..=SETTLE_TRIES {
        let sent = match result {
            Ok(()) => shared
                .backend
                .complete(job.claim)
                .await
                .map(|()| JobOutcome::Succeeded),
            Err(failure) => shared
                .backend
                .fail(job.claim, failure.clone())
                .await
                .map(|outcome| match outcome {
                    Outcome::Retry { run_at } => JobOutcome::Retry { run_at },
                    Outcome::Dead => JobOutcome::Dead,
                }),
        };
        match sent {
            Ok(outcome) => return outcome,
            Err(source) => {
                let transient = source.is_transient();
                shared.report(&queue.name, operation, Some(job.claim.id), source);
                if !transient || attempt == SETTLE_TRIES {
                    break;
                }
                tokio::time::sleep(backoff.next_delay()).await;
            }
        }
    }
    tracing::warn!("the store did not record the outcome; the job will be rescued");
    JobOutcome::Unrecorded
}
