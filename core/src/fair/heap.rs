//! The heap-backed fair queue: each round in pooled buffers, appended to at the back and
//! delivered front to back through one iterator.

use alloc::collections::VecDeque;
use alloc::vec::{self, Vec};
use core::hash::{BuildHasher, Hash};
use core::mem;

use hashbrown::{DefaultHashBuilder, HashMap};

use super::key_state::Weighted;
use super::keys::KeyMap;
use super::storage::{Backing, Walk, START};
use super::weights::Weights;
use super::FairQueueBase;

/// Emptied buffers kept for reuse.
const POOL: usize = 32;
/// Buffers at most this large (in items) survive a drain; larger ones are freed.
const KEEP_AFTER_DRAIN: usize = 256;
/// A round's buffer grows in place (its items copied) up to this many items; a full buffer
/// at least this large is chained instead, and the appends go on in a new buffer.
const CHAIN_AT: usize = 256;
/// The largest buffer a chain grows by (16 KiB of `(u32, u64)` items). Buffers of a bounded
/// size keep going round the pool while they are still in the cache; at 65,536 keys, where a
/// round holds tens of thousands of items, chaining buffers a quarter of the round large
/// instead meant fresh, cold allocations (and page faults): 0.98 L2 misses per push+pop
/// against 0.78 with this bound (callgrind, 1 MiB L2).
const CHAIN_MAX: usize = 1_024;
/// No link.
const NIL: u32 = u32::MAX;
/// The cursor segment that designates a round's `tail`.
const TAIL: u32 = u32::MAX - 1;
/// The cursor segment that designates the front round's `reading` iterator.
const READING: u32 = u32::MAX - 2;

/// A round's items, oldest first.
type Buffer<K, T> = Vec<(K, T)>;

/// One round: its oldest items in a chain of full buffers (none while the round fits one
/// buffer), the newest in `tail`. Appends go to `tail`. A round is appended to before it is
/// delivered, never both at once: delivery turns the chain's first buffer (then the next, and
/// finally `tail`) into the storage's `reading` iterator, which pops advance.
struct Round<K, T> {
    tail: Buffer<K, T>,
    /// First link of the chain, `NIL` when there is none.
    head: u32,
    /// Last link of the chain, `NIL` when there is none.
    last: u32,
}

impl<K, T> Round<K, T> {
    fn new(tail: Buffer<K, T>) -> Self {
        Round {
            tail,
            head: NIL,
            last: NIL,
        }
    }
}

/// A full buffer in a round's chain, or a free link.
struct Link<K, T> {
    items: Buffer<K, T>,
    next: u32,
}

/// Growable storage: every round is one buffer, or a chain of buffers once it outgrows a few
/// hundred items (so a round that keeps growing is never copied again), and the run is one
/// more buffer. There is no per-item link: an item costs its key and its value, plus its share
/// of a buffer's spare room. Emptied buffers are pooled for the next rounds, so a buffer that
/// pops have just read is the next one written.
///
/// Pushes append to the back of a plain `Vec`; pops advance a `vec::IntoIter` over the front
/// round's next buffer (`reading`): a length update and one copy each, with no ring
/// arithmetic and no lookup of the front round.
///
/// Every push goes straight to its round: the item is stored into the round's `tail` as
/// soon as the key's entry names the round. (Pushes were once *staged* with many keys,
/// written first to a short list at an address that does not depend on the key and placed
/// eight pushes later, so that the store did not wait on the key's cache miss. On the
/// current development machine, whose second-level cache holds the key table of 65,536
/// keys, the extra instructions cost more than the wait, and with 262,144 and 1,048,576
/// keys, past that cache, as well: see the [module docs](crate::fair).)
///
/// Memory goes back to the allocator when the queue drains: the pool and every large buffer
/// are freed, and the key table is shrunk as stale keys are swept.
pub struct HeapStorage<K, T, H = DefaultHashBuilder> {
    /// `rounds[first..]` are the rounds; the slots before `first` are emptied rounds not yet
    /// compacted away (cheaper to index than a ring).
    rounds: Vec<Round<K, T>>,
    first: usize,
    /// The pending round's next items, oldest first. Not empty only while round 0 is being
    /// delivered (it then holds that round's oldest undelivered items).
    reading: vec::IntoIter<(K, T)>,
    run: VecDeque<(K, T)>,
    /// The key of the run's items while the run is not empty (every push compares its key
    /// with it: a copy here is one load, where the run's front item is five).
    run_key: Option<K>,
    /// The last run's key, kept when the run empties: a queue kept at a depth of one or two
    /// starts a run at almost every push, and a key that allocates (a `String`) was copied
    /// into a new allocation each time (the same key: not copied; another: `clone_from`,
    /// which reuses a `String`'s buffer).
    spare_key: Option<K>,
    /// The chained buffers of every round; free links are listed from `free`.
    links: Vec<Link<K, T>>,
    free: u32,
    pool: Vec<Buffer<K, T>>,
    keys: KeyMap<K, H>,
    weights: Weights<Vec<Weighted>>,
}

