//! Taking turns on a contended queue: a thread that both pushes and pops one queue, whose
//! calls are slowed by another thread doing the same, steps back for a moment.
//!
//! Two threads that each push to and pop from the same queue in a tight loop share its
//! head, its tail and the slots between: each call of one waits for cache lines the other
//! has just written. Where moving a line between two cores is slow (two vCPUs far apart on
//! their host's caches), a call then costs 100 to 400 ns against about 10 for one thread
//! alone, and the two threads together move items several times slower than one would. A
//! channel behind a lock (kanal's) escapes this by accident: its lock's loser backs off into
//! a sleep, so its threads take turns, each running alone at the single-thread rate while
//! the other sleeps. A lock-free store has no loser; this module makes one on purpose, where
//! the measurements say it pays.
//!
//! **The window.** Each thread counts its blocking calls ([`WaitQueue::push_timeout`] and
//! [`WaitQueue::pop_timeout`]) on one queue at a time, in windows of [`WINDOW`] calls; a
//! call on another queue starts a new window. If the thread has both pushed and popped so
//! far, the clock is read where the window's last [`SPAN`] calls begin, and its last
//! [`TIMED`] calls are timed one by one, less what a reading of the clock costs (measured
//! once per process); a thread that has not reads no clock. At the window's end the thread
//! judges it ([`decide`]): it was contended only if
//! * the thread both pushed and popped (at least a quarter of the calls each): a pure
//!   producer or consumer never steps back, since its partner needs it to make progress
//!   (spsc, ping-pong, a pipeline's stages);
//! * the timed calls took [`CONTENDED_NS`] or more on average, and none of them waited for
//!   an item or for room ([`WAITED_NS`]). Calls of a contended pair vary widely (some 50 ns,
//!   some 400), so the average judges, not the fastest;
//! * the calls are most of the thread's time: with `u` the span's time per call and `c`
//!   the timed calls' average, one thread alone would take about `u - c + ALONE_NS` per call
//!   where two threads take `u / 2` each, so only if `u + 2 × ALONE_NS < 2 × c`. A thread
//!   that works on each item between its calls keeps both threads running.
//!
//! A window judged contended counts only if another thread's window on the same queue ended
//! since this thread's last one ([`Turns::concur`]): a thread alone on a queue never steps
//! back, even where its calls look slow (a clock the hypervisor emulates, say).
//!
//! **The step back.** At its next blocking call on that queue, the thread sleeps for
//! [`STEP`] (with Linux's default timer slack and a virtual machine's wake-up, about 100 µs
//! in all), while the other runs alone. Only one thread steps back from a queue at a time
//! ([`Turns::step_back`]): the other, whose window may have judged the same contention,
//! keeps running, so the two never sleep together. Back from a step, the thread's next
//! window is [`PROBE`] calls long, so that it soon steps back again if the other still runs.
//! A call whose timeout is under [`MIN_TIMEOUT`] never sleeps, and a call that sleeps
//! waits only for what is left of its timeout afterwards, so no deadline is overshot.
//! Non-blocking calls (`push`, `try_pop`) and asynchronous ones are never counted and never
//! sleep: they promise not to block a thread or an executor. A queue built with
//! `taking_turns(false)` counts nothing.
//!
//! The price is latency, about 0.1 ms at one call of a thread that steps back, and fairness
//! between the two threads (the one that stays does most of the work, as with kanal's lock).
//! On the 2-vCPU Intel Xeon of the crate's README, it took two threads that each push then
//! pop a bounded queue of 1,024 from 157-203 to 29-32 ns per item (kanal: 23). Where lines
//! move quickly between the cores, calls stay under [`CONTENDED_NS`] and nothing changes.
//! Under loom there is no time, so no window: the models check the step back itself.
//!
//! [`WaitQueue::push_timeout`]: crate::WaitQueue::push_timeout
//! [`WaitQueue::pop_timeout`]: crate::WaitQueue::pop_timeout
//! [`WINDOW`]: crate::window::WINDOW
//! [`TIMED`]: crate::window::TIMED
//! [`SPAN`]: crate::window::SPAN
//! [`PROBE`]: crate::window::PROBE
//! [`CONTENDED_NS`]: crate::window::CONTENDED_NS
//! [`WAITED_NS`]: crate::window::WAITED_NS
//! [`decide`]: crate::window::decide

