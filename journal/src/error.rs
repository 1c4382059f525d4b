//! The error type of the journal.

use std::io;
use std::path::{Path, PathBuf};

use crate::item::ItemId;
use crate::sink::SinkError;

/// Everything that can go wrong in a journaled queue.
///
/// ```
/// use fairq_journal::JournalError;
/// let e = JournalError::Closed;
/// assert_eq!(e.to_string(), "the queue is closed");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// A queue or reader name contains characters other than letters, digits, `_`, `-`, `:`,
    /// is empty or longer than 200 bytes, or would make a file name longer than 255 bytes
    /// (a new reader whose name and the queue's are longer than 247 bytes together).
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An I/O operation failed.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A file holds bytes that are not valid, followed by valid data, or a sealed segment is
    /// damaged. The journal refuses to skip it silently.
    #[error("corrupt journal file {} at offset {offset}: {reason}", path.display())]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// Byte offset of the first invalid byte sequence.
        offset: u64,
        /// What was found there.
        reason: String,
    },
    /// An earlier write or sync failed; nothing more is accepted until the queue is reopened.
    #[error("the journal is poisoned by an earlier failure ({reason}); reopen the queue")]
    Poisoned {
        /// The failure that poisoned the journal.
        reason: String,
    },
    /// The item is larger than `max_item_size`.
    #[error("item of {size} bytes exceeds max_item_size of {max} bytes")]
    ItemTooLarge {
        /// Size of the refused item.
        size: usize,
        /// The configured limit.
        max: usize,
    },
    /// A reader with [`FullPolicy::Refuse`](crate::FullPolicy::Refuse) is at its limit.
    #[error("reader {reader:?} is full")]
    Full {
        /// The reader that is full (empty for the default reader).
        reader: String,
    },
    /// The id is not an open read of this reader (never delivered, or already finished).
    #[error("item {0} is not an open read of this reader")]
    NotOpen(ItemId),
    /// Named readers exist, so there is no default reader any more.
    #[error("the queue has named readers; the default reader no longer exists")]
    NoDefaultReader,
    /// The queue was closed.
    #[error("the queue is closed")]
    Closed,
    /// An entry in the queue's folder that carries one of the queue's file names is not a
    /// regular file (a symbolic link, a directory, a FIFO...). The journal never reads or
    /// writes through such an entry, so a planted link cannot redirect or truncate a file
    /// elsewhere.
    #[error("refusing {}: {reason}", path.display())]
    UnsafeFile {
        /// The offending entry.
        path: PathBuf,
        /// What it is.
        reason: String,
    },
    /// The queue was opened read-only and the call would write.
    #[error("the queue is open read-only; {operation} would write to it")]
    ReadOnly {
        /// What was refused.
        operation: &'static str,
    },
    /// A reader's sink could not take an item; the item stays where it was.
    #[error("the sink of reader {reader:?} could not take item {item}: {source}")]
    Sink {
        /// The reader.
        reader: String,
        /// The item that stays.
        item: ItemId,
        /// What the sink said.
        #[source]
        source: SinkError,
    },
    /// The reader was removed with
    /// [`JournaledQueue::remove_reader`](crate::JournaledQueue::remove_reader).
    #[error("reader {0:?} was removed")]
    ReaderRemoved(String),
    /// The queue has no reader of that name.
    #[error("the queue has no reader {0:?}")]
    NoSuchReader(String),
    /// A queue always keeps at least one reader.
    #[error("reader {0:?} is the queue's only reader and cannot be removed")]
    LastReader(String),
    /// Another handle (in this or another process) has the queue open.
    #[error("the queue is already open elsewhere (lock file {})", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// The configuration asks for something the queue cannot do.
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// What is wrong.
        reason: String,
    },
}

impl JournalError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        JournalError::Io {
            path: path.into(),
            source,
        }
    }

    /// A full disk (`ENOSPC`).
    pub(crate) fn is_storage_full(&self) -> bool {
        matches!(self, JournalError::Io { source, .. } if source.kind() == io::ErrorKind::StorageFull)
    }

    /// The file at `path` is damaged at byte `offset` (0 for a file judged as a whole).
    pub(crate) fn corrupt(path: &Path, offset: u64, reason: impl Into<String>) -> Self {
        JournalError::Corrupt {
            path: path.to_path_buf(),
            offset,
            reason: reason.into(),
        }
    }
}
