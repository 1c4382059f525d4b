//! Which journal items still matter: the bookkeeping that lets the journal reclaim space
//! without ever losing a job or bringing a deleted one back.
//!
//! Every frame written to the journal is read back by the store's journal reader and stays an
//! open read until the ledger says it may be committed. An item is *live* while it holds
//! something replay still needs:
//!
//! * the latest record of some job or queue (a record is superseded once a newer record of the
//!   same job is durable). A job has two: its latest full record (with the payload, written at
//!   enqueue) and its latest progress (lifecycle and times, written on every later change); a
//!   full record supersedes both;
//! * a tombstone whose job may still have an uncommitted older record: a tombstone written in
//!   item `C` for a job whose previous latest records were in items up to `B < C` stays until
//!   every item up to `B` is committed (all of that job's records are in items `<= B`);
//! * the store's id counter: the newest item stays until a newer one is written.
//!
//! Replay on open reads every uncommitted item in id order and keeps the last full record of
//! each job with the last progress written after it (a tombstone removes both). That yields exactly the latest durable state, whatever subset
//! of commits reached the reader's checkpoint before a crash: the latest record of a live job
//! is never committed, and a tombstone is committed only after every older record of its job,
//! so any checkpoint (a snapshot of the commits made so far, which only grow) that lacks the
//! tombstone's commit also lacks nothing that would make the job reappear without it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use fairq_worker::JobId;

/// Something whose latest record must survive.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Entity {
    /// The job's full record.
    Job(JobId),
    /// The job's progress since its full record was written.
    Progress(JobId),
    Queue(String),
}

/// One entry of a frame, as far as the ledger is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Touch {
    Job(JobId),
    Progress(JobId),
    Deleted(JobId),
    Queue(String),
    /// A queue's tombstone: its counters are gone.
    QueueRemoved(String),
}

#[derive(Debug, Default)]
struct ItemState {
    /// Reasons to keep the item.
    refs: u32,
    /// Latest records of jobs or queues it holds (part of `refs`).
    live: u32,
    /// Delivered to the reader as an open read (only open reads can be committed).
    read: bool,
    /// Entities whose record the item held when written (some may have moved on).
    members: Vec<Entity>,
}

/// When the span of uncommitted items exceeds twice their number by this much, live records
/// of the oldest items are rewritten so that the oldest items can be committed.
const RELOCATE_SLACK: u64 = 64;

/// The live-record accounting of the journal items of one store.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    latest: HashMap<Entity, u64>,
    /// Every written item not yet handed out for commit.
    items: BTreeMap<u64, ItemState>,
    /// Tombstone items waiting until every item up to the key is committed.
    waits: BTreeMap<u64, Vec<u64>>,
    newest: Option<u64>,
    /// Items with no reason left and already read: ready to commit.
    ready: BTreeSet<u64>,
    /// Items holding at least one latest record.
    live_items: u64,
}

