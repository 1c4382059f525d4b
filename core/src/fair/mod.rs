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
//! under `valgrind --tool=callgrind`. The development machine has 2 vCPUs shared with other
//! builds, and its timings move by up to 2x from run to run (even `VecDeque` alone takes
//! 3.4 ns per step in some runs and 6.5 in others), so instruction counts and simulated
//! cache misses per step, which load does not disturb, come first. `(u32, u64)` items, with
//! the code as it is now (`fair_ops`, the queue inlined into its loop; behind a call, as in
//! the bench's ratio tables, `fairq-dyn` takes 120 at 64 keys); in brackets `FairQueue` /
//! peer; last-level misses with a simulated 48 KiB L1 and 1 MiB L2:
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
//! On a 2-vCPU AMD EPYC of the Zen 5 generation (48 KiB L1d and 1 MiB L2 per core), where
//! `VecDeque` takes 2.4 ns per step, one `cargo bench` run (load average 1.2), ns per step
//! and ratio: 1 key 3.8 (1.59x `VecDeque`, 0.77x the crate: met); 64 keys 6.9 against the
//! naive queue's 9.9 (0.70x, target 0.67x: missed); 65,536 keys 10.1 (4.14x `VecDeque`,
//! target 3x: missed); 64 keys with a million queued 16.8 (6.76x, target 4x: missed; the
//! naive queue 10.7); heap bytes 1.00x / 1.19x / 1.02x `VecDeque`'s. At 65,536 keys the
//! queue executes as many instructions as the `VecDeque` + lookup floor and misses the
//! simulated L2 less, yet takes 1.6x its 6.3 ns: the floor's append does not wait for its
//! lookup, while the queue's append goes to the round the key's entry names (see below).
//! The earlier machines' tables follow.
//!
//! One `cargo bench` run on an earlier, busier machine (contenders timed in turns, thread CPU
//! time; load average 10.30 before, 10.40 after), ns per step and ratio:
//!
//! | case | `FairQueue` | `VecDeque` | naive | `fairqueue` crate | target |
//! |---|---:|---:|---:|---:|---|
//! | 1 key | 6.5 | 3.4 (1.91x) | 12.3 | 6.7 (0.97x) | <= 2x `VecDeque`, <= 1x the crate: met |
//! | 64 keys | 12.7 | 3.5 | 21.1 (0.60x) | 49.9 | <= 0.67x naive: met in this run only |
//! | 1,024 keys | 14.1 | 3.4 | 25.7 (0.55x) | | |
//! | 65,536 keys | 25.1 | 6.5 (3.86x) | 64.0 | | <= 3x `VecDeque`: missed |
//! | 64 keys, 1M queued | 36.1 | 6.2 (5.79x) | 20.5 | | <= 4x `VecDeque`: missed |
//!
//! Four more runs of the same binary within the next minute (load 10.1 to 10.2): 1 key
//! 0.93-1.93x `VecDeque` (as `VecDeque` took 6.5 or 3.4 ns) and 0.89-0.96x the crate; 64 keys
//! 0.81-1.04x the naive queue (which took 13.7 to 16.7 ns: the 21.1 above is its own outlier);
//! 65,536 keys 3.65-3.86x `VecDeque`; a million queued 4.17-4.85x. Heap bytes per queued
//! item, from a counting allocator (not disturbed by load): 16.8 at 1 key, 20.0 at 64 keys and
//! 17.4 at 65,536 keys with a million items, against 16.8 for `VecDeque` (1.00-1.19x); a
//! drained queue keeps about 7 KB.
//!
//! A later session on a quieter and faster machine (load average 1.3 to 1.5; `VecDeque` 3.4
//! ns at 1 key, 6.1 at 65,536 keys), one full run: 1 key 1.79x `VecDeque` and 0.89x the
//! crate, 64 keys 0.89x the naive queue (target 0.67x: missed), 65,536 keys 2.67x `VecDeque`
//! (target 3x: met in that run), 64 keys with a million queued 4.16x (target 4x: missed),
//! heap bytes 1.00x / 1.19x / 1.02x. Six more runs
//! minutes apart: 65,536 keys 2.46-3.20x, a million queued 3.98-4.89x, 64 keys 0.88-0.98x
//! the naive queue, 1 key 0.80-0.88x the crate.
//!
//! Where the time goes, by case:
//!
//! * 1 key: the run, a plain FIFO; the 33 instructions over `VecDeque` are the checks that
//!   tell a push for the run's key and a pop of the run from the others.
//! * 64 keys, 1,024 queued: nothing misses the cache, so time follows instructions: a push
//!   is a key-table lookup (about 30 instructions), the key's round (10) and an append to
//!   that round's `Vec`; a pop advances an iterator. That is 1.09x the `VecDeque` + lookup
//!   floor, which itself takes about half the naive queue's time in most runs: 0.67x the
//!   naive queue would need rounds that cost almost nothing beyond the lookup every keyed
//!   queue makes.
//! * 65,536 keys: every push reads and writes its key's entry at a random place in a
//!   1 MiB table (131,072 buckets of 8 bytes), and its round, item and the table entry
//!   depend on each other, so the misses of consecutive steps overlap less than the floor's
//!   (no more L2 misses, 2.1-2.2x its time in five runs on an earlier machine, 1.6x on the
//!   Zen 5 one).
//! * 64 keys with a million queued: each key's items fill consecutive rounds, so a push
//!   appends to the round after its key's last one: 64 write positions spread over thousands
//!   of rounds, each push a line not in L1 (1.9 L1 misses per step against `VecDeque`'s
//!   0.56); the naive queue writes each key's items one after another (0.9). Reading is
//!   sequential in all three.
//!
//! Since these tables, a push's common path keeps nothing across a call (every rare case is
//! a cold call in tail position): where `push` is inlined, as in `fair_ops`, that changes
//! nothing (1-2 instructions more per step), but the bench's contender calls it, and there a
//! push saves one register instead of six. The bench binaries before and after, run in turns
//! three times each (load average 4.8-4.9), FairQueue ns per push+pop: 64 keys 14.8 / 12.6 /
//! 13.5 before, 13.4 / 11.6 / 12.7 after; 65,536 keys 34.6 / 32.6 / 26.2 before, 24.2 /
//! 22.9 / 21.0 after; a million queued 44.5 / 45.5 / 46.0 before, 34.0 / 33.3 / 42.8 after.
//!
//! Staged pushes (a push into an existing round is written to a short list first and placed
//! eight pushes later, at first only while the key table held 8,192 keys or more; see
//! [`HeapStorage`]): at
//! 65,536 keys the store of the item into its round had to wait for the key's entry, a cache
//! miss, and loads behind that store waited with it. The bench binaries before and after, run
//! in turns twice each (load average 5.0-6.1), FairQueue ns per push+pop at 65,536 keys:
//! 19.0 / 19.8 before, 17.1 / 18.0 after (2.98x / 3.41x `VecDeque` before, 2.81x / 3.05x
//! after, as `VecDeque` took 6.4 / 5.8 and 6.1 / 5.9 ns); 64 and 1,024 keys and a million
//! queued unchanged within the noise (they did not stage then; every push is staged since,
//! which measured the same or a little faster there). Instructions per step at 65,536 keys:
//! 140 before, 181 after; the time went down all the same.
//!
//! Then 4-byte key entries (a weighted key's weight in a slab beside the key table, see
//! `KeyState` in `key_state.rs`), so that a `u32` key's slot in the table takes 8 bytes instead
//! of 12; a queue then holds at most 2^30 - 2 items. The bench binaries in turns, twice and
//! twice more (load average 5.0-6.5), FairQueue ns per push+pop at 65,536 keys: 16.2 / 16.3 /
//! 16.7 / 16.9 with it against 17.1 / 18.0 / 18.0 / 18.3 without (2.49x-2.64x `VecDeque`
//! against 2.75x-3.05x); at 64 keys 12.2-15.5 against 11.4-12.2, and at 1,024 keys 12.1-12.6
//! against 11.5-12.4. One contender per process, ten runs each in turns (medians, load
//! 2-4): 15.5 against 16.9 at 65,536 keys, but 12.1 against 11.2 at 64 keys and 13.5
//! against 11.9 at 1,024 keys, where the table fits the first-level cache and the smaller
//! slot is slower for a reason not found (as many instructions; see `KeyState`).
//!
//! After these changes (every push staged, 4-byte entries), `fair_ops` under callgrind: 75
//! (1 key), 152 (64 keys), 152 (a million queued) and 146 (65,536 keys) instructions per
//! step, against 73 / 118 / 120 / 113 in the table above: staging costs instructions, and
//! the time did not go up with them. Simulated L2 misses per step: 0.67 with a million
//! queued, 0.43 at 65,536 keys (0.73 and 0.66 above). One bench run (load average 3.9), ns
//! per push+pop and ratio: 1 key 5.8 (1.70x `VecDeque`, 0.86x the crate); 64 keys 12.8
//! (0.94x the naive queue: missed); 1,024 keys 15.9; 65,536 keys 16.3 (2.51x `VecDeque`:
//! met); a million queued 28.7 (4.40x: missed in this run; 3.6x-4.7x over eight runs, as
//! before these changes: 3.5x-5.3x). Heap bytes per item 16.8 / 20.0 / 17.1 against 16.8
//! for `VecDeque`; a drained queue keeps 6.9 KB.
//!
//! Before the last four changes above the counts were 71 (1 key), 143 (64 keys), 143
//! (a million queued) and 143 (65,536 keys) instructions, with 0.92 L2 misses per step at
//! 65,536 keys; the quiet run quoted then measured 65,536 keys at 3.90x `VecDeque`, a
//! million queued at 4.28x and 64 keys at 1.05x the naive queue.
//!
//! Then pushes go straight to their rounds while the key table fits in 32 KiB (4,096 `u32`
//! keys; see [`HeapStorage`]): staging had cost a branch mispredict every other push where
//! the table is in the first-level cache (cachegrind's branch simulation of `fair_ops fairq
//! 64 1024`: 0.55 mispredicts and 153 instructions per step, 0.09 and 123 straight). Which
//! way pushes go is one flag, set at each snapshot: testing the table's size and both stages
//! on every push had made 65,536 keys, where pushes stage, 12% slower. The bench's ratio
//! tables of the binaries before and after, run in turns twice each on a quiet machine (load
//! average 1.3-1.4), FairQueue ns per push+pop, before / after: 64 keys 11.9, 12.1 / 12.5,
//! 10.3; 1,024 keys 11.9, 11.2 / 9.7, 9.9; a million queued 29.4, 28.6 / 24.7, 23.6; 65,536
//! keys 14.4, 13.9 / 14.8, 14.2; 1 key 6.5, 7.1 / 6.5, 6.5. One more run after (load average
//! 1.1), against the targets: 1 key 6.5 ns, 1.76x `VecDeque` and 0.74x the crate (both met);
//! 64 keys 10.2 ns, 0.74x the naive queue (missed: 0.67x; the naive queue's own time moved
//! between 13.8 and 18.1 ns over these runs, the ratio between 0.66x and 0.89x; the queue is
//! 1.51x the `VecDeque` + lookup floor, which is itself 0.49x the naive queue); 65,536 keys
//! 14.5 ns, 3.53x `VecDeque` (missed: 3x; this code measured 2.5x-2.6x on machines where
//! `VecDeque` took 6 ns rather than 4); a million queued 23.9 ns, 5.22x (missed: 4x); heap
//! bytes per item 1.00x / 1.19x / 1.02x `VecDeque` (met), 6.9 KB kept after a drain.
//!
//! Tried after that and not kept. `fair_ops` under cachegrind (1 MiB last level, 10^6 steps
//! less a run of none), per push+pop, this version first: instructions, first-level data
//! misses, last-level misses, mispredicted branches (cachegrind's simple predictor):
//! 64 keys 119.5 / 0.46 / 0.004 / 0.08; a million queued 120.0 / 1.84 / 0.66 / 0.09;
//! 65,536 keys 149.8 / 2.42 / 0.44 / 0.27; 1 key 75.0 / 0.34 / 0 / 0 (`VecDeque` 46.0 /
//! 0.56 / 0.56; `VecDeque` + lookup 93.0 at 64 keys, 93.1 / 2.37 / 0.71 at 65,536).
//!
//! * A key table of its own instead of `hashbrown`'s: open addressing, linear probing, at
//!   most half full, key and state side by side in a slot (12 bytes for a `u32` key), so a
//!   lookup reads the slot its hash names rather than a group of control bytes and then a
//!   slot. 64 keys: 111.9 instructions but 0.55 mispredicts (whether the key is in its home
//!   slot is close to a coin toss at half load, where the group match's branch is
//!   predictable); 65,536 keys: 140.5 instructions, 0.50 mispredicts and 0.92 last-level
//!   misses (1.5 MiB of slots, where `hashbrown` reads 1 MiB of slots behind 128 KiB of
//!   control bytes that stay cached). Timed in turns with the binary before it (user time,
//!   load average 3.0-3.4), nothing to tell them apart: 64 keys 16.4-21.0 ns against
//!   17.8-20.4, 65,536 keys 35.3-41.3 against 30.3-40.0.
//! * A pop that first checks whether the buffer it reads holds more than this item, before
//!   the length and the snapshot flag: 118.7 instructions at 64 keys, but 80.0 at 1 key and
//!   0.12 mispredicts at 64 keys (the compiler tests the buffer's end twice).
//! * A pop that first takes the next item of the buffer it reads, if there is one (there
//!   is only while a snapshot is pending), and tests the length and the snapshot flag only
//!   when that item was the snapshot's last or there was none. Instructions per push+pop
//!   before / with it: 64 keys 119.5 / 114.7, a million queued 120.0 / 115.1, 65,536 keys
//!   149.8 / 144.8, 1 key 75.0 / 77.0; misses and mispredicts unchanged. The bench's ratio
//!   tables, two runs of each binary in turns on a machine busy with other work (load
//!   average 4.5-7.6; `VecDeque` took 4.9-8.2 ns), ns per push+pop with / before: 64 keys
//!   23.9, 23.6 / 24.1, 20.8; 65,536 keys 50.8, 47.8 / 33.0, 39.9; a million queued 98.7,
//!   80.9 / 83.7, 76.7; 1 key 12.9, 8.5 / 11.9, 8.1. Slower in both pairs at 65,536 keys,
//!   which the counts do not explain and that load cannot confirm; not kept until a quiet
//!   machine says otherwise. (Its test, that pops from the read buffer end the snapshot
//!   and drain the queue, stays: it holds for the pop as it is.) Kept since: see below.
//!
//! Then fewer instructions per push and pop, where the target against the naive queue was
//! missed (0.73x-0.82x in time in the runs below, 0.68x in instructions; the target is
//! 0.67x):
//!
//! * the pop just above, which takes the next item of the buffer it reads first. The bench
//!   binaries of the queue before it and with it alone, four runs each in turns on a
//!   quieter machine (load average 3.2-3.3; `VecDeque` 2.4-2.6 ns), FairQueue ns per
//!   push+pop at 65,536 keys: 11.8-12.2 before, 11.7-12.2 with it;
//! * a key's new round placed in fewer instructions (see `KeyState::place`), and a round's
//!   storage index computed as `at - 1 + pending` (`at - !pending` took two more);
//! * the length kept as the room left (the bound less the length), so that one subtraction
//!   both tests for room and counts the pushed item;
//! * the key table a `hashbrown::HashTable` beside its hasher (`keys.rs`) rather than a
//!   `HashMap`, whose lookups first test whether the map is empty;
//! * the slow paths of a push that cannot fail return nothing, and a refusal is built in
//!   `push` itself: where `push` is inlined its result on the common path is then a
//!   constant (no store of `Ok` and no test of it). And the round being delivered is read
//!   after the key's lookup rather than before it, which leaves the bench's contender (where
//!   `push` is a call) two registers to save and restore instead of three.
//!
//! Per push+pop under callgrind, before / after: 64 keys 119.5 / 103.8 (the naive queue
//! 175.5 / 176.8 in the two binaries: 0.68x / 0.59x), a million queued 120.0 / 104.3,
//! 65,536 keys 150.1 / 133.3, 1 key 75.0 / 78.0 (the look at the read buffer, which is empty
//! at one key, costs three). Simulated misses unchanged (first level 0.39, 1.71 and 2.31
//! per step at 64 keys, a million queued and 65,536 keys; last level 0.004, 0.66 and
//! 0.43); mispredicts 0.08 before and 0.12 after at 64 keys (the read buffer's end, once a
//! round). The bench binaries before and after, three runs each in turns (load average
//! 2.8-3.0; `VecDeque` 2.3-2.4 ns, faster than on the machines above), FairQueue ns per
//! push+pop, before / after: 64 keys 7.8-8.1 / 6.9-7.2, that is 0.73x-0.82x / 0.66x-0.70x
//! the naive queue (9.9-11.0 ns); 1,024 keys 7.4-7.8 / 6.4-6.7; 65,536 keys 11.4-12.1 /
//! 10.3-10.5 (4.7x-4.9x / 4.3x-4.4x `VecDeque`: the 3x target missed on this machine before
//! and after); a million queued 17.6-22.9 / 17.3-18.7 (7.0x-8.9x / 6.8x-7.6x: the 4x
//! target missed on this machine before and after); 1 key 3.9-4.0 / 3.8-3.9 (1.6x
//! `VecDeque`, 0.76x-0.80x the crate); `fixed::FairQueue` 6.0-6.1 / 5.5-5.8 ns at 1 key and
//! 12.5 / 11.6-12.1 at 64. Heap bytes per item unchanged (1.00x / 1.19x / 1.02x; 6.9 KB
//! kept after a drain).
//!
//! The hot loop at 64 keys is now some 96 instructions: about 30 of them the key's lookup
//! (the hash, the group match and the entry's load) and 12 the bench's own. The queue is
//! slower against the `VecDeque` + lookup floor than its instructions say (6.9-7.3 ns
//! against 4.8, about 1.5x, for 1.1x the instructions), for a reason not known for
//! certain. A toy (`VecDeque` plus a lookup plus one more store of the item) points at the
//! append to the key's round, whose address waits on the lookup: one more store cost 1.2
//! ns per step when its address came from the lookup and 0.3 when it did not, and an
//! append to one of 16 small buffers 2.4 ns when the lookup chose the buffer and 0.8 when
//! it did not. Staging that append (as pushes do with many keys) was slower at 64 keys in
//! a toy of the queue's steps (6.3 against 5.9 ns) as in the queue itself (7.8-8.0
//! against 6.9-7.1 in a driver built like the bench's). The two dependent misses of a
//! lookup at 65,536 keys and the scattered writes into rounds with a million queued are
//! not instructions either.
//!
//! Then every push goes straight to its round, at any number of keys: staging is gone. On
//! this development machine (2 MiB second-level cache per core, which holds the key table
//! of 65,536 `u32` keys) the store no longer waited long enough on the key's entry to pay
//! for staging's instructions: 65,536 keys took 133.2 instructions per push+pop in
//! `fair_ops` under cachegrind before and 94.9 after, against 93.1 for `VecDeque` + lookup
//! (first-level misses 2.31 before and after, last-level 0.08 with a simulated 2 MiB
//! cache); 64 keys 103.8 / 101.7 (the flag that chose the way is gone), a million queued
//! 104.3 / 102.2 (misses unchanged: 1.71 and 0.60), 1 key 78 / 79. A copy of the bench's
//! contenders in a driver of its own (thread CPU time, medians of five runs of 10^6 steps,
//! binaries in turns; load average 2.5-5), ns per push+pop with 65,536 keys, staged /
//! straight: 13.4-15.0 / 7.8-9.4; with 262,144 keys (the table past that cache) 16.2-16.4
//! / 11.2-11.6 and with 1,048,576 keys 18.0-19.5 / 11.9-12.3 (`VecDeque` + lookup 8.5-8.7
//! and 10.4-11.3); 64 keys, 1,024 keys, a million queued and 1 key unchanged within the noise.
//! The bench's ratio tables, binaries before and after in turns, four runs each (load
//! average 2.7-5.0; `VecDeque` 2.9-3.7 ns), FairQueue ns per push+pop, before / after:
//! 65,536 keys 10.3-11.2 / 9.5-9.9 (2.90x-3.06x / 2.70x-2.91x `VecDeque`: 3x missed in two
//! runs of four before, met in all four after; 1.47x-1.48x / 1.27x-1.28x `VecDeque` +
//! lookup); 64 keys 6.8-7.1 / 6.3-7.4 (0.62x-0.68x / 0.62x-0.74x the naive queue, 0.67x
//! missed in one run of four before and after: in that run after, the naive queue took 9.9
//! ns where it took 10.1-10.7 in the others); a million queued 21.9-23.3 / 21.8-22.1; 1 key
//! 4.6 / 4.6-4.7 (1.45x-1.57x `VecDeque`, 0.71x-0.74x the crate); heap bytes per item
//! unchanged (1.00x / 1.19x / 1.02x), 6.6 KB kept after a drain (6.9 before).
//!
//! Where the two remaining gaps come from, with these numbers:
//!
//! * 65,536 keys: the queue is now 1.27x-1.28x the `VecDeque` + lookup floor in the bench,
//!   and that floor alone was 2.0x-2.3x `VecDeque` in the same runs (2.8x-3.2x in the
//!   driver above, where `VecDeque` took 1.9-2.1 ns): one hash-table read-modify-write per
//!   push uses most of the 3x budget, or all of it. The queue's own instructions are now
//!   about the floor's (95 against 93; as many first-level misses, fewer last-level ones);
//!   the time left over is the append, whose address comes from the key's entry: most
//!   pushes at 65,536 keys go to the same one or two rounds, each reading and writing that
//!   round's length, so consecutive appends wait on each other's lookups (what staging
//!   hid, at a higher price in instructions).
//! * A million queued: 2.6x the floor (21.9 against 8.4-8.5 ns in the bench; the ratio to
//!   `VecDeque` moves with `VecDeque`'s own time, 5.7-7.4 ns in these runs and 2.4 on a
//!   quiet machine). Instructions are those of 64 keys; the difference is memory. Each key's
//!   pushes go to the round after its last one, and the 64 keys' last rounds drift apart
//!   (their depths are random walks): thousands of rounds are being appended to at once,
//!   each over tens of thousands of steps, so an append's line has often left the
//!   second-level cache since its buffer was recycled (0.86 first-level and 0.19 simulated
//!   last-level store misses per push), and pops read 1 KiB buffers that the hardware
//!   prefetcher picks up late (push only: 15.3-15.9 ns against 9.1-9.7 for `VecDeque` +
//!   lookup; pop only: 3.9-5.5 against 1.9-2.3 for `VecDeque`). Tried and not kept: rounds
//!   in chains of 16-item buffers taken hot from the pool, so that an append never touches
//!   a line untouched since recycling: 36-40 ns per push+pop against 13-17 (every 16 pops a
//!   buffer switch and a read the prefetcher cannot follow). A software prefetch of the next
//!   round's buffer when the pop starts on one (`_mm_prefetch`, measured with the crate's
//!   `forbid(unsafe_code)` lifted, so not kept) took pops from 3.9-4.1 to 3.3 ns and push+pop
//!   from 12.4-15.5 to 11.0-12.5 ns: the reading side is a small part of the gap, and the
//!   intrinsic needs `unsafe` to call here.
//!   Also tried and not kept: a pop that takes the read buffer's next item only while
//!   another follows it and calls out for everything else (so that the common path saves
//!   no registers): 64 keys 6.6-6.8 ns against 6.1-6.3, 1 key 4.7-4.8 against 4.0.
//!
//! One run of the bench's ratio tables on a later machine of the same kind (AMD EPYC, 2
//! vCPUs, load average 1.9; `VecDeque` 3.4 ns at 1 key, 5.2 at 65,536 keys), ns per push+pop
//! and ratio: 1 key 5.9 (1.75x `VecDeque`, 0.84x the crate: met); 64 keys 10.5 (0.77x the
//! naive queue's 13.7: missed); 65,536 keys 15.4 (2.97x: met); 64 keys with a million queued
//! 22.0 (5.68x `VecDeque`, 1.38x the naive queue: missed); heap bytes per item 1.00x, 1.19x
//! and 1.02x `VecDeque` (met), 6.6 KB kept after a drain.
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
