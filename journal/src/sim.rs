//! A deterministic simulated disk for crash and fault testing.
//!
//! [`SimDisk`] keeps files in memory and tracks, for every file, what has been made durable by
//! `sync_data` and, for every directory, which entries have been made durable by `sync_dir`.
//! [`SimDisk::crash`] simulates a power loss: directory entries that were never synced vanish
//! (or renames revert), and each file keeps its durable content plus a random prefix of what
//! was appended after the last sync, sometimes followed by a few garbage bytes (a torn sector).
//! Handles opened before the crash fail afterwards, like those of a dead process. Files can
//! be mapped ([`WriteFile::map`]): stores into a map change the file's content in place, and
//! a crash keeps all or none of the changes made since the last sync (a file whose unsynced
//! changes only extend its synced content keeps a random prefix, as with appends).
//! [`SimDisk::schedule_crash`] makes the power fail in the middle of whatever operation runs
//! after a given number of storage operations.
//!
//! Faults ([`SimFaults`]) inject short writes, `EIO` on writes and syncs, `ENOSPC` once a
//! capacity is reached, and reads that return flipped bits. All randomness comes from a seed,
//! and the disk answers no to [`Storage::helper_threads`], so the journal calls it only from
//! the threads that call the journal: a single-threaded run with the same seed makes the same
//! calls in the same order, and a failing case replays exactly (`tests/determinism.rs`).
//! Under [`SyncPolicy::Periodic`](crate::SyncPolicy) the syncs then come from puts that find
//! the interval passed on the journal's clock, so give the journal a
//! [`ManualClock`](crate::ManualClock) for a run that replays.
//!
//! ```
//! use fairq_journal::sim::SimDisk;
//! use fairq_journal::storage::Storage;
//! use std::path::Path;
//!
//! let disk = SimDisk::new(1);
//! disk.create_dir_all(Path::new("/q"), 0o700).unwrap();
//! let f = disk.create(Path::new("/q/a"), 0o600).unwrap();
//! f.write(b"durable").unwrap();
//! f.sync_data().unwrap();
//! disk.sync_dir(Path::new("/q")).unwrap();
//! f.write(b" maybe").unwrap();
//! disk.crash();
//! let after = disk.read_all(Path::new("/q/a")).unwrap();
//! assert!(after.starts_with(b"durable"));
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::storage::{
    parent_dir, DirEntry, EntryKind, LockGuard, ReadFile, Storage, WriteFile, WriteMap,
};

/// Fault injection settings of a [`SimDisk`]. Rates are per thousand operations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimFaults {
    /// Writes may accept only part of the buffer.
    pub short_writes: bool,
    /// Chance per thousand that a write fails with `EIO` after writing a random prefix.
    pub write_error_per_mille: u32,
    /// Chance per thousand that `sync_data` or `sync_dir` fails with `EIO`.
    pub sync_error_per_mille: u32,
    /// Total bytes of file data the disk holds; writes beyond it fail with `ENOSPC`.
    pub capacity: Option<u64>,
    /// Chance per thousand that a positioned read (`ReadFile::read_at`) returns its bytes
    /// with one bit flipped; the data on the disk stays intact, as after a bad transfer.
    pub corrupt_read_per_mille: u32,
}

#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    synced: Vec<u8>,
}

#[derive(Debug)]
struct State {
    inodes: HashMap<u64, Inode>,
    next_ino: u64,
    live: BTreeMap<PathBuf, u64>,
    durable: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
    generation: u64,
    rng: u64,
    faults: SimFaults,
    syncs: u64,
    /// Mutating operations left before a scheduled crash.
    countdown: Option<u64>,
    /// After a scheduled crash, every operation fails until `restart`.
    dead: bool,
    /// Paths locked with `Storage::lock`, by the generation that took the lock.
    locks: HashMap<PathBuf, u64>,
    /// Paths locked with `Storage::lock_shared`: generation and number of holders.
    shared_locks: HashMap<PathBuf, (u64, usize)>,
    /// Mutating operations that succeeded.
    mutations: u64,
    /// Every `WriteFile::reserve` call: path, offset, length.
    reservations: Vec<(PathBuf, u64, u64)>,
}

