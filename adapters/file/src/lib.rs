//! # fairq-file
//!
//! A durable job store in a folder on the local disk: the embedded default store of the
//! `fairq` CLI. [`FileBackend`] implements [`fairq_worker::Backend`] on a
//! [`fairq_journal`] journal.
//!
//! ```
//! use std::time::Duration;
//! use fairq_file::{FileBackend, FileOptions};
//! use fairq_worker::{Backend, NewJob};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let store = FileBackend::open(dir.path(), FileOptions::default())?;
//! store.enqueue(NewJob::json("email", "welcome", &"a@example.com")?.key("tenant-1")).await?;
//! let jobs = store.claim("email", 8, Duration::from_secs(30)).await?;
//! store.complete(jobs[0].claim).await?;
//! assert_eq!(store.counts("email").succeeded, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! ## Design
//!
//! **One state machine.** The store's semantics are those of the in-memory reference store
//! ([`fairq_worker::memory::store::Store`]): fair claims by key with the snapshot-of-heads
//! rule, leases with fencing tokens, retries decided by each job's policy, rescue of expired
//! leases, dependencies, unique keys, operator calls. `FileBackend` keeps one such `Store` in
//! memory and makes it durable; it decides nothing on its own.
//!
//! **Every change is a journal record before it is acknowledged.** A request changes the
//! store under its lock, the store reports which jobs changed, and their full records (plus the
//! counters of their queue, when those changed) are encoded and queued for the journal writer
//! while the lock is still held, so the queue order is the order of the changes. The writer
//! thread puts everything queued since its last write into one journal item (a *frame*, see
//! `frame.rs`) and syncs it (group commit: concurrent enqueues, claims and completions share
//! one `fdatasync`); only then do the requests return. `enqueue_many` is one batch, so it is
//! durable all or nothing. Claims, completions, failures, rescues, revivals, purges and prunes
//! are all written; lease extensions are not (see below).
//!
//! **Space comes back through the journal's own retirement.** The writer reads each frame
//! back through a journal reader and keeps it as an open read while it holds the latest record
//! of some job or queue, a tombstone still needed, or the newest id counter; then it commits
//! it (the [`ledger`](crate#the-ledger) decides). The journal deletes a segment once its
//! reader's checkpoint has passed it. When a few long-lived records (a job scheduled far
//! ahead, an unpruned finished job) pin old items while the items after them are all
//! committed, the writer rewrites those records at the tail so the old items can go.
//!
//! **Replay.** Opening reads every uncommitted item in id order and keeps the last record of
//! each job (a tombstone removes it), then rebuilds the store with
//! [`Store::restore`](fairq_worker::memory::store::Store::restore): waiting jobs wait again,
//! due jobs rejoin their queue's fair queue in the order they became due, unique keys and
//! dependencies are restored, queue counters and run-time histograms come back.
//!
//! **Leases end with the process.** A folder is locked by one process at a time (a lock file
//! held with `flock`), so when a store is opened no worker of the previous owner is alive:
//! every job that was running is rescued at once, which counts the lost attempt and applies
//! the retry policy exactly like a lease expiry. That is also why lease extensions are kept
//! in memory only.
//!
//! ## Recovery argument
//!
//! * *Every acknowledged change survives a crash*: a request returns only after the journal
//!   synced the frame holding its records, and a journal item is only ever committed after a
//!   newer record of the same job (or its tombstone) is itself durable.
//! * *Replay yields the latest acknowledged state*: the latest record of a live job is never
//!   committed, so replay sees it, and it is the last one seen because records are replayed in
//!   id order. A deleted job cannot come back: its tombstone is committed only after every
//!   item holding an older record of it, and commits only accumulate, so whatever set of
//!   commits the reader's checkpoint captured before a crash either hides all of the job's
//!   older records or still holds the tombstone. The journal redelivers every uncommitted item,
//!   including those committed out of order after the last durable checkpoint; replaying a
//!   superseded record again is harmless because the newer one follows it.
//! * *No durably completed job runs again*: its latest record says succeeded, and replay
//!   restores exactly that. A job whose completion was not yet durable when the process died is
//!   replayed as running and rescued, so it runs again (at-least-once).
//! * *Ids are never reused*: every frame carries the id counter and the newest frame is never
//!   committed until a newer one exists.
//! * *A torn write loses only unacknowledged changes*: the journal truncates a torn tail
//!   (that frame's requests never returned) and reports damage anywhere else as
//!   [`FileError::CorruptJournal`]; a record that passes its checksum but does not decode is
//!   [`FileError::CorruptRecord`]. Nothing is skipped silently.
//! * *A failed write poisons the store*: memory is then ahead of the disk, so every call fails
//!   with [`FileError::Poisoned`] until the store is reopened from what is durable.
//!
//! ## The ledger
//!
//! `ledger.rs` holds the bookkeeping above as plain data, with a property test that crashes a
//! simulated journal at random points (keeping a random prefix of the commits as the durable
//! checkpoint) and checks that replay rebuilds the latest written state every time.
//!
//! ## Limits
//!
//! One process per folder. A frame (the changes queued while one sync runs) may be up to
//! 1 GiB; one enqueue call takes at most 256 MiB of payload and metadata. Every state change
//! rewrites the job's whole record, payload included.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backend;
mod error;
mod frame;
mod ledger;
mod lock;
mod options;
mod totals;
mod writer;

pub use backend::{FileBackend, folder_from_url};
pub use error::FileError;
pub use options::{FileOptions, SyncMode};

/// The folder of the default store of the `fairq` CLI (`file:./fairq-data`).
///
/// ```
/// assert_eq!(fairq_file::DEFAULT_FOLDER, "./fairq-data");
/// ```
pub const DEFAULT_FOLDER: &str = "./fairq-data";

/// The README's example, compiled as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
