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
//! let f = fs.create(&dir.path().join("a"), 0o600).unwrap();
//! assert_eq!(f.write(b"hi").unwrap(), 2);
//! f.sync_data().unwrap();
//! assert_eq!(fs.read_all(&dir.path().join("a")).unwrap(), b"hi");
//! ```

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, IoSlice};
use std::path::Path;
use std::sync::Arc;

/// What kind of entry a directory listing found. Symbolic links are reported as such, never
/// followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A symbolic link (to anything, or dangling).
    Symlink,
    /// A directory.
    Dir,
    /// A FIFO, socket, device or anything else.
    Other,
}

impl EntryKind {
    /// The kind of an entry of type `t`, as `symlink_metadata` or a directory listing
    /// reports it (neither follows a symbolic link).
    ///
    /// ```
    /// use fairq_journal::storage::EntryKind;
    /// let dir = tempfile::tempdir().unwrap();
    /// let t = std::fs::symlink_metadata(dir.path()).unwrap().file_type();
    /// assert_eq!(EntryKind::of(t), EntryKind::Dir);
    /// ```
    pub fn of(t: fs::FileType) -> Self {
        if t.is_symlink() {
            EntryKind::Symlink
        } else if t.is_file() {
            EntryKind::File
        } else if t.is_dir() {
            EntryKind::Dir
        } else {
            EntryKind::Other
        }
    }
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's file name (entries whose names are not UTF-8 are left out).
    pub name: String,
    /// What the entry is, without following symbolic links.
    pub kind: EntryKind,
}

