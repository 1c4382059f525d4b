//! The fair queue with fixed capacities and no allocator.
//!
//! [`FairQueue<K, T, N, KEYS>`](FairQueue) holds at most `N` items and remembers at most `KEYS`
//! keys at a time (`KEYS` must be a power of two, as `heapless` index maps require). Storage is
//! inline: the queue never allocates, and its size is known at compile time. The schedule is
//! identical to the heap-backed [`crate::fair::FairQueue`], since both run the same engine.
//!
//! ```
//! use fairq_core::fair::fixed::FairQueue;
//!
//! let mut q: FairQueue<u8, u32, 16, 8> = FairQueue::new();
//! q.push(1, 10).unwrap();
//! q.push(1, 11).unwrap();
//! q.push(2, 20).unwrap();
//! assert_eq!(q.pop(), Some(10));
//! assert_eq!(q.pop(), Some(20));
//! assert_eq!(q.pop(), Some(11));
//! ```

use core::fmt;
use core::hash::Hash;

use heapless::FnvIndexMap;

use super::engine::{Engine, KeyState, Keys, Round, Rounds, Slot, Slots};
use super::{Full, Iter};

/// The key table of a fixed queue could not take another key.
///
/// ```
/// use fairq_core::fair::fixed::FairQueue;
///
/// let mut q: FairQueue<u8, (), 4, 2> = FairQueue::new();
/// q.set_weight(&1, 2).unwrap();
/// q.set_weight(&2, 2).unwrap();
/// assert!(q.set_weight(&3, 2).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeysFull;

impl fmt::Display for KeysFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("fair queue key table is full")
    }
}

impl core::error::Error for KeysFull {}

/// A ring of rounds indexed relative to its front.
struct Ring<const N: usize> {
    buf: [Round; N],
    head: usize,
    len: usize,
}

impl<const N: usize> Ring<N> {
    const fn new() -> Self {
        Ring {
            buf: [Round::EMPTY; N],
            head: 0,
            len: 0,
        }
    }

    fn physical(&self, index: usize) -> usize {
        (self.head + index) % N
    }
}

impl<const N: usize> Rounds for Ring<N> {
    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, index: usize) -> Round {
        self.buf[self.physical(index)]
    }

    fn get_mut(&mut self, index: usize) -> &mut Round {
        let at = self.physical(index);
        &mut self.buf[at]
    }

    fn push_back_empty(&mut self) -> bool {
        if self.len == N {
            return false;
        }
        let at = self.physical(self.len);
        self.buf[at] = Round::EMPTY;
        self.len += 1;
        true
    }

    fn pop_front(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1) % N;
            self.len -= 1;
        }
    }

    fn pop_back(&mut self) {
        self.len = self.len.saturating_sub(1);
    }
}

impl<K, T, const N: usize> Slots<K, T> for heapless::Vec<Slot<K, T>, N> {
    fn slots(&self) -> &[Slot<K, T>] {
        self
    }

    fn slots_mut(&mut self) -> &mut [Slot<K, T>] {
        self
    }

    fn push_slot(&mut self, slot: Slot<K, T>) -> Result<(), Slot<K, T>> {
        self.push(slot)
    }
}

impl<K: Eq + Hash, const KEYS: usize> Keys<K> for FnvIndexMap<K, KeyState, KEYS> {
    fn get(&self, key: &K) -> Option<&KeyState> {
        FnvIndexMap::get(self, key)
    }

    fn get_mut(&mut self, key: &K) -> Option<&mut KeyState> {
        FnvIndexMap::get_mut(self, key)
    }

    fn insert(&mut self, key: K, state: KeyState) -> bool {
        FnvIndexMap::insert(self, key, state).is_ok()
    }

    fn remove(&mut self, key: &K) {
        FnvIndexMap::swap_remove(self, key);
    }

    fn retain(&mut self, mut keep: impl FnMut(&KeyState) -> bool) {
        FnvIndexMap::retain(self, |_, state| keep(state));
    }

    fn len(&self) -> usize {
        FnvIndexMap::len(self)
    }

    fn is_full(&self) -> bool {
        FnvIndexMap::len(self) >= KEYS
    }
}

type FixedEngine<K, T, const N: usize, const KEYS: usize> =
    Engine<K, T, heapless::Vec<Slot<K, T>, N>, Ring<N>, FnvIndexMap<K, KeyState, KEYS>>;

