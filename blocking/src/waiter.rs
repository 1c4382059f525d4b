//! One waiting consumer: the state machine that decides, exactly once, whether the waiter
//! receives an item or resolves empty.
//!
//! Three parties touch a waiter: its *owner* (the blocked thread or the pending future),
//! the *drainer* (whichever thread currently runs the serialized hand-off pass, see
//! [`crate::handoff`]), and nobody else. Every decision is a compare-and-swap on one
//! state word, so the interleavings are few and all of them are checked by the loom models.
//!
//! ```text
//!            claim (drainer)             fulfil (drainer)
//!  WAITING ─────────────────▶ CLAIMED ───────────────────▶ GOT_ITEM
//!     │   ◀───────────────── │   │
//!     │    release (no item)  │   └── release with EXPIRE/ABANDONED ──▶ GOT_NONE
//!     └── expire/abandon (owner), cancel (drainer: close/evict) ──────▶ GOT_NONE
//! ```
//!
//! While a waiter is CLAIMED its owner cannot resolve it; a deadline or a drop that arrives
//! then only sets a flag (EXPIRE or ABANDONED) and the drainer settles it a moment later.
//! That is what lets the drainer take an item out of the store only once it holds a waiter
//! that is certain to accept it, so an item is never in limbo outside the queue.
//!
//! Two small cells sit next to the state word: the item slot and the async waker. Both are
//! mutexes that the protocol keeps uncontended (under loom, contention is reported as a bug).

use core::task::Waker;

use crate::sync::{lock_uncontended, AtomicUsize, Mutex, Ordering, Thread};

const PHASE: usize = 0b11;
const WAITING: usize = 0;
const CLAIMED: usize = 1;
const GOT_ITEM: usize = 2;
const GOT_NONE: usize = 3;
/// The owner's deadline passed while the waiter was claimed.
const EXPIRE: usize = 1 << 2;
/// The owner is gone (a dropped future) while the waiter was claimed.
const ABANDONED: usize = 1 << 3;
/// The owner is replacing its waker; the drainer must not touch the waker cell.
const REGISTERING: usize = 1 << 4;

fn is_done(state: usize) -> bool {
    state & PHASE >= GOT_ITEM
}

/// How the owner learns that it was woken.
enum Notify {
    Thread(Thread),
    Task(Mutex<Option<Waker>>),
}

/// A waiting consumer.
pub(crate) struct Waiter<I> {
    state: AtomicUsize,
    item: Mutex<Option<I>>,
    notify: Notify,
    /// When the drainer last unparked a thread owner ([`crate::spin::stamp`]; 0: not since
    /// the owner last looked), so that the owner can time its wake-up. Outside the
    /// protocol: relaxed, and not modelled.
    #[cfg(not(loom))]
    woken_at: std::sync::atomic::AtomicU64,
}

/// Result of the owner's attempt to give up at its deadline.
pub(crate) enum Expire {
    /// The waiter resolved empty now; the owner must leave the live-waiter count.
    Expired,
    /// The drainer holds the waiter; it will settle it and wake the owner.
    Deferred,
    /// The waiter was already resolved; read the outcome.
    Done,
}

/// Result of the owner dropping a pending wait.
pub(crate) enum Abandon<I> {
    /// Resolved empty now; the owner must leave the live-waiter count.
    Expired,
    /// An item had already been handed over: the owner must give it back.
    Item(I),
    /// The drainer will settle it (and account for it).
    Deferred,
    /// Already resolved empty.
    Done,
}

/// Result of the drainer releasing a claimed waiter it had no item for.
pub(crate) enum Release {
    /// The waiter waits again; the drainer keeps it as the oldest waiter.
    Waiting,
    /// The owner had expired or abandoned meanwhile: resolved empty (owner woken).
    Resolved,
}

impl<I> Waiter<I> {
    /// A waiter whose owner is a parked thread.
    pub(crate) fn for_thread(thread: Thread) -> Self {
        Waiter {
            state: AtomicUsize::new(WAITING),
            item: Mutex::new(None),
            notify: Notify::Thread(thread),
            #[cfg(not(loom))]
            woken_at: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// A waiter whose owner is a task woken through `waker`.
    pub(crate) fn for_task(waker: &Waker) -> Self {
        Waiter {
            state: AtomicUsize::new(WAITING),
            item: Mutex::new(None),
            notify: Notify::Task(Mutex::new(Some(waker.clone()))),
            #[cfg(not(loom))]
            woken_at: std::sync::atomic::AtomicU64::new(0),
        }
    }

    // ----- owner side -------------------------------------------------------------------

    /// The final outcome if the waiter is resolved: `Some(Some(item))` or `Some(None)`.
    /// Must be called at most once after it returned `Some`.
    pub(crate) fn outcome(&self) -> Option<Option<I>> {
        let state = self.state.load(Ordering::Acquire);
        match state & PHASE {
            GOT_ITEM => Some(lock_uncontended(&self.item).take()),
            GOT_NONE => Some(None),
            _ => None,
        }
    }

    /// The owner's deadline passed.
    pub(crate) fn expire(&self) -> Expire {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let next = match state & PHASE {
                WAITING => GOT_NONE,
                CLAIMED if state & EXPIRE != 0 => return Expire::Deferred,
                CLAIMED => state | EXPIRE,
                _ => return Expire::Done,
            };
            match self
                .state
                .compare_exchange(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) if next == GOT_NONE => return Expire::Expired,
                Ok(_) => return Expire::Deferred,
                Err(now) => state = now,
            }
        }
    }

