//! The store folder: creating it, and its lock (one process owns a store folder at a time).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use fairq_journal::storage::{FsStorage, Storage};
use fs4::TryLockError;

use crate::error::FileError;

/// Name of the lock file inside a store folder.
pub(crate) const LOCK_FILE: &str = "fairq.lock";

/// Name of the socket the owning process serves the store on, inside the store folder.
pub(crate) const SOCKET_FILE: &str = "fairq.sock";

/// An advisory lock on a store folder, released when dropped (or when the process dies,
/// since the operating system drops it with the file descriptor). The owner holds it
/// exclusively; a read-only view holds it shared while it reads the journal.
#[derive(Debug)]
pub(crate) struct FolderLock {
    _file: File,
}

/// What a read-only look at a folder's lock found.
#[derive(Debug)]
pub(crate) enum SharedLock {
    /// Nobody owns the folder; the shared lock keeps an owner out while it is held.
    Taken(FolderLock),
    /// A live process owns the folder.
    Held,
    /// The folder has no lock file (no store was ever opened in it, or it was removed).
    NoLockFile,
}

impl FolderLock {
    /// Takes the lock of `dir` without waiting; `None` when another holder has it. The lock
    /// file is created with permission bits `mode` if missing, and never through a symbolic
    /// link.
    pub(crate) fn try_acquire(dir: &Path, mode: u32) -> Result<Option<FolderLock>, FileError> {
        let path = dir.join(LOCK_FILE);
        let mut options = OpenOptions::new();
        options
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(mode);
        let file = open_regular(&path, &mut options)?;
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => Ok(Some(FolderLock { _file: file })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(FileError::io(&path, e)),
        }
    }

    /// Takes the lock of `dir` shared, creating and changing nothing: only an owner's
    /// exclusive lock conflicts with it.
    pub(crate) fn try_shared(dir: &Path) -> Result<SharedLock, FileError> {
        let path = dir.join(LOCK_FILE);
        let file = match open_regular(&path, OpenOptions::new().read(true)) {
            Ok(file) => file,
            Err(FileError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                return Ok(SharedLock::NoLockFile);
            }
            Err(e) => return Err(e),
        };
        match fs4::FileExt::try_lock_shared(&file) {
            Ok(()) => Ok(SharedLock::Taken(FolderLock { _file: file })),
            Err(TryLockError::WouldBlock) => Ok(SharedLock::Held),
            Err(TryLockError::Error(e)) => Err(FileError::io(&path, e)),
        }
    }
}

/// Opens `path` without following a symbolic link, and refuses anything but a regular file.
fn open_regular(path: &Path, options: &mut OpenOptions) -> Result<File, FileError> {
    let file = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() || e.raw_os_error() == Some(libc::ELOOP) => {
                FileError::UnsafeFile {
                    path: path.to_path_buf(),
                    reason: "it is a symbolic link where the store keeps its lock file".into(),
                }
            }
            Ok(meta) if !meta.is_file() => not_regular(path),
            _ => FileError::io(path, e),
        })?;
    let meta = file.metadata().map_err(|e| FileError::io(path, e))?;
    if !meta.is_file() {
        return Err(not_regular(path));
    }
    Ok(file)
}

fn not_regular(path: &Path) -> FileError {
    FileError::UnsafeFile {
        path: path.to_path_buf(),
        reason: "it is not a regular file, but the store keeps its lock file under this name"
            .into(),
    }
}

/// Checks that `dir` exists and is a folder, for the ways of reading a store that never
/// create one.
pub(crate) fn existing_folder(dir: &Path) -> Result<(), FileError> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(FileError::NotAFolder {
            path: dir.to_path_buf(),
        }),
        Err(e) => Err(FileError::io(dir, e)),
    }
}

/// Creates `dir` if needed (the folders it creates get permission bits `mode`) and checks
/// that it is a folder. Each folder it creates is synced into the folder holding it, top
/// down: without that, a power loss could take a new folder away with every file synced
/// into it (the store's journal among them).
pub(crate) fn prepare_folder(dir: &Path, mode: u32) -> Result<(), FileError> {
    create_folder(dir, mode, &|d| FsStorage.sync_dir(d))
}

/// [`prepare_folder`], syncing folders with `sync_dir`.
fn create_folder(
    dir: &Path,
    mode: u32,
    sync_dir: &dyn Fn(&Path) -> io::Result<()>,
) -> Result<(), FileError> {
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
    let missing =
        |d: &Path| matches!(std::fs::metadata(d), Err(e) if e.kind() == io::ErrorKind::NotFound);
    // The folders to create, deepest first.
    let mut created = vec![dir];
    while let Some(up) = created[created.len() - 1]
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && missing(p))
    {
        created.push(up);
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .map_err(|e| FileError::io(dir, e))?;
    for new in created.iter().rev() {
        let parent = new
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        sync_dir(parent).map_err(|e| FileError::io(parent, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::Mutex;

    #[test]
    fn each_new_folder_is_synced_into_its_parent_top_down() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a").join("b").join("c");
        let synced = Mutex::new(Vec::<PathBuf>::new());
        let record = |d: &Path| {
            synced.lock().unwrap().push(d.to_path_buf());
            FsStorage.sync_dir(d)
        };
        create_folder(&dir, 0o700, &record).unwrap();
        assert!(dir.is_dir());
        assert_eq!(
            *synced.lock().unwrap(),
            [
                tmp.path().to_path_buf(),
                tmp.path().join("a"),
                tmp.path().join("a").join("b"),
            ]
        );
        // A folder that exists is left alone.
        synced.lock().unwrap().clear();
        create_folder(&dir, 0o700, &record).unwrap();
        assert!(synced.lock().unwrap().is_empty());
    }
}
