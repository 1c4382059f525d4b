//! The scheduling engine shared by the heap-backed and the fixed-capacity fair queues.
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
//! Because pushes arrive in sequence order, appending each item to the tail of its round's list
//! keeps every round sorted by sequence number for free. Delivery is then "pop the head of the
//! front round; drop the round when it empties". Taking a snapshot is just advancing
//! `current`: no scan, no sort, no allocation. Every key with queued items has its head in
//! round `current + 1`, and a key's items fill consecutive rounds, so rounds never have gaps.
//!
//! Items live in a slab of slots (a free list, so no allocation per push once warmed up) and
//! are linked per round through `next` indices.

use core::marker::PhantomData;

use super::Full;

/// Index value meaning "no slot".
pub(crate) const NIL: u32 = u32::MAX;

/// One slab slot: a queued item or a link in the free list.
pub(crate) enum Slot<K, T> {
    Occupied { key: K, item: T, next: u32 },
    Vacant { next_free: u32 },
}

/// A round: a singly linked list of slots, oldest first.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Round {
    pub(crate) head: u32,
    pub(crate) tail: u32,
    pub(crate) len: u32,
}

impl Round {
    pub(crate) const EMPTY: Round = Round {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}

/// What the queue remembers about a key.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyState {
    /// The round of the key's last queued item (0 = none yet).
    pub(crate) tail_round: u64,
    /// How many of the key's items sit in `tail_round`.
    pub(crate) used: u32,
    /// Items per round while backlogged.
    pub(crate) weight: u32,
}

impl KeyState {
    const FRESH: KeyState = KeyState {
        tail_round: 0,
        used: 0,
        weight: 1,
    };

    /// Places one more item of this key while round `current` is being delivered, returning
    /// its round: the key's last round while it has places left there, else the next one, and
    /// never earlier than the round after `current` (the pending snapshot is closed).
    fn place(&mut self, current: u64) -> u64 {
        if self.tail_round > current && self.used < self.weight {
            self.used += 1;
        } else {
            self.tail_round = (self.tail_round + 1).max(current + 1);
            self.used = 1;
        }
        self.tail_round
    }

    /// True when the entry carries information beyond what a fresh entry would.
    fn is_live(&self, current: u64) -> bool {
        self.tail_round > current || self.weight != 1
    }
}

/// Slot storage: a growable or fixed vector of slots.
pub(crate) trait Slots<K, T> {
    fn slots(&self) -> &[Slot<K, T>];
    fn slots_mut(&mut self) -> &mut [Slot<K, T>];
    /// Appends a slot, or gives it back when storage is exhausted.
    fn push_slot(&mut self, slot: Slot<K, T>) -> Result<(), Slot<K, T>>;
}

/// Round storage: a double-ended queue with random access.
pub(crate) trait Rounds {
    fn len(&self) -> usize;
    fn get(&self, index: usize) -> Round;
    fn get_mut(&mut self, index: usize) -> &mut Round;
    /// Appends an empty round; false when storage is exhausted.
    fn push_back_empty(&mut self) -> bool;
    fn pop_front(&mut self);
    fn pop_back(&mut self);
}

/// Key table: per-key scheduling state.
pub(crate) trait Keys<K> {
    fn get(&self, key: &K) -> Option<&KeyState>;
    fn get_mut(&mut self, key: &K) -> Option<&mut KeyState>;
    /// Inserts a new key; false when the table is full.
    fn insert(&mut self, key: K, state: KeyState) -> bool;
    fn remove(&mut self, key: &K);
    fn retain(&mut self, keep: impl FnMut(&KeyState) -> bool);
    fn len(&self) -> usize;
    /// True when `insert` of a new key would fail.
    fn is_full(&self) -> bool;
}

/// The fair queue's state, generic over its storage.
pub(crate) struct Engine<K, T, S, R, M> {
    _items: PhantomData<fn() -> (K, T)>,
    slots: S,
    free: u32,
    rounds: R,
    keys: M,
    /// The round being delivered (the pending snapshot when `pending`).
    current: u64,
    /// Whether `rounds[0]` is the pending snapshot (round `current`); otherwise `rounds[0]`
    /// is round `current + 1`.
    pending: bool,
    len: usize,
    capacity: Option<usize>,
    /// Size of the key table after its last sweep (drives amortised clean-up).
    keys_after_sweep: usize,
}

