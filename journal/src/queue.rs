//! The journaled queue: the writer, group commit, segments and the reader set.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::checkpoint::{encode_checkpoint, encode_registry};
use crate::config::{to_ms, FullPolicy, JournalConfig, PutOptions, ReaderConfig, SyncPolicy};
use crate::files::{checkpoint_path, registry_path, segment_name};
use crate::format::{encode_record, encode_segment_header, Record, RecordKind, SegmentHeader};
use crate::reader::{
    enforce_limits, new_shared, write_checkpoint, Reader, ReaderShared, ReaderState, SegEnd,
};
use crate::storage::{replace_atomically, write_all, LockGuard, Storage, WriteFile};
use crate::{name::validate_name, ItemId, JournalError};

/// Locks a mutex, recovering the data if another thread panicked while holding it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn read_lock<T>(m: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}

fn write_lock<T>(m: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|p| p.into_inner())
}

/// A byte position in the journal: segment id and offset within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(crate) struct Pos {
    pub(crate) seg: u64,
    pub(crate) off: u64,
}

pub(crate) struct Writer {
    pub(crate) seg_id: u64,
    pub(crate) file: Arc<dyn WriteFile>,
    pub(crate) offset: u64,
    pub(crate) next_id: u64,
    pub(crate) buf: Vec<u8>,
    /// Ids of sealed segments not synced yet (rotation under `Never` and `Periodic` does not
    /// wait). Kept as ids, not open files, so a long run holds no file descriptors for them.
    pub(crate) unsynced_sealed: Vec<u64>,
}

impl Writer {
    fn end(&self) -> Pos {
        Pos {
            seg: self.seg_id,
            off: self.offset,
        }
    }
}

pub(crate) struct SyncState {
    /// Everything before this position is durable.
    pub(crate) synced: Pos,
    pub(crate) syncing: bool,
    /// Threads blocked on `sync_cv`.
    pub(crate) waiting: usize,
    pub(crate) poisoned: Option<String>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Sealed {
    pub(crate) len: u64,
    /// One past the last item id in the segment.
    pub(crate) end_id: u64,
}

pub(crate) struct SegIndex {
    /// Segment id → `Some` once sealed, `None` for the writer's segment.
    pub(crate) segs: BTreeMap<u64, Option<Sealed>>,
    /// Readers may read everything before this position.
    pub(crate) visible: Pos,
}

type StopSignal = Arc<(Mutex<bool>, Condvar)>;

pub(crate) struct Inner {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    pub(crate) config: JournalConfig,
    pub(crate) writer: Mutex<Writer>,
    pub(crate) sync: Mutex<SyncState>,
    pub(crate) sync_cv: Condvar,
    pub(crate) index: Mutex<SegIndex>,
    pub(crate) readers: RwLock<Vec<Arc<ReaderShared>>>,
    pub(crate) registry: Mutex<()>,
    pub(crate) signal: Mutex<u64>,
    pub(crate) signal_cv: Condvar,
    /// Threads inside `Reader::get_timeout`; puts skip the wake-up when there are none.
    pub(crate) waiters: AtomicUsize,
    /// Set together with `SyncState::poisoned`, for a lock-free check on every put.
    pub(crate) poisoned: AtomicBool,
    pub(crate) closed: AtomicBool,
    pub(crate) stop: StopSignal,
    pub(crate) flusher: Mutex<Option<JoinHandle<()>>>,
    /// Held while the queue is open; keeps a second handle from opening it.
    pub(crate) dir_lock: Mutex<Option<Box<dyn LockGuard>>>,
}

impl Inner {
    pub(crate) fn storage(&self) -> &dyn Storage {
        self.config.storage.as_ref()
    }

    pub(crate) fn segment_path(&self, seg: u64) -> PathBuf {
        self.dir.join(segment_name(&self.name, seg))
    }