impl State {
    fn next_u64(&mut self) -> u64 {
        // SplitMix64.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    fn chance(&mut self, per_mille: u32) -> bool {
        per_mille > 0 && self.below(1000) < u64::from(per_mille)
    }

    fn used(&self) -> u64 {
        self.live
            .values()
            .collect::<BTreeSet<_>>()
            .iter()
            .filter_map(|ino| self.inodes.get(ino))
            .map(|i| i.data.len() as u64)
            .sum()
    }

    /// Fails if the disk is dead; for mutating operations, counts down to a scheduled crash.
    fn step(&mut self, mutating: bool) -> io::Result<()> {
        if self.dead {
            return Err(eio("a disk that lost power"));
        }
        if mutating {
            match self.countdown {
                Some(0) => {
                    self.countdown = None;
                    self.crash();
                    self.dead = true;
                    return Err(eio("a disk that just lost power"));
                }
                Some(n) => self.countdown = Some(n - 1),
                None => {}
            }
            self.mutations += 1;
        }
        Ok(())
    }

    fn crash(&mut self) {
        self.generation += 1;
        // The processes holding locks died with the power.
        self.locks.clear();
        self.shared_locks.clear();
        let keep: BTreeSet<u64> = self.durable.values().copied().collect();
        let mut inos: Vec<u64> = self.inodes.keys().copied().collect();
        inos.sort_unstable();
        for ino in inos {
            let Some(inode) = self.inodes.remove(&ino) else {
                continue;
            };
            if !keep.contains(&ino) {
                continue;
            }
            let new_data = if inode.data.starts_with(&inode.synced) {
                let extra = &inode.data[inode.synced.len()..];
                let kept = self.below(extra.len() as u64 + 1) as usize;
                let mut d = inode.synced.clone();
                d.extend_from_slice(&extra[..kept]);
                if kept < extra.len() && self.below(4) == 0 {
                    // A torn sector: a few bytes of garbage (or zeros) after the cut.
                    let n = 1 + self.below(16) as usize;
                    let zeros = self.below(2) == 0;
                    for _ in 0..n {
                        let b = if zeros { 0 } else { self.next_u64() as u8 };
                        d.push(b);
                    }
                }
                d
            } else if self.below(2) == 0 {
                inode.synced.clone()
            } else {
                inode.data.clone()
            };
            self.inodes.insert(
                ino,
                Inode {
                    synced: new_data.clone(),
                    data: new_data,
                },
            );
        }
        self.live = self.durable.clone();
    }