    /// The owner stops waiting for good (a dropped future).
    pub(crate) fn abandon(&self) -> Abandon<I> {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let next = match state & PHASE {
                WAITING => GOT_NONE,
                CLAIMED => state | ABANDONED,
                GOT_ITEM => {
                    return match lock_uncontended(&self.item).take() {
                        Some(item) => Abandon::Item(item),
                        None => Abandon::Done,
                    }
                }
                _ => return Abandon::Done,
            };
            match self
                .state
                .compare_exchange(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) if next == GOT_NONE => return Abandon::Expired,
                Ok(_) => return Abandon::Deferred,
                Err(now) => state = now,
            }
        }
    }

    /// Makes sure the waiter will wake `waker`. Returns `false` if the waiter is already
    /// resolved (the caller then reads [`Waiter::outcome`] instead of waiting).
    pub(crate) fn register_waker(&self, waker: &Waker) -> bool {
        let Notify::Task(cell) = &self.notify else {
            return !is_done(self.state.load(Ordering::Acquire));
        };
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if is_done(state) {
                return false;
            }
            match self.state.compare_exchange(
                state,
                state | REGISTERING,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        {
            let mut slot = lock_uncontended(cell);
            if !slot.as_ref().is_some_and(|old| old.will_wake(waker)) {
                *slot = Some(waker.clone());
            }
        }
        // If the waiter was resolved while we held REGISTERING, the drainer left the waking
        // to us: report it resolved.
        let before = self.state.fetch_and(!REGISTERING, Ordering::AcqRel);
        !is_done(before)
    }

    // ----- drainer side -----------------------------------------------------------------

    /// Whether the waiter is resolved (its owner gave up, or it was served or cancelled).
    /// Outside the drain pass a waiter is never claimed, so `false` means waiting.
    pub(crate) fn is_resolved(&self) -> bool {
        is_done(self.state.load(Ordering::Acquire))
    }

    /// Reserves a waiting waiter for delivery. `false` if it is resolved (dead).
    pub(crate) fn claim(&self) -> bool {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if state & PHASE != WAITING {
                return false;
            }
            match self.state.compare_exchange(
                state,
                (state & !PHASE) | CLAIMED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }

    /// Hands `item` to a claimed waiter and wakes its owner. Gives the item back if the
    /// owner abandoned the wait meanwhile (the waiter is then resolved empty).
    pub(crate) fn fulfil(&self, item: I) -> Result<(), I> {
        let mut state = self.state.load(Ordering::Acquire);
        if state & ABANDONED != 0 {
            self.state.store(GOT_NONE, Ordering::Release);
            return Err(item);
        }
        *lock_uncontended(&self.item) = Some(item);
        loop {
            if state & ABANDONED != 0 {
                let item = lock_uncontended(&self.item).take();
                self.state.store(GOT_NONE, Ordering::Release);
                // The slot was filled just above and nobody else reads it unless GOT_ITEM.
                return item.map_or(Ok(()), Err);
            }
            let next = GOT_ITEM | (state & REGISTERING);
            match self
                .state
                .compare_exchange(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    if state & REGISTERING == 0 {
                        self.wake();
                    }
                    return Ok(());
                }
                Err(now) => state = now,
            }
        }
    }

    /// Gives back a claimed waiter that no item could be found for. `resolved` runs if the
    /// waiter resolves (before its owner is woken, whose waker may panic).
    pub(crate) fn release(&self, resolved: impl FnOnce()) -> Release {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let settle = state & (EXPIRE | ABANDONED) != 0;
            let next = if settle {
                GOT_NONE | (state & REGISTERING)
            } else {
                (state & !PHASE) | WAITING
            };
            match self
                .state
                .compare_exchange(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) if settle => {
                    resolved();
                    if state & (ABANDONED | REGISTERING) == 0 {
                        self.wake();
                    }
                    return Release::Resolved;
                }
                Ok(_) => return Release::Waiting,
                Err(now) => state = now,
            }
        }
    }

    /// Resolves a waiting (unclaimed) waiter empty: close or eviction. `resolved` runs if it
    /// was not resolved already (before its owner is woken, whose waker may panic).
    pub(crate) fn cancel(&self, resolved: impl FnOnce()) {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if state & PHASE != WAITING {
                return;
            }
            match self.state.compare_exchange(
                state,
                GOT_NONE | (state & REGISTERING),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    resolved();
                    if state & REGISTERING == 0 {
                        self.wake();
                    }
                    return;
                }
                Err(now) => state = now,
            }
        }
    }

    /// How long ago the drainer last unparked the owner, if it did since the last call: once
    /// the owner runs, its wake-up's latency (or less, if it had not parked yet).
    #[cfg(not(loom))]
    pub(crate) fn since_woken(&self) -> Option<std::time::Duration> {
        let at = self.woken_at.swap(0, std::sync::atomic::Ordering::Relaxed);
        (at != 0).then(|| std::time::Duration::from_nanos(crate::spin::stamp().saturating_sub(at)))
    }

    /// One wake-up for the owner: an unpark or a `Waker::wake`.
    fn wake(&self) {
        match &self.notify {
            Notify::Thread(thread) => {
                #[cfg(not(loom))]
                self.woken_at
                    .store(crate::spin::stamp(), std::sync::atomic::Ordering::Relaxed);
                thread.unpark();
            }
            Notify::Task(cell) => {
                let waker = lock_uncontended(cell).take();
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_woken_thread_reads_its_wake_up_once() {
        let waiter: Waiter<u32> = Waiter::for_thread(std::thread::current());
        assert!(waiter.since_woken().is_none(), "not woken yet");
        waiter.wake();
        assert!(waiter.since_woken().is_some());
        assert!(waiter.since_woken().is_none(), "read once");
    }

    #[test]
    fn a_task_is_woken_without_a_stamp() {
        let waiter: Waiter<u32> = Waiter::for_task(Waker::noop());
        waiter.wake();
        assert!(waiter.since_woken().is_none());
    }
}
