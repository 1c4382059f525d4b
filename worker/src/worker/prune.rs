//! Keeping finished jobs for a while, then deleting them.
//!
//! Every store keeps finished jobs (succeeded and dead) so that operators can look at them,
//! until something calls [`Backend::prune`]. With
//! [`WorkerBuilder::prune_finished`](crate::WorkerBuilder::prune_finished) the worker does it
//! itself: it prunes when it starts and then every [`interval`] until it stops, so a store
//! does not grow with every job it ever ran. Pruning is store-wide, whatever queues the worker
//! serves; several workers on one store may all prune (a prune is idempotent). The task is
//! supervised, and its errors reported, under the worker's first queue (in name order).

use std::sync::Arc;
use std::time::Duration;

use super::guard;
use super::hooks::Operation;
use super::queue::QueueRuntime;
use super::shared::{Shared, raised};
use crate::backend::{Backend, BackendError};

/// The shortest time between two prunes.
const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// The longest time between two prunes.
const MAX_INTERVAL: Duration = Duration::from_secs(60);

/// How often a worker that keeps finished jobs for `older_than` prunes: a quarter of that,
/// at least every minute and at most every second. A job is therefore deleted between
/// `older_than` and `older_than` plus the interval after it finished.
pub(crate) fn interval(older_than: Duration) -> Duration {
    (older_than / 4).clamp(MIN_INTERVAL, MAX_INTERVAL)
}

/// Prunes jobs that finished more than `older_than` ago, now and every [`interval`], until
/// the worker stops (a prune in flight then is dropped). A store that cannot prune says so
/// once, and the task ends.
pub(crate) async fn pruner<B: Backend>(
    shared: Arc<Shared<B>>,
    queue: Arc<QueueRuntime>,
    older_than: Duration,
) {
    let mut stop = shared.stop.subscribe();
    let every = interval(older_than);
    loop {
        if *stop.borrow() {
            return;
        }
        // A prune of a large backlog may take long (a store deletes in batches): the stop
        // signal drops it, so it never holds up a shutdown. Pruning again later is harmless.
        let pruned = tokio::select! {
            pruned = guard::call("prune", shared.backend.prune(older_than)) => pruned,
            () = raised(&mut stop) => return,
        };
        match pruned {
            Ok(0) => {}
            Ok(n) => {
                crate::metrics::pruned(n);
                tracing::info!(
                    pruned = n,
                    older_than_s = older_than.as_secs(),
                    "pruned finished jobs"
                );
            }
            Err(BackendError::Unsupported(what)) => {
                tracing::warn!("the store does not support {what}; finished jobs are kept");
                return;
            }
            Err(source) => shared.report(&queue.name, Operation::Prune, None, source),
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = raised(&mut stop) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_a_quarter_of_the_age_within_a_second_and_a_minute() {
        let s = Duration::from_secs;
        assert_eq!(interval(s(120)), s(30));
        assert_eq!(interval(Duration::ZERO), s(1));
        assert_eq!(interval(s(2)), s(1));
        assert_eq!(interval(s(24 * 3600)), s(60));
        assert_eq!(interval(Duration::MAX), s(60));
    }
}
