//! Random put/get/commit/abort/checkpoint/rotate/crash/reopen sequences, with power losses
//! and I/O faults on the simulated disk,
//! checked against a reference model of what the journal promises:
//!
//! - no item whose put returned `Ok` under `Always` or `Group` is ever lost;
//! - nothing is delivered that was never put;
//! - an item committed and then covered by a checkpoint is never delivered again;
//! - each reader delivers fresh items in increasing id order, aborted items first;
//! - `len()` counts exactly the items a reader still delivers.
//!
//! Every sync policy runs, `Never` and `Periodic` also with mapped writes. The journal's clock
//! is a `ManualClock` that each put moves on, so `Periodic` syncs at the same puts whenever a
//! case is replayed (the simulated disk takes no calls from helper threads: `determinism.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use fairq_journal::sim::{SimDisk, SimFaults};
use fairq_journal::{
    ItemId, JournalConfig, JournalError, JournaledQueue, ManualClock, Reader, SyncPolicy,
};
use proptest::prelude::*;

const DIR: &str = "/data/q";
const READERS: [&str; 2] = ["a", "b"];

#[derive(Debug, Clone)]
enum Op {
    Put(usize),
    Get(usize),
    /// Peek, then get: both must show the same item.
    PeekGet(usize),
    Commit(usize, usize),
    Abort(usize, usize),
    Checkpoint(usize),
    /// Seal the current segment.
    Rotate,
    /// Power loss between operations.
    Crash,
    /// Power loss after this many more storage operations (in the middle of whatever runs).
    CrashSoon(u8),
    /// Clean close and reopen.
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (0usize..120).prop_map(Op::Put),
        20 => (0usize..2).prop_map(Op::Get),
        5 => (0usize..2).prop_map(Op::PeekGet),
        18 => (0usize..2, 0usize..8).prop_map(|(r, k)| Op::Commit(r, k)),
        6 => (0usize..2, 0usize..8).prop_map(|(r, k)| Op::Abort(r, k)),
        6 => (0usize..2).prop_map(Op::Checkpoint),
        3 => Just(Op::Rotate),
        3 => Just(Op::Crash),
        3 => (0u8..12).prop_map(Op::CrashSoon),
        3 => Just(Op::Reopen),
    ]
}

#[derive(Default)]
struct ReaderModel {
    /// Open reads: id → payload key.
    open: BTreeMap<ItemId, u64>,
    /// Aborted in this session, to be delivered again before anything fresh.
    aborted: BTreeSet<ItemId>,
    /// Committed in this session: must not come back before a crash.
    committed_session: BTreeSet<u64>,
    /// Committed and covered by a checkpoint that returned Ok: must never come back.
    committed_durable: BTreeSet<u64>,
    /// Committed at any time (for the final no-loss check).
    ever_committed: BTreeSet<u64>,
    /// Highest id delivered fresh in this session.
    last_fresh: Option<ItemId>,
    /// Aborts of each item, ever: an item's error count never exceeds them.
    aborts: BTreeMap<u64, u32>,
}

struct World {
    disk: SimDisk,
    /// The journal's clock: each put moves it on 5 ms (so `Periodic` syncs every few puts,
    /// at the same puts in every run of a case).
    clock: Arc<ManualClock>,
    config: JournalConfig,
    faults: SimFaults,
    q: Option<JournaledQueue>,
    readers: Vec<Reader>,
    /// Payload keys whose put returned Ok (durable under Always/Group).
    acked: BTreeSet<u64>,
    /// Payload keys whose put failed or was not durable: may or may not exist.
    maybe: BTreeSet<u64>,
    max_acked_id: Option<ItemId>,
    next_key: u64,
    models: Vec<ReaderModel>,
}

fn payload(key: u64, len: usize) -> Vec<u8> {
    let mut p = key.to_le_bytes().to_vec();
    p.extend((0..len).map(|i| (key as usize + i) as u8));
    p
}

fn key_of(data: &[u8]) -> u64 {
    assert!(data.len() >= 8, "payload too short: {data:?}");
    let key = u64::from_le_bytes(data[..8].try_into().unwrap());
    assert_eq!(
        data,
        payload(key, data.len() - 8).as_slice(),
        "payload damaged"
    );
    key
}

impl World {
    fn open(&mut self) {
        self.disk.set_faults(SimFaults::default());
        let q = JournaledQueue::open(DIR, "q", self.config.clone())
            .unwrap_or_else(|e| panic!("reopen after crash failed: {e}"));
        self.readers = READERS.iter().map(|n| q.reader(n).unwrap()).collect();
        self.q = Some(q);
        self.disk.set_faults(self.faults);
        for m in &mut self.models {
            m.open.clear();
            m.aborted.clear();
            m.last_fresh = None;
        }
    }

    /// The process dies (or the power fails): forget everything not durable.
    fn crash(&mut self) {
        self.q = None;
        self.readers.clear();
        if self.disk.is_dead() {
            self.disk.restart();
        } else {
            self.disk.crash();
        }
        for m in &mut self.models {
            m.committed_session.clear();
        }
        self.open();
    }

