//! FairQueue push+pop against VecDeque push_back+pop_front on the same stream of keyed items,
//! at 1, 16, 1,024 and 65,536 keys, plus the heapless variant. Prints the ratio table after
//! criterion's statistics. Targets (benchmark only): at most 1.5x VecDeque at 1 key and at most
//! 3x at 65,536 keys.

use std::collections::VecDeque;
use std::hint::black_box;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use fairq_benches::{print_ratio_table, time_per_op, Ratio};
use fairq_core::fair::{fixed, FairQueue};

const KEY_COUNTS: [u32; 4] = [1, 16, 1_024, 65_536];
/// Items kept queued while measuring: one per key, at least 1,024.
fn backlog(keys: u32) -> u32 {
    keys.max(1_024)
}

/// A deterministic stream of keys (xorshift), so every contender sees the same input.
fn stream(keys: u32, len: usize) -> Vec<u32> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % u64::from(keys)) as u32
        })
        .collect()
}

struct Fair {
    q: FairQueue<u32, u64>,
    keys: Vec<u32>,
}

impl Fair {
    fn new(keys: u32) -> Self {
        let stream = stream(keys, 1 << 16);
        let mut q = FairQueue::unbounded();
        for (i, k) in stream.iter().take(backlog(keys) as usize).enumerate() {
            q.push(*k, i as u64).unwrap();
        }
        Fair { q, keys: stream }
    }

    fn step(&mut self, i: u64) {
        let k = self.keys[(i as usize) & (self.keys.len() - 1)];
        self.q.push(k, i).unwrap();
        black_box(self.q.pop());
    }
}

struct Fifo {
    q: VecDeque<(u32, u64)>,
    keys: Vec<u32>,
}

impl Fifo {
    fn new(keys: u32) -> Self {
        let stream = stream(keys, 1 << 16);
        let mut q = VecDeque::new();
        for (i, k) in stream.iter().take(backlog(keys) as usize).enumerate() {
            q.push_back((*k, i as u64));
        }
        Fifo { q, keys: stream }
    }

    fn step(&mut self, i: u64) {
        let k = self.keys[(i as usize) & (self.keys.len() - 1)];
        self.q.push_back((k, i));
        black_box(self.q.pop_front());
    }
}

const FIXED_N: usize = 2_048;
const FIXED_KEYS: usize = 2_048;

struct Fixed {
    q: Box<fixed::FairQueue<u32, u64, FIXED_N, FIXED_KEYS>>,
    keys: Vec<u32>,
}

impl Fixed {
    fn new(keys: u32) -> Self {
        let stream = stream(keys, 1 << 16);
        let mut q = Box::new(fixed::FairQueue::new());
        for (i, k) in stream.iter().take(1_024).enumerate() {
            q.push(*k, i as u64).unwrap();
        }
        Fixed { q, keys: stream }
    }

    fn step(&mut self, i: u64) {
        let k = self.keys[(i as usize) & (self.keys.len() - 1)];
        self.q.push(k, i).unwrap();
        black_box(self.q.pop());
    }
}

fn criterion_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("fair_push_pop");
    group.throughput(Throughput::Elements(1));
    for keys in KEY_COUNTS {
        let mut fair = Fair::new(keys);
        let mut i = 0u64;
        group.bench_with_input(BenchmarkId::new("FairQueue", keys), &keys, |b, _| {
            b.iter(|| {
                i += 1;
                fair.step(i)
            })
        });
        let mut fifo = Fifo::new(keys);
        group.bench_with_input(BenchmarkId::new("VecDeque", keys), &keys, |b, _| {
            b.iter(|| {
                i += 1;
                fifo.step(i)
            })
        });
        if keys <= 1_024 {
            let mut fixed = Fixed::new(keys);
            group.bench_with_input(BenchmarkId::new("fixed::FairQueue", keys), &keys, |b, _| {
                b.iter(|| {
                    i += 1;
                    fixed.step(i)
                })
            });
        }
    }
    group.finish();
}

fn ratio_table() {
    let mut rows = Vec::new();
    for keys in KEY_COUNTS {
        let ops = 2_000_000;
        let mut fair = Fair::new(keys);
        let mut fifo = Fifo::new(keys);
        let ours = time_per_op(5, ops, |i| fair.step(i));
        let baseline = time_per_op(5, ops, |i| fifo.step(i));
        let target = match keys {
            1 => Some(1.5),
            65_536 => Some(3.0),
            _ => None,
        };
        rows.push(Ratio {
            label: format!("FairQueue, {keys} keys"),
            ours,
            baseline,
            target,
        });
        if keys <= 1_024 {
            let mut fixed = Fixed::new(keys);
            let ours = time_per_op(5, ops, |i| fixed.step(i));
            rows.push(Ratio {
                label: format!("fixed::FairQueue, {keys} keys"),
                ours,
                baseline,
                target: None,
            });
        }
    }
    print_ratio_table("push+pop per item vs VecDeque", "VecDeque", &rows);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    targets = criterion_benches
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    ratio_table();
}
