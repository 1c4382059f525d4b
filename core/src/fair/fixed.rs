//! The fair queue with fixed capacities and no allocator.
//!
//! [`FairQueue<K, T, N, KEYS>`](FairQueue) holds at most `N` items and remembers at most `KEYS`
//! keys at a time (`KEYS` must be a power of two, as `heapless` index maps require). Storage is
//! inline: the queue never allocates, and its size is known at compile time. The schedule is
//! identical to the heap-backed [`crate::fair::FairQueue`]: both are the same
//! [`FairQueueBase`] over a different storage.
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

use super::key_state::{KeyState, Weighted};
use super::storage::{Backing, KeyTable, Walk, START};
use super::weights::Weights;
use super::FairQueueBase;

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

/// Index value meaning "no slot".
const NIL: u32 = u32::MAX;

/// One slab slot: a queued item or a link in the free list.
enum Slot<K, T> {
    Occupied { key: K, item: T, next: u32 },
    Vacant { next_free: u32 },
}

/// A round (or the run): a list of slots, oldest first.
#[derive(Clone, Copy, Debug)]
struct List {
    head: u32,
    tail: u32,
    len: u32,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}

/// A ring of rounds indexed relative to its front.
struct Ring<const N: usize> {
    buf: [List; N],
    head: usize,
    len: usize,
}

impl<const N: usize> Ring<N> {
    fn at(&self, index: usize) -> usize {
        (self.head + index) % N
    }
}

/// Allocation-free storage: items in a `heapless` slab whose free slots form a list, rounds
/// and the run as lists through that slab, keys in a `heapless` index map. Room for `N` items
/// and `KEYS` keys.
pub struct FixedStorage<K, T, const N: usize, const KEYS: usize> {
    slots: heapless::Vec<Slot<K, T>, N>,
    free: u32,
    rounds: Ring<N>,
    run: List,
    keys: FnvIndexMap<K, KeyState, KEYS>,
    weights: Weights<heapless::Vec<Weighted, KEYS>>,
}

impl<K, T, const N: usize, const KEYS: usize> FixedStorage<K, T, N, KEYS> {
    const fn new() -> Self {
        FixedStorage {
            slots: heapless::Vec::new(),
            free: NIL,
            rounds: Ring {
                buf: [List::EMPTY; N],
                head: 0,
                len: 0,
            },
            run: List::EMPTY,
            keys: FnvIndexMap::new(),
            weights: Weights::new(heapless::Vec::new()),
        }
    }

    /// Stores an item in a free slot; the engine's bound (at most `N` items) guarantees one.
    fn alloc(&mut self, key: K, item: T) -> u32 {
        let occupied = Slot::Occupied {
            key,
            item,
            next: NIL,
        };
        if self.free != NIL {
            let index = self.free;
            let slot = &mut self.slots[index as usize];
            if let Slot::Vacant { next_free } = *slot {
                self.free = next_free;
            }
            *slot = occupied;
            return index;
        }
        let index = self.slots.len() as u32;
        let pushed = self.slots.push(occupied).is_ok();
        debug_assert!(pushed, "the bound keeps the slab within its capacity");
        index
    }

    fn take(&mut self, index: u32) -> (K, T, u32) {
        let slot = core::mem::replace(
            &mut self.slots[index as usize],
            Slot::Vacant {
                next_free: self.free,
            },
        );
        self.free = index;
        match slot {
            Slot::Occupied { key, item, next } => (key, item, next),
            Slot::Vacant { .. } => unreachable!("fair queue links only occupied slots"),
        }
    }

    fn set_next(&mut self, index: u32, value: u32) {
        if let Slot::Occupied { next, .. } = &mut self.slots[index as usize] {
            *next = value;
        }
    }

    fn append(&mut self, list: Which, key: K, item: T) {
        let slot = self.alloc(key, item);
        let l = self.list_mut(list);
        let old_tail = l.tail;
        if l.head == NIL {
            l.head = slot;
        }
        l.tail = slot;
        l.len += 1;
        if old_tail != NIL {
            self.set_next(old_tail, slot);
        }
    }

    fn pop_list(&mut self, list: Which) -> Option<(K, T)> {
        let head = self.list_mut(list).head;
        if head == NIL {
            return None;
        }
        let (key, item, next) = self.take(head);
        let l = self.list_mut(list);
        l.head = next;
        l.len -= 1;
        if next == NIL {
            l.tail = NIL;
        }
        Some((key, item))
    }

    fn list_mut(&mut self, list: Which) -> &mut List {
        match list {
            Which::Round(index) => {
                let at = self.rounds.at(index);
                &mut self.rounds.buf[at]
            }
            Which::Run => &mut self.run,
        }
    }

    fn list(&self, round: usize) -> List {
        if round < self.rounds.len {
            self.rounds.buf[self.rounds.at(round)]
        } else {
            self.run
        }
    }
}

#[derive(Clone, Copy)]
enum Which {
    Round(usize),
    Run,
}

impl<K, T, const N: usize, const KEYS: usize> Walk<K, T> for FixedStorage<K, T, N, KEYS> {
    fn step(&self, round: usize, cursor: u64) -> Option<(u64, &K, &T)> {
        let at = if cursor == START {
            self.list(round).head
        } else {
            cursor as u32
        };
        match self.slots.get(at as usize)? {
            Slot::Occupied { key, item, next } if at != NIL => Some((u64::from(*next), key, item)),
            _ => None,
        }
    }

    fn walk_rounds(&self) -> usize {
        self.rounds.len
    }
}

