//! The state every part of an open queue shares: the writer's position, the sync state,
//! the segment index and the reader set, with the small operations on them that need no I/O.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use crate::chunks::ChunkCache;
use crate::config::JournalConfig;
use crate::files::segment_name;
use crate::pos::Pos;
use crate::reader_state::ReaderShared;
use crate::report::RecoveryReport;
use crate::storage::{LockGuard, Storage, WriteFile, WriteMap};
use crate::sync::{lock, proto};
use crate::wake::Doorbell;
use crate::JournalError;

/// The append side of the journal, behind one mutex: the segment being written, where the
/// next record goes and the next item id.
pub(crate) struct Writer {
    pub(crate) seg_id: u64,
    /// The segment being written; changed only through [`Writer::set_file`], which keeps
    /// `lent` on the same file.
    file: Arc<dyn WriteFile>,
    /// A second handle on `file`, which a leader moves out for its write outside the lock
    /// and puts back ([`Writer::lend`]): no reference count changes on a put. `None` only
    /// while a leader holds it.
    lent: Option<Arc<dyn WriteFile>>,
    pub(crate) offset: u64,
    pub(crate) next_id: u64,
    /// Ids of sealed segments not synced yet (rotation under `Never` and `Periodic` does not
    /// wait). Kept as ids, not open files, so a long run holds no file descriptors for them.
    pub(crate) unsynced_sealed: Vec<u64>,
    /// A put is writing: it owns the file's end until it steps down (see `append.rs`).
    pub(crate) leading: bool,
    /// Records queued by followers for the leader, ids `pending_first..=pending_last`.
    pub(crate) pending: Vec<u8>,
    pub(crate) pending_first: u64,
    pub(crate) pending_last: u64,
    /// Puts waiting on the pending records.
    pub(crate) pending_followers: usize,
    /// Threads waiting on `Inner::written_cv` (followers, and callers of `idle_writer`).
    pub(crate) sleepers: usize,
    /// The previous pending buffer, kept for its capacity.
    pub(crate) spare: Vec<u8>,
    /// The leader's buffer for a lone small record, kept for its capacity.
    pub(crate) own: Vec<u8>,
    /// Every id up to this one is written (under `Always`: and synced), or failed.
    pub(crate) done_id: u64,
    /// Batches that failed, until each of their followers has read it.
    pub(crate) failures: Vec<Failure>,
    /// Under `Always`: batches written since the leader's last sync.
    pub(crate) unsynced: Vec<Unsynced>,
    /// Under `Never` and `Periodic`: the next segment, created ahead (`write.rs`).
    pub(crate) next: Option<NextSegment>,
    /// Disk space is reserved in the writer's segment up to this offset (`reserve.rs`).
    pub(crate) reserved: u64,
    /// Once `offset` reaches this, the leader reserves the next stretch of the segment
    /// (`u64::MAX`: nothing more to reserve in this segment).
    pub(crate) reserve_at: u64,
    /// The file system cannot reserve space: do not ask again.
    pub(crate) reserve_unsupported: bool,
    /// Under mapped writes, the writer's segment mapped from its start (`mapped.rs`).
    pub(crate) map: Option<Box<dyn WriteMap>>,
    /// The helper giving up the map of the last sealed segment (`mapped.rs`).
    pub(crate) unmapping: Option<JoinHandle<()>>,
    /// Leaders in a row that met no other put (`append.rs`): once there are enough,
    /// `Inner::crowded` is cleared and puts write under the lock again.
    pub(crate) calm: u32,
    /// The end of the writer's segment when creating the next one last found the disk
    /// full (0: it did not): rotation is tried again once more is written.
    pub(crate) rotation_stuck_at: u64,
}

/// Under `Periodic` on a storage without helper threads: the interval of the syncs that puts
/// make (`periodic.rs`) and when the next one is due.
#[derive(Debug)]
pub(crate) struct DueSync {
    pub(crate) every_ms: u64,
    /// Milliseconds since the Unix epoch on the journal's clock.
    pub(crate) next_ms: AtomicU64,
}

impl DueSync {
    /// Syncs every `every`, the first one interval after `now_ms`.
    pub(crate) fn new(every: Duration, now_ms: u64) -> Self {
        let every_ms = u64::try_from(every.as_millis()).unwrap_or(u64::MAX);
        DueSync {
            every_ms,
            next_ms: AtomicU64::new(now_ms.saturating_add(every_ms)),
        }
    }
}