impl Ledger {
    /// Accounts for item `item`, durably written with these entries (in frame order).
    pub(crate) fn written(&mut self, item: u64, touches: &[Touch]) {
        self.items.insert(item, ItemState::default());
        self.acquire(item);
        if let Some(previous) = self.newest.replace(item) {
            self.release(previous);
        }
        // The newest item before this one that held a record of each job touched here: a
        // tombstone later in this item must outlive every item up to it.
        let mut before: HashMap<JobId, u64> = HashMap::new();
        // The same for queues and their tombstones.
        let mut queues_before: HashMap<String, u64> = HashMap::new();
        fn note(before: &mut HashMap<JobId, u64>, id: JobId, old: Option<Option<u64>>) {
            if let Some(Some(old)) = old {
                let slot = before.entry(id).or_insert(old);
                *slot = (*slot).max(old);
            }
        }
        for touch in touches {
            match touch {
                Touch::Job(id) => {
                    // A full record holds the job's progress too.
                    note(&mut before, *id, self.supersede(item, Entity::Job(*id)));
                    note(&mut before, *id, self.forget(item, &Entity::Progress(*id)));
                }
                Touch::Progress(id) => {
                    note(
                        &mut before,
                        *id,
                        self.supersede(item, Entity::Progress(*id)),
                    );
                }
                Touch::Queue(name) => {
                    if let Some(Some(old)) = self.supersede(item, Entity::Queue(name.clone())) {
                        let slot = queues_before.entry(name.clone()).or_insert(old);
                        *slot = (*slot).max(old);
                    }
                }
                Touch::QueueRemoved(name) => {
                    // As a job's tombstone: kept until every item up to the one with the
                    // queue's last counters before this item is committed.
                    let mut wait = queues_before.get(name).copied();
                    if let Some(Some(old)) = self.forget(item, &Entity::Queue(name.clone())) {
                        wait = Some(wait.map_or(old, |w| w.max(old)));
                    }
                    if let Some(b) = wait {
                        self.acquire(item);
                        self.waits.entry(b).or_default().push(item);
                    }
                }
                Touch::Deleted(id) => {
                    note(&mut before, *id, self.forget(item, &Entity::Job(*id)));
                    note(&mut before, *id, self.forget(item, &Entity::Progress(*id)));
                    if let Some(b) = before.get(id).copied() {
                        self.acquire(item);
                        self.waits.entry(b).or_default().push(item);
                    }
                }
            }
        }
    }

    /// Drops `entity`'s latest record (superseded by a full record, or deleted); returns
    /// `Some(previous)` when it was held by an item other than `item`.
    fn forget(&mut self, item: u64, entity: &Entity) -> Option<Option<u64>> {
        let old = self.latest.remove(entity)?;
        self.drop_member(old);
        (old != item).then_some(Some(old))
    }

    /// Makes `item` the latest record of `entity`; returns `Some(previous)` when the entity
    /// was not already in `item` (`previous` is `None` for a new entity).
    fn supersede(&mut self, item: u64, entity: Entity) -> Option<Option<u64>> {
        let old = self.latest.insert(entity.clone(), item);
        if old == Some(item) {
            return None;
        }
        if let Some(old) = old {
            self.drop_member(old);
        }
        self.acquire(item);
        if let Some(state) = self.items.get_mut(&item) {
            state.live += 1;
            if state.live == 1 {
                self.live_items += 1;
            }
            state.members.push(entity);
        }
        Some(old)
    }

    /// `item` no longer holds the latest record of one of its members.
    fn drop_member(&mut self, item: u64) {
        if let Some(state) = self.items.get_mut(&item) {
            state.live = state.live.saturating_sub(1);
            if state.live == 0 {
                self.live_items = self.live_items.saturating_sub(1);
            }
        }
        self.release(item);
    }

    fn acquire(&mut self, item: u64) {
        if let Some(state) = self.items.get_mut(&item) {
            state.refs += 1;
            self.ready.remove(&item);
        }
    }

    fn release(&mut self, item: u64) {
        if let Some(state) = self.items.get_mut(&item) {
            state.refs = state.refs.saturating_sub(1);
            if state.refs == 0 && state.read {
                self.ready.insert(item);
            }
        }
    }

    /// Notes that the reader delivered `item`.
    pub(crate) fn read(&mut self, item: u64) {
        if let Some(state) = self.items.get_mut(&item) {
            state.read = true;
            if state.refs == 0 {
                self.ready.insert(item);
            }
        }
    }

    /// The items that may be committed now, in an order that is safe to commit in (each
    /// tombstone after the items it waited for); forgets them.
    pub(crate) fn take_committable(&mut self) -> Vec<u64> {
        let mut out = Vec::new();
        loop {
            let batch = std::mem::take(&mut self.ready);
            for id in &batch {
                self.items.remove(id);
            }
            out.extend(batch);
            let floor = self.items.keys().next().copied().unwrap_or(u64::MAX);
            while let Some(entry) = self.waits.first_entry() {
                if *entry.key() >= floor {
                    break;
                }
                for waiting in entry.remove() {
                    self.release(waiting);
                }
            }
            if self.ready.is_empty() {
                return out;
            }
        }
    }

