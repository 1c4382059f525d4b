//! The public queue handle.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use std::collections::BTreeSet;

use crate::config::{JournalConfig, PutOptions, ReaderConfig};
use crate::files::{
    belongs_to, lock_path, parse_checkpoint_name, queue_of, registry_path, tail_path,
};
use crate::reader::Reader;
use crate::recovery::Access;
use crate::report::RecoveryReport;
use crate::retire::write_checkpoint;
use crate::sink::{Destination, Sink, Target};
use crate::state::Inner;
use crate::storage::EntryKind;
use crate::sync::{lock, read_lock};
use crate::{ItemId, JournalError};

impl Inner {
    /// Closes the queue and removes its files; see [`JournaledQueue::delete`].
    ///
    /// The order makes every state a crash can leave one that opens: the tail marker and
    /// the checkpoints go first (a reader without its checkpoint restarts from the oldest
    /// item: replayed, never lost; the registry still names every reader), then the
    /// segments, oldest first (without checkpoints nothing asks for a segment that is gone,
    /// and without the marker nothing for one at the end), and the registry last (before
    /// that, no reader can be forgotten: without the registry the readers would be taken
    /// from the checkpoint files left). The folder is synced after each step, so that no
    /// removal of a step outlives a crash that a removal of an earlier step did not.
    pub(crate) fn delete(&self) -> Result<(), JournalError> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Err(JournalError::Closed);
        }
        self.stop_flusher();
        self.bell.ring_always();
        let ahead = self.finish_next(&mut self.idle_writer());
        let storage = self.storage();
        let remove = |p: &Path| match storage.remove_file(p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(JournalError::io(p, e)),
            _ => Ok(()),
        };
        let sync = || {
            storage
                .sync_dir(&self.dir)
                .map_err(|e| JournalError::io(&self.dir, e))
        };
        // The queue's files in the folder that `pick` picks by name, whoever left them: a
        // segment whose retirement failed, the temporary file of a checkpoint that failed.
        let found = |pick: &dyn Fn(&str) -> bool| -> Result<Vec<PathBuf>, JournalError> {
            let entries = storage
                .list_dir(&self.dir)
                .map_err(|e| JournalError::io(&self.dir, e))?;
            Ok(entries
                .into_iter()
                .filter(|e| e.kind != EntryKind::Dir && belongs_to(&self.name, &e.name))
                .filter(|e| pick(&e.name))
                .map(|e| self.dir.join(&e.name))
                .collect())
        };

        remove(&tail_path(&self.dir, &self.name))?;
        let readers = read_lock(&self.readers).clone();
        for r in &readers {
            // Under the checkpoint's lock: a checkpoint being written meanwhile (by a commit
            // that came just before the queue closed) finishes first, and a later one sees
            // the reader removed and writes nothing (`write_checkpoint`).
            let cp = lock(&r.cp);
            r.removed.store(true, Ordering::Release);
            remove(&cp.path)?;
        }
        for path in found(&|f| parse_checkpoint_name(&self.name, f).is_some())? {
            remove(&path)?;
        }
        sync()?;

        let segments: Vec<u64> = lock(&self.index).segs.keys().copied().collect();
        for seg in segments {
            remove(&self.segment_path(seg))?;
        }
        if let Some(path) = ahead {
            remove(&path)?;
        }
        let (registry, lock_file) = (
            registry_path(&self.dir, &self.name),
            lock_path(&self.dir, &self.name),
        );
        for path in found(&|f| {
            let p = self.dir.join(f);
            p != registry && p != lock_file
        })? {
            remove(&path)?;
        }
        sync()?;

        remove(&registry)?;
        sync()?;
        remove(&lock_file)?;
        drop(lock(&self.dir_lock).take());
        Ok(())
    }

    pub(crate) fn close(&self) -> Result<(), JournalError> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.stop_flusher();
        self.bell.ring_always();
        // Wait for a put that is writing right now (later ones see `closed`) and for a
        // segment being created ahead (it stays, empty, for the next open to reuse).
        let unmapped = {
            let mut w = self.idle_writer();
            self.finish_next(&mut w);
            w.unmap()
                .map_err(|e| JournalError::io(self.segment_path(w.seg_id), e))
        };
        if self.read_only {
            drop(lock(&self.dir_lock).take());
            return Ok(());
        }
        let mut first_err = None;
        if let Err(e) = unmapped {
            first_err.get_or_insert(e);
        }
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
}

impl Sink {
    /// A sink that puts each item's bytes into `queue` (without the item's expiry time, so
    /// an expired item is not expired again on arrival).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let late = fairq_journal::JournaledQueue::open(dir.path(), "late", Default::default()).unwrap();
    /// let sink = fairq_journal::Sink::queue(&late);
    /// assert!(format!("{sink:?}").contains("late"));
    /// ```
    pub fn queue(queue: &JournaledQueue) -> Sink {
        Sink(Target::Queue(queue.inner.clone()))
    }
}