/// A file system as the journal needs it. Paths are absolute or relative to the process.
///
/// Files are created exclusively (never truncating or following an existing entry) and
/// opened without following symbolic links, so nothing is ever written through a link
/// planted in a queue's folder. `mode` arguments are Unix permission bits (`0o600`); other
/// platforms ignore them.
pub trait Storage: Send + Sync + fmt::Debug {
    /// Creates a directory and its missing parents with permission bits `mode`.
    fn create_dir_all(&self, dir: &Path, mode: u32) -> io::Result<()>;
    /// Every entry of `dir`, with its kind.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<DirEntry>>;
    /// The whole content of a file.
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Creates a new file with permission bits `mode` and opens it for appending. Fails with
    /// [`io::ErrorKind::AlreadyExists`] if anything (a symbolic link included) has that name.
    fn create(&self, path: &Path, mode: u32) -> io::Result<Box<dyn WriteFile>>;
    /// Opens an existing regular file for appending at its end.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>>;
    /// Opens an existing regular file for positioned reads.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ReadFile>>;
    /// Atomically renames a file (replacing the target).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file (a symbolic link itself, not its target).
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on `path` (creating the file with permission bits `mode` if
    /// needed) for as long as the returned guard lives. Fails with
    /// [`io::ErrorKind::WouldBlock`] if another holder (in this or another process) has it.
    fn lock(&self, path: &Path, mode: u32) -> io::Result<Box<dyn LockGuard>>;
    /// Takes a shared lock on an existing `path`, which only an exclusive lock conflicts
    /// with. Returns `None`, creating nothing, when the file does not exist.
    fn lock_shared(&self, path: &Path) -> io::Result<Option<Box<dyn LockGuard>>>;
    /// Whether the journal may call this storage from its helper threads: the one that
    /// creates the segment after the writer's ahead of time, under mapped writes the one
    /// that cuts a sealed segment back to its records, and under
    /// [`SyncPolicy::Periodic`](crate::SyncPolicy) the timer that syncs. The default is
    /// yes. A storage that must see its calls in the same order on every run, such as the
    /// simulated disk ([`SimDisk`](crate::sim::SimDisk)), whose faults and scheduled crashes
    /// follow a seed and a count of operations, says no: the journal then does that work on
    /// the caller's thread, in the put that asks for it (a periodic sync in the first put
    /// that finds the interval passed on [`JournalConfig::clock`](crate::JournalConfig)).
    ///
    /// ```
    /// use fairq_journal::sim::SimDisk;
    /// use fairq_journal::storage::{FsStorage, Storage};
    /// assert!(FsStorage.helper_threads());
    /// assert!(!SimDisk::new(1).helper_threads());
    /// ```
    fn helper_threads(&self) -> bool {
        true
    }
}

/// Holds a lock taken with [`Storage::lock`] or [`Storage::lock_shared`]; dropping it
/// releases the lock.
pub trait LockGuard: Send + Sync + fmt::Debug {}

/// A file opened for appending.
pub trait WriteFile: Send + Sync + fmt::Debug {
    /// Appends a prefix of `buf` and returns its length (which may be short).
    fn write(&self, buf: &[u8]) -> io::Result<usize>;
    /// Appends a prefix of the concatenation of `bufs` (one `writev` where the platform has
    /// it) and returns its length (which may be short). The default writes the first
    /// non-empty buffer.
    fn write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match bufs.iter().find(|b| !b.is_empty()) {
            Some(b) => self.write(b),
            None => Ok(0),
        }
    }
    /// Makes the file's data durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
    /// Truncates (or extends) the file to `len` bytes; later appends go after it.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Reserves disk space for the bytes `offset..offset + len` without changing the file's
    /// length or contents, so that appends there find their blocks allocated (`fallocate`
    /// with `FALLOC_FL_KEEP_SIZE` on Linux). A hint: the default does nothing, and the
    /// journal carries on when it fails; after an error of kind
    /// [`io::ErrorKind::Unsupported`] (a file system that cannot reserve space) it stops
    /// asking.
    fn reserve(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// For mapped writes ([`JournalConfig::mapped_writes`](crate::JournalConfig::mapped_writes)):
    /// allocates the file's blocks up to `len` bytes, extending it with zeros to that
    /// length, and maps its first `len` bytes shared and writable. The journal then stores
    /// records into the map instead of writing them, and cuts the file back to its records
    /// with [`WriteFile::set_len`] before it stops using the map. `Ok(None)` when the file
    /// cannot be mapped this way (the default, and on a file system that cannot allocate
    /// ahead): the journal writes as usual.
    fn map(&self, len: u64) -> io::Result<Option<Box<dyn WriteMap>>> {
        let _ = len;
        Ok(None)
    }
}

/// A shared, writable memory map of the start of a file, from [`WriteFile::map`]. Bytes
/// stored into it are in the operating system's page cache at once, as after a `write`:
/// a process that is killed loses none of them, and syncing the file makes them durable.
///
/// ```
/// use fairq_journal::storage::{FsStorage, Storage};
/// let dir = tempfile::tempdir().unwrap();
/// let f = FsStorage.create(&dir.path().join("m"), 0o600).unwrap();
/// if let Some(mut map) = f.map(4096).unwrap() {
///     assert_eq!(map.len(), 4096);
///     map.store(0, &[b"h", b"i"]);
///     drop(map);
///     f.set_len(2).unwrap();
///     assert_eq!(FsStorage.read_all(&dir.path().join("m")).unwrap(), b"hi");
/// }
/// ```
pub trait WriteMap: Send + Sync + fmt::Debug {
    /// How many bytes are mapped.
    fn len(&self) -> usize;
    /// Whether nothing is mapped.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `parts`, one after another, into the map from byte `offset`. The caller
    /// keeps within [`WriteMap::len`]; a map may panic otherwise.
    fn store(&mut self, offset: usize, parts: &[&[u8]]);
    /// Work that prepares every page of the map for stores ahead of time, so that none of
    /// them waits for the page to be found (`MADV_POPULATE_WRITE` on Linux), or `None`
    /// (the default) if the map has nothing to prepare. A hint that changes no byte.
    ///
    /// The work may run on another thread while the map is in use (stored into, even
    /// dropped): the journal's helper thread that creates the segment after the writer's
    /// hands the map over as soon as it is made and prepares its pages afterwards, so that
    /// rotation does not wait for them. The segment a queue opens with is prepared before
    /// its first store.
    ///
    /// ```
    /// use fairq_journal::storage::{FsStorage, Storage};
    /// let dir = tempfile::tempdir().unwrap();
    /// let f = FsStorage.create(&dir.path().join("m"), 0o600).unwrap();
    /// if let Some(mut map) = f.map(1 << 20).unwrap() {
    ///     let prepare = map.prefaulter();
    ///     let helper = std::thread::spawn(move || prepare.map(|work| work()));
    ///     map.store(0, &[b"stored meanwhile"]);
    ///     helper.join().unwrap();
    /// }
    /// ```
    fn prefaulter(&self) -> Option<Prefault> {
        None
    }
}

/// Work that prepares a map's pages for stores, from [`WriteMap::prefaulter`]; it may run on
/// any thread, and after the map is gone.
///
/// ```
/// use fairq_journal::storage::{FsStorage, Prefault, Storage};
/// let dir = tempfile::tempdir().unwrap();
/// let f = FsStorage.create(&dir.path().join("p"), 0o600).unwrap();
/// if let Some(map) = f.map(64 << 10).unwrap() {
///     let prepare: Option<Prefault> = map.prefaulter();
///     drop(map);
///     // Still safe to run: it only asks the kernel about pages, and keeps the map alive.
///     if let Some(work) = prepare {
///         work();
///     }
/// }
/// ```
pub type Prefault = Box<dyn FnOnce() + Send>;

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
/// let f = FsStorage.create(&dir.path().join("x"), 0o600).unwrap();
/// write_all(f.as_ref(), b"abc").unwrap();
/// ```
// Inlined into the put path, which returns through every frame between it and the write.
#[inline(always)]
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

/// Writes all of `bufs` in order with as few `writev` calls as the file allows (at most
/// `IOV_MAX`-sized groups), retrying short writes and interruptions. Returns the bytes
/// written in all.
///
/// ```
/// use std::io::IoSlice;
/// use fairq_journal::storage::{write_all_vectored, FsStorage, Storage};
/// let dir = tempfile::tempdir().unwrap();
/// let p = dir.path().join("x");
/// let f = FsStorage.create(&p, 0o600).unwrap();
/// write_all_vectored(f.as_ref(), &[IoSlice::new(b"ab"), IoSlice::new(b""), IoSlice::new(b"c")]).unwrap();
/// assert_eq!(FsStorage.read_all(&p).unwrap(), b"abc");
/// ```
pub fn write_all_vectored(file: &dyn WriteFile, bufs: &[IoSlice<'_>]) -> io::Result<u64> {
    const GROUP: usize = 512;
    let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
    let (mut i, mut skip) = (0usize, 0usize);
    while i < bufs.len() {
        if bufs[i].len() == skip {
            i += 1;
            skip = 0;
            continue;
        }
        let n = if skip > 0 {
            // Inside a buffer after a short write: finish it on its own.
            file.write(&bufs[i][skip..])
        } else {
            file.write_vectored(&bufs[i..(i + GROUP).min(bufs.len())])
        };
        match n {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0")),
            Ok(mut n) => {
                while n > 0 {
                    let left = bufs[i].len() - skip;
                    if n < left {
                        skip += n;
                        n = 0;
                    } else {
                        n -= left;
                        i += 1;
                        skip = 0;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}

/// Fills `buf` from `offset` as far as the file allows; returns the bytes read.
///
/// ```
/// use fairq_journal::storage::{read_at_most, FsStorage, Storage};
/// let dir = tempfile::tempdir().unwrap();
/// let p = dir.path().join("x");
/// FsStorage.create(&p, 0o600).unwrap().write(b"abc").unwrap();
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
/// content: write a temporary file (created afresh with permission bits `mode`), fsync it,
/// rename it over `path`, fsync the directory. A leftover temporary file, or anything else
/// under its name, is removed first, never written through.
///
/// ```
/// use fairq_journal::storage::{replace_atomically, FsStorage, Storage};
/// let dir = tempfile::tempdir().unwrap();
/// let p = dir.path().join("cp");
/// replace_atomically(&FsStorage, &p, b"v1", 0o600).unwrap();
/// replace_atomically(&FsStorage, &p, b"v2", 0o600).unwrap();
/// assert_eq!(FsStorage.read_all(&p).unwrap(), b"v2");
/// ```
pub fn replace_atomically(
    storage: &dyn Storage,
    path: &Path,
    bytes: &[u8],
    mode: u32,
) -> io::Result<()> {
    replace(storage, path, bytes, mode).map_err(|f| f.error)
}

/// A [`replace_atomically`] that failed, and whether it failed after the rename: then
/// `path` holds the new content, only not durably (a crash may bring the old one back).
#[derive(Debug)]
pub(crate) struct ReplaceFailed {
    pub(crate) error: io::Error,
    pub(crate) renamed: bool,
}

/// [`replace_atomically`], telling a failure after the rename apart.
pub(crate) fn replace(
    storage: &dyn Storage,
    path: &Path,
    bytes: &[u8],
    mode: u32,
) -> Result<(), ReplaceFailed> {
    let before = |error| ReplaceFailed {
        error,
        renamed: false,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = Path::new(&tmp);
    match storage.remove_file(tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(before(e)),
        _ => {}
    }
    let file = storage.create(tmp, mode).map_err(before)?;
    write_all(file.as_ref(), bytes).map_err(before)?;
    file.sync_data().map_err(before)?;
    drop(file);
    storage.rename(tmp, path).map_err(before)?;
    storage
        .sync_dir(parent_dir(path))
        .map_err(|error| ReplaceFailed {
            error,
            renamed: true,
        })
}

/// Creates `dir` and any missing folder above it (with permission bits `mode`), and makes
/// each new folder's entry durable by syncing the folder holding it, top down: without
/// that, a power loss could take a new folder away with every file synced into it.
pub(crate) fn create_dir_durably(storage: &dyn Storage, dir: &Path, mode: u32) -> io::Result<()> {
    let missing =
        |d: &Path| matches!(storage.list_dir(d), Err(e) if e.kind() == io::ErrorKind::NotFound);
    if !missing(dir) {
        // There (or not a folder at all, which the creation reports as before).
        return storage.create_dir_all(dir, mode);
    }
    let mut created = vec![dir];
    while let Some(up) = created[created.len() - 1]
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && missing(p))
    {
        created.push(up);
    }
    storage.create_dir_all(dir, mode)?;
    created
        .iter()
        .rev()
        .try_for_each(|d| storage.sync_dir(parent_dir(d)))
}

/// The whole content of `path`, or `None` when there is no such file (a checkpoint, the
/// registry or the tail marker, each of which may not have been written yet).
pub(crate) fn read_if_present(storage: &dyn Storage, path: &Path) -> io::Result<Option<Vec<u8>>> {
    match storage.read_all(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The directory holding `path` (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The real file system through `std::fs`.
///
/// On Unix every file is opened with `O_NOFOLLOW` and created with `O_CREAT | O_EXCL`, so a
/// symbolic link is never followed and an existing file is never truncated.
#[derive(Debug, Clone, Copy, Default)]
pub struct FsStorage;

/// A segment file of [`FsStorage`].
///
/// On Linux its appends are system calls issued directly (`rustix`'s raw backend) rather
/// than through the C library, whose `write` in a process with more than one thread marks
/// the thread cancellable around every call (two atomic read-modify-writes a put).
#[derive(Debug)]
struct FsFile(File);

impl WriteFile for FsFile {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[inline]
    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        Ok(rustix::io::write(&self.0, buf)?)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        use std::io::Write;
        (&self.0).write(buf)
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[inline]
    fn write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        Ok(rustix::io::writev(&self.0, bufs)?)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        use std::io::Write;
        (&self.0).write_vectored(bufs)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn reserve(&self, offset: u64, len: u64) -> io::Result<()> {
        use rustix::fs::{fallocate, FallocateFlags};
        use rustix::io::Errno;
        fallocate(&self.0, FallocateFlags::KEEP_SIZE, offset, len).map_err(|e| {
            if e == Errno::OPNOTSUPP || e == Errno::NOSYS {
                io::Error::new(io::ErrorKind::Unsupported, e)
            } else {
                io::Error::from(e)
            }
        })
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn map(&self, len: u64) -> io::Result<Option<Box<dyn WriteMap>>> {
        use rustix::fs::{fallocate, FallocateFlags};
        use rustix::io::Errno;
        let Ok(map_len) = usize::try_from(len) else {
            return Ok(None);
        };
        // Blocks allocated before the map is used: a store into a page whose block the
        // file system would have to find at writeback cannot fail with a full disk (that
        // would be a `SIGBUS`, not an error).
        match fallocate(&self.0, FallocateFlags::empty(), 0, len) {
            Ok(()) => {}
            Err(e) if e == Errno::OPNOTSUPP || e == Errno::NOSYS => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        // The map itself is safe to make: every access to its bytes is an `unsafe` pointer
        // operation, whose conditions `FsMap::store` states. Another program that shrinks the
        // file below `len` while it is mapped makes the next store into the lost pages raise
        // `SIGBUS`, as with any shared map (documented at `mapped_writes`); the journal drops
        // the map before it cuts the file.
        let map = memmap2::MmapOptions::new().len(map_len).map_raw(&self.0)?;
        Ok(Some(Box::new(FsMap(Arc::new(map)))))
    }
}

/// A segment mapped for mapped writes ([`WriteFile::map`]). The map is shared with the
/// work that prepares its pages ([`WriteMap::prefaulter`]), which may still run on the
/// helper thread while the writer stores into it: that work only asks the kernel to make
/// the pages ready, and touches no byte.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[derive(Debug)]
struct FsMap(Arc<memmap2::MmapRaw>);

#[cfg(any(target_os = "linux", target_os = "android"))]
impl WriteMap for FsMap {
    fn len(&self) -> usize {
        self.0.len()
    }
    #[inline]
    fn store(&mut self, mut offset: usize, parts: &[&[u8]]) {
        let len = self.0.len();
        for part in parts {
            let end = offset
                .checked_add(part.len())
                .filter(|&end| end <= len)
                .unwrap_or_else(|| panic!("a store past the end of the map ({len} bytes)"));
            // SAFETY: `offset..end` lies inside the map (checked above), which stays mapped
            // while `self.0` lives, and inside the file (allocated to the map's length by
            // `FsFile::map`; the journal cuts a file only after its owner dropped the map,
            // and a store into pages another program cut away is a `SIGBUS`, not a write
            // elsewhere). Only this map's owner writes its bytes, through
            // `&mut self`, so no other store overlaps this one; the other holders of the
            // `Arc` only advise the kernel about the pages (`prefaulter`), which reads and
            // writes no byte. Readers read the file with `pread`, never through the map.
            #[allow(unsafe_code)]
            unsafe {
                std::ptr::copy_nonoverlapping(
                    part.as_ptr(),
                    self.0.as_mut_ptr().add(offset),
                    part.len(),
                );
            }
            offset = end;
        }
    }
    fn prefaulter(&self) -> Option<Prefault> {
        // Without it, the first store past the segment's header waited for the kernel's
        // readahead of the file's next `read_ahead_kb` (8 MiB: 4 to 5 ms on ext4) and for
        // each later readahead window (about 2 ms).
        #[cfg(target_os = "linux")]
        {
            let map = Arc::clone(&self.0);
            Some(Box::new(move || {
                let _ = map.advise(memmap2::Advice::PopulateWrite);
            }))
        }
        #[cfg(not(target_os = "linux"))]
        None
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

/// Options that never follow a symbolic link at the last path component, and that create
/// new files with `mode`.
fn no_follow(mode: u32) -> OpenOptions {
    let mut o = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    o
}

/// Opens an existing regular file, refusing symbolic links and anything else.
fn open_regular(path: &Path, options: &OpenOptions) -> io::Result<File> {
    let f = options.open(path).map_err(|e| explain_no_follow(path, e))?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok(f)
}

/// `O_NOFOLLOW` on a symbolic link fails with `ELOOP`; say what that means.
fn explain_no_follow(path: &Path, e: io::Error) -> io::Error {
    #[cfg(unix)]
    if e.raw_os_error() == Some(libc::ELOOP) {
        return io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is a symbolic link; it is not followed", path.display()),
        );
    }
    let _ = path;
    e
}

impl Storage for FsStorage {
    fn create_dir_all(&self, dir: &Path, mode: u32) -> io::Result<()> {
        let mut b = fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, mode);
        #[cfg(not(unix))]
        let _ = mode;
        b.create(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        let mut entries = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            // `DirEntry::file_type` does not follow symbolic links.
            let kind = EntryKind::of(entry.file_type()?);
            if let Some(name) = entry.file_name().to_str() {
                entries.push(DirEntry {
                    name: name.to_string(),
                    kind,
                });
            }
        }
        Ok(entries)
    }
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut f = open_regular(path, no_follow(0).read(true))?;
        let mut out = Vec::new();
        io::Read::read_to_end(&mut f, &mut out)?;
        Ok(out)
    }
    fn create(&self, path: &Path, mode: u32) -> io::Result<Box<dyn WriteFile>> {
        let f = no_follow(mode)
            .create_new(true)
            .append(true)
            .read(true)
            .open(path)?;
        Ok(Box::new(FsFile(f)))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let f = open_regular(path, no_follow(0).append(true).read(true))?;
        Ok(Box::new(FsFile(f)))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ReadFile>> {
        Ok(Box::new(FsFile(open_regular(
            path,
            no_follow(0).read(true),
        )?)))
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
    fn lock(&self, path: &Path, mode: u32) -> io::Result<Box<dyn LockGuard>> {
        // A lock file removed (a queue deleted) between this open and the lock would
        // leave the lock on a file no later opener finds: open again, a few times.
        for _ in 0..LOCK_ATTEMPTS {
            let file = open_regular(
                path,
                no_follow(mode).create(true).truncate(false).write(true),
            )?;
            // An advisory lock (flock on Unix), released when the file is closed, also
            // when the process dies.
            <File as fs4::FileExt>::try_lock(&file).map_err(io::Error::from)?;
            if still_named(&file, path)? {
                return Ok(Box::new(FsLock(file)));
            }
        }
        Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!("{} keeps being removed and made again", path.display()),
        ))
    }
    fn lock_shared(&self, path: &Path) -> io::Result<Option<Box<dyn LockGuard>>> {
        let file = match open_regular(path, no_follow(0).read(true)) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        <File as fs4::FileExt>::try_lock_shared(&file).map_err(io::Error::from)?;
        // Removed meanwhile: as if it had not existed.
        if !still_named(&file, path)? {
            return Ok(None);
        }
        Ok(Some(Box::new(FsLock(file))))
    }
}

/// Times [`FsStorage::lock`] opens a lock file that was removed under it before giving up.
const LOCK_ATTEMPTS: usize = 8;

/// Whether `path` still names the open `file` (it was not removed, or removed and made
/// again, since it was opened).
fn still_named(file: &File, path: &Path) -> io::Result<bool> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let open = file.metadata()?;
        match std::fs::symlink_metadata(path) {
            Ok(named) => Ok(named.dev() == open.dev() && named.ino() == open.ino()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (file, path);
        Ok(true)
    }
}

#[derive(Debug)]
struct FsLock(#[allow(dead_code)] File);

/// The writer's file of a queue opened read-only: every call fails.
#[derive(Debug)]
pub(crate) struct ReadOnlyFile;

impl ReadOnlyFile {
    fn refuse() -> io::Error {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the queue is open read-only",
        )
    }
}

impl WriteFile for ReadOnlyFile {
    fn write(&self, _buf: &[u8]) -> io::Result<usize> {
        Err(Self::refuse())
    }
    fn sync_data(&self) -> io::Result<()> {
        Err(Self::refuse())
    }
    fn set_len(&self, _len: u64) -> io::Result<()> {
        Err(Self::refuse())
    }
}

impl LockGuard for FsLock {}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_lock_file_removed_or_made_again_is_no_longer_the_one_named() {
        // The check `FsStorage::lock` makes after taking the lock: a lock taken on a file
        // that a queue's deletion removed meanwhile guards nothing.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.lock");
        let file = open_regular(&path, no_follow(0o600).create(true).write(true)).unwrap();
        assert!(still_named(&file, &path).unwrap());
        std::fs::remove_file(&path).unwrap();
        assert!(!still_named(&file, &path).unwrap(), "removed");
        std::fs::write(&path, b"").unwrap();
        assert!(!still_named(&file, &path).unwrap(), "made again");
        // The storage's own lock takes the file the path names now.
        let guard = FsStorage.lock(&path, 0o600).unwrap();
        assert!(matches!(
            FsStorage.lock(&path, 0o600),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock
        ));
        drop(guard);
    }
}