/// A fair-by-key queue of at most `N` items and `KEYS` keys, with no allocator.
///
/// Same schedule and method names as the heap-backed [`crate::fair::FairQueue`]. A push fails
/// with [`Full`] when `N` items are queued, or when a new key arrives while `KEYS` keys are
/// backlogged (or hold weights).
///
/// ```
/// use fairq_core::fair::fixed::FairQueue;
///
/// let mut q: FairQueue<&str, u8, 2, 2> = FairQueue::new();
/// q.push("a", 1).unwrap();
/// q.push("b", 2).unwrap();
/// let full = q.push("a", 3).unwrap_err();
/// assert_eq!(full.len, 2);
/// ```
pub struct FairQueue<K, T, const N: usize, const KEYS: usize> {
    engine: FixedEngine<K, T, N, KEYS>,
}

impl<K, T, const N: usize, const KEYS: usize> FairQueue<K, T, N, KEYS> {
    /// An empty queue bounded at `N` items.
    ///
    /// ```
    /// let q: fairq_core::fair::fixed::FairQueue<u8, u8, 8, 4> =
    ///     fairq_core::fair::fixed::FairQueue::new();
    /// assert_eq!(q.capacity(), Some(8));
    /// ```
    pub const fn new() -> Self {
        FairQueue {
            engine: Engine::from_parts(
                heapless::Vec::new(),
                Ring::new(),
                FnvIndexMap::new(),
                Some(N),
            ),
        }
    }

    /// An empty queue bounded at `min(capacity, N)` items.
    ///
    /// ```
    /// let q: fairq_core::fair::fixed::FairQueue<u8, u8, 8, 4> =
    ///     fairq_core::fair::fixed::FairQueue::with_capacity(3);
    /// assert_eq!(q.capacity(), Some(3));
    /// ```
    pub const fn with_capacity(capacity: usize) -> Self {
        let bound = if capacity < N { capacity } else { N };
        FairQueue {
            engine: Engine::from_parts(
                heapless::Vec::new(),
                Ring::new(),
                FnvIndexMap::new(),
                Some(bound),
            ),
        }
    }

    /// Number of queued items.
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<u8, u8, 8, 4> = Default::default();
    /// q.push(1, 1).unwrap();
    /// assert_eq!(q.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.engine.len()
    }

    /// True when nothing is queued.
    ///
    /// ```
    /// let q: fairq_core::fair::fixed::FairQueue<u8, u8, 8, 4> = Default::default();
    /// assert!(q.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.engine.len() == 0
    }

    /// The bound on queued items (always `Some`).
    ///
    /// ```
    /// let q: fairq_core::fair::fixed::FairQueue<u8, u8, 8, 4> = Default::default();
    /// assert_eq!(q.capacity(), Some(8));
    /// ```
    pub fn capacity(&self) -> Option<usize> {
        self.engine.capacity()
    }

    /// True when a push would be refused for lack of item room.
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<u8, u8, 1, 2> = Default::default();
    /// q.push(0, 0).unwrap();
    /// assert!(q.is_full());
    /// ```
    pub fn is_full(&self) -> bool {
        self.engine.is_full()
    }
}

