//! What the scheduling engine needs from its storage, and nothing else.
//!
//! The engine ([`super::engine`]) decides which round an item joins; a storage keeps the
//! rounds. Two storages exist: [`super::heap::HeapStorage`] (each round a contiguous,
//! pooled buffer) and [`super::fixed::FixedStorage`] (a `heapless` slab with no allocator).
//!
//! A storage holds:
//!
//! * the *rounds*: a deque of item sequences, index 0 being the front (the pending snapshot
//!   when one is pending). Items are appended to any round and taken from the front round;
//! * the *run*: one more sequence after the last round, holding a tail of rounds that each
//!   contain a single item of one key (a key that is the only one with a deep backlog). One
//!   item there is one round, so a run of a thousand rounds costs one buffer, not a thousand;
//! * the key table, and beside it the weights slab of weighted keys.
//!
//! [`Storage`] is sealed: its methods are the engine's business and not part of the public API.

/// The storage of a [`FairQueueBase`](super::FairQueueBase): [`HeapStorage`](super::HeapStorage)
/// or [`FixedStorage`](super::fixed::FixedStorage). Sealed; it has no public methods.
pub trait Storage<K, T>: backing::Backing<K, T> {}

impl<K, T, S: backing::Backing<K, T>> Storage<K, T> for S {}

pub(crate) mod backing {
    use crate::fair::key_state::KeyState;
    use crate::fair::weights::{Slots, Weights};

    /// The operations the engine performs on its storage. Round indices are relative to the
    /// front; callers never pass an index out of range.
    pub trait Backing<K, T>: Walk<K, T> {
        /// The key table type.
        type Keys: KeyTable<K>;
        /// The vector of the weights slab.
        type Slots: Slots;

        /// The key table.
        fn keys(&self) -> &Self::Keys;
        /// The key table, mutably.
        fn keys_mut(&mut self) -> &mut Self::Keys;
        /// The weights slab: the state of weighted keys, which their table entries point to.
        fn weights(&self) -> &Weights<Self::Slots>;
        /// The key table and the weights slab, mutably.
        fn keys_and_weights_mut(&mut self) -> (&mut Self::Keys, &mut Weights<Self::Slots>);

        /// Number of rounds (the run not included).
        fn rounds(&self) -> usize;
        /// Items in round `index`.
        fn round_len(&self, index: usize) -> usize;
        /// Appends an item to round `index`, or hands it back when `index` is past the last
        /// round (the caller then places it at the run) or, in a storage that implements
        /// [`round_push_grow`](Self::round_push_grow), when the round's buffer is full.
        fn round_push(&mut self, index: usize, key: K, item: T) -> Result<(), (K, T)>;
        /// Like [`round_push`](Self::round_push), and makes room in round `index` when
        /// `round_push` handed the item back for want of it (a storage may keep that out of
        /// `round_push`, the path every push takes).
        fn round_push_grow(&mut self, index: usize, key: K, item: T) -> Result<(), (K, T)> {
            self.round_push(index, key, item)
        }
        /// Appends a new round holding one item; `size` is how many items rounds hold on
        /// average (a hint for the round's buffer).
        fn new_round(&mut self, key: K, item: T, size: usize);
        /// Takes the oldest item of round 0 and drops the round if that emptied it (the
        /// flag says so). Round 0 is never empty.
        fn front_pop(&mut self) -> (K, T, bool);
        /// Takes the oldest item of round 0 when the storage holds it at hand: in a
        /// storage that reads the pending snapshot through a buffer (see
        /// [`HeapStorage`](crate::fair::HeapStorage)), the buffer's next item, with a flag
        /// that says whether that was the round's last (the round is then dropped, as
        /// [`front_pop`](Self::front_pop) does). `None` when there is no such item, as
        /// always while no snapshot is pending; the caller then goes the long way.
        fn front_pop_quick(&mut self) -> Option<(K, T, bool)> {
            None
        }
        /// Drops the (empty) front round.
        fn drop_empty_front(&mut self);
        /// Drops the (empty) back round.
        fn drop_empty_back(&mut self);
        /// Moves every item of `key` out of round `index`, oldest first.
        fn round_remove_key(&mut self, index: usize, key: &K, sink: &mut dyn FnMut(T)) -> usize;

        /// Items in the run.
        fn run_len(&self) -> usize;
        /// The key of the run's items, if the run is not empty.
        fn run_key(&self) -> Option<&K>;
        /// Appends to the run.
        fn run_push(&mut self, key: K, item: T);
        /// Appends to the (non-empty) run if its buffer has room, else hands the item back
        /// for [`run_push`](Self::run_push), which makes room.
        fn run_push_within(&mut self, key: K, item: T) -> Result<(), (K, T)> {
            self.run_push(key, item);
            Ok(())
        }
        /// Takes the run's oldest item.
        fn run_pop(&mut self) -> Option<(K, T)>;

        /// Returns memory that `len` queued items do not need (called when the queue
        /// drains; keeps a small working set so a queue that hovers near empty does not
        /// allocate on every push).
        fn trim(&mut self, len: usize);
    }

    /// Per-key scheduling state, stored in a hash table.
    pub trait KeyTable<K> {
        /// The state of `key`.
        fn get(&self, key: &K) -> Option<&KeyState>;
        /// The state of `key`, mutably.
        fn get_mut(&mut self, key: &K) -> Option<&mut KeyState>;
        /// Inserts a new key; false when the table is full.
        fn insert(&mut self, key: K, state: KeyState) -> bool;
        /// Forgets `key`.
        fn remove(&mut self, key: &K);
        /// Keeps the entries that pass `keep` (which may update them).
        fn retain(&mut self, keep: impl FnMut(&K, &mut KeyState) -> bool);
        /// Number of entries.
        fn len(&self) -> usize;
        /// True when `insert` of a new key would fail.
        fn is_full(&self) -> bool;
        /// Gives back table memory well beyond room for `keep` entries (the most the table
        /// will hold before the next sweep, so growing back to it never reallocates).
        fn shrink(&mut self, keep: usize);
    }

    /// Read access for iterators: walks one round (or the run) with an opaque cursor.
    ///
    /// `round == walk_rounds()` designates the run. `cursor` is [`START`] for the first item;
    /// each call returns the item and the cursor of the next one.
    pub trait Walk<K, T> {
        /// The item at `cursor` in `round`, with the next cursor.
        fn step(&self, round: usize, cursor: u64) -> Option<(u64, &K, &T)>;
        /// Number of rounds, as [`Backing::rounds`].
        fn walk_rounds(&self) -> usize;
    }

    /// The cursor of a round's first item.
    pub const START: u64 = u64::MAX;
}

pub(crate) use backing::{Backing, KeyTable, Walk, START};
