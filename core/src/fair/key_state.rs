//! What the key table remembers about each key: the round of its last queued item, packed
//! into 4 bytes ([`KeyState`]), or for a weighted key a slot of the weights slab
//! ([`Weighted`]), and the arithmetic of rounds kept modulo 2^31 that both use.
//!
//! The engine (`engine.rs`) decides *when* a key's entry is placed, settled or renumbered;
//! this module decides what those steps do to the entry. The storages hold the entries in
//! their key tables and weights slabs without looking inside them.

/// The largest weight a key can have: heavier weights count as this one.
pub(crate) const MAX_WEIGHT: u32 = u16::MAX as u32;

/// The most items a queue holds, whatever its capacity: a key's last round is never more
/// than this many rounds after the one being delivered, so a key's entry can keep its round
/// in 31 bits (see [`KeyState`]).
pub(crate) const MAX_LEN: usize = (1 << 30) - 2;

/// Every this many rounds, the entries of keys with nothing queued are brought up to the
/// round being delivered (see [`KeyState`]).
pub(crate) const RENUMBER_EVERY: u64 = 1 << 29;

/// The flag of an entry whose state lives in the weights slab (the round, modulo 2^31, is
/// kept in the 31 bits above it).
const WEIGHTED: u32 = 1;

/// How many rounds after `current` the round `tail` is (kept modulo 2^31 in the top 31
/// bits, see [`round_bits`]): the wrapping distance, sign-extended from 31 bits.
#[inline(always)]
fn distance(tail: u32, current: u64) -> i32 {
    (tail.wrapping_sub(round_bits(current)) as i32) >> 1
}

/// Round `current + at`, modulo 2^31, in the top 31 bits.
#[inline(always)]
fn round_after(current: u64, at: u32) -> u32 {
    (current as u32).wrapping_add(at) << 1
}

/// Round `round`, modulo 2^31, in the top 31 bits.
#[inline(always)]
fn round_bits(round: u64) -> u32 {
    (round as u32) << 1
}

/// What the key table remembers about a key: 4 bytes, so that a `u32` key's entry takes 8.
/// Every push reads and writes its key's entry, and with many keys the table is larger than
/// the cache: a smaller entry is fewer cache misses (at 65,536 keys, 16.2-16.9 ns per
/// push+pop against 17.1-18.3 with an 8-byte entry). Where the table fits the first-level
/// cache the smaller slot measured slower instead, with as many instructions, for a reason
/// not found; `benches/results/fair.md` (*4-byte key entries*) has the numbers.
///
/// For a key of weight 1 the entry is the round of its last queued item; a weighted key's
/// entry is flagged (the low bit) and points to a [`Weighted`] entry in the storage's
/// weights slab, which keeps the weight and how many items sit in that round as well.
///
/// Rounds are kept modulo 2^31 (in the top 31 bits) and read as their wrapping distance from the round being
/// delivered, which is exact while that distance is below 2^30 either way: a key with
/// queued items is at most [`MAX_LEN`] rounds ahead, and a key with none falls behind by
/// one round per round delivered until [`KeyState::renumber`] (every [`RENUMBER_EVERY`]
/// rounds) brings it back.
#[derive(Clone, Copy, Debug)]
pub struct KeyState(u32);

impl KeyState {
    /// The raw entry (tests read renumbered rounds off it).
    #[cfg(test)]
    pub(crate) fn bits(self) -> u32 {
        self.0
    }

    /// The entry of a weight-1 key with nothing queued while round `current` is delivered.
    pub(crate) fn fresh(current: u64) -> Self {
        KeyState(round_bits(current))
    }

    /// The entry of a weighted key whose state is in slot `at` of the weights slab.
    pub(crate) fn weighted(at: u32) -> Self {
        KeyState(at << 1 | WEIGHTED)
    }

    /// The weights slab's slot of a weighted key, `None` for a weight-1 key.
    #[inline(always)]
    pub(crate) fn slot(self) -> Option<u32> {
        (self.0 & WEIGHTED != 0).then_some(self.0 >> 1)
    }

    /// How many rounds after `current` a weight-1 key's last item is (0 or less: none is
    /// queued after the pending snapshot).
    #[inline(always)]
    pub(crate) fn ahead(self, current: u64) -> i32 {
        distance(self.0, current)
    }

    /// Places one more item of a weight-1 key while round `current` is being delivered,
    /// returning how many rounds after `current` its round is (at least 1): the round after
    /// the key's last one, and never earlier than the round after `current` (the pending
    /// snapshot is closed). Branch-free: whether the key is backlogged varies from push to
    /// push, so a branch on it would mispredict.
    #[inline(always)]
    pub(crate) fn place(&mut self, current: u64) -> usize {
        // In the entry's units (two per round, the flag being clear): how far after
        // `current` the key's last item is, 0 when it is not after it. The same as
        // `ahead(current).max(0)` doubled, in fewer instructions.
        let now = round_bits(current);
        let ahead = (self.0.wrapping_sub(now) as i32).max(0) as u32;
        self.0 = now.wrapping_add(ahead).wrapping_add(2);
        (ahead >> 1) as usize + 1
    }

    /// A weight-1 key's last queued item is in `round`.
    pub(crate) fn settle(&mut self, round: u64) {
        self.0 = round_bits(round);
    }

    /// Brings the entry of a weight-1 key with nothing queued up to round `current` (a place
    /// changes nothing for it: its next item goes to the round after `current` either way),
    /// so that it never falls 2^30 rounds behind.
    pub(crate) fn renumber(&mut self, current: u64) {
        if self.slot().is_none() && self.ahead(current) <= 0 {
            *self = KeyState::fresh(current);
        }
    }
}