/// A queue that delivers fairly by key with the snapshot-of-heads rule (see the
/// [module docs](crate::fair)), on growable storage.
///
/// Every method of [`FairQueueBase`] applies; this page also lists the constructors and the
/// methods particular to this storage.
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
pub type FairQueue<K, T, H = DefaultHashBuilder> = FairQueueBase<K, T, HeapStorage<K, T, H>>;

impl<K, T> FairQueueBase<K, T, HeapStorage<K, T>> {
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

    /// An empty queue with no bound other than 2^30 - 2 items (see [`FairQueueBase`]).
    /// Memory grows with the backlog and is given back when the queue drains.
    ///
    /// ```
    /// let q: fairq_core::fair::FairQueue<u8, u8> = fairq_core::fair::FairQueue::unbounded();
    /// assert_eq!(q.capacity(), None);
    /// ```
    pub fn unbounded() -> Self {
        Self::with_hasher(None, DefaultHashBuilder::default())
    }
}

impl<K, T> Default for FairQueueBase<K, T, HeapStorage<K, T>> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K, T, H> FairQueueBase<K, T, HeapStorage<K, T, H>> {
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
        FairQueueBase::from_storage(
            HeapStorage {
                rounds: Vec::new(),
                first: 0,
                reading: vec::IntoIter::default(),
                run: VecDeque::new(),
                run_key: None,
                spare_key: None,
                links: Vec::new(),
                free: NIL,
                pool: Vec::new(),
                keys: KeyMap::with_hasher(hasher),
                weights: Weights::new(Vec::new()),
            },
            capacity,
        )
    }
}