impl Destination for Inner {
    fn put_bytes(&self, data: &[u8]) -> Result<(), JournalError> {
        self.put(data, PutOptions::default()).map(|_| ())
    }

    fn name(&self) -> &str {
        &self.name
    }
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
/// assert_eq!((item.id, &item.data[..]), (id, &b"order #1"[..]));
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
        let inner = crate::recovery::open(dir.as_ref(), name, config, Access::ReadWrite)?;
        Ok(JournaledQueue { inner })
    }

    /// Opens the queue `name` in `dir` without creating or changing any file: for looking at
    /// a queue (on a full disk, on a read-only mount, or without disturbing it).
    ///
    /// A torn tail is ignored rather than cut off (and reported in
    /// [`recovery_report`](Self::recovery_report)); damage is reported as by
    /// [`open`](Self::open). Readers work in memory: `get`, `peek`, `commit` and `abort`
    /// behave as usual but no checkpoint is written, and a reader that does not exist yet
    /// exists only in this handle. Puts, rotation, syncs and explicit checkpoints fail with
    /// [`JournalError::ReadOnly`]. The queue's lock is taken shared, so a handle that has
    /// the queue open for writing makes this fail with [`JournalError::Locked`] (and the
    /// other way round). A folder without the queue's files reads as an empty queue; a
    /// folder that does not exist is an error.
    ///
    /// ```
    /// use fairq_journal::{JournalConfig, JournalError, JournaledQueue};
    /// let dir = tempfile::tempdir().unwrap();
    /// let q = JournaledQueue::open(dir.path(), "q", JournalConfig::default()).unwrap();
    /// q.put(b"hello").unwrap();
    /// q.close().unwrap();
    ///
    /// let view = JournaledQueue::open_read_only(dir.path(), "q", JournalConfig::default()).unwrap();
    /// let r = view.reader("").unwrap();
    /// assert_eq!(&r.get().unwrap().unwrap().data[..], b"hello");
    /// assert!(matches!(view.put(b"x"), Err(JournalError::ReadOnly { .. })));
    /// ```
    pub fn open_read_only(
        dir: impl AsRef<Path>,
        name: &str,
        config: JournalConfig,
    ) -> Result<JournaledQueue, JournalError> {
        let inner = crate::recovery::open(dir.as_ref(), name, config, Access::ReadOnly)?;
        Ok(JournaledQueue { inner })
    }

    /// What opening the queue found and repaired: torn tails cut off (and whether a complete
    /// record was among them), half-created segments removed, readers that restarted, a lost
    /// reader registry rebuilt from the checkpoints.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// assert!(q.recovery_report().tails.is_empty());
    /// ```
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.report
    }

    /// Whether the queue was opened with [`open_read_only`](Self::open_read_only).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// assert!(!q.is_read_only());
    /// ```
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
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
    #[inline]
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

    /// Appends several items in one write, with consecutive ids, and returns their ids once
    /// they are all as durable as the sync policy promises (one sync for all of them). If it
    /// fails, none of them was acknowledged; after a crash during the call a prefix of them
    /// may exist, as after separate puts.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let ids = q.put_many(&[&b"a"[..], b"b", b"c"]).unwrap();
    /// assert_eq!(ids.len(), 3);
    /// assert_eq!(ids[1].0, ids[0].0 + 1);
    /// assert_eq!(q.reader("").unwrap().len(), 3);
    /// ```
    pub fn put_many(&self, items: &[&[u8]]) -> Result<Vec<ItemId>, JournalError> {
        self.inner.put_many(items)
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
        self.inner.check_writable("checkpoint")?;
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
    /// assert_eq!(&q.reader("").unwrap().get().unwrap().unwrap().data[..], b"x");
    /// ```
    pub fn rotate(&self) -> Result<(), JournalError> {
        self.inner.check_open()?;
        self.inner.check_writable("rotate")?;
        let mut w = self.inner.idle_writer();
        self.inner.check_open()?;
        self.inner.check_poisoned()?;
        if w.offset > crate::format::SEGMENT_HEADER_LEN as u64
            && let Err(e) = self.inner.rotate(&mut w)
        {
            // No room for the next segment leaves the writer where it was: not poisoned.
            if e.is_storage_full() {
                return Err(e);
            }
            return Err(self.inner.poison(format!("segment rotation failed: {e}")));
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
        self.inner.check_writable("sync")?;
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

    /// Removes the reader `name`: it leaves the registry, its checkpoint is deleted, its
    /// handles fail with [`JournalError::ReaderRemoved`], and segments that only it still
    /// needed are retired. The queue's only reader cannot be removed.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let a = q.reader("a").unwrap();
    /// let b = q.reader("b").unwrap();
    /// q.remove_reader("b").unwrap();
    /// assert_eq!(q.reader_names(), vec!["a".to_string()]);
    /// assert!(b.get().is_err());
    /// assert!(q.remove_reader("a").is_err()); // the last one stays
    /// # drop(a);
    /// ```
    pub fn remove_reader(&self, name: &str) -> Result<(), JournalError> {
        self.inner.remove_reader(name)
    }

    /// Runs an expiry sweep over every reader: each takes up to `limit_per_reader` expired
    /// items off its front (see [`Reader::discard_expired`]). Returns how many were taken in
    /// all.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// assert_eq!(q.discard_expired(100).unwrap(), 0);
    /// ```
    pub fn discard_expired(&self, limit_per_reader: u64) -> Result<u64, JournalError> {
        self.inner.check_open()?;
        let readers = read_lock(&self.inner.readers).clone();
        let mut taken = 0;
        for shared in readers {
            let r = Reader {
                inner: self.inner.clone(),
                shared,
            };
            taken += r.discard_expired(limit_per_reader)?;
        }
        Ok(taken)
    }

    /// Whether the queue can be deleted under [`JournalConfig::max_queue_age`]: it has been
    /// open at least that long and no reader holds an item (waiting or open). Always false
    /// without a `max_queue_age`.
    ///
    /// ```
    /// use fairq_journal::{JournalConfig, JournaledQueue, ManualClock};
    /// use std::sync::Arc;
    /// use std::time::{Duration, UNIX_EPOCH};
    /// let clock = ManualClock::new(UNIX_EPOCH);
    /// let cfg = JournalConfig {
    ///     max_queue_age: Some(Duration::from_secs(60)),
    ///     clock: Arc::new(clock.clone()),
    ///     ..Default::default()
    /// };
    /// let dir = tempfile::tempdir().unwrap();
    /// let q = JournaledQueue::open(dir.path(), "q", cfg).unwrap();
    /// clock.advance(Duration::from_secs(60));
    /// assert!(q.is_ready_for_expiration());
    /// q.delete().unwrap();
    /// assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    /// ```
    pub fn is_ready_for_expiration(&self) -> bool {
        let Some(max) = self.inner.config.max_queue_age else {
            return false;
        };
        let old_enough = self
            .inner
            .config
            .clock
            .now()
            .duration_since(self.inner.opened_at)
            .is_ok_and(|age| age >= max);
        let totals = self.inner.put_totals();
        old_enough
            && read_lock(&self.inner.readers).iter().all(|r| {
                let st = lock(&r.state);
                st.waiting(totals).0 == 0 && st.open.is_empty()
            })
    }

    /// Closes the queue and deletes all its files (the tail marker and the checkpoints
    /// first, then the segments oldest first and any other file of the queue's, then the
    /// reader registry, syncing the folder after each step, then the lock file). A crash
    /// part way leaves a queue that opens with every reader it had, each either at its
    /// checkpoint or, once its checkpoint is gone, at the oldest item left. Other queues in
    /// the folder are untouched. Handles to it fail with [`JournalError::Closed`]
    /// afterwards.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// q.put(b"gone").unwrap();
    /// q.delete().unwrap();
    /// assert!(fairq_journal::JournaledQueue::list_queues(dir.path(), &Default::default()).unwrap().is_empty());
    /// ```
    pub fn delete(&self) -> Result<(), JournalError> {
        self.inner.check_writable("deleting the queue")?;
        self.inner.delete()
    }

    /// The names of the queues that have files in `dir` (sorted), read through the
    /// configuration's storage.
    ///
    /// ```
    /// use fairq_journal::{JournalConfig, JournaledQueue};
    /// let dir = tempfile::tempdir().unwrap();
    /// for name in ["emails", "jobs:high"] {
    ///     JournaledQueue::open(dir.path(), name, JournalConfig::default()).unwrap();
    /// }
    /// std::fs::write(dir.path().join("notes.txt"), b"not a queue").unwrap();
    /// let names = JournaledQueue::list_queues(dir.path(), &JournalConfig::default()).unwrap();
    /// assert_eq!(names, vec!["emails".to_string(), "jobs:high".to_string()]);
    /// ```
    pub fn list_queues(
        dir: impl AsRef<Path>,
        config: &JournalConfig,
    ) -> Result<Vec<String>, JournalError> {
        let dir = dir.as_ref();
        let entries = config
            .storage
            .list_dir(dir)
            .map_err(|e| JournalError::io(dir, e))?;
        let names: BTreeSet<String> = entries
            .iter()
            .filter_map(|e| queue_of(&e.name))
            .map(str::to_string)
            .collect();
        Ok(names.into_iter().collect())
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