    fn check_dir(&self, path: &Path) -> io::Result<()> {
        if self.dirs.contains(parent_dir(path)) {
            Ok(())
        } else {
            Err(not_found(parent_dir(path)))
        }
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

fn eio(what: &str) -> io::Error {
    io::Error::other(format!("simulated EIO on {what}"))
}

fn enospc() -> io::Error {
    io::Error::new(io::ErrorKind::StorageFull, "simulated ENOSPC")
}

/// A simulated disk; cheap to clone (clones share the same disk).
#[derive(Debug, Clone)]
pub struct SimDisk {
    state: Arc<Mutex<State>>,
}

impl SimDisk {
    /// A new empty disk whose random choices follow `seed`.
    ///
    /// ```
    /// let disk = fairq_journal::sim::SimDisk::new(7);
    /// assert_eq!(disk.sync_count(), 0);
    /// ```
    pub fn new(seed: u64) -> Self {
        let mut dirs = BTreeSet::new();
        dirs.insert(PathBuf::from("/"));
        dirs.insert(PathBuf::from("."));
        SimDisk {
            state: Arc::new(Mutex::new(State {
                inodes: HashMap::new(),
                next_ino: 1,
                live: BTreeMap::new(),
                durable: BTreeMap::new(),
                dirs,
                generation: 0,
                rng: seed ^ 0x005E_ED0F_D15C,
                faults: SimFaults::default(),
                syncs: 0,
                countdown: None,
                dead: false,
                locks: HashMap::new(),
                shared_locks: HashMap::new(),
                mutations: 0,
                reservations: Vec::new(),
            })),
        }
    }

    fn guard(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock can only come from a bug in this module; the state
        // stays usable, so recover the guard.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces the fault settings.
    ///
    /// ```
    /// use fairq_journal::sim::{SimDisk, SimFaults};
    /// let disk = SimDisk::new(1);
    /// disk.set_faults(SimFaults { short_writes: true, ..SimFaults::default() });
    /// assert!(disk.faults().short_writes);
    /// ```
    pub fn set_faults(&self, faults: SimFaults) {
        self.guard().faults = faults;
    }

    /// The current fault settings.
    ///
    /// ```
    /// let disk = fairq_journal::sim::SimDisk::new(1);
    /// assert_eq!(disk.faults(), Default::default());
    /// ```
    pub fn faults(&self) -> SimFaults {
        self.guard().faults
    }

    /// How many successful `sync_data` calls the disk has seen.
    ///
    /// ```
    /// let disk = fairq_journal::sim::SimDisk::new(1);
    /// assert_eq!(disk.sync_count(), 0);
    /// ```
    pub fn sync_count(&self) -> u64 {
        self.guard().syncs
    }

    /// How many mutating operations (writes, syncs, creations, renames, removals,
    /// truncations) have succeeded on this disk.
    ///
    /// ```
    /// use fairq_journal::sim::SimDisk;
    /// use fairq_journal::storage::Storage;
    /// use std::path::Path;
    /// let disk = SimDisk::new(1);
    /// disk.create(Path::new("/a"), 0o600).unwrap();
    /// assert_eq!(disk.mutations(), 1);
    /// disk.read_all(Path::new("/a")).unwrap();
    /// assert_eq!(disk.mutations(), 1);
    /// ```
    pub fn mutations(&self) -> u64 {
        self.guard().mutations
    }

    /// Every space reservation (`WriteFile::reserve`) made on this disk, in order: the
    /// file's path, the offset and the length. A reservation changes nothing the disk
    /// holds (no length, no bytes), so it is not a mutating operation.
    ///
    /// ```
    /// use fairq_journal::sim::SimDisk;
    /// use fairq_journal::storage::Storage;
    /// use std::path::Path;
    /// let disk = SimDisk::new(1);
    /// let f = disk.create(Path::new("/a"), 0o600).unwrap();
    /// f.reserve(0, 4096).unwrap();
    /// assert_eq!(disk.reservations(), vec![(Path::new("/a").to_path_buf(), 0, 4096)]);
    /// assert_eq!(disk.read_all(Path::new("/a")).unwrap(), b"");
    /// ```
    pub fn reservations(&self) -> Vec<(PathBuf, u64, u64)> {
        self.guard().reservations.clone()
    }

    /// Simulates a power loss (see the module documentation). Handles opened before the crash
    /// fail afterwards.
    ///
    /// ```
    /// use fairq_journal::sim::SimDisk;
    /// use fairq_journal::storage::Storage;
    /// use std::path::Path;
    /// let disk = SimDisk::new(3);
    /// disk.create(Path::new("/never-synced"), 0o600).unwrap();
    /// disk.crash();
    /// assert!(disk.read_all(Path::new("/never-synced")).is_err());
    /// ```
    pub fn crash(&self) {
        let mut s = self.guard();
        s.countdown = None;
        s.crash();
    }

    /// Schedules a power loss: the next `after_ops` mutating operations (writes, syncs,
    /// creations, renames, removals) succeed, the one after that crashes the disk as
    /// [`SimDisk::crash`] does, and every operation then fails until [`SimDisk::restart`].
    ///
    /// ```
    /// use fairq_journal::sim::SimDisk;
    /// use fairq_journal::storage::Storage;
    /// use std::path::Path;
    /// let disk = SimDisk::new(1);
    /// disk.schedule_crash(1);
    /// assert!(disk.create(Path::new("/a"), 0o600).is_ok());
    /// assert!(disk.create(Path::new("/b"), 0o600).is_err());
    /// assert!(disk.is_dead());
    /// disk.restart();
    /// assert!(disk.read_all(Path::new("/a")).is_err(), "never synced into the directory");
    /// ```
    pub fn schedule_crash(&self, after_ops: u64) {
        self.guard().countdown = Some(after_ops);
    }

    /// Whether a scheduled crash has happened and the disk awaits [`SimDisk::restart`].
    ///
    /// ```
    /// assert!(!fairq_journal::sim::SimDisk::new(1).is_dead());
    /// ```
    pub fn is_dead(&self) -> bool {
        self.guard().dead
    }

    /// Powers the disk back on after a scheduled crash and cancels any pending one.
    ///
    /// ```
    /// let disk = fairq_journal::sim::SimDisk::new(1);
    /// disk.schedule_crash(5);
    /// disk.restart();
    /// assert!(!disk.is_dead());
    /// ```
    pub fn restart(&self) {
        let mut s = self.guard();
        s.dead = false;
        s.countdown = None;
    }

    fn handle(&self, path: &Path, ino: u64, generation: u64) -> SimFile {
        SimFile {
            disk: self.clone(),
            ino,
            generation,
            path: path.to_path_buf(),
        }
    }
}

impl Storage for SimDisk {
    fn create_dir_all(&self, dir: &Path, _mode: u32) -> io::Result<()> {
        let mut s = self.guard();
        s.step(true)?;
        for anc in dir.ancestors() {
            if !anc.as_os_str().is_empty() {
                s.dirs.insert(anc.to_path_buf());
            }
        }
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        let mut s = self.guard();
        s.step(false)?;
        if !s.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let files = s
            .live
            .keys()
            .filter(|p| parent_dir(p) == dir)
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .map(|name| DirEntry {
                name,
                kind: EntryKind::File,
            });
        let dirs = s
            .dirs
            .iter()
            .filter(|d| d.parent() == Some(dir))
            .filter_map(|d| d.file_name()?.to_str().map(str::to_string))
            .map(|name| DirEntry {
                name,
                kind: EntryKind::Dir,
            });
        Ok(files.chain(dirs).collect())
    }

    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut s = self.guard();
        s.step(false)?;
        let ino = s.live.get(path).ok_or_else(|| not_found(path))?;
        Ok(s.inodes
            .get(ino)
            .map(|i| i.data.clone())
            .unwrap_or_default())
    }

    fn create(&self, path: &Path, _mode: u32) -> io::Result<Box<dyn WriteFile>> {
        let mut s = self.guard();
        if s.live.contains_key(path) || s.dirs.contains(path) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} already exists", path.display()),
            ));
        }
        s.step(true)?;
        s.check_dir(path)?;
        let ino = s.next_ino;
        s.next_ino += 1;
        s.inodes.insert(ino, Inode::default());
        s.live.insert(path.to_path_buf(), ino);
        let generation = s.generation;
        drop(s);
        Ok(Box::new(self.handle(path, ino, generation)))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let mut s = self.guard();
        s.step(false)?;
        let ino = *s.live.get(path).ok_or_else(|| not_found(path))?;
        let generation = s.generation;
        drop(s);
        Ok(Box::new(self.handle(path, ino, generation)))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ReadFile>> {
        let mut s = self.guard();
        s.step(false)?;
        let ino = *s.live.get(path).ok_or_else(|| not_found(path))?;
        let generation = s.generation;
        drop(s);
        Ok(Box::new(self.handle(path, ino, generation)))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.guard();
        s.step(true)?;
        s.check_dir(to)?;
        let ino = s.live.remove(from).ok_or_else(|| not_found(from))?;
        s.live.insert(to.to_path_buf(), ino);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.guard();
        s.step(true)?;
        s.live.remove(path).ok_or_else(|| not_found(path))?;
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.guard();
        s.step(true)?;
        if !s.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let rate = s.faults.sync_error_per_mille;
        if s.chance(rate) {
            return Err(eio("sync_dir"));
        }
        s.durable.retain(|p, _| parent_dir(p) != dir);
        let entries: Vec<(PathBuf, u64)> = s
            .live
            .iter()
            .filter(|(p, _)| parent_dir(p) == dir)
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        s.durable.extend(entries);
        Ok(())
    }

    fn lock(&self, path: &Path, _mode: u32) -> io::Result<Box<dyn LockGuard>> {
        let mut s = self.guard();
        s.step(false)?;
        let generation = s.generation;
        let shared = s
            .shared_locks
            .get(path)
            .is_some_and(|&(g, n)| g == generation && n > 0);
        if s.locks.contains_key(path) || shared {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked", path.display()),
            ));
        }
        s.locks.insert(path.to_path_buf(), generation);
        drop(s);
        Ok(Box::new(SimLock {
            disk: self.clone(),
            path: path.to_path_buf(),
            generation,
            shared: false,
        }))
    }

    fn lock_shared(&self, path: &Path) -> io::Result<Option<Box<dyn LockGuard>>> {
        let mut s = self.guard();
        s.step(false)?;
        if s.locks.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked", path.display()),
            ));
        }
        let generation = s.generation;
        let entry = s
            .shared_locks
            .entry(path.to_path_buf())
            .or_insert((generation, 0));
        if entry.0 != generation {
            *entry = (generation, 0);
        }
        entry.1 += 1;
        drop(s);
        Ok(Some(Box::new(SimLock {
            disk: self.clone(),
            path: path.to_path_buf(),
            generation,
            shared: true,
        })))
    }
    /// No: every call comes from the thread that called the journal, so that a seed and a
    /// count of operations replay the same run.
    fn helper_threads(&self) -> bool {
        false
    }
}

