//! The storage the journal writes to: a small trait, the real file system, and helpers.
//!
//! Every file operation of the journal goes through [`Storage`], so tests can swap the real
//! file system ([`FsStorage`]) for the deterministic simulated disk in [`crate::sim`], which
//! models power loss, torn and short writes and I/O errors.
//!
//! ```
//! use fairq_journal::storage::{FsStorage, Storage};
//! let dir = tempfile::tempdir().unwrap();
//! let fs = FsStorage;
//! let f = fs.create(&dir.path().join("a")).unwrap();
//! assert_eq!(f.write(b"hi").unwrap(), 2);
//! f.sync_data().unwrap();
//! assert_eq!(fs.read_all(&dir.path().join("a")).unwrap(), b"hi");
//! ```

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// A file system as the journal needs it. Paths are absolute or relative to the process.
pub trait Storage: Send + Sync + fmt::Debug {
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Names of the regular files in `dir`.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// The whole content of a file.
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Creates (or truncates) a file and opens it for appending.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>>;
    /// Opens an existing file for appending at its end.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>>;
    /// Opens an existing file for positioned reads.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ReadFile>>;
    /// Atomically renames a file (replacing the target).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on `path` (creating the file if needed) for as long as the
    /// returned guard lives. Fails with [`io::ErrorKind::WouldBlock`] if another holder (in
    /// this or another process) has it.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn LockGuard>>;
}

/// Holds a lock taken with [`Storage::lock`]; dropping it releases the lock.
pub trait LockGuard: Send + Sync + fmt::Debug {}

/// A file opened for appending.
pub trait WriteFile: Send + Sync + fmt::Debug {
    /// Appends a prefix of `buf` and returns its length (which may be short).
    fn write(&self, buf: &[u8]) -> io::Result<usize>;
    /// Makes the file's data durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
    /// Truncates (or extends) the file to `len` bytes; later appends go after it.
    fn set_len(&self, len: u64) -> io::Result<()>;
}

/// A file opened for positioned reads.
pub trait ReadFile: Send + Sync + fmt::Debug {
    /// Reads up to `buf.len()` bytes at `offset`; returns 0 at end of file.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

/// Writes all of `buf`, retrying short writes and interruptions.
///
/// ```
/// use fairq_journal::storage::{write_all, FsStorage, Storage};
/// let dir = tempfile::tempdir().unwrap();
/// let f = FsStorage.create(&dir.path().join("x")).unwrap();
/// write_all(f.as_ref(), b"abc").unwrap();
/// ```
pub fn write_all(file: &dyn WriteFile, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match file.write(buf) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0")),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Fills `buf` from `offset` as far as the file allows; returns the bytes read.
///
/// ```
/// use fairq_journal::storage::{read_at_most, FsStorage, Storage};
/// let dir = tempfile::tempdir().unwrap();
/// let p = dir.path().join("x");
/// FsStorage.create(&p).unwrap().write(b"abc").unwrap();
/// let mut buf = [0u8; 8];
/// assert_eq!(read_at_most(FsStorage.open_read(&p).unwrap().as_ref(), &mut buf, 1).unwrap(), 2);
/// ```
pub fn read_at_most(file: &dyn ReadFile, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Replaces `path` with `bytes` so that a crash at any point leaves either the old or the new
/// content: write a temporary file, fsync it, rename it over `path`, fsync the directory.
///
/// ```
/// use fairq_journal::storage::{replace_atomically, FsStorage, Storage};
/// let dir = tempfile::tempdir().unwrap();
/// let p = dir.path().join("cp");
/// replace_atomically(&FsStorage, &p, b"v1").unwrap();
/// replace_atomically(&FsStorage, &p, b"v2").unwrap();
/// assert_eq!(FsStorage.read_all(&p).unwrap(), b"v2");
/// ```
pub fn replace_atomically(storage: &dyn Storage, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = Path::new(&tmp);
    let file = storage.create(tmp)?;
    write_all(file.as_ref(), bytes)?;
    file.sync_data()?;
    drop(file);
    storage.rename(tmp, path)?;
    storage.sync_dir(parent_dir(path))
}

/// The directory holding `path` (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The real file system through `std::fs`.
#[derive(Debug, Clone, Copy, Default)]
pub struct FsStorage;

#[derive(Debug)]
struct FsFile(File);

impl WriteFile for FsFile {
    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        (&self.0).write(buf)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
}

impl ReadFile for FsFile {
    #[cfg(unix)]
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(&self.0, buf, offset)
    }
    #[cfg(windows)]
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::windows::fs::FileExt::seek_read(&self.0, buf, offset)
    }
}

impl Storage for FsStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                if let Some(name) = entry.file_name().to_str() {
                    names.push(name.to_string());
                }
            }
        }
        Ok(names)
    }
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .read(true)
            .open(path)?;
        drop(f);
        self.open_append(path)
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let f = OpenOptions::new().append(true).read(true).open(path)?;
        Ok(Box::new(FsFile(f)))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ReadFile>> {
        Ok(Box::new(FsFile(File::open(path)?)))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
    #[cfg(unix)]
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn LockGuard>> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        // An advisory lock (flock on Unix), released when the file is closed, also when the
        // process dies.
        <File as fs4::FileExt>::try_lock(&file).map_err(io::Error::from)?;
        Ok(Box::new(FsLock(file)))
    }
}

#[derive(Debug)]
struct FsLock(#[allow(dead_code)] File);

impl LockGuard for FsLock {}
