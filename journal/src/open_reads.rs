//! A reader's open reads, ordered by id.
//!
//! Reads are handed out in id order and mostly committed in that order, so the set lives in
//! a deque sorted by id: opening appends at the back, committing the oldest pops the front,
//! both O(1). A commit out of order leaves a tombstone (found by binary search), cleared when
//! it reaches the front, or all at once when tombstones outnumber live entries. An aborted
//! item opened again is older than the rest and goes in near the front.

use std::collections::VecDeque;

use crate::pos::Pos;

/// Where an item lives in the journal, kept for open and aborted reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Located {
    pub(crate) pos: Pos,
    pub(crate) len: u64,
    pub(crate) error_count: u32,
}

#[derive(Debug, Default)]
pub(crate) struct OpenReads {
    entries: VecDeque<(u64, Option<Located>)>,
    tombstones: usize,
}

impl OpenReads {
    pub(crate) fn insert(&mut self, id: u64, loc: Located) {
        match self.entries.back() {
            None => self.entries.push_back((id, Some(loc))),
            Some(&(last, _)) if last < id => self.entries.push_back((id, Some(loc))),
            _ => match self.entries.binary_search_by_key(&id, |e| e.0) {
                Ok(i) => {
                    if self.entries[i].1.is_none() {
                        self.tombstones -= 1;
                    }
                    self.entries[i].1 = Some(loc);
                }
                Err(i) => self.entries.insert(i, (id, Some(loc))),
            },
        }
    }

    pub(crate) fn get(&self, id: u64) -> Option<&Located> {
        if let Some((first, loc)) = self.entries.front()
            && *first == id
        {
            return loc.as_ref();
        }
        let i = self.entries.binary_search_by_key(&id, |e| e.0).ok()?;
        self.entries[i].1.as_ref()
    }

    pub(crate) fn remove(&mut self, id: u64) -> Option<Located> {
        let i = match self.entries.front() {
            Some(&(first, _)) if first == id => 0,
            _ => self.entries.binary_search_by_key(&id, |e| e.0).ok()?,
        };
        let loc = self.entries[i].1.take()?;
        if i == 0 {
            self.entries.pop_front();
            while self.entries.front().is_some_and(|e| e.1.is_none()) {
                self.entries.pop_front();
                self.tombstones -= 1;
            }
        } else {
            self.tombstones += 1;
            if self.tombstones > 32 && self.tombstones * 2 > self.entries.len() {
                self.entries.retain(|e| e.1.is_some());
                self.tombstones = 0;
            }
        }
        Some(loc)
    }

    /// The oldest open read.
    pub(crate) fn first(&self) -> Option<(u64, &Located)> {
        // The front is never a tombstone.
        self.entries
            .front()
            .and_then(|(id, loc)| loc.as_ref().map(|l| (*id, l)))
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len() - self.tombstones
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The open reads in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &Located)> {
        self.entries
            .iter()
            .filter_map(|(id, loc)| loc.as_ref().map(|l| (*id, l)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::pos::Pos;

    fn loc(n: u64) -> Located {
        Located {
            pos: Pos { seg: 1, off: n },
            len: n,
            error_count: 0,
        }
    }

    proptest! {
        /// Behaves like a `BTreeMap` under any mix of operations.
        #[test]
        fn matches_a_sorted_map(ops in proptest::collection::vec((0u8..3, 0u64..64), 0..400)) {
            let mut open = OpenReads::default();
            let mut model: BTreeMap<u64, u64> = BTreeMap::new();
            let mut next = 0u64;
            for (op, k) in ops {
                match op {
                    // Open the next id, or re-open an older one (an aborted item).
                    0 => {
                        let id = if k % 4 == 0 && next > 0 { k % next } else { next += 1; next };
                        if let std::collections::btree_map::Entry::Vacant(e) = model.entry(id) {
                            open.insert(id, loc(id));
                            e.insert(id);
                        }
                    }
                    _ => {
                        let id = if k % 2 == 0 { model.keys().next().copied().unwrap_or(k) } else { k % (next + 1) };
                        prop_assert_eq!(open.remove(id).map(|l| l.len), model.remove(&id));
                    }
                }
                prop_assert_eq!(open.len(), model.len());
                prop_assert_eq!(open.first().map(|(id, _)| id), model.keys().next().copied());
                let ids: Vec<u64> = open.iter().map(|(id, _)| id).collect();
                prop_assert_eq!(ids, model.keys().copied().collect::<Vec<_>>());
                for (&id, &v) in &model {
                    prop_assert_eq!(open.get(id).map(|l| l.len), Some(v));
                }
            }
        }
    }
}