    /// Live entities whose records should be written again so that the oldest items can be
    /// committed, when the items the journal must keep (from the oldest uncommitted one on)
    /// are mostly not holding any latest record (at most about `budget`); empty when there is
    /// nothing worth moving. Items kept only for tombstones do not count as live: they go as
    /// soon as the oldest live items are moved out of the way.
    pub(crate) fn relocation(&self, budget: usize) -> Vec<Entity> {
        let (Some(&oldest), Some(newest)) = (self.items.keys().next(), self.newest) else {
            return Vec::new();
        };
        let span = newest.saturating_sub(oldest) + 1;
        if span <= 2 * self.live_items + RELOCATE_SLACK {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (&item, state) in &self.items {
            if item == newest || out.len() >= budget {
                break;
            }
            if state.live == 0 {
                continue;
            }
            out.extend(
                state
                    .members
                    .iter()
                    .filter(|e| self.latest.get(*e) == Some(&item))
                    .cloned(),
            );
        }
        out
    }

    /// Number of uncommitted items.
    pub(crate) fn pending(&self) -> usize {
        self.items.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A change made by a request: set a job's or queue's value, or delete a job or queue.
    #[derive(Debug, Clone)]
    enum Op {
        Set(u64),
        /// A progress record of a job (only written for jobs that exist).
        Progress(u64),
        Delete(u64),
        Queue(u8),
        /// Removes a queue (a tombstone, written only for a queue that has a value).
        RemoveQueue(u8),
        /// Ends the current frame.
        Flush,
        /// Crash: keep a random prefix of the commits, replay, go on from the replayed state.
        Crash(prop::sample::Index),
        /// Rewrite what the ledger asks to relocate.
        Relocate,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u64..12).prop_map(Op::Set),
            4 => (0u64..12).prop_map(Op::Progress),
            2 => (0u64..12).prop_map(Op::Delete),
            1 => (0u8..2).prop_map(Op::Queue),
            1 => (0u8..2).prop_map(Op::RemoveQueue),
            4 => Just(Op::Flush),
            1 => any::<prop::sample::Index>().prop_map(Op::Crash),
            1 => Just(Op::Relocate),
        ]
    }

    /// An entry on the simulated disk: what it sets, with a value.
    type DiskEntry = (Touch, u64);

    /// The journal as replay would see it: items and the committed set.
    struct Disk {
        items: BTreeMap<u64, Vec<DiskEntry>>,
        next_item: u64,
    }

