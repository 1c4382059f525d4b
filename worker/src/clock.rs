//! Time as a service: every store reads "now" from a [`Clock`], so tests can drive time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fairq_core::job::{Millis, millis};

/// A source of the current time in milliseconds since the Unix epoch.
///
/// Stores take an `Arc<dyn Clock>`; production code uses [`SystemClock`], tests a
/// [`ManualClock`] they advance by hand.
///
/// ```
/// use fairq_worker::{Clock, SystemClock};
/// assert!(SystemClock.now() > 1_600_000_000_000);
/// ```
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Millis;
}

/// The system's wall clock.
///
/// ```
/// use fairq_worker::{Clock, SystemClock};
/// let a = SystemClock.now();
/// assert!(SystemClock.now() >= a);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(millis)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to; clones share the same time.
///
/// ```
/// use std::time::Duration;
/// use fairq_worker::{Clock, ManualClock};
/// let clock = ManualClock::new(1_000);
/// let view = clock.clone();
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(view.now(), 3_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `start` milliseconds.
    ///
    /// ```
    /// use fairq_worker::{Clock, ManualClock};
    /// assert_eq!(ManualClock::new(5).now(), 5);
    /// ```
    pub fn new(start: Millis) -> Self {
        ManualClock {
            now: Arc::new(AtomicU64::new(start)),
        }
    }

    /// Moves time forward by `by`, stopping at the largest time a `Millis` holds (so that
    /// `advance(Duration::MAX)` reads as "the far future", never wraps to the past).
    ///
    /// ```
    /// use fairq_worker::{Clock, ManualClock};
    /// let c = ManualClock::new(0);
    /// c.advance(std::time::Duration::from_millis(7));
    /// assert_eq!(c.now(), 7);
    /// ```
    pub fn advance(&self, by: Duration) {
        let by = millis(by);
        // The closure always answers `Some`, so the update cannot fail.
        let _ = self
            .now
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(now.saturating_add(by))
            });
    }

    /// Sets the time (it may go backwards; stores must cope with that only in tests).
    ///
    /// ```
    /// use fairq_worker::{Clock, ManualClock};
    /// let c = ManualClock::new(0);
    /// c.set(42);
    /// assert_eq!(c.now(), 42);
    /// ```
    pub fn set(&self, now: Millis) {
        self.now.store(now, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        self.now.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_past_the_largest_time_stops_there() {
        let clock = ManualClock::new(5);
        clock.advance(Duration::MAX);
        assert_eq!(clock.now(), Millis::MAX);
        clock.advance(Duration::from_millis(1));
        assert_eq!(clock.now(), Millis::MAX);
        let clock = ManualClock::new(Millis::MAX - 1);
        clock.advance(Duration::from_millis(3));
        assert_eq!(clock.now(), Millis::MAX);
    }
}
