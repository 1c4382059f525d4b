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
