//! What every task of a worker shares: the store, handlers, hooks and settings, and the
//! signals that stop it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairq_core::health::HealthPolicy;
use fairq_core::job::Millis;
use tokio::sync::watch;

use super::hooks::{self, Hooks, Operation, WorkerError};
use super::queue::QueueRuntime;
use super::task_failure::TaskFailure;
use crate::backend::Backend;
use crate::clock::Clock;
use crate::error::BackendError;
use crate::handler::Handlers;
use crate::job::JobId;

/// Everything the worker's tasks share.
pub(crate) struct Shared<B> {
    pub(crate) backend: Arc<B>,
    pub(crate) handlers: Handlers,
    pub(crate) hooks: Hooks,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) health: HealthPolicy,
    pub(crate) started_at: Millis,
    pub(crate) slow_after: Option<Duration>,
    pub(crate) kind_timeouts: HashMap<String, Duration>,
    pub(crate) error_backoff: (Duration, Duration),
    pub(crate) queues: Vec<Arc<QueueRuntime>>,
    /// Label per-job metrics with the fairness key too.
    pub(crate) metrics_key: bool,
    /// `true` once shutdown began: stop claiming, stop starting jobs, tell handlers.
    pub(crate) stop: watch::Sender<bool>,
    /// Worker tasks that panicked, in the order they did (see `supervise`).
    pub(crate) failures: Mutex<Vec<TaskFailure>>,
    /// `true` once a worker task panicked.
    pub(crate) failed: watch::Sender<bool>,
}

impl<B> Shared<B> {
    /// The first step of a shutdown: claim nothing more, start no job, raise every running
    /// handler's stop signal, and let each queue's acker end once its slots are gone.
    pub(crate) fn stop_all(&self) {
        self.stop.send_replace(true);
        for queue in &self.queues {
            drop(queue.stop());
        }
    }
}

impl<B: Backend> Shared<B> {
    /// Logs a failed store call and passes it to `on_error`.
    pub(crate) fn report(
        &self,
        queue: &str,
        operation: Operation,
        job: Option<JobId>,
        source: BackendError,
    ) {
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

/// Resolves once `signal` turns `true`; never, if its sender is gone first (a dropped
/// [`WorkerHandle`](crate::WorkerHandle) leaves the worker running).
pub(crate) async fn raised(signal: &mut watch::Receiver<bool>) {
    if signal.wait_for(|raised| *raised).await.is_err() {
        std::future::pending::<()>().await;
    }
}
