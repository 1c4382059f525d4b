//! The error type of the file store.

use std::io;
use std::path::PathBuf;

use fairq_journal::JournalError;
use fairq_worker::BackendError;

/// Everything that can go wrong opening or running a file store.
///
/// ```
/// use fairq_file::FileError;
/// let err = FileError::Locked { path: "/data/q".into(), detail: String::new() };
/// assert!(err.to_string().contains("in use by another process"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The store folder (or its lock file) cannot be created, opened or read.
    #[error("cannot use {} as a store folder: {source}", path.display())]
    Io {
        /// The file or folder involved.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// The path exists and is not a folder.
    #[error("{} is not a folder", path.display())]
    NotAFolder {
        /// The path given.
        path: PathBuf,
    },
    /// Another process (or another open store in this process) holds the folder's lock and
    /// the store could not be reached through it: sharing was turned off
    /// ([`FileOptions::share`](crate::FileOptions::share)), or the holder does not serve the
    /// folder's socket.
    #[error("store folder {} is in use by another process{detail}", path.display())]
    Locked {
        /// The store folder.
        path: PathBuf,
        /// Why the holder could not be reached (empty when sharing is off).
        detail: String,
    },
    /// An entry of the store folder under one of the store's names is not what the store
    /// created there (a symbolic link, a folder, a FIFO...). The store never reads or writes
    /// through such an entry.
    #[error("refusing {}: {reason}", path.display())]
    UnsafeFile {
        /// The entry.
        path: PathBuf,
        /// What it is.
        reason: String,
    },
    /// The process serving the folder's socket does not speak this build's protocol.
    #[error("cannot use the store served on {}: {reason}", path.display())]
    Protocol {
        /// The socket.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A journal file is damaged before its end, or a sealed segment is damaged.
    #[error("corrupt journal file {} at offset {offset}: {reason}", path.display())]
    CorruptJournal {
        /// The damaged file.
        path: PathBuf,
        /// Where the damage starts.
        offset: u64,
        /// What was found there.
        reason: String,
    },
    /// A journal record passed its checksum but does not hold a valid store record.
    #[error("corrupt store record {item} in {}: {reason}", path.display())]
    CorruptRecord {
        /// The store folder.
        path: PathBuf,
        /// The journal item id of the record.
        item: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The folder was written by a newer version of this crate.
    #[error("store record {item} has format version {found}; this build reads version {supported}")]
    UnsupportedVersion {
        /// The journal item id of the record.
        item: u64,
        /// The version found.
        found: u8,
        /// The version this build writes and reads.
        supported: u8,
    },
    /// The disk holding the store is full (or the user's quota is used up): the store says
    /// what was not recorded. Everything acknowledged before is on disk.
    #[error("the disk holding the store {} is full: {unrecorded}", path.display())]
    DiskFull {
        /// The store folder.
        path: PathBuf,
        /// What was not recorded because of it.
        unrecorded: String,
    },
    /// The store was opened read-only ([`FileBackend::open_read_only`](crate::FileBackend::open_read_only))
    /// and the call would change it.
    #[error("the store in {} is open read-only; {operation} would change it", path.display())]
    ReadOnly {
        /// The store folder.
        path: PathBuf,
        /// The refused call.
        operation: &'static str,
    },
    /// Any other journal failure.
    #[error("journal error: {0}")]
    Journal(#[source] JournalError),
    /// An earlier write failed; the state on disk is behind memory, so the store refuses
    /// every call until it is reopened (reopening replays what is durable).
    #[error("the store failed earlier ({reason}); reopen it")]
    Poisoned {
        /// The failure.
        reason: String,
    },
    /// The store was closed.
    #[error("the store is closed")]
    Closed,
    /// A salvage writes into a new or empty folder only
    /// ([`FileBackend::salvage`](crate::FileBackend::salvage)).
    #[error("{} is not empty (it holds {}); salvage writes into a new or empty folder", path.display(), found.display())]
    NotEmpty {
        /// The folder.
        path: PathBuf,
        /// One of its entries.
        found: PathBuf,
    },
}

impl FileError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        FileError::Io {
            path: path.into(),
            source,
        }
    }

    /// True for damage found on disk ([`FileError::CorruptJournal`],
    /// [`FileError::CorruptRecord`]).
    ///
    /// ```
    /// use fairq_file::FileError;
    /// let err = FileError::CorruptRecord { path: "d".into(), item: 3, reason: "x".into() };
    /// assert!(err.is_corrupt());
    /// assert!(!FileError::Closed.is_corrupt());
    /// ```
    pub fn is_corrupt(&self) -> bool {
        matches!(
            self,
            FileError::CorruptJournal { .. } | FileError::CorruptRecord { .. }
        )
    }

    /// True when the error is an I/O failure because the disk is full
    /// ([`FileError::DiskFull`], or a plain I/O error saying so).
    ///
    /// ```
    /// use fairq_file::FileError;
    /// let err = FileError::DiskFull { path: "d".into(), unrecorded: "job 3".into() };
    /// assert!(err.is_disk_full());
    /// assert!(err.to_string().contains("is full: job 3"));
    /// ```
    pub fn is_disk_full(&self) -> bool {
        match self {
            FileError::DiskFull { .. } => true,
            FileError::Io { source, .. } => is_disk_full(source),
            FileError::Journal(JournalError::Io { source, .. }) => is_disk_full(source),
            _ => false,
        }
    }
}

/// Whether an I/O error says the disk (or the user's quota) is full.
pub(crate) fn is_disk_full(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull
        || matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

impl From<JournalError> for FileError {
    fn from(e: JournalError) -> Self {
        match e {
            JournalError::Corrupt {
                path,
                offset,
                reason,
            } => FileError::CorruptJournal {
                path,
                offset,
                reason,
            },
            JournalError::Io { path, source } => FileError::Io { path, source },
            JournalError::Closed => FileError::Closed,
            JournalError::UnsafeFile { path, reason } => FileError::UnsafeFile { path, reason },
            other => FileError::Journal(other),
        }
    }
}

impl From<FileError> for BackendError {
    fn from(e: FileError) -> Self {
        BackendError::Store(Box::new(e))
    }
}
