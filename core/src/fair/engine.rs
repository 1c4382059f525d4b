//! The scheduling engine shared by every storage of the fair queue.
//!
//! # How the snapshot rule becomes O(1)
//!
//! The snapshot-of-heads rule can be restated with *rounds*. Number the snapshots 1, 2, 3, …
//! An item belongs to the round of the snapshot that will deliver it, and within a round items
//! are delivered oldest first. When an item is pushed for key `k`:
//!
//! * if `k` has nothing queued outside the pending snapshot, the item is `k`'s head, so it
//!   joins the *next* snapshot: round `current + 1`;
//! * otherwise it sits behind `k`'s last queued item and joins the round after that one.
//!
//! (With weights, a key of weight `w` fills `w` places in a round before moving on.)
//!
//! Because pushes arrive in sequence order, appending each item to the back of its round keeps
//! every round sorted by sequence number for free. Delivery is then "take the front of the
//! front round; drop the round when it empties". Taking a snapshot is just advancing
//! `current`: no scan, no sort, no allocation. Every key with queued items has its head in
//! round `current + 1`, and a key's items fill consecutive rounds, so rounds never have gaps.
//!
//! A key's entry in the key table remembers its last round, and the rule above, placing one
//! push, is [`KeyState::place`] in `key_state.rs`: a handful of branch-free lines.
//!
//! # The shape of the rounds, and the run
//!
//! Round `r` holds one item (or `w`) of every key whose last round is `r` or later, so rounds
//! only get smaller towards the back. Once a round holds a single item, every later round
//! holds a single item of that same key: the key with the deepest backlog, alone. Storages
//! keep that tail as one *run*, one sequence where each item is a whole round, so a key that
//! is alone (the one-key case, or one tenant's deep backlog) costs a plain FIFO, not a round
//! per item. A push can only land in an existing round, at the front of the run (another key
//! catching up: that item leaves the run and becomes a round of two), or at the back of the
//! run (the run's key going deeper). Which one is one comparison of round numbers.

use core::marker::PhantomData;

use super::key_state::{KeyState, Weighted, MAX_LEN, MAX_WEIGHT, RENUMBER_EVERY};
use super::storage::{Backing, KeyTable, Walk, START};
use super::Full;

/// The fair queue's state over a storage `S`.
pub(crate) struct Engine<K, T, S> {
    _items: PhantomData<fn() -> (K, T)>,
    pub(crate) storage: S,
    /// The round being delivered (the pending snapshot when `pending`).
    current: u64,
    /// Whether round 0 of the storage is the pending snapshot (round `current`); otherwise
    /// round 0 (or the run's front, when there are no rounds) is round `current + 1`.
    pending: bool,
    /// How many more items the queue takes: `limit` less the number queued. Kept rather than
    /// the length, so that a push tests for room and counts its item in one subtraction.
    room: usize,
    /// The capacity, `usize::MAX` when unbounded.
    bound: usize,
    /// What push checks: the capacity, at most [`MAX_LEN`].
    limit: usize,
    /// Size of the key table after its last sweep (drives amortised clean-up).
    keys_after_sweep: usize,
}

impl<K, T, S> Engine<K, T, S> {
    pub(crate) const fn new(storage: S, capacity: Option<usize>) -> Self {
        Engine {
            _items: PhantomData,
            storage,
            current: 0,
            pending: false,
            room: Self::limit_of(capacity),
            bound: match capacity {
                Some(capacity) => capacity,
                None => usize::MAX,
            },
            limit: Self::limit_of(capacity),
            keys_after_sweep: 0,
        }
    }

    /// What push checks for a capacity: the capacity, at most [`MAX_LEN`].
    const fn limit_of(capacity: Option<usize>) -> usize {
        match capacity {
            Some(capacity) if capacity < MAX_LEN => capacity,
            _ => MAX_LEN,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.limit - self.room
    }

    /// True when nothing is queued (one comparison, where `len() == 0` takes a subtraction).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.room == self.limit
    }

    pub(crate) fn capacity(&self) -> Option<usize> {
        (self.bound != usize::MAX).then_some(self.bound)
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.room == 0
    }
}

