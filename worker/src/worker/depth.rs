//! The prefetch depth: fixed when configured, otherwise adapted to how fast the queue's slots
//! empty the buffer compared with how long a claim takes.
//!
//! A claim starts when the buffer falls to half the depth. If the claim comes back to an
//! empty buffer and slots waiting for jobs, the queue ran below its concurrency for lack of
//! claimed jobs (the handlers are quick compared with a claim's round trip). The depth then
//! doubles, up to a ceiling, so that claims grow, start earlier and cover the round trip. A claim that comes back while the buffer still held jobs shrinks it by a sixteenth,
//! down to its floor, so a queue whose handlers slow down stops holding jobs it cannot start.
//! A claim that comes back short (the queue ran out of ready jobs) leaves the depth alone:
//! waiting slots then say nothing about the depth.

/// A queue's prefetch depth and how it adapts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Depth {
    floor: usize,
    ceiling: usize,
    current: usize,
}

impl Depth {
    /// A depth that never changes.
    pub(crate) fn fixed(n: usize) -> Depth {
        Depth {
            floor: n,
            ceiling: n,
            current: n,
        }
    }

    /// A depth that starts at `floor` and adapts between `floor` and `ceiling`.
    pub(crate) fn adaptive(floor: usize, ceiling: usize) -> Depth {
        Depth {
            floor,
            ceiling: ceiling.max(floor),
            current: floor,
        }
    }

    /// The depth in force.
    pub(crate) fn get(&self) -> usize {
        self.current
    }

    /// A claim that asked for `wanted` jobs came back with `got`; `starved`: it found the
    /// buffer empty and slots waiting.
    pub(crate) fn claimed(&mut self, wanted: usize, got: usize, starved: bool) {
        if got < wanted {
            return;
        }
        self.current = if starved {
            self.current.saturating_mul(2).max(1).min(self.ceiling)
        } else {
            let step = (self.current / 16).max(1);
            self.current.saturating_sub(step).max(self.floor)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_starved_full_claim_doubles_the_depth_up_to_the_ceiling() {
        let mut d = Depth::adaptive(8, 40);
        d.claimed(16, 16, true);
        assert_eq!(d.get(), 16);
        d.claimed(20, 20, true);
        assert_eq!(d.get(), 32);
        d.claimed(20, 20, true);
        assert_eq!(d.get(), 40);
    }

    #[test]
    fn a_short_claim_says_nothing() {
        let mut d = Depth::adaptive(8, 64);
        d.claimed(16, 3, true);
        assert_eq!(d.get(), 8);
        d.claimed(16, 0, false);
        assert_eq!(d.get(), 8);
    }

    #[test]
    fn claims_that_find_jobs_still_buffered_shrink_it_to_the_floor() {
        let mut d = Depth::adaptive(4, 64);
        for _ in 0..4 {
            d.claimed(1, 1, true);
        }
        assert_eq!(d.get(), 64);
        d.claimed(10, 10, false);
        assert_eq!(d.get(), 60);
        for _ in 0..200 {
            d.claimed(10, 10, false);
        }
        assert_eq!(d.get(), 4);
    }

    #[test]
    fn a_zero_floor_can_grow_and_a_fixed_depth_never_moves() {
        let mut d = Depth::adaptive(0, 8);
        d.claimed(2, 2, true);
        assert_eq!(d.get(), 1);
        let mut f = Depth::fixed(5);
        f.claimed(9, 9, true);
        assert_eq!(f.get(), 5);
        f.claimed(9, 9, false);
        assert_eq!(f.get(), 5);
    }

    proptest! {
        /// Whatever happens, the depth stays between its floor and its ceiling, and it grows
        /// only on a full claim that slots starved for.
        #[test]
        fn stays_in_bounds_and_grows_only_when_starved(
            floor in 0usize..64,
            extra in 0usize..2000,
            events in proptest::collection::vec((any::<bool>(), 0usize..100, 0usize..100), 0..200),
        ) {
            let mut d = Depth::adaptive(floor, floor + extra);
            for (starve, wanted, got) in events {
                let got = got.min(wanted);
                let before = d.get();
                d.claimed(wanted, got, starve);
                prop_assert!(d.get() >= floor && d.get() <= floor + extra);
                if d.get() > before {
                    prop_assert!(starve && got == wanted);
                }
                if got < wanted {
                    prop_assert_eq!(d.get(), before);
                }
            }
        }
    }
}
