//! Fairness report: how long a light key waits behind a heavy key's backlog, with the fair
//! queue and with a plain FIFO, and Jain's fairness index over backlogged keys.
//!
//! Run: `cargo run --release -p fairq-benches --example fairness`
//!
//! * Light-key wait: key 0 has a backlog of 10, 1,000 or 100,000 items; 7 light keys each
//!   push one item now and then (never more than one queued). For each light item we count
//!   the deliveries between its push and its own delivery. The fair queue promises at most
//!   2(K-1) = 14 with K = 8 keys, whatever the backlog. A light key pushes again as soon as
//!   its previous item was delivered, so light keys are nearly always queued too.
//! * Jain's index: 4 keys each push a backlog of the same size, one key after the other; over
//!   the first backlog-size deliveries we compute (Σx)² / (n Σx²) of the per-key delivery
//!   counts (1.0 = perfectly even, 1/n = one key takes everything).

use std::collections::VecDeque;

use fairq_core::fair::FairQueue;
use fairq_core::stats::Histogram;

const LIGHT_KEYS: u32 = 7;

trait Queue {
    fn push(&mut self, key: u32, item: u64);
    fn pop(&mut self) -> Option<(u32, u64)>;
}

struct Fair(FairQueue<u32, u64>);

impl Queue for Fair {
    fn push(&mut self, key: u32, item: u64) {
        self.0.push(key, item).expect("unbounded");
    }
    fn pop(&mut self) -> Option<(u32, u64)> {
        self.0.pop_with_key()
    }
}

struct Fifo(VecDeque<(u32, u64)>);

impl Queue for Fifo {
    fn push(&mut self, key: u32, item: u64) {
        self.0.push_back((key, item));
    }
    fn pop(&mut self) -> Option<(u32, u64)> {
        self.0.pop_front()
    }
}

/// Returns the histogram of light-key waits, in deliveries.
fn light_waits(q: &mut dyn Queue, backlog: u64) -> Histogram {
    for i in 0..backlog {
        q.push(0, i);
    }
    let mut waits = Histogram::new();
    // Per light key: the delivery count at which its queued item was pushed.
    let mut pending: Vec<Option<u64>> = vec![None; LIGHT_KEYS as usize + 1];
    let mut delivered = 0u64;
    let mut next_item = backlog;
    // Keep the heavy key backlogged for the whole run by topping it up as it drains.
    let steps = backlog.max(1_000) * 2;
    for step in 0..steps {
        let key = (step % u64::from(LIGHT_KEYS)) as u32 + 1;
        if pending[key as usize].is_none() {
            pending[key as usize] = Some(delivered);
            q.push(key, next_item);
            next_item += 1;
        }
        q.push(0, next_item);
        next_item += 1;
        if let Some((key, _)) = q.pop() {
            if key != 0
                && let Some(pushed_at) = pending[key as usize].take()
            {
                waits.record(delivered - pushed_at);
            }
            delivered += 1;
        }
    }
    waits
}

fn jain(q: &mut dyn Queue, backlog: u64) -> f64 {
    let keys = 4u32;
    for key in 0..keys {
        for i in 0..backlog {
            q.push(key, i);
        }
    }
    let mut counts = vec![0f64; keys as usize];
    for _ in 0..backlog {
        if let Some((key, _)) = q.pop() {
            counts[key as usize] += 1.0;
        }
    }
    let sum: f64 = counts.iter().sum();
    let squares: f64 = counts.iter().map(|x| x * x).sum();
    sum * sum / (f64::from(keys) * squares)
}

fn main() {
    let bound = 2 * LIGHT_KEYS;
    println!(
        "Light-key wait in deliveries (8 keys: 1 heavy, 7 light; fair bound 2(K-1) = {bound})"
    );
    println!(
        "{:>10} {:<10} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "backlog", "queue", "p50", "p99", "max", "samples", "jain"
    );
    for backlog in [10u64, 1_000, 100_000] {
        let fair = light_waits(&mut Fair(FairQueue::unbounded()), backlog);
        let fifo = light_waits(&mut Fifo(VecDeque::new()), backlog);
        let jain_fair = jain(&mut Fair(FairQueue::unbounded()), backlog);
        let jain_fifo = jain(&mut Fifo(VecDeque::new()), backlog);
        for (name, h, j) in [("fair", &fair, jain_fair), ("fifo", &fifo, jain_fifo)] {
            println!(
                "{:>10} {:<10} {:>8} {:>8} {:>8} {:>8} {:>8.3}",
                backlog,
                name,
                h.p50(),
                h.p99(),
                h.max(),
                h.count(),
                j
            );
        }
        let verdict = if fair.max() <= u64::from(bound) {
            "within"
        } else {
            "OVER"
        };
        println!(
            "{:>10} fair max wait {} is {verdict} the bound; fifo max / fair max = {:.0}x",
            "",
            fair.max(),
            fifo.max() as f64 / fair.max().max(1) as f64
        );
    }
}
