//! The per-queue retry sweep: retries stop at the first failure until the next sweep.
//!
//! When a downstream service is down, every job that needs it fails, and retrying all of them
//! the moment their backoff ends only hammers the service. A queue's retries therefore go in
//! *sweeps*: while retried jobs succeed, the sweep carries on eagerly; when a retried job
//! fails again, the sweep stops, and the queue's other due retries wait for the next sweep,
//! `every` later. New jobs are not held back (their first attempt says nothing about the
//! service yet). Each queue sweeps on its own, so one broken downstream does not stop the
//! retries of other queues.
//!
//! [`RetrySweep`] decides; a worker applies its decision by asking the store to hold the
//! queue's retries until the returned time.
//!
//! ```
//! use core::time::Duration;
//! use fairq_core::sweep::RetrySweep;
//!
//! let mut sweep = RetrySweep::new(Duration::from_secs(10));
//! assert_eq!(sweep.retried(true, 1_000), None); // a retry succeeded: carry on
//! assert_eq!(sweep.retried(false, 2_000), Some(12_000)); // failed again: hold until 12 s
//! assert_eq!(sweep.held_until(5_000), Some(12_000));
//! assert_eq!(sweep.retried(false, 6_000), None); // already held: nothing new to do
//! assert_eq!(sweep.held_until(12_000), None); // the next sweep begins
//! assert_eq!(sweep.retried(true, 12_500), None);
//! assert_eq!(sweep.stops(), 1);
//! ```

use core::time::Duration;

use crate::health::SweepBreaker;
use crate::job::{clamp_after, Millis};

/// One queue's retry sweep (see the [module docs](self)).
///
/// ```
/// let sweep = fairq_core::sweep::RetrySweep::new(core::time::Duration::from_secs(10));
/// assert_eq!(sweep.every(), core::time::Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySweep {
    every: Duration,
    breaker: SweepBreaker,
    until: Millis,
    stops: u64,
}

impl RetrySweep {
    /// A sweep every `every`, open (nothing held) at the start.
    ///
    /// ```
    /// let mut sweep = fairq_core::sweep::RetrySweep::new(core::time::Duration::from_secs(1));
    /// assert_eq!(sweep.held_until(0), None);
    /// ```
    pub const fn new(every: Duration) -> Self {
        RetrySweep {
            every,
            breaker: SweepBreaker::new(),
            until: 0,
            stops: 0,
        }
    }

    /// The time between sweeps.
    ///
    /// ```
    /// use core::time::Duration;
    /// assert_eq!(fairq_core::sweep::RetrySweep::new(Duration::ZERO).every(), Duration::ZERO);
    /// ```
    pub fn every(&self) -> Duration {
        self.every
    }

    /// A job that was already a retry ended at `now`, successfully or not. When its failure
    /// stops the sweep, returns the time until which the queue's other due retries must wait
    /// (the next sweep); `None` when nothing new is to be held.
    ///
    /// ```
    /// use core::time::Duration;
    /// let mut sweep = fairq_core::sweep::RetrySweep::new(Duration::from_millis(100));
    /// assert_eq!(sweep.retried(false, 50), Some(150));
    /// ```
    pub fn retried(&mut self, succeeded: bool, now: Millis) -> Option<Millis> {
        self.begin_sweep_if_due(now);
        if !self.breaker.allows() {
            return None;
        }
        self.breaker.record(succeeded);
        if self.breaker.tripped() {
            self.until = clamp_after(now, self.every);
            self.stops = self.stops.saturating_add(1);
            Some(self.until)
        } else {
            None
        }
    }

    /// Until when retries are held at `now`, if they are (a hold whose time has come ends,
    /// and a new sweep begins).
    ///
    /// ```
    /// use core::time::Duration;
    /// let mut sweep = fairq_core::sweep::RetrySweep::new(Duration::from_millis(100));
    /// sweep.retried(false, 0);
    /// assert_eq!(sweep.held_until(99), Some(100));
    /// assert_eq!(sweep.held_until(100), None);
    /// ```
    pub fn held_until(&mut self, now: Millis) -> Option<Millis> {
        self.begin_sweep_if_due(now);
        self.breaker.tripped().then_some(self.until)
    }

    /// How many times a failed retry stopped a sweep.
    ///
    /// ```
    /// assert_eq!(fairq_core::sweep::RetrySweep::new(core::time::Duration::ZERO).stops(), 0);
    /// ```
    pub fn stops(&self) -> u64 {
        self.stops
    }

    fn begin_sweep_if_due(&mut self, now: Millis) {
        if self.breaker.tripped() && now >= self.until {
            self.breaker = SweepBreaker::new();
        }
    }
}
