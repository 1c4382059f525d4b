//! Leaving a shared store as it was found: a queue that `demo` or `bench` made goes away,
//! jobs, counters and all.

use fairq_worker::{Backend, BackendError, Purge};

use crate::error::CliError;

/// Deletes every job of `queue` that is not running, then, when `remove` is set, the queue
/// itself (its finished jobs, counters and statistics; see
/// [`Backend::remove_queue`]). A store that cannot
/// remove queues keeps the emptied queue.
pub(crate) async fn clear_queue<B: Backend>(
    store: &B,
    queue: &str,
    remove: bool,
) -> Result<(), CliError> {
    store
        .purge(Purge {
            queue: Some(queue.to_string()),
            status: None,
        })
        .await?;
    if !remove {
        return Ok(());
    }
    match store.remove_queue(queue).await {
        Ok(_) | Err(BackendError::Unsupported(_) | BackendError::UnknownQueue(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
