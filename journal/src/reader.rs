//! Readers: independent cursors over the journal with open reads and checkpoints.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::checkpoint::{encode_checkpoint, Checkpoint};
use crate::config::{from_ms, to_ms, ReaderConfig};
use crate::format::{decode_record, DecodeError, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use crate::queue::{lock, Inner, Pos};
use crate::storage::{read_at_most, replace_atomically, ReadFile};
use crate::{ItemId, JournalError};

/// An item delivered by a reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The item's id, unique and increasing within the queue.
    pub id: ItemId,
    /// The item's bytes.
    pub data: Vec<u8>,
    /// When the item was put (millisecond precision).
    pub added_at: SystemTime,
    /// When the item expires, if it does.
    pub expires_at: Option<SystemTime>,
    /// How many times this reader aborted the item since the queue was opened.
    pub error_count: u32,
}

/// Where an item lives in the journal, kept for open and aborted reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Located {
    pos: Pos,
    len: u64,
    error_count: u32,
}

/// A record read from the journal.
pub(crate) struct ReadRecord {
    pub(crate) id: u64,
    pub(crate) pos: Pos,
    pub(crate) added_at_ms: u64,
    pub(crate) expires_at_ms: Option<u64>,
    pub(crate) data: Vec<u8>,
}

#[derive(Default)]
struct ReadBuf {
    seg_id: u64,
    file: Option<Box<dyn ReadFile>>,
    start: u64,
    data: Vec<u8>,
}

const READ_AHEAD: usize = 64 * 1024;

/// The mutable state of a reader.
pub(crate) struct ReaderState {
    /// Next position to read from the stream; records there have ids of at least `cursor_id`.
    pub(crate) cursor: Pos,
    pub(crate) cursor_id: u64,
    open: BTreeMap<u64, Located>,
    returned: BTreeMap<u64, Located>,
    /// Finished ids at or above the head (committed out of order, or restored from a
    /// checkpoint and not yet reached).
    pub(crate) done: BTreeSet<u64>,
    /// Items waiting to be delivered and their payload bytes (open reads excluded).
    pub(crate) items: u64,
    pub(crate) bytes: u64,
    /// The reader's limits.
    pub(crate) config: ReaderConfig,
    dirty: bool,
    buf: ReadBuf,
}

impl ReaderState {
    pub(crate) fn new(
        cursor: Pos,
        cursor_id: u64,
        done: BTreeSet<u64>,
        config: ReaderConfig,
    ) -> Self {
        ReaderState {
            config,
            cursor,
            cursor_id,
            open: BTreeMap::new(),
            returned: BTreeMap::new(),
            done,
            items: 0,
            bytes: 0,
            dirty: false,
            buf: ReadBuf::default(),
        }
    }

    /// Every id below the head is finished.
    pub(crate) fn head(&self) -> u64 {
        let mut h = self.cursor_id;
        if let Some((&id, _)) = self.open.first_key_value() {
            h = h.min(id);
        }
        if let Some((&id, _)) = self.returned.first_key_value() {
            h = h.min(id);
        }
        h
    }

    fn mark_done(&mut self, id: u64) {
        self.done.insert(id);
        let head = self.head();
        while self.done.first().is_some_and(|&d| d < head) {
            self.done.pop_first();
        }
        self.dirty = true;
    }

    pub(crate) fn checkpoint_data(&self) -> Checkpoint {
        let head = self.head();
        Checkpoint {
            head,
            done: self.done.range(head..).copied().collect(),
        }
    }

    /// Whether adding an item of `len` bytes would break a limit.
    pub(crate) fn would_overflow(&self, len: u64) -> bool {
        let cfg = &self.config;
        cfg.max_items.is_some_and(|m| self.items + 1 > m)
            || cfg.max_bytes.is_some_and(|m| self.bytes + len > m)
    }

    fn is_over(&self, cfg: &ReaderConfig) -> bool {
        cfg.max_items.is_some_and(|m| self.items > m)
            || cfg.max_bytes.is_some_and(|m| self.bytes > m)
    }
}