impl<K, T, const N: usize, const KEYS: usize> Default for FairQueue<K, T, N, KEYS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K, T, const N: usize, const KEYS: usize> FairQueue<K, T, N, KEYS>
where
    K: Eq + Hash + Clone,
{
    /// Queues `item` at the back of `key`'s FIFO; see [`crate::fair::FairQueue::push`].
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<u8, u8, 1, 2> = Default::default();
    /// q.push(1, 1).unwrap();
    /// assert_eq!(q.push(1, 2).unwrap_err().item, 2);
    /// ```
    pub fn push(&mut self, key: K, item: T) -> Result<(), Full<K, T>> {
        self.engine.push(key, item)
    }

    /// Takes the next item by the snapshot rule.
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<u8, u8, 4, 2> = Default::default();
    /// q.push(1, 7).unwrap();
    /// assert_eq!(q.pop(), Some(7));
    /// ```
    pub fn pop(&mut self) -> Option<T> {
        self.engine.pop().map(|(_, item)| item)
    }

    /// Like [`pop`](Self::pop), also returning the key.
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<u8, u8, 4, 2> = Default::default();
    /// q.push(1, 7).unwrap();
    /// assert_eq!(q.pop_with_key(), Some((1, 7)));
    /// ```
    pub fn pop_with_key(&mut self) -> Option<(K, T)> {
        self.engine.pop()
    }

    /// The pending snapshot in delivery order.
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<u8, u8, 4, 2> = Default::default();
    /// q.push(1, 1).unwrap();
    /// q.push(2, 2).unwrap();
    /// q.pop();
    /// assert_eq!(q.snapshot().collect::<Vec<_>>(), [(&2, &2)]);
    /// ```
    pub fn snapshot(&self) -> Iter<'_, K, T> {
        Iter(self.engine.snapshot_iter())
    }

    /// Each backlogged key (oldest head first) with an iterator over its queued items outside
    /// the pending snapshot. For monitoring: each key's iterator walks the backlog, O(n).
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<char, u8, 8, 4> = Default::default();
    /// q.push('a', 1).unwrap();
    /// q.push('b', 2).unwrap();
    /// q.push('a', 3).unwrap();
    /// let view: Vec<(char, Vec<u8>)> = q
    ///     .backlog()
    ///     .map(|(k, items)| (*k, items.copied().collect()))
    ///     .collect();
    /// assert_eq!(view, [('a', vec![1, 3]), ('b', vec![2])]);
    /// ```
    pub fn backlog(&self) -> impl Iterator<Item = (&K, impl Iterator<Item = &T> + '_)> + '_ {
        self.engine.backlog_keys().map(move |key| {
            let items = self
                .engine
                .backlog_iter()
                .filter(move |(k, _)| *k == key)
                .map(|(_, item)| item);
            (key, items)
        })
    }

    /// Every queued item in delivery order.
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<u8, char, 4, 2> = Default::default();
    /// q.push(1, 'x').unwrap();
    /// q.push(1, 'y').unwrap();
    /// q.push(2, 'z').unwrap();
    /// assert_eq!(q.iter().map(|(_, c)| *c).collect::<heapless::String<4>>(), "xzy");
    /// ```
    pub fn iter(&self) -> Iter<'_, K, T> {
        Iter(self.engine.iter())
    }

    /// Gives `key` `weight` places per round (0 counts as 1); fails when the key table is full.
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<u8, u8, 8, 4> = Default::default();
    /// q.set_weight(&1, 2).unwrap();
    /// assert_eq!(q.weight(&1), 2);
    /// ```
    pub fn set_weight(&mut self, key: &K, weight: u32) -> Result<(), KeysFull> {
        if self.engine.set_weight(key, weight) {
            Ok(())
        } else {
            Err(KeysFull)
        }
    }

    /// The weight of `key` (1 unless set).
    ///
    /// ```
    /// let q: fairq_core::fair::fixed::FairQueue<u8, u8, 8, 4> = Default::default();
    /// assert_eq!(q.weight(&9), 1);
    /// ```
    pub fn weight(&self, key: &K) -> u32 {
        self.engine.weight(key)
    }

    /// Removes every undelivered item of `key`, oldest first, handing each to `sink`; returns
    /// how many were removed. O(n).
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<u8, u8, 8, 4> = Default::default();
    /// q.push(1, 1).unwrap();
    /// q.push(2, 2).unwrap();
    /// q.push(1, 3).unwrap();
    /// let mut gone = heapless::Vec::<u8, 8>::new();
    /// assert_eq!(q.remove_key_with(&1, |item| gone.push(item).unwrap()), 2);
    /// assert_eq!(gone, [1, 3]);
    /// ```
    pub fn remove_key_with(&mut self, key: &K, sink: impl FnMut(T)) -> usize {
        self.engine.remove_key_with(key, sink)
    }

    /// Removes and returns every undelivered item of `key`, oldest first. O(n).
    ///
    /// ```
    /// let mut q: fairq_core::fair::fixed::FairQueue<u8, u8, 8, 4> = Default::default();
    /// q.push(1, 1).unwrap();
    /// q.push(1, 3).unwrap();
    /// assert_eq!(q.remove_key(&1), [1, 3]);
    /// ```
    pub fn remove_key(&mut self, key: &K) -> heapless::Vec<T, N> {
        let mut out = heapless::Vec::new();
        self.engine.remove_key_with(key, |item| {
            // At most N items are queued, so this never overflows.
            let _ = out.push(item);
        });
        out
    }
}

impl<K, T, const N: usize, const KEYS: usize> fmt::Debug for FairQueue<K, T, N, KEYS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("fixed::FairQueue")
            .field("len", &self.len())
            .field("capacity", &N)
            .field("keys", &KEYS)
            .finish_non_exhaustive()
    }
}