    /// What replay rebuilds: each entity's value; a progress whose job's full record is
    /// missing is an error (it would mean the record was committed too early).
    fn replay(
        items: &BTreeMap<u64, Vec<DiskEntry>>,
        committed: &BTreeSet<u64>,
    ) -> (HashMap<Entity, u64>, Ledger) {
        let mut state = HashMap::new();
        let mut orphans: HashMap<JobId, u64> = HashMap::new();
        let mut ledger = Ledger::default();
        for (&id, entries) in items.iter().filter(|(id, _)| !committed.contains(id)) {
            let touches: Vec<Touch> = entries.iter().map(|(t, _)| t.clone()).collect();
            for (touch, value) in entries {
                match touch {
                    Touch::Job(j) => {
                        state.insert(Entity::Job(*j), *value);
                        state.remove(&Entity::Progress(*j));
                        orphans.remove(j);
                    }
                    Touch::Progress(j) => {
                        if state.contains_key(&Entity::Job(*j)) {
                            state.insert(Entity::Progress(*j), *value);
                        } else {
                            orphans.insert(*j, *value);
                        }
                    }
                    Touch::Queue(q) => {
                        state.insert(Entity::Queue(q.clone()), *value);
                    }
                    Touch::Deleted(j) => {
                        state.remove(&Entity::Job(*j));
                        state.remove(&Entity::Progress(*j));
                        orphans.remove(j);
                    }
                    Touch::QueueRemoved(q) => {
                        state.remove(&Entity::Queue(q.clone()));
                    }
                }
            }
            ledger.written(id, &touches);
            ledger.read(id);
        }
        assert!(
            orphans.is_empty(),
            "progress without its job's record: {orphans:?}"
        );
        (state, ledger)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever prefix of the commits reached the checkpoint, replay rebuilds exactly the
        /// latest written state, again and again across crashes; and relocation bounds the
        /// span of uncommitted items.
        #[test]
        fn replay_after_any_checkpoint_rebuilds_the_latest_state(ops in prop::collection::vec(op(), 1..120)) {
            let mut disk = Disk { items: BTreeMap::new(), next_item: 1 };
            let mut model: HashMap<Entity, u64> = HashMap::new();
            let mut ledger = Ledger::default();
            // Commits in the order they were made; a checkpoint is a prefix of it.
            let mut commits: Vec<u64> = Vec::new();
            let mut durable_commits: BTreeSet<u64> = BTreeSet::new();
            let mut frame: Vec<DiskEntry> = Vec::new();
            let mut value = 0u64;
            let write = |frame: &mut Vec<DiskEntry>, disk: &mut Disk, ledger: &mut Ledger, commits: &mut Vec<u64>| {
                if frame.is_empty() {
                    return;
                }
                let id = disk.next_item;
                disk.next_item += 1 + (id % 3); // ids may jump
                let touches: Vec<Touch> = frame.iter().map(|(t, _)| t.clone()).collect();
                disk.items.insert(id, std::mem::take(frame));
                ledger.written(id, &touches);
                ledger.read(id);
                commits.extend(ledger.take_committable());
            };
            for op in ops {
                value += 1;
                match op {
                    Op::Set(j) => {
                        model.insert(Entity::Job(JobId(j)), value);
                        model.remove(&Entity::Progress(JobId(j)));
                        frame.push((Touch::Job(JobId(j)), value));
                    }
                    Op::Progress(j) => {
                        if model.contains_key(&Entity::Job(JobId(j))) {
                            model.insert(Entity::Progress(JobId(j)), value);
                            frame.push((Touch::Progress(JobId(j)), value));
                        }
                    }
                    Op::Delete(j) => {
                        model.remove(&Entity::Progress(JobId(j)));
                        if model.remove(&Entity::Job(JobId(j))).is_some() {
                            frame.push((Touch::Deleted(JobId(j)), 0));
                        }
                    }
                    Op::Queue(q) => {
                        let name = format!("q{q}");
                        model.insert(Entity::Queue(name.clone()), value);
                        frame.push((Touch::Queue(name), value));
                    }
                    Op::RemoveQueue(q) => {
                        let name = format!("q{q}");
                        if model.remove(&Entity::Queue(name.clone())).is_some() {
                            frame.push((Touch::QueueRemoved(name), 0));
                        }
                    }
                    Op::Flush => write(&mut frame, &mut disk, &mut ledger, &mut commits),
                    Op::Relocate => {
                        write(&mut frame, &mut disk, &mut ledger, &mut commits);
                        // Like the writer: a job moves as one full record (its progress
                        // included), whichever of its records held the old item.
                        let mut moved = BTreeSet::new();
                        for entity in ledger.relocation(4) {
                            match entity {
                                Entity::Job(j) | Entity::Progress(j) => {
                                    if moved.insert(j) {
                                        // The moved record is the merged one: a new value.
                                        value += 1;
                                        model.insert(Entity::Job(j), value);
                                        model.remove(&Entity::Progress(j));
                                        frame.push((Touch::Job(j), value));
                                    }
                                }
                                Entity::Queue(q) => {
                                    let v = model[&Entity::Queue(q.clone())];
                                    frame.push((Touch::Queue(q), v));
                                }
                            }
                        }
                        write(&mut frame, &mut disk, &mut ledger, &mut commits);
                    }
                    Op::Crash(index) => {
                        // Unwritten changes are lost with the crash: they were never acknowledged.
                        write(&mut frame, &mut disk, &mut ledger, &mut commits);
                        let keep = index.index(commits.len() + 1);
                        durable_commits.extend(commits[..keep].iter().copied());
                        let (state, replayed) = replay(&disk.items, &durable_commits);
                        prop_assert_eq!(&state, &model);
                        // The replayed ledger commits what it can at once, like open does.
                        ledger = replayed;
                        commits = ledger.take_committable();
                    }
                }
            }
            write(&mut frame, &mut disk, &mut ledger, &mut commits);
            let mut all = durable_commits.clone();
            all.extend(commits.iter().copied());
            let (state, _) = replay(&disk.items, &all);
            prop_assert_eq!(&state, &model);
            let (state, _) = replay(&disk.items, &durable_commits);
            prop_assert_eq!(&state, &model);
        }
    }

