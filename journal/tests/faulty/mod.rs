//! A simulated disk whose directory operations fail when a test says so: a removal, a
//! rename, a directory sync, a creation or a whole-file read can be refused (`EIO`,
//! nothing done), and every
//! removal can be followed by a sync of its directory, as on a file system that commits
//! directory changes in order (so a power loss at any point keeps exactly the removals
//! made before it).
//!
//! Shared by the test files that need it (`mod faulty;`); each uses part of it.
#![allow(dead_code)]

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use fairq_journal::sim::SimDisk;
use fairq_journal::storage::{DirEntry, LockGuard, ReadFile, Storage, WriteFile};

/// A directory operation about to run.
#[derive(Debug, Clone, Copy)]
pub enum Op<'a> {
    Create(&'a Path),
    Rename {
        from: &'a Path,
        to: &'a Path,
    },
    Remove(&'a Path),
    SyncDir(&'a Path),
    /// A whole-file read (`Storage::read_all`: checkpoints, the registry, segments at open).
    Read(&'a Path),
}

type Refuse = Box<dyn FnMut(&Op<'_>) -> bool + Send>;

/// See the module documentation. Cheap to clone: clones share the disk and the settings.
#[derive(Clone)]
pub struct Faulty {
    pub disk: SimDisk,
    refuse: Arc<Mutex<Refuse>>,
    sync_after_remove: Arc<AtomicBool>,
}

impl std::fmt::Debug for Faulty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faulty").field("disk", &self.disk).finish()
    }
}

impl Faulty {
    pub fn new(disk: &SimDisk) -> Self {
        Faulty {
            disk: disk.clone(),
            refuse: Arc::new(Mutex::new(Box::new(|_| false))),
            sync_after_remove: Arc::new(AtomicBool::new(false)),
        }
    }

    /// From now on, an operation for which `refuse` answers true fails with `EIO` and
    /// changes nothing.
    pub fn refuse(&self, refuse: impl FnMut(&Op<'_>) -> bool + Send + 'static) {
        *self.refuse.lock().unwrap() = Box::new(refuse);
    }

    /// Refuses nothing from now on.
    pub fn refuse_nothing(&self) {
        self.refuse(|_| false);
    }

    /// Whether each removal is followed by a sync of its directory.
    pub fn sync_after_remove(&self, on: bool) {
        self.sync_after_remove.store(on, Ordering::SeqCst);
    }

    fn check(&self, op: Op<'_>) -> io::Result<()> {
        if (self.refuse.lock().unwrap())(&op) {
            return Err(io::Error::other(format!("refused by the test: {op:?}")));
        }
        Ok(())
    }
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

impl Storage for Faulty {
    fn create_dir_all(&self, dir: &Path, mode: u32) -> io::Result<()> {
        self.disk.create_dir_all(dir, mode)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        self.disk.list_dir(dir)
    }
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.check(Op::Read(path))?;
        self.disk.read_all(path)
    }
    fn create(&self, path: &Path, mode: u32) -> io::Result<Box<dyn WriteFile>> {
        self.check(Op::Create(path))?;
        self.disk.create(path, mode)
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        self.disk.open_append(path)
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ReadFile>> {
        self.disk.open_read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.check(Op::Rename { from, to })?;
        self.disk.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.check(Op::Remove(path))?;
        self.disk.remove_file(path)?;
        if self.sync_after_remove.load(Ordering::SeqCst) {
            self.disk.sync_dir(parent(path))?;
        }
        Ok(())
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.check(Op::SyncDir(dir))?;
        self.disk.sync_dir(dir)
    }
    fn lock(&self, path: &Path, mode: u32) -> io::Result<Box<dyn LockGuard>> {
        self.disk.lock(path, mode)
    }
    fn lock_shared(&self, path: &Path) -> io::Result<Option<Box<dyn LockGuard>>> {
        self.disk.lock_shared(path)
    }
    fn helper_threads(&self) -> bool {
        self.disk.helper_threads()
    }
}
