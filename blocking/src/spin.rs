//! Whether a thread about to wait should first poll a little, and how: adaptive, per queue.
//!
//! A wait that ends in a park costs microseconds on both sides: the waiting thread registers
//! and sleeps in the kernel, and the thread that ends the wait runs a hand-off pass and
//! wakes it with a system call. Polling first, for what the thread waits for (an item, or
//! room in a full bounded queue), skips all of that when it comes soon. Two phases:
//!
//! * **Spinning**: about a microsecond of `spin_loop` hints between polls. It pays when the
//!   partner runs on another core right now (a consumer trailing a busy producer). It hurts
//!   when the partner is not running, and most on a two-core machine, where the spinner may
//!   hold the very core the partner needs. Consumers spin for an item. A producer waiting for
//!   room spins too, but tries only once a batch of slots is free
//!   (`RoomWaiters::push_blocking`): one that refilled each slot the moment a consumer
//!   freed it would trade the store's cache lines with it for every item.
//! * **Yielding**: up to [`YIELDS`] `yield_now` calls, polling after each. It pays when the
//!   partner is runnable but not running: with more runnable threads than cores (a loaded
//!   two-core machine, or one core), the partner often waits for the core this thread
//!   holds. Parking would then cost the partner a wake-up system call and a context switch
//!   for each wait, and the two threads could fall into a rhythm of one park per handful of
//!   items; yielding hands the core over at once, and the partner fills (or drains) the
//!   queue for the rest of its time slice. Pinned to one core, the bench's spsc case parked
//!   once per 250 to 1,000 items without it (25 to 43 ns of CPU per item) and never with it
//!   (13 to 18 ns). When nothing else is runnable, a yield returns at once and the phase is
//!   a few microseconds of polling, which is also what a ping-pong's reply needs. Both
//!   sides yield: a consumer facing an empty queue and a producer facing a full one.
//!
//! Each phase keeps a small score per queue: a phase that ended with success sets its score
//! to the maximum, one that ended empty-handed lowers it by one, and a thread runs a phase
//! only while its score is positive (or, one wait in 16, to probe whether it has started to
//! pay again). A ping-pong whose partner must itself be woken soon stops spinning; a
//! consumer that waits for items arriving milliseconds apart soon stops both, and then
//! parks at once as before. The yield phase also ends early when the caller says the wait
//! is over (its deadline passed, or others are already queued for the same thing).
//!
//! **How long to yield.** A park costs the parked thread its wake-up: the time from the
//! unpark to the thread running again, which the drainer stamps and the woken thread reads
//! (`Spin::note_wake`). Polling for about that long before parking costs at most about as
//! much as the park would (the rule of spinning before blocking), so the yield phase lasts
//! that long, half as long again (at most [`MAX_WAKE_NS`]), when that is more than
//! [`YIELDS`] yields. It matters where waking a thread is slow: on a virtual machine where a
//! woken thread ran 40 to 45 µs after its wake-up, a ping-pong whose two threads both parked
//! stayed that way, since neither polled long enough to see a reply from a partner that had
//! first to be woken itself; each trip cost two wake-ups. With the wake-up as the budget, a
//! probe outlasts the partner's wake-up, the pair polls again, and the trips stop parking.
//! Items that arrive further apart than that still park once the phase stops paying (its
//! score). A wake-up slower than the ceiling (a loaded machine) clears the budget.
//!
//! A spin lasts about a microsecond whatever the processor: the cost of one `spin_loop`
//! hint (the x86 `pause` instruction) ranges from a few cycles to over a hundred depending
//! on the model (34 ns on the 2-vCPU AMD EPYC development machine, where a fixed 512 hints
//! had turned "about a microsecond" into 17 µs), so the number of hints per microsecond is
//! measured once per process. On a single core nobody spins, but threads still yield; a
//! thread pinned to one CPU of several is not on a single core (`processors`).
//! Under loom there is no polling at all (and no time): the models see every wait park.

#[cfg(not(loom))]
use std::sync::atomic::{AtomicU32, Ordering};

/// Score ceiling: a run of successes buys this many failed phases before the phase stops.
#[cfg(not(loom))]
const MAX_SCORE: u32 = 8;
/// With a zero score, one wait in this many still runs the phase, to notice when it pays
/// again.
#[cfg(not(loom))]
const PROBE_EVERY: u32 = 16;
/// How long one spin lasts at most, in nanoseconds.
#[cfg(not(loom))]
const SPIN_NS: u64 = 1_000;
/// Polls of the condition per spin; the hints between two polls fill the time budget.
#[cfg(not(loom))]
const POLLS: u32 = 32;
/// `yield_now` calls per wait, at most, unless wake-ups take longer than they do (see
/// [`wake_budget_ns`]).
#[cfg(not(loom))]
pub(crate) const YIELDS: u32 = 8;
/// The slowest wake-up worth polling for about as long, and the longest yield phase, in
/// nanoseconds.
#[cfg(not(loom))]
pub(crate) const MAX_WAKE_NS: u64 = 200_000;