/// Checkpoint bookkeeping of a reader, locked while a checkpoint is written.
pub(crate) struct CpSlot {
    pub(crate) path: PathBuf,
    pub(crate) last_at: Option<SystemTime>,
}

/// A reader shared between the queue and every [`Reader`] handle.
pub(crate) struct ReaderShared {
    pub(crate) name: Mutex<String>,
    pub(crate) state: Mutex<ReaderState>,
    pub(crate) cp: Mutex<CpSlot>,
    /// The head recorded by the last checkpoint that reached the disk.
    pub(crate) durable_head: AtomicU64,
}

impl ReaderShared {
    pub(crate) fn name(&self) -> String {
        lock(&self.name).clone()
    }
}

/// A handle to one reader of a [`JournaledQueue`](crate::JournaledQueue).
///
/// A reader is an independent copy of the queue's stream. [`Reader::get`] hands out an item
/// as an *open read*; [`Reader::commit`] finishes it and [`Reader::abort`] returns it to the
/// front of the reader (it comes back with `error_count + 1`). Handles are cheap to clone and
/// can be used from many threads at once.
///
/// ```
/// use fairq_journal::{JournalConfig, JournaledQueue};
/// let dir = tempfile::tempdir().unwrap();
/// let q = JournaledQueue::open(dir.path(), "jobs", JournalConfig::default()).unwrap();
/// let r = q.reader("workers").unwrap();
/// q.put(b"one").unwrap();
/// let item = r.get().unwrap().unwrap();
/// assert_eq!(item.data, b"one");
/// r.abort(item.id).unwrap();
/// let again = r.get().unwrap().unwrap();
/// assert_eq!(again.error_count, 1);
/// r.commit(again.id).unwrap();
/// assert_eq!(r.len(), 0);
/// ```
#[derive(Clone)]
pub struct Reader {
    pub(crate) inner: Arc<Inner>,
    pub(crate) shared: Arc<ReaderShared>,
}

impl fmt::Debug for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader")
            .field("queue", &self.inner.name)
            .field("name", &self.shared.name())
            .finish()
    }
}

impl Reader {
    /// The reader's name (empty for the default reader).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// assert_eq!(q.reader("audit").unwrap().name(), "audit");
    /// ```
    pub fn name(&self) -> String {
        self.shared.name()
    }

    /// Takes the next item as an open read, or `None` if nothing is waiting. Aborted items
    /// come first; expired items are skipped and committed.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let r = q.reader("").unwrap();
    /// assert!(r.get().unwrap().is_none());
    /// ```
    pub fn get(&self) -> Result<Option<Item>, JournalError> {
        self.inner.check_open()?;
        let now = self.inner.config.clock.now();
        let item = {
            let mut st = lock(&self.shared.state);
            self.take_next(&mut st, now)?
        };
        self.maybe_checkpoint(now)?;
        Ok(item)
    }

    /// Like [`Reader::get`], but waits up to `timeout` for an item to be put.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let r = q.reader("").unwrap();
    /// q.put(b"x").unwrap();
    /// assert!(r.get_timeout(std::time::Duration::from_secs(1)).unwrap().is_some());
    /// ```
    pub fn get_timeout(&self, timeout: Duration) -> Result<Option<Item>, JournalError> {
        let deadline = Instant::now().checked_add(timeout);
        let _waiting = WaiterGuard::new(&self.inner);
        loop {
            let seen = self.inner.signal_generation();
            if let Some(item) = self.get()? {
                return Ok(Some(item));
            }
            let remaining = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if remaining.is_zero() {
                return Ok(None);
            }
            self.inner.wait_signal(seen, remaining);
        }
    }

