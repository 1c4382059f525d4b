//! A driver for instruction counts of the in-memory store, which a noisy machine does not
//! disturb: runs the job cycle of the worker bench (enqueue, claim under a lease, complete;
//! keys taken round robin, finished jobs pruned every 4,096 cycles) a number of times.
//!
//! ```sh
//! cargo build --release -p fairq-benches --example worker_ops
//! valgrind --tool=callgrind target/release/examples/worker_ops 1 100000
//! valgrind --tool=callgrind target/release/examples/worker_ops 1 0
//! ```
//!
//! Arguments: keys, cycles. Subtract a run with 0 cycles to leave out the set-up.
//!
//! # Measured
//!
//! Instructions per cycle (`Ir` of 100,000 cycles minus 0 cycles, divided by 100,000; the
//! system allocator, glibc 2.36; a cycle includes the driver's own `NewJob` and the three
//! strings it allocates). Roughly 3,000 to 4,000 instructions make a microsecond on the
//! development machine.
//!
//! | step | 1 key | 10,000 keys |
//! |---|---:|---:|
//! | before (B-tree job table, string clones per job) | 12,224 | 13,014 |
//! | hash job table + id order, `&str` lookups, no per-call vectors | 6,445 | 7,171 |
//! | prune in one pass over the table (records dropped in place) | 5,504 | 6,697 |
//! | the row above counted again on 2026-11-28 (no store change between) | 5,876 | 6,993 |
//! | the fair queue keeps the run's last key (no key copy per push at depth one) | 5,752 | 6,919 |
//! | the key table keeps room for the keys it takes before its next sweep | 5,751 | 6,174 |
//! | counted again on 2026-11-29 (no store change between) | 5,746 | |
//! | a prune forgets a finished job without looking up its queue | 5,611 | 6,020 |
//!
//! The last row: at 1,000 keys (6,913 -> 6,183) and 10,000 keys, each sweep of stale keys
//! shrank the key table to twice the keys left (one or two), and the table then grew back
//! (rehashing every key) four or five times before the next sweep, 64 new keys later: about
//! 7,000 rehashes per 100,000 cycles. The table now shrinks only when it holds more than four
//! times the keys it takes before the next sweep, and then to twice that: a first version
//! that shrank to once that (6,301 instructions) still grew and shrank now and then, as
//! erased keys' tombstones filled a table more than half full.
//!
//! What is left is mostly the allocator (seven allocations per cycle, at 1 key: the driver's
//! three `NewJob` strings, the store's copy of the key for the fair queue, the claimed job's
//! queue and kind strings and the claim's vector, all required by the `Job`/`NewJob` types;
//! 8.0 per cycle before the last row), the clock read per call, and the per-job record move
//! into the table.

use std::time::Duration;

use fairq_worker::{Backend, MemoryBackend, NewJob};
use futures::executor::block_on;

const LEASE: Duration = Duration::from_secs(30);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: worker_ops KEYS CYCLES";
    let number = |i: usize| -> u64 {
        args.get(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("{usage}"))
    };
    let (keys, cycles) = (number(0).max(1), number(1));
    let keys: Vec<String> = (0..keys).map(|k| format!("tenant-{k}")).collect();
    let store = MemoryBackend::new();
    for i in 0..cycles {
        let key = &keys[i as usize % keys.len()];
        let job = NewJob::new("bench", "noop", Vec::new()).key(key.clone());
        block_on(async {
            store.enqueue(job).await.expect("enqueue");
            let jobs = store.claim("bench", 1, LEASE).await.expect("claim");
            for job in jobs {
                store.complete(job.claim).await.expect("complete");
            }
        });
        if i % 4_096 == 4_095 {
            block_on(store.prune(Duration::ZERO.into())).expect("prune");
        }
    }
}