use crate::op::Op;
use crate::sync::{AtomicBool, Ordering};
#[cfg(not(loom))]
use crate::window::{clock_cost_ns, span_start, Window, PROBE, TIMED, WINDOW_OF_THREAD};
#[cfg(not(loom))]
use std::time::{Duration, Instant};

/// How long a thread steps back (asked of the OS; it sleeps longer).
#[cfg(not(loom))]
pub(crate) const STEP: Duration = Duration::from_micros(20);
/// A call that may wait less than this never steps back.
#[cfg(not(loom))]
pub(crate) const MIN_TIMEOUT: Duration = Duration::from_millis(1);

/// What [`Turns::enter`] hands to [`Turns::leave`]: when a timed call started.
#[cfg(not(loom))]
pub(crate) type Timing = Option<Instant>;
/// What [`Turns::enter`] hands to [`Turns::leave`]: nothing, under loom (a unit struct
/// rather than `()`, so that callers binding it need no lint exception).
#[cfg(loom)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing;

/// A queue's side of taking turns: whether a thread is stepping back from it right now.
#[derive(Debug)]
pub(crate) struct Turns {
    /// Whether the queue's threads take turns at all (`WaitQueue::taking_turns`).
    enabled: bool,
    stepping: AtomicBool,
    /// The thread (its window's address) whose window on this queue ended last; 0 for none.
    #[cfg(not(loom))]
    last_judge: std::sync::atomic::AtomicUsize,
}

impl Turns {
    pub(crate) fn new() -> Self {
        Turns {
            enabled: true,
            stepping: AtomicBool::new(false),
            #[cfg(not(loom))]
            last_judge: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Turns taking turns on or off for this queue.
    pub(crate) fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
    }

    /// Whether this queue's threads take turns.
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// Runs `pause` unless another thread is stepping back from this queue right now (then
    /// returns `false` at once): at most one thread of a queue steps back at a time.
    pub(crate) fn step_back(&self, pause: impl FnOnce()) -> bool {
        if self
            .stepping
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        pause();
        self.stepping.store(false, Ordering::Release);
        true
    }

    /// Nothing to count: without time, a model has no windows to judge.
    #[cfg(loom)]
    #[inline]
    pub(crate) fn enter(&self, _op: Op, _timeout: &mut std::time::Duration) -> Timing {
        Timing
    }

    /// Nothing to time under loom.
    #[cfg(loom)]
    #[inline]
    pub(crate) fn leave(&self, _timing: Timing) {}

    /// Before a blocking call (an `op` that may wait up to `timeout`): counts it in the
    /// calling thread's window on this queue, first stepping back if the previous window
    /// judged the queue contended (and then taking the time asleep off `timeout`); the
    /// call's start if it is to be timed. Hand the result to [`leave`](Self::leave) once the
    /// call returns.
    ///
    /// A pair of calls rather than a wrapper taking the call as a closure: wrapped, the
    /// compiler stopped inlining the store's push and pop into the call.
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn enter(&self, op: Op, timeout: &mut Duration) -> Timing {
        if !self.enabled {
            return None;
        }
        let queue = self as *const Self as usize;
        match WINDOW_OF_THREAD.try_with(|window| window.count(queue, op)) {
            Ok(true) => self.edge(timeout),
            // A call inside the window, or the thread is exiting (its window is gone).
            Ok(false) | Err(_) => None,
        }
    }

    /// After a blocking call that [`enter`](Self::enter) counted.
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn leave(&self, timing: Timing) {
        if let Some(start) = timing {
            self.timed(start);
        }
    }

    /// Runs `call` between [`enter`](Self::enter) and [`leave`](Self::leave).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn around<R>(&self, op: Op, timeout: Duration, call: impl FnOnce() -> R) -> R {
        let mut timeout = timeout;
        let timing = self.enter(op, &mut timeout);
        let outcome = call();
        self.leave(timing);
        outcome
    }

    /// Notes a timed call that started at `start`; at the window's last call, judges the
    /// window, and if it was contended asks for a second opinion (see [`Turns::concur`]).
    #[cfg(not(loom))]
    #[cold]
    #[inline(never)]
    fn timed(&self, start: Instant) {
        let end = Instant::now();
        let _ = WINDOW_OF_THREAD.try_with(|window| {
            if let Some(contended) = window.timed(start, end, clock_cost_ns()) {
                let judge = window as *const Window as usize;
                window.step_due.set(self.concur(judge, contended));
            }
        });
    }