/// A segment created ahead: its file, and under mapped writes its map if it could be made.
pub(crate) type Created = (Arc<dyn WriteFile>, Option<Box<dyn WriteMap>>);

/// The segment after the writer's, being created (header written and synced, directory
/// entry synced) by a helper thread, so that rotation does not wait for two syncs.
pub(crate) struct NextSegment {
    pub(crate) seg: u64,
    pub(crate) path: PathBuf,
    /// The file, and under mapped writes its map (`mapped.rs`).
    pub(crate) creating: Creating,
}

/// How a segment created ahead comes to be: on a helper thread, or already, by the put that
/// asked for it (a storage without helper threads, [`Storage::helper_threads`]).
pub(crate) enum Creating {
    /// The helper sends the segment as soon as it is created (and mapped), then prepares the
    /// map's pages ([`WriteMap::prefaulter`](crate::storage::WriteMap::prefaulter)) and ends.
    Thread {
        handle: JoinHandle<()>,
        created: Receiver<Result<Created, JournalError>>,
    },
    Done(Result<Created, JournalError>),
}

impl Creating {
    /// Waits for the creation, not for the preparation of the map's pages, which goes on
    /// meanwhile: `Err` if the helper thread panicked.
    pub(crate) fn join(self) -> std::thread::Result<Result<Created, JournalError>> {
        self.wait(false)
    }

    /// Waits for the creation and for the helper thread's end (the map's pages prepared).
    pub(crate) fn finish(self) -> std::thread::Result<Result<Created, JournalError>> {
        self.wait(true)
    }

    fn wait(self, until_end: bool) -> std::thread::Result<Result<Created, JournalError>> {
        let (handle, created) = match self {
            Creating::Thread { handle, created } => (handle, created),
            Creating::Done(created) => return Ok(created),
        };
        match created.recv() {
            Ok(created) => {
                // A panic while preparing pages, after the segment was sent, loses nothing.
                if until_end {
                    let _ = handle.join();
                }
                Ok(created)
            }
            // A helper that sent nothing has ended: it panicked.
            Err(_) => Err(handle
                .join()
                .err()
                .unwrap_or_else(|| Box::new("the helper ended without the segment"))),
        }
    }
}

impl Writer {
    /// A writer appending at `offset` of segment `seg_id`, next id `next_id`.
    pub(crate) fn new(seg_id: u64, file: Arc<dyn WriteFile>, offset: u64, next_id: u64) -> Self {
        Writer {
            seg_id,
            lent: Some(file.clone()),
            file,
            offset,
            next_id,
            unsynced_sealed: Vec::new(),
            leading: false,
            pending: Vec::new(),
            pending_first: 0,
            pending_last: 0,
            pending_followers: 0,
            sleepers: 0,
            spare: Vec::new(),
            own: Vec::new(),
            done_id: next_id - 1,
            failures: Vec::new(),
            unsynced: Vec::new(),
            next: None,
            reserved: 0,
            reserve_at: 0,
            reserve_unsupported: false,
            map: None,
            unmapping: None,
            calm: 0,
            rotation_stuck_at: 0,
        }
    }
}

/// A batch of ids that was written but not synced yet (under `Always`).
pub(crate) struct Unsynced {
    pub(crate) first: u64,
    pub(crate) last: u64,
    pub(crate) followers: usize,
}

/// A batch of ids whose write failed, kept for the followers that put them.
pub(crate) struct Failure {
    pub(crate) first: u64,
    pub(crate) last: u64,
    error: FailureKind,
    pub(crate) waiting: usize,
}

enum FailureKind {
    Io {
        path: PathBuf,
        kind: std::io::ErrorKind,
        message: String,
    },
    Other(String),
}

impl Failure {
    pub(crate) fn new(first: u64, last: u64, err: &JournalError, waiting: usize) -> Self {
        let error = match err {
            JournalError::Io { path, source } => FailureKind::Io {
                path: path.clone(),
                kind: source.kind(),
                message: source.to_string(),
            },
            JournalError::Poisoned { reason } => FailureKind::Other(reason.clone()),
            other => FailureKind::Other(other.to_string()),
        };
        Failure {
            first,
            last,
            error,
            waiting,
        }
    }