    /// Finishes an open read.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let r = q.reader("").unwrap();
    /// let id = q.put(b"x").unwrap();
    /// assert!(r.commit(id).is_err()); // not an open read yet
    /// r.get().unwrap();
    /// r.commit(id).unwrap();
    /// ```
    pub fn commit(&self, id: ItemId) -> Result<(), JournalError> {
        self.inner.check_open()?;
        let now = self.inner.config.clock.now();
        {
            let mut st = lock(&self.shared.state);
            if st.open.remove(&id.0).is_none() {
                return Err(JournalError::NotOpen(id));
            }
            st.mark_done(id.0);
        }
        self.maybe_checkpoint(now)
    }

    /// Returns an open read to the front of the reader; it is delivered again, first, with
    /// its error count increased.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let r = q.reader("").unwrap();
    /// let id = q.put(b"x").unwrap();
    /// r.get().unwrap();
    /// r.abort(id).unwrap();
    /// assert_eq!(r.len(), 1);
    /// ```
    pub fn abort(&self, id: ItemId) -> Result<(), JournalError> {
        self.inner.check_open()?;
        let now = self.inner.config.clock.now();
        {
            let mut st = lock(&self.shared.state);
            let Some(mut loc) = st.open.remove(&id.0) else {
                return Err(JournalError::NotOpen(id));
            };
            loc.error_count = loc.error_count.saturating_add(1);
            st.items += 1;
            st.bytes += loc.len;
            st.returned.insert(id.0, loc);
        }
        self.inner.notify();
        self.maybe_checkpoint(now)
    }

    /// Number of items waiting to be delivered (aborted ones included, open reads excluded).
    /// Items whose put is still waiting for its sync are counted.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let r = q.reader("").unwrap();
    /// q.put(b"x").unwrap();
    /// assert_eq!(r.len(), 1);
    /// ```
    pub fn len(&self) -> u64 {
        lock(&self.shared.state).items
    }

    /// Whether no item is waiting.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// assert!(q.reader("").unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Payload bytes of the items waiting to be delivered.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let r = q.reader("").unwrap();
    /// q.put(b"abc").unwrap();
    /// assert_eq!(r.bytes(), 3);
    /// ```
    pub fn bytes(&self) -> u64 {
        lock(&self.shared.state).bytes
    }

    /// Number of open reads (delivered, neither committed nor aborted).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let r = q.reader("").unwrap();
    /// q.put(b"x").unwrap();
    /// r.get().unwrap();
    /// assert_eq!(r.open_reads(), 1);
    /// ```
    pub fn open_reads(&self) -> usize {
        lock(&self.shared.state).open.len()
    }

    /// Writes this reader's checkpoint now (crash-atomically) and deletes or archives the
    /// segments that no reader needs any more.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// q.reader("").unwrap().checkpoint().unwrap();
    /// ```
    pub fn checkpoint(&self) -> Result<(), JournalError> {
        self.inner.check_open()?;
        write_checkpoint(&self.inner, &self.shared, true)?;
        self.inner.collect_segments()
    }

    fn maybe_checkpoint(&self, now: SystemTime) -> Result<(), JournalError> {
        let due = {
            let cp = lock(&self.shared.cp);
            match cp.last_at {
                None => true,
                Some(last) => now
                    .duration_since(last)
                    .map(|d| d >= self.inner.config.checkpoint_interval)
                    .unwrap_or(false),
            }
        };
        if due && lock(&self.shared.state).dirty {
            write_checkpoint(&self.inner, &self.shared, false)?;
            self.inner.collect_segments()?;
        }
        Ok(())
    }