impl<K, T, S, R, M> Engine<K, T, S, R, M> {
    pub(crate) const fn from_parts(slots: S, rounds: R, keys: M, capacity: Option<usize>) -> Self {
        Engine {
            _items: PhantomData,
            slots,
            free: NIL,
            rounds,
            keys,
            current: 0,
            pending: false,
            len: 0,
            capacity,
            keys_after_sweep: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn capacity(&self) -> Option<usize> {
        self.capacity
    }

    pub(crate) fn is_full(&self) -> bool {
        self.capacity.is_some_and(|cap| self.len >= cap)
    }
}

impl<K, T, S, R, M> Engine<K, T, S, R, M>
where
    K: Eq + Clone,
    S: Slots<K, T>,
    R: Rounds,
    M: Keys<K>,
{
    /// Round number of `rounds[0]`.
    fn base(&self) -> u64 {
        self.current + u64::from(!self.pending)
    }

    pub(crate) fn push(&mut self, key: K, item: T) -> Result<(), Full<K, T>> {
        // Below the bound every other resource has room: rounds are never empty, so there are
        // at most `len` of them, and the slab holds `len` items plus free slots. Only the key
        // table (fixed variant) or the u32 slot index space can still refuse.
        if self.is_full() || (self.free == NIL && self.slots.slots().len() >= NIL as usize) {
            return Err(Full {
                key,
                item,
                len: self.len,
            });
        }
        let current = self.current;
        let round = match self.keys.get_mut(&key) {
            Some(state) => state.place(current),
            None => {
                if !self.make_room_for_key() {
                    return Err(Full {
                        key,
                        item,
                        len: self.len,
                    });
                }
                let mut state = KeyState::FRESH;
                let round = state.place(current);
                let inserted = self.keys.insert(key.clone(), state);
                debug_assert!(inserted, "make_room_for_key guaranteed a free entry");
                round
            }
        };
        // Rounds are contiguous, so the target is an existing round or the next new one.
        let index = (round - self.base()) as usize;
        if index == self.rounds.len() {
            let pushed = self.rounds.push_back_empty();
            debug_assert!(pushed, "at most `len` rounds exist below the bound");
        }
        let slot = self.alloc_slot(key, item);
        let r = self.rounds.get_mut(index);
        let old_tail = r.tail;
        if r.head == NIL {
            r.head = slot;
        }
        r.tail = slot;
        r.len += 1;
        if old_tail != NIL {
            self.set_next(old_tail, slot);
        }
        self.len += 1;
        Ok(())
    }

    pub(crate) fn pop(&mut self) -> Option<(K, T)> {
        if self.len == 0 {
            return None;
        }
        if !self.pending {
            // Take the next snapshot: it is simply the front round.
            self.current += 1;
            self.pending = true;
        }
        let front = self.rounds.get_mut(0);
        let index = front.head;
        let (key, item, next) = self.take_slot(index);
        let front = self.rounds.get_mut(0);
        front.head = next;
        front.len -= 1;
        if next == NIL {
            self.rounds.pop_front();
            self.pending = false;
        }
        self.len -= 1;
        Some((key, item))
    }

    pub(crate) fn set_weight(&mut self, key: &K, weight: u32) -> bool {
        let weight = weight.max(1);
        if let Some(state) = self.keys.get_mut(key) {
            state.weight = weight;
            return true;
        }
        if !self.make_room_for_key() {
            return false;
        }
        self.keys.insert(
            key.clone(),
            KeyState {
                weight,
                ..KeyState::FRESH
            },
        )
    }

    pub(crate) fn weight(&self, key: &K) -> u32 {
        self.keys.get(key).map_or(1, |s| s.weight)
    }

    /// Removes every undelivered item of `key`, in delivery order, passing each to `sink`.
    pub(crate) fn remove_key_with(&mut self, key: &K, mut sink: impl FnMut(T)) -> usize {
        let mut removed = 0;
        for index in 0..self.rounds.len() {
            let mut prev = NIL;
            let mut cursor = self.rounds.get(index).head;
            while cursor != NIL {
                let (matches, next) = match &self.slots.slots()[cursor as usize] {
                    Slot::Occupied { key: k, next, .. } => (k == key, *next),
                    Slot::Vacant { .. } => (false, NIL),
                };
                if matches {
                    let (_, item, _) = self.take_slot(cursor);
                    if prev == NIL {
                        self.rounds.get_mut(index).head = next;
                    } else {
                        self.set_next(prev, next);
                    }
                    let round = self.rounds.get_mut(index);
                    if round.tail == cursor {
                        round.tail = prev;
                    }
                    round.len -= 1;
                    self.len -= 1;
                    removed += 1;
                    sink(item);
                } else {
                    prev = cursor;
                }
                cursor = next;
            }
        }
        // A key's items fill consecutive rounds starting at the front, so emptied rounds can
        // only be the pending snapshot or a run at the back.
        if self.rounds.len() > 0 && self.rounds.get(0).len == 0 && self.pending {
            self.rounds.pop_front();
            self.pending = false;
        }
        while self.rounds.len() > 0 && self.rounds.get(self.rounds.len() - 1).len == 0 {
            self.rounds.pop_back();
        }
        debug_assert!((0..self.rounds.len()).all(|i| self.rounds.get(i).len > 0));
        if let Some(state) = self.keys.get_mut(key) {
            if state.weight == 1 {
                self.keys.remove(key);
            } else {
                state.tail_round = 0;
                state.used = 0;
            }
        }
        removed
    }

    /// Iterates over the pending snapshot in delivery order.
    pub(crate) fn snapshot_iter(&self) -> RoundsIter<'_, K, T> {
        let rounds = usize::from(self.pending && self.rounds.len() > 0);
        self.iter_rounds(0, rounds)
    }

    /// Iterates over everything after the pending snapshot in delivery order.
    pub(crate) fn backlog_iter(&self) -> RoundsIter<'_, K, T> {
        let first = usize::from(self.pending);
        self.iter_rounds(first, self.rounds.len())
    }

