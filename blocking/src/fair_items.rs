//! The item store of [`crate::FairWaitQueue`]: a [`FairQueue`] plus the items given back,
//! behind one short critical section.
//!
//! # Finding it empty without the lock
//!
//! A consumer that waits for an item polls the store before it registers, and the drain
//! pass polls it for every waiter; most of those polls find it empty. Taking the mutex for
//! each makes a polling consumer write the lock's cache line while the producer it waits
//! for needs that line to push: in the bench's two-thread cases, with both threads on a
//! core each, `perf` found 30% of the CPU time in `Mutex::lock`'s contended path and half
//! of the rest on the lock's compare-and-swap and its release. Every critical section
//! therefore ends by copying the number of items held into `held`, an atomic that a pop
//! reads first: 0 means "empty" at no cost but a read of a line that only changes when the
//! contents do.
//!
//! It is published the way `handoff` publishes an item (see its module docs): a producer
//! writes `held` (under the lock), then issues a `SeqCst` fence and reads the waiter count; a
//! consumer increments the waiter count, issues a `SeqCst` fence and reads `held`. With
//! fences on both sides, at least one of them sees the other's write, so either the
//! consumer's pass finds the item or the producer sees the waiter. A stale non-zero
//! `held` only costs taking the lock and finding nothing. Since `held` is written only
//! while the lock is held, its writes follow the order of the critical sections, and a
//! read of 0 means that the last critical section it saw left the store empty.

use core::ops::{Deref, DerefMut};
use std::collections::VecDeque;
use std::hash::Hash;

use fairq_core::fair::{FairQueue, Full};

use crate::fair_error::FairPushError;
use crate::handoff::Store;
use crate::room::{has_room_for_batch, RoomWaiters};
use crate::sync::{lock_taking_turns, AtomicUsize, Mutex, MutexGuard, Ordering};

pub(crate) struct FairState<K, T> {
    pub(crate) fair: FairQueue<K, T>,
    /// Items given back (`put_head`, dropped futures): served before the fair schedule.
    pub(crate) returned: VecDeque<(K, T)>,
}

pub(crate) struct FairItems<K, T> {
    state: Mutex<FairState<K, T>>,
    /// The number of items held when the last critical section ended (see the module
    /// docs). Only written with the lock held.
    held: AtomicUsize,
    /// The fair queue's bound, fixed when it was made.
    capacity: Option<usize>,
    /// How long a thread that finds the lock taken steps back (`spin::back_off_ns`).
    back_off_ns: u64,
    /// Producers waiting for room (bounded queues only).
    pub(crate) room: RoomWaiters,
}

impl<K, T> FairItems<K, T> {
    pub(crate) fn new(fair: FairQueue<K, T>) -> Self {
        let held = fair.len();
        let capacity = fair.capacity();
        FairItems {
            state: Mutex::new(FairState {
                fair,
                returned: VecDeque::new(),
            }),
            held: AtomicUsize::new(held),
            capacity,
            back_off_ns: crate::spin::back_off_ns(capacity),
            room: RoomWaiters::new(capacity),
        }
    }

    /// Whether a batch of the bound is free (`room::has_room_for_batch`), which a producer
    /// spinning for room waits for. Read without the lock from `held`, which also counts
    /// given-back items, so it may say no a little early.
    pub(crate) fn has_room_for_batch(&self) -> bool {
        self.capacity
            .is_none_or(|capacity| has_room_for_batch(self.held.load(Ordering::Acquire), capacity))
    }

    /// The critical section: held for one queue operation, never while waking anyone.
    /// Ends by publishing the number of items held (see the module docs), whatever the
    /// section did, so no path that adds an item can forget to.
    pub(crate) fn lock(&self) -> Locked<'_, K, T> {
        Locked {
            held: &self.held,
            guard: lock_taking_turns(&self.state, self.back_off_ns),
        }
    }
}

/// The store's lock, held: dereferences to the state, and copies the number of items into
/// `held` before it unlocks.
pub(crate) struct Locked<'a, K, T> {
    held: &'a AtomicUsize,
    // Dropped after `Drop::drop` has run: the lock is released after the copy.
    guard: MutexGuard<'a, FairState<K, T>>,
}

impl<K, T> Deref for Locked<'_, K, T> {
    type Target = FairState<K, T>;

    fn deref(&self) -> &FairState<K, T> {
        &self.guard
    }
}

