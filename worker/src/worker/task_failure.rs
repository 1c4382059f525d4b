//! What a panicked worker task leaves behind: which task it was ([`WorkerTask`]) and the
//! report of its failure ([`TaskFailure`]); see `supervise.rs`.

use fairq_core::job::Millis;

/// Which of a queue's worker tasks failed.
///
/// ```
/// use fairq_worker::WorkerTask;
/// assert_eq!(WorkerTask::Acker.to_string(), "acker");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkerTask {
    /// Claims jobs into the queue's buffer.
    Claimer,
    /// Rescues jobs whose leases expired.
    Rescuer,
    /// Renews the leases of running and buffered jobs.
    Heartbeater,
    /// Records finished jobs' outcomes in the store.
    Acker,
    /// Runs jobs one after the other (one of the queue's `concurrency` slots).
    Slot,
    /// Deletes old finished jobs store-wide (see
    /// [`WorkerBuilder::prune_finished`](crate::WorkerBuilder::prune_finished)); it counts
    /// as one of the worker's first queue's tasks.
    Pruner,
}

impl std::fmt::Display for WorkerTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WorkerTask::Claimer => "claimer",
            WorkerTask::Rescuer => "rescuer",
            WorkerTask::Heartbeater => "heartbeater",
            WorkerTask::Acker => "acker",
            WorkerTask::Slot => "slot",
            WorkerTask::Pruner => "pruner",
        })
    }
}

/// A worker task that ended with a panic (see [`WorkerHandle::failed`](crate::WorkerHandle::failed)).
///
/// ```
/// use fairq_worker::{TaskFailure, WorkerTask};
/// let failure = TaskFailure {
///     queue: "mail".into(),
///     task: WorkerTask::Claimer,
///     message: "index out of bounds".into(),
///     at: 1_000,
/// };
/// assert_eq!(
///     failure.to_string(),
///     "the claimer of queue \"mail\" panicked: index out of bounds"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {task} of queue {queue:?} panicked: {message}")]
pub struct TaskFailure {
    /// The queue the task served.
    pub queue: String,
    /// Which task it was.
    pub task: WorkerTask,
    /// The panic's message (`"a non-text panic payload"` when it had none).
    pub message: String,
    /// When the worker noticed (its clock; 0 if the clock itself was what panicked).
    pub at: Millis,
}
