//! One thread's count of its blocking calls on one queue, and the judgement of each window
//! of them: whether two threads trading the queue's cache lines made the calls slow enough
//! that one of them should step back. The rule and its reasons are in `turns`, which acts on
//! the judgement.

use std::cell::Cell;
use std::time::Instant;

use crate::op::Op;

/// Blocking calls per window.
pub(crate) const WINDOW: u32 = 256;
/// The window's last calls whose time per call [`decide`] weighs (its span).
pub(crate) const SPAN: u32 = 64;
/// Blocking calls in the first window after a step back.
pub(crate) const PROBE: u32 = 16;
/// The window's last calls, timed one by one.
pub(crate) const TIMED: u32 = 4;
/// The timed calls of a contended window took at least this long on average, in nanoseconds.
pub(crate) const CONTENDED_NS: u64 = 100;
/// A timed call slower than this waited (for an item, or for room) rather than for another
/// core's lines, in nanoseconds: such a window says nothing about contention.
pub(crate) const WAITED_NS: u64 = 20_000;
/// What a call costs a thread alone on the queue (about; in nanoseconds).
pub(crate) const ALONE_NS: u64 = 15;
/// The call of a window of `len` calls at which its span starts: the span's time per call
/// is what [`decide`] compares with the timed calls.
pub(crate) fn span_start(len: u32) -> u32 {
    len.saturating_sub(SPAN).max(1)
}

/// One thread's count of its blocking calls on one queue.
#[derive(Debug)]
pub(crate) struct Window {
    /// The address of the queue's [`Turns`](crate::turns::Turns); 0 for none.
    pub(crate) queue: Cell<usize>,
    /// The calls this window counts: [`WINDOW`], or [`PROBE`] after a step back.
    pub(crate) len: Cell<u32>,
    /// The calls counted so far (low 32 bits) and the pushes among them (high 32 bits): one
    /// word, so that a call reads and writes one cell.
    counts: Cell<u64>,
    /// The next call that is an edge: the first, the span's start, or a timed one.
    pub(crate) next_edge: Cell<u32>,
    /// When the window's span began: the clock as the span's first call started.
    pub(crate) started: Cell<Option<Instant>>,
    /// The timed calls' total time so far, in nanoseconds; `u64::MAX` once one waited.
    pub(crate) timed_ns: Cell<u64>,
    /// The last window judged the queue contended: step back at the next call.
    pub(crate) step_due: Cell<bool>,
}

impl Window {
    pub(crate) const fn new() -> Self {
        Window {
            queue: Cell::new(0),
            len: Cell::new(WINDOW),
            counts: Cell::new(0),
            next_edge: Cell::new(1),
            started: Cell::new(None),
            timed_ns: Cell::new(0),
            step_due: Cell::new(false),
        }
    }

    /// Starts counting afresh, on `queue`.
    pub(crate) fn reset(&self, queue: usize) {
        self.queue.set(queue);
        self.len.set(WINDOW);
        self.counts.set(0);
        self.next_edge.set(1);
        self.started.set(None);
        self.timed_ns.set(0);
    }

    /// Counts a call of `op` on `queue`; true if the call is at the window's edges (its
    /// first, the start of its span, or one of the timed last).
    #[inline(always)]
    pub(crate) fn count(&self, queue: usize, op: Op) -> bool {
        if self.queue.get() != queue {
            self.reset(queue);
            self.step_due.set(false);
        }
        let counts = self.counts.get() + 1 + (u64::from(op == Op::Push) << 32);
        self.counts.set(counts);
        counts as u32 == self.next_edge.get()
    }

    /// The calls counted in this window so far.
    pub(crate) fn calls(&self) -> u32 {
        self.counts.get() as u32
    }

    /// The pushes among them.
    pub(crate) fn pushes(&self) -> u32 {
        (self.counts.get() >> 32) as u32
    }

    /// After an edge call (`calls` so far), the next call that is an edge.
    pub(crate) fn pass_edge(&self, calls: u32) {
        let len = self.len.get();
        let (span, timed) = (span_start(len), len.saturating_sub(TIMED) + 1);
        let next = if calls < span {
            span
        } else if calls < timed {
            timed
        } else {
            calls + 1
        };
        self.next_edge.set(next);
    }

