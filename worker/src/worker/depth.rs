//! The prefetch depth: fixed when configured, otherwise adapted to how fast the queue's slots
//! empty the buffer compared with how often claims come back.
//!
//! A claim starts when the buffer falls to half the depth. If the claim comes back to an
//! empty buffer and slots waiting for jobs, the queue ran below its concurrency for lack of
//! claimed jobs (the handlers are quick compared with a claim). The depth then doubles: at
//! once while it is below [`FREE`] times its floor, on trial above that, up to a ceiling.
//! For a store whose claims cost about the same whatever their size
//! ([`Backend::claims_cost_mostly_fixed`](crate::Backend::claims_cost_mostly_fixed): one
//! round trip and one commit), every doubling is at once, up to the ceiling: the trials
//! would only confirm it, and they cost a fresh worker its first couple of dozen claims
//! (PostgreSQL, concurrency 32, a drain of 20,000 jobs: 7-9% of its rate, the worker
//! crate's README has the numbers).
//!
//! A trial is judged on its first [`SAMPLES`] full claims by the time their jobs cover per
//! job (from the previous claim's return to the claim's own): the doubling stays if the mean
//! is at least a sixth below the mean of the last [`SAMPLES`] full claims before it (the
//! claims' fixed cost, a round trip and a commit, was what held the queue back). Otherwise
//! the depth goes back, and no doubling is tried for a while: [`SAMPLES`] claims after the
//! first failure, twice as many after each further one, up to [`COOLDOWN`] claims (the
//! store's cost grows with the claim's size, and a deeper buffer would only hold more jobs).
//! A doubling that stays resets the wait.
//!
//! A claim that comes back while the buffer still held jobs shrinks the depth by a
//! sixteenth, down to its floor, so a queue whose handlers slow down stops holding jobs it
//! cannot start. A claim that comes back short (the queue ran out of ready jobs) leaves the
//! depth alone: waiting slots then say nothing about the depth.
//!
//! Means rather than single claims, and a first doubling without a trial: on a busy machine
//! one claim's time differs from the next one's by up to 2x, and going from a depth of 32 to
//! 64 at concurrency 32 makes claims only half as large again (64 jobs to 96), so trials
//! judged on one claim were undone more often than not even where doublings paid (the
//! worker crate's README has the measurements).

use core::time::Duration;

/// The most claims that pass after a doubling that did not pay before another is tried.
pub(crate) const COOLDOWN: u32 = 32;

/// How many full claims a trial and its baseline are each judged on.
pub(crate) const SAMPLES: usize = 4;

/// A doubling pays when the time per job between claims falls to at most this share of what
/// it was.
const PAYS: f64 = 5.0 / 6.0;

/// Doublings up to this many times the floor are kept without a trial.
pub(crate) const FREE: usize = 2;

/// Times per job between claims, of up to [`SAMPLES`] full claims, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
struct Costs {
    seconds: [f64; SAMPLES],
    len: usize,
}

impl Costs {
    /// Adds a claim's time per job, forgetting the oldest when full.
    fn push(&mut self, cost: f64) {
        if self.len == SAMPLES {
            self.seconds.rotate_left(1);
            self.seconds[SAMPLES - 1] = cost;
        } else {
            self.seconds[self.len] = cost;
            self.len += 1;
        }
    }

    fn full(&self) -> bool {
        self.len == SAMPLES
    }

    fn mean(&self) -> f64 {
        self.seconds[..self.len].iter().sum::<f64>() / self.len.max(1) as f64
    }
}

/// A doubling on trial.
#[derive(Debug, Clone, PartialEq)]
struct Trial {
    /// The depth before it.
    before: usize,
    /// The mean time per job between claims of the claims before it.
    baseline: f64,
    /// The claims at the new depth so far.
    costs: Costs,
}

