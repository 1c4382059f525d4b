//! The public reader handle: open reads, commits and aborts, peeking, expiry sweeps, sinks
//! and counters.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::from_ms;
use crate::format::RECORD_HEADER_LEN;
use crate::item::{Item, ItemId};
use crate::next::{duration_ms, look, take, Candidate};
use crate::read::{read_record_at, ReadRecord};
use crate::reader_state::{ReaderShared, ReaderState};
use crate::retire::write_checkpoint;
use crate::sink::Sink;
use crate::state::Inner;
use crate::stats::ReaderStats;
use crate::sync::lock;
use crate::JournalError;

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
/// assert_eq!(&item.data[..], b"one");
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
    /// come first. Expired items are never delivered: each one met on the way is handed to
    /// the expired-item sink (see [`Reader::set_expired_sink`]) or dropped. A checkpoint
    /// found due is written; if that fails, the item is returned all the same and the
    /// failure logged (here and in every call that writes a due checkpoint: `peek`,
    /// `get_timeout`, `commit`, `abort`, `discard_expired`).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let r = q.reader("").unwrap();
    /// assert!(r.get().unwrap().is_none());
    /// ```
    pub fn get(&self) -> Result<Option<Item>, JournalError> {
        self.check()?;
        let now_ms = self.inner.config.clock.coarse_now_ms();
        let (item, due) = self.next(now_ms, Want::Open)?;
        if due {
            self.checkpoint_due(now_ms);
        }
        Ok(item)
    }

    /// The item [`Reader::get`] would deliver next, without taking it (no open read is made
    /// and nothing is counted). Expired items met on the way are handled as `get` does.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let r = q.reader("").unwrap();
    /// q.put(b"next").unwrap();
    /// assert_eq!(&r.peek().unwrap().unwrap().data[..], b"next");
    /// assert_eq!(r.len(), 1);
    /// assert_eq!(&r.get().unwrap().unwrap().data[..], b"next");
    /// ```
    pub fn peek(&self) -> Result<Option<Item>, JournalError> {
        self.check()?;
        let now_ms = self.inner.config.clock.coarse_now_ms();
        let (item, due) = self.next(now_ms, Want::Peek)?;
        if due {
            self.checkpoint_due(now_ms);
        }
        Ok(item)
    }

    /// Takes up to `limit` expired items off the front of the reader (aborted items first,
    /// then the stream, stopping at the first item that is not expired) and hands each to
    /// the expired-item sink, or drops it. Returns how many were taken. This is the sweep
    /// that keeps expired items from piling up in a reader nobody reads; `get` and `peek`
    /// do the same on their way without a limit.
    ///
    /// ```
    /// use fairq_journal::{JournalConfig, JournaledQueue, ManualClock, PutOptions};
    /// use std::sync::Arc;
    /// use std::time::{Duration, UNIX_EPOCH};
    /// let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(100));
    /// let dir = tempfile::tempdir().unwrap();
    /// let cfg = JournalConfig { clock: Arc::new(clock.clone()), ..Default::default() };
    /// let q = JournaledQueue::open(dir.path(), "q", cfg).unwrap();
    /// let r = q.reader("").unwrap();
    /// let soon = PutOptions { expires_at: Some(UNIX_EPOCH + Duration::from_secs(101)) };
    /// for _ in 0..3 {
    ///     q.put_with(b"stale soon", soon).unwrap();
    /// }
    /// q.put(b"fresh").unwrap();
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(r.discard_expired(2).unwrap(), 2);
    /// assert_eq!(r.discard_expired(10).unwrap(), 1);
    /// assert_eq!(r.len(), 1);
    /// ```
    pub fn discard_expired(&self, limit: u64) -> Result<u64, JournalError> {
        self.check()?;
        let now_ms = self.inner.config.clock.coarse_now_ms();
        let mut taken = 0;
        while taken < limit {
            let mut st = lock(&self.shared.state);
            let Some(c) = look(&self.inner, &mut st, None)? else {
                break;
            };
            if !c.is_expired(&st.config, now_ms) {
                break;
            }
            self.expire(st, c)?;
            taken += 1;
        }
        self.checkpoint_if_due(now_ms);
        Ok(taken)
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
        let _waiting = self.inner.bell.enter();
        loop {
            let seen = self.inner.bell.generation();
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
            let closed = || self.inner.closed.load(Ordering::Acquire);
            self.inner.bell.wait(seen, remaining, closed);
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
        self.check()?;
        let now_ms = self.inner.config.clock.coarse_now_ms();
        let due = {
            let mut st = lock(&self.shared.state);
            if st.open.remove(id.0).is_none() {
                return Err(JournalError::NotOpen(id));
            }
            st.mark_done(id.0);
            st.counters.committed += 1;
            st.checkpoint_is_due(now_ms)
        };
        if due {
            self.checkpoint_due(now_ms);
        }
        Ok(())
    }

    /// Returns an open read to the front of the reader; it is delivered again, first, with
    /// its error count increased. With [`ReaderConfig::max_errors`](crate::ReaderConfig)
    /// set, an item whose error count goes over it is not returned but handed to the error
    /// sink (see [`Reader::set_error_sink`]), or dropped without one. If the sink fails, the
    /// item is returned as usual and the sink's error is returned.
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
        self.check()?;
        let now_ms = self.inner.config.clock.coarse_now_ms();
        let result = self.abort_at(id);
        self.checkpoint_if_due(now_ms);
        result
    }

    fn abort_at(&self, id: ItemId) -> Result<(), JournalError> {
        let mut st = lock(&self.shared.state);
        let Some(loc) = st.open.get(id.0).copied() else {
            return Err(JournalError::NotOpen(id));
        };
        st.counters.aborted += 1;
        let errors = loc.error_count.saturating_add(1);
        if st.config.max_errors.is_none_or(|max| errors <= max) {
            return_to_front(&mut st, id.0, errors);
            drop(st);
            self.inner.bell.ring();
            return Ok(());
        }
        // A dead letter: to the error sink, or dropped.
        let Some(sink) = lock(&self.shared.sinks).errors.clone() else {
            tracing::warn!(queue = %self.inner.name, reader = %self.shared.name(), item = id.0, errors, "dropping an item aborted more often than max_errors (no error sink)");
            st.open.remove(id.0);
            st.mark_done(id.0);
            st.counters.discarded += 1;
            return Ok(());
        };
        let avail = (RECORD_HEADER_LEN as u64) + loc.len;
        let item = to_item(
            read_record_at(&self.inner, &mut st, loc.pos, avail)?,
            errors,
        );
        drop(st);
        let delivered = sink.deliver(&self.shared.name(), &item);
        let mut st = lock(&self.shared.state);
        if st.open.remove(id.0).is_none() {
            // Finished by another thread meanwhile.
            return delivered;
        }
        match delivered {
            Ok(()) => {
                st.mark_done(id.0);
                st.counters.dead_lettered += 1;
                Ok(())
            }
            Err(e) => {
                st.open.insert(id.0, loc);
                return_to_front(&mut st, id.0, errors);
                drop(st);
                self.inner.bell.ring();
                Err(e)
            }
        }
    }

    /// Sets where expired items go (`None`: they are dropped). Kept for this reader while
    /// the queue is open; not stored on disk.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let late = fairq_journal::JournaledQueue::open(dir.path(), "late", Default::default()).unwrap();
    /// q.reader("").unwrap().set_expired_sink(Some(fairq_journal::Sink::queue(&late)));
    /// ```
    pub fn set_expired_sink(&self, sink: Option<Sink>) {
        lock(&self.shared.sinks).expired = sink;
    }

    /// Sets where items aborted more than `max_errors` times go (`None`: they are dropped).
    /// Kept for this reader while the queue is open; not stored on disk.
    ///
    /// ```
    /// use fairq_journal::{JournaledQueue, ReaderConfig, Sink};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let dead = JournaledQueue::open(dir.path(), "q-dead", Default::default()).unwrap();
    /// let r = q.reader_with("w", ReaderConfig { max_errors: Some(2), ..Default::default() }).unwrap();
    /// r.set_error_sink(Some(Sink::queue(&dead)));
    /// q.put(b"poison").unwrap();
    /// for _ in 0..3 {
    ///     let item = r.get().unwrap().unwrap();
    ///     r.abort(item.id).unwrap();
    /// }
    /// assert!(r.get().unwrap().is_none());
    /// assert_eq!(&dead.reader("").unwrap().get().unwrap().unwrap().data[..], b"poison");
    /// ```
    pub fn set_error_sink(&self, sink: Option<Sink>) {
        lock(&self.shared.sinks).errors = sink;
    }

    /// The reader's counters and the age of its oldest waiting item.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let q = fairq_journal::JournaledQueue::open(dir.path(), "q", Default::default()).unwrap();
    /// let r = q.reader("").unwrap();
    /// assert_eq!(r.stats().unwrap().oldest_age, None);
    /// ```
    pub fn stats(&self) -> Result<ReaderStats, JournalError> {
        self.check()?;
        let now_ms = self.inner.config.clock.coarse_now_ms();
        let puts = self
            .inner
            .put_items
            .load(Ordering::Acquire)
            .wrapping_sub(self.shared.puts_base);
        let mut st = lock(&self.shared.state);
        let oldest = look(&self.inner, &mut st, None)?.map(|c| c.rec.added_at_ms);
        let c = st.counters;
        let (items, bytes) = st.waiting(self.inner.put_totals());
        Ok(ReaderStats {
            items,
            bytes,
            open_reads: st.open.len() as u64,
            puts,
            get_hits: c.get_hits,
            get_misses: c.get_misses,
            expired: c.expired,
            discarded: c.discarded,
            opened: c.opened,
            aborted: c.aborted,
            committed: c.committed,
            dead_lettered: c.dead_lettered,
            oldest_age: oldest.map(|a| Duration::from_millis(now_ms.saturating_sub(a))),
        })
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
        lock(&self.shared.state).waiting(self.inner.put_totals()).0
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
        lock(&self.shared.state).waiting(self.inner.put_totals()).1
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
        self.check()?;
        self.inner.check_writable("checkpoint")?;
        write_checkpoint(&self.inner, &self.shared, true)?;
        self.inner.collect_segments()
    }

    /// Writes the checkpoint if the reader changed and the interval has passed.
    fn checkpoint_if_due(&self, now_ms: u64) {
        if lock(&self.shared.state).checkpoint_is_due(now_ms) {
            self.checkpoint_due(now_ms);
        }
    }

    /// Writes a checkpoint found due, and retires what it lets go.
    ///
    /// A failure does not fail the call that found the checkpoint due: that call has taken
    /// its item or made its change already, and an error would hide it from the caller (an
    /// item taken as an open read would be stranded until the queue is reopened, a commit
    /// made would look refused). It is logged, the reader stays changed, and the checkpoint
    /// is tried again once the interval has passed; [`Reader::checkpoint`] and
    /// [`JournaledQueue::close`](crate::JournaledQueue::close) report their failures. A
    /// checkpoint is no promise of a commit (until it is written, a crash delivers the item
    /// again), so nothing acknowledged depends on it.
    fn checkpoint_due(&self, now_ms: u64) {
        let written = write_checkpoint(&self.inner, &self.shared, false)
            .and_then(|()| self.inner.collect_segments());
        if let Err(e) = written {
            // Not at every call while the disk refuses: after the interval.
            lock(&self.shared.state).checkpoint_due_ms =
                now_ms.saturating_add(duration_ms(self.inner.config.checkpoint_interval));
            tracing::warn!(queue = %self.inner.name, reader = %self.shared.name(), error = %e, "a due checkpoint failed; trying again after the checkpoint interval");
        }
    }

    fn check(&self) -> Result<(), JournalError> {
        self.inner.check_open()?;
        if self.shared.removed.load(Ordering::Acquire) {
            return Err(JournalError::ReaderRemoved(self.shared.name()));
        }
        Ok(())
    }

    /// The next live item: opened (for `get`, which counts a hit or a miss) or only looked
    /// at (for `peek`), and whether a checkpoint is due. Expired items on the way are taken
    /// out with [`Reader::expire`].
    fn next(&self, now_ms: u64, want: Want) -> Result<(Option<Item>, bool), JournalError> {
        loop {
            let mut st = lock(&self.shared.state);
            let Some(c) = look(&self.inner, &mut st, None)? else {
                if want == Want::Open {
                    st.counters.get_misses += 1;
                }
                return Ok((None, st.checkpoint_is_due(now_ms)));
            };
            if c.is_expired(&st.config, now_ms) {
                self.expire(st, c)?;
                continue;
            }
            let loc = c.loc;
            if want == Want::Open {
                take(&mut st, &c);
                st.open.insert(c.rec.id, loc);
                st.counters.opened += 1;
                st.counters.get_hits += 1;
            }
            let due = st.checkpoint_is_due(now_ms);
            return Ok((Some(to_item(c.rec, loc.error_count)), due));
        }
    }

    /// Takes an expired candidate out of the reader: to the expired-item sink (while it is
    /// held as an open read, so a crash before the sink took it keeps it), or dropped.
    fn expire(
        &self,
        mut st: std::sync::MutexGuard<'_, ReaderState>,
        c: Candidate,
    ) -> Result<(), JournalError> {
        take(&mut st, &c);
        st.counters.expired += 1;
        let id = c.rec.id;
        let Some(sink) = lock(&self.shared.sinks).expired.clone() else {
            st.mark_done(id);
            return Ok(());
        };
        let loc = c.loc;
        st.open.insert(id, loc);
        drop(st);
        let delivered = sink.deliver(&self.shared.name(), &to_item(c.rec, loc.error_count));
        let mut st = lock(&self.shared.state);
        if st.open.remove(id).is_some() {
            match &delivered {
                Ok(()) => st.mark_done(id),
                Err(_) => {
                    st.counters.expired -= 1;
                    st.open.insert(id, loc);
                    return_to_front(&mut st, id, loc.error_count);
                }
            }
        }
        delivered
    }
}

/// Whether `next` opens the item or only looks at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Open,
    Peek,
}

/// Moves an open read back to the front of the waiting items with `errors` as its count.
fn return_to_front(st: &mut ReaderState, id: u64, errors: u32) {
    if let Some(mut loc) = st.open.remove(id) {
        loc.error_count = errors;
        st.came_back(loc.len);
        st.returned.insert(id, loc);
        // The new error count belongs in the next checkpoint.
        st.dirty = true;
    }
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