#[derive(Debug)]
struct SimLock {
    disk: SimDisk,
    path: PathBuf,
    generation: u64,
    shared: bool,
}

impl LockGuard for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut s = self.disk.guard();
        if self.shared {
            if let Some((g, n)) = s.shared_locks.get_mut(&self.path)
                && *g == self.generation
            {
                *n = n.saturating_sub(1);
            }
        } else if s.locks.get(&self.path) == Some(&self.generation) {
            s.locks.remove(&self.path);
        }
    }
}

#[derive(Debug)]
struct SimFile {
    disk: SimDisk,
    ino: u64,
    generation: u64,
    path: PathBuf,
}

impl SimFile {
    /// The file's inode in the disk's state `s`.
    fn inode<'s>(&self, s: &'s mut State) -> io::Result<&'s mut Inode> {
        s.inodes
            .get_mut(&self.ino)
            .ok_or_else(|| not_found(&self.path))
    }

    fn state(&self, mutating: bool) -> io::Result<MutexGuard<'_, State>> {
        let mut s = self.disk.guard();
        s.step(mutating)?;
        if s.generation != self.generation {
            return Err(eio("a handle opened before a simulated crash"));
        }
        if !s.inodes.contains_key(&self.ino) {
            return Err(not_found(&self.path));
        }
        Ok(s)
    }
}