/// A queue's prefetch depth and how it adapts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Depth {
    floor: usize,
    ceiling: usize,
    /// Starved claims double the depth at once up to this many times the floor.
    free: usize,
    current: usize,
    /// The last full claims at the depth in force.
    recent: Costs,
    trial: Option<Trial>,
    /// Claims left before the next doubling may be tried.
    cooldown: u32,
    /// The wait after the next doubling that does not pay.
    backoff: u32,
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
            free: FREE,
            current: floor,
            recent: Costs::default(),
            trial: None,
            cooldown: 0,
            backoff: SAMPLES as u32,
        }
    }

    /// For a store whose claims cost about the same whatever their size
    /// ([`Backend::claims_cost_mostly_fixed`](crate::Backend::claims_cost_mostly_fixed)):
    /// starved claims double the depth at once all the way to the ceiling, without trials.
    /// Claims that come back to a buffer still holding jobs shrink it as before.
    pub(crate) fn grow_freely(&mut self) {
        self.free = usize::MAX;
    }

    /// The depth in force.
    pub(crate) fn get(&self) -> usize {
        self.current
    }

    /// A claim that asked for `wanted` jobs came back with `got`, `cycle` after the previous
    /// claim came back; `starved`: it found the buffer empty and slots waiting.
    pub(crate) fn claimed(&mut self, wanted: usize, got: usize, starved: bool, cycle: Duration) {
        if got == 0 || got < wanted {
            return;
        }
        let cost = cycle.as_secs_f64() / got as f64;
        if let Some(mut trial) = self.trial.take() {
            trial.costs.push(cost);
            if !trial.costs.full() {
                self.trial = Some(trial);
            } else if trial.costs.mean() > trial.baseline * PAYS {
                self.current = trial.before;
                self.cooldown = self.backoff;
                self.backoff = self.backoff.saturating_mul(2).min(COOLDOWN);
            } else {
                // The trial's claims are the new depth's baseline.
                self.recent = trial.costs;
                self.backoff = SAMPLES as u32;
            }
            return;
        }
        self.recent.push(cost);
        self.cooldown = self.cooldown.saturating_sub(1);
        if starved {
            let free = self
                .floor
                .max(1)
                .saturating_mul(self.free)
                .min(self.ceiling);
            if self.current < free {
                self.current = self.current.saturating_mul(2).max(1).min(free);
                self.recent = Costs::default();
            } else if self.cooldown == 0 && self.current < self.ceiling && self.recent.full() {
                self.trial = Some(Trial {
                    before: self.current,
                    baseline: self.recent.mean(),
                    costs: Costs::default(),
                });
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
    fn starved_claims_double_it_at_once_up_to_free_times_the_floor() {
        // Even where a larger claim costs as much per job.
        let mut d = Depth::adaptive(8, 1_000);
        let mut depth = 8;
        while depth < 8 * FREE {
            claim(&mut d, true, Duration::ZERO, MS);
            depth *= 2;
            assert_eq!(d.get(), depth);
        }
        claim(&mut d, true, Duration::ZERO, MS);
        assert_eq!(d.get(), 8 * FREE, "further doublings wait for a baseline");
    }

    #[test]
    fn on_a_store_with_fixed_cost_claims_starved_claims_double_it_at_once_to_the_ceiling() {
        // Even where a larger claim costs as much per job, which a trial would undo.
        let mut d = Depth::adaptive(8, 1_000);
        d.grow_freely();
        let mut seen = Vec::new();
        for _ in 0..8 {
            claim(&mut d, true, Duration::ZERO, MS);
            seen.push(d.get());
        }
        assert_eq!(seen, [16, 32, 64, 128, 256, 512, 1_000, 1_000]);
        // Claims that find jobs left in the buffer still shrink it, down to the floor.
        for _ in 0..200 {
            claim(&mut d, false, Duration::ZERO, MS);
        }
        assert_eq!(d.get(), 8);
        // A fixed depth stays fixed.
        let mut fixed = Depth::fixed(8);
        fixed.grow_freely();
        claim(&mut fixed, true, Duration::ZERO, MS);
        assert_eq!(fixed.get(), 8);
    }

    /// Claims at once up to `FREE` times the floor of `d` (a power of two, starting at 8).
    fn past_free_doublings(d: &mut Depth, fixed: Duration, each: Duration) {
        while d.get() < 8 * FREE {
            claim(d, true, fixed, each);
        }
    }

    #[test]
    fn doublings_on_trial_stay_while_they_cut_the_time_per_job_up_to_the_ceiling() {
        // A claim costs 10 ms whatever its size: every doubling halves the time per job.
        let mut d = Depth::adaptive(8, 8 * FREE * 5);
        past_free_doublings(&mut d, 10 * MS, Duration::ZERO);
        let mut seen = Vec::new();
        for _ in 0..40 {
            claim(&mut d, true, 10 * MS, Duration::ZERO);
            seen.push(d.get());
        }
        let free = 8 * FREE;
        assert_eq!(seen[SAMPLES - 2], free, "no trial before a full baseline");
        assert_eq!(seen[SAMPLES - 1], 2 * free, "on trial");
        assert_eq!(seen[2 * SAMPLES - 1], 2 * free, "kept");
        assert_eq!(seen[2 * SAMPLES], 4 * free, "the next trial at once");
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
        assert_eq!(d.get(), 5 * free, "up to the ceiling");
    }

    #[test]
    fn a_doubling_that_does_not_pay_is_undone_and_tried_again_later_and_later() {
        // The store's time grows with the claim: per job it stays the same.
        let mut d = Depth::adaptive(8, 1_000);
        past_free_doublings(&mut d, Duration::ZERO, MS);
        let free = 8 * FREE;
        for _ in 0..SAMPLES {
            claim(&mut d, true, Duration::ZERO, MS);
        }
        let mut wait = SAMPLES as u32;
        for _ in 0..5 {
            assert_eq!(d.get(), 2 * free, "on trial");
            for _ in 0..SAMPLES - 1 {
                claim(&mut d, true, Duration::ZERO, MS);
                assert_eq!(d.get(), 2 * free, "still on trial");
            }
            claim(&mut d, true, Duration::ZERO, MS);
            assert_eq!(d.get(), free, "undone");
            for _ in 0..wait - 1 {
                claim(&mut d, true, Duration::ZERO, MS);
                assert_eq!(d.get(), free);
            }
            claim(&mut d, true, Duration::ZERO, MS);
            wait = (wait * 2).min(COOLDOWN);
        }
        assert_eq!(wait, COOLDOWN);
    }

    #[test]
    fn one_slow_claim_does_not_undo_a_doubling_that_pays() {
        let mut d = Depth::adaptive(8, 1_000);
        past_free_doublings(&mut d, 10 * MS, Duration::ZERO);
        let free = 8 * FREE;
        for _ in 0..SAMPLES {
            d.claimed(free, free, true, 10 * MS);
        }
        assert_eq!(d.get(), 2 * free);
        // The trial's first claim is three times as slow as the others (the machine was
        // busy); the mean per job still falls to three quarters.
        d.claimed(2 * free, 2 * free, true, 30 * MS);
        for _ in 1..SAMPLES {
            d.claimed(2 * free, 2 * free, true, 10 * MS);
        }
        assert_eq!(d.get(), 2 * free, "kept");
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
        for _ in 0..100 {
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
        for starved in [true, false, true, true, true, true] {
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