    /// Iterates over every queued item in delivery order.
    pub(crate) fn iter(&self) -> RoundsIter<'_, K, T> {
        self.iter_rounds(0, self.rounds.len())
    }

    /// The keys of the backlog in the order of their heads (oldest first).
    pub(crate) fn backlog_keys(&self) -> BacklogKeys<'_, K, T, M> {
        // Every key with queued items has its head in the first round after the snapshot.
        let first = usize::from(self.pending);
        let head = if first < self.rounds.len() {
            self.rounds.get(first).head
        } else {
            NIL
        };
        BacklogKeys {
            slots: self.slots.slots(),
            round_head: head,
            cursor: head,
            keys: &self.keys,
        }
    }

    fn iter_rounds(&self, from: usize, to: usize) -> RoundsIter<'_, K, T> {
        RoundsIter {
            slots: self.slots.slots(),
            rounds: &self.rounds,
            next_round: from,
            end_round: to,
            cursor: NIL,
            remaining: (from..to).map(|i| self.rounds.get(i).len as usize).sum(),
        }
    }

    /// Ensures the key table can take one more key, sweeping stale entries when that is due.
    fn make_room_for_key(&mut self) -> bool {
        let due = self.keys.len() >= 2 * self.keys_after_sweep + 64;
        if due || self.keys.is_full() {
            let current = self.current;
            self.keys.retain(|state| state.is_live(current));
            self.keys_after_sweep = self.keys.len();
        }
        !self.keys.is_full()
    }

    /// Stores an item in a free slot; `push` checked that one exists or can be appended.
    fn alloc_slot(&mut self, key: K, item: T) -> u32 {
        let occupied = Slot::Occupied {
            key,
            item,
            next: NIL,
        };
        if self.free != NIL {
            let index = self.free;
            let slot = &mut self.slots.slots_mut()[index as usize];
            if let Slot::Vacant { next_free } = *slot {
                self.free = next_free;
            }
            *slot = occupied;
            return index;
        }
        let index = self.slots.slots().len() as u32;
        let pushed = self.slots.push_slot(occupied).is_ok();
        debug_assert!(pushed, "the bound keeps the slab within its capacity");
        index
    }

    fn take_slot(&mut self, index: u32) -> (K, T, u32) {
        let slot = core::mem::replace(
            &mut self.slots.slots_mut()[index as usize],
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
        if let Slot::Occupied { next, .. } = &mut self.slots.slots_mut()[index as usize] {
            *next = value;
        }
    }
}

/// Iterator over a range of rounds, in delivery order.
pub(crate) struct RoundsIter<'a, K, T> {
    slots: &'a [Slot<K, T>],
    rounds: &'a dyn Rounds,
    next_round: usize,
    end_round: usize,
    cursor: u32,
    remaining: usize,
}

impl<'a, K, T> Iterator for RoundsIter<'a, K, T> {
    type Item = (&'a K, &'a T);

    fn next(&mut self) -> Option<Self::Item> {
        while self.cursor == NIL {
            if self.next_round >= self.end_round {
                return None;
            }
            self.cursor = self.rounds.get(self.next_round).head;
            self.next_round += 1;
        }
        match &self.slots[self.cursor as usize] {
            Slot::Occupied { key, item, next } => {
                self.cursor = *next;
                self.remaining -= 1;
                Some((key, item))
            }
            Slot::Vacant { .. } => None,
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<K, T> ExactSizeIterator for RoundsIter<'_, K, T> {}

/// Iterator over the keys of the backlog, each once, oldest head first.
pub(crate) struct BacklogKeys<'a, K, T, M> {
    slots: &'a [Slot<K, T>],
    round_head: u32,
    cursor: u32,
    keys: &'a M,
}

impl<'a, K: Eq, T, M: Keys<K>> Iterator for BacklogKeys<'a, K, T, M> {
    type Item = &'a K;

    fn next(&mut self) -> Option<&'a K> {
        while self.cursor != NIL {
            let Slot::Occupied { key, next, .. } = &self.slots[self.cursor as usize] else {
                return None;
            };
            let here = self.cursor;
            self.cursor = *next;
            // A key of weight 1 appears once per round; heavier keys may repeat, so only their
            // first appearance in the round counts.
            let weighted = self.keys.get(key).is_some_and(|s| s.weight > 1);
            if !weighted || !appears_before(self.slots, self.round_head, here, key) {
                return Some(key);
            }
        }
        None
    }
}

fn appears_before<K: Eq, T>(slots: &[Slot<K, T>], mut cursor: u32, stop: u32, key: &K) -> bool {
    while cursor != stop && cursor != NIL {
        match &slots[cursor as usize] {
            Slot::Occupied { key: k, next, .. } => {
                if k == key {
                    return true;
                }
                cursor = *next;
            }
            Slot::Vacant { .. } => return false,
        }
    }
    false
}
