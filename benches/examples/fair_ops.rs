//! A driver for instruction counts, which a noisy machine does not disturb: runs one
//! contender of the fair bench for a number of push+pop steps with a backlog kept queued.
//!
//! ```sh
//! cargo build --release -p fairq-benches --example fair_ops
//! valgrind --tool=callgrind target/release/examples/fair_ops fairq 64 1024 1000000
//! valgrind --tool=callgrind target/release/examples/fair_ops naive 64 1024 1000000
//! ```
//!
//! Arguments: contender (`fairq`, `vecdeque`, `naive`, `fairqueue`, `floor`: `VecDeque` plus
//! one lookup of a 4-byte per-key state per push; `fairq-dyn`: `fairq` with each step a call
//! through `dyn FnMut`, as the bench's ratio tables take it), keys, items kept queued, steps.
//! Subtract a run with 0 steps to leave out the set-up.
//!
//! Inlined into this loop the queue's fields stay in registers from step to step; behind a
//! call they are loaded and stored each time, as in a program that keeps the queue in a
//! struct. At 64 keys and 1,024 queued on a 2-core AMD EPYC (Zen 5): `fairq` 101 instructions
//! and 5.4 ns per step, `fairq-dyn` 120 and 7.0 ns, `naive` 176 and 9.8 ns.

use std::collections::VecDeque;
use std::hint::black_box;

use fairq_core::fair::FairQueue;
use hashbrown::{DefaultHashBuilder, HashMap};

struct Event {
    key: u32,
    item: u64,
}

impl fairqueue::FairGroup for Event {
    fn is_same_group(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: fair_ops fairq|vecdeque|naive|fairqueue|floor KEYS QUEUED STEPS";
    let number = |i: usize| -> u64 {
        args.get(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("{usage}"))
    };
    let (keys, queued, steps) = (number(1), number(2) as usize, number(3));
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let stream: Vec<u32> = (0..1 << 16)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % keys) as u32
        })
        .collect();
    let key = |i: usize| stream[i & 0xffff];
    match args.first().map(String::as_str) {
        Some("fairq") => {
            let mut q = FairQueue::unbounded();
            for i in 0..queued {
                q.push(key(i), i as u64).expect("unbounded");
            }
            for i in 0..steps {
                q.push(key(i as usize), i).expect("unbounded");
                black_box(q.pop());
            }
        }
        Some("fairq-dyn") => {
            // As the fair bench's race runs it: each step a call through `dyn FnMut`, the
            // queue reached through a reference (its fields in memory, not in registers).
            let mut q = FairQueue::unbounded();
            for i in 0..queued {
                q.push(key(i), i as u64).expect("unbounded");
            }
            let mut step = |i: u64| {
                q.push(key(i as usize), i).expect("unbounded");
                black_box(q.pop());
            };
            let step: &mut dyn FnMut(u64) = black_box(&mut step);
            for i in 0..steps {
                step(i);
            }
        }
        Some("vecdeque") => {
            let mut q = VecDeque::new();
            for i in 0..queued {
                q.push_back((key(i), i as u64));
            }
            for i in 0..steps {
                q.push_back((key(i as usize), i));
                black_box(q.pop_front().map(|(_, item)| item));
            }
        }
        Some("floor") => {
            let mut q = VecDeque::new();
            let mut state: HashMap<u32, u32, DefaultHashBuilder> = HashMap::default();
            let mut push = |q: &mut VecDeque<(u32, u64)>, k: u32, v: u64| {
                let s = state.entry(k).or_insert(0);
                *s = s.wrapping_add(1);
                q.push_back((k, v));
            };
            for i in 0..queued {
                push(&mut q, key(i), i as u64);
            }
            for i in 0..steps {
                push(&mut q, key(i as usize), i);
                black_box(q.pop_front().map(|(_, item)| item));
            }
        }
        Some("naive") => {
            let mut fifos: HashMap<u32, VecDeque<u64>, DefaultHashBuilder> = HashMap::default();
            let mut ring = VecDeque::new();
            let push = |k: u32,
                        v: u64,
                        fifos: &mut HashMap<_, VecDeque<u64>, _>,
                        ring: &mut VecDeque<u32>| {
                let fifo = fifos.entry(k).or_default();
                if fifo.is_empty() {
                    ring.push_back(k);
                }
                fifo.push_back(v);
            };
            for i in 0..queued {
                push(key(i), i as u64, &mut fifos, &mut ring);
            }
            for i in 0..steps {
                push(key(i as usize), i, &mut fifos, &mut ring);
                let k = ring.pop_front().expect("queued");
                let fifo = fifos.get_mut(&k).expect("known");
                black_box(fifo.pop_front());
                if !fifo.is_empty() {
                    ring.push_back(k);
                }
            }
        }
        Some("fairqueue") => {
            let pool: Vec<Event> = (0..1 << 16)
                .map(|i| Event {
                    key: key(i),
                    item: i as u64,
                })
                .collect();
            let mut q = fairqueue::FairQueue::new();
            for event in pool.iter().take(queued) {
                q.insert(event);
            }
            for i in 0..steps as usize {
                q.insert(&pool[(queued + i) & 0xffff]);
                black_box(q.pop().map(|e| e.item));
            }
        }
        _ => panic!("{usage}"),
    }
}