    pub(crate) fn corrupt(&self, pos: Pos, reason: &str) -> JournalError {
        JournalError::Corrupt {
            path: self.segment_path(pos.seg),
            offset: pos.off,
            reason: reason.to_string(),
        }
    }

    pub(crate) fn check_open(&self) -> Result<(), JournalError> {
        if self.closed.load(Ordering::Acquire) {
            Err(JournalError::Closed)
        } else {
            Ok(())
        }
    }

    fn check_poisoned(&self) -> Result<(), JournalError> {
        if !self.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        match &lock(&self.sync).poisoned {
            Some(reason) => Err(JournalError::Poisoned {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    fn poison(&self, reason: String) -> JournalError {
        tracing::error!(queue = %self.name, %reason, "journal poisoned");
        let mut s = lock(&self.sync);
        if s.poisoned.is_none() {
            s.poisoned = Some(reason.clone());
        }
        self.poisoned.store(true, Ordering::Release);
        self.sync_cv.notify_all();
        JournalError::Poisoned { reason }
    }

    pub(crate) fn visible(&self) -> Pos {
        lock(&self.index).visible
    }

    pub(crate) fn segment_end(&self, seg: u64) -> SegEnd {
        match lock(&self.index).segs.get(&seg) {
            Some(None) => SegEnd::Open,
            Some(Some(s)) => SegEnd::Sealed(s.len),
            None => SegEnd::Gone,
        }
    }

    pub(crate) fn next_segment_after(&self, seg: u64) -> Option<u64> {
        lock(&self.index)
            .segs
            .range(seg.saturating_add(1)..)
            .next()
            .map(|(k, _)| *k)
    }

    fn publish(&self, upto: Pos) {
        {
            let mut idx = lock(&self.index);
            if upto > idx.visible {
                idx.visible = upto;
            }
        }
        self.notify();
    }

    fn mark_synced(&self, upto: Pos) {
        let mut s = lock(&self.sync);
        if upto > s.synced {
            s.synced = upto;
        }
        if s.waiting > 0 {
            self.sync_cv.notify_all();
        }
    }

    /// Wakes the threads waiting in `get_timeout`, if there are any.
    ///
    /// A waiter registers in `waiters` before it looks for an item, and an item is published
    /// (under the index lock) before this check, so a waiter that found nothing is counted.
    pub(crate) fn notify(&self) {
        if self.waiters.load(Ordering::SeqCst) == 0 {
            return;
        }
        self.force_notify();
    }

    pub(crate) fn force_notify(&self) {
        let mut g = lock(&self.signal);
        *g = g.wrapping_add(1);
        self.signal_cv.notify_all();
    }

    pub(crate) fn signal_generation(&self) -> u64 {
        *lock(&self.signal)
    }

    pub(crate) fn wait_signal(&self, seen: u64, timeout: Duration) {
        let g = lock(&self.signal);
        if *g != seen {
            return;
        }
        // Spurious wake-ups and timeouts both just send the caller round its loop again.
        drop(self.signal_cv.wait_timeout_while(g, timeout, |g| {
            *g == seen && !self.closed.load(Ordering::Acquire)
        }));
    }

    fn put(&self, data: &[u8], opts: PutOptions) -> Result<ItemId, JournalError> {
        self.check_open()?;
        if data.len() > self.config.max_item_size {
            return Err(JournalError::ItemTooLarge {
                size: data.len(),
                max: self.config.max_item_size,
            });
        }
        let added_at_ms = to_ms(self.config.clock.now());
        let len = data.len() as u64;
        let mut w = lock(&self.writer);
        self.check_open()?;
        let readers = read_lock(&self.readers);
        self.check_poisoned()?;
        for r in readers.iter() {
            let st = lock(&r.state);
            if st.config.full_policy == FullPolicy::Refuse && st.would_overflow(len) {
                return Err(JournalError::Full { reader: r.name() });
            }
        }
        let start = w.end();
        let id = w.next_id;
        let mut buf = std::mem::take(&mut w.buf);
        buf.clear();
        encode_record(
            &Record {
                kind: RecordKind::Item,
                id,
                added_at_ms,
                expires_at_ms: opts.expires_at.map(to_ms),
                payload: data,
            },
            &mut buf,
        );
        let written = write_all(w.file.as_ref(), &buf);
        let rec_len = buf.len() as u64;
        w.buf = buf;
        if let Err(e) = written {
            let path = self.segment_path(w.seg_id);
            let undone = w.file.set_len(w.offset);
            if e.kind() == std::io::ErrorKind::StorageFull && undone.is_ok() {
                return Err(JournalError::io(path, e));
            }
            return Err(self.poison(format!("write to {} failed: {e}", path.display())));
        }
        w.offset += rec_len;
        w.next_id = id + 1;
        let end = w.end();
        for r in readers.iter() {
            let mut st = lock(&r.state);
            st.items += 1;
            st.bytes += len;
            if st.config.full_policy == FullPolicy::DropOldest {
                if let Err(e) = enforce_limits(self, &mut st, start) {
                    tracing::warn!(queue = %self.name, reader = %r.name(), error = %e, "could not drop oldest items");
                }
            }
        }
        drop(readers);
        let mut durable = false;
        match self.config.sync {
            SyncPolicy::Always => {
                if let Err(e) = w.file.sync_data() {
                    return Err(self.poison(format!("fdatasync failed: {e}")));
                }
                self.mark_synced(end);
                self.publish(end);
                durable = true;
            }
            SyncPolicy::Never | SyncPolicy::Periodic(_) => self.publish(end),
            SyncPolicy::Group => {}
        }
        if w.offset >= self.config.segment_size {
            if let Err(e) = self.rotate(&mut w) {
                let err = self.poison(format!("segment rotation failed: {e}"));
                if !durable {
                    return Err(err);
                }
            }
        }
        drop(w);
        if self.config.sync == SyncPolicy::Group {
            self.wait_durable(end)?;
        }
        Ok(ItemId(id))
    }

    /// Seals the writer's segment (after syncing it) and starts the next one.
    fn rotate(&self, w: &mut Writer) -> Result<(), JournalError> {
        let old = w.seg_id;
        let old_path = self.segment_path(old);
        // Under Always and Group the sealed segment must be complete on disk before the next
        // one exists. Under Never and Periodic it is synced later, and the next segment's
        // header says so, which lets recovery treat a torn end of it as a torn tail.
        let sync_now = self.config.sync.is_durable_on_put();
        if sync_now {
            w.file
                .sync_data()
                .map_err(|e| JournalError::io(&old_path, e))?;
        }
        let new = old + 1;
        let path = self.segment_path(new);
        let file = create_segment(self.storage(), &self.dir, &path, new, !sync_now)?;
        if !sync_now {
            w.unsynced_sealed.push(old);
        }
        {
            let mut idx = lock(&self.index);
            idx.segs.insert(
                old,
                Some(Sealed {
                    len: w.offset,
                    end_id: w.next_id,
                }),
            );
            idx.segs.insert(new, None);
        }
        w.seg_id = new;
        w.file = file;
        w.offset = crate::format::SEGMENT_HEADER_LEN as u64;
        let start = w.end();
        if sync_now {
            self.mark_synced(start);
        }
        self.publish(start);
        Ok(())
    }

    /// Waits until everything before `target` is durable; the first waiter syncs for all.
    fn wait_durable(&self, target: Pos) -> Result<(), JournalError> {
        let mut s = lock(&self.sync);
        loop {
            if let Some(reason) = &s.poisoned {
                return Err(JournalError::Poisoned {
                    reason: reason.clone(),
                });
            }
            if s.synced >= target {
                return Ok(());
            }
            if s.syncing {
                s.waiting += 1;
                s = self.sync_cv.wait(s).unwrap_or_else(|p| p.into_inner());
                s.waiting -= 1;
                continue;
            }
            s.syncing = true;
            drop(s);
            let result = self.sync_writer();
            s = lock(&self.sync);
            s.syncing = false;
            if s.waiting > 0 {
                self.sync_cv.notify_all();
            }
            if let Err(e) = result {
                drop(s);
                return Err(e);
            }
        }
    }

    /// Syncs the writer's current segment and publishes what it covers.
    fn sync_writer(&self) -> Result<(), JournalError> {
        let (file, upto, sealed) = {
            let mut w = lock(&self.writer);
            (
                w.file.clone(),
                w.end(),
                std::mem::take(&mut w.unsynced_sealed),
            )
        };
        // Syncing through a new descriptor makes the file's data durable all the same.
        let result = sealed
            .iter()
            .try_for_each(
                |&seg| match self.storage().open_append(&self.segment_path(seg)) {
                    Ok(f) => f.sync_data(),
                    // Already retired: nothing left to make durable.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(e),
                },
            )
            .and_then(|()| file.sync_data());
        match result {
            Ok(()) => {
                self.mark_synced(upto);
                self.publish(upto);
                Ok(())
            }
            Err(e) => Err(self.poison(format!("fdatasync failed: {e}"))),
        }
    }

    pub(crate) fn collect_segments(&self) -> Result<(), JournalError> {
        let min_head = read_lock(&self.readers)
            .iter()
            .map(|r| r.durable_head.load(Ordering::SeqCst))
            .min()
            .unwrap_or(0);
        let victims: Vec<u64> = {
            let mut idx = lock(&self.index);
            let ids: Vec<u64> = idx
                .segs
                .iter()
                .filter(|(_, s)| s.is_some_and(|s| s.end_id <= min_head))
                .map(|(k, _)| *k)
                .collect();
            for id in &ids {
                idx.segs.remove(id);
            }
            ids
        };
        if victims.is_empty() {
            return Ok(());
        }
        let storage = self.storage();
        for seg in victims {
            let path = self.segment_path(seg);
            let result = match &self.config.archive_dir {
                Some(archive) => storage
                    .create_dir_all(archive)
                    .and_then(|()| {
                        storage.rename(&path, &archive.join(segment_name(&self.name, seg)))
                    })
                    .and_then(|()| storage.sync_dir(archive)),
                None => storage.remove_file(&path),
            };
            result.map_err(|e| JournalError::io(&path, e))?;
            tracing::debug!(queue = %self.name, segment = seg, "segment retired");
        }
        storage
            .sync_dir(&self.dir)
            .map_err(|e| JournalError::io(&self.dir, e))
    }

    fn write_registry(&self, names: &[String]) -> Result<(), JournalError> {
        let path = registry_path(&self.dir, &self.name);
        replace_atomically(self.storage(), &path, &encode_registry(names))
            .map_err(|e| JournalError::io(&path, e))
    }

    fn reader(
        self: &Arc<Self>,
        name: &str,
        config: Option<ReaderConfig>,
    ) -> Result<Reader, JournalError> {
        self.check_open()?;
        if !name.is_empty() {
            validate_name(name)?;
        }
        let _registry = lock(&self.registry);
        let (existing, only_default, mut names) = {
            let readers = read_lock(&self.readers);
            let names: Vec<String> = readers.iter().map(|r| r.name()).collect();
            let existing = readers.iter().find(|r| r.name() == name).cloned();
            let only_default = names.len() == 1 && names[0].is_empty();
            (existing, only_default.then(|| readers[0].clone()), names)
        };
        let handle = |shared: Arc<ReaderShared>| {
            if let Some(c) = config {
                lock(&shared.state).config = c;
            }
            Reader {
                inner: self.clone(),
                shared,
            }
        };
        if let Some(shared) = existing {
            return Ok(handle(shared));
        }
        if name.is_empty() {
            return Err(JournalError::NoDefaultReader);
        }
        if let Some(default) = only_default {
            // The first named reader takes over the default reader's position.
            let old_path = {
                let mut cp = lock(&default.cp);
                let data = lock(&default.state).checkpoint_data();
                let new_path = checkpoint_path(&self.dir, &self.name, name);
                replace_atomically(self.storage(), &new_path, &encode_checkpoint(&data))
                    .map_err(|e| JournalError::io(&new_path, e))?;
                self.write_registry(&[name.to_string()])?;
                *lock(&default.name) = name.to_string();
                default.durable_head.fetch_max(data.head, Ordering::SeqCst);
                cp.last_at = Some(self.config.clock.now());
                std::mem::replace(&mut cp.path, new_path)
            };
            if let Err(e) = self.storage().remove_file(&old_path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %old_path.display(), error = %e, "could not remove the default reader's checkpoint");
                }
            }
            return Ok(handle(default));
        }
        // A further named reader starts at the tail.
        let cfg = config.unwrap_or(self.config.reader);
        let shared = {
            let w = lock(&self.writer);
            let state = ReaderState::new(w.end(), w.next_id, Default::default(), cfg);
            let shared = new_shared(
                name.to_string(),
                checkpoint_path(&self.dir, &self.name, name),
                state,
                w.next_id,
            );
            write_lock(&self.readers).push(shared.clone());
            shared
        };
        names.push(name.to_string());
        if let Err(e) = self.write_registry(&names) {
            write_lock(&self.readers).retain(|r| !Arc::ptr_eq(r, &shared));
            return Err(e);
        }
        write_checkpoint(self, &shared, true)?;
        Ok(Reader {
            inner: self.clone(),
            shared,
        })
    }

    fn close(&self) -> Result<(), JournalError> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.stop_flusher();
        self.force_notify();
        // Wait for a put that is writing right now; later ones see `closed`.
        drop(lock(&self.writer));
        let mut first_err = None;
        if let Err(e) = self.check_poisoned().and_then(|()| self.sync_writer()) {
            first_err.get_or_insert(e);
        }
        let readers = read_lock(&self.readers).clone();
        for r in &readers {
            if let Err(e) = write_checkpoint(self, r, true) {
                first_err.get_or_insert(e);
            }
        }
        if let Err(e) = self.collect_segments() {
            first_err.get_or_insert(e);
        }
        drop(lock(&self.dir_lock).take());
        match first_err {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    fn stop_flusher(&self) {
        {
            let (m, cv) = &*self.stop;
            *lock(m) = true;
            cv.notify_all();
        }
        let handle = lock(&self.flusher).take();
        if let Some(h) = handle {
            if h.thread().id() != std::thread::current().id() && h.join().is_err() {
                tracing::error!(queue = %self.name, "periodic sync thread panicked");
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop_flusher();
    }
}

/// Creates a segment file with its header and makes it and its directory entry durable.
pub(crate) fn create_segment(
    storage: &dyn Storage,
    dir: &Path,
    path: &Path,
    seg_id: u64,
    prev_unsynced: bool,
) -> Result<Arc<dyn WriteFile>, JournalError> {
    let io = |e| JournalError::io(path, e);
    let file: Arc<dyn WriteFile> = Arc::from(storage.create(path).map_err(io)?);
    let mut header = Vec::new();
    encode_segment_header(
        &SegmentHeader {
            segment_id: seg_id,
            prev_unsynced,
        },
        &mut header,
    );
    write_all(file.as_ref(), &header).map_err(io)?;
    file.sync_data().map_err(io)?;
    storage
        .sync_dir(dir)
        .map_err(|e| JournalError::io(dir, e))?;
    Ok(file)
}

pub(crate) fn spawn_flusher(inner: &Arc<Inner>, every: Duration) -> Result<(), JournalError> {
    let weak = Arc::downgrade(inner);
    let stop = inner.stop.clone();
    let handle = std::thread::Builder::new()
        .name(format!("fairq-journal-sync-{}", inner.name))
        .spawn(move || loop {
            {
                let (m, cv) = &*stop;
                let g = lock(m);
                let (g, _) = cv
                    .wait_timeout_while(g, every, |stopped| !*stopped)
                    .unwrap_or_else(|p| p.into_inner());
                if *g {
                    return;
                }
            }
            let Some(inner) = weak.upgrade() else { return };
            if inner.check_poisoned().is_ok() {
                if let Err(e) = inner.sync_writer() {
                    tracing::error!(queue = %inner.name, error = %e, "periodic sync failed");
                }
            }
        })
        .map_err(|e| JournalError::io(&inner.dir, e))?;
    *lock(&inner.flusher) = Some(handle);
    Ok(())
}

/// A durable queue of byte items with any number of independent readers.
///
/// Items are appended to checksummed segment files in one directory. Every reader sees every
/// item (fan-out) and keeps its own crash-atomic checkpoint. See the crate documentation for
/// the guarantees and `FORMAT.md` for the file format.
///
/// The handle is cheap to clone and can be shared between threads.
///
/// ```
/// use fairq_journal::{JournalConfig, JournaledQueue, SyncPolicy};
/// let dir = tempfile::tempdir().unwrap();
/// let cfg = JournalConfig { sync: SyncPolicy::Always, ..Default::default() };
/// let q = JournaledQueue::open(dir.path(), "orders", cfg.clone()).unwrap();
/// let id = q.put(b"order #1").unwrap();
/// q.close().unwrap();
///
/// let q = JournaledQueue::open(dir.path(), "orders", cfg).unwrap();
/// let r = q.reader("").unwrap();
/// let item = r.get().unwrap().unwrap();
/// assert_eq!((item.id, item.data.as_slice()), (id, &b"order #1"[..]));
/// ```
#[derive(Clone)]
pub struct JournaledQueue {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for JournaledQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JournaledQueue")
            .field("dir", &self.inner.dir)
            .field("name", &self.inner.name)
            .finish()
    }
}

impl JournaledQueue {
    /// Opens (or creates) the queue `name` in `dir`, recovering from any crash: a torn tail
    /// of the last segment is truncated, damage anywhere else is reported as
    /// [`JournalError::Corrupt`], and every reader resumes from its checkpoint (or from the
    /// oldest item if its checkpoint is missing or unreadable).
    ///
    /// A queue can be open only once at a time: while it is open (in this or another process),
    /// opening it again fails with [`JournalError::Locked`].
    ///
    /// ```
    /// use fairq_journal::{JournalConfig, JournalError, JournaledQueue};
    /// let dir = tempfile::tempdir().unwrap();
    /// assert!(JournaledQueue::open(dir.path(), "ok_name", JournalConfig::default()).is_ok());
    /// assert!(matches!(
    ///     JournaledQueue::open(dir.path(), "bad/name", JournalConfig::default()),
    ///     Err(JournalError::InvalidName { .. })
    /// ));
    /// ```
    pub fn open(
        dir: impl AsRef<Path>,
        name: &str,
        config: JournalConfig,
    ) -> Result<JournaledQueue, JournalError> {
        let inner = crate::recovery::open(dir.as_ref(), name, config)?;
        Ok(JournaledQueue { inner })
    }

    /// Appends an item and returns its id once it is as durable as the sync policy promises.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let a = q.put(b"a").unwrap();
    /// let b = q.put(b"b").unwrap();
    /// assert!(b > a);
    /// ```
    pub fn put(&self, data: &[u8]) -> Result<ItemId, JournalError> {
        self.inner.put(data, PutOptions::default())
    }

    /// Appends an item with options (such as an expiry time).
    ///
    /// ```
    /// use fairq_journal::PutOptions;
    /// use std::time::{Duration, SystemTime};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let at = SystemTime::now() + Duration::from_secs(3600);
    /// q.put_with(b"soon stale", PutOptions { expires_at: Some(at) }).unwrap();
    /// let item = q.reader("").unwrap().get().unwrap().unwrap();
    /// assert!(item.expires_at.is_some());
    /// ```
    pub fn put_with(&self, data: &[u8], options: PutOptions) -> Result<ItemId, JournalError> {
        self.inner.put(data, options)
    }

    /// A handle to the reader `name`, creating it if needed.
    ///
    /// The empty name is the default reader, which exists until the first named reader is
    /// created: that reader takes over the default reader's position (and handles to the
    /// default reader keep working as that reader). Later named readers start at the tail and
    /// see only items put after their creation.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// q.put(b"early").unwrap();
    /// let a = q.reader("a").unwrap(); // takes over the default reader: sees "early"
    /// let b = q.reader("b").unwrap(); // starts at the tail
    /// q.put(b"late").unwrap();
    /// assert_eq!(a.len(), 2);
    /// assert_eq!(b.len(), 1);
    /// ```
    pub fn reader(&self, name: &str) -> Result<Reader, JournalError> {
        self.inner.reader(name, None)
    }

    /// Like [`JournaledQueue::reader`], and sets the reader's limits.
    ///
    /// ```
    /// use fairq_journal::{FullPolicy, ReaderConfig};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let r = q.reader_with("r", ReaderConfig { max_items: Some(1), ..Default::default() }).unwrap();
    /// q.put(b"1").unwrap();
    /// assert!(q.put(b"2").is_err());
    /// ```
    pub fn reader_with(&self, name: &str, config: ReaderConfig) -> Result<Reader, JournalError> {
        self.inner.reader(name, Some(config))
    }

    /// Names of the queue's readers (the empty name is the default reader).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// assert_eq!(q.reader_names(), vec![String::new()]);
    /// ```
    pub fn reader_names(&self) -> Vec<String> {
        read_lock(&self.inner.readers)
            .iter()
            .map(|r| r.name())
            .collect()
    }

    /// Writes every reader's checkpoint and retires the segments no reader needs.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// q.checkpoint().unwrap();
    /// ```
    pub fn checkpoint(&self) -> Result<(), JournalError> {
        self.inner.check_open()?;
        let readers = read_lock(&self.inner.readers).clone();
        for r in &readers {
            write_checkpoint(&self.inner, r, true)?;
        }
        self.inner.collect_segments()
    }

    /// Seals the current segment and starts a new one (if the current one holds any item), so
    /// that it can be deleted or archived once every reader has passed it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// q.put(b"x").unwrap();
    /// q.rotate().unwrap();
    /// assert_eq!(q.reader("").unwrap().get().unwrap().unwrap().data, b"x");
    /// ```
    pub fn rotate(&self) -> Result<(), JournalError> {
        self.inner.check_open()?;
        let mut w = lock(&self.inner.writer);
        self.inner.check_open()?;
        self.inner.check_poisoned()?;
        if w.offset > crate::format::SEGMENT_HEADER_LEN as u64 {
            if let Err(e) = self.inner.rotate(&mut w) {
                return Err(self.inner.poison(format!("segment rotation failed: {e}")));
            }
        }
        Ok(())
    }

    /// Makes every put so far durable, whatever the sync policy.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// q.sync().unwrap();
    /// ```
    pub fn sync(&self) -> Result<(), JournalError> {
        self.inner.check_open()?;
        self.inner.check_poisoned()?;
        self.inner.sync_writer()
    }

    /// Syncs the journal, writes every reader's checkpoint and closes the queue; later calls
    /// on it or its readers fail with [`JournalError::Closed`]. Dropping the queue without
    /// closing it is like a crash of the process: nothing acknowledged is lost, but readers
    /// resume from their last checkpoint and may see items again.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// q.close().unwrap();
    /// assert!(q.put(b"x").is_err());
    /// ```
    pub fn close(&self) -> Result<(), JournalError> {
        self.inner.close()
    }

    /// The queue's name.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// assert_eq!(q.name(), "q");
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The directory holding the queue's files.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// assert_eq!(q.dir(), dir.path());
    /// ```
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }
}
