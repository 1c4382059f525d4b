//! Waiting for work: [`Backend::wait_for_jobs`](fairq_worker::Backend::wait_for_jobs) sleeps
//! until a notification names the queue, its next waiting job is due, or the timeout.
//!
//! A wait returns at once when a job of the queue looks ready (or due), but a claim passes
//! over jobs whose rows another session holds locked (an open transaction that enqueues a
//! dependent of a waiting job, a cancel, another worker's claim in flight): an idle worker
//! would look, find the locked job ready, claim nothing and look again, in a loop, for as long
//! as the lock is held. So when a claim that followed such a return came back empty, the
//! queue's next waits do not believe a ready look ([`Idle`]): they sleep until a notification
//! names the queue or for the polling interval, until a claim of the queue takes a job again
//! (which wakes them) or nothing looks ready any more. A lock that ends sends no notification,
//! so a job whose lock ended waits for the polling interval at most (`PgOptions::poll_interval`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use fairq_core::job::Millis;
use fairq_worker::BackendError;

use crate::core::Core;
use crate::exec::Exec;
use crate::rows::from_db;
use crate::store::PgBackend;

impl Core {
    /// `Ok(None)`: a job is ready now; `Ok(Some(at))`: the next one is due at `at`;
    /// `Ok(Some(u64::MAX))`: nothing is waiting, or the queue is paused (its resume wakes
    /// the waiters: a paused queue's ready jobs must not make them claim in a loop).
    async fn next_due(&self, queue: &str) -> Result<Option<Millis>, BackendError> {
        let client = self.client().await?;
        let conn: &dyn Exec = &*client;
        let rows = conn
            .rows(&self.sql.due, &[&queue])
            .await
            .map_err(|e| self.err(e))?;
        let Some(row) = rows.first() else {
            return Ok(Some(u64::MAX));
        };
        let paused = row.get::<_, bool>(2);
        if row.get::<_, bool>(0) && !paused {
            return Ok(None);
        }
        let next = row.get::<_, Option<i64>>(1).map(from_db);
        if let Some(at) = next {
            // Whatever this store's due times say, a job waits until `at`.
            self.waiting(queue, at);
        }
        if paused {
            return Ok(Some(u64::MAX));
        }
        Ok(Some(next.unwrap_or(u64::MAX)))
    }
}

/// Per queue, whether ready looks are to be believed (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct Idle {
    queues: Mutex<HashMap<String, Looks>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Looks {
    /// The last wait returned at once, because a job looked ready or due.
    returned: bool,
    /// A claim after such a return took nothing: what looks ready may be locked.
    stuck: bool,
}

impl Idle {
    fn with<T>(&self, queue: &str, f: impl FnOnce(&mut Looks) -> T) -> T {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        // No allocation on the claim path once the queue is known.
        if let Some(looks) = queues.get_mut(queue) {
            return f(looks);
        }
        f(queues.entry(queue.to_string()).or_default())
    }

    /// A claim of up to `max` jobs of `queue` took `got`. True when that ends a time of not
    /// believing ready looks: a wait sleeping for that reason should look again (the claim
    /// that came back empty may only have lost the jobs to another claim, of a worker's
    /// settlement, say, while ready jobs wait).
    pub(crate) fn claimed(&self, queue: &str, got: usize, max: usize) -> bool {
        if max == 0 {
            return false;
        }
        self.with(queue, |looks| {
            let was_stuck = looks.stuck;
            if got > 0 {
                looks.stuck = false;
            } else if looks.returned {
                looks.stuck = true;
            }
            looks.returned = false;
            was_stuck && !looks.stuck
        })
    }

    /// A job of `queue` looks ready: whether to return at once (`false`: sleep instead).
    fn ready(&self, queue: &str) -> bool {
        self.with(queue, |looks| {
            looks.returned = !looks.stuck;
            looks.returned
        })
    }

    /// Nothing of `queue` looks ready.
    fn nothing_ready(&self, queue: &str) {
        self.with(queue, |looks| *looks = Looks::default());
    }
}

impl PgBackend {
    /// Records what a claim of `queue` took (see [`Idle::claimed`]).
    pub(crate) fn claimed(&self, queue: &str, got: usize, max: usize) {
        if self.inner.idle.claimed(queue, got, max) {
            self.inner.core.signals.wake(queue);
        }
    }

    pub(crate) async fn wait(&self, queue: &str, timeout: Duration) {
        self.start_listener();
        let core = &self.inner.core;
        let notify = core.signals.of(queue);
        let notified = notify.notified();
        tokio::pin!(notified);
        // Register before looking, so a wake-up in between is not missed.
        notified.as_mut().enable();
        let mut wait = timeout;
        if !core.signals.listening() {
            wait = wait.min(core.options.poll_interval);
        }
        let idle = &self.inner.idle;
        match core.next_due(queue).await {
            Ok(next) => {
                let now = core.now();
                match next {
                    Some(at) if at > now => {
                        idle.nothing_ready(queue);
                        if at != u64::MAX {
                            wait = wait.min(Duration::from_millis(at - now));
                        }
                    }
                    // A job is ready, or due for a promotion.
                    _ => {
                        if idle.ready(queue) {
                            return;
                        }
                        // It was not claimable a moment ago (locked, most likely).
                        wait = wait.min(core.options.poll_interval);
                    }
                }
            }
            Err(_) => wait = wait.min(core.options.poll_interval),
        }
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ready_look_is_not_believed_after_a_claim_that_followed_it_took_nothing() {
        let idle = Idle::default();
        // A claim that came back short, then a ready look: believed.
        assert!(!idle.claimed("q", 0, 4));
        assert!(idle.ready("q"));
        // The claim that followed took nothing: the next ready looks are not believed ...
        assert!(!idle.claimed("q", 0, 4));
        assert!(!idle.ready("q"));
        assert!(!idle.claimed("q", 0, 4));
        assert!(!idle.ready("q"));
        // ... until a claim takes a job (which wakes the waits that did not believe them),
        assert!(idle.claimed("q", 1, 4));
        assert!(idle.ready("q"));
        assert!(!idle.claimed("q", 0, 4));
        assert!(!idle.ready("q"));
        // or nothing looks ready.
        idle.nothing_ready("q");
        assert!(idle.ready("q"));
        // A claim of nothing at all says nothing; other queues are their own.
        assert!(!idle.claimed("q", 0, 0));
        assert!(idle.ready("q"));
        assert!(idle.ready("r"));
    }
}
