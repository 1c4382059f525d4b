//! The prefetch depth: fixed when configured, otherwise adapted to how fast the queue's slots
//! empty the buffer compared with how long a claim takes.
//!
//! A claim starts when the buffer falls to half the depth. If the claim comes back to an
//! empty buffer and slots waiting for jobs, the queue ran below its concurrency for lack of
//! claimed jobs (the handlers are quick compared with a claim's round trip). The depth then
//! doubles on trial, up to a ceiling. The first full claim at the new depth decides the
//! trial: the doubling stays if it cut the store's time per claimed job by at least a
//! sixth (claims' fixed cost, a round trip and a commit, was what held the queue back);
//! otherwise the depth goes back, and no doubling is tried for the next
//! [`COOLDOWN`] claims (the store's cost grows with the claim's size, and a deeper buffer
//! would only hold more jobs). A claim that comes back while the buffer still held jobs
//! shrinks the depth by a sixteenth, down to its floor, so a queue whose handlers slow down
//! stops holding jobs it cannot start. A claim that comes back short (the queue ran out of
//! ready jobs) leaves the depth alone: waiting slots then say nothing about the depth.

use core::time::Duration;

/// How many claims pass after a doubling that did not pay before another is tried.
pub(crate) const COOLDOWN: u32 = 32;

/// A doubling pays when the time per claimed job falls to at most this share of what it was.
const PAYS: f64 = 5.0 / 6.0;

/// A queue's prefetch depth and how it adapts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Depth {
    floor: usize,
    ceiling: usize,
    current: usize,
    /// A doubling on trial: the depth before it, and the time per claimed job then.
    trial: Option<(usize, f64)>,
    /// Claims left before the next doubling may be tried.
    cooldown: u32,
}

impl Depth {
    /// A depth that never changes.
    pub(crate) fn fixed(n: usize) -> Depth {
        Depth::adaptive(n, n)
    }

    /// A depth that starts at `floor` and adapts between `floor` and `ceiling`.
    pub(crate) fn adaptive(floor: usize, ceiling: usize) -> Depth {
        Depth {
            floor,
            ceiling: ceiling.max(floor),
            current: floor,
            trial: None,
            cooldown: 0,
        }
    }

    /// The depth in force.
    pub(crate) fn get(&self) -> usize {
        self.current
    }

    /// A claim that asked for `wanted` jobs came back with `got` after `took`; `starved`: it
    /// found the buffer empty and slots waiting.
    pub(crate) fn claimed(&mut self, wanted: usize, got: usize, starved: bool, took: Duration) {
        if got == 0 || got < wanted {
            return;
        }
        let cost = took.as_secs_f64() / got as f64;
        if let Some((before, was)) = self.trial.take() {
            if cost > was * PAYS {
                self.current = before;
                self.cooldown = COOLDOWN;
            }
            return;
        }
        self.cooldown = self.cooldown.saturating_sub(1);
        if starved {
            if self.cooldown == 0 && self.current < self.ceiling {
                self.trial = Some((self.current, cost));
                self.current = self.current.saturating_mul(2).max(1).min(self.ceiling);
            }
        } else {
            let step = (self.current / 16).max(1);
            self.current = self.current.saturating_sub(step).max(self.floor);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    /// A full claim as large as the depth, from a store whose claims cost `fixed` plus `each`
    /// per job.
    fn claim(d: &mut Depth, starved: bool, fixed: Duration, each: Duration) {
        let n = d.get().max(1);
        d.claimed(n, n, starved, fixed + each * n as u32);
    }

    #[test]
    fn doublings_stay_while_they_cut_the_time_per_job_up_to_the_ceiling() {
        // A claim costs 10 ms whatever its size: every doubling halves the time per job.
        let mut d = Depth::adaptive(8, 40);
        for expected in [16, 16, 32, 32, 40, 40] {
            claim(&mut d, true, 10 * MS, Duration::ZERO);
            assert_eq!(d.get(), expected);
        }
    }

    #[test]
    fn a_doubling_that_does_not_pay_is_undone_and_not_tried_again_for_a_while() {
        // The store's time grows with the claim: per job it stays the same.
        let mut d = Depth::adaptive(8, 1_000);
        claim(&mut d, true, Duration::ZERO, MS);
        assert_eq!(d.get(), 16, "on trial");
        claim(&mut d, true, Duration::ZERO, MS);
        assert_eq!(d.get(), 8, "undone");
        for _ in 0..COOLDOWN - 1 {
            claim(&mut d, true, Duration::ZERO, MS);
            assert_eq!(d.get(), 8);
        }
        claim(&mut d, true, Duration::ZERO, MS);
        assert_eq!(d.get(), 16, "tried again after the cooldown");
    }

    #[test]
    fn a_short_claim_says_nothing() {
        let mut d = Depth::adaptive(8, 64);
        d.claimed(16, 3, true, MS);
        assert_eq!(d.get(), 8);
        d.claimed(16, 0, false, MS);
        assert_eq!(d.get(), 8);
    }

    #[test]
    fn claims_that_find_jobs_still_buffered_shrink_it_to_the_floor() {
        let mut d = Depth::adaptive(4, 64);
        for _ in 0..8 {
            claim(&mut d, true, 10 * MS, Duration::ZERO);
        }
        assert_eq!(d.get(), 64);
        claim(&mut d, false, 10 * MS, Duration::ZERO);
        assert_eq!(d.get(), 60);
        for _ in 0..200 {
            claim(&mut d, false, 10 * MS, Duration::ZERO);
        }
        assert_eq!(d.get(), 4);
    }

    #[test]
    fn a_zero_floor_can_grow_and_a_fixed_depth_never_moves() {
        let mut d = Depth::adaptive(0, 8);
        claim(&mut d, true, MS, Duration::ZERO);
        assert_eq!(d.get(), 1);
        let mut f = Depth::fixed(5);
        for starved in [true, false, true] {
            claim(&mut f, starved, MS, Duration::ZERO);
            assert_eq!(f.get(), 5);
        }
    }

    proptest! {
        /// Whatever happens, the depth stays between its floor and its ceiling, it grows only
        /// on a full claim that slots starved for, and a short claim changes nothing.
        #[test]
        fn stays_in_bounds_and_grows_only_when_starved(
            floor in 0usize..64,
            extra in 0usize..2000,
            events in proptest::collection::vec(
                (any::<bool>(), 0usize..100, 0usize..100, 0u64..10_000), 0..200),
        ) {
            let mut d = Depth::adaptive(floor, floor + extra);
            for (starve, wanted, got, micros) in events {
                let got = got.min(wanted);
                let before = d.get();
                d.claimed(wanted, got, starve, Duration::from_micros(micros));
                prop_assert!(d.get() >= floor && d.get() <= floor + extra);
                if d.get() > before {
                    prop_assert!(starve && got == wanted);
                }
                if got < wanted || got == 0 {
                    prop_assert_eq!(d.get(), before);
                }
            }
        }
    }
}
