//! Making due jobs due: the one place where jobs waiting for a time (delayed jobs, retries,
//! released dependents, revived and handed-back jobs) get their rounds in the fair order.
//!
//! A promotion must run before anything else takes a place in a queue's fair order (a claim,
//! an enqueue of ready jobs), so that jobs whose time came earlier go first. Running it before
//! every claim costs a statement per claim even when nothing is delayed, so each store keeps,
//! per queue, the earliest time a waiting job is due ([`DueTimes`]) and promotes only once that
//! time has come:
//!
//! * this store lowers it whenever it makes a job wait (a delayed enqueue, a retry, a rescue,
//!   a revival, a hand-back, a released dependent);
//! * other stores learn of their waiting jobs through the due channel (every statement that
//!   makes a job wait notifies `<millis> <queue>` on it), which the listener feeds in here;
//! * a promotion reads the next due time of the jobs it leaves waiting;
//! * whatever is not known (at start, after the listener reconnects, or for longer than the
//!   polling interval while no listener runs) counts as due now.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use fairq_core::job::Millis;

/// What a store knows of one queue's waiting jobs.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The earliest due time of a waiting job (`u64::MAX`: none waits); `None`: unknown.
    at: Option<Millis>,
    /// Bumped by every lowering, so a promotion that raced with one does not overwrite it.
    epoch: u64,
    /// When `at` was read from the database.
    read: Instant,
}

/// The earliest due time of each queue's waiting jobs, as far as this store knows (an unknown
/// queue counts as due; see the tests below).
#[derive(Debug, Default)]
pub(crate) struct DueTimes {
    queues: Mutex<HashMap<String, Entry>>,
}

/// A promotion to run: the queue's epoch when it was decided.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    epoch: u64,
}

impl DueTimes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `Some` when `queue` may hold a job due at `now` that has no round yet. Without a
    /// listener (`trusted` false), a reading older than `stale_after` is not believed: other
    /// stores' waiting jobs are not announced.
    pub(crate) fn needs(
        &self,
        queue: &str,
        now: Millis,
        trusted: bool,
        stale_after: Duration,
    ) -> Option<Ticket> {
        let queues = self.lock();
        match queues.get(queue) {
            Some(e) if e.at.is_some_and(|at| at > now) => {
                (!trusted && e.read.elapsed() >= stale_after).then_some(Ticket { epoch: e.epoch })
            }
            Some(e) => Some(Ticket { epoch: e.epoch }),
            None => Some(Ticket { epoch: 0 }),
        }
    }

    /// A ticket for a promotion decided without asking (`needs` said no, but a write about to
    /// run in the same transaction may make jobs due).
    pub(crate) fn ticket(&self, queue: &str) -> Ticket {
        Ticket {
            epoch: self.lock().get(queue).map_or(0, |e| e.epoch),
        }
    }

    /// A job of `queue` waits until `at` (or earlier ones do).
    pub(crate) fn lower(&self, queue: &str, at: Millis) {
        let mut queues = self.lock();
        let e = queues.entry(queue.to_string()).or_insert(Entry {
            at: None,
            epoch: 0,
            read: Instant::now(),
        });
        e.epoch += 1;
        e.at = e.at.map(|known| known.min(at));
    }

    /// A promotion decided under `ticket` left `next` as the earliest waiting job (`None`:
    /// nothing waits). Ignored when a lowering came in meanwhile: the entry then already
    /// asks for another promotion.
    pub(crate) fn promoted(&self, queue: &str, ticket: Ticket, next: Option<Millis>) {
        let mut queues = self.lock();
        let entry = queues.entry(queue.to_string()).or_insert(Entry {
            at: None,
            epoch: 0,
            read: Instant::now(),
        });
        if entry.epoch == ticket.epoch {
            entry.at = Some(next.unwrap_or(u64::MAX));
            entry.read = Instant::now();
        }
    }

    /// Forgets everything (the listener reconnected: announcements may have been missed).
    pub(crate) fn forget(&self) {
        let mut queues = self.lock();
        for e in queues.values_mut() {
            e.epoch += 1;
            e.at = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(3600);

    #[test]
    fn unknown_queues_are_due_and_a_promotion_makes_them_known() {
        let due = DueTimes::default();
        let ticket = due
            .needs("q", 10, true, LONG)
            .expect("unknown counts as due");
        due.promoted("q", ticket, Some(50));
        assert!(due.needs("q", 49, true, LONG).is_none());
        assert!(due.needs("q", 50, true, LONG).is_some());
        let ticket = due.needs("q", 50, true, LONG).unwrap();
        due.promoted("q", ticket, None);
        assert!(due.needs("q", u64::MAX - 1, true, LONG).is_none());
    }

    #[test]
    fn a_lowering_during_a_promotion_is_not_lost() {
        let due = DueTimes::default();
        let first = due.needs("q", 0, true, LONG).unwrap();
        due.promoted("q", first, Some(100));
        // A promotion starts at 100; meanwhile a retry at 20 is recorded.
        let ticket = due.needs("q", 100, true, LONG).unwrap();
        due.lower("q", 20);
        due.promoted("q", ticket, Some(500));
        assert!(due.needs("q", 19, true, LONG).is_none());
        assert!(
            due.needs("q", 20, true, LONG).is_some(),
            "the retry is still known"
        );
        // A lowering of a queue never seen leaves it unknown, whatever promotion was running.
        let ticket = due.needs("r", 0, true, LONG).unwrap();
        due.lower("r", 20);
        due.promoted("r", ticket, None);
        assert!(due.needs("r", 0, true, LONG).is_some());
    }

    #[test]
    fn without_a_listener_old_readings_are_not_believed() {
        let due = DueTimes::default();
        let ticket = due.needs("q", 0, false, Duration::ZERO).unwrap();
        due.promoted("q", ticket, None);
        assert!(due.needs("q", 0, true, Duration::ZERO).is_none());
        assert!(due.needs("q", 0, false, Duration::ZERO).is_some());
        assert!(due.needs("q", 0, false, LONG).is_none());
    }

    #[test]
    fn forgetting_makes_every_queue_due() {
        let due = DueTimes::default();
        let ticket = due.needs("q", 0, true, LONG).unwrap();
        due.promoted("q", ticket, Some(100));
        due.forget();
        assert!(due.needs("q", 0, true, LONG).is_some());
    }
}