    /// Whether the window's calls so far include pushes and pops (a quarter or more of
    /// each), or are too few to tell.
    pub(crate) fn mixed_so_far(&self) -> bool {
        let (calls, pushes) = (self.calls(), self.pushes());
        calls < 8 || mixed(calls, pushes)
    }

    /// Notes a timed call that ran from `start` to `end` (less the cost of reading the
    /// clock); at the window's last call, judges the window (whether it was contended) and
    /// starts the next.
    pub(crate) fn timed(&self, start: Instant, end: Instant, clock_ns: u64) -> Option<bool> {
        let took = u64::try_from(end.duration_since(start).as_nanos()).unwrap_or(u64::MAX);
        let took = took.saturating_sub(clock_ns);
        // A call that waited spoils the window's sum for good: it says nothing of contention.
        let sum = if took >= WAITED_NS {
            u64::MAX
        } else {
            self.timed_ns.get().saturating_add(took)
        };
        self.timed_ns.set(sum);
        let calls = self.calls();
        if calls < self.len.get() {
            return None;
        }
        let span_calls = calls.saturating_sub(span_start(self.len.get())) + 1;
        let per_call_ns = self.started.get().map_or(u64::MAX, |started| {
            let elapsed = u64::try_from(end.duration_since(started).as_nanos());
            elapsed.unwrap_or(u64::MAX) / u64::from(span_calls)
        });
        let typical_ns = match self.timed_ns.get() {
            u64::MAX => u64::MAX,
            sum => sum / u64::from(TIMED.min(calls - 1).max(1)),
        };
        let contended = decide(calls, self.pushes(), per_call_ns, typical_ns);
        self.reset(self.queue.get());
        Some(contended)
    }
}

/// What one reading of the clock costs, in nanoseconds: the least of a few gaps between
/// two readings, measured once per process (from about 20 ns with the TSC to a microsecond
/// with a clock the hypervisor emulates). A timed call's time includes one reading.
pub(crate) fn clock_cost_ns() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COST: AtomicU64 = AtomicU64::new(u64::MAX);
    let known = COST.load(Ordering::Relaxed);
    if known != u64::MAX {
        return known;
    }
    let cost = (0..16)
        .map(|_| {
            let a = Instant::now();
            let b = Instant::now();
            u64::try_from(b.duration_since(a).as_nanos()).unwrap_or(u64::MAX - 1)
        })
        .min()
        .unwrap_or(0);
    COST.store(cost, Ordering::Relaxed);
    cost
}

std::thread_local! {
    pub(crate) static WINDOW_OF_THREAD: Window = const { Window::new() };
}

/// Whether `calls` blocking calls, `pushes` of them pushes, include a quarter or more of
/// each.
fn mixed(calls: u32, pushes: u32) -> bool {
    let pops = calls.saturating_sub(pushes);
    pushes.saturating_mul(4) >= calls && pops.saturating_mul(4) >= calls
}

