//! # fairq-core
//!
//! The decisions of a job queue as plain data and functions, with no I/O: which item is next
//! ([`fair`]), whether a failed job runs again and when ([`retry`]), what a job may do next in
//! its life ([`job`]), whether a queue is healthy ([`health`]) and how long things take
//! ([`stats`]).
//!
//! Nothing here reads a clock, spawns a thread or touches a file: time is always an argument
//! (milliseconds as `u64`, or [`core::time::Duration`]), and randomness (for jitter) is a
//! number the caller supplies. The same code therefore runs on a microcontroller, in WASM,
//! inside a loom model or a property test, and behind every storage backend, so backends
//! cannot disagree about semantics.
//!
//! ## The snapshot rule, step by step
//!
//! Items are pushed with a key; each key has its own FIFO. A pop serves from the current
//! *snapshot*; when it is empty, a new snapshot is taken: the head item of every key with
//! queued items, oldest first. Items pushed while a snapshot is pending wait for the next one.
//!
//! ```
//! # #[cfg(feature = "alloc")] {
//! use fairq_core::fair::FairQueue;
//!
//! let mut q = FairQueue::new();
//! q.push("alice", "a1").unwrap();
//! q.push("bob", "b1").unwrap();
//! q.push("alice", "a2").unwrap();
//! // alice: [a1, a2], bob: [b1]. The first pop takes the snapshot [a1, b1].
//! assert_eq!(q.pop(), Some("a1"));
//! // Pushed while [b1] is pending: waits in alice's FIFO behind a2.
//! q.push("alice", "a3").unwrap();
//! q.push("alice", "a4").unwrap();
//! assert_eq!(q.pop(), Some("b1"));
//! q.push("bob", "b2").unwrap();
//! // Next snapshot: the heads [a2, b2]; bob's new item overtakes alice's backlog.
//! assert_eq!(q.pop(), Some("a2"));
//! assert_eq!(q.pop(), Some("b2"));
//! assert_eq!(q.pop(), Some("a3"));
//! assert_eq!(q.pop(), Some("a4"));
//! # }
//! ```
//!
//! See [`fair`] for the bound, weights, complexity and how the engine avoids sorting.
//!
//! ## Features
//!
//! * `alloc` (default): the heap-backed [`fair::FairQueue`] and growable retry schedules.
//! * `std`: implies `alloc`.
//!
//! Without `alloc`, [`fair::fixed::FairQueue`], [`retry`], [`job`], [`health`] and [`stats`]
//! build for targets such as `thumbv7em-none-eabihf`.
#![no_std]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod fair;
pub mod health;
pub mod job;
pub mod retry;
pub mod stats;
pub mod sweep;