impl WriteFile for SimFile {
    fn write_vectored(&self, bufs: &[std::io::IoSlice<'_>]) -> io::Result<usize> {
        // Like writev: one call that may stop anywhere, also inside a buffer.
        let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        self.write(&all)
    }

    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        let mut s = self.state(true)?;
        if buf.is_empty() {
            return Ok(0);
        }
        let mut n = buf.len();
        if s.faults.short_writes && n > 1 && s.below(2) == 0 {
            n = 1 + s.below(n as u64 - 1) as usize;
        }
        let mut err = None;
        let rate = s.faults.write_error_per_mille;
        if s.chance(rate) {
            n = s.below(n as u64) as usize;
            err = Some(eio("write"));
        }
        if let Some(cap) = s.faults.capacity {
            let free = cap.saturating_sub(s.used()) as usize;
            if free < n {
                n = free;
                err = Some(enospc());
            }
        }
        let inode = self.inode(&mut s)?;
        inode.data.extend_from_slice(&buf[..n]);
        match err {
            // A failing write that wrote nothing reports the error; one that wrote a prefix
            // reports the prefix first, and the retry of the rest fails.
            Some(e) if n == 0 => Err(e),
            _ => Ok(n),
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut s = self.state(true)?;
        let rate = s.faults.sync_error_per_mille;
        if s.chance(rate) {
            return Err(eio("sync_data"));
        }
        s.syncs += 1;
        let inode = self.inode(&mut s)?;
        inode.synced = inode.data.clone();
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut s = self.state(true)?;
        let inode = self.inode(&mut s)?;
        inode.data.resize(len as usize, 0);
        Ok(())
    }

    fn reserve(&self, offset: u64, len: u64) -> io::Result<()> {
        let mut s = self.state(false)?;
        if !s.inodes.contains_key(&self.ino) {
            return Err(not_found(&self.path));
        }
        s.reservations.push((self.path.clone(), offset, len));
        Ok(())
    }

    /// Extends the file with zeros to `len` (failing with `ENOSPC` past the capacity, as
    /// `fallocate` does) and maps it: stores change the file's current content in place,
    /// which a crash keeps or loses as it does any unsynced change (see [`SimDisk::crash`]).
    fn map(&self, len: u64) -> io::Result<Option<Box<dyn WriteMap>>> {
        let mut s = self.state(true)?;
        let current = s.inodes.get(&self.ino).map_or(0, |i| i.data.len() as u64);
        if let Some(cap) = s.faults.capacity
            && s.used() + len.saturating_sub(current) > cap
        {
            return Err(enospc());
        }
        let inode = self.inode(&mut s)?;
        if current < len {
            inode.data.resize(len as usize, 0);
        }
        Ok(Some(Box::new(SimMap {
            disk: self.disk.clone(),
            ino: self.ino,
            generation: self.generation,
            len: len as usize,
        })))
    }
}

/// A [`SimFile`] mapped with [`WriteFile::map`].
#[derive(Debug)]
struct SimMap {
    disk: SimDisk,
    ino: u64,
    generation: u64,
    len: usize,
}

impl WriteMap for SimMap {
    fn len(&self) -> usize {
        self.len
    }

