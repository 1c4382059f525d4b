//! Queue health as the worker sees it, and the hooks called when a queue turns unhealthy
//! and when it recovers (once per change, not once per failed job).
//!
//! A queue is judged by the worker's [`HealthPolicy`](fairq_core::health::HealthPolicy) from
//! when its handlers started failing with no success since. The judgement is made after
//! every settled batch, at every heartbeat interval (so an error that merely grows old is
//! noticed too) and whenever the health is asked for.

use fairq_core::health::Health;
use fairq_core::job::Millis;

use super::hooks;
use super::queue::QueueRuntime;
use super::shared::Shared;
use super::sweep::{self, SweepStatus};

/// A queue's health changed: passed to `on_unhealthy` and `on_recovered`.
///
/// ```
/// use fairq_core::health::Health;
/// use fairq_worker::HealthChange;
/// let change = HealthChange { queue: "mail".into(), health: Health::Unhealthy { since: 5 }, at: 900_005 };
/// assert!(!change.health.is_healthy());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthChange {
    /// The queue.
    pub queue: String,
    /// Its health now.
    pub health: Health,
    /// When the change was seen (the worker's clock).
    pub at: Millis,
}

/// One queue in [`WorkerHandle::health_report`](crate::WorkerHandle::health_report).
///
/// ```
/// use fairq_core::health::Health;
/// use fairq_worker::QueueHealth;
/// let q = QueueHealth { queue: "mail".into(), health: Health::Healthy, retry_sweep: None };
/// assert!(q.health.is_healthy());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueHealth {
    /// The queue.
    pub queue: String,
    /// Its health, from this worker's failures.
    pub health: Health,
    /// Its retry sweep, if it has one.
    pub retry_sweep: Option<SweepStatus>,
}

/// Judges `queue` now; calls `on_unhealthy` or `on_recovered` if that changed its verdict.
pub(crate) fn check<B>(shared: &Shared<B>, queue: &QueueRuntime) -> Health {
    let now = shared.clock.now();
    let (health, changed) = {
        let mut st = queue.lock();
        let health = match st.task_failed {
            // A worker task of the queue panicked: the worker stopped serving it.
            Some(since) => Health::Unhealthy { since },
            None => shared
                .health
                .evaluate(shared.started_at, st.errors.since(), now),
        };
        let unhealthy = !health.is_healthy();
        let changed = unhealthy != st.unhealthy;
        st.unhealthy = unhealthy;
        (health, changed)
    };
    if changed {
        let change = HealthChange {
            queue: queue.name.clone(),
            health,
            at: now,
        };
        if health.is_healthy() {
            tracing::info!(queue = %queue.name, "queue recovered");
            hooks::call(&shared.hooks.recovered, &change, "on_recovered");
        } else {
            tracing::error!(queue = %queue.name, ?health, "queue is unhealthy");
            hooks::call(&shared.hooks.unhealthy, &change, "on_unhealthy");
        }
    }
    health
}

/// `queue`'s line of the health report.
pub(crate) fn report<B>(shared: &Shared<B>, queue: &QueueRuntime) -> QueueHealth {
    let health = check(shared, queue);
    QueueHealth {
        queue: queue.name.clone(),
        health,
        retry_sweep: sweep::status(queue, shared.clock.now()),
    }
}