impl<K: Eq + Hash, T, const N: usize, const KEYS: usize> Backing<K, T>
    for FixedStorage<K, T, N, KEYS>
{
    type Keys = FnvIndexMap<K, KeyState, KEYS>;
    type Slots = heapless::Vec<Weighted, KEYS>;

    fn keys(&self) -> &Self::Keys {
        &self.keys
    }

    fn keys_mut(&mut self) -> &mut Self::Keys {
        &mut self.keys
    }

    fn weights(&self) -> &Weights<Self::Slots> {
        &self.weights
    }

    fn keys_and_weights_mut(&mut self) -> (&mut Self::Keys, &mut Weights<Self::Slots>) {
        (&mut self.keys, &mut self.weights)
    }

    fn rounds(&self) -> usize {
        self.rounds.len
    }

    fn round_len(&self, index: usize) -> usize {
        self.list(index).len as usize
    }

    #[inline]
    fn round_push(&mut self, index: usize, key: K, item: T) -> Result<(), (K, T)> {
        if index >= self.rounds.len {
            return Err((key, item));
        }
        self.append(Which::Round(index), key, item);
        Ok(())
    }

    fn new_round(&mut self, key: K, item: T, _size: usize) {
        // At most `N` items, and rounds are never empty: the ring has room.
        debug_assert!(self.rounds.len < N);
        let at = self.rounds.at(self.rounds.len);
        self.rounds.buf[at] = List::EMPTY;
        self.rounds.len += 1;
        self.append(Which::Round(self.rounds.len - 1), key, item);
    }

    fn front_pop(&mut self) -> (K, T, bool) {
        let Some((key, item)) = self.pop_list(Which::Round(0)) else {
            unreachable!("rounds are never empty")
        };
        let emptied = self.list(0).len == 0;
        if emptied {
            self.drop_empty_front();
        }
        (key, item, emptied)
    }

    fn drop_empty_front(&mut self) {
        if self.rounds.len > 0 {
            self.rounds.head = (self.rounds.head + 1) % N;
            self.rounds.len -= 1;
        }
    }

    fn drop_empty_back(&mut self) {
        self.rounds.len = self.rounds.len.saturating_sub(1);
    }

    fn round_remove_key(&mut self, index: usize, key: &K, sink: &mut dyn FnMut(T)) -> usize {
        let mut removed = 0;
        for _ in 0..self.list(index).len {
            let Some((k, item)) = self.pop_list(Which::Round(index)) else {
                break;
            };
            if k == *key {
                sink(item);
                removed += 1;
            } else {
                self.append(Which::Round(index), k, item);
            }
        }
        removed
    }

    fn run_len(&self) -> usize {
        self.run.len as usize
    }

    fn run_key(&self) -> Option<&K> {
        match self.slots.get(self.run.head as usize) {
            Some(Slot::Occupied { key, .. }) if self.run.head != NIL => Some(key),
            _ => None,
        }
    }

    fn run_push(&mut self, key: K, item: T) {
        self.append(Which::Run, key, item);
    }

    fn run_pop(&mut self) -> Option<(K, T)> {
        self.pop_list(Which::Run)
    }

    fn trim(&mut self, _len: usize) {
        // Fixed storage owns its memory for good.
    }
}

impl<K: Eq + Hash, const KEYS: usize> KeyTable<K> for FnvIndexMap<K, KeyState, KEYS> {
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

    fn retain(&mut self, mut keep: impl FnMut(&K, &mut KeyState) -> bool) {
        FnvIndexMap::retain(self, |key, state| keep(key, state));
    }

    fn len(&self) -> usize {
        FnvIndexMap::len(self)
    }

    fn is_full(&self) -> bool {
        FnvIndexMap::len(self) >= KEYS
    }

    fn shrink(&mut self, _keep: usize) {}
}

/// A fair-by-key queue of at most `N` items and `KEYS` keys, with no allocator.
///
/// Same schedule and methods as the heap-backed [`crate::fair::FairQueue`] (every method of
/// [`FairQueueBase`]). A push fails with [`Full`](super::Full) when `N` items are queued, or
/// when a new key arrives while `KEYS` keys are backlogged (or hold weights).
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
pub type FairQueue<K, T, const N: usize, const KEYS: usize> =
    FairQueueBase<K, T, FixedStorage<K, T, N, KEYS>>;

impl<K, T, const N: usize, const KEYS: usize> FairQueueBase<K, T, FixedStorage<K, T, N, KEYS>> {
    /// An empty queue bounded at `N` items.
    ///
    /// ```
    /// let q: fairq_core::fair::fixed::FairQueue<u8, u8, 8, 4> =
    ///     fairq_core::fair::fixed::FairQueue::new();
    /// assert_eq!(q.capacity(), Some(8));
    /// ```
    pub const fn new() -> Self {
        FairQueueBase::from_storage(FixedStorage::new(), Some(N))
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
        FairQueueBase::from_storage(FixedStorage::new(), Some(bound))
    }
}

impl<K, T, const N: usize, const KEYS: usize> Default
    for FairQueueBase<K, T, FixedStorage<K, T, N, KEYS>>
{
    fn default() -> Self {
        Self::new()
    }
}

impl<K, T, const N: usize, const KEYS: usize> FairQueueBase<K, T, FixedStorage<K, T, N, KEYS>>
where
    K: Eq + Hash + Clone,
{
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

    /// Gives `key` `weight` places per round (0 counts as 1, and weights above 65,535 as
    /// 65,535); fails when the key table is full.
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