/// The yield phase's time budget after a wake-up that took `wake_ns`: half as long again,
/// so that a poll of that length outlasts a partner's wake-up of the same length with some
/// margin; none after a wake-up slower than [`MAX_WAKE_NS`]. Always within
/// `0..=MAX_WAKE_NS`.
#[cfg(not(loom))]
pub(crate) fn wake_budget_ns(wake_ns: u64) -> u64 {
    if wake_ns > MAX_WAKE_NS {
        0
    } else {
        (wake_ns + wake_ns / 2).min(MAX_WAKE_NS)
    }
}

/// Nanoseconds since the first call in this process, plus one (never 0): when a waiter was
/// unparked, for its owner to time its wake-up.
#[cfg(not(loom))]
pub(crate) fn stamp() -> u64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let since = EPOCH.get_or_init(std::time::Instant::now).elapsed();
    u64::try_from(since.as_nanos()).unwrap_or(u64::MAX - 1) + 1
}

/// `spin_loop` hints between two polls, measured once per process (0: not yet measured;
/// `u32::MAX`: spinning is off, a single core: see `processors`).
#[cfg(not(loom))]
static HINTS_PER_POLL: AtomicU32 = AtomicU32::new(0);

/// How many `spin_loop` hints to issue between two polls (see the module docs).
#[cfg(not(loom))]
fn hints_per_poll() -> u32 {
    let known = HINTS_PER_POLL.load(Ordering::Relaxed);
    if known != 0 {
        return known;
    }
    let hints = if crate::processors::processors() < 2 {
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

/// How many times [`crate::sync::lock_taking_turns`] steps back before it waits in the
/// mutex's own `lock`.
#[cfg(not(loom))]
pub(crate) const BACK_OFFS: u32 = 4;
/// How long one step back lasts, in nanoseconds: long enough for the holder of a lock to
/// run many short critical sections. In the bench's `FairWaitQueue` cases with both
/// threads on a core each (real-time priority), per item: 0.3 µs measured 131-171 ns,
/// 1 µs 65-81, 3 µs 49-73 (single samples of mpmc and spsc); with two steps of 3 µs
/// instead of four, spsc measured 70-73 against 61-63.
const BACK_OFF_NS: u64 = 3_000;
/// A bounded store's step back lasts this long per item of its bound, if that is shorter
/// than [`BACK_OFF_NS`]: the holder can run only about as many sections as the bound allows
/// before it has to wait for the thread that stepped back (a producer for a consumer to make
/// room), and steps of 3 µs then left both threads idle (spsc through a `FairWaitQueue` of
/// 4 with the threads pinned apart: 760 to 840 ns an item, against 160 to 180).
const BACK_OFF_NS_PER_SLOT: u64 = 25;

/// How long a step back at a store bounded to `capacity` items lasts, in nanoseconds.
pub(crate) fn back_off_ns(capacity: Option<usize>) -> u64 {
    capacity.map_or(BACK_OFF_NS, |capacity| {
        (capacity as u64)
            .saturating_mul(BACK_OFF_NS_PER_SLOT)
            .clamp(BACK_OFF_NS_PER_SLOT, BACK_OFF_NS)
    })
}

/// Spends about `ns` nanoseconds in `spin_loop` hints, touching no shared memory; returns
/// `false` at once on a single core, where the holder cannot run meanwhile.
#[cfg(not(loom))]
pub(crate) fn back_off(ns: u64) -> bool {
    let hints = hints_per_poll();
    if hints == u32::MAX {
        return false;
    }
    // `hints` fill the time of one poll of a spin (`SPIN_NS / POLLS`).
    let polls = (ns * u64::from(POLLS) / SPIN_NS).max(1);
    for _ in 0..polls * u64::from(hints) {
        core::hint::spin_loop();
    }
    true
}

/// The adaptive polling state of one queue (one side of it). Updated with relaxed atomics:
/// it is a heuristic, and a lost update only changes how long one thread polls.
pub(crate) struct Spin {
    #[cfg(not(loom))]
    /// Bits 0-7: the spin score; 8-15: the yield score; 16-31: waits counted for probing.
    state: AtomicU32,
    #[cfg(not(loom))]
    /// The yield phase's time budget in nanoseconds ([`wake_budget_ns`] of the last timed
    /// wake-up); 0: [`YIELDS`] yields.
    wake_ns: AtomicU32,
}

#[cfg(not(loom))]
const SCORE: u32 = 0xff;
#[cfg(not(loom))]
const YIELD_SHIFT: u32 = 8;
#[cfg(not(loom))]
const WAITS_SHIFT: u32 = 16;

impl Spin {
    pub(crate) fn new() -> Self {
        Spin {
            #[cfg(not(loom))]
            state: AtomicU32::new(MAX_SCORE | (MAX_SCORE << YIELD_SHIFT)),
            #[cfg(not(loom))]
            wake_ns: AtomicU32::new(0),
        }
    }

    /// Records that a parked thread ran `wake` after it was unparked (see the module docs).
    #[cfg(not(loom))]
    pub(crate) fn note_wake(&self, wake: std::time::Duration) {
        let wake_ns = u64::try_from(wake.as_nanos()).unwrap_or(u64::MAX);
        // At most `MAX_WAKE_NS`, which fits in 32 bits.
        let budget = u32::try_from(wake_budget_ns(wake_ns)).unwrap_or(u32::MAX);
        self.wake_ns.store(budget, Ordering::Relaxed);
    }

    /// Polls `poll` while it returns `None`, in the phases that have paid lately (see the
    /// module docs); returns its first `Some`. The yield phase ends early once `over()`.
    pub(crate) fn poll<R>(
        &self,
        over: impl FnMut() -> bool,
        mut poll: impl FnMut() -> Option<R>,
    ) -> Option<R> {
        self.poll_with((), || true, over, |()| poll().ok_or(()))
            .ok()
    }

    /// Like [`poll`](Self::poll), threading a value through the tries: each try takes it
    /// and either finishes (`Ok`) or hands it back for the next try (`Err`). In the spin
    /// phase a try is made only once `ready()` (a producer waits for a batch of room there:
    /// see `RoomWaiters::push_blocking`); after a yield, always.
    #[cfg(not(loom))]
    pub(crate) fn poll_with<S, R>(
        &self,
        mut state: S,
        ready: impl Fn() -> bool,
        mut over: impl FnMut() -> bool,
        mut poll: impl FnMut(S) -> Result<R, S>,
    ) -> Result<R, S> {
        let word = self.state.load(Ordering::Relaxed);
        let mut spin_score = word & SCORE;
        let mut yield_score = (word >> YIELD_SHIFT) & SCORE;
        let waits = word >> WAITS_SHIFT;
        let probe = waits % PROBE_EVERY == 0;
        let outcome = 'done: {
            let hints = hints_per_poll();
            if hints != u32::MAX && (spin_score > 0 || probe) {
                match spin(state, hints, &ready, &mut poll) {
                    Ok(done) => {
                        spin_score = MAX_SCORE;
                        break 'done Ok(done);
                    }
                    Err(back) => {
                        state = back;
                        spin_score = spin_score.saturating_sub(1);
                    }
                }
            }
            if yield_score > 0 || probe {
                let budget_ns = u64::from(self.wake_ns.load(Ordering::Relaxed));
                match yield_now(state, budget_ns, &mut over, &mut poll) {
                    Ok(done) => {
                        yield_score = MAX_SCORE;
                        break 'done Ok(done);
                    }
                    Err(back) => {
                        state = back;
                        yield_score = yield_score.saturating_sub(1);
                    }
                }
            }
            Err(state)
        };
        let waits = waits.wrapping_add(1) & (u32::MAX >> WAITS_SHIFT);
        self.state.store(
            (waits << WAITS_SHIFT) | (yield_score << YIELD_SHIFT) | spin_score,
            Ordering::Relaxed,
        );
        outcome
    }

    #[cfg(loom)]
    pub(crate) fn poll_with<S, R>(
        &self,
        state: S,
        _ready: impl Fn() -> bool,
        _over: impl FnMut() -> bool,
        _poll: impl FnMut(S) -> Result<R, S>,
    ) -> Result<R, S> {
        Err(state)
    }
}

/// About a microsecond of polls with `hints` spin hints before each; a poll tries only
/// once `ready()`.
#[cfg(not(loom))]
fn spin<S, R>(
    mut state: S,
    hints: u32,
    ready: &impl Fn() -> bool,
    poll: &mut impl FnMut(S) -> Result<R, S>,
) -> Result<R, S> {
    for _ in 0..POLLS {
        for _ in 0..hints {
            core::hint::spin_loop();
        }
        if !ready() {
            continue;
        }
        match poll(state) {
            Ok(done) => return Ok(done),
            Err(back) => state = back,
        }
    }
    Err(state)
}

/// Yields of the core, each followed by a poll, until `over()`: [`YIELDS`] of them, or as
/// many as fit in `budget_ns` if that is more.
#[cfg(not(loom))]
fn yield_now<S, R>(
    mut state: S,
    budget_ns: u64,
    over: &mut impl FnMut() -> bool,
    poll: &mut impl FnMut(S) -> Result<R, S>,
) -> Result<R, S> {
    let start = (budget_ns > 0).then(std::time::Instant::now);
    let mut yields = 0;
    loop {
        if yields >= YIELDS {
            let within = start.is_some_and(|at| (at.elapsed().as_nanos() as u64) < budget_ns);
            if !within {
                break;
            }
        }
        if over() {
            break;
        }
        std::thread::yield_now();
        yields += 1;
        match poll(state) {
            Ok(done) => return Ok(done),
            Err(back) => state = back,
        }
    }
    Err(state)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_wake_up_buys_a_yield_phase_half_as_long_again() {
        assert_eq!(wake_budget_ns(0), 0);
        assert_eq!(wake_budget_ns(90_000), 135_000);
        assert_eq!(wake_budget_ns(150_000), MAX_WAKE_NS, "capped");
        assert_eq!(wake_budget_ns(MAX_WAKE_NS), MAX_WAKE_NS);
        assert_eq!(wake_budget_ns(MAX_WAKE_NS + 1), 0, "too slow to poll for");
        assert_eq!(wake_budget_ns(u64::MAX), 0);
    }

    #[test]
    fn a_wake_up_sets_the_budget_and_a_slow_one_clears_it() {
        let spin = Spin::new();
        assert_eq!(spin.wake_ns.load(Ordering::Relaxed), 0);
        spin.note_wake(Duration::from_micros(40));
        assert_eq!(spin.wake_ns.load(Ordering::Relaxed), 60_000);
        spin.note_wake(Duration::from_millis(5));
        assert_eq!(spin.wake_ns.load(Ordering::Relaxed), 0);
        spin.note_wake(Duration::MAX);
        assert_eq!(spin.wake_ns.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn stamps_are_never_zero_and_never_go_back() {
        let first = stamp();
        let second = stamp();
        assert!(first > 0);
        assert!(second >= first);
    }

    /// Polls until the `n`th try succeeds, yielding under `budget_ns`; returns how many
    /// tries it made, or `None` if it gave up first.
    fn yield_tries(budget_ns: u64, n: u32) -> Option<u32> {
        let mut tries = 0;
        let mut poll = |()| {
            tries += 1;
            if tries >= n {
                Ok(tries)
            } else {
                Err(())
            }
        };
        yield_now((), budget_ns, &mut || false, &mut poll).ok()
    }

    #[test]
    fn without_a_budget_the_yield_phase_gives_up_after_its_yields() {
        assert_eq!(yield_tries(0, YIELDS), Some(YIELDS));
        assert_eq!(yield_tries(0, YIELDS + 1), None);
    }

    #[test]
    fn with_a_budget_the_yield_phase_polls_past_its_yields() {
        // 200 yields take far less than the budget of a minute on any machine.
        assert_eq!(yield_tries(60_000_000_000, 200), Some(200));
    }

    #[test]
    fn the_yield_phase_stops_when_the_wait_is_over() {
        let mut tries = 0;
        let mut poll = |()| {
            tries += 1;
            Err::<(), ()>(())
        };
        assert!(yield_now((), 60_000_000_000, &mut || true, &mut poll).is_err());
        assert_eq!(tries, 0);
    }

    #[test]
    fn a_spin_tries_only_once_ready() {
        let hints = hints_per_poll().min(4);
        let tries = std::cell::Cell::new(0);
        let mut poll = |()| {
            tries.set(tries.get() + 1);
            Err::<(), ()>(())
        };
        assert!(spin((), hints, &|| false, &mut poll).is_err());
        assert_eq!(tries.get(), 0, "never ready: never tried");
        let checks = std::cell::Cell::new(0);
        let ready = || {
            checks.set(checks.get() + 1);
            checks.get() > POLLS / 2
        };
        assert!(spin((), hints, &ready, &mut poll).is_err());
        assert_eq!(
            tries.get(),
            POLLS - POLLS / 2,
            "tried at every poll once ready"
        );
    }

    #[test]
    fn a_bounded_store_steps_back_for_as_long_as_its_bound_allows() {
        assert_eq!(back_off_ns(None), BACK_OFF_NS);
        assert_eq!(back_off_ns(Some(0)), BACK_OFF_NS_PER_SLOT, "never zero");
        assert_eq!(back_off_ns(Some(4)), 4 * BACK_OFF_NS_PER_SLOT);
        assert_eq!(back_off_ns(Some(1 << 20)), BACK_OFF_NS, "capped");
        assert_eq!(back_off_ns(Some(usize::MAX)), BACK_OFF_NS);
    }
}