    /// Whether thread `judge`, whose window just ended (`contended` or not), should step
    /// back: only if its window was contended and another thread's window on this queue
    /// ended since its own last one. One thread alone never steps back, whatever its calls
    /// cost (a slow clock, or a store slow for other reasons, can make a lone thread's
    /// calls look contended).
    #[cfg(not(loom))]
    fn concur(&self, judge: usize, contended: bool) -> bool {
        let previous = self
            .last_judge
            .swap(judge, std::sync::atomic::Ordering::Relaxed);
        contended && previous != 0 && previous != judge
    }

    /// A call at a window's edges: at its first, steps back if the last window judged the
    /// queue contended; at the start of its span, reads the clock; at a timed call, returns
    /// the time the call starts. A thread that has not both pushed and popped in this window
    /// reads no clock at all, and its window ends unjudged.
    #[cfg(not(loom))]
    #[cold]
    #[inline(never)]
    fn edge(&self, timeout: &mut Duration) -> Option<Instant> {
        let (calls, mut len, step_due, mixed, started) = WINDOW_OF_THREAD
            .try_with(|w| {
                let due = w.step_due.take();
                (
                    w.calls(),
                    w.len.get(),
                    due,
                    w.mixed_so_far(),
                    w.started.get(),
                )
            })
            .ok()?;
        if step_due
            && *timeout >= MIN_TIMEOUT
            && self.step_back(|| {
                let asleep = Instant::now();
                std::thread::sleep(STEP);
                // The call's deadline counts from its start: the step back spends part of it.
                *timeout = timeout.saturating_sub(asleep.elapsed());
            })
        {
            // Back from a step: a short window says soon whether the other thread still
            // holds the queue's lines.
            len = PROBE;
            let _ = WINDOW_OF_THREAD.try_with(|w| w.len.set(PROBE));
        }
        let _ = WINDOW_OF_THREAD.try_with(|w| w.pass_edge(calls));
        let timed_from = if !mixed {
            None
        } else if calls == span_start(len) {
            let now = Instant::now();
            let _ = WINDOW_OF_THREAD.try_with(|w| w.started.set(Some(now)));
            None
        } else if calls > len.saturating_sub(TIMED) && started.is_some() {
            Some(Instant::now())
        } else {
            None
        };
        if timed_from.is_none() && calls >= len {
            // The window's last call, and nothing to judge it by.
            let _ = WINDOW_OF_THREAD.try_with(|w| w.reset(w.queue.get()));
        }
        timed_from
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::window::WINDOW;

    /// Starts the calling thread's window on `turns` with a step back due at its next call,
    /// as after a window judged contended.
    fn make_step_due(turns: &Turns) {
        let queue = turns as *const Turns as usize;
        WINDOW_OF_THREAD.with(|w| {
            w.reset(queue);
            w.step_due.set(true);
        });
    }

    #[test]
    fn one_thread_steps_back_at_a_time() {
        let turns = Turns::new();
        let mut inner = None;
        assert!(turns.step_back(|| inner = Some(turns.step_back(|| ()))));
        assert_eq!(inner, Some(false), "a second thread stepped back meanwhile");
        assert!(
            turns.step_back(|| ()),
            "the first step back was not released"
        );
    }

    #[test]
    fn a_window_that_judged_contention_steps_back_once_then_counts_afresh() {
        let turns = Turns::new();
        make_step_due(&turns);
        // A call that may not wait a millisecond does not step back, and clears the flag.
        let stepped = turns.around(Op::Pop, Duration::from_micros(10), || {
            turns.stepping.load(Ordering::Relaxed)
        });
        assert!(!stepped);
        WINDOW_OF_THREAD.with(|w| {
            assert!(!w.step_due.get());
            assert_eq!(w.calls(), 1);
            assert!(
                w.started.get().is_none(),
                "the span started at the first call"
            );
        });
        // A call on another queue starts a new window.
        let other = Turns::new();
        other.around(Op::Push, Duration::from_secs(1), || ());
        WINDOW_OF_THREAD.with(|w| {
            assert_eq!(w.queue.get(), &other as *const Turns as usize);
            assert_eq!((w.calls(), w.pushes()), (1, 1));
        });
    }

    #[test]
    fn a_due_step_back_sleeps_while_holding_the_queue() {
        let turns = Turns::new();
        make_step_due(&turns);
        // The step back ran before the call and released the queue after it.
        let during = turns.around(Op::Push, Duration::from_secs(1), || {
            turns.stepping.load(Ordering::Relaxed)
        });
        assert!(
            !during,
            "the call ran while the step back still held the queue"
        );
        assert!(turns.step_back(|| ()), "the step back was not released");
        WINDOW_OF_THREAD.with(|w| {
            assert!(!w.step_due.get());
            assert_eq!(w.len.get(), PROBE, "no short window after the step back");
        });
    }

    #[test]
    fn a_step_back_spends_part_of_the_calls_timeout() {
        let turns = Turns::new();
        make_step_due(&turns);
        let mut timeout = Duration::from_secs(1);
        let timing = turns.enter(Op::Pop, &mut timeout);
        turns.leave(timing);
        assert!(
            timeout <= Duration::from_secs(1) - STEP,
            "{timeout:?} left after sleeping at least {STEP:?}"
        );
        // Without a due step back the timeout is left alone.
        let mut timeout = Duration::from_secs(1);
        let timing = turns.enter(Op::Push, &mut timeout);
        turns.leave(timing);
        assert_eq!(timeout, Duration::from_secs(1));
    }

    #[test]
    fn a_due_step_back_is_skipped_while_another_thread_steps_back() {
        let turns = Turns::new();
        make_step_due(&turns);
        turns.stepping.store(true, Ordering::Relaxed); // as another thread's step back does
        turns.around(Op::Pop, Duration::from_secs(1), || ());
        WINDOW_OF_THREAD.with(|w| {
            assert!(!w.step_due.get());
            assert_eq!(w.len.get(), WINDOW, "stepped back beside the other thread");
        });
        assert!(
            turns.stepping.load(Ordering::Relaxed),
            "released another thread's step"
        );
    }

    #[test]
    fn a_full_window_is_judged_and_reset() {
        let turns = Turns::new();
        for i in 0..WINDOW {
            let op = if i % 2 == 0 { Op::Push } else { Op::Pop };
            turns.around(op, Duration::from_secs(1), || ());
        }
        WINDOW_OF_THREAD.with(|w| {
            assert_eq!(w.calls(), 0, "the window was not reset");
            assert_eq!(w.timed_ns.get(), 0);
            // Calls that do nothing are far under the contended time.
            assert!(!w.step_due.get());
        });
    }

    #[test]
    fn a_queue_that_does_not_take_turns_counts_nothing() {
        let mut turns = Turns::new();
        turns.set_enabled(false);
        assert!(!turns.enabled());
        make_step_due(&turns);
        for i in 0..2 * WINDOW {
            let op = if i % 2 == 0 { Op::Push } else { Op::Pop };
            turns.around(op, Duration::from_secs(1), || ());
        }
        WINDOW_OF_THREAD.with(|w| {
            assert_eq!(w.calls(), 0, "a call was counted");
            assert!(w.step_due.get(), "the due step back was taken or cleared");
        });
    }

    #[test]
    fn a_pure_producer_reads_no_clock_and_its_windows_end_unjudged() {
        let turns = Turns::new();
        let queue = &turns as *const Turns as usize;
        WINDOW_OF_THREAD.with(|w| w.reset(0));
        for call in 1..=2 * WINDOW {
            turns.around(Op::Push, Duration::from_secs(1), || ());
            WINDOW_OF_THREAD.with(|w| {
                assert_eq!(w.queue.get(), queue);
                assert!(w.started.get().is_none(), "call {call} started a span");
                assert_eq!(w.timed_ns.get(), 0, "call {call} was timed");
                assert_eq!(
                    w.calls(),
                    call % WINDOW,
                    "call {call}: the window did not end"
                );
            });
        }
        assert_eq!(
            turns.last_judge.load(std::sync::atomic::Ordering::Relaxed),
            0
        );
    }

    #[test]
    fn a_lone_thread_never_steps_back() {
        let turns = Turns::new();
        // Its every window contended: no other thread's window ends between them.
        for _ in 0..4 {
            assert!(!turns.concur(0xA, true));
        }
    }

    #[test]
    fn a_contended_window_steps_back_once_another_thread_was_seen() {
        let turns = Turns::new();
        assert!(!turns.concur(0xA, true), "nobody else had been seen");
        // B's window was not contended (A's calls came before B's window started).
        assert!(!turns.concur(0xB, false));
        // A's next contended window: B has been seen since A's last window.
        assert!(turns.concur(0xA, true));
        // A again, before any window of B's ended.
        assert!(!turns.concur(0xA, true));
        assert!(turns.concur(0xB, true));
    }
}