    /// A store is a mutating operation, which a scheduled crash may interrupt: then it is
    /// lost, as the stores of a machine whose power failed are. After a crash stores do
    /// nothing (the process that made them is gone).
    fn store(&mut self, mut offset: usize, parts: &[&[u8]]) {
        let mut s = self.disk.guard();
        if s.step(true).is_err() || s.generation != self.generation {
            return;
        }
        let Some(inode) = s.inodes.get_mut(&self.ino) else {
            return;
        };
        for part in parts {
            let end = offset + part.len();
            assert!(
                end <= self.len && end <= inode.data.len(),
                "a store past the end of a mapped file (SIGBUS on a real file system)"
            );
            inode.data[offset..end].copy_from_slice(part);
            offset = end;
        }
    }
}

impl ReadFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut s = self.state(false)?;
        let inode = s
            .inodes
            .get(&self.ino)
            .ok_or_else(|| not_found(&self.path))?;
        let off = offset.min(inode.data.len() as u64) as usize;
        let n = buf.len().min(inode.data.len() - off);
        buf[..n].copy_from_slice(&inode.data[off..off + n]);
        let rate = s.faults.corrupt_read_per_mille;
        if n > 0 && s.chance(rate) {
            let bit = s.below(n as u64 * 8) as usize;
            buf[bit / 8] ^= 1 << (bit % 8);
        }
        Ok(n)
    }
}

/// Opens files through a wrapper: what [`WrapFiles`] calls on every file a storage opens.
type Wrap<F> = Box<dyn Fn(&Path, Box<F>) -> Box<F> + Send + Sync>;

