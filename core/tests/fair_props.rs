//! Property tests: the O(1) round engine against a literal, obviously-correct implementation of
//! the snapshot-of-heads rule, and the heapless variant against the heap one.

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