impl<K, T, S> Engine<K, T, S>
where
    K: Eq + Clone,
    S: Backing<K, T>,
{
    /// Round number of storage round 0.
    #[inline]
    fn base(&self) -> u64 {
        self.current + u64::from(!self.pending)
    }

    /// The storage index of the round `at` rounds after the current one (`at` >= 1).
    #[inline]
    fn index(&self, at: usize) -> usize {
        // Not `at - usize::from(!self.pending)`: that takes two more instructions.
        at - 1 + usize::from(self.pending)
    }

    #[inline(always)]
    pub(crate) fn push(&mut self, key: K, item: T) -> Result<(), Full<K, T>> {
        // Counted at once: every path from here queues the item, but for a new key that a
        // full fixed table refuses (which gives the room back).
        let Some(room) = self.room.checked_sub(1) else {
            return Err(self.full(key, item));
        };
        self.room = room;
        // The run's key going one round deeper: the run's back, no table lookup. (While the
        // run is not empty its key's table entry is not kept up to date: its last round is
        // the run's last, see `settle_run_key`.)
        if self.storage.run_key() == Some(&key) {
            return match self.storage.run_push_within(key, item) {
                Ok(()) => Ok(()),
                Err((key, item)) => {
                    self.push_run_grow(key, item);
                    Ok(())
                }
            };
        }
        let Some(state) = self.storage.keys_mut().get_mut(&key) else {
            // Refused only by a fixed table that is full. The refusal is built here rather
            // than in the call, so that the result of every other path is a constant
            // where `push` is inlined: `Ok` then costs no store and no test.
            return match self.push_new_key(key, item) {
                Ok(()) => Ok(()),
                Err((key, item)) => {
                    self.room += 1;
                    Err(self.full(key, item))
                }
            };
        };
        if let Some(slot) = state.slot() {
            self.push_weighted(slot, key, item);
            return Ok(());
        }
        // `current` read after the lookup: read before it, it was kept in a register through
        // the lookup, which took one register more than the caller's scratch registers.
        let at = state.place(self.current);
        let index = self.index(at);
        // Every other case is a call in tail position that cannot fail, so that this path
        // keeps nothing across a call and returns a constant: where `push` is not inlined
        // (the fair bench's contender), it saves and restores two registers, and where it
        // is, its result needs no test.
        match self.storage.round_push(index, key, item) {
            Ok(()) => Ok(()),
            Err((key, item)) => {
                self.push_slow(index, 1, key, item);
                Ok(())
            }
        }
    }

    /// A push for a weighted key, whose state is in slot `slot` of the weights slab.
    #[cold]
    #[inline(never)]
    fn push_weighted(&mut self, slot: u32, key: K, item: T) {
        let current = self.current;
        let Some(state) = self.storage.keys_and_weights_mut().1.get_mut(slot) else {
            unreachable!("a weighted key's entry points to its slot")
        };
        let (at, weight) = (state.place(current), u32::from(state.weight()));
        let index = self.index(at);
        self.push_slow(index, weight, key, item)
    }

    /// The item's round `index` is past the ordinary rounds or has no room left in its
    /// buffer.
    #[cold]
    #[inline(never)]
    fn push_slow(&mut self, index: usize, weight: u32, key: K, item: T) {
        match self.storage.round_push_grow(index, key, item) {
            Ok(()) => {}
            Err((key, item)) => self.push_past_rounds(index, weight, key, item),
        }
    }

    /// The run's key going deeper while the run's buffer is full.
    #[cold]
    #[inline(never)]
    fn push_run_grow(&mut self, key: K, item: T) {
        self.storage.run_push(key, item);
    }

    /// The refusal of a push: past the capacity, or a new key with the table full.
    #[cold]
    #[inline(never)]
    fn full(&self, key: K, item: T) -> Full<K, T> {
        Full {
            key,
            item,
            len: self.len(),
        }
    }

    /// A key the table does not hold (or no longer holds): a fresh entry, its first item in
    /// the next snapshot's round.
    #[cold]
    #[inline(never)]
    fn push_new_key(&mut self, key: K, item: T) -> Result<(), (K, T)> {
        if !self.make_room_for_key() {
            return Err((key, item));
        }
        let mut state = KeyState::fresh(self.current);
        let at = state.place(self.current);
        let inserted = self.storage.keys_mut().insert(key.clone(), state);
        debug_assert!(inserted, "make_room_for_key guaranteed a free entry");
        let index = self.index(at);
        match self.storage.round_push_grow(index, key, item) {
            Ok(()) => {}
            Err((key, item)) => self.push_past_rounds(index, 1, key, item),
        }
        Ok(())
    }

    /// Places an item in round `index` when that is past the ordinary rounds: the run's front
    /// (another key joins that round) or the run's back (a new deepest round).
    #[inline(never)]
    fn push_past_rounds(&mut self, index: usize, weight: u32, key: K, item: T) {
        let rounds = self.storage.rounds();
        let run = self.storage.run_len();
        if run == 0 {
            debug_assert_eq!(index, rounds);
            if weight == 1 {
                self.storage.run_push(key, item);
            } else {
                let size = self.round_size();
                self.storage.new_round(key, item, size);
            }
        } else {
            // Rounds are contiguous and the run holds one key, so another key can only reach
            // the run's front round, which then becomes an ordinary round of two items.
            debug_assert_eq!(index, rounds);
            debug_assert!(self.storage.run_key() != Some(&key));
            if let Some((run_key, run_item)) = self.storage.run_pop() {
                if run == 1 {
                    self.settle_run_key(&run_key, self.base() + rounds as u64);
                }
                let size = self.round_size();
                self.storage.new_round(run_key, run_item, size);
            }
            let pushed = self.storage.round_push_grow(rounds, key, item);
            debug_assert!(pushed.is_ok(), "the run's front became round {rounds}");
        }
    }

    /// Items per round on average (the run's items count as a round each), during a push:
    /// not counting the item being pushed, which `len` already does.
    fn round_size(&self) -> usize {
        (self.len() - 1) / (self.storage.rounds() + self.storage.run_len() + 1)
    }

    /// The run emptied while its key still has items queued, its last one in `round`: bring
    /// the key's table entry up to date (run pushes skip it).
    fn settle_run_key(&mut self, key: &K, round: u64) {
        let (keys, weights) = self.storage.keys_and_weights_mut();
        if let Some(state) = keys.get_mut(key) {
            match state.slot() {
                None => state.settle(round),
                Some(slot) => {
                    if let Some(weighted) = weights.get_mut(slot) {
                        weighted.settle(round);
                    }
                }
            }
        }
    }

    #[inline(always)]
    pub(crate) fn pop(&mut self) -> Option<(K, T)> {
        // The common case first: the next item of the pending snapshot, at hand in the
        // storage. Only the snapshot's last item needs more than the length updated (the
        // queue is not empty while the snapshot has more).
        if let Some((key, item, emptied)) = self.storage.front_pop_quick() {
            self.room += 1;
            if emptied {
                self.snapshot_delivered();
            }
            return Some((key, item));
        }
        if self.is_empty() {
            return None;
        }
        let popped = if self.pending {
            self.pop_front_round()
        } else if self.storage.rounds() > 0 {
            // Take the next snapshot: it is simply the front round.
            self.advance();
            self.pending = true;
            self.pop_front_round()
        } else {
            // A round of the run: a snapshot of one item, delivered at once.
            self.advance();
            self.storage.run_pop()
        };
        self.room += 1;
        if self.is_empty() {
            self.drained();
        }
        popped
    }

    /// A quick pop delivered the pending snapshot's last item.
    #[cold]
    #[inline(never)]
    fn snapshot_delivered(&mut self) {
        self.pending = false;
        if self.is_empty() {
            self.drained();
        }
    }

    /// Moves on to the next round.
    #[inline]
    fn advance(&mut self) {
        self.current += 1;
        if self.current % RENUMBER_EVERY == 0 {
            self.renumber();
        }
    }

    /// Brings the entries of keys with nothing queued up to the current round, so that none
    /// falls 2^30 rounds behind (see [`KeyState`]). O(keys) every 2^29 rounds.
    #[cold]
    fn renumber(&mut self) {
        let current = self.current;
        let (keys, weights) = self.storage.keys_and_weights_mut();
        keys.retain(|_, state| {
            state.renumber(current);
            true
        });
        weights.for_each_mut(|state| state.renumber(current));
    }

    /// The queue is empty: give back what a large backlog or many keys left behind.
    #[cold]
    fn drained(&mut self) {
        self.storage.trim(0);
        if self.storage.keys().len() > 64 {
            self.sweep_keys();
        }
    }

    #[inline]
    fn pop_front_round(&mut self) -> Option<(K, T)> {
        let (key, item, emptied) = self.storage.front_pop();
        if emptied {
            self.pending = false;
        }
        Some((key, item))
    }

    pub(crate) fn set_weight(&mut self, key: &K, weight: u32) -> bool {
        let weight = weight.clamp(1, MAX_WEIGHT) as u16;
        if weight != 1 && self.storage.run_key() == Some(key) {
            // A weighted key may put several items in one round: give each run item its own
            // ordinary round first. Rare (weights are set before traffic), O(run).
            while let Some((k, t)) = self.storage.run_pop() {
                self.storage.new_round(k, t, 1);
            }
            let last = self.base() + self.storage.rounds() as u64 - 1;
            self.settle_run_key(key, last);
        }
        let current = self.current;
        let (keys, weights) = self.storage.keys_and_weights_mut();
        if let Some(state) = keys.get_mut(key) {
            match state.slot() {
                Some(slot) => {
                    if let Some(weighted) = weights.get_mut(slot) {
                        weighted.set_weight(weight);
                    }
                }
                None if weight != 1 => {
                    // The key's items so far went one per round: its last round holds one.
                    match weights.insert(Weighted::from_plain(*state, weight)) {
                        Some(slot) => *state = KeyState::weighted(slot),
                        None => return false,
                    }
                }
                None => {}
            }
            return true;
        }
        if !self.make_room_for_key() {
            return false;
        }
        let (keys, weights) = self.storage.keys_and_weights_mut();
        let state = if weight == 1 {
            KeyState::fresh(current)
        } else {
            match weights.insert(Weighted::fresh(current, weight)) {
                Some(slot) => KeyState::weighted(slot),
                None => return false,
            }
        };
        keys.insert(key.clone(), state)
    }

    pub(crate) fn weight(&self, key: &K) -> u32 {
        self.storage
            .keys()
            .get(key)
            .and_then(|state| state.slot())
            .map_or(1, |slot| {
                u32::from(self.storage.weights().get(slot).weight())
            })
    }

    /// Removes every undelivered item of `key`, in delivery order, passing each to `sink`.
    pub(crate) fn remove_key_with(&mut self, key: &K, mut sink: impl FnMut(T)) -> usize {
        let mut removed = 0;
        for index in 0..self.storage.rounds() {
            removed += self.storage.round_remove_key(index, key, &mut sink);
        }
        if self.storage.run_key() == Some(key) {
            while let Some((_, item)) = self.storage.run_pop() {
                sink(item);
                removed += 1;
            }
        }
        // A key's items fill consecutive rounds starting at the front, so emptied rounds can
        // only be the pending snapshot or a run at the back.
        if self.pending && self.storage.rounds() > 0 && self.storage.round_len(0) == 0 {
            self.storage.drop_empty_front();
            self.pending = false;
        }
        while self.storage.rounds() > 0 && self.storage.round_len(self.storage.rounds() - 1) == 0 {
            self.storage.drop_empty_back();
        }
        debug_assert!((0..self.storage.rounds()).all(|i| self.storage.round_len(i) > 0));
        self.room += removed;
        let current = self.current;
        let (keys, weights) = self.storage.keys_and_weights_mut();
        if let Some(state) = keys.get(key).copied() {
            match state
                .slot()
                .and_then(|slot| Some((slot, weights.get_mut(slot)?)))
            {
                Some((_, weighted)) if weighted.weight() != 1 => {
                    *weighted = Weighted::fresh(current, weighted.weight());
                }
                Some((slot, _)) => {
                    weights.remove(slot);
                    keys.remove(key);
                }
                None => keys.remove(key),
            }
        }
        if self.is_empty() {
            self.drained();
        }
        removed
    }

    /// Iterates over the pending snapshot in delivery order.
    pub(crate) fn snapshot_iter(&self) -> RoundsIter<'_, K, T> {
        let (rounds, len) = if self.pending && self.storage.rounds() > 0 {
            (1, self.storage.round_len(0))
        } else {
            (0, 0)
        };
        RoundsIter::new(&self.storage, 0, rounds, len)
    }

    /// Iterates over everything after the pending snapshot in delivery order.
    pub(crate) fn backlog_iter(&self) -> RoundsIter<'_, K, T> {
        let first = usize::from(self.pending);
        let snapshot = if self.pending {
            self.storage.round_len(0)
        } else {
            0
        };
        RoundsIter::new(
            &self.storage,
            first,
            self.storage.rounds() + 1,
            self.len() - snapshot,
        )
    }

    /// Iterates over every queued item in delivery order.
    pub(crate) fn iter(&self) -> RoundsIter<'_, K, T> {
        RoundsIter::new(&self.storage, 0, self.storage.rounds() + 1, self.len())
    }

    /// The keys of the backlog in the order of their heads (oldest first), each once.
    pub(crate) fn backlog_keys(&self) -> BacklogKeys<'_, K, T, S> {
        // Every key with queued items has its head in the first round after the snapshot
        // (the run's front when there is no such round: then a single key).
        let first = usize::from(self.pending);
        let limit = if first < self.storage.rounds() {
            usize::MAX
        } else {
            1
        };
        BacklogKeys {
            engine: self,
            round: RoundsIter::new(&self.storage, first, first + 1, usize::MAX),
            first,
            at: 0,
            limit,
        }
    }

    /// Forgets the keys whose entries say nothing a fresh entry would not (no queued item,
    /// weight 1), keeping the run's key (its entry is stale by design, see `push`).
    fn sweep_keys(&mut self) {
        let current = self.current;
        let run_key = self.storage.run_key().cloned();
        let run_key = run_key.as_ref();
        let (table, weights) = self.storage.keys_and_weights_mut();
        table.retain(|key, state| {
            let live = match state.slot() {
                None => state.ahead(current) > 0,
                Some(slot) => weights.get(slot).is_live(current),
            };
            if live || run_key == Some(key) {
                return true;
            }
            if let Some(slot) = state.slot() {
                weights.remove(slot);
            }
            false
        });
        self.keys_after_sweep = table.len();
        // Room for every key until the next sweep: a table shrunk below it would grow (and
        // rehash every entry) several times over before then, at every sweep.
        table.shrink(next_sweep(self.keys_after_sweep));
    }

    /// Ensures the key table can take one more key, sweeping stale entries when that is due.
    fn make_room_for_key(&mut self) -> bool {
        let keys = self.storage.keys().len();
        let due = keys >= next_sweep(self.keys_after_sweep);
        if due || self.storage.keys().is_full() {
            self.sweep_keys();
        }
        !self.storage.keys().is_full()
    }
}

