//! Lock-free in-memory wait-queues.
//!
//! * [`WaitQueue`]: a FIFO (unbounded, or bounded with [`FullPolicy`]) whose consumers can
//!   wait for items, blocking or asynchronously, with timeouts, and whose producers can wait
//!   for room in a full bounded queue the same ways.
//! * [`FairWaitQueue`]: the fair-by-key schedule of [`fairq_core::fair::FairQueue`] with
//!   the same waiting consumers.
//!
//! Items live in a lock-free queue and waiting consumers in a second lock-free queue. A
//! producer that finds consumers waiting hands its item directly to the oldest of them;
//! the hand-off runs in a serialized pass that nobody ever waits for: concurrent requests
//! for a pass are counted and carried out by whichever thread is already running it.
//!
//! Every atomic, lock and parking primitive goes through one internal `sync` module that
//! switches to `loom` under `--cfg loom`; the models live in the `fairq-loom-tests` crate.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod deadline;
mod fair_error;
mod fair_items;
mod fair_wait_queue;
mod handoff;
mod items;
#[cfg(loom)]
pub mod model;
mod op;
mod pop;
#[cfg(not(loom))]
mod processors;
mod push_error;
mod room;
mod spin;
mod sync;
mod turns;
mod wait_queue;
mod waiter;
#[cfg(not(loom))]
mod window;

pub use deadline::Timeout;
pub use fair_error::FairPushError;
pub use fair_wait_queue::{FairPop, FairPopWithKey, FairPush, FairWaitQueue};
pub use items::FullPolicy;
pub use push_error::PushError;
pub use wait_queue::{Pop, Push, WaitQueue};