    fn take_next(
        &self,
        st: &mut ReaderState,
        now: SystemTime,
    ) -> Result<Option<Item>, JournalError> {
        let now_ms = to_ms(now);
        let cfg = st.config;
        let expired = |added: u64, expires: Option<u64>| {
            expires.is_some_and(|e| e <= now_ms)
                || cfg
                    .max_age
                    .is_some_and(|age| now_ms.saturating_sub(added) > to_ms_dur(age))
        };
        loop {
            if let Some((id, loc)) = st.returned.pop_first() {
                st.items -= 1;
                st.bytes -= loc.len;
                let rec = read_record_at(&self.inner, st, loc.pos)?;
                if rec.id != id {
                    return Err(self
                        .inner
                        .corrupt(loc.pos, "record id changed under an open read"));
                }
                if expired(rec.added_at_ms, rec.expires_at_ms) {
                    st.mark_done(id);
                    continue;
                }
                st.open.insert(id, loc);
                return Ok(Some(to_item(rec, loc.error_count)));
            }
            let limit = self.inner.visible();
            let Some(rec) = next_record(&self.inner, st, limit)? else {
                return Ok(None);
            };
            if st.done.contains(&rec.id) {
                continue;
            }
            let len = rec.data.len() as u64;
            st.items = st.items.saturating_sub(1);
            st.bytes = st.bytes.saturating_sub(len);
            if expired(rec.added_at_ms, rec.expires_at_ms) {
                st.mark_done(rec.id);
                continue;
            }
            st.open.insert(
                rec.id,
                Located {
                    pos: rec.pos,
                    len,
                    error_count: 0,
                },
            );
            return Ok(Some(to_item(rec, 0)));
        }
    }
}

/// Counts a thread in `Inner::waiters` for as long as it lives.
struct WaiterGuard<'a>(&'a Inner);