    fn reopen_clean(&mut self) {
        let Some(q) = self.q.take() else { return };
        self.readers.clear();
        match q.close() {
            Ok(()) => {
                for m in &mut self.models {
                    let done: Vec<u64> = m.committed_session.iter().copied().collect();
                    m.committed_durable.extend(done);
                    m.committed_session.clear();
                }
                drop(q);
                self.disk.restart();
                self.open();
            }
            Err(_) => {
                drop(q);
                self.crash();
            }
        }
    }

    fn deliver(&mut self, r: usize, item: fairq_journal::Item) {
        let key = key_of(&item.data);
        let m = &mut self.models[r];
        assert!(
            self.acked.contains(&key) || self.maybe.contains(&key),
            "reader {r} got item {key} that was never put"
        );
        assert!(
            !m.committed_durable.contains(&key),
            "reader {r}: checkpointed commit of {key} delivered again"
        );
        assert!(
            !m.committed_session.contains(&key),
            "reader {r}: {key} delivered again after commit"
        );
        assert!(
            !m.open.contains_key(&item.id),
            "reader {r}: open read {} delivered twice",
            item.id
        );
        if let Some(&first) = m.aborted.first() {
            assert_eq!(
                item.id, first,
                "reader {r}: aborted items come back first, in order"
            );
            assert!(item.error_count >= 1);
            assert!(item.error_count <= m.aborts.get(&key).copied().unwrap_or(0));
            m.aborted.remove(&first);
        } else {
            // Error counts survive a restart when a checkpoint recorded them.
            let aborts = m.aborts.get(&key).copied().unwrap_or(0);
            assert!(
                item.error_count <= aborts,
                "reader {r}: item {key} has error count {} after {aborts} aborts",
                item.error_count
            );
            assert!(
                m.last_fresh.is_none_or(|l| item.id > l),
                "reader {r}: order broken at {}",
                item.id
            );
            m.last_fresh = Some(item.id);
        }
        m.open.insert(item.id, key);
    }

    fn step(&mut self, op: &Op) {
        if self.q.is_none() {
            self.open();
        }
        let failed = match *op {
            Op::Put(len) => {
                self.clock.advance(Duration::from_millis(5));
                let key = self.next_key;
                self.next_key += 1;
                let q = self.q.as_ref().unwrap();
                match q.put(&payload(key, len)) {
                    Ok(id) => {
                        assert!(
                            self.max_acked_id.is_none_or(|m| id > m),
                            "ids must increase"
                        );
                        if self.config.sync.is_durable_on_put() {
                            self.acked.insert(key);
                            self.max_acked_id = Some(id);
                        } else {
                            self.maybe.insert(key);
                        }
                        false
                    }
                    Err(_) => {
                        self.maybe.insert(key);
                        true
                    }
                }
            }
            Op::Get(r) => match self.readers[r].get() {
                Ok(Some(item)) => {
                    self.deliver(r, item);
                    false
                }
                Ok(None) => {
                    assert!(self.models[r].aborted.is_empty(), "aborted items vanished");
                    false
                }
                Err(_) => true,
            },
            Op::PeekGet(r) => match self.readers[r].peek() {
                Ok(peeked) => match self.readers[r].get() {
                    Ok(got) => {
                        assert_eq!(
                            peeked.as_ref().map(|i| (i.id, &i.data)),
                            got.as_ref().map(|i| (i.id, &i.data)),
                            "reader {r}: peek showed another item than get delivered"
                        );
                        if let Some(item) = got {
                            self.deliver(r, item);
                        }
                        false
                    }
                    Err(_) => true,
                },
                Err(_) => true,
            },
            Op::Commit(r, k) => {
                let Some((&id, &key)) = self.models[r]
                    .open
                    .iter()
                    .nth(k % self.models[r].open.len().max(1))
                else {
                    return;
                };
                let res = self.readers[r].commit(id);
                if !matches!(res, Err(JournalError::NotOpen(_))) {
                    let m = &mut self.models[r];
                    m.open.remove(&id);
                    m.committed_session.insert(key);
                    m.ever_committed.insert(key);
                }
                assert!(
                    !matches!(res, Err(JournalError::NotOpen(_))),
                    "open read refused"
                );
                res.is_err()
            }
            Op::Abort(r, k) => {
                let Some((&id, _)) = self.models[r]
                    .open
                    .iter()
                    .nth(k % self.models[r].open.len().max(1))
                else {
                    return;
                };
                let res = self.readers[r].abort(id);
                assert!(
                    !matches!(res, Err(JournalError::NotOpen(_))),
                    "open read refused"
                );
                let m = &mut self.models[r];
                if let Some(key) = m.open.remove(&id) {
                    *m.aborts.entry(key).or_default() += 1;
                }
                m.aborted.insert(id);
                res.is_err()
            }
            Op::Checkpoint(r) => match self.readers[r].checkpoint() {
                Ok(()) => {
                    let m = &mut self.models[r];
                    let done: Vec<u64> = m.committed_session.iter().copied().collect();
                    m.committed_durable.extend(done);
                    false
                }
                Err(_) => true,
            },
            Op::Rotate => self.q.as_ref().unwrap().rotate().is_err(),
            Op::Crash => {
                self.crash();
                false
            }
            Op::CrashSoon(n) => {
                self.disk.schedule_crash(u64::from(n));
                false
            }
            Op::Reopen => {
                self.reopen_clean();
                false
            }
        };
        if failed || self.disk.is_dead() {
            // Any failure is treated as the death of the process.
            self.crash();
        }
    }

