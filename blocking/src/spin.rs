//! Whether a consumer about to wait should first poll a little: adaptive, per queue.
//!
//! Polling before waiting pays when what the thread waits for arrives within a microsecond
//! or so (a busy partner on another core): it then skips registering as a waiter, the
//! hand-off pass and the park/unpark round trip, which costs microseconds. It hurts when the
//! item is far off, and most on a two-core machine, where the spinner holds a core that the
//! partner may need. So a queue keeps a small score: a spin that ended with success sets it
//! to its maximum, one that ended empty-handed lowers it by one, and a thread spins only
//! while the score is positive (or, one wait in 16, to probe whether spinning has started to
//! pay again). A ping-pong whose partner must itself be woken soon stops spinning; a consumer
//! that trails a busy producer keeps spinning, and gets back to it at the first success
//! after its producer was descheduled for a while. On a single core, spinning never pays and
//! never happens.
//!
//! A spin lasts about a microsecond whatever the processor: the cost of one `spin_loop`
//! hint (the x86 `pause` instruction) ranges from a few cycles to over a hundred depending
//! on the model (34 ns on the 2-vCPU AMD EPYC development machine, where a fixed 512 hints
//! had turned "about a microsecond" into 17 µs), so the number of hints per microsecond is
//! measured once per process. Hints only, never `yield_now`: yielding hands the core to
//! other processes for a whole time slice. Under loom there is no spinning (and no time).

#[cfg(not(loom))]
use std::sync::atomic::{AtomicU32, Ordering};

/// Score ceiling: a run of successes buys this many failed spins before spinning stops.
#[cfg(not(loom))]
const MAX_SCORE: u32 = 8;
/// With a zero score, one wait in this many still spins, to notice when spinning pays again.
#[cfg(not(loom))]
const PROBE_EVERY: u32 = 16;
/// How long one spin lasts at most, in nanoseconds.
#[cfg(not(loom))]
const SPIN_NS: u64 = 1_000;
/// Polls of the condition per spin; the hints between two polls fill the time budget.
#[cfg(not(loom))]
const POLLS: u32 = 32;

/// `spin_loop` hints between two polls, measured once per process (0: not yet measured;
/// `u32::MAX`: spinning is off, a single core).
#[cfg(not(loom))]
static HINTS_PER_POLL: AtomicU32 = AtomicU32::new(0);

/// How many `spin_loop` hints to issue between two polls (see the module docs).
#[cfg(not(loom))]
fn hints_per_poll() -> u32 {
    let known = HINTS_PER_POLL.load(Ordering::Relaxed);
    if known != 0 {
        return known;
    }
    let hints = if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        u32::MAX
    } else {
        const SAMPLE: u32 = 256;
        let start = std::time::Instant::now();
        for _ in 0..SAMPLE {
            core::hint::spin_loop();
        }
        let ns_per_hint = (start.elapsed().as_nanos() as u64 / u64::from(SAMPLE)).max(1);
        (SPIN_NS / u64::from(POLLS) / ns_per_hint).clamp(1, 1_000) as u32
    };
    HINTS_PER_POLL.store(hints, Ordering::Relaxed);
    hints
}

/// The adaptive spin state of one queue. Updated with relaxed atomics: it is a heuristic,
/// and a lost update only changes how much one thread spins.
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

    /// Polls `poll` for about a microsecond while it returns `None`, if spinning has paid
    /// lately; returns its first `Some`.
    pub(crate) fn poll<R>(&self, mut poll: impl FnMut() -> Option<R>) -> Option<R> {
        self.poll_with((), |()| poll().ok_or(())).ok()
    }

    /// Like [`poll`](Self::poll), threading a value through the tries: each try takes it
    /// and either finishes (`Ok`) or hands it back for the next try (`Err`).
    #[cfg(not(loom))]
    pub(crate) fn poll_with<S, R>(
        &self,
        mut state: S,
        mut poll: impl FnMut(S) -> Result<R, S>,
    ) -> Result<R, S> {
        let word = self.state.load(Ordering::Relaxed);
        let (score, waits) = (word & 0xff, word >> 8);
        let hints = hints_per_poll();
        if hints == u32::MAX || (score == 0 && waits % PROBE_EVERY != 0) {
            self.state
                .store(waits.wrapping_add(1) << 8, Ordering::Relaxed);
            return Err(state);
        }
        for _ in 0..POLLS {
            for _ in 0..hints {
                core::hint::spin_loop();
            }
            match poll(state) {
                Ok(done) => {
                    self.state
                        .store((waits.wrapping_add(1) << 8) | MAX_SCORE, Ordering::Relaxed);
                    return Ok(done);
                }
                Err(back) => state = back,
            }
        }
        let score = score.saturating_sub(1);
        self.state
            .store((waits.wrapping_add(1) << 8) | score, Ordering::Relaxed);
        Err(state)
    }

    #[cfg(loom)]
    pub(crate) fn poll_with<S, R>(
        &self,
        state: S,
        _poll: impl FnMut(S) -> Result<R, S>,
    ) -> Result<R, S> {
        Err(state)
    }
}
