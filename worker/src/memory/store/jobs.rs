//! The store's job table: a hash map for the worker's path (enqueue, claim and settle each
//! look a job up by id) and an id order for the operator's path (lists, revivals and the
//! other sweeps that must visit jobs oldest id first).
//!
//! Ids are handed out in increasing order, so the order is an append-only vector: a removed
//! job leaves a hole that ordered walks skip, and the vector is compacted once holes make up
//! half of it (amortised O(1) per removal). A `BTreeMap` of records, which this replaces,
//! moved every record of a node on each insert and removal (records are a few hundred
//! bytes) and cost a node search on every lookup.

use hashbrown::HashMap;

use super::Record;
use crate::job::JobId;

/// Holes tolerated before a compaction is considered (small tables never compact).
const MIN_HOLES: usize = 64;

/// Every stored record, by id, with the ids in increasing order.
#[derive(Debug, Default)]
pub(super) struct Jobs {
    map: HashMap<JobId, Record>,
    /// Ids in increasing order; some may have been removed from `map` (holes).
    order: Vec<JobId>,
    /// Entries of `order` no longer in `map`.
    holes: usize,
}

impl Jobs {
    /// A table of these records (any order, ids distinct).
    pub(super) fn from_records(records: impl IntoIterator<Item = (JobId, Record)>) -> Jobs {
        let map: HashMap<JobId, Record> = records.into_iter().collect();
        let mut order: Vec<JobId> = map.keys().copied().collect();
        order.sort_unstable();
        Jobs {
            map,
            order,
            holes: 0,
        }
    }

    #[inline]
    pub(super) fn get(&self, id: &JobId) -> Option<&Record> {
        self.map.get(id)
    }

    #[inline]
    pub(super) fn get_mut(&mut self, id: &JobId) -> Option<&mut Record> {
        self.map.get_mut(id)
    }

    #[inline]
    pub(super) fn contains_key(&self, id: &JobId) -> bool {
        self.map.contains_key(id)
    }

    /// Adds a record. The store hands ids out in increasing order, so this is an append; an
    /// id below the last one is placed in order all the same.
    pub(super) fn insert(&mut self, id: JobId, record: Record) {
        if self.map.insert(id, record).is_some() {
            return; // replaced: its place in the order is kept
        }
        match self.order.last() {
            Some(&last) if last >= id => {
                let at = self.order.partition_point(|&o| o < id);
                if self.order.get(at) == Some(&id) {
                    // A hole of the same id, filled again.
                    self.holes -= 1;
                } else {
                    self.order.insert(at, id);
                }
            }
            _ => self.order.push(id),
        }
    }

    /// Takes a record out.
    pub(super) fn remove(&mut self, id: &JobId) -> Option<Record> {
        let record = self.map.remove(id)?;
        self.holes += 1;
        self.compact_if_due();
        Some(record)
    }

    /// Keeps the records for which `keep` is true and drops the others in place, in no
    /// particular order (one pass, no lookup or move per record).
    pub(super) fn retain(&mut self, mut keep: impl FnMut(JobId, &mut Record) -> bool) {
        let before = self.map.len();
        self.map.retain(|id, record| keep(*id, record));
        self.holes += before - self.map.len();
        self.compact_if_due();
    }

    fn compact_if_due(&mut self) {
        if self.holes >= MIN_HOLES && self.holes * 2 >= self.order.len() {
            let map = &self.map;
            self.order.retain(|id| map.contains_key(id));
            self.holes = 0;
        }
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every record, in no particular order (for counts and sums).
    pub(super) fn values(&self) -> impl Iterator<Item = &Record> {
        self.map.values()
    }

    /// Every record, by increasing id.
    pub(super) fn iter(&self) -> impl Iterator<Item = (JobId, &Record)> {
        self.after(None)
    }

    /// The records with an id above `after` (all when `None`), by increasing id.
    pub(super) fn after(&self, after: Option<JobId>) -> impl Iterator<Item = (JobId, &Record)> {
        let start = after.map_or(0, |after| self.order.partition_point(|&o| o <= after));
        self.order[start..]
            .iter()
            .filter_map(|id| self.map.get(id).map(|record| (*id, record)))
    }

    /// The ids of the records that pass `keep`, by increasing id.
    pub(super) fn ids_where(&self, mut keep: impl FnMut(&Record) -> bool) -> Vec<JobId> {
        self.iter()
            .filter(|(_, record)| keep(record))
            .map(|(id, _)| id)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NewJob;
    use crate::memory::store::Store;

    fn record() -> Record {
        let mut store = Store::default();
        let id = store
            .enqueue_many(vec![NewJob::new("q", "k", vec![])], 0)
            .expect("enqueue")[0];
        store.record(id).expect("record").clone()
    }

    fn ids(jobs: &Jobs) -> Vec<u64> {
        jobs.iter().map(|(id, _)| id.0).collect()
    }

    #[test]
    fn walks_in_id_order_across_removals_and_compactions() {
        let mut jobs = Jobs::default();
        for i in 1..=1_000 {
            jobs.insert(JobId(i), record());
        }
        // Remove all but every tenth: several compactions happen on the way.
        for i in 1..=1_000 {
            if i % 10 != 0 {
                assert!(jobs.remove(&JobId(i)).is_some());
            }
        }
        assert!(jobs.remove(&JobId(1)).is_none());
        assert_eq!(jobs.len(), 100);
        assert!(jobs.order.len() < 1_000, "compacted");
        assert_eq!(ids(&jobs), (1..=100).map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(
            jobs.after(Some(JobId(975)))
                .map(|(id, _)| id.0)
                .collect::<Vec<_>>(),
            [980, 990, 1_000]
        );
        assert_eq!(jobs.after(Some(JobId(1_000))).count(), 0);
        jobs.retain(|id, _| id.0 % 20 == 0);
        jobs.insert(JobId(1_001), record());
        assert_eq!(
            ids(&jobs),
            (1..=50).map(|i| i * 20).chain([1_001]).collect::<Vec<_>>()
        );
    }

    #[test]
    fn an_id_below_the_last_is_placed_in_order() {
        let mut jobs = Jobs::from_records([(JobId(5), record()), (JobId(2), record())]);
        jobs.insert(JobId(3), record());
        jobs.insert(JobId(9), record());
        jobs.remove(&JobId(5));
        jobs.insert(JobId(5), record());
        jobs.insert(JobId(5), record());
        assert_eq!(ids(&jobs), [2, 3, 5, 9]);
        assert_eq!(jobs.len(), 4);
    }
}