    /// The error each follower of the batch gets.
    pub(crate) fn error(&self) -> JournalError {
        match &self.error {
            FailureKind::Io {
                path,
                kind,
                message,
            } => JournalError::io(path.clone(), std::io::Error::new(*kind, message.clone())),
            FailureKind::Other(reason) => JournalError::Poisoned {
                reason: reason.clone(),
            },
        }
    }
}

impl Writer {
    /// The file for a leader's write outside the lock, moved out of the writer: cloning
    /// `file` for every put cost two atomic read-modify-writes. Hand it back with
    /// [`Writer::give_back`] once the lock is taken again.
    #[inline]
    pub(crate) fn lend(&mut self) -> Arc<dyn WriteFile> {
        self.lent.take().unwrap_or_else(|| self.file.clone())
    }

    /// Takes back a handle from [`Writer::lend`] (dropped if the writer moved to another
    /// segment meanwhile, which only a leader or an idle writer does).
    #[inline(always)]
    pub(crate) fn give_back(&mut self, file: Arc<dyn WriteFile>) {
        if Arc::ptr_eq(&file, &self.file) {
            self.lent = Some(file);
        }
    }

    /// The segment being written.
    pub(crate) fn file(&self) -> &Arc<dyn WriteFile> {
        &self.file
    }

    /// The segment being written and the buffer for a lone small record, for a put that
    /// writes under the lock (`append.rs`): borrowed together, nothing moved out and back.
    #[inline(always)]
    pub(crate) fn file_and_own(&mut self) -> (&dyn WriteFile, &mut Vec<u8>) {
        (self.file.as_ref(), &mut self.own)
    }

    /// Makes `file` the writer's file (rotation).
    pub(crate) fn set_file(&mut self, file: Arc<dyn WriteFile>) {
        self.lent = Some(file.clone());
        self.file = file;
        self.reserved = 0;
        self.reserve_at = if self.reserve_unsupported {
            u64::MAX
        } else {
            0
        };
    }

    pub(crate) fn end(&self) -> Pos {
        Pos {
            seg: self.seg_id,
            off: self.offset,
        }
    }
}

/// What is durable, and who is syncing or waiting for a sync (group commit).
pub(crate) struct SyncState {
    /// Everything before this position is durable.
    pub(crate) synced: Pos,
    pub(crate) syncing: bool,
    /// Threads blocked on `sync_cv`.
    pub(crate) waiting: usize,
    pub(crate) poisoned: Option<String>,
}

/// A sealed segment as the index knows it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sealed {
    pub(crate) len: u64,
}

/// The segments that exist. How far readers may read is [`Visible`], beside it in [`Inner`].
pub(crate) struct SegIndex {
    /// Segment id → `Some` once sealed, `None` for the writer's segment.
    pub(crate) segs: BTreeMap<u64, Option<Sealed>>,
}

/// How far readers may read: everything before (`seg`, `off`).
///
/// A put under `Never`, `Periodic` or `Always` publishes its end with one atomic store and
/// no lock (taking and releasing the index's lock cost a 128-byte put about 24 ns on an
/// Intel Xeon). The pair stays consistent because of who writes what:
///
/// * `seg` is only written under the index's lock, and only forwards;
/// * `off` is written under the index's lock (by [`Inner::publish`], with `fetch_max`
///   within a segment), or without it by the thread that holds the writer's lock
///   ([`Inner::publish_held`]), and then only while `seg` already names the writer's
///   segment. That position is the writer's end, past anything published before, and no one
///   can move `seg` on while the writer's lock is held (only rotation does, under it).
///
/// A reader takes the index's lock to read the pair (`Inner::visible`): `seg` cannot change
/// while it holds it, and an `off` of a later segment is stored only after a later holder
/// of the lock moved `seg`, so the reader never pairs a segment with another's offset.
///
/// Every access is `SeqCst`: a publisher stores `off` (`T`) and then reads the doorbell's
/// waiter count (`L`); a reader going to sleep counts itself a waiter (`R`) and then reads
/// `off` (`B`). If both missed, `L` would precede `R` and `B` precede `T` in the single order
/// of `SeqCst` accesses, and with `T` before `L` and `R` before `B` (each thread's own order)
/// that is a cycle: one of the two sees the other, so a reader never sleeps through a put.
/// The loom model `a_put_published_without_a_lock_always_wakes_a_waiting_reader`
/// (`loom-tests/tests/journal_wake.rs`) checks the pattern.
pub(crate) struct Visible {
    seg: AtomicU64,
    off: AtomicU64,
}