/// A weighted key's state, in the weights slab (see [`KeyState`]): 8 bytes.
#[derive(Clone, Copy, Debug)]
pub struct Weighted {
    /// The round of the key's last queued item, modulo 2^31 (for a free slot: the next free
    /// slot).
    tail: u32,
    /// How many of the key's items sit in round `tail` (at most `weight`).
    used: u16,
    /// Items per round while backlogged, 1 to [`MAX_WEIGHT`]; 0 marks a free slot.
    weight: u16,
}

impl Weighted {
    /// What a read of a slot that does not exist gives (never, for a slot a key points to).
    pub(crate) const FREE: Weighted = Weighted::free_slot(u32::MAX);

    /// A free slot, followed in the free list by slot `next`.
    pub(crate) const fn free_slot(next: u32) -> Self {
        Weighted {
            tail: next,
            used: 0,
            weight: 0,
        }
    }

    pub(crate) fn is_free(&self) -> bool {
        self.weight == 0
    }

    /// Items per round while backlogged (0 for a free slot).
    pub(crate) fn weight(&self) -> u16 {
        self.weight
    }

    /// Gives the key `weight` places per round from its next round on.
    pub(crate) fn set_weight(&mut self, weight: u16) {
        self.weight = weight;
    }

    /// The entry of a weight-1 key, `plain`, that now gets `weight` places per round: its
    /// items so far went one per round, so its last round holds one of them.
    pub(crate) fn from_plain(plain: KeyState, weight: u16) -> Self {
        Weighted {
            tail: plain.0,
            used: 1,
            weight,
        }
    }

    pub(crate) fn next_free(&self) -> u32 {
        self.tail
    }

    /// The state of a key with nothing queued while round `current` is being delivered.
    pub(crate) fn fresh(current: u64, weight: u16) -> Self {
        Weighted {
            tail: round_bits(current),
            used: 0,
            weight,
        }
    }

    /// How many rounds after `current` the key's last item is.
    #[inline]
    pub(crate) fn ahead(&self, current: u64) -> i32 {
        distance(self.tail, current)
    }

    /// As [`KeyState::place`], filling `weight` places in a round before moving on.
    #[inline]
    pub(crate) fn place(&mut self, current: u64) -> usize {
        let ahead = self.ahead(current);
        if self.used < self.weight && ahead > 0 {
            self.used += 1;
            return ahead as usize;
        }
        let at = ahead.max(0) as u32 + 1;
        self.tail = round_after(current, at);
        self.used = 1;
        at as usize
    }

    /// The key's last queued item is in `round`.
    pub(crate) fn settle(&mut self, round: u64) {
        self.tail = round_bits(round);
        self.used = 1;
    }

    /// As [`KeyState::renumber`].
    pub(crate) fn renumber(&mut self, current: u64) {
        if self.ahead(current) <= 0 {
            self.tail = round_bits(current);
        }
    }

    /// True when the entry carries information beyond what a fresh weight-1 entry would.
    pub(crate) fn is_live(&self, current: u64) -> bool {
        self.ahead(current) > 0 || self.weight != 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key's entry keeps its round in 31 bits: placing across the 2^31 boundary counts on.
    #[test]
    fn places_count_on_across_the_31_bit_wrap() {
        let current = (1u64 << 32) - 2;
        let mut state = KeyState::fresh(current);
        assert_eq!(state.place(current), 1);
        assert_eq!(state.place(current), 2);
        assert_eq!(state.place(current), 3); // round 2^32 + 1, stored as 1
        assert_eq!(state.0, 1 << 1);
        assert_eq!(state.ahead(current), 3);
        assert_eq!(
            state.place(current + 5),
            1,
            "behind the pending round: the next one"
        );
        assert_eq!(
            state.slot(),
            None,
            "the weighted flag is never set by a place"
        );
        let mut far = KeyState::fresh((3 << 30) - 1);
        assert_eq!(far.place((3 << 30) - 1), 1); // round 3 * 2^30, stored as 2^30
        assert_eq!(far.slot(), None);
        assert_eq!(far.ahead(3 << 30), 0);
        let mut heavy = Weighted::fresh(current, 2);
        assert_eq!([heavy.place(current), heavy.place(current)], [1, 1]);
        assert_eq!([heavy.place(current), heavy.place(current)], [2, 2]);
        assert_eq!(heavy.place(current), 3);
    }

    /// Without renumbering, an idle key's entry would read as 2^30 rounds ahead once it is
    /// that far behind; renumbered every 2^29 rounds it never gets there.
    #[test]
    fn renumbering_keeps_idle_keys_behind() {
        let mut idle = KeyState::fresh(0);
        idle.place(0);
        let far = 1u64 << 30;
        assert!(
            idle.ahead(far + 2) > 0,
            "the ambiguity renumbering prevents"
        );
        let mut current = 1;
        while current < 4 * RENUMBER_EVERY {
            current += RENUMBER_EVERY - current % RENUMBER_EVERY;
            idle.renumber(current);
            assert!(idle.ahead(current + RENUMBER_EVERY - 1) <= 0);
        }
        assert_eq!(idle.place(current + 7), 1);
        // A backlogged key's entry is left alone.
        let mut busy = KeyState::fresh(current);
        busy.place(current);
        busy.place(current);
        busy.renumber(current);
        assert_eq!(busy.ahead(current), 2);
    }
}
