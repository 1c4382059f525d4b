//! Whether a consumer about to park should first spin a little: adaptive, per queue.
//!
//! Spinning before parking pays when the item arrives within a microsecond or so (a busy
//! producer on another core): the consumer then skips the park/unpark round trip, which
//! costs microseconds. It hurts when the item is far off, and most on a two-core machine,
//! where the spinner holds a core that the producer may need. So a queue keeps a small
//! score: a spin that ended with an item raises it, one that ended in a park lowers it, and a
//! consumer spins only while the score is positive (or, every so often, to probe whether
//! spinning has started to pay again). A ping-pong whose partner must itself be woken soon
//! stops spinning; a consumer that trails a busy producer keeps spinning.
//!
//! Spins are pure `spin_loop` hints, never `yield_now`: yielding hands the core to other
//! processes for a whole time slice. Under loom there is no spinning (and no time).

#[cfg(not(loom))]
use std::sync::atomic::{AtomicU32, Ordering};

/// Score ceiling: a run of successes buys this many failed spins before spinning stops.
#[cfg(not(loom))]
const MAX_SCORE: u32 = 8;
/// With a zero score, one wait in this many still spins, to notice when spinning pays again.
#[cfg(not(loom))]
const PROBE_EVERY: u32 = 64;
/// Polls of the condition per spin, each followed by a few `spin_loop` hints (about a
/// microsecond in all).
#[cfg(not(loom))]
const POLLS: u32 = 128;

/// The adaptive spin state of one queue. Updated with relaxed atomics: it is a heuristic,
/// and a lost update only changes how much one consumer spins.
pub(crate) struct Spin {
    #[cfg(not(loom))]
    /// Low byte: the score; the rest: waits counted for probing.
    state: AtomicU32,
}

impl Spin {
    pub(crate) fn new() -> Self {
        Spin {
            #[cfg(not(loom))]
            state: AtomicU32::new(MAX_SCORE),
        }
    }

    /// Spins while `done` is false, if spinning has paid lately; returns whether `done`
    /// became true.
    #[cfg(not(loom))]
    pub(crate) fn spin(&self, mut done: impl FnMut() -> bool) -> bool {
        let state = self.state.load(Ordering::Relaxed);
        let (score, waits) = (state & 0xff, state >> 8);
        if score == 0 && waits % PROBE_EVERY != 0 {
            self.state.store((waits + 1) << 8, Ordering::Relaxed);
            return false;
        }
        for _ in 0..POLLS {
            if done() {
                let score = (score + 1).min(MAX_SCORE);
                self.state
                    .store(((waits + 1) << 8) | score, Ordering::Relaxed);
                return true;
            }
            for _ in 0..4 {
                core::hint::spin_loop();
            }
        }
        let score = score.saturating_sub(1);
        self.state
            .store(((waits + 1) << 8) | score, Ordering::Relaxed);
        false
    }

    #[cfg(loom)]
    pub(crate) fn spin(&self, _done: impl FnMut() -> bool) -> bool {
        false
    }
}
