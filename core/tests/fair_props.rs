//! Property tests: the O(1) round engine against a literal, obviously-correct implementation of
//! the snapshot-of-heads rule, and the heapless variant against the heap one.
#![cfg(feature = "alloc")]

use std::collections::{BTreeMap, VecDeque};

use fairq_core::fair::{fixed, FairQueue};
use proptest::prelude::*;

/// The rule as written: a snapshot list plus per-key FIFOs; when the snapshot is empty, take
/// the first `weight` items of every key and order them by push sequence.
#[derive(Default)]
struct Model {
    snapshot: VecDeque<(u8, u32, u64)>,
    fifos: BTreeMap<u8, VecDeque<(u32, u64)>>,
    weights: BTreeMap<u8, u32>,
    seq: u64,
    cap: Option<usize>,
}

impl Model {
    fn len(&self) -> usize {
        self.snapshot.len() + self.fifos.values().map(VecDeque::len).sum::<usize>()
    }

    fn push(&mut self, key: u8, item: u32) -> Result<(), usize> {
        if self.cap.is_some_and(|c| self.len() >= c) {
            return Err(self.len());
        }
        self.seq += 1;
        self.fifos
            .entry(key)
            .or_default()
            .push_back((item, self.seq));
        Ok(())
    }

    fn pop(&mut self) -> Option<(u8, u32)> {
        if self.snapshot.is_empty() {
            let mut taken = Vec::new();
            for (key, fifo) in self.fifos.iter_mut() {
                let w = self.weights.get(key).copied().unwrap_or(1).max(1);
                for _ in 0..w {
                    match fifo.pop_front() {
                        Some((item, seq)) => taken.push((*key, item, seq)),
                        None => break,
                    }
                }
            }
            taken.sort_by_key(|t| t.2);
            self.snapshot = taken.into();
            self.fifos.retain(|_, f| !f.is_empty());
        }
        self.snapshot.pop_front().map(|(k, v, _)| (k, v))
    }

    fn remove_key(&mut self, key: u8) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .snapshot
            .iter()
            .filter(|t| t.0 == key)
            .map(|t| t.1)
            .collect();
        self.snapshot.retain(|t| t.0 != key);
        if let Some(fifo) = self.fifos.remove(&key) {
            out.extend(fifo.into_iter().map(|(v, _)| v));
        }
        out
    }

    fn snapshot_view(&self) -> Vec<(u8, u32)> {
        self.snapshot.iter().map(|t| (t.0, t.1)).collect()
    }

    /// Keys ordered by the age of their head, with their items.
    fn backlog_view(&self) -> Vec<(u8, Vec<u32>)> {
        let mut keys: Vec<_> = self
            .fifos
            .iter()
            .filter(|(_, f)| !f.is_empty())
            .map(|(k, f)| (f[0].1, *k, f.iter().map(|t| t.0).collect::<Vec<_>>()))
            .collect();
        keys.sort_by_key(|t| t.0);
        keys.into_iter().map(|(_, k, v)| (k, v)).collect()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Push(u8),
    Pop,
    RemoveKey(u8),
}

fn ops(keys: u8, with_remove: bool) -> impl Strategy<Value = Vec<Op>> {
    let remove_weight = if with_remove { 1 } else { 0 };
    proptest::collection::vec(
        prop_oneof![
            6 => (0..keys).prop_map(Op::Push),
            // Heavy keys: key 0 pushes much more often than the rest.
            3 => Just(Op::Push(0)),
            5 => Just(Op::Pop),
            remove_weight => (0..keys).prop_map(Op::RemoveKey),
        ],
        0..400,
    )
}