    fn finish(mut self) {
        self.disk.set_faults(SimFaults::default());
        self.faults = SimFaults::default();
        if self.disk.is_dead() || self.q.is_none() {
            self.crash();
        } else {
            self.reopen_clean();
        }
        for r in 0..READERS.len() {
            let reader = self.readers[r].clone();
            let waiting = reader.len();
            let mut drained = BTreeSet::new();
            let mut count = 0u64;
            while let Some(item) = reader.get().unwrap() {
                let id = item.id;
                let key = key_of(&item.data);
                self.deliver(r, item);
                reader.commit(id).unwrap();
                drained.insert(key);
                count += 1;
            }
            assert_eq!(
                waiting, count,
                "reader {r}: len() disagrees with what get() delivers"
            );
            assert_eq!(reader.len(), 0);
            let m = &self.models[r];
            for key in &self.acked {
                assert!(
                    m.ever_committed.contains(key) || drained.contains(key),
                    "reader {r}: acknowledged item {key} lost"
                );
            }
        }
    }
}

/// How puts reach the disk: a sync policy, and whether they store into a mapped segment.
#[derive(Debug, Clone, Copy)]
struct Mode {
    sync: SyncPolicy,
    mapped_writes: bool,
}

impl Mode {
    const fn written(sync: SyncPolicy) -> Self {
        Mode {
            sync,
            mapped_writes: false,
        }
    }
}

fn run(ops: Vec<Op>, seed: u64, mode: Mode, faults: SimFaults, segment_size: u64) {
    let disk = SimDisk::new(seed);
    let clock = Arc::new(ManualClock::new(
        UNIX_EPOCH + Duration::from_secs(1_000_000),
    ));
    let config = JournalConfig {
        sync: mode.sync,
        mapped_writes: mode.mapped_writes,
        segment_size,
        checkpoint_interval: Duration::from_secs(3600),
        clock: clock.clone(),
        ..JournalConfig::on_sim(&disk)
    };
    let mut world = World {
        disk,
        clock,
        config,
        faults,
        q: None,
        readers: Vec::new(),
        acked: BTreeSet::new(),
        maybe: BTreeSet::new(),
        max_acked_id: None,
        next_key: 1,
        models: READERS.iter().map(|_| ReaderModel::default()).collect(),
    };
    world.open();
    for op in &ops {
        world.step(op);
    }
    world.finish();
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        Just(Mode::written(SyncPolicy::Always)),
        Just(Mode::written(SyncPolicy::Group)),
        Just(Mode::written(SyncPolicy::Never)),
        Just(Mode::written(SyncPolicy::Periodic(Duration::from_millis(
            20
        )))),
        Just(Mode {
            sync: SyncPolicy::Never,
            mapped_writes: true
        }),
        Just(Mode {
            sync: SyncPolicy::Periodic(Duration::from_millis(20)),
            mapped_writes: true
        }),
    ]
}

fn faults() -> impl Strategy<Value = SimFaults> {
    prop_oneof![
        3 => Just(SimFaults::default()),
        1 => (any::<bool>(), 0u32..40, 0u32..40, 0u32..60).prop_map(|(short, w, s, r)| SimFaults {
            short_writes: short,
            write_error_per_mille: w,
            sync_error_per_mille: s,
            capacity: None,
            corrupt_read_per_mille: r,
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn journal_matches_model_under_crashes_and_faults(
        ops in proptest::collection::vec(op(), 1..90),
        seed in any::<u64>(),
        mode in mode(),
        faults in faults(),
        segment_size in prop_oneof![Just(150u64), Just(400), Just(1 << 20)],
    ) {
        run(ops, seed, mode, faults, segment_size);
    }
}

#[test]
fn crash_in_the_middle_of_every_storage_operation_of_a_busy_run() {
    // Power loss after each possible number of storage operations of one fixed workload.
    for after in 0..120 {
        let mut ops = vec![Op::CrashSoon(0)];
        ops.clear();
        for i in 0..6 {
            ops.push(Op::Put(10 * i));
            ops.push(Op::Get(i % 2));
            ops.push(Op::Commit(i % 2, 0));
        }
        ops.insert(0, Op::CrashSoon(after.min(255) as u8));
        run(
            ops.clone(),
            after as u64,
            Mode::written(SyncPolicy::Group),
            SimFaults::default(),
            150,
        );
        // The same under mapped writes, where every store into the map is an operation
        // the power can fail in.
        run(
            ops,
            after as u64,
            Mode {
                sync: SyncPolicy::Never,
                mapped_writes: true,
            },
            SimFaults::default(),
            150,
        );
    }
}