impl<K, T> DerefMut for Locked<'_, K, T> {
    fn deref_mut(&mut self) -> &mut FairState<K, T> {
        &mut self.guard
    }
}

impl<K, T> Drop for Locked<'_, K, T> {
    fn drop(&mut self) {
        let held = self.guard.fair.len() + self.guard.returned.len();
        self.held.store(held, Ordering::Release);
    }
}

impl<K: Eq + Hash + Clone, T> FairItems<K, T> {
    /// Pushes under the fair queue's bound (given-back items are held apart and don't
    /// count against it, as in `WaitQueue`).
    #[inline]
    pub(crate) fn push(&self, key: K, item: T) -> Result<(), FairPushError<K, T>> {
        self.lock()
            .fair
            .push(key, item)
            .map_err(|Full { key, item, len }| FairPushError::Full { key, item, len })
    }
}

impl<K: Eq + Hash + Clone, T> Store for FairItems<K, T> {
    type Item = (K, T);

    fn pop(&self) -> Option<(K, T)> {
        // Empty at the end of the last critical section we can see: nothing to take (see
        // the module docs for why a waiting consumer cannot miss an item this way).
        if self.held.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut state = self.lock();
        if let Some(entry) = state.returned.pop_front() {
            return Some(entry);
        }
        let entry = state.fair.pop_with_key()?;
        drop(state);
        let someone_waits = if self.capacity.is_some() {
            self.room.someone_waits()
        } else {
            // An unbounded fair queue is bounded too, by `FairQueue`'s length limit (2^30 - 2
            // items), where producers wait for room as in a bounded one. It only ever gets
            // there by accident, so its pops pay one load of a line that only waiting
            // producers write, and no fence.
            self.room.someone_waits_after_unlock()
        };
        if someone_waits {
            return self
                .room
                .notify_after_pop(entry, |entry| self.put_back(entry));
        }
        Some(entry)
    }

    fn waker_panicked(&self) -> bool {
        self.room.waker_panicked()
    }

    fn put_back(&self, entry: (K, T)) {
        self.lock().returned.push_back(entry);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_fair_queue_of_one_has_room_for_a_batch_only_when_empty() {
        let items = FairItems::new(FairQueue::with_capacity(1));
        assert!(items.has_room_for_batch());
        items.push("a", 1).map_err(|_| "full").unwrap();
        assert!(!items.has_room_for_batch());
        assert_eq!(items.pop(), Some(("a", 1)));
        assert!(items.has_room_for_batch());
    }

    /// An unbounded fair queue still refuses a push at `FairQueue`'s length limit (2^30 - 2
    /// items), and a waiting push then waits for room. Filling it takes half a minute (see
    /// the ignored test in `tests/fair_wait_queue.rs`), so this checks the pop's side: a
    /// producer registered for room is woken by a pop, as in a bounded queue.
    #[test]
    fn a_pop_from_an_unbounded_fair_queue_wakes_a_waiting_producer() {
        use crate::room::Wake;
        use std::sync::atomic::AtomicUsize;
        use std::sync::Arc;

        struct Counting(AtomicUsize);
        impl std::task::Wake for Counting {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }

        let items = FairItems::new(FairQueue::unbounded());
        items.push("a", 1).map_err(|_| "full").unwrap();
        let woken = Arc::new(Counting(AtomicUsize::new(0)));
        let id = items
            .room
            .register(Wake::Task(std::task::Waker::from(Arc::clone(&woken))));
        assert_eq!(items.pop(), Some(("a", 1)));
        assert_eq!(woken.0.load(Ordering::SeqCst), 1, "the producer was woken");
        assert!(
            !items.room.still_waiting(id, None),
            "and taken off the list"
        );
        assert_eq!(items.room.count(), 0);
    }

    #[test]
    fn a_larger_fair_queue_waits_for_a_sixteenth_of_its_bound() {
        let items = FairItems::new(FairQueue::with_capacity(32));
        for i in 0..30 {
            items.push(i % 3, i).map_err(|_| "full").unwrap();
        }
        assert!(items.has_room_for_batch(), "2 of 32 free");
        items.push(0, 30).map_err(|_| "full").unwrap();
        assert!(!items.has_room_for_batch(), "1 of 32 free");
        assert!(FairItems::<u8, u8>::new(FairQueue::unbounded()).has_room_for_batch());
    }
}
