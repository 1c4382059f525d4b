//! Keeping finished jobs for a while, then deleting them.
//!
//! Every store keeps finished jobs (succeeded and dead) so that operators can look at them,
//! until something calls [`Backend::prune`]. With
//! [`WorkerBuilder::prune_finished`](crate::WorkerBuilder::prune_finished) the worker does it
//! itself, by a [`Retention`] (an age per outcome): it prunes when it starts and then every
//! [`interval`] until it stops, so a store does not grow with every job it ever ran. Pruning is store-wide, whatever queues the worker
//! serves; several workers on one store may all prune (a prune is idempotent). The task is
//! supervised, and its errors reported, under the worker's first queue (in name order).

use std::sync::Arc;
use std::time::Duration;

use super::guard;
use super::hooks::Operation;
use super::queue::QueueRuntime;
use super::shared::{Shared, raised};
use crate::backend::Backend;
use crate::error::BackendError;
use crate::retention::Retention;

/// The shortest time between two prunes.
const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// The longest time between two prunes.
const MAX_INTERVAL: Duration = Duration::from_secs(60);

/// How often a worker that keeps finished jobs for `retention` prunes: a quarter of its
/// shorter age, at least every minute and at most every second. A job is therefore deleted
/// between its age and its age plus the interval after it finished.
pub(crate) fn interval(retention: &Retention) -> Duration {
    let shortest = retention.shortest().unwrap_or(MAX_INTERVAL * 4);
    (shortest / 4).clamp(MIN_INTERVAL, MAX_INTERVAL)
}

/// Prunes what `retention` no longer keeps, now and every [`interval`], until the worker
/// stops (a prune in flight then is dropped). A store that cannot prune says so once, and
/// the task ends; so does a retention that keeps everything.
pub(crate) async fn pruner<B: Backend>(
    shared: Arc<Shared<B>>,
    queue: Arc<QueueRuntime>,
    retention: Retention,
) {
    if retention.keeps_everything() {
        return;
    }
    let mut stop = shared.stop.subscribe();
    let every = interval(&retention);
    loop {
        if *stop.borrow() {
            return;
        }
        // A prune of a large backlog may take long (a store deletes in batches): the stop
        // signal drops it, so it never holds up a shutdown. Pruning again later is harmless.
        let pruned = tokio::select! {
            pruned = guard::call("prune", shared.backend.prune(retention)) => pruned,
            () = raised(&mut stop) => return,
        };
        match pruned {
            Ok(0) => {}
            Ok(n) => {
                crate::metrics::pruned(n);
                tracing::info!(
                    pruned = n,
                    succeeded_after_s = retention.succeeded.map(|a| a.as_secs()),
                    dead_after_s = retention.dead.map(|a| a.as_secs()),
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
    fn the_interval_is_a_quarter_of_the_shorter_age_within_a_second_and_a_minute() {
        let s = Duration::from_secs;
        let all = |age| interval(&Retention::finished(age));
        assert_eq!(all(s(120)), s(30));
        assert_eq!(all(Duration::ZERO), s(1));
        assert_eq!(all(s(2)), s(1));
        assert_eq!(all(s(24 * 3600)), s(60));
        assert_eq!(all(Duration::MAX), s(60));
        let split = Retention::finished(s(3600)).dead_for(s(100));
        assert_eq!(interval(&split), s(25));
        assert_eq!(interval(&Retention::forever().dead_for(s(8))), s(2));
    }
}
