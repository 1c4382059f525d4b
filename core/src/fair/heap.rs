//! The heap-backed fair queue.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;
use core::hash::{BuildHasher, Hash};

use hashbrown::{DefaultHashBuilder, HashMap};

use super::engine::{Engine, KeyState, Keys, Round, Rounds, Slot, Slots};
use super::{Full, Iter};

type HeapEngine<K, T, H> = Engine<K, T, Vec<Slot<K, T>>, VecDeque<Round>, HashMap<K, KeyState, H>>;

/// A queue that delivers fairly by key with the snapshot-of-heads rule (see the
/// [module docs](crate::fair)).
///
/// The bound counts every queued item, in the pending snapshot and in the per-key FIFOs. A push
/// beyond it fails with [`Full`] and changes nothing.
///
/// ```
/// use fairq_core::fair::FairQueue;
///
/// let mut q = FairQueue::new();
/// for i in 0..3 {
///     q.push("heavy", i).unwrap();
/// }
/// q.push("light", 100).unwrap();
/// assert_eq!(q.pop_with_key(), Some(("heavy", 0)));
/// assert_eq!(q.pop_with_key(), Some(("light", 100))); // not stuck behind "heavy"
/// assert_eq!(q.len(), 2);
/// ```
pub struct FairQueue<K, T, H = DefaultHashBuilder> {
    engine: HeapEngine<K, T, H>,
}

impl<K, T> FairQueue<K, T> {
    /// The bound of [`FairQueue::new`]: 128 items.
    pub const DEFAULT_CAPACITY: usize = 128;

    /// An empty queue bounded at [`FairQueue::DEFAULT_CAPACITY`] items.
    ///
    /// ```
    /// let q: fairq_core::fair::FairQueue<&str, u32> = fairq_core::fair::FairQueue::new();
    /// assert_eq!(q.capacity(), Some(128));
    /// ```
    pub fn new() -> Self {
        Self::with_capacity(Self::DEFAULT_CAPACITY)
    }

    /// An empty queue bounded at `capacity` items.
    ///
    /// ```
    /// let mut q = fairq_core::fair::FairQueue::with_capacity(2);
    /// q.push(1, 'a').unwrap();
    /// q.push(2, 'b').unwrap();
    /// assert!(q.push(3, 'c').is_err());
    /// ```
    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_hasher(Some(capacity), DefaultHashBuilder::default())
    }

    /// An empty queue with no bound. Memory grows with the backlog: use with care.
    ///
    /// ```
    /// let q: fairq_core::fair::FairQueue<u8, u8> = fairq_core::fair::FairQueue::unbounded();
    /// assert_eq!(q.capacity(), None);
    /// ```
    pub fn unbounded() -> Self {
        Self::with_hasher(None, DefaultHashBuilder::default())
    }
}

impl<K, T> Default for FairQueue<K, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K, T, H> FairQueue<K, T, H> {
    /// An empty queue with the given bound (`None`: unbounded) and key hasher.
    ///
    /// ```
    /// use fairq_core::fair::FairQueue;
    /// use std::collections::hash_map::RandomState;
    ///
    /// let mut q = FairQueue::with_hasher(Some(10), RandomState::new());
    /// q.push("k", 1).unwrap();
    /// assert_eq!(q.pop(), Some(1));
    /// ```
    pub fn with_hasher(capacity: Option<usize>, hasher: H) -> Self {
        FairQueue {
            engine: Engine::from_parts(
                Vec::new(),
                VecDeque::new(),
                HashMap::with_hasher(hasher),
                capacity,
            ),
        }
    }

    /// Number of queued items (pending snapshot and backlog).
    ///
    /// ```
    /// let mut q = fairq_core::fair::FairQueue::new();
    /// q.push("a", ()).unwrap();
    /// assert_eq!(q.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.engine.len()
    }

    /// True when nothing is queued.
    ///
    /// ```
    /// let q: fairq_core::fair::FairQueue<u8, u8> = fairq_core::fair::FairQueue::new();
    /// assert!(q.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.engine.len() == 0
    }

    /// The bound on queued items, or `None` when unbounded.
    ///
    /// ```
    /// assert_eq!(fairq_core::fair::FairQueue::<u8, u8>::with_capacity(7).capacity(), Some(7));
    /// ```
    pub fn capacity(&self) -> Option<usize> {
        self.engine.capacity()
    }

    /// True when a push would be refused for lack of room.
    ///
    /// ```
    /// let mut q = fairq_core::fair::FairQueue::with_capacity(1);
    /// q.push(0, 0).unwrap();
    /// assert!(q.is_full());
    /// ```
    pub fn is_full(&self) -> bool {
        self.engine.is_full()
    }
}

