//! Watching the worker's own tasks: a panic in one stops the worker and is reported, never
//! silent.
//!
//! Store calls, handlers and hooks each catch their own panics (`guard`, `handler`, `hooks`),
//! so what is left to panic inside a worker task is the worker's own code or a user-supplied
//! [`Clock`](crate::Clock). A claimer, acker, heartbeater, rescuer or slot that ended that
//! way would leave its queue claiming nothing, or running jobs whose outcomes are never
//! recorded, with nothing to say so. Each task therefore runs under [`supervised`]: a panic is
//! logged, recorded as a [`TaskFailure`], turns the queue unhealthy, and stops the whole
//! worker (no new claims, running handlers are told to stop), as the first step of a shutdown
//! does. [`WorkerHandle::failed`](crate::WorkerHandle::failed) resolves then,
//! [`Worker::run_until`](crate::Worker::run_until) shuts down without waiting for its signal,
//! and the [`ShutdownReport`](crate::ShutdownReport) lists the failures. Jobs are not lost:
//! what the failed task held stays claimed in the store and comes back when its lease expires.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use super::guard::panic_message;
use super::lock::lock;
use super::queue::QueueRuntime;
use super::shared::Shared;
use super::task_failure::{TaskFailure, WorkerTask};
use crate::backend::Backend;

/// Spawns `task`, one of `queue`'s worker tasks, on `runtime` under [`supervised`].
pub(crate) fn spawn<B: Backend, T: Send + 'static>(
    runtime: &Handle,
    shared: &Arc<Shared<B>>,
    queue: &Arc<QueueRuntime>,
    kind: WorkerTask,
    task: impl Future<Output = T> + Send + 'static,
) -> JoinHandle<Option<T>> {
    runtime.spawn(supervised(
        Arc::clone(shared),
        Arc::clone(queue),
        kind,
        task,
    ))
}

/// Runs `task`, one of `queue`'s worker tasks; `None` if it panicked, which is then recorded
/// and stops the worker (see the module's docs).
pub(crate) async fn supervised<B: Backend, T>(
    shared: Arc<Shared<B>>,
    queue: Arc<QueueRuntime>,
    kind: WorkerTask,
    task: impl Future<Output = T>,
) -> Option<T> {
    match AssertUnwindSafe(task).catch_unwind().await {
        Ok(output) => Some(output),
        Err(payload) => {
            let message = panic_message(payload.as_ref()).to_string();
            // The clock may be what panicked: ask it once more, but do not trust it.
            let at = std::panic::catch_unwind(AssertUnwindSafe(|| shared.clock.now())).unwrap_or(0);
            let failure = TaskFailure {
                queue: queue.name.clone(),
                task: kind,
                message,
                at,
            };
            tracing::error!(error = %failure, "a worker task panicked; the worker stops");
            queue.lock().task_failed.get_or_insert(at);
            lock(&shared.failures).push(failure);
            shared.stop_all();
            shared.failed.send_replace(true);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_has_a_lowercase_name() {
        let names: Vec<String> = [
            WorkerTask::Claimer,
            WorkerTask::Rescuer,
            WorkerTask::Heartbeater,
            WorkerTask::Acker,
            WorkerTask::Slot,
            WorkerTask::Pruner,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            names,
            [
                "claimer",
                "rescuer",
                "heartbeater",
                "acker",
                "slot",
                "pruner"
            ]
        );
    }
}