/// A storage that passes every call to another one (usually a [`SimDisk`]) and hands the
/// files it opens to wrappers of the test's choosing: a test that changes how files behave
/// (a gate that holds writes, a file system that cannot reserve space, a count of reads)
/// writes only the wrapper, and every other operation reaches the inner storage unchanged.
/// Wrap a write file with [`ForwardWrite`] to forward all but the calls it changes.
///
/// ```
/// use std::io;
/// use std::path::Path;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use fairq_journal::sim::{ForwardWrite, SimDisk, WrapFiles};
/// use fairq_journal::storage::{Storage, WriteFile};
///
/// /// Counts the syncs of the files it wraps.
/// #[derive(Debug)]
/// struct CountSyncs(Box<dyn WriteFile>, Arc<AtomicUsize>);
///
/// impl ForwardWrite for CountSyncs {
///     fn inner(&self) -> &dyn WriteFile {
///         self.0.as_ref()
///     }
///     fn sync_data(&self) -> io::Result<()> {
///         self.1.fetch_add(1, Ordering::SeqCst);
///         self.0.sync_data()
///     }
/// }
///
/// let syncs = Arc::new(AtomicUsize::new(0));
/// let counted = syncs.clone();
/// let disk = WrapFiles::new(SimDisk::new(1))
///     .write_files(move |_path, f| Box::new(CountSyncs(f, counted.clone())));
/// disk.create_dir_all(Path::new("/q"), 0o700).unwrap();
/// let f = disk.create(Path::new("/q/a"), 0o600).unwrap();
/// f.write(b"x").unwrap();
/// f.sync_data().unwrap();
/// assert_eq!(syncs.load(Ordering::SeqCst), 1);
/// assert_eq!(disk.read_all(Path::new("/q/a")).unwrap(), b"x");
/// ```
pub struct WrapFiles {
    inner: Arc<dyn Storage>,
    write: Wrap<dyn WriteFile>,
    read: Wrap<dyn ReadFile>,
}

impl WrapFiles {
    /// Forwards everything to `inner`, files unwrapped until told otherwise.
    pub fn new(inner: impl Storage + 'static) -> Self {
        WrapFiles {
            inner: Arc::new(inner),
            write: Box::new(|_, f| f),
            read: Box::new(|_, f| f),
        }
    }

    /// Hands every file opened for appending (created or opened again) to `wrap`, with its
    /// path.
    pub fn write_files(
        mut self,
        wrap: impl Fn(&Path, Box<dyn WriteFile>) -> Box<dyn WriteFile> + Send + Sync + 'static,
    ) -> Self {
        self.write = Box::new(wrap);
        self
    }

    /// Hands every file opened for reading to `wrap`, with its path.
    pub fn read_files(
        mut self,
        wrap: impl Fn(&Path, Box<dyn ReadFile>) -> Box<dyn ReadFile> + Send + Sync + 'static,
    ) -> Self {
        self.read = Box::new(wrap);
        self
    }
}