impl Visible {
    pub(crate) fn new(at: Pos) -> Self {
        Visible {
            seg: AtomicU64::new(at.seg),
            off: AtomicU64::new(at.off),
        }
    }
}

/// Tells the periodic sync thread to stop.
pub(crate) type StopSignal = Arc<(Mutex<bool>, Condvar)>;

/// Everything an open queue shares between its handles, its readers and its sync thread.
pub(crate) struct Inner {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    pub(crate) config: JournalConfig,
    /// The writer and the coordination of concurrent puts (`append.rs`); on the loom switch,
    /// so the models in `fairq-loom-tests` run the real put path.
    pub(crate) writer: proto::Mutex<Writer>,
    /// Followers wait here for their batch (on the `writer` mutex).
    pub(crate) written_cv: proto::Condvar,
    /// `Writer::done_id` as the last leader left it when it stepped down (stored under the
    /// writer's lock), for followers that spin before they sleep (`append.rs`).
    pub(crate) stepped_down: proto::AtomicU64,
    /// `Writer::failures` was not empty when the last leader stepped down (stored before
    /// `stepped_down`): a spinning follower then looks for its batch among them.
    pub(crate) failures_kept: proto::AtomicBool,
    /// Puts met each other lately (one found the writer's lock taken, or queued behind a
    /// leader): a leader then writes outside the lock so that others can queue their
    /// records meanwhile. Otherwise a put writes under the lock (`append.rs`). A hint only:
    /// both ways are correct, they differ in cost.
    pub(crate) crowded: proto::AtomicBool,
    /// Puts never share a write: under `Never` or `Periodic` with `Coalesce` resolved off,
    /// every put writes its own records under the writer's lock (`append.rs`).
    pub(crate) take_turns: bool,
    /// Items and payload bytes put since the queue was opened; a reader's waiting count is
    /// these minus what it consumed (see `ReaderState`).
    pub(crate) put_items: AtomicU64,
    pub(crate) put_bytes: AtomicU64,
    /// Some reader has `max_items` or `max_bytes`: puts check room and drop oldest items.
    pub(crate) limited: AtomicBool,
    pub(crate) sync: Mutex<SyncState>,
    pub(crate) sync_cv: Condvar,
    pub(crate) index: Mutex<SegIndex>,
    /// How far readers may read (see [`Visible`] for who writes it and how).
    pub(crate) visible: Visible,
    pub(crate) readers: RwLock<Vec<Arc<ReaderShared>>>,
    pub(crate) registry: Mutex<()>,
    /// Segment bytes read by one reader, kept for the others.
    pub(crate) chunks: ChunkCache,
    /// Wakes readers waiting in `get_timeout`.
    pub(crate) bell: Doorbell,
    /// Set together with `SyncState::poisoned`, for a lock-free check on every put.
    pub(crate) poisoned: AtomicBool,
    pub(crate) closed: AtomicBool,
    /// When this handle opened the queue (for `max_queue_age`).
    pub(crate) opened_at: SystemTime,
    /// Opened with `open_read_only`: nothing is ever written.
    pub(crate) read_only: bool,
    /// What opening found and repaired.
    pub(crate) report: RecoveryReport,
    pub(crate) stop: StopSignal,
    /// Under `Periodic`, the timer thread that syncs (`periodic.rs`).
    pub(crate) flusher: Mutex<Option<JoinHandle<()>>>,
    /// Under `Periodic` on a storage without helper threads: when puts sync instead.
    pub(crate) due_sync: Option<DueSync>,
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
        JournalError::corrupt(&self.segment_path(pos.seg), pos.off, reason)
    }

    /// Fails for a queue opened read-only.
    pub(crate) fn check_writable(&self, operation: &'static str) -> Result<(), JournalError> {
        if self.read_only {
            Err(JournalError::ReadOnly { operation })
        } else {
            Ok(())
        }
    }

    /// `(put_items, put_bytes)` now.
    pub(crate) fn put_totals(&self) -> (u64, u64) {
        (
            self.put_items.load(Ordering::Acquire),
            self.put_bytes.load(Ordering::Acquire),
        )
    }

    /// The writer once no put is writing (for rotation, new readers and closing), and
    /// every put of a failed batch took its count back out of the put totals (it does so
    /// under the lock as it picks up its batch's failure): a new reader's baseline never
    /// counts an item that was not written.
    pub(crate) fn idle_writer(&self) -> proto::MutexGuard<'_, Writer> {
        let mut w = proto::lock(&self.writer);
        while w.leading || !w.failures.is_empty() {
            w.sleepers += 1;
            w = self.written_cv.wait(w).unwrap_or_else(|p| p.into_inner());
            w.sleepers -= 1;
        }
        w
    }

    #[inline]
    pub(crate) fn check_open(&self) -> Result<(), JournalError> {
        if self.closed.load(Ordering::Acquire) {
            Err(JournalError::Closed)
        } else {
            Ok(())
        }
    }

    /// Every put checks this (more than once): the healthy case is one inlined load, and
    /// only a poisoned queue calls out to build the error.
    #[inline]
    pub(crate) fn check_poisoned(&self) -> Result<(), JournalError> {
        if !self.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        self.poisoned_error()
    }

    #[cold]
    fn poisoned_error(&self) -> Result<(), JournalError> {
        match &lock(&self.sync).poisoned {
            Some(reason) => Err(JournalError::Poisoned {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    pub(crate) fn poison(&self, reason: String) -> JournalError {
        tracing::error!(queue = %self.name, %reason, "journal poisoned");
        let mut s = lock(&self.sync);
        if s.poisoned.is_none() {
            s.poisoned = Some(reason.clone());
        }
        self.poisoned.store(true, Ordering::Release);
        self.sync_cv.notify_all();
        JournalError::Poisoned { reason }
    }

    /// How far readers may read, as last published.
    pub(crate) fn visible(&self) -> Pos {
        let _index = lock(&self.index);
        Pos {
            seg: self.visible.seg.load(Ordering::SeqCst),
            off: self.visible.off.load(Ordering::SeqCst),
        }
    }

    /// The newest segment: the writer's. Its creation was synced before anything was put
    /// in it, and it is never retired.
    pub(crate) fn tail_segment(&self) -> u64 {
        lock(&self.index)
            .segs
            .last_key_value()
            .map_or(0, |(&seg, _)| seg)
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

    /// Lets readers read everything before `upto` (never moving back) and wakes those
    /// waiting. Any thread may call it; the writer's lock holder has [`Inner::publish_held`].
    pub(crate) fn publish(&self, upto: Pos) {
        {
            let _index = lock(&self.index);
            let seg = self.visible.seg.load(Ordering::SeqCst);
            if upto.seg > seg {
                // `off` first: a writer that sees the new `seg` stores offsets after it.
                self.visible.off.store(upto.off, Ordering::SeqCst);
                self.visible.seg.store(upto.seg, Ordering::SeqCst);
            } else if upto.seg == seg {
                self.visible.off.fetch_max(upto.off, Ordering::SeqCst);
            }
        }
        self.bell.ring();
    }

    /// [`Inner::publish`] by the thread holding the writer's lock (`_held` is its proof), of
    /// the writer's end: within the segment readers already know of, one store (see
    /// [`Visible`]).
    #[inline]
    pub(crate) fn publish_held(&self, _held: &Writer, upto: Pos) {
        if self.visible.seg.load(Ordering::SeqCst) == upto.seg {
            self.visible.off.store(upto.off, Ordering::SeqCst);
            self.bell.ring();
        } else {
            self.publish(upto);
        }
    }

    pub(crate) fn mark_synced(&self, upto: Pos) {
        let mut s = lock(&self.sync);
        if upto > s.synced {
            s.synced = upto;
        }
        if s.waiting > 0 {
            self.sync_cv.notify_all();
        }
    }
}

/// Where a segment ends, as far as readers are concerned.
pub(crate) enum SegEnd {
    /// The segment the writer appends to.
    Open,
    /// A sealed segment of this length.
    Sealed(u64),
    /// The segment was deleted or never existed.
    Gone,
}
