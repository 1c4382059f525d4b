//! The entries of weighted keys, kept beside the key table.
//!
//! A key of weight 1 needs only its last round, which fits the 4-byte entry of the key table
//! (see [`KeyState`](super::key_state::KeyState)); a weighted key also needs its weight and how
//! many items sit in its last round. Those live here, in a slab indexed from the key's entry,
//! so that the table every push reads stays small. Every slot belongs to exactly one entry of
//! the key table and is freed with it, so the slab never holds more slots than the table has
//! entries: a fixed queue's slab of `KEYS` slots cannot overflow.

use super::key_state::Weighted;

/// The vector the slab keeps its slots in: `alloc`'s `Vec` or a `heapless::Vec`.
pub trait Slots {
    /// The slots.
    fn as_slice(&self) -> &[Weighted];
    /// The slots, mutably.
    fn as_mut_slice(&mut self) -> &mut [Weighted];
    /// Appends a slot; false when there is no room.
    fn push(&mut self, slot: Weighted) -> bool;
    /// Drops every slot.
    fn clear(&mut self);
}

#[cfg(feature = "alloc")]
impl Slots for alloc::vec::Vec<Weighted> {
    fn as_slice(&self) -> &[Weighted] {
        self
    }
    fn as_mut_slice(&mut self) -> &mut [Weighted] {
        self
    }
    fn push(&mut self, slot: Weighted) -> bool {
        alloc::vec::Vec::push(self, slot);
        true
    }
    fn clear(&mut self) {
        *self = alloc::vec::Vec::new();
    }
}

impl<const N: usize> Slots for heapless::Vec<Weighted, N> {
    fn as_slice(&self) -> &[Weighted] {
        self
    }
    fn as_mut_slice(&mut self) -> &mut [Weighted] {
        self
    }
    fn push(&mut self, slot: Weighted) -> bool {
        heapless::Vec::push(self, slot).is_ok()
    }
    fn clear(&mut self) {
        heapless::Vec::clear(self);
    }
}

/// No free slot.
const NONE: u32 = u32::MAX;

/// A slab of weighted keys' entries; free slots are listed from `free` (a free slot has
/// weight 0 and the next free slot in its round field).
pub struct Weights<V> {
    slots: V,
    free: u32,
    /// Slots in use.
    used: usize,
}

impl<V: Slots> Weights<V> {
    pub(crate) const fn new(slots: V) -> Self {
        Weights {
            slots,
            free: NONE,
            used: 0,
        }
    }

    /// The entry in slot `at` (a slot the key table points to).
    #[inline]
    pub(crate) fn get(&self, at: u32) -> Weighted {
        self.slots
            .as_slice()
            .get(at as usize)
            .copied()
            .unwrap_or(Weighted::FREE)
    }

    /// The entry in slot `at`, mutably; `None` only if `at` is not a slot (never, for an
    /// index taken from the key table).
    #[inline]
    pub(crate) fn get_mut(&mut self, at: u32) -> Option<&mut Weighted> {
        self.slots.as_mut_slice().get_mut(at as usize)
    }

    /// Stores `entry` in a free slot and returns its index, or `None` when a fixed slab is
    /// full (never while it has as many slots as the key table has entries).
    pub(crate) fn insert(&mut self, entry: Weighted) -> Option<u32> {
        let at = if self.free != NONE {
            let at = self.free;
            let slot = self.slots.as_mut_slice().get_mut(at as usize)?;
            self.free = slot.next_free();
            *slot = entry;
            at
        } else {
            // A key's entry keeps the slot's index in 31 bits.
            let at = u32::try_from(self.slots.as_slice().len())
                .ok()
                .filter(|&at| at < 1 << 31)?;
            if !self.slots.push(entry) {
                return None;
            }
            at
        };
        self.used += 1;
        Some(at)
    }

    /// Frees slot `at`; the slab is emptied when its last slot goes.
    pub(crate) fn remove(&mut self, at: u32) {
        let free = self.free;
        if let Some(slot) = self.slots.as_mut_slice().get_mut(at as usize) {
            *slot = Weighted::free_slot(free);
            self.free = at;
            self.used -= 1;
        }
        if self.used == 0 {
            self.slots.clear();
            self.free = NONE;
        }
    }

    /// Applies `f` to every slot in use.
    pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(&mut Weighted)) {
        for slot in self.slots.as_mut_slice() {
            if !slot.is_free() {
                f(slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(weight: u16) -> Weighted {
        let mut entry = Weighted::free_slot(0);
        entry.set_weight(weight);
        entry
    }

    /// Freed slots are reused before the slab grows, a fixed slab refuses past its room, and
    /// the last removal empties the slab.
    #[test]
    fn slots_are_reused_and_given_back() {
        let mut slab: Weights<heapless::Vec<Weighted, 3>> = Weights::new(heapless::Vec::new());
        let a = slab.insert(entry(2));
        let b = slab.insert(entry(3));
        let c = slab.insert(entry(4));
        assert_eq!((a, b, c), (Some(0), Some(1), Some(2)));
        assert_eq!(
            slab.insert(entry(5)),
            None,
            "a fixed slab is full at its room"
        );
        slab.remove(1);
        assert!(slab.get(1).is_free());
        assert_eq!(slab.insert(entry(6)), Some(1), "the freed slot first");
        assert_eq!(slab.get(1).weight(), 6);
        let mut seen = 0;
        slab.for_each_mut(|_| seen += 1);
        assert_eq!(seen, 3);
        for at in [0, 1, 2] {
            slab.remove(at);
        }
        assert!(
            slab.slots.as_slice().is_empty(),
            "emptied with its last slot"
        );
        assert_eq!(slab.insert(entry(7)), Some(0));
    }
}
