//! The key table of the heap-backed queue: `hashbrown`'s `HashTable` of (key, entry) pairs
//! and the hasher beside it.
//!
//! A `hashbrown::HashMap` would do the same, but its lookups first test whether the map is
//! empty (an empty map has no table to probe); every push looks its key up, and the test is
//! two of the instructions of a push and pop. This table is never probed without a hash, so
//! it needs no such test: an empty `HashTable` probes a static group of empty slots.

use core::hash::{BuildHasher, Hash};

use hashbrown::HashTable;

use super::key_state::KeyState;
use super::storage::KeyTable;

/// Every key's [`KeyState`], by key.
pub struct KeyMap<K, H> {
    table: HashTable<(K, KeyState)>,
    hasher: H,
}

impl<K, H> KeyMap<K, H> {
    /// An empty table hashing with `hasher`.
    pub(crate) const fn with_hasher(hasher: H) -> Self {
        KeyMap {
            table: HashTable::new(),
            hasher,
        }
    }
}

impl<K: Hash, H: BuildHasher> KeyMap<K, H> {
    #[inline(always)]
    fn hash(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }
}

impl<K: Eq + Hash, H: BuildHasher> KeyTable<K> for KeyMap<K, H> {
    #[inline]
    fn get(&self, key: &K) -> Option<&KeyState> {
        let found = self.table.find(self.hash(key), |(k, _)| k == key)?;
        Some(&found.1)
    }

    #[inline]
    fn get_mut(&mut self, key: &K) -> Option<&mut KeyState> {
        let hash = self.hash(key);
        let found = self.table.find_mut(hash, |(k, _)| k == key)?;
        Some(&mut found.1)
    }

    fn insert(&mut self, key: K, state: KeyState) -> bool {
        let hash = self.hash(&key);
        let hasher = &self.hasher;
        match self.table.find_mut(hash, |(k, _)| *k == key) {
            Some(found) => found.1 = state,
            None => {
                self.table
                    .insert_unique(hash, (key, state), |(k, _)| hasher.hash_one(k));
            }
        }
        true
    }

    fn remove(&mut self, key: &K) {
        let hash = self.hash(key);
        if let Ok(found) = self.table.find_entry(hash, |(k, _)| k == key) {
            found.remove();
        }
    }

    fn retain(&mut self, mut keep: impl FnMut(&K, &mut KeyState) -> bool) {
        self.table.retain(|(key, state)| keep(key, state));
    }

    fn len(&self) -> usize {
        self.table.len()
    }

    fn is_full(&self) -> bool {
        false
    }

    fn shrink(&mut self, keep: usize) {
        // Room for twice `keep`: hashbrown clears the tombstones of erased entries in place
        // only while the entries fill at most half of the table, and grows it otherwise. A
        // table shrunk to `keep` grew back within a few sweeps, then was shrunk again.
        // (`capacity()` counts the room the tombstones have not taken yet, so it reads low
        // between rehashes, never high.)
        if self.table.capacity() > 4 * keep {
            let hasher = &self.hasher;
            self.table.shrink_to(2 * keep, |(k, _)| hasher.hash_one(k));
        }
    }
}
