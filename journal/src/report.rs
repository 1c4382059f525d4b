//! What opening a queue found and repaired.

use std::path::PathBuf;

/// Why the end of a segment was cut off when the queue was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TailCause {
    /// The file ends inside a record, or the bytes after the last record are not a record at
    /// all (zeros, garbage): the remains of a write that a crash interrupted. Under
    /// [`SyncPolicy::Always`](crate::SyncPolicy::Always) and
    /// [`SyncPolicy::Group`](crate::SyncPolicy::Group) such a record was never acknowledged.
    Incomplete,
    /// A record whose every byte is present fails its checksum (or holds invalid fields).
    /// A crash can leave this too (a torn sector whose garbage happens to reach the record's
    /// declared length), but so can damage to a record that was acknowledged; the journal
    /// cannot tell which, so it reports this as an error.
    Damaged {
        /// What is wrong with the record.
        reason: String,
    },
}

/// The end of a segment that did not hold valid records, and what was done about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailRepair {
    /// The segment file.
    pub path: PathBuf,
    /// Where the first invalid byte is (the end of the last valid record).
    pub offset: u64,
    /// How many bytes followed it.
    pub dropped_bytes: u64,
    /// What those bytes were.
    pub cause: TailCause,
    /// Whether the file was truncated (false for a read-only open, which only ignores them).
    pub truncated: bool,
}

/// What [`JournaledQueue::open`](crate::JournaledQueue::open) found and repaired.
///
/// A clean shutdown leaves nothing to report; after a crash, torn tails and a half-created
/// segment are expected. Everything here is also logged through `tracing` when the queue is
/// opened (warnings, and errors for [`TailCause::Damaged`]).
///
/// ```
/// use fairq_journal::{JournalConfig, JournaledQueue};
/// let dir = tempfile::tempdir().unwrap();
/// let q = JournaledQueue::open(dir.path(), "q", JournalConfig::default()).unwrap();
/// assert!(q.recovery_report().is_clean());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segment ends that were cut off (or, read-only, ignored).
    pub tails: Vec<TailRepair>,
    /// Segments removed because their header was torn and they held no record: created just
    /// before a crash.
    pub removed_segments: Vec<PathBuf>,
    /// Readers whose checkpoint was missing or unreadable; they restart from the oldest item
    /// (and may deliver items again).
    pub restarted_readers: Vec<String>,
    /// Named readers taken from their checkpoint files because the reader registry was
    /// missing (lost, or a crash interrupted the first named reader's creation); unless the
    /// queue was opened read-only, the registry was written again. A reader whose
    /// checkpoint was gone too could not be known.
    pub registry_rebuilt: Vec<String>,
}

impl RecoveryReport {
    /// Whether opening found nothing to repair.
    ///
    /// ```
    /// assert!(fairq_journal::RecoveryReport::default().is_clean());
    /// ```
    pub fn is_clean(&self) -> bool {
        self.tails.is_empty()
            && self.removed_segments.is_empty()
            && self.restarted_readers.is_empty()
            && self.registry_rebuilt.is_empty()
    }

    /// Whether a complete record was dropped ([`TailCause::Damaged`]): possibly an item
    /// whose put had returned.
    ///
    /// ```
    /// assert!(!fairq_journal::RecoveryReport::default().dropped_a_complete_record());
    /// ```
    pub fn dropped_a_complete_record(&self) -> bool {
        self.tails
            .iter()
            .any(|t| matches!(t.cause, TailCause::Damaged { .. }))
    }
}