impl std::fmt::Debug for WrapFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WrapFiles")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl Storage for WrapFiles {
    fn create_dir_all(&self, dir: &Path, mode: u32) -> io::Result<()> {
        self.inner.create_dir_all(dir, mode)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        self.inner.list_dir(dir)
    }
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read_all(path)
    }
    fn create(&self, path: &Path, mode: u32) -> io::Result<Box<dyn WriteFile>> {
        Ok((self.write)(path, self.inner.create(path, mode)?))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        Ok((self.write)(path, self.inner.open_append(path)?))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ReadFile>> {
        Ok((self.read)(path, self.inner.open_read(path)?))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn lock(&self, path: &Path, mode: u32) -> io::Result<Box<dyn LockGuard>> {
        self.inner.lock(path, mode)
    }
    fn lock_shared(&self, path: &Path) -> io::Result<Option<Box<dyn LockGuard>>> {
        self.inner.lock_shared(path)
    }
    fn helper_threads(&self) -> bool {
        self.inner.helper_threads()
    }
}

/// A write file that forwards every call to [`ForwardWrite::inner`] unless it overrides it:
/// a wrapper for [`WrapFiles`] names only the calls it changes, and a call added to
/// [`WriteFile`] later (or one a wrapper forgot, such as `write_vectored` or `reserve`)
/// still reaches the inner file instead of the trait's default. Every type implementing it
/// is a [`WriteFile`]; see [`WrapFiles`] for an example.
pub trait ForwardWrite: Send + Sync + std::fmt::Debug {
    /// The file the calls go to.
    fn inner(&self) -> &dyn WriteFile;
    /// [`WriteFile::write`].
    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        self.inner().write(buf)
    }
    /// [`WriteFile::write_vectored`].
    fn write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.inner().write_vectored(bufs)
    }
    /// [`WriteFile::sync_data`].
    fn sync_data(&self) -> io::Result<()> {
        self.inner().sync_data()
    }
    /// [`WriteFile::set_len`].
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner().set_len(len)
    }
    /// [`WriteFile::reserve`].
    fn reserve(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner().reserve(offset, len)
    }
    /// [`WriteFile::map`].
    fn map(&self, len: u64) -> io::Result<Option<Box<dyn WriteMap>>> {
        self.inner().map(len)
    }
}

impl<T: ForwardWrite> WriteFile for T {
    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        ForwardWrite::write(self, buf)
    }
    fn write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        ForwardWrite::write_vectored(self, bufs)
    }
    fn sync_data(&self) -> io::Result<()> {
        ForwardWrite::sync_data(self)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        ForwardWrite::set_len(self, len)
    }
    fn reserve(&self, offset: u64, len: u64) -> io::Result<()> {
        ForwardWrite::reserve(self, offset, len)
    }
    fn map(&self, len: u64) -> io::Result<Option<Box<dyn WriteMap>>> {
        ForwardWrite::map(self, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsynced_directory_entries_and_renames_vanish() {
        let d = SimDisk::new(1);
        let dir = Path::new("/d");
        d.create_dir_all(dir, 0o700).unwrap();
        let f = d.create(Path::new("/d/a"), 0o600).unwrap();
        f.write(b"x").unwrap();
        f.sync_data().unwrap();
        d.sync_dir(dir).unwrap();
        d.rename(Path::new("/d/a"), Path::new("/d/b")).unwrap();
        d.crash();
        let names: Vec<String> = d
            .list_dir(dir)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, vec!["a".to_string()]);
        assert_eq!(d.read_all(Path::new("/d/a")).unwrap(), b"x");
        assert!(f.write(b"y").is_err(), "stale handle must fail");
    }

    #[test]
    fn crash_keeps_a_prefix_of_unsynced_appends() {
        for seed in 0..50 {
            let d = SimDisk::new(seed);
            let f = d.create(Path::new("/f"), 0o600).unwrap();
            f.write(b"0123").unwrap();
            f.sync_data().unwrap();
            d.sync_dir(Path::new("/")).unwrap();
            f.write(b"456789").unwrap();
            d.crash();
            let got = d.read_all(Path::new("/f")).unwrap();
            assert!(got.starts_with(b"0123"), "seed {seed}: {got:?}");
            let tail = &got[4..];
            let matching = tail
                .iter()
                .zip(b"456789")
                .take_while(|(a, b)| a == b)
                .count();
            assert!(
                tail.len() - matching <= 16,
                "seed {seed}: too much garbage {got:?}"
            );
        }
    }

    #[test]
    fn enospc_and_short_writes() {
        let d = SimDisk::new(5);
        d.set_faults(SimFaults {
            short_writes: true,
            capacity: Some(10),
            ..SimFaults::default()
        });
        let f = d.create(Path::new("/f"), 0o600).unwrap();
        let mut written = 0;
        let err = loop {
            match f.write(&[1u8; 4]) {
                Ok(n) => {
                    assert!((1..=4).contains(&n));
                    written += n;
                }
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert_eq!(written, 10);
    }
}
