//! A driver for instruction counts of the wait-queue's item path, which a noisy machine does
//! not disturb: one thread pushes and pops (never waits), with a backlog kept queued, so the
//! count is the cost of the store and of the hand-off bookkeeping around it, without any
//! thread switch.
//!
//! ```sh
//! cargo build --release -p fairq-benches --example blocking_ops
//! valgrind --tool=callgrind target/release/examples/blocking_ops fairq unbounded 1024 1000000
//! ```
//!
//! Arguments: contender (`fairq`: `WaitQueue` push/try_pop; `crossbeam`: crossbeam-channel
//! send/try_recv; `kanal`; `flume`; `store`: the bare crossbeam-queue store that `WaitQueue`
//! keeps its items in, `SegQueue` unbounded or `ArrayQueue` bounded), `unbounded` or
//! `bounded` (capacity 2,048), items kept queued, steps. Subtract a run with 0 steps to leave
//! out the set-up.

use std::hint::black_box;

use fairq_blocking::{FullPolicy, WaitQueue};

const BOUND: usize = 2_048;

fn run(queued: u64, steps: u64, push: impl Fn(u64), pop: impl Fn() -> Option<u64>) {
    for i in 0..queued {
        push(i);
    }
    for i in 0..steps {
        push(i);
        black_box(pop());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage =
        "usage: blocking_ops fairq|crossbeam|kanal|flume|store unbounded|bounded QUEUED STEPS";
    let number = |i: usize| -> u64 {
        args.get(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("{usage}"))
    };
    let (queued, steps) = (number(2), number(3));
    let bounded = match args.get(1).map(String::as_str) {
        Some("unbounded") => false,
        Some("bounded") => true,
        _ => panic!("{usage}"),
    };
    match args.first().map(String::as_str) {
        Some("fairq") => {
            let q = if bounded {
                WaitQueue::bounded(BOUND, FullPolicy::Refuse)
            } else {
                WaitQueue::unbounded()
            };
            run(queued, steps, |v| q.push(v).expect("room"), || q.try_pop());
        }
        Some("crossbeam") => {
            let (tx, rx) = if bounded {
                crossbeam_channel::bounded(BOUND)
            } else {
                crossbeam_channel::unbounded()
            };
            run(
                queued,
                steps,
                |v| tx.send(v).expect("open"),
                || rx.try_recv().ok(),
            );
        }
        Some("kanal") => {
            let (tx, rx) = if bounded {
                kanal::bounded(BOUND)
            } else {
                kanal::unbounded()
            };
            run(
                queued,
                steps,
                |v| tx.send(v).expect("open"),
                || rx.try_recv().ok().flatten(),
            );
        }
        Some("flume") => {
            let (tx, rx) = if bounded {
                flume::bounded(BOUND)
            } else {
                flume::unbounded()
            };
            run(
                queued,
                steps,
                |v| tx.send(v).expect("open"),
                || rx.try_recv().ok(),
            );
        }
        Some("store") if bounded => {
            let q = crossbeam_queue::ArrayQueue::new(BOUND);
            run(queued, steps, |v| q.push(v).expect("room"), || q.pop());
        }
        Some("store") => {
            let q = crossbeam_queue::SegQueue::new();
            run(queued, steps, |v| q.push(v), || q.pop());
        }
        _ => panic!("{usage}"),
    }
}
