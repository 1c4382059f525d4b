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
//! **Every change is a journal record, in the order of the changes.** A request changes the
//! store under its lock, the store reports which jobs changed, and their records (plus the
//! counters of their queue, when those changed) are encoded and queued for the journal writer
//! while the lock is still held, so the queue order is the order of the changes. A job's first
//! record is its full record (payload and metadata included); every later change writes only
//! its *progress*: lifecycle, last error and times, a few dozen bytes (see `frame.rs`). The
//! writer thread puts everything queued since its last write into one journal item (a
//! *frame*) and syncs it (group commit: concurrent enqueues, claims and completions share one
//! `fdatasync`); the requests waiting for it return then. While the writer is busy, requests
//! queue behind it without waking it. `enqueue_many` and `settle` are one batch each, durable
//! all or nothing; `settle_and_claim` is one batch too. Lease extensions are not written (see
//! below).
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
//! **One owner, many processes.** The process that opens a free folder becomes its owner:
//! it keeps the store in memory, writes the journal, and serves the store on a Unix socket in
//! the folder (`fairq.sock`, readable by the same user only). A process that opens a folder
//! held by a live process becomes a client of it: every call travels over the socket and the
//! owner answers it as it would its own (the conformance suite and the differential test run
//! through a client too). So a web process can enqueue, and `stats` or `list` can look, while
//! `fairq work` owns the folder. When the owner dies, calls in flight fail as
//! [`BackendError::Unavailable`](fairq_worker::BackendError::Unavailable) (they may or may not
//! have taken effect) and clients reconnect to whichever process owns the folder next; the
//! socket a killed owner leaves behind is noticed (nobody answers it, and the lock is free) and
//! replaced by the next owner.
//!
//! **Leases end with the process.** A folder is locked by one process at a time (a lock file
//! held with `flock`), so when a store is opened no worker of the previous owner is alive:
//! every job that was running is rescued at once, which counts the lost attempt and applies
//! the retry policy exactly like a lease expiry. That is also why lease extensions are kept
//! in memory only, and why the owner's own claims need not wait for the disk. A client's
//! leases end with the owner too (a new owner rescues them, and the client's late completion
//! is refused as stale), but the client itself may live on, so a client's claim is durable
//! before it returns: a lease token it holds is never handed out again.
//!
//! ## What each call waits for
//!
//! | call | returns once its change is |
//! |---|---|
//! | `enqueue`, `enqueue_many`, `settle` (`complete`, `fail`), `settle_and_claim`, `release`, `rescue`, `revive`, `purge`, `prune`, `remove_queue` | synced: it survives a crash of the process and of the machine |
//! | `claim` by the owner | queued for the writer: not yet written |
//! | `claim` by a client | synced |
//! | `heartbeat`, `heartbeat_many` | in memory: never written |
//!
//! A call that changed nothing (a refused completion, an enqueue that found its unique key
//! taken) still returns only once every change queued before it is synced, so it never
//! reports a state that a crash could take back.
//!
//! **Claims do not wait.** A claim reaches the kernel with the writer's next write (at once if
//! the writer is idle, right after the sync in progress otherwise) and the disk with the sync
//! after that, usually within a few milliseconds; it is on disk as soon as any later call of
//! the table's first row has returned, because the journal keeps changes in order. What a
//! crash costs a claim that was not yet written (a kill of the process) or not yet synced
//! (a power loss):
//!
//! * the reopened store holds the job as it was before the claim: due at once, the attempt
//!   not counted, and the claim's lease token may be handed out again;
//! * that is harmless because every lease is held inside the owning process, which the crash
//!   ended: no worker is left that could present the old token (with the lock file, a second
//!   process cannot hold the folder), and the job runs again as it would after a rescue;
//! * the one difference from a rescue: the attempt is not counted. A job whose handler brings
//!   the process down within milliseconds of its claim may therefore be retried without using
//!   up its retry budget. A job that takes longer has its claim on disk before it fails.
//!
//! Nothing acknowledged as durable is ever lost: a completion is written after the claim it
//! settles, so if the completion is on disk the claim is too.
//!
//! ## Recovery argument
//!
//! * *Every acknowledged change survives a crash*: a request (other than a claim, see above)
//!   returns only after the journal synced the frame holding its records, and a journal item
//!   is only ever committed after a newer record of the same job (or its tombstone) is itself
//!   durable.
//! * *Replay yields the latest acknowledged state*: the latest full record and the latest
//!   progress of a live job are never committed, so replay sees them, and they are the last
//!   ones seen because records are replayed in id order. A progress read for a job whose full
//!   record is missing (which only a damaged journal can hold) is reported as
//!   [`FileError::CorruptRecord`]. A deleted job cannot come back: its tombstone is committed only after every
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
//! ## Looking, permissions and damage
//!
//! * [`FileBackend::open_read_only`] looks at a store without creating, repairing or changing
//!   anything in its folder (a full disk, a read-only mount): a client of a live owner, or a
//!   snapshot of the journal, that refuses every change with [`FileError::ReadOnly`].
//! * Files are created `0600` and folders `0700` ([`FileOptions::file_mode`],
//!   [`FileOptions::dir_mode`]); no store file is opened through a symbolic link, and one that
//!   is a link or not a regular file is refused ([`FileError::UnsafeFile`]).
//! * A missing segment file (front, middle, or end as of the last checkpoint) is
//!   [`FileError::CorruptJournal`] naming it. What opening repaired (a torn tail cut off) is in
//!   [`FileBackend::recovery_report`], in words in [`FileBackend::recovery_warnings`], which
//!   tell the remains of an interrupted write from a complete record failing its checksum.
//! * A full disk is [`FileError::DiskFull`], saying what was not recorded.
//!
//! ## Limits
//!
//! One owning process per folder; other processes go through it (on the same machine: the
//! socket is local). A frame (the changes queued while one sync runs) may be up to
//! 1 GiB; one enqueue call takes at most 256 MiB of payload and metadata
//! ([`fairq_worker::MAX_CALL_BYTES`], the limit of every store). A call is written in one
//! frame, all or nothing, and its records hold more than payload and metadata (names, keys,
//! retry policy, times): a call whose records could take more than one frame (about 350,000
//! jobs with 1 KiB fairness and unique keys, even without payload) is refused with
//! [`BackendError::Invalid`](fairq_worker::BackendError::Invalid) before it changes
//! anything, and the jobs go in smaller calls.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backend;
mod cancel;
mod error;
mod folder;
mod frame;
mod ledger;
mod local;
mod options;
mod pause;
mod recovery;
mod remote;
mod replay;
mod salvage;
mod snapshot;
mod totals;
mod writer;

pub use backend::{FileBackend, Role, folder_from_url};
pub use error::FileError;
pub use options::{FileOptions, SyncMode};
pub use salvage::SalvageReport;

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
