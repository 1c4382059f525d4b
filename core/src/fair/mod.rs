//! Fair-by-key queues: the snapshot-of-heads schedule.
//!
//! Items are pushed with a key (a tenant, a user, a customer). Each key has its own FIFO, and
//! delivery takes turns between keys so that one key's deep backlog cannot starve the others:
//!
//! * a `pop` serves from the current *snapshot*;
//! * when the snapshot is empty, a new one is taken: the head item of every key that has
//!   queued items, ordered oldest first by push order;
//! * items pushed while a snapshot is pending wait in their key's FIFO, never in the snapshot.
//!
//! A key that pushes one item therefore waits for at most the rest of the pending snapshot plus
//! one item of every other key: at most `2 (K - 1)` deliveries with `K` keys, however deep any
//! other key's backlog is.
//!
//! # Walkthrough
//!
//! ```
//! # #[cfg(feature = "alloc")] {
//! use fairq_core::fair::FairQueue;
//!
//! let mut q = FairQueue::new();
//! q.push("alice", 1).unwrap();
//! q.push("bob", 10).unwrap();
//! q.push("alice", 2).unwrap();
//! // The first pop takes a snapshot of the heads [alice 1, bob 10] and delivers alice 1.
//! assert_eq!(q.pop(), Some(1));
//! assert_eq!(q.snapshot().collect::<Vec<_>>(), [(&"bob", &10)]);
//! // Alice's later pushes queue behind her FIFO, not in the pending snapshot.
//! q.push("alice", 3).unwrap();
//! q.push("alice", 4).unwrap();
//! assert_eq!(q.pop(), Some(10)); // the rest of the snapshot
//! q.push("bob", 11).unwrap();
//! // New snapshot: [alice 2, bob 11]. Bob overtakes Alice's longer backlog.
//! assert_eq!(q.pop(), Some(2));
//! assert_eq!(q.pop(), Some(11));
//! assert_eq!(q.pop(), Some(3));
//! assert_eq!(q.pop(), Some(4));
//! assert_eq!(q.pop(), None);
//! # }
//! ```
//!
//! # Weights
//!
//! [`FairQueue::set_weight`] gives a key `w` places per round (deficit round robin counted in
//! items): while backlogged it receives `w` deliveries for every one of a weight-1 key. With every
//! weight at 1 the schedule is exactly the snapshot rule above. Weights go up to 65,535 (a
//! larger one counts as 65,535).
//!
//! # Complexity
//!
//! `push` and `pop` are O(1): a push does one hash-table lookup for its key and appends the
//! item to the back of its round; a pop takes the front of the front round. Taking a
//! snapshot costs nothing (see the engine notes below), and no pop allocates. Each round is stored
//! contiguously and read front to back (no per-item link to chase), emptied rounds' buffers
//! are reused for new rounds, and when one key is alone in a deep backlog its items are one
//! plain FIFO (the *run*) rather than a round each. Once the queue has reached its working
//! size pushes stop allocating; when it drains, large buffers and stale keys are given back.
//!
//! Introspection ([`FairQueueBase::snapshot`], [`FairQueue::backlog`], [`FairQueueBase::iter`])
//! and [`FairQueue::remove_key`] are O(n) and meant for monitoring and rare administrative use.
//!
//! # Measured
//!
//! `cargo bench -p fairq-benches --bench fair` runs one push and one pop per step with a
//! backlog kept queued, against `VecDeque` (a FIFO: the floor, not fair), a naive fair queue
//! (a `hashbrown` map of per-key `VecDeque`s plus a ring of keys, round robin), the
//! `fairqueue` crate and `VecDeque` plus one key-table lookup per push (the least any keyed
//! queue does), and prints the ratios; `benches/examples/fair_ops.rs` runs the same steps
//! under `valgrind --tool=callgrind`. Timings on a shared 2-vCPU machine move from run to run
//! (below), so instruction counts and simulated cache misses per step, which load does not
//! disturb, come first. `(u32, u64)` items, with the code as it is now (`fair_ops`, the queue
//! inlined into its loop; behind a call, as in the bench's ratio tables, `fairq-dyn` takes 120
//! at 64 keys); in brackets `FairQueue` / peer; last-level misses with a simulated 48 KiB L1
//! and 1 MiB L2:
//!
//! | case | `FairQueue` | `VecDeque` | naive map + ring | `fairqueue` crate | `VecDeque` + lookup |
//! |---|---:|---:|---:|---:|---:|
//! | 1 key, 1,024 queued | 79 | 46 (1.72x) | 177 (0.45x) | 118 (0.67x) | 93 |
//! | 64 keys, 1,024 queued | 101 | 46 (2.20x) | 176 (0.57x) | 745 (0.14x) | 93 (1.09x) |
//! | 64 keys, 1,000,000 queued | 102 | 46 (2.22x) | 177 (0.58x) | | 93 (1.10x) |
//! | 65,536 keys, 65,536 queued | 95 | 46 (2.07x) | 178 (0.53x) | | 93 (1.02x) |
//! | L2 misses, 1M queued | 0.66 | 0.56 | 0.27 | | 0.56 |
//! | L2 misses, 65,536 keys | 0.44 | 0.56 | 4.15 | | 0.71 |
//!
//! One run of the bench on 2026-11-29 on a 2-vCPU AMD EPYC (CPU family 25; 32 KiB L1d and
//! 1 MiB L2 per core), load average 1.08, ns per push+pop (thread CPU time, median of
//! seven samples of 10^6 steps, contenders in turns) and ratio:
//!
//! | case | `FairQueue` | `VecDeque` | naive | `fairqueue` crate | `VecDeque` + lookup | target |
//! |---|---:|---:|---:|---:|---:|---|
//! | 1 key | 5.6 | 6.3 (0.89x) | 12.0 | 6.7 (0.84x) | 7.3 | <= 2x `VecDeque`, 1x the crate: met |
//! | 64 keys | 10.5 | 3.4 (3.14x) | 13.7 (0.77x) | 48.0 | 7.5 | <= 0.67x naive: missed |
//! | 1,024 keys | 10.1 | 3.4 | 25.5 (0.40x) | | 7.6 | |
//! | 65,536 keys | 16.1 | 6.5 (2.48x) | 35.1 (0.46x) | | 10.6 | <= 3x `VecDeque`: met |
//! | 64 keys, 1M queued | 20.7 | 6.7 (3.08x) | 14.6 (1.41x) | | 12.5 | <= 4x `VecDeque`: met |
//!
//! Heap bytes per queued item, from a counting allocator: 16.8, 20.0 and 17.1 at 1, 64 and
//! 65,536 keys with a million queued, against 16.8 for `VecDeque` (1.00x, 1.19x, 1.02x; target
//! 1.3x: met); a drained queue keeps 6.6 KB. `fixed::FairQueue` took 8.1 ns at 1 key and 15.6
//! at 64 keys.
//!
//! Read the 1-key row with care: on this machine a `VecDeque` push+pop loop runs in one of two
//! modes, about 2.3 or 6.7 ns per step, and one mode often lasts a whole measurement.
//! `fair_ops vecdeque 64 1024` was slow in 5 of 12 runs, in either CPU, with 1,000 queued as
//! with 1,024, and with address randomization off; the cause is not known. In this run the
//! 1-key `VecDeque` was in its slow mode and the 64-key one in its fast mode. In `fair_ops`
//! the queue takes 4.3-4.6 ns at 1 key against 2.3-2.5 for a fast `VecDeque` (about 1.9x),
//! and a second bench run minutes later (with 1,001 items queued instead of 1,024, tried and
//! put back) measured 2.04x `VecDeque` (6.7 ns against 3.3) and 1.01x the crate (both
//! missed).
//!
//! Where the time goes, by case:
//!
//! * 1 key: the run, a plain FIFO; the 33 instructions over `VecDeque` are the checks that
//!   tell a push for the run's key and a pop of the run from the others.
//! * 64 keys, 1,024 queued: nothing misses the cache, so time follows instructions: a push
//!   is a key-table lookup (about 30 instructions), the key's round (10) and an append to
//!   that round's `Vec`; a pop advances an iterator. That is 1.09x the `VecDeque` + lookup
//!   floor in instructions, and 1.3x-1.5x its time: the append's address comes from the
//!   lookup, so the store waits for it, where the floor's append does not. The floor itself
//!   takes 0.5x-0.6x the naive queue's time in most runs, so 0.67x the naive queue asks for
//!   rounds that cost almost nothing beyond the lookup every keyed queue makes; the target
//!   was met in some runs on some machines and is missed in most.
//! * 65,536 keys: every push reads and writes its key's entry at a random place in a
//!   1 MiB table (131,072 buckets of 8 bytes), and its round, item and the table entry
//!   depend on each other, so the misses of consecutive steps overlap less than the floor's
//!   (no more L2 misses, 1.3x-2.2x its time across machines, 1.5x here). The floor alone
//!   is 1.6x-2.6x `VecDeque` in the bench, so whether 3x `VecDeque` is met depends on the
//!   machine's caches: met here and on a machine with 2 MiB of L2 per core, missed on
//!   Zen 5 machines (4.14x on 2026-11-29 and again on 2026-11-30), where `VecDeque` took
//!   2.4 ns, and on a 2.45 GHz machine of this family (5.96x, where the floor alone took
//!   3.73x); met again on a 2.6 GHz machine of the family (model 17) on 2026-11-30,
//!   2.50x-2.96x in four runs.
//! * 64 keys with a million queued: each key's items fill consecutive rounds, so a push
//!   appends to the round after its key's last one: 64 write positions spread over thousands
//!   of rounds, each push a line not in L1 (1.9 L1 misses per step against `VecDeque`'s
//!   0.56); the naive queue writes each key's items one after another (0.9) and is faster
//!   here. Reading is sequential in all three. The 4x target was met here (3.08x) and missed
//!   on the Zen 5 machines (6.76x, then 7.06x; already at 100,000 queued the queue took
//!   10.7 ns a step there against the naive queue's 8.3) and on the 2.45 GHz one (7.96x;
//!   the floor 1.84x); met on the 2.6 GHz one (3.42x-3.65x in four runs), where 64 keys
//!   took 0.69x-0.82x the naive queue (missed).
//!
//! Measured and set aside (the numbers are in the log named below): a key table of its own
//! (open addressing, key and state side by side: more mispredicts at 64 keys and more
//! last-level misses at 65,536); *staged* pushes, written first to a short list and placed
//! eight pushes later so that the store does not wait on the key's cache miss (once a
//! machine's 2 MiB second-level cache held the table of 65,536 keys, their instructions cost
//! more than the wait they hid, and with 262,144 and 1,048,576 keys as well); rounds in
//! chains of 16-item buffers taken hot from the pool (2.5x slower); a software prefetch of
//! the next round (a small gain on the read side, and it needs `unsafe`); pops that call out
//! for everything but the next item of the read buffer.
//!
//! Every run on every machine, and the before and after of each change above, are in
//! `benches/results/fair.md` at the root of the repository, newest first.
//!
//! # Variants
//!
//! One API, [`FairQueueBase`], over two storages:
//!
//! * [`FairQueue`] (feature `alloc`): growable storage ([`HeapStorage`]), `hashbrown` key
//!   table;
//! * [`fixed::FairQueue`]: `heapless` storage with const-generic capacities
//!   ([`fixed::FixedStorage`]), for targets without an allocator.
//!
//! # Engine notes
//!
//! The snapshot rule is equivalent to assigning each item a *round* at push time: a key's first
//! queued item joins the next snapshot's round, each further item the round after its
//! predecessor's (a key of weight `w` fills `w` places per round). Pushes arrive in order, so
//! appending to a round keeps it sorted by age, and delivering round after round reproduces
//! the snapshot schedule exactly.
//!
//! # The same rule in the stores
//!
//! A durable store must apply the rule atomically inside the store, so the rounds are mirrored
//! there rather than computed here: `adapters/postgres/src/sql.rs` keeps an indexed `round`
//! column per job and claims `ORDER BY round, seq ... FOR UPDATE SKIP LOCKED`, and the Redis
//! scripts in `adapters/redis/src/lua/*.lua` keep a sorted set scored by round. Both assign a
//! job's round as [`FairQueueBase::push`] does (the key's last round plus one, never before
//! the round after the one being delivered). The differential tests
//! `adapters/postgres/tests/model.rs` and `adapters/redis/tests/model.rs` hold each store to
//! the in-memory store built on this queue, claim order included.

mod engine;
mod full;
#[cfg(feature = "alloc")]
mod heap;
mod iter;
mod key_state;
#[cfg(feature = "alloc")]
mod keys;
mod queue;
mod storage;
mod weights;

pub mod fixed;

pub use full::Full;
#[cfg(feature = "alloc")]
pub use heap::{FairQueue, HeapStorage};
pub use iter::Iter;
pub use queue::FairQueueBase;
pub use storage::Storage;