impl<K, T, H> FairQueue<K, T, H>
where
    K: Eq + Hash + Clone,
    H: BuildHasher,
{
    /// Queues `item` at the back of `key`'s FIFO.
    ///
    /// Fails when the queue is at its bound, handing back the key, the item and the current
    /// length; a failed push changes nothing.
    ///
    /// ```
    /// let mut q = fairq_core::fair::FairQueue::with_capacity(1);
    /// assert!(q.push("a", 1).is_ok());
    /// let err = q.push("a", 2).unwrap_err();
    /// assert_eq!(err.item, 2);
    /// ```
    pub fn push(&mut self, key: K, item: T) -> Result<(), Full<K, T>> {
        self.engine.push(key, item)
    }

    /// Takes the next item by the snapshot rule, or `None` when empty.
    ///
    /// ```
    /// let mut q = fairq_core::fair::FairQueue::new();
    /// q.push("a", 1).unwrap();
    /// assert_eq!(q.pop(), Some(1));
    /// assert_eq!(q.pop(), None);
    /// ```
    pub fn pop(&mut self) -> Option<T> {
        self.engine.pop().map(|(_, item)| item)
    }

    /// Like [`pop`](Self::pop), also returning the item's key.
    ///
    /// ```
    /// let mut q = fairq_core::fair::FairQueue::new();
    /// q.push("a", 1).unwrap();
    /// assert_eq!(q.pop_with_key(), Some(("a", 1)));
    /// ```
    pub fn pop_with_key(&mut self) -> Option<(K, T)> {
        self.engine.pop()
    }

    /// The pending snapshot, in delivery order. Empty until a pop takes a snapshot, and again
    /// once the snapshot has been delivered.
    ///
    /// ```
    /// let mut q = fairq_core::fair::FairQueue::new();
    /// q.push("a", 1).unwrap();
    /// q.push("b", 2).unwrap();
    /// assert_eq!(q.snapshot().count(), 0);
    /// q.pop();
    /// assert_eq!(q.snapshot().collect::<Vec<_>>(), [(&"b", &2)]);
    /// ```
    pub fn snapshot(&self) -> Iter<'_, K, T> {
        Iter(self.engine.snapshot_iter())
    }

    /// Each key's queued items outside the pending snapshot, keys ordered by their oldest
    /// item. For monitoring; O(n).
    ///
    /// ```
    /// let mut q = fairq_core::fair::FairQueue::new();
    /// q.push("a", 1).unwrap();
    /// q.push("b", 2).unwrap();
    /// q.push("a", 3).unwrap();
    /// assert_eq!(q.backlog(), vec![(&"a", vec![&1, &3]), (&"b", vec![&2])]);
    /// ```
    pub fn backlog(&self) -> Vec<(&K, Vec<&T>)> {
        let mut out: Vec<(&K, Vec<&T>)> = Vec::new();
        let mut index: HashMap<&K, usize> = HashMap::new();
        for (key, item) in self.engine.backlog_iter() {
            let slot = *index.entry(key).or_insert_with(|| {
                out.push((key, Vec::new()));
                out.len() - 1
            });
            out[slot].1.push(item);
        }
        out
    }

    /// Every queued item in delivery order (pending snapshot first).
    ///
    /// ```
    /// let mut q = fairq_core::fair::FairQueue::new();
    /// q.push(1, 'x').unwrap();
    /// q.push(1, 'y').unwrap();
    /// q.push(2, 'z').unwrap();
    /// let order: String = q.iter().map(|(_, c)| *c).collect();
    /// assert_eq!(order, "xzy");
    /// ```
    pub fn iter(&self) -> Iter<'_, K, T> {
        Iter(self.engine.iter())
    }

    /// Gives `key` `weight` places per round while it is backlogged (0 counts as 1).
    ///
    /// The weight applies to items pushed from now on; items already queued keep their
    /// places. Set weights when a key is registered, before its traffic arrives.
    ///
    /// ```
    /// let mut q = fairq_core::fair::FairQueue::new();
    /// q.set_weight(&"gold", 2);
    /// for i in 0..4 {
    ///     q.push("gold", i).unwrap();
    ///     q.push("free", 10 + i).unwrap();
    /// }
    /// let keys: Vec<_> = std::iter::from_fn(|| q.pop_with_key()).map(|(k, _)| k).collect();
    /// assert_eq!(keys, ["gold", "free", "gold", "free", "gold", "gold", "free", "free"]);
    /// ```
    pub fn set_weight(&mut self, key: &K, weight: u32) {
        // A heap-backed key table always has room.
        let stored = self.engine.set_weight(key, weight);
        debug_assert!(stored);
    }

    /// The weight of `key` (1 unless set).
    ///
    /// ```
    /// let mut q: fairq_core::fair::FairQueue<&str, ()> = fairq_core::fair::FairQueue::new();
    /// q.set_weight(&"k", 3);
    /// assert_eq!(q.weight(&"k"), 3);
    /// assert_eq!(q.weight(&"other"), 1);
    /// ```
    pub fn weight(&self, key: &K) -> u32 {
        self.engine.weight(key)
    }

    /// Removes and returns every undelivered item of `key` (pending snapshot included), oldest
    /// first. The key's weight is kept. O(n).
    ///
    /// ```
    /// let mut q = fairq_core::fair::FairQueue::new();
    /// q.push("spam", 1).unwrap();
    /// q.push("ok", 2).unwrap();
    /// q.push("spam", 3).unwrap();
    /// assert_eq!(q.remove_key(&"spam"), vec![1, 3]);
    /// assert_eq!(q.pop(), Some(2));
    /// ```
    pub fn remove_key(&mut self, key: &K) -> Vec<T> {
        let mut out = Vec::new();
        self.engine.remove_key_with(key, |item| out.push(item));
        out
    }
}

