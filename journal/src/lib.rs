//! A crash-safe journaled queue with fan-out readers.
//!
//! A [`JournaledQueue`] appends byte items to a journal of segment files in one directory and
//! lets any number of [`Reader`]s consume them independently. It follows the design of
//! libkestrel's journaled queue, with the durability holes closed:
//!
//! - **Checksummed records.** Every record carries its length, a CRC32C, a kind, a strictly
//!   increasing item id, its add time and an optional expiry (layout in `FORMAT.md`). On open,
//!   a torn tail of the last segment is truncated to the last valid record; an invalid record
//!   followed by valid ones, or any damage to a sealed segment, is reported as
//!   [`JournalError::Corrupt`] with the file and offset, never skipped.
//! - **Sync policies.** [`SyncPolicy::Group`] (the default) makes a put return only after an
//!   `fdatasync` that covers it; concurrent puts share one sync. [`SyncPolicy::Always`] syncs
//!   every put, [`SyncPolicy::Periodic`] syncs on a timer, [`SyncPolicy::Never`] leaves it to
//!   the OS. A failed write or sync poisons the queue until it is reopened, because the state of
//!   the OS's cache is unknown after it.
//! - **Readers.** Each reader is an independent copy of the stream. [`Reader::get`] hands out
//!   an open read; [`Reader::commit`] finishes it, [`Reader::abort`] puts it back in front with
//!   `error_count + 1` (kept across restarts). Commits may come in any order; the checkpoint
//!   records the position plus the ids finished out of order. [`Reader::peek`] looks without
//!   opening. Per-reader limits refuse puts or drop the oldest items.
//! - **Expiry and dead letters.** Expired items (by [`PutOptions::expires_at`] or the reader's
//!   `max_age`, one inclusive boundary) are never delivered: they go to a [`Sink`] (another
//!   queue or a callback) or are dropped; [`Reader::discard_expired`] sweeps them with a
//!   limit. An item aborted more than `max_errors` times goes to the error sink. Every
//!   reader keeps counters ([`Reader::stats`]).
//! - **Crash-atomic checkpoints.** A checkpoint is written to a temporary file, synced, renamed
//!   over the old one and the directory is synced, so a crash leaves the old or the new one. A
//!   reader whose checkpoint is missing or unreadable restarts from the oldest item still in
//!   the journal, never from the tail.
//! - **Retirement.** A sealed segment is deleted, or moved to `archive_dir`, only once every
//!   reader's checkpoint on disk has passed it.
//!
//! Guarantee: an item whose put returned under `Always` or `Group` survives a crash of the
//! process or of the machine. Items not yet committed and checkpointed may be delivered again
//! after a crash (at-least-once); items committed and checkpointed are not.
//!
//! All file access goes through [`storage::Storage`]; [`sim::SimDisk`] simulates power loss
//! and I/O faults for tests; [`fingerprint::FolderFingerprint`] records a queue folder, to
//! show that a read-only look at it changed nothing. Time comes from a [`Clock`] in the
//! configuration.
//!
//! ```
//! use fairq_journal::{JournalConfig, JournaledQueue};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let q = JournaledQueue::open(dir.path(), "emails", JournalConfig::default()).unwrap();
//! let sender = q.reader("sender").unwrap();
//! let audit = q.reader("audit").unwrap();
//!
//! q.put(b"hello").unwrap();
//! let item = sender.get().unwrap().unwrap();
//! sender.commit(item.id).unwrap();
//! assert_eq!(&audit.get().unwrap().unwrap().data[..], b"hello");
//! q.close().unwrap();
//! ```
#![deny(missing_docs)]
// One `unsafe` block in the crate: copying a put's bytes into a segment's shared map for
// mapped writes (`storage.rs`, `FsMap::store`), which no safe API can do while another
// thread prepares the map's pages.
#![deny(unsafe_code)]

mod append;
pub mod checkpoint;
mod chunks;
mod config;
mod crc;
mod error;
mod files;
pub mod fingerprint;
pub mod format;
mod item;
mod mapped;
mod name;
mod next;
mod open_reads;
mod periodic;
mod pos;
mod queue;
mod read;
mod reader;
mod reader_state;
mod recovery;
mod registry;
mod report;
mod reserve;
mod retire;
pub mod salvage;
mod scan;
pub mod sim;
mod sink;
mod state;
mod stats;
pub mod storage;
mod sync;
mod tail;
mod wake;
mod write;

/// The lock-free protocols of the queue, exposed for the loom models in `fairq-loom-tests`.
#[cfg(loom)]
pub mod model {
    pub use crate::wake::{Doorbell, Registration};
}

/// The shared byte slices items hand out ([`Item::data`]), re-exported so callers need no
/// dependency of their own to name them.
///
/// ```
/// let data = fairq_journal::Bytes::from_static(b"hi");
/// assert_eq!(&data[..], b"hi");
/// ```
pub use bytes::Bytes;
pub use config::{
    Clock, Coalesce, FullPolicy, JournalConfig, ManualClock, PutOptions, ReaderConfig, SyncPolicy,
    SystemClock,
};
pub use error::JournalError;
pub use item::{Item, ItemId};
pub use name::{validate_name, MAX_NAME_LEN};
pub use queue::JournaledQueue;
pub use reader::Reader;
pub use report::{RecoveryReport, TailCause, TailRepair};
pub use sink::{Sink, SinkError};
pub use stats::ReaderStats;

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn handles_are_send_and_sync() {
        assert_send_sync::<JournaledQueue>();
        assert_send_sync::<Reader>();
        assert_send_sync::<JournalConfig>();
    }
}
