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
//! ```
//!
//! # Weights
//!
//! [`FairQueue::set_weight`] gives a key `w` places per round (deficit round robin counted in
//! items): while backlogged it receives `w` deliveries for every one of a weight-1 key. With every
//! weight at 1 the schedule is exactly the snapshot rule above.
//!
//! # Complexity
//!
//! `push` and `pop` are O(1): a push does one hash-table lookup for its key and links the item
//! at the end of its round; a pop unlinks the head of the front round. Taking a snapshot costs
//! nothing (see the engine notes below), and no pop allocates. Storage is a slab with a free
//! list, so once the queue has reached its working size pushes stop allocating too. Stale
//! per-key entries are swept in amortised O(1).
//!
//! Introspection ([`FairQueue::snapshot`], [`FairQueue::backlog`], [`FairQueue::iter`]) and
//! [`FairQueue::remove_key`] are O(n) and meant for monitoring and rare administrative use.
//!
//! # Variants
//!
//! * [`FairQueue`] (feature `alloc`): growable storage, `hashbrown` key table.
//! * [`fixed::FairQueue`]: the same engine on `heapless` storage with const-generic
//!   capacities, for targets without an allocator.
//!
//! # Engine notes
//!
//! The snapshot rule is equivalent to assigning each item a *round* at push time: a key's first
//! queued item joins the next snapshot's round, each further item the round after its
//! predecessor's (a key of weight `w` fills `w` places per round). Pushes arrive in order, so
//! appending to a round's list keeps it sorted by age, and delivering round after round
//! reproduces the snapshot schedule exactly.

mod engine;
mod full;
#[cfg(feature = "alloc")]
mod heap;
mod iter;

pub mod fixed;

pub use full::Full;
#[cfg(feature = "alloc")]
pub use heap::FairQueue;
pub use iter::Iter;
