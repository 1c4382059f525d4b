//! The store folder: creating it, and its lock (one process owns a store folder at a time).

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

use fs4::TryLockError;

use crate::error::FileError;

/// Name of the lock file inside a store folder.
pub(crate) const LOCK_FILE: &str = "fairq.lock";

/// Name of the socket the owning process serves the store on, inside the store folder.
pub(crate) const SOCKET_FILE: &str = "fairq.sock";

/// An exclusive advisory lock on a store folder, released when dropped (or when the process
/// dies, since the operating system drops it with the file descriptor).
#[derive(Debug)]
pub(crate) struct FolderLock {
    _file: File,
}

impl FolderLock {
    /// Takes the lock of `dir` without waiting; `None` when another holder has it.
    pub(crate) fn try_acquire(dir: &Path) -> Result<Option<FolderLock>, FileError> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| FileError::io(&path, e))?;
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => Ok(Some(FolderLock { _file: file })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(FileError::io(&path, e)),
        }
    }
}

/// Creates `dir` if needed and checks that it is a folder.
pub(crate) fn prepare_folder(dir: &Path) -> Result<(), FileError> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => {
            return Err(FileError::NotAFolder {
                path: dir.to_path_buf(),
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(FileError::io(dir, e)),
    }
    std::fs::create_dir_all(dir).map_err(|e| FileError::io(dir, e))
}