    #[test]
    fn superseded_items_are_committed_and_the_latest_kept() {
        let mut ledger = Ledger::default();
        ledger.written(1, &[Touch::Job(JobId(1)), Touch::Job(JobId(2))]);
        ledger.read(1);
        assert!(ledger.take_committable().is_empty());
        ledger.written(2, &[Touch::Job(JobId(1))]);
        ledger.read(2);
        assert!(
            ledger.take_committable().is_empty(),
            "item 1 still holds job 2"
        );
        ledger.written(3, &[Touch::Job(JobId(2))]);
        ledger.read(3);
        // Item 2 holds job 1's latest record, item 3 job 2's and the id counter.
        assert_eq!(ledger.take_committable(), vec![1]);
        assert_eq!(ledger.pending(), 2);
    }

    #[test]
    fn a_tombstone_waits_for_every_older_record_of_its_job() {
        let mut ledger = Ledger::default();
        // Item 1 keeps job 9 alive, and has job 1's first record.
        ledger.written(1, &[Touch::Job(JobId(9)), Touch::Job(JobId(1))]);
        ledger.read(1);
        ledger.written(2, &[Touch::Job(JobId(1))]);
        ledger.read(2);
        ledger.written(3, &[Touch::Deleted(JobId(1))]);
        ledger.read(3);
        ledger.written(4, &[Touch::Job(JobId(5))]);
        ledger.read(4);
        // Item 2 is superseded; the tombstone in 3 must outlive item 1.
        assert_eq!(ledger.take_committable(), vec![2]);
        ledger.written(5, &[Touch::Deleted(JobId(9))]);
        ledger.read(5);
        let committed = ledger.take_committable();
        let pos = |id: u64| committed.iter().position(|c| *c == id).unwrap();
        assert!(
            pos(1) < pos(3),
            "tombstone committed before the record it hides: {committed:?}"
        );
    }

    #[test]
    fn items_kept_for_tombstones_do_not_hold_off_relocation() {
        let mut ledger = Ledger::default();
        ledger.written(1, &[Touch::Job(JobId(1))]);
        ledger.read(1);
        let mut item = 2;
        for job in 2..400 {
            ledger.written(item, &[Touch::Job(JobId(job))]);
            ledger.read(item);
            ledger.written(item + 1, &[Touch::Deleted(JobId(job))]);
            ledger.read(item + 1);
            ledger.take_committable();
            item += 2;
        }
        // Every tombstone waits behind item 1; moving job 1 lets them all go.
        assert!(ledger.pending() > 300);
        assert_eq!(ledger.relocation(10), vec![Entity::Job(JobId(1))]);
        ledger.written(item, &[Touch::Job(JobId(1))]);
        ledger.read(item);
        ledger.take_committable();
        assert!(ledger.pending() <= 2, "{} items left", ledger.pending());
    }

    #[test]
    fn relocation_moves_the_live_records_of_old_items() {
        let mut ledger = Ledger::default();
        ledger.written(1, &[Touch::Job(JobId(1))]);
        ledger.read(1);
        for item in 2..3000 {
            ledger.written(item, &[Touch::Job(JobId(2))]);
            ledger.read(item);
            ledger.take_committable();
        }
        assert_eq!(ledger.relocation(10), vec![Entity::Job(JobId(1))]);
        ledger.written(3000, &[Touch::Job(JobId(1))]);
        ledger.read(3000);
        assert!(ledger.take_committable().contains(&1));
        assert!(ledger.relocation(10).is_empty());
    }
}
