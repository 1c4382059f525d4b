//! The public fair queue, written once over its storage.

use core::fmt;

use super::engine::Engine;
use super::storage::Storage;
use super::{Full, Iter};

/// A queue that delivers fairly by key with the snapshot-of-heads rule (see the
/// [module docs](crate::fair)), over the storage `S`.
///
/// Use it through its aliases: [`FairQueue`](crate::fair::FairQueue) (growable storage,
/// feature `alloc`) and [`fixed::FairQueue`](crate::fair::fixed::FairQueue) (`heapless`
/// storage, no allocator). Both have every method below; constructors and the few methods
/// whose result type depends on the storage ([`FairQueue::backlog`](crate::fair::FairQueue::backlog),
/// `remove_key`, `set_weight`) are documented on each alias.
///
/// The bound counts every queued item, in the pending snapshot and in the per-key FIFOs. A
/// push beyond it fails with [`Full`] and changes nothing. Whatever the bound, and for an
/// unbounded queue, no queue holds more than 2^30 - 2 (1,073,741,822) items: the key table
/// keeps each key's round in 31 bits (so that an entry takes 4 bytes); a push beyond that
/// fails with [`Full`] as well.
///
/// ```
/// use fairq_core::fair::fixed;
///
/// // The same calls work on the heap-backed `fairq_core::fair::FairQueue`.
/// let mut q: fixed::FairQueue<&str, u32, 8, 4> = fixed::FairQueue::new();
/// for i in 0..3 {
///     q.push("heavy", i).unwrap();
/// }
/// q.push("light", 100).unwrap();
/// assert_eq!(q.pop_with_key(), Some(("heavy", 0)));
/// assert_eq!(q.pop_with_key(), Some(("light", 100))); // not stuck behind "heavy"
/// assert_eq!(q.len(), 2);
/// ```
pub struct FairQueueBase<K, T, S> {
    pub(crate) engine: Engine<K, T, S>,
}

impl<K, T, S> FairQueueBase<K, T, S> {
    pub(crate) const fn from_storage(storage: S, capacity: Option<usize>) -> Self {
        FairQueueBase {
            engine: Engine::new(storage, capacity),
        }
    }

    /// Number of queued items (pending snapshot and backlog).
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<&str, (), 4, 4> = fairq_core::fair::fixed::FairQueue::new();
    /// q.push("a", ()).unwrap();
    /// assert_eq!(q.len(), 1);
    /// ```
    #[inline]
    pub fn len(&self) -> usize {
        self.engine.len()
    }

    /// True when nothing is queued.
    ///
    /// ```
    /// let q: fairq_core::fair::fixed::FairQueue<u8, u8, 4, 4> = fairq_core::fair::fixed::FairQueue::new();
    /// assert!(q.is_empty());
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.engine.is_empty()
    }

    /// The bound on queued items, or `None` when unbounded.
    ///
    /// ```
    /// let q: fairq_core::fair::fixed::FairQueue<u8, u8, 7, 4> = fairq_core::fair::fixed::FairQueue::new();
    /// assert_eq!(q.capacity(), Some(7));
    /// ```
    pub fn capacity(&self) -> Option<usize> {
        self.engine.capacity()
    }

    /// True when a push would be refused for lack of room.
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<u8, u8, 1, 4> = fairq_core::fair::fixed::FairQueue::new();
    /// q.push(0, 0).unwrap();
    /// assert!(q.is_full());
    /// ```
    #[inline]
    pub fn is_full(&self) -> bool {
        self.engine.is_full()
    }
}

impl<K, T, S> FairQueueBase<K, T, S>
where
    K: Eq + Clone,
    S: Storage<K, T>,
{
    /// Queues `item` at the back of `key`'s FIFO.
    ///
    /// Fails when the queue is at its bound (or, for the fixed queue, when a new key finds
    /// the key table full), handing back the key, the item and the current length; a failed
    /// push changes nothing.
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<&str, u8, 1, 4> = fairq_core::fair::fixed::FairQueue::new();
    /// assert!(q.push("a", 1).is_ok());
    /// let err = q.push("a", 2).unwrap_err();
    /// assert_eq!(err.item, 2);
    /// ```
    #[inline]
    pub fn push(&mut self, key: K, item: T) -> Result<(), Full<K, T>> {
        self.engine.push(key, item)
    }

    /// Takes the next item by the snapshot rule, or `None` when empty.
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<_, _, 8, 4> = fairq_core::fair::fixed::FairQueue::new();
    /// q.push("a", 1).unwrap();
    /// assert_eq!(q.pop(), Some(1));
    /// assert_eq!(q.pop(), None);
    /// ```
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        self.engine.pop().map(|(_, item)| item)
    }

    /// Like [`pop`](Self::pop), also returning the item's key.
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<_, _, 8, 4> = fairq_core::fair::fixed::FairQueue::new();
    /// q.push("a", 1).unwrap();
    /// assert_eq!(q.pop_with_key(), Some(("a", 1)));
    /// ```
    #[inline]
    pub fn pop_with_key(&mut self) -> Option<(K, T)> {
        self.engine.pop()
    }

    /// The pending snapshot, in delivery order. Empty until a pop takes a snapshot, and again
    /// once the snapshot has been delivered.
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<_, _, 8, 4> = fairq_core::fair::fixed::FairQueue::new();
    /// q.push("a", 1).unwrap();
    /// q.push("b", 2).unwrap();
    /// assert_eq!(q.snapshot().count(), 0);
    /// q.pop();
    /// assert_eq!(q.snapshot().collect::<Vec<_>>(), [(&"b", &2)]);
    /// ```
    pub fn snapshot(&self) -> Iter<'_, K, T> {
        Iter(self.engine.snapshot_iter())
    }

    /// Every queued item in delivery order (pending snapshot first). O(n) to walk.
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<_, _, 8, 4> = fairq_core::fair::fixed::FairQueue::new();
    /// q.push(1, 'x').unwrap();
    /// q.push(1, 'y').unwrap();
    /// q.push(2, 'z').unwrap();
    /// let order: String = q.iter().map(|(_, c)| *c).collect();
    /// assert_eq!(order, "xzy");
    /// ```
    pub fn iter(&self) -> Iter<'_, K, T> {
        Iter(self.engine.iter())
    }

    /// The weight of `key` (1 unless set).
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<&str, (), 4, 4> = fairq_core::fair::fixed::FairQueue::new();
    /// q.set_weight(&"k", 3).unwrap();
    /// assert_eq!(q.weight(&"k"), 3);
    /// assert_eq!(q.weight(&"other"), 1);
    /// ```
    pub fn weight(&self, key: &K) -> u32 {
        self.engine.weight(key)
    }

    /// Removes every undelivered item of `key` (pending snapshot included), oldest first,
    /// handing each to `sink`; returns how many were removed. The key's weight is kept. O(n).
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<_, _, 8, 4> = fairq_core::fair::fixed::FairQueue::new();
    /// q.push(1, 1).unwrap();
    /// q.push(2, 2).unwrap();
    /// q.push(1, 3).unwrap();
    /// let mut gone = Vec::new();
    /// assert_eq!(q.remove_key_with(&1, |item| gone.push(item)), 2);
    /// assert_eq!(gone, [1, 3]);
    /// ```
    pub fn remove_key_with(&mut self, key: &K, sink: impl FnMut(T)) -> usize {
        self.engine.remove_key_with(key, sink)
    }
}

impl<K, T, S> fmt::Debug for FairQueueBase<K, T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairQueue")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}