/// How many keys the table holds when the next sweep of stale keys is due, `after` keys
/// having been left by the last one: sweeps stay amortised O(1) per new key.
fn next_sweep(after: usize) -> usize {
    2 * after + 64
}

/// Iterator over a range of rounds (the run being round `rounds()`), in delivery order.
pub(crate) struct RoundsIter<'a, K, T> {
    walk: &'a dyn Walk<K, T>,
    round: usize,
    end_round: usize,
    cursor: u64,
    remaining: usize,
}

impl<'a, K, T> RoundsIter<'a, K, T> {
    fn new(walk: &'a dyn Walk<K, T>, from: usize, to: usize, remaining: usize) -> Self {
        RoundsIter {
            walk,
            round: from,
            end_round: to.min(walk.walk_rounds() + 1),
            cursor: START,
            remaining,
        }
    }
}

impl<'a, K, T> Iterator for RoundsIter<'a, K, T> {
    type Item = (&'a K, &'a T);

    fn next(&mut self) -> Option<Self::Item> {
        while self.round < self.end_round {
            if let Some((next, key, item)) = self.walk.step(self.round, self.cursor) {
                self.cursor = next;
                self.remaining = self.remaining.saturating_sub(1);
                return Some((key, item));
            }
            self.round += 1;
            self.cursor = START;
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.remaining == usize::MAX {
            (0, None)
        } else {
            (self.remaining, Some(self.remaining))
        }
    }
}

/// Iterator over the keys of the backlog, each once, oldest head first.
pub(crate) struct BacklogKeys<'a, K, T, S> {
    engine: &'a Engine<K, T, S>,
    round: RoundsIter<'a, K, T>,
    first: usize,
    at: usize,
    limit: usize,
}