impl<'a> WaiterGuard<'a> {
    fn new(inner: &'a Inner) -> Self {
        inner.waiters.fetch_add(1, Ordering::SeqCst);
        WaiterGuard(inner)
    }
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

fn to_ms_dur(d: Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

fn to_item(rec: ReadRecord, error_count: u32) -> Item {
    Item {
        id: ItemId(rec.id),
        data: rec.data,
        added_at: from_ms(rec.added_at_ms),
        expires_at: rec.expires_at_ms.map(from_ms),
        error_count,
    }
}

/// Drops the reader's oldest waiting item (aborted ones first), reading no further than
/// `limit`. Returns false when nothing could be dropped.
pub(crate) fn drop_oldest(
    inner: &Inner,
    st: &mut ReaderState,
    limit: Pos,
) -> Result<bool, JournalError> {
    if let Some((id, loc)) = st.returned.pop_first() {
        st.items -= 1;
        st.bytes -= loc.len;
        st.mark_done(id);
        return Ok(true);
    }
    while let Some(rec) = next_record(inner, st, limit)? {
        if st.done.contains(&rec.id) {
            continue;
        }
        st.items = st.items.saturating_sub(1);
        st.bytes = st.bytes.saturating_sub(rec.data.len() as u64);
        st.mark_done(rec.id);
        return Ok(true);
    }
    Ok(false)
}

/// Applies a reader's drop-oldest policy after a put; `limit` is where the new item starts.
pub(crate) fn enforce_limits(
    inner: &Inner,
    st: &mut ReaderState,
    limit: Pos,
) -> Result<(), JournalError> {
    while st.is_over(&st.config) {
        if !drop_oldest(inner, st, limit)? {
            break;
        }
    }
    Ok(())
}

/// Reads the record at the reader's cursor if it lies before `limit`, advancing the cursor.
pub(crate) fn next_record(
    inner: &Inner,
    st: &mut ReaderState,
    limit: Pos,
) -> Result<Option<ReadRecord>, JournalError> {
    loop {
        if st.cursor >= limit {
            return Ok(None);
        }
        let end = inner.segment_end(st.cursor.seg);
        match end {
            SegEnd::Open => {
                // The writer's segment: readable up to `limit` (same segment, since cursor < limit).
            }
            SegEnd::Sealed(len) if st.cursor.off < len => {}
            SegEnd::Sealed(_) | SegEnd::Gone => match inner.next_segment_after(st.cursor.seg) {
                Some(next) => {
                    st.cursor = Pos {
                        seg: next,
                        off: SEGMENT_HEADER_LEN as u64,
                    };
                    continue;
                }
                None => return Ok(None),
            },
        }
        let rec = read_record_at(inner, st, st.cursor)?;
        if rec.id < st.cursor_id {
            return Err(inner.corrupt(st.cursor, "item ids are not increasing"));
        }
        st.cursor.off += (RECORD_HEADER_LEN + rec.data.len()) as u64;
        st.cursor_id = rec.id + 1;
        return Ok(Some(rec));
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

fn fill(inner: &Inner, st: &mut ReaderState, pos: Pos, min: usize) -> Result<(), JournalError> {
    let buf = &mut st.buf;
    if buf.file.is_none() || buf.seg_id != pos.seg {
        let path = inner.segment_path(pos.seg);
        let f = inner
            .storage()
            .open_read(&path)
            .map_err(|e| JournalError::io(&path, e))?;
        buf.file = Some(f);
        buf.seg_id = pos.seg;
    }
    let Some(file) = buf.file.as_ref() else {
        return Ok(());
    };
    buf.data.resize(min.max(READ_AHEAD), 0);
    let n = read_at_most(file.as_ref(), &mut buf.data, pos.off)
        .map_err(|e| JournalError::io(inner.segment_path(pos.seg), e))?;
    buf.data.truncate(n);
    buf.start = pos.off;
    Ok(())
}

/// Decodes the record at `pos`, which must be complete and valid.
pub(crate) fn read_record_at(
    inner: &Inner,
    st: &mut ReaderState,
    pos: Pos,
) -> Result<ReadRecord, JournalError> {
    // How many bytes were requested by a read made at exactly `pos` during this call.
    let mut fresh: Option<usize> = None;
    loop {
        let b = &st.buf;
        let in_buf = b.file.is_some()
            && b.seg_id == pos.seg
            && pos.off >= b.start
            && pos.off <= b.start + b.data.len() as u64;
        let wanted = if in_buf {
            let from = (pos.off - b.start) as usize;
            match decode_record(&b.data[from..]) {
                Ok((rec, _)) => {
                    return Ok(ReadRecord {
                        id: rec.id,
                        pos,
                        added_at_ms: rec.added_at_ms,
                        expires_at_ms: rec.expires_at_ms,
                        data: rec.payload.to_vec(),
                    })
                }
                // The buffer may end inside the record, or hold bytes read while the record
                // was being appended: read again from the record's start before judging.
                Err(DecodeError::Incomplete { needed, .. }) if fresh.is_none_or(|n| n < needed) => {
                    needed
                }
                Err(_) if fresh.is_none() => RECORD_HEADER_LEN,
                Err(e) => return Err(inner.corrupt(pos, &e.to_string())),
            }
        } else if fresh.is_none() {
            RECORD_HEADER_LEN
        } else {
            return Err(inner.corrupt(pos, "record lies beyond the end of the file"));
        };
        fill(inner, st, pos, wanted)?;
        fresh = Some(wanted.max(READ_AHEAD));
    }
}

/// Writes the reader's checkpoint. With `force`, writes even if nothing changed.
pub(crate) fn write_checkpoint(
    inner: &Inner,
    shared: &ReaderShared,
    force: bool,
) -> Result<(), JournalError> {
    let mut cp = lock(&shared.cp);
    let data = {
        let mut st = lock(&shared.state);
        if !force && !st.dirty {
            return Ok(());
        }
        st.dirty = false;
        st.checkpoint_data()
    };
    let bytes = encode_checkpoint(&data);
    if let Err(e) = replace_atomically(inner.storage(), &cp.path, &bytes) {
        lock(&shared.state).dirty = true;
        return Err(JournalError::io(&cp.path, e));
    }
    shared.durable_head.fetch_max(data.head, Ordering::SeqCst);
    cp.last_at = Some(inner.config.clock.now());
    Ok(())
}

/// Used by the queue to build readers.
pub(crate) fn new_shared(
    name: String,
    path: PathBuf,
    state: ReaderState,
    durable_head: u64,
) -> Arc<ReaderShared> {
    Arc::new(ReaderShared {
        name: Mutex::new(name),
        state: Mutex::new(state),
        cp: Mutex::new(CpSlot {
            path,
            last_at: None,
        }),
        durable_head: AtomicU64::new(durable_head),
    })
}