impl<K, T, H> fmt::Debug for FairQueue<K, T, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairQueue")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

impl<K, T> Slots<K, T> for Vec<Slot<K, T>> {
    fn slots(&self) -> &[Slot<K, T>] {
        self
    }

    fn slots_mut(&mut self) -> &mut [Slot<K, T>] {
        self
    }

    fn push_slot(&mut self, slot: Slot<K, T>) -> Result<(), Slot<K, T>> {
        self.push(slot);
        Ok(())
    }
}

impl Rounds for VecDeque<Round> {
    fn len(&self) -> usize {
        VecDeque::len(self)
    }

    fn get(&self, index: usize) -> Round {
        self[index]
    }

    fn get_mut(&mut self, index: usize) -> &mut Round {
        &mut self[index]
    }

    fn push_back_empty(&mut self) -> bool {
        self.push_back(Round::EMPTY);
        true
    }

    fn pop_front(&mut self) {
        VecDeque::pop_front(self);
    }

    fn pop_back(&mut self) {
        VecDeque::pop_back(self);
    }
}

impl<K: Eq + Hash, H: BuildHasher> Keys<K> for HashMap<K, KeyState, H> {
    fn get(&self, key: &K) -> Option<&KeyState> {
        HashMap::get(self, key)
    }

    fn get_mut(&mut self, key: &K) -> Option<&mut KeyState> {
        HashMap::get_mut(self, key)
    }

    fn insert(&mut self, key: K, state: KeyState) -> bool {
        HashMap::insert(self, key, state);
        true
    }

    fn remove(&mut self, key: &K) {
        HashMap::remove(self, key);
    }

    fn retain(&mut self, mut keep: impl FnMut(&KeyState) -> bool) {
        HashMap::retain(self, |_, state| keep(state));
    }

    fn len(&self) -> usize {
        HashMap::len(self)
    }

    fn is_full(&self) -> bool {
        false
    }
}