impl<'a, K, T, S> Iterator for BacklogKeys<'a, K, T, S>
where
    K: Eq + Clone,
    S: Backing<K, T>,
{
    type Item = &'a K;

    fn next(&mut self) -> Option<&'a K> {
        while self.at < self.limit {
            let (key, _) = self.round.next()?;
            let at = self.at;
            self.at += 1;
            // A key may appear more than once in a round: a heavier key, and a key whose
            // weight was lowered after its items were placed (they keep their places). Only
            // its first appearance counts. (Quadratic in the round's length, no more than
            // the item walk `backlog` makes for each key anyway.)
            let storage = &self.engine.storage;
            if !RoundsIter::new(storage, self.first, self.first + 1, usize::MAX)
                .take(at)
                .any(|(k, _)| k == key)
            {
                return Some(key);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fair::fixed;

    /// Delivering round 2^29 renumbers the idle keys' entries.
    #[test]
    fn delivery_renumbers_idle_keys() {
        let mut q: fixed::FairQueue<u8, u32, 8, 4> = fixed::FairQueue::new();
        q.engine.current = RENUMBER_EVERY - 3;
        q.push(9, 0).unwrap();
        assert_eq!(q.pop(), Some(0));
        for i in 1..=5 {
            q.push(1, i).unwrap();
            assert_eq!(q.pop(), Some(i));
        }
        assert!(q.engine.current > RENUMBER_EVERY);
        let idle = q.engine.storage.keys().get(&9).copied();
        assert_eq!(idle.map(KeyState::bits), Some((RENUMBER_EVERY as u32) << 1));
    }

    /// Runs the same pushes, pops, removals and weights on two queues, the second starting
    /// at round `start`, and checks that they deliver the same items.
    fn same_schedule_from(start: u64) {
        let mut plain: fixed::FairQueue<u8, u32, 64, 16> = fixed::FairQueue::new();
        let mut moved: fixed::FairQueue<u8, u32, 64, 16> = fixed::FairQueue::new();
        moved.engine.current = start;
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x % 7) as u8;
            match (x >> 8) % 16 {
                0..=7 => assert_eq!(plain.push(key, step).is_ok(), moved.push(key, step).is_ok()),
                8 => {
                    let weight = (x >> 16) as u32 % 4;
                    assert_eq!(
                        plain.set_weight(&key, weight).is_ok(),
                        moved.set_weight(&key, weight).is_ok()
                    );
                }
                9 if (x >> 20) % 8 == 0 => {
                    assert_eq!(plain.remove_key(&key), moved.remove_key(&key));
                }
                _ => assert_eq!(plain.pop_with_key(), moved.pop_with_key(), "step {step}"),
            }
        }
        assert!(
            moved.engine.current > start + 1_000,
            "the test crossed many rounds"
        );
    }

    #[test]
    fn the_schedule_does_not_depend_on_the_round_number() {
        // Across the 31-bit wrap of a key's round, and across renumbering points.
        same_schedule_from((1 << 31) - 1_000);
        same_schedule_from((1 << 32) - 1_000);
        same_schedule_from(RENUMBER_EVERY - 1_000);
        same_schedule_from(3 * RENUMBER_EVERY - 10);
        same_schedule_from(u64::MAX / 2);
    }

    /// An unbounded queue refuses the item past [`MAX_LEN`] (beyond it a key's round would
    /// not fit in its entry).
    #[test]
    #[cfg(feature = "alloc")]
    fn no_queue_holds_more_than_max_len() {
        let mut q = crate::fair::FairQueue::unbounded();
        assert_eq!(q.capacity(), None);
        q.push(1u8, ()).unwrap();
        q.engine.room = 0;
        assert!(q.is_full());
        let refused = q.push(2, ()).unwrap_err();
        assert_eq!(refused.len, MAX_LEN);
        assert_eq!(
            MAX_LEN, 1_073_741_822,
            "the bound documented on FairQueueBase"
        );
        // A capacity above the bound is capped by it, for pushes of known keys too.
        let mut q = crate::fair::FairQueue::with_capacity(MAX_LEN + 10);
        q.push(1u8, ()).unwrap();
        q.engine.room = 1;
        assert!(!q.is_full());
        q.push(1, ()).unwrap();
        assert!(q.is_full());
        let refused = q.push(1, ()).unwrap_err();
        assert_eq!((refused.key, refused.len), (1, MAX_LEN));
        assert_eq!(q.capacity(), Some(MAX_LEN + 10));
    }
}
