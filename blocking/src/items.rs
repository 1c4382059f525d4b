//! The item store of [`crate::WaitQueue`]: items given back first, then normal items.
//!
//! # How the bound stays exact
//!
//! Normal items of a bounded queue live in a fixed-capacity lock-free ring
//! (`crossbeam_queue::ArrayQueue`). The ring itself refuses a push exactly when it holds
//! `capacity` items (each slot carries a stamp that a push claims with a compare-and-swap,
//! so two pushes can never both take the last slot), and `DropOldest` uses its
//! `force_push`, which atomically replaces the oldest item when full. The bound is thus
//! enforced by one linearizable structure and no interleaving can exceed it; there is no
//! separate counter that could drift from the contents.
//!
//! Items given back with `put_head` live in a separate unbounded queue that is served
//! first. They are never refused (that would lose them) and do not take room in the
//! ring.

use crossbeam_utils::CachePadded;

use crate::handoff::Store;
use crate::room::{has_room_for_batch, RoomWaiters};
use crate::sync::{ArrayQueue, AtomicU64, AtomicUsize, Ordering, SegQueue};

/// What a bounded [`WaitQueue`](crate::WaitQueue) does with a push when it is full.
///
/// ```
/// use fairq_blocking::{FullPolicy, WaitQueue};
///
/// let q = WaitQueue::bounded(1, FullPolicy::DropOldest);
/// q.push("old").unwrap();
/// q.push("new").unwrap();
/// assert_eq!(q.dropped(), 1);
/// assert_eq!(q.try_pop(), Some("new"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FullPolicy {
    /// The push fails and hands the item back.
    Refuse,
    /// The oldest normal item (not one given back with `put_head`) is dropped and counted
    /// in [`WaitQueue::dropped`](crate::WaitQueue::dropped).
    DropOldest,
}

enum Main<T> {
    Unbounded(SegQueue<T>),
    Ring(ArrayQueue<T>, FullPolicy),
    /// Capacity 0: nothing is ever held.
    Nothing(FullPolicy),
}

pub(crate) struct Items<T> {
    returned: SegQueue<T>,
    /// Upper bound on `returned.len()`: lets `pop` skip the returned queue cheaply.
    returned_hint: CachePadded<AtomicUsize>,
    main: Main<T>,
    capacity: Option<usize>,
    dropped: AtomicU64,
    /// Producers waiting for room (bounded `Refuse` queues only).
    pub(crate) room: RoomWaiters,
}

impl<T> Items<T> {
    pub(crate) fn new(bound: Option<(usize, FullPolicy)>) -> Self {
        let main = match bound {
            None => Main::Unbounded(SegQueue::new()),
            Some((0, policy)) => Main::Nothing(policy),
            Some((capacity, policy)) => Main::Ring(ArrayQueue::new(capacity), policy),
        };
        Items {
            returned: SegQueue::new(),
            returned_hint: CachePadded::new(AtomicUsize::new(0)),
            main,
            capacity: bound.map(|(capacity, _)| capacity),
            dropped: AtomicU64::new(0),
            room: RoomWaiters::new(bound.map(|(capacity, _)| capacity)),
        }
    }

    pub(crate) fn capacity(&self) -> Option<usize> {
        self.capacity
    }

    pub(crate) fn policy(&self) -> Option<FullPolicy> {
        match &self.main {
            Main::Unbounded(_) => None,
            Main::Ring(_, policy) | Main::Nothing(policy) => Some(*policy),
        }
    }

    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Whether the ring has a batch of free slots (`room::has_room_for_batch`), which a
    /// producer spinning for room waits for.
    pub(crate) fn has_room_for_batch(&self) -> bool {
        match (&self.main, self.capacity) {
            (Main::Ring(ring, _), Some(capacity)) => has_room_for_batch(ring.len(), capacity),
            _ => true,
        }
    }

    pub(crate) fn len(&self) -> usize {
        let normal = match &self.main {
            Main::Unbounded(queue) => queue.len(),
            Main::Ring(ring, _) => ring.len(),
            Main::Nothing(_) => 0,
        };
        self.returned.len() + normal
    }

    /// Enqueues a normal item, applying the bound. `Err` gives it back (full, `Refuse`).
    ///
    /// Every push that adds an item takes effect through a `SeqCst` write of the queue's
    /// tail index (`SegQueue::push` and `ArrayQueue::push`: a `SeqCst` compare-and-swap;
    /// `force_push` on a full ring: a `SeqCst` store), which a pop reads after a `SeqCst`
    /// fence before it reports "empty". [`WaitQueue`](crate::WaitQueue) relies on this to
    /// publish items without a fence of its own (see `handoff`'s module docs).
    pub(crate) fn push(&self, item: T) -> Result<(), T> {
        match &self.main {
            Main::Unbounded(queue) => queue.push(item),
            Main::Ring(ring, FullPolicy::Refuse) => ring.push(item)?,
            Main::Ring(ring, FullPolicy::DropOldest) => {
                if let Some(oldest) = ring.force_push(item) {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    drop(oldest);
                }
            }
            Main::Nothing(FullPolicy::Refuse) => return Err(item),
            Main::Nothing(FullPolicy::DropOldest) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                drop(item);
            }
        }
        Ok(())
    }
}

impl<T> Store for Items<T> {
    type Item = T;

    fn pop(&self) -> Option<T> {
        if self.returned_hint.load(Ordering::Acquire) != 0 {
            if let Some(item) = self.returned.pop() {
                self.returned_hint.fetch_sub(1, Ordering::AcqRel);
                return Some(item);
            }
        }
        match &self.main {
            Main::Unbounded(queue) => queue.pop(),
            Main::Ring(ring, FullPolicy::Refuse) => {
                let item = ring.pop()?;
                if self.room.someone_waits_seqcst() {
                    return self.room.notify_after_pop(item, |item| self.put_back(item));
                }
                Some(item)
            }
            Main::Ring(ring, FullPolicy::DropOldest) => ring.pop(),
            Main::Nothing(_) => None,
        }
    }

    fn waker_panicked(&self) -> bool {
        self.room.waker_panicked()
    }

    fn put_back(&self, item: T) {
        // Counted before it is visible, so the hint never underflows.
        self.returned_hint.fetch_add(1, Ordering::AcqRel);
        self.returned.push(item);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_queue_of_one_has_room_for_a_batch_only_when_empty() {
        let items = Items::new(Some((1, FullPolicy::Refuse)));
        assert!(items.has_room_for_batch());
        items.push(1).unwrap();
        assert!(!items.has_room_for_batch());
    }

    #[test]
    fn a_larger_queue_waits_for_a_sixteenth_of_its_slots() {
        let items = Items::new(Some((32, FullPolicy::Refuse)));
        for i in 0..30 {
            items.push(i).unwrap();
        }
        assert!(items.has_room_for_batch(), "2 of 32 free");
        items.push(30).unwrap();
        assert!(!items.has_room_for_batch(), "1 of 32 free");
        assert!(Items::<u8>::new(None).has_room_for_batch(), "unbounded");
    }
}
