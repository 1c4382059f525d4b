//! The claimer: keeps a queue's prefetch buffer filled, and the rescue sweep.
//!
//! It claims when the buffer is at or below its low-water mark and the queue holds fewer
//! jobs than its concurrency plus its prefetch depth, asking for exactly the difference.
//! One claim is in flight at a time per queue (the acker's combined settle-and-claim
//! included), so jobs are buffered in the order the store claimed them. A claim that comes
//! back short means the queue is drained: the claimer then waits for the store's wake-up.
//! While a stopped retry sweep holds new jobs back too, it claims nothing and looks again
//! every poll interval.

use std::sync::Arc;

use super::config::ErrorBackoff;
use super::guard;
use super::hooks::Operation;
use super::queue::QueueRuntime;
use super::shared::{Shared, raised};
use super::slot::accept;
use crate::backend::Backend;
use crate::error::BackendError;

/// Claims jobs of one queue while there is room, until shutdown.
pub(crate) async fn claimer<B: Backend>(shared: Arc<Shared<B>>, queue: Arc<QueueRuntime>) {
    let mut stop = shared.stop.subscribe();
    let (min, max) = shared.error_backoff;
    let mut backoff = ErrorBackoff::new(min, max);
    let lease = queue.config.get_lease();
    // Whether the store can take jobs back decides the default prefetch depth.
    if let Err(BackendError::Unsupported(_)) =
        guard::call("release", shared.backend.release(Vec::new())).await
    {
        queue.without_release();
    }
    if shared.backend.claims_cost_mostly_fixed() {
        queue.lock().depth.grow_freely();
    }
    loop {
        let want = loop {
            let room = queue.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            if queue.lock().stopping {
                return;
            }
            if let Some(left) = queue.paused_for(shared.clock.now()) {
                // A stopped retry sweep holds every job back: look again at the next poll
                // (the worker's clock may not be the wall clock).
                tokio::select! {
                    () = tokio::time::sleep(left.min(queue.config.get_poll_interval())) => {}
                    () = raised(&mut stop) => return,
                }
                continue;
            }
            if let Some(want) = queue.reserve_claim() {
                break want;
            }
            tokio::select! {
                () = room => {}
                () = raised(&mut stop) => return,
            }
        };
        // A claim is never cancelled half-way: what it takes is buffered even during
        // shutdown, and handed back from there.
        match guard::call("claim", shared.backend.claim(&queue.name, want, lease)).await {
            Ok(jobs) => {
                backoff.reset();
                let got = jobs.len();
                accept(&shared, &queue, jobs);
                if got < want {
                    tokio::select! {
                        () = guard::quietly("wait_for_jobs", shared.backend.wait_for_jobs(&queue.name, queue.config.get_poll_interval())) => {}
                        () = raised(&mut stop) => return,
                    }
                }
            }
            Err(source) => {
                accept(&shared, &queue, Vec::new());
                shared.report(&queue.name, Operation::Claim, None, source);
                tokio::select! {
                    () = tokio::time::sleep(backoff.next_delay()) => {}
                    () = raised(&mut stop) => return,
                }
            }
        }
    }
}

/// Takes back jobs of dead workers every rescue interval, until shutdown; with metrics on,
/// also reads the queue's depth from the store ([`Backend::live_counts`]).
pub(crate) async fn rescuer<B: Backend>(shared: Arc<Shared<B>>, queue: Arc<QueueRuntime>) {
    let mut stop = shared.stop.subscribe();
    let every = queue.config.get_rescue_interval();
    loop {
        if *stop.borrow() {
            return;
        }
        match guard::call("rescue", shared.backend.rescue(&queue.name)).await {
            Ok(0) => {}
            Ok(n) => {
                crate::metrics::rescued(&queue.name, n);
                tracing::info!(queue = %queue.name, rescued = n, "rescued jobs with expired leases")
            }
            Err(source) => shared.report(&queue.name, Operation::Rescue, None, source),
        }
        if crate::metrics::ON {
            // The queue-depth gauges, from the store's numbers.
            match guard::call("live_counts", shared.backend.live_counts(&queue.name)).await {
                Ok(live) => crate::metrics::depth(&queue.name, live),
                Err(source) => shared.report(&queue.name, Operation::Stats, None, source),
            }
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = raised(&mut stop) => return,
        }
    }
}