impl<K, T, H> FairQueueBase<K, T, HeapStorage<K, T, H>>
where
    K: Eq + Hash + Clone,
    H: BuildHasher,
{
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

    /// Gives `key` `weight` places per round while it is backlogged (0 counts as 1, and
    /// weights above 65,535 as 65,535: the key table keeps a weight in 16 bits).
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
    /// q.set_weight(&"huge", u32::MAX);
    /// assert_eq!(q.weight(&"huge"), 65_535);
    /// ```
    pub fn set_weight(&mut self, key: &K, weight: u32) {
        // A heap-backed key table always has room.
        let stored = self.engine.set_weight(key, weight);
        debug_assert!(stored);
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

impl<K, T, H> HeapStorage<K, T, H> {
    fn recycle(&mut self, buffer: Buffer<K, T>) {
        if self.pool.len() < POOL && buffer.capacity() > 0 {
            self.pool.push(buffer);
        }
    }

    /// Removes the (empty, unchained) front round.
    fn remove_front(&mut self) {
        let buffer = mem::take(&mut self.rounds[self.first].tail);
        self.recycle(buffer);
        self.first += 1;
        if self.first == self.rounds.len() {
            self.rounds.clear();
            self.first = 0;
        } else if self.first >= 32 && 2 * self.first >= self.rounds.len() {
            // Amortised: the slots moved are at most as many as the rounds delivered.
            self.rounds.drain(..self.first);
            self.first = 0;
        }
    }

    /// Round `at` (an index into `rounds`) has a full `tail`: grow it in place while it is
    /// small, else chain it and continue in a buffer a quarter as large as the round so far,
    /// up to [`CHAIN_MAX`] items (large rounds are never copied).
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, at: usize) {
        let round = &mut self.rounds[at];
        let full = round.tail.capacity();
        if full < CHAIN_AT && round.head == NIL {
            round.tail.reserve_exact((full / 4).max(4));
            return;
        }
        let mut chained = full;
        let mut link = round.head;
        // Counting stops once the bound is reached: a few links at most.
        while link != NIL && chained < 4 * CHAIN_MAX {
            chained += self.links[link as usize].items.len();
            link = self.links[link as usize].next;
        }
        let want = (chained / 4).clamp(CHAIN_AT / 4, CHAIN_MAX);
        let fresh = match self.pool.last() {
            Some(buffer) if buffer.capacity() >= want => self.pool.pop(),
            _ => None,
        }
        .unwrap_or_else(|| Vec::with_capacity(want));
        let round = &mut self.rounds[at];
        let items = mem::replace(&mut round.tail, fresh);
        let link = self.new_link(items);
        let round = &mut self.rounds[at];
        if round.last == NIL {
            round.head = link;
        } else {
            self.links[round.last as usize].next = link;
        }
        round.last = link;
    }

    fn new_link(&mut self, items: Buffer<K, T>) -> u32 {
        if self.free != NIL {
            let at = self.free;
            let link = &mut self.links[at as usize];
            self.free = link.next;
            link.items = items;
            link.next = NIL;
            return at;
        }
        let at = self.links.len() as u32;
        debug_assert!(at < TAIL, "fewer chained buffers than items");
        self.links.push(Link { items, next: NIL });
        at
    }

    /// Frees link `at`, returning its buffer to the pool, and gives its successor.
    fn free_link(&mut self, at: u32) -> u32 {
        let link = &mut self.links[at as usize];
        let next = link.next;
        let buffer = mem::take(&mut link.items);
        link.next = self.free;
        self.free = at;
        self.recycle(buffer);
        next
    }

    /// `reading` is empty and round 0 is being delivered: move the round's oldest buffer
    /// (the chain's first, else its tail) to `reading` and take its oldest item; the spent
    /// iterator's allocation goes to the pool.
    #[cold]
    #[inline(never)]
    fn load_reading(&mut self) -> (K, T) {
        let at = self.rounds[self.first].head;
        let next = if at == NIL {
            mem::take(&mut self.rounds[self.first].tail)
        } else {
            let items = mem::take(&mut self.links[at as usize].items);
            let after = self.free_link(at);
            let round = &mut self.rounds[self.first];
            round.head = after;
            if after == NIL {
                round.last = NIL;
            }
            items
        };
        let spent = mem::replace(&mut self.reading, next.into_iter());
        self.recycle(reclaim(spent));
        match self.reading.next() {
            Some(popped) => popped,
            None => unreachable!("rounds and chained buffers are never empty"),
        }
    }

    /// A pop has just emptied `reading`: drop round 0 when nothing of it is left elsewhere
    /// (the next pop loads its next buffer otherwise). True when the round is gone.
    #[cold]
    #[inline(never)]
    fn reading_emptied(&mut self) -> bool {
        let round = &self.rounds[self.first];
        if round.head != NIL || !round.tail.is_empty() {
            return false;
        }
        self.remove_front();
        true
    }

    /// A segment of `round`: a chained buffer, or its tail.
    fn buffer_at<'a>(&'a self, round: &'a Round<K, T>, segment: u32) -> &'a Buffer<K, T> {
        if segment == TAIL {
            &round.tail
        } else {
            &self.links[segment as usize].items
        }
    }
}

/// The allocation of a spent `reading` iterator, as an empty buffer for the pool.
///
/// Collecting a `vec::IntoIter` through an adapter is done in place by the standard library
/// (it reuses the source's allocation; documented as an implementation detail, and pinned by
/// the test `spent_reading_buffers_go_back_to_the_pool`). Were that to change, the pool would
/// receive an empty `Vec` and new rounds would allocate: slower, never wrong.
fn reclaim<K, T>(spent: vec::IntoIter<(K, T)>) -> Buffer<K, T> {
    // Not `collect()` on the iterator itself: that path frees an exhausted iterator's memory.
    #[allow(clippy::map_identity)]
    spent.map(|item| item).collect()
}

/// Moves every item of `key` out of `buffer` into `sink`, keeping the others in order.
fn remove_from<K: Eq, T>(buffer: &mut Buffer<K, T>, key: &K, sink: &mut dyn FnMut(T)) -> usize {
    // Rotate the buffer once as a deque (converting a `Vec` to a `VecDeque` and back moves
    // no allocation): no allocation, no unsafe code.
    let mut ring = VecDeque::from(mem::take(buffer));
    let mut removed = 0;
    for _ in 0..ring.len() {
        let Some((k, item)) = ring.pop_front() else {
            break;
        };
        if k == *key {
            sink(item);
            removed += 1;
        } else {
            ring.push_back((k, item));
        }
    }
    *buffer = Vec::from(ring);
    removed
}

impl<K, T, H> Walk<K, T> for HeapStorage<K, T, H> {
    fn step(&self, index: usize, cursor: u64) -> Option<(u64, &K, &T)> {
        let Some(round) = self.rounds.get(self.first + index) else {
            // The run: the cursor is an offset.
            let at = if cursor == START { 0 } else { cursor as usize };
            return self
                .run
                .get(at)
                .map(|(key, item)| (at as u64 + 1, key, item));
        };
        // A round: the cursor is a segment (`READING`, a link or `TAIL`) and an offset in it.
        let chain = if round.head == NIL { TAIL } else { round.head };
        let (mut segment, mut at) = if cursor != START {
            ((cursor >> 32) as u32, cursor as u32 as usize)
        } else if index == 0 && self.reading.len() > 0 {
            (READING, 0)
        } else {
            (chain, 0)
        };
        loop {
            let found = if segment == READING {
                self.reading.as_slice().get(at)
            } else {
                self.buffer_at(round, segment).get(at)
            };
            if let Some((key, item)) = found {
                let next = (u64::from(segment) << 32) | (at as u64 + 1);
                return Some((next, key, item));
            }
            segment = match segment {
                TAIL => return None,
                READING => chain,
                link => match self.links[link as usize].next {
                    NIL => TAIL,
                    next => next,
                },
            };
            at = 0;
        }
    }

    fn walk_rounds(&self) -> usize {
        self.rounds.len() - self.first
    }
}

impl<K, T, H> Backing<K, T> for HeapStorage<K, T, H>
where
    K: Eq + Hash + Clone,
    H: BuildHasher,
{
    type Keys = KeyMap<K, H>;
    type Slots = Vec<Weighted>;

    #[inline]
    fn keys(&self) -> &Self::Keys {
        &self.keys
    }

    #[inline]
    fn keys_mut(&mut self) -> &mut Self::Keys {
        &mut self.keys
    }

    fn weights(&self) -> &Weights<Vec<Weighted>> {
        &self.weights
    }

    #[inline]
    fn keys_and_weights_mut(&mut self) -> (&mut Self::Keys, &mut Weights<Vec<Weighted>>) {
        (&mut self.keys, &mut self.weights)
    }

    #[inline]
    fn rounds(&self) -> usize {
        self.rounds.len() - self.first
    }

    fn round_len(&self, index: usize) -> usize {
        let round = &self.rounds[self.first + index];
        let mut len = round.tail.len();
        if index == 0 {
            len += self.reading.len();
        }
        let mut link = round.head;
        while link != NIL {
            len += self.links[link as usize].items.len();
            link = self.links[link as usize].next;
        }
        len
    }

    /// Appends to the round's `tail`; hands the item back when that buffer is full (or the
    /// round does not exist).
    #[inline]
    fn round_push(&mut self, index: usize, key: K, item: T) -> Result<(), (K, T)> {
        match self.rounds.get_mut(self.first + index) {
            Some(round) if round.tail.len() < round.tail.capacity() => {
                round.tail.push((key, item));
                Ok(())
            }
            _ => Err((key, item)),
        }
    }

    /// Appends to the round's `tail`, making room in it first when it is full.
    #[cold]
    #[inline(never)]
    fn round_push_grow(&mut self, index: usize, key: K, item: T) -> Result<(), (K, T)> {
        let at = self.first + index;
        if at >= self.rounds.len() {
            return Err((key, item));
        }
        let tail = &self.rounds[at].tail;
        if tail.len() == tail.capacity() {
            self.make_room(at);
        }
        self.rounds[at].tail.push((key, item));
        Ok(())
    }

    #[inline]
    fn new_round(&mut self, key: K, item: T, size: usize) {
        // A fresh buffer when the pool is dry is made as large as the rounds are on average,
        // so that it does not reach its size through a string of copies. (Rounds are created
        // and delivered at random moments, so the pool runs dry now and then and overflows
        // at other times: at 64 keys with a million queued, a buffer grown from nothing cost
        // one reallocation per round, a tenth of the instructions of a push and pop.)
        let mut buffer = match self.pool.pop() {
            Some(buffer) => buffer,
            None => Vec::with_capacity(size.clamp(4, CHAIN_AT)),
        };
        buffer.push((key, item));
        self.rounds.push(Round::new(buffer));
    }

    #[inline]
    fn front_pop(&mut self) -> (K, T, bool) {
        let (key, item) = match self.reading.next() {
            Some(popped) => popped,
            None => self.load_reading(),
        };
        let emptied = self.reading.len() == 0 && self.reading_emptied();
        (key, item, emptied)
    }

    #[inline]
    fn front_pop_quick(&mut self) -> Option<(K, T, bool)> {
        let (key, item) = self.reading.next()?;
        let emptied = self.reading.len() == 0 && self.reading_emptied();
        Some((key, item, emptied))
    }

    fn drop_empty_front(&mut self) {
        self.remove_front();
    }

    fn drop_empty_back(&mut self) {
        if let Some(round) = self.rounds.pop() {
            self.recycle(round.tail);
        }
        if self.rounds.len() == self.first {
            self.rounds.clear();
            self.first = 0;
        }
    }

    fn round_remove_key(&mut self, index: usize, key: &K, sink: &mut dyn FnMut(T)) -> usize {
        let at = self.first + index;
        let mut removed = 0;
        if index == 0 {
            // The oldest of a pending round: what pops have not yet taken from `reading`.
            let mut rest: Buffer<K, T> = mem::take(&mut self.reading).collect();
            removed += remove_from(&mut rest, key, sink);
            self.reading = rest.into_iter();
        }
        // The chain, oldest first, unlinking the buffers this empties.
        let (mut prev, mut link) = (NIL, self.rounds[at].head);
        while link != NIL {
            removed += remove_from(&mut self.links[link as usize].items, key, sink);
            let next = self.links[link as usize].next;
            if self.links[link as usize].items.is_empty() {
                self.free_link(link);
                if prev == NIL {
                    self.rounds[at].head = next;
                } else {
                    self.links[prev as usize].next = next;
                }
            } else {
                prev = link;
            }
            link = next;
        }
        self.rounds[at].last = prev;
        removed += remove_from(&mut self.rounds[at].tail, key, sink);
        // Keep `tail` holding the newest items: an emptied tail takes the last chained
        // buffer's place (rounds are appended to `tail` only).
        if self.rounds[at].tail.is_empty() && prev != NIL {
            let mut before = NIL;
            let mut link = self.rounds[at].head;
            while link != prev {
                before = link;
                link = self.links[link as usize].next;
            }
            let items = mem::take(&mut self.links[prev as usize].items);
            let emptied = mem::replace(&mut self.rounds[at].tail, items);
            self.free_link(prev);
            self.recycle(emptied);
            let round = &mut self.rounds[at];
            round.last = before;
            if before == NIL {
                round.head = NIL;
            } else {
                self.links[before as usize].next = NIL;
            }
        }
        removed
    }

    #[inline]
    fn run_len(&self) -> usize {
        self.run.len()
    }

    #[inline]
    fn run_key(&self) -> Option<&K> {
        self.run_key.as_ref()
    }

    #[inline]
    fn run_push(&mut self, key: K, item: T) {
        if self.run_key.is_none() {
            self.run_key = Some(match self.spare_key.take() {
                Some(mut spare) => {
                    if spare != key {
                        // A `String` copies into the buffer it has.
                        spare.clone_from(&key);
                    }
                    spare
                }
                None => key.clone(),
            });
        }
        self.run.push_back((key, item));
    }

    #[inline]
    fn run_push_within(&mut self, key: K, item: T) -> Result<(), (K, T)> {
        if self.run.len() == self.run.capacity() {
            return Err((key, item));
        }
        self.run.push_back((key, item));
        Ok(())
    }

    #[inline]
    fn run_pop(&mut self) -> Option<(K, T)> {
        let popped = self.run.pop_front();
        if self.run.is_empty() {
            self.spare_key = self.run_key.take();
        }
        popped
    }

    #[inline]
    fn trim(&mut self, len: usize) {
        if len == 0 {
            self.release();
        }
    }
}

impl<K, T, H> HeapStorage<K, T, H> {
    /// The queue drained: free what a large backlog left behind.
    #[cold]
    fn release(&mut self) {
        let spent = reclaim(mem::take(&mut self.reading));
        self.recycle(spent);
        self.pool
            .retain(|buffer| buffer.capacity() <= KEEP_AFTER_DRAIN);
        self.pool.truncate(4);
        if self.run.capacity() > KEEP_AFTER_DRAIN {
            self.run = VecDeque::new();
        }
        if self.rounds.capacity() > KEEP_AFTER_DRAIN {
            self.rounds = Vec::new();
            self.first = 0;
        }
        // With nothing queued every link is free.
        self.links = Vec::new();
        self.free = NIL;
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use super::*;

    /// The keys of round 0's segments, oldest first: `reading`, each chained buffer, the tail.
    fn segments(q: &FairQueue<u32, u32>) -> Vec<Vec<u32>> {
        let storage = &q.engine.storage;
        let round = &storage.rounds[storage.first];
        let mut out = Vec::new();
        if storage.reading.len() > 0 {
            out.push(storage.reading.as_slice().iter().map(|(k, _)| *k).collect());
        }
        let mut link = round.head;
        while link != NIL {
            let items = &storage.links[link as usize].items;
            out.push(items.iter().map(|(k, _)| *k).collect());
            link = storage.links[link as usize].next;
        }
        out.push(round.tail.iter().map(|(k, _)| *k).collect());
        out
    }

    /// A key that counts its copies.
    #[derive(Debug)]
    struct Counted(u32, alloc::rc::Rc<core::cell::Cell<usize>>);

    impl Clone for Counted {
        fn clone(&self) -> Self {
            self.1.set(self.1.get() + 1);
            Counted(self.0, self.1.clone())
        }
    }

    impl PartialEq for Counted {
        fn eq(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }

    impl Eq for Counted {}

    impl Hash for Counted {
        fn hash<S: core::hash::Hasher>(&self, state: &mut S) {
            self.0.hash(state);
        }
    }

    #[test]
    fn a_key_alone_at_depth_one_is_not_copied_per_push() {
        let copies = alloc::rc::Rc::new(core::cell::Cell::new(0));
        let key = |k| Counted(k, copies.clone());
        let mut q = FairQueue::new();
        q.push(key(1), 0).unwrap();
        assert_eq!(q.pop(), Some(0));
        let first = copies.get();
        // Each push starts a run on an empty queue, each pop empties it.
        for i in 1..1_000 {
            q.push(key(1), i).unwrap();
            assert_eq!(q.pop(), Some(i));
        }
        assert_eq!(copies.get(), first, "the run's key was copied again");
        // Another key takes the run over: the copies of a new key, as for the first one,
        // and the order is still per push.
        q.push(key(2), 5).unwrap();
        q.push(key(2), 6).unwrap();
        assert_eq!(copies.get(), 2 * first);
        assert_eq!(q.pop(), Some(5));
        q.push(key(1), 7).unwrap();
        assert_eq!([q.pop(), q.pop(), q.pop()], [Some(6), Some(7), None]);
    }

    /// A key whose weight was lowered keeps the places of the items it had, several to a
    /// round: the backlog still lists it once, as the heap storage's does.
    #[test]
    fn backlog_lists_a_key_once_after_its_weight_is_lowered() {
        let mut q: crate::fair::fixed::FairQueue<u8, u32, 8, 4> = Default::default();
        let mut h: FairQueue<u8, u32> = FairQueue::unbounded();
        q.set_weight(&1, 3).unwrap();
        h.set_weight(&1, 3);
        for (k, v) in [(1, 10), (1, 11), (1, 12), (2, 20)] {
            q.push(k, v).unwrap();
            h.push(k, v).unwrap();
        }
        q.set_weight(&1, 1).unwrap();
        h.set_weight(&1, 1);
        let fixed: alloc::vec::Vec<(u8, alloc::vec::Vec<u32>)> = q
            .backlog()
            .map(|(k, items)| (*k, items.copied().collect()))
            .collect();
        let heap: alloc::vec::Vec<(u8, alloc::vec::Vec<u32>)> = h
            .backlog()
            .into_iter()
            .map(|(k, items)| (*k, items.into_iter().copied().collect()))
            .collect();
        assert_eq!(fixed, [(1, alloc::vec![10, 11, 12]), (2, alloc::vec![20])]);
        assert_eq!(fixed, heap);
    }

    /// The two storages deliver and show the same: the same random pushes, pops, weights,
    /// removals and views on this queue and on the fixed one (the property tests hold both
    /// to the snapshot rule), compared at every step, with rounds large enough to chain
    /// buffers at 700 keys.
    #[test]
    fn heap_and_fixed_storages_agree() {
        use crate::fair::fixed;
        for keys in [3u32, 40, 700] {
            let mut heap: FairQueue<u32, u32> = FairQueue::unbounded();
            let mut fixed: alloc::boxed::Box<fixed::FairQueue<u32, u32, 4_096, 1_024>> =
                alloc::boxed::Box::default();
            let mut x = 0x2545_F491_4F6C_DD1Du64 ^ u64::from(keys);
            for step in 0..40_000u32 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = (x % u64::from(keys)) as u32;
                match (x >> 32) % 32 {
                    0..=15 => {
                        assert_eq!(heap.push(key, step).is_ok(), fixed.push(key, step).is_ok())
                    }
                    16 if step % 8 == 0 => {
                        let w = (x >> 40) as u32 % 4;
                        heap.set_weight(&key, w);
                        fixed.set_weight(&key, w).unwrap();
                    }
                    17 if step % 16 == 0 => {
                        assert_eq!(heap.remove_key(&key), fixed.remove_key(&key).as_slice());
                    }
                    18 if step % 64 == 0 => {
                        assert!(heap.iter().eq(fixed.iter()), "step {step}");
                        assert!(heap.snapshot().eq(fixed.snapshot()));
                        let backlog: Vec<(&u32, Vec<&u32>)> = fixed
                            .backlog()
                            .map(|(k, items)| (k, items.collect()))
                            .collect();
                        assert_eq!(heap.backlog(), backlog);
                        assert_eq!(heap.iter().len(), fixed.iter().len());
                    }
                    _ => assert_eq!(heap.pop_with_key(), fixed.pop_with_key(), "step {step}"),
                }
                assert_eq!(heap.len(), fixed.len());
            }
            let rest: Vec<_> = core::iter::from_fn(|| heap.pop_with_key()).collect();
            assert_eq!(
                rest,
                core::iter::from_fn(|| fixed.pop_with_key()).collect::<Vec<_>>()
            );
        }
    }

    /// Pops taken straight from the buffer being read end the snapshot with its last item
    /// and, when that empties the queue, give back memory as any pop does.
    #[test]
    fn pops_from_the_read_buffer_end_snapshots_and_drain() {
        let mut q: FairQueue<u32, u32> = FairQueue::unbounded();
        for k in 0..3 {
            q.push(k, k).unwrap();
            q.push(k, 10 + k).unwrap();
        }
        assert_eq!(q.pop(), Some(0)); // takes the snapshot [0, 1, 2]
        assert_eq!(q.pop(), Some(1));
        assert_eq!(q.snapshot().map(|(_, t)| *t).collect::<Vec<_>>(), [2]);
        assert_eq!(q.pop(), Some(2)); // the snapshot's last item
        assert_eq!(q.snapshot().count(), 0, "no snapshot pending");
        q.push(7, 70).unwrap(); // joins the next snapshot, behind the others
        let rest: Vec<u32> = core::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, [10, 11, 12, 70]);
        // Rounds of 300 items: their buffers are too large to keep once the queue drains.
        for _ in 0..2 {
            for k in 0..300 {
                q.push(k, k).unwrap();
            }
        }
        while q.pop().is_some() {}
        let storage = &q.engine.storage;
        assert!(storage.rounds.is_empty());
        assert!(
            storage
                .pool
                .iter()
                .all(|b| b.capacity() <= KEEP_AFTER_DRAIN),
            "pool capacities: {:?}",
            storage.pool.iter().map(Vec::capacity).collect::<Vec<_>>()
        );
    }

    /// A delivered round's buffer is the next pooled buffer: reusing it relies on the
    /// standard library collecting a `vec::IntoIter` in place (see `reclaim`).
    #[test]
    fn spent_reading_buffers_go_back_to_the_pool() {
        let mut q: FairQueue<u32, u32> = FairQueue::unbounded();
        // Two rounds of 100 items: every key twice.
        for _ in 0..2 {
            for k in 0..100 {
                q.push(k, k).unwrap();
            }
        }
        // Delivering the first round and one item of the second spends the first buffer.
        for _ in 0..101 {
            q.pop();
        }
        let pool = &q.engine.storage.pool;
        assert!(
            pool.iter().any(|buffer| buffer.capacity() >= 100),
            "pool capacities: {:?}",
            pool.iter().map(Vec::capacity).collect::<Vec<_>>()
        );
    }

    /// Removals that empty the first chained buffer, the last one and the tail relink the
    /// chain: later appends and every delivery keep the order.
    #[test]
    fn removals_that_empty_chained_buffers_keep_the_order() {
        let mut q: FairQueue<u32, u32> = FairQueue::unbounded();
        // One round of 1,000 items, one per key: chained buffers and a tail.
        for k in 0..1_000 {
            q.push(k, k).unwrap();
        }
        let segs = segments(&q);
        assert!(
            segs.len() >= 3,
            "{:?}",
            segs.iter().map(Vec::len).collect::<Vec<_>>()
        );
        // Empty the last chained buffer (the tail keeps items).
        let mut removed: Vec<u32> = segs[segs.len() - 2].clone();
        for k in &removed {
            assert_eq!(q.remove_key(k), [*k]);
        }
        // The same round takes more appends (fresh keys), which chain after the new last.
        for k in 1_000..1_500 {
            q.push(k, k).unwrap();
        }
        // Empty the tail: the last chained buffer becomes the tail, and appends go on.
        let tail = segments(&q).pop().unwrap_or_default();
        for k in &tail {
            assert_eq!(q.remove_key(k), [*k]);
        }
        removed.extend(tail);
        for k in 1_500..1_700 {
            q.push(k, k).unwrap();
        }
        let mut expected: Vec<u32> = (0..1_700).filter(|k| !removed.contains(k)).collect();
        // Deliver part of the first buffer, then remove the rest of it while it is pending.
        assert_eq!(q.pop(), Some(expected.remove(0)));
        let front = segments(&q)[0].clone();
        assert!(segments(&q).len() >= 2);
        for k in &front {
            assert_eq!(q.remove_key(k), [*k]);
        }
        expected.retain(|k| !front.contains(k));
        let got: Vec<u32> = core::iter::from_fn(|| q.pop()).collect();
        assert_eq!(got, expected);
        assert!(
            q.engine.storage.links.is_empty(),
            "a drained queue frees its links"
        );
    }
}