/// Whether a window of `calls` blocking calls, `pushes` of them pushes, whose span took
/// `per_call_ns` per call and whose timed calls took `timed_ns` on average, says the
/// thread should take turns (see the module docs).
pub(crate) fn decide(calls: u32, pushes: u32, per_call_ns: u64, timed_ns: u64) -> bool {
    if calls == 0 || !mixed(calls, pushes) || !(CONTENDED_NS..WAITED_NS).contains(&timed_ns) {
        return false;
    }
    per_call_ns.saturating_add(2 * ALONE_NS) < timed_ns.saturating_mul(2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn contended_mixed_windows_take_turns() {
        // Two threads each pushing then popping, 200 ns a call, nothing else in between.
        assert!(decide(128, 64, 200, 190));
        // A little work between calls still leaves the calls most of the time.
        assert!(decide(128, 64, 300, 200));
    }

    #[test]
    fn pure_producers_and_consumers_never_step_back() {
        assert!(!decide(128, 128, 200, 200));
        assert!(!decide(128, 0, 200, 200));
        // Fewer than a quarter of the calls are pushes.
        assert!(!decide(128, 31, 200, 200));
        assert!(decide(128, 32, 200, 200));
    }

    #[test]
    fn fast_calls_never_step_back() {
        // Lines that move quickly between cores: calls stay cheap.
        assert!(!decide(128, 64, 20, 20));
        assert!(!decide(128, 64, 99, 99));
        // Not timed at all.
        assert!(!decide(128, 64, 200, u64::MAX));
    }

    #[test]
    fn work_between_calls_keeps_both_threads_running() {
        // 200 ns calls, but 1 µs of work between them: two threads beat one.
        assert!(!decide(128, 64, 700, 200));
        // Exactly where one thread alone stops paying: u + 30 < 2c.
        assert!(!decide(128, 64, 370, 200));
        assert!(decide(128, 64, 369, 200));
    }

    #[test]
    fn degenerate_windows_do_not_panic() {
        assert!(!decide(0, 0, 0, 0));
        assert!(!decide(128, 64, u64::MAX, u64::MAX - 1));
        assert!(!decide(128, 200, 0, 500));
        // Counts at their limits saturate instead of overflowing.
        assert!(decide(u32::MAX, u32::MAX / 2, 0, 500));
    }

    #[test]
    fn calls_that_waited_say_nothing_about_contention() {
        // Every timed call parked for an item: the thread is waiting, not contending.
        assert!(!decide(128, 64, 30_000, 25_000));
        // Just under the limit, slow calls still count as contended.
        assert!(decide(128, 64, 10_000, 19_999));
    }

    /// Counts a window of alternating pushes and pops on `queue`, the timed calls ending
    /// every `gap_ns` and each taking `took_ns`; the window's judgement.
    fn judge_window(w: &Window, queue: usize, gap_ns: u64, took_ns: u64) -> Option<bool> {
        let t0 = Instant::now();
        let at = |ns: u64| t0 + Duration::from_nanos(ns);
        let mut verdict = None;
        for call in 1..=WINDOW {
            let op = if call % 2 == 0 { Op::Push } else { Op::Pop };
            let edge = w.count(queue, op);
            let span = span_start(WINDOW);
            assert_eq!(
                edge,
                call == 1 || call == span || call > WINDOW - TIMED,
                "call {call}"
            );
            if edge {
                w.pass_edge(call);
            }
            if call == span {
                w.started.set(Some(at(gap_ns * u64::from(call - 1))));
            } else if call > WINDOW - TIMED {
                let end = gap_ns * u64::from(call);
                verdict = w.timed(at(end - took_ns - u64::from(call % 3)), at(end), 0);
            }
        }
        verdict
    }

    #[test]
    fn a_slow_mixed_window_is_judged_contended() {
        // The window's clock readings are given, not read.
        WINDOW_OF_THREAD.with(|w| {
            w.reset(0x1000);
            // Two threads trading the queue's lines: 200 ns a call, nothing in between.
            assert_eq!(judge_window(w, 0x1000, 200, 190), Some(true));
            assert_eq!(w.calls(), 0, "the next window did not start");
            assert_eq!(w.timed_ns.get(), 0);
            // The same calls with a microsecond of work between them.
            assert_eq!(judge_window(w, 0x1000, 1_200, 200), Some(false));
            // Calls that move no line.
            assert_eq!(judge_window(w, 0x1000, 20, 15), Some(false));
        });
    }

    #[test]
    fn a_clock_slower_than_the_calls_is_taken_off_their_time() {
        let t0 = Instant::now();
        // A 1 µs clock reading made a 30 ns call look like 1,030 ns.
        let end = t0 + Duration::from_nanos(10_000);
        let call = end - Duration::from_nanos(1_030);
        let (a, b) = (Window::new(), Window::new());
        for copy in [&a, &b] {
            copy.reset(0x2000);
            copy.started.set(Some(t0));
            for i in 0..WINDOW {
                copy.count(0x2000, if i % 2 == 0 { Op::Push } else { Op::Pop });
            }
        }
        assert_eq!(a.timed(call, end, 1_000), Some(false));
        // Counted at face value, the same window would have looked contended.
        assert_eq!(b.timed(call, end, 0), Some(true));
    }

    #[test]
    fn the_clock_cost_is_measured_once() {
        let first = clock_cost_ns();
        assert_ne!(first, u64::MAX);
        assert_eq!(clock_cost_ns(), first);
    }
}