fn heap_backlog(q: &FairQueue<u8, u32>) -> Vec<(u8, Vec<u32>)> {
    q.backlog()
        .into_iter()
        .map(|(k, items)| (*k, items.into_iter().copied().collect()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Same deliveries, same refusals, same snapshot and backlog views as the literal model.
    #[test]
    fn matches_the_literal_snapshot_rule(
        keys in 1u8..=64,
        cap in prop_oneof![Just(None), (1usize..64).prop_map(Some)],
        weights in proptest::collection::vec((0u8..64, 1u32..4), 0..4),
        ops in ops(64, true),
    ) {
        let mut q = match cap {
            Some(c) => FairQueue::with_capacity(c),
            None => FairQueue::unbounded(),
        };
        let mut model = Model { cap, ..Model::default() };
        for (k, w) in weights {
            let k = k % keys;
            q.set_weight(&k, w);
            model.weights.insert(k, w);
        }
        let mut next = 0u32;
        for op in ops {
            match op {
                Op::Push(k) => {
                    let k = k % keys;
                    next += 1;
                    let got = q.push(k, next).map_err(|full| {
                        assert_eq!((full.key, full.item), (k, next));
                        full.len
                    });
                    prop_assert_eq!(got, model.push(k, next));
                }
                Op::Pop => prop_assert_eq!(q.pop_with_key(), model.pop()),
                Op::RemoveKey(k) => {
                    let k = k % keys;
                    prop_assert_eq!(q.remove_key(&k), model.remove_key(k));
                }
            }
            prop_assert_eq!(q.len(), model.len());
            prop_assert!(cap.is_none_or(|c| q.len() <= c));
            let snap: Vec<_> = q.snapshot().map(|(k, v)| (*k, *v)).collect();
            prop_assert_eq!(snap, model.snapshot_view());
            prop_assert_eq!(heap_backlog(&q), model.backlog_view());
        }
        // Draining delivers exactly what the model still holds, in the same order.
        let rest: Vec<_> = std::iter::from_fn(|| q.pop_with_key()).collect();
        let model_rest: Vec<_> = std::iter::from_fn(|| model.pop()).collect();
        prop_assert_eq!(rest, model_rest);
    }

    /// Per-key FIFO, nothing lost or duplicated, and `iter` predicts the delivery order.
    #[test]
    fn per_key_fifo_and_nothing_lost(keys in 1u8..=64, ops in ops(64, false)) {
        let mut q = FairQueue::unbounded();
        let mut pushed: BTreeMap<u8, Vec<u32>> = BTreeMap::new();
        let mut delivered: BTreeMap<u8, Vec<u32>> = BTreeMap::new();
        let mut next = 0u32;
        for op in ops {
            match op {
                Op::Push(k) => {
                    let k = k % keys;
                    next += 1;
                    q.push(k, next).unwrap();
                    pushed.entry(k).or_default().push(next);
                }
                Op::Pop => {
                    let predicted = q.iter().next().map(|(k, v)| (*k, *v));
                    let got = q.pop_with_key();
                    prop_assert_eq!(got, predicted);
                    if let Some((k, v)) = got {
                        delivered.entry(k).or_default().push(v);
                    }
                }
                Op::RemoveKey(_) => unreachable!(),
            }
        }
        let order: Vec<_> = q.iter().map(|(k, v)| (*k, *v)).collect();
        let drained: Vec<_> = std::iter::from_fn(|| q.pop_with_key()).collect();
        prop_assert_eq!(&order, &drained);
        for (k, v) in drained {
            delivered.entry(k).or_default().push(v);
        }
        prop_assert_eq!(delivered, pushed);
    }

    /// A key that pushes while it has nothing queued is served within 2(K-1) deliveries,
    /// K being the number of keys with queued items right after its push, however deep the
    /// other backlogs are and whatever is pushed meanwhile.
    #[test]
    fn light_key_wait_is_bounded(keys in 2u8..=64, heavy in 0usize..2_000, ops in ops(64, false)) {
        let mut q = FairQueue::unbounded();
        let mut next = 0u32;
        for _ in 0..heavy {
            next += 1;
            q.push(0u8, next).unwrap();
        }
        // Items queued per key, kept alongside the queue.
        let mut queued: BTreeMap<u8, usize> = BTreeMap::new();
        queued.insert(0, heavy);
        // item -> (deliveries allowed, deliveries so far)
        let mut watched: BTreeMap<u32, (usize, usize)> = BTreeMap::new();
        let deliver = |got: Option<(u8, u32)>,
                           queued: &mut BTreeMap<u8, usize>,
                           watched: &mut BTreeMap<u32, (usize, usize)>|
         -> Result<(), TestCaseError> {
            if let Some((k, v)) = got {
                *queued.get_mut(&k).unwrap() -= 1;
                if let Some((bound, waited)) = watched.remove(&v) {
                    prop_assert!(waited <= bound, "waited {} > bound {}", waited, bound);
                }
                for (_, waited) in watched.values_mut() {
                    *waited += 1;
                }
            }
            Ok(())
        };
        for op in ops {
            match op {
                Op::Push(k) => {
                    let k = k % keys;
                    let count = queued.entry(k).or_default();
                    let had_items = *count > 0;
                    *count += 1;
                    next += 1;
                    q.push(k, next).unwrap();
                    if !had_items {
                        let live = queued.values().filter(|n| **n > 0).count();
                        watched.insert(next, (2 * (live - 1), 0));
                    }
                }
                Op::Pop => deliver(q.pop_with_key(), &mut queued, &mut watched)?,
                Op::RemoveKey(_) => unreachable!(),
            }
        }
        while !q.is_empty() {
            deliver(q.pop_with_key(), &mut queued, &mut watched)?;
        }
        prop_assert!(watched.is_empty());
    }

    /// The heapless variant behaves identically to the heap one (bound included).
    #[test]
    fn fixed_matches_heap(
        keys in 1u8..=64,
        weights in proptest::collection::vec((0u8..64, 1u32..4), 0..4),
        ops in ops(64, true),
    ) {
        let mut heap: FairQueue<u8, u32> = FairQueue::with_capacity(32);
        let mut fixed: fixed::FairQueue<u8, u32, 32, 128> = fixed::FairQueue::new();
        for (k, w) in weights {
            let k = k % keys;
            heap.set_weight(&k, w);
            fixed.set_weight(&k, w).unwrap();
        }
        let mut next = 0u32;
        for op in ops {
            match op {
                Op::Push(k) => {
                    let k = k % keys;
                    next += 1;
                    let a = heap.push(k, next).map_err(|f| (f.key, f.item, f.len));
                    let b = fixed.push(k, next).map_err(|f| (f.key, f.item, f.len));
                    prop_assert_eq!(a, b);
                }
                Op::Pop => prop_assert_eq!(heap.pop_with_key(), fixed.pop_with_key()),
                Op::RemoveKey(k) => {
                    let k = k % keys;
                    let a = heap.remove_key(&k);
                    let b = fixed.remove_key(&k);
                    prop_assert_eq!(&a[..], &b[..]);
                }
            }
            prop_assert_eq!(heap.len(), fixed.len());
            let a: Vec<_> = heap.snapshot().map(|(k, v)| (*k, *v)).collect();
            let b: Vec<_> = fixed.snapshot().map(|(k, v)| (*k, *v)).collect();
            prop_assert_eq!(a, b);
            let fixed_backlog: Vec<(u8, Vec<u32>)> = fixed
                .backlog()
                .map(|(k, items)| (*k, items.copied().collect()))
                .collect();
            prop_assert_eq!(heap_backlog(&heap), fixed_backlog);
        }
    }
}

#[test]
fn fixed_queue_refuses_new_keys_when_its_key_table_is_full_and_recovers() {
    let mut q: fixed::FairQueue<u8, u8, 16, 2> = fixed::FairQueue::new();
    q.push(1, 1).unwrap();
    q.push(2, 2).unwrap();
    let full = q.push(3, 3).unwrap_err();
    assert_eq!((full.key, full.item, full.len), (3, 3, 2));
    assert_eq!(q.len(), 2);
    // Once key 1 has nothing queued its entry can be reused.
    assert_eq!(q.pop(), Some(1));
    assert_eq!(q.pop(), Some(2));
    q.push(3, 3).unwrap();
    assert_eq!(q.pop_with_key(), Some((3, 3)));
}

#[test]
fn stale_keys_are_swept_so_transient_keys_do_not_grow_memory_unboundedly() {
    // Many distinct keys over time, each fully drained: the queue keeps working and stays
    // correct (the sweep keeps the key table proportional to live keys).
    let mut q = FairQueue::unbounded();
    for round in 0..50u32 {
        for k in 0..1_000u32 {
            q.push(round * 1_000 + k, k).unwrap();
        }
        for k in 0..1_000u32 {
            assert_eq!(q.pop(), Some(k));
        }
    }
    assert!(q.is_empty());
}

/// The round rule as the engine documents it, kept in a sorted map of rounds: the reference
/// for changes of weight in mid-stream (which the literal rule above does not define) and for
/// key tables that are swept.
#[derive(Default)]
struct RoundModel {
    current: u64,
    rounds: BTreeMap<u64, VecDeque<(u16, u32)>>,
    /// key -> (last round, items in it, weight)
    keys: BTreeMap<u16, (u64, u32, u32)>,
    len: usize,
}

impl RoundModel {
    fn push(&mut self, key: u16, item: u32) {
        let current = self.current;
        let state = self.keys.entry(key).or_insert((0, 0, 1));
        if state.0 > current && state.1 < state.2 {
            state.1 += 1;
        } else {
            state.0 = (state.0 + 1).max(current + 1);
            state.1 = 1;
        }
        self.rounds
            .entry(state.0)
            .or_default()
            .push_back((key, item));
        self.len += 1;
    }

    fn pop(&mut self) -> Option<(u16, u32)> {
        if self.len == 0 {
            return None;
        }
        if self
            .rounds
            .get(&self.current)
            .is_none_or(VecDeque::is_empty)
        {
            self.rounds.remove(&self.current);
            self.current += 1;
        }
        self.len -= 1;
        self.rounds.get_mut(&self.current)?.pop_front()
    }

    fn set_weight(&mut self, key: u16, weight: u32) {
        self.keys.entry(key).or_insert((0, 0, 1)).2 = weight.max(1);
    }

    fn remove_key(&mut self, key: u16) -> Vec<u32> {
        let mut out = Vec::new();
        for round in self.rounds.values_mut() {
            out.extend(round.iter().filter(|e| e.0 == key).map(|e| e.1));
            round.retain(|e| e.0 != key);
        }
        self.len -= out.len();
        if let Some(state) = self.keys.get_mut(&key) {
            state.0 = 0;
            state.1 = 0;
        }
        out
    }

    fn snapshot(&self) -> Vec<(u16, u32)> {
        self.rounds
            .get(&self.current)
            .map(|r| r.iter().copied().collect())
            .unwrap_or_default()
    }

    fn all(&self) -> Vec<(u16, u32)> {
        self.rounds.values().flatten().copied().collect()
    }
}

#[derive(Debug, Clone)]
enum WeightOp {
    Push(u16),
    Pop,
    SetWeight(u16, u32),
    RemoveKey(u16),
}

fn weight_ops(keys: u16) -> impl Strategy<Value = Vec<WeightOp>> {
    proptest::collection::vec(
        prop_oneof![
            5 => (0..keys).prop_map(WeightOp::Push),
            // One deep key, so the run (a lone key's tail of one-item rounds) forms often.
            4 => Just(WeightOp::Push(0)),
            5 => Just(WeightOp::Pop),
            1 => ((0..4u16), 0u32..4).prop_map(|(k, w)| WeightOp::SetWeight(k, w)),
            1 => (0..keys).prop_map(WeightOp::RemoveKey),
        ],
        0..500,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Weights changed at any time, keys removed, more keys than a sweep keeps: the same
    /// deliveries, snapshot and order as the round rule, for both storages.
    #[test]
    fn matches_the_round_rule_with_weights_changed_in_mid_stream(
        keys in 1u16..300,
        ops in weight_ops(300),
    ) {
        let mut heap: FairQueue<u16, u32> = FairQueue::unbounded();
        let mut fixed: fixed::FairQueue<u16, u32, 512, 512> = fixed::FairQueue::new();
        let mut model = RoundModel::default();
        let mut next = 0u32;
        for op in ops {
            match op {
                WeightOp::Push(k) => {
                    let k = k % keys;
                    next += 1;
                    heap.push(k, next).unwrap();
                    fixed.push(k, next).unwrap();
                    model.push(k, next);
                }
                WeightOp::Pop => {
                    let expected = model.pop();
                    prop_assert_eq!(heap.pop_with_key(), expected);
                    prop_assert_eq!(fixed.pop_with_key(), expected);
                }
                WeightOp::SetWeight(k, w) => {
                    heap.set_weight(&k, w);
                    fixed.set_weight(&k, w).unwrap();
                    model.set_weight(k, w);
                    prop_assert_eq!(heap.weight(&k), w.max(1));
                }
                WeightOp::RemoveKey(k) => {
                    let k = k % keys;
                    let expected = model.remove_key(k);
                    prop_assert_eq!(&heap.remove_key(&k), &expected);
                    prop_assert_eq!(&fixed.remove_key(&k)[..], &expected[..]);
                }
            }
            prop_assert_eq!(heap.len(), model.len);
            prop_assert_eq!(fixed.len(), model.len);
            let snap: Vec<_> = heap.snapshot().map(|(k, v)| (*k, *v)).collect();
            prop_assert_eq!(&snap, &model.snapshot());
            let all: Vec<_> = heap.iter().map(|(k, v)| (*k, *v)).collect();
            prop_assert_eq!(&all, &model.all());
            let all: Vec<_> = fixed.iter().map(|(k, v)| (*k, *v)).collect();
            prop_assert_eq!(&all, &model.all());
            prop_assert_eq!(heap.iter().len(), model.len);
        }
    }
}

/// One key alone: every item is its own round, so the queue is a plain FIFO of that key (the
/// run), and a second key that arrives is served after one item, not after the backlog.
#[test]
fn a_lone_deep_key_is_a_fifo_and_a_newcomer_still_overtakes_it() {
    let mut q = FairQueue::unbounded();
    for i in 0..10_000u32 {
        q.push("deep", i).unwrap();
    }
    assert_eq!(q.pop(), Some(0));
    q.push("new", 99).unwrap();
    assert_eq!(q.pop_with_key(), Some(("deep", 1)));
    assert_eq!(q.pop_with_key(), Some(("new", 99)));
    for i in 2..10_000u32 {
        assert_eq!(q.pop_with_key(), Some(("deep", i)));
        if i % 1_000 == 0 {
            // A newcomer while the deep key is alone again joins the very next round.
            q.push("new", i).unwrap();
            assert_eq!(q.pop_with_key(), Some(("deep", i + 1)));
            assert_eq!(q.pop_with_key(), Some(("new", i)));
            assert_eq!(q.pop_with_key(), Some(("deep", i + 2)));
            for j in i + 3..=i + 10 {
                assert_eq!(q.pop_with_key(), Some(("deep", j)));
            }
            break;
        }
    }
}

#[derive(Debug, Clone)]
enum BulkOp {
    /// One item for each of the keys `0..n`, in order: a round of `n` items (or more).
    Sweep(u16),
    Pops(u16),
    Push(u16),
    SetWeight(u16, u32),
    RemoveKey(u16),
}

fn bulk_ops() -> impl Strategy<Value = Vec<BulkOp>> {
    proptest::collection::vec(
        prop_oneof![
            4 => (1u16..1_500).prop_map(BulkOp::Sweep),
            4 => (1u16..2_000).prop_map(BulkOp::Pops),
            2 => (0u16..1_500).prop_map(BulkOp::Push),
            1 => ((0u16..8), 0u32..4).prop_map(|(k, w)| BulkOp::SetWeight(k, w)),
            1 => (0u16..1_500).prop_map(BulkOp::RemoveKey),
        ],
        0..40,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Rounds of hundreds to thousands of items, which the heap storage keeps in chains of
    /// buffers rather than one buffer: the same deliveries, snapshot and order as the round
    /// rule, keys removed from the middle of a chain included.
    #[test]
    fn large_rounds_match_the_round_rule(ops in bulk_ops()) {
        let mut heap: FairQueue<u16, u32> = FairQueue::unbounded();
        let mut model = RoundModel::default();
        let mut next = 0u32;
        let mut push = |heap: &mut FairQueue<u16, u32>, model: &mut RoundModel, k: u16| {
            next += 1;
            heap.push(k, next).unwrap();
            model.push(k, next);
        };
        for op in ops {
            match op {
                BulkOp::Sweep(n) => (0..n).for_each(|k| push(&mut heap, &mut model, k)),
                BulkOp::Push(k) => push(&mut heap, &mut model, k),
                BulkOp::Pops(n) => {
                    for _ in 0..n {
                        let expected = model.pop();
                        prop_assert_eq!(heap.pop_with_key(), expected);
                    }
                }
                BulkOp::SetWeight(k, w) => {
                    heap.set_weight(&k, w);
                    model.set_weight(k, w);
                }
                BulkOp::RemoveKey(k) => {
                    let expected = model.remove_key(k);
                    prop_assert_eq!(&heap.remove_key(&k), &expected);
                }
            }
            prop_assert_eq!(heap.len(), model.len);
            let snap: Vec<_> = heap.snapshot().map(|(k, v)| (*k, *v)).collect();
            prop_assert_eq!(&snap, &model.snapshot());
            let all: Vec<_> = heap.iter().map(|(k, v)| (*k, *v)).collect();
            prop_assert_eq!(&all, &model.all());
        }
        let rest: Vec<_> = std::iter::from_fn(|| heap.pop_with_key()).collect();
        let model_rest: Vec<_> = std::iter::from_fn(|| model.pop()).collect();
        prop_assert_eq!(rest, model_rest);
    }
}
