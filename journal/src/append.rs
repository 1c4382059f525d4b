//! Appending records: concurrent puts share one write (leader and followers).
//!
//! A put that finds no other put writing becomes the *leader*: it writes its own records
//! straight from the caller's slices (one `writev` of header and payload, nothing copied) and
//! then, before it lets go, writes whatever other puts queued meanwhile. A put that finds a
//! leader at work is a *follower*: it encodes its records into the pending buffer (one copy)
//! and waits until a leader has written them. So under load many puts cost one system call,
//! and a lone put costs exactly one. Under [`SyncPolicy::Never`] and
//! [`SyncPolicy::Periodic`] that wait is one `write`, so a follower spins on the mark the
//! leader leaves when it steps down (yielding now and then) before it sleeps on the
//! condition variable: sleeping and being woken cost four writers on two cores half their
//! throughput.
//!
//! Under those two policies a put that meets no other put keeps the lock through its
//! write: letting go of it and taking it back costs a lone put two more atomic
//! read-modify-writes (10 to 16 ns of the 145 ns a 128-byte put added to its `write` on
//! the development machine). Puts meet when one finds the lock taken or queues behind a
//! leader; that marks the queue crowded (`Inner::crowded`), and leaders then write outside
//! the lock so that the puts arriving meanwhile queue, until [`CALM_LEADERS`] leaders in a
//! row met nobody. A put that arrives while a lone put writes under the lock waits for that
//! one `write` on the lock.
//!
//! Sharing writes under `Never` and `Periodic` pays only while the followers spin on
//! processors of their own. With more writer threads than processors, the spinning and
//! yielding followers take the processor from the put that writes, and four writers on two
//! processors put about half as fast as one. So under these two policies
//! [`Coalesce`](crate::Coalesce) (resolved once, at open, into `Inner::take_turns`) can
//! make puts take turns instead: every put writes its own records under the writer's lock,
//! and a put that finds the lock taken sleeps in it (`std`'s mutex spins a little first).
//! The thread that holds the lock then runs through many puts while the others sleep. The
//! default turns sharing off on machines with one or two processors.
//!
//! Ids are handed out in the order puts enter, which is the order their bytes reach the file.
//! A batch that fails with a full disk is cut off the file again and fails every put in it
//! (their ids are not reused: ids may jump, never go back); any other write failure poisons
//! the queue. Under [`SyncPolicy::Always`] the leader syncs before anyone in its batches is
//! told their records are written; under [`SyncPolicy::Group`] each put then waits for a
//! group sync (`write.rs`).

use std::io::{self, IoSlice};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::{to_ms, FullPolicy, JournalConfig, PutOptions, SyncPolicy};
use crate::format::{encode_record, encode_record_header, Record, RecordKind, RECORD_HEADER_LEN};
use crate::item::ItemId;
use crate::next::enforce_limits;
use crate::pos::Pos;
use crate::state::{Failure, Inner, Unsynced, Writer};
use crate::storage::{write_all, write_all_vectored, WriteFile};
use crate::sync::proto;
use crate::sync::{lock, read_lock};
use crate::JournalError;

/// A lone put copies a payload up to this size next to its header and writes both with one
/// `write`; a larger one is written with `writev` straight from the caller's slice.
const COPY_LIMIT: usize = 4096;

/// The checksum's steps: 8 bytes at a time from an 8-byte boundary, single bytes before
/// and after it.
const CRC_ALIGN: usize = 8;
static PAD: [u8; CRC_ALIGN] = [0; CRC_ALIGN];

/// A follower under `Never` or `Periodic` checks for its leader this many times per round
/// of its spin, and yields the processor between rounds (`Inner::put_records`). A `write`
/// of a batch takes one to a few microseconds; the budget covers about that many before the
/// follower sleeps. Loom permutes each check, so its models spin once.
#[cfg(not(loom))]
const SPINS_PER_ROUND: u32 = 64;
#[cfg(not(loom))]
const SPIN_ROUNDS: u32 = 16;
#[cfg(loom)]
const SPINS_PER_ROUND: u32 = 1;
#[cfg(loom)]
const SPIN_ROUNDS: u32 = 1;

/// After this many leaders in a row met no other put, `Inner::crowded` is cleared and
/// lone puts write under the writer's lock again. Loom models clear it after one, and
/// start crowded, so that both ways and the switches between them are explored.
#[cfg(not(loom))]
const CALM_LEADERS: u32 = 1024;
#[cfg(loom)]
const CALM_LEADERS: u32 = 1;

/// Whether a queue starts with `Inner::crowded` set (see [`CALM_LEADERS`]).
pub(crate) const CROWDED_AT_OPEN: bool = cfg!(loom);

/// Whether puts on a queue opened with `config` take turns at the writer's lock instead of
/// sharing writes (`Inner::take_turns`, [`Coalesce`](crate::Coalesce)): only under `Never` and `Periodic`.
/// Loom models resolve [`Coalesce::Auto`](crate::Coalesce::Auto) as sharing, so that they explore followers.
pub(crate) fn takes_turns(config: &JournalConfig) -> bool {
    if config.sync.is_durable_on_put() {
        return false;
    }
    let processors = if cfg!(loom) {
        usize::MAX
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    };
    !config.coalesce.resolve(processors)
}

impl Inner {
    /// Appends `items` (consecutive ids) and returns the first id once they are as durable
    /// as the sync policy promises.
    pub(crate) fn put_records(
        &self,
        items: &[&[u8]],
        opts: PutOptions,
    ) -> Result<u64, JournalError> {
        self.check_open()?;
        self.check_writable("put")?;
        for d in items {
            if d.len() > self.config.max_item_size {
                return Err(JournalError::ItemTooLarge {
                    size: d.len(),
                    max: self.config.max_item_size,
                });
            }
        }
        if items.is_empty() {
            return Ok(proto::lock(&self.writer).next_id);
        }
        let added_at_ms = self.config.clock.now_ms();
        let expires_at_ms = opts.expires_at.map(to_ms);
        let n = items.len() as u64;
        let bytes: u64 = items.iter().map(|d| d.len() as u64).sum();

        // On a crowded queue puts meet as followers (which keeps the mark); otherwise a put
        // finds out whether it meets another one by trying the lock first.
        let mut w = if self.take_turns || self.crowded.load(proto::Ordering::Relaxed) {
            proto::lock(&self.writer)
        } else if let Some(w) = proto::try_lock(&self.writer) {
            w
        } else {
            // Another put (or the queue's upkeep) holds the lock: puts are meeting, so
            // leaders go back to writing outside the lock.
            self.crowded.store(true, proto::Ordering::Relaxed);
            let mut w = proto::lock(&self.writer);
            w.calm = 0;
            w
        };
        self.check_open()?;
        self.check_poisoned()?;
        let limited = self.limited.load(Ordering::Acquire);
        if limited {
            self.check_room(n, bytes)?;
        }
        let first = w.next_id;
        w.next_id += n;
        // Only changed under the writer's lock: a load and a store, no read-modify-write.
        bump(&self.put_items, n);
        bump(&self.put_bytes, bytes);
        let (w, result) = if w.leading {
            // A follower: queue the records for the leader and wait.
            w.calm = 0;
            if w.pending.is_empty() {
                w.pending_first = first;
            }
            for (i, d) in items.iter().enumerate() {
                let rec = record(first + i as u64, added_at_ms, expires_at_ms, d);
                encode_record(&rec, &mut w.pending);
            }
            w.pending_last = first + n - 1;
            w.pending_followers += 1;
            if !self.config.sync.is_durable_on_put() {
                // Under Never and Periodic the wait is one `write` of the leader, shorter
                // than falling asleep and being woken (two system calls, and on a busy
                // machine a trip through the scheduler): spin first. A leader that stepped
                // down with no failed batch kept has written and published this put, and
                // with no reader limits to enforce nothing is left to do under the lock.
                drop(w);
                let done = self.spin_until_stepped_down(first);
                if done && !limited && !self.failures_kept.load(proto::Ordering::Acquire) {
                    return Ok(first);
                }
                w = proto::lock(&self.writer);
            }
            self.await_batch(w, first)
        } else if w.map.is_some()
            || self.take_turns
            || (!self.config.sync.is_durable_on_put()
                && !self.crowded.load(proto::Ordering::Relaxed))
        {
            // Alone, under `Never` or `Periodic`: write under the lock. Nobody is leading, so
            // nothing is queued, and a put arriving now finds the lock taken, marks the
            // queue crowded and waits for this one `write`; letting go of the lock around
            // the write and taking it again would cost every lone put a lock round trip.
            // With a mapped segment every put comes here, crowded or not: its records are
            // stored into the map (`mapped.rs`), which takes less than a leader's hand-off.
            let start = w.offset;
            let written = match w.store(items, first, added_at_ms, expires_at_ms) {
                Ok(Some(len)) => Ok(len),
                Ok(None) => {
                    let (file, buf) = w.file_and_own();
                    let written =
                        write_records(file, buf, items, first, added_at_ms, expires_at_ms);
                    if buf.capacity() > CRC_ALIGN + COPY_LIMIT + RECORD_HEADER_LEN {
                        *buf = Vec::new();
                    }
                    written
                }
                Err(e) => Err(e),
            };
            let own = self.settle(&mut w, start, written, first, first + n - 1, 0);
            let (w, synced) = self.lead(w);
            (w, self.outcome(own, synced))
        } else {
            w.leading = true;
            let file = w.lend();
            let start = w.offset;
            let mut buf = std::mem::take(&mut w.own);
            drop(w);
            let written = write_records(
                file.as_ref(),
                &mut buf,
                items,
                first,
                added_at_ms,
                expires_at_ms,
            );
            let mut w = proto::lock(&self.writer);
            w.give_back(file);
            if buf.capacity() <= CRC_ALIGN + COPY_LIMIT + RECORD_HEADER_LEN {
                w.own = buf;
            }
            let own = self.settle(&mut w, start, written, first, first + n - 1, 0);
            let (w, synced) = self.lead(w);
            (w, self.outcome(own, synced))
        };
        let end = w.end();
        if result.is_err() {
            bump(&self.put_items, n.wrapping_neg());
            bump(&self.put_bytes, bytes.wrapping_neg());
        }
        drop(w);
        result?;
        if self.limited.load(Ordering::Acquire) {
            self.drop_for_room(end);
        }
        if self.config.sync == SyncPolicy::Group {
            self.wait_durable(end)?;
        }
        Ok(first)
    }

    /// Puts `items` with consecutive ids in one write; see `JournaledQueue::put_many`.
    pub(crate) fn put_many(&self, items: &[&[u8]]) -> Result<Vec<ItemId>, JournalError> {
        let first = self.put_records(items, PutOptions::default())?;
        self.sync_if_due();
        Ok((0..items.len() as u64).map(|i| ItemId(first + i)).collect())
    }

    /// A follower waits until a leader wrote (and under `Always` synced) or failed the
    /// batch holding `first`.
    fn await_batch<'a>(
        &'a self,
        mut w: proto::MutexGuard<'a, Writer>,
        first: u64,
    ) -> (proto::MutexGuard<'a, Writer>, Result<(), JournalError>) {
        while w.done_id < first {
            w.sleepers += 1;
            w = self.written_cv.wait(w).unwrap_or_else(|p| p.into_inner());
            w.sleepers -= 1;
        }
        let failed = w
            .failures
            .iter()
            .position(|f| f.first <= first && first <= f.last);
        let Some(i) = failed else {
            return (w, Ok(()));
        };
        let f = &mut w.failures[i];
        let err = f.error();
        f.waiting -= 1;
        if f.waiting == 0 {
            w.failures.remove(i);
            if w.failures.is_empty() && w.sleepers > 0 {
                // `idle_writer` waits for this; it runs once the caller, still holding
                // the lock, has taken this put back out of the totals.
                self.written_cv.notify_all();
            }
        }
        (w, Err(err))
    }

    /// The outcome of a leader's put: the error of its own write, or else of the sync
    /// `Always` needs if [`Inner::lead`] found that it failed (which poisoned the queue).
    #[inline(always)]
    fn outcome(&self, own: Result<(), JournalError>, synced: bool) -> Result<(), JournalError> {
        own?;
        if synced {
            Ok(())
        } else {
            self.check_poisoned()
        }
    }

    /// The leader writes what followers queued, rotates and (under `Always`) syncs, then
    /// steps down and wakes the followers. Returns whether the sync `Always` needs covered
    /// everything written (always true under the other policies); when it did not, the
    /// queue is poisoned. A flag rather than the error: the error is as large as eight
    /// words, and moving it out of here cost every put a few dozen instructions.
    fn lead<'a>(
        &'a self,
        mut w: proto::MutexGuard<'a, Writer>,
    ) -> (proto::MutexGuard<'a, Writer>, bool) {
        let always = self.config.sync == SyncPolicy::Always;
        let mut synced = true;
        loop {
            while !w.pending.is_empty() {
                let spare = std::mem::take(&mut w.spare);
                let batch = std::mem::replace(&mut w.pending, spare);
                let (first, last) = (w.pending_first, w.pending_last);
                let followers = std::mem::take(&mut w.pending_followers);
                if let Err(e) = self.check_poisoned() {
                    // Nothing more is written once poisoned.
                    w.failures.push(Failure::new(first, last, &e, followers));
                    w.done_id = w.done_id.max(last);
                } else {
                    let file = w.lend();
                    let start = w.offset;
                    drop(w);
                    let written = write_all(file.as_ref(), &batch).map(|()| batch.len() as u64);
                    w = proto::lock(&self.writer);
                    w.give_back(file);
                    let _ = self.settle(&mut w, start, written, first, last, followers);
                }
                let mut batch = batch;
                batch.clear();
                w.spare = batch;
            }
            let healthy = self.check_poisoned().is_ok();
            if healthy {
                self.reserve_ahead(&mut w);
                self.create_next_ahead(&mut w);
            }
            if healthy && w.offset >= self.config.segment_size && w.offset != w.rotation_stuck_at {
                // Under Always and Group rotation syncs the sealed segment first, which
                // covers everything written so far (also when the disk had no room for
                // the next segment: the writer then stays where it is, `rotation_stuck`).
                match self.rotate(&mut w) {
                    Ok(()) => {
                        w.rotation_stuck_at = 0;
                        self.synced_all(&mut w);
                    }
                    Err(e) if e.is_storage_full() => self.synced_all(&mut w),
                    Err(e) => {
                        self.poison(format!("segment rotation failed: {e}"));
                    }
                }
                continue;
            }
            let end = w.end();
            match self.config.sync {
                SyncPolicy::Always if healthy && !w.unsynced.is_empty() => {
                    let file = w.lend();
                    // Nobody else writes while this thread leads; syncing outside the lock
                    // lets more puts queue up for the next batch.
                    drop(w);
                    let result = file.sync_data();
                    w = proto::lock(&self.writer);
                    w.give_back(file);
                    match result {
                        Ok(()) => {
                            self.mark_synced(end);
                            self.publish_held(&w, end);
                            self.synced_all(&mut w);
                        }
                        Err(e) => {
                            self.poison(format!("fdatasync failed: {e}"));
                        }
                    }
                    if !w.pending.is_empty() {
                        // Puts queued during the sync: write and sync them too before
                        // stepping down, so none of them is left without a leader.
                        continue;
                    }
                }
                SyncPolicy::Never | SyncPolicy::Periodic(_) => self.publish_held(&w, end),
                _ => {}
            }
            break;
        }
        if always && let Err(e) = self.check_poisoned() {
            // What the failed sync should have covered fails, the leader's own included.
            for b in std::mem::take(&mut w.unsynced) {
                if b.followers > 0 {
                    w.failures
                        .push(Failure::new(b.first, b.last, &e, b.followers));
                }
            }
            synced = false;
        }
        w.done_id = w.next_id - 1;
        w.leading = false;
        if w.calm < CALM_LEADERS {
            w.calm += 1;
            if w.calm == CALM_LEADERS {
                self.crowded.store(false, proto::Ordering::Relaxed);
            }
        }
        self.failures_kept
            .store(!w.failures.is_empty(), proto::Ordering::Relaxed);
        self.stepped_down.store(w.done_id, proto::Ordering::Release);
        if w.sleepers > 0 {
            // Notifying costs a system call even when nobody waits.
            self.written_cv.notify_all();
        }
        (w, synced)
    }

    /// Spins, yielding the processor now and then (the leader may be waiting for one),
    /// until a leader stepped down with `first` done (true) or the spin budget is spent.
    fn spin_until_stepped_down(&self, first: u64) -> bool {
        for round in 0..SPIN_ROUNDS {
            for _ in 0..SPINS_PER_ROUND {
                if self.stepped_down.load(proto::Ordering::Acquire) >= first {
                    return true;
                }
                proto::spin_loop();
            }
            if round + 1 < SPIN_ROUNDS {
                proto::yield_now();
            }
        }
        false
    }

    /// Under `Always`: everything written so far is durable.
    fn synced_all(&self, w: &mut Writer) {
        if let Some(last) = w.unsynced.last().map(|b| b.last) {
            w.done_id = w.done_id.max(last);
        }
        w.unsynced.clear();
    }

    /// Records the outcome of writing the batch of ids `first..=last` (queued by
    /// `followers` followers) at `start`. Inlined for the written case; a failure is handled
    /// out of line.
    #[inline(always)]
    fn settle(
        &self,
        w: &mut Writer,
        start: u64,
        written: io::Result<u64>,
        first: u64,
        last: u64,
        followers: usize,
    ) -> Result<(), JournalError> {
        match written {
            Ok(len) => {
                w.offset = start + len;
                if self.config.sync == SyncPolicy::Always {
                    w.unsynced.push(Unsynced {
                        first,
                        last,
                        followers,
                    });
                } else {
                    w.done_id = w.done_id.max(last);
                }
                Ok(())
            }
            Err(e) => self.settle_failed(w, start, e, first, last, followers),
        }
    }

    /// The write of the batch `first..=last` at `start` failed: cut it off again, and fail
    /// the batch (a full disk) or poison the queue (anything else).
    #[cold]
    fn settle_failed(
        &self,
        w: &mut Writer,
        start: u64,
        e: io::Error,
        first: u64,
        last: u64,
        followers: usize,
    ) -> Result<(), JournalError> {
        let path = self.segment_path(w.seg_id);
        let undone = w.file().set_len(start);
        let err = if e.kind() == io::ErrorKind::StorageFull && undone.is_ok() {
            JournalError::io(path, e)
        } else {
            self.poison(format!("write to {} failed: {e}", path.display()))
        };
        w.offset = start;
        if followers > 0 {
            w.failures.push(Failure::new(first, last, &err, followers));
        }
        if self.config.sync != SyncPolicy::Always {
            w.done_id = w.done_id.max(last);
        }
        Err(err)
    }

    /// Refuses a put that would take a reader with [`FullPolicy::Refuse`] over its limits.
    fn check_room(&self, n: u64, bytes: u64) -> Result<(), JournalError> {
        let (items_now, bytes_now) = self.put_totals();
        for r in read_lock(&self.readers).iter() {
            let st = lock(&r.state);
            if st.config.full_policy == FullPolicy::Refuse
                && st.would_overflow((items_now, bytes_now), n, bytes)
            {
                return Err(JournalError::Full { reader: r.name() });
            }
        }
        Ok(())
    }

    /// Lets readers with [`FullPolicy::DropOldest`] drop their oldest items, reading no
    /// further than `limit`.
    fn drop_for_room(&self, limit: Pos) {
        let totals = self.put_totals();
        for r in read_lock(&self.readers).iter() {
            let mut st = lock(&r.state);
            if st.config.full_policy == FullPolicy::DropOldest
                && let Err(e) = enforce_limits(self, &mut st, totals, limit)
            {
                tracing::warn!(queue = %self.name, reader = %r.name(), error = %e, "could not drop oldest items");
            }
        }
    }
}

/// The record of item `id`.
fn record(id: u64, added_at_ms: u64, expires_at_ms: Option<u64>, d: &[u8]) -> Record<'_> {
    Record {
        kind: RecordKind::Item,
        id,
        added_at_ms,
        expires_at_ms,
        payload: d,
    }
}

/// A leader writes the records of its own `items` (ids from `first`) to `file` and
/// returns the bytes written. `buf` is the writer's reusable buffer for a small record.
#[inline(always)]
fn write_records(
    file: &dyn WriteFile,
    buf: &mut Vec<u8>,
    items: &[&[u8]],
    first: u64,
    added_at_ms: u64,
    expires_at_ms: Option<u64>,
) -> io::Result<u64> {
    if let [d] = items {
        // The common case: one record. A small one is encoded into the writer's reusable
        // buffer next to its header and written with one `write` (a second iovec costs the
        // kernel more than the copy); a larger one is written with one `writev` from the
        // caller's slice.
        let rec = record(first, added_at_ms, expires_at_ms, d);
        if d.len() <= COPY_LIMIT {
            buf.clear();
            // The checksum covers the record from its fifth byte: padding in front puts
            // that byte on an 8-byte boundary, so the checksum runs in 8-byte steps only (a
            // one-byte step takes as long as an 8-byte one).
            buf.reserve(CRC_ALIGN + RECORD_HEADER_LEN + d.len());
            let pad = (CRC_ALIGN - (buf.as_ptr() as usize + 4) % CRC_ALIGN) % CRC_ALIGN;
            // Eight bytes copied and cut back: a fixed-size copy is inlined.
            buf.extend_from_slice(&PAD);
            buf.truncate(pad);
            encode_record(&rec, buf);
            let len = buf.len() - pad;
            write_all(file, &buf[pad..]).map(|()| len as u64)
        } else {
            let h = encode_record_header(&rec);
            write_all_vectored(file, &[IoSlice::new(&h), IoSlice::new(d)])
        }
    } else {
        let headers: Vec<[u8; RECORD_HEADER_LEN]> = items
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let id = first + i as u64;
                encode_record_header(&record(id, added_at_ms, expires_at_ms, d))
            })
            .collect();
        let slices: Vec<IoSlice<'_>> = headers
            .iter()
            .zip(items)
            .flat_map(|(h, d)| [IoSlice::new(h), IoSlice::new(d)])
            .collect();
        write_all_vectored(file, &slices)
    }
}

/// Adds `by` (wrapping) to a put total; only called under the writer's lock.
fn bump(total: &AtomicU64, by: u64) {
    total.store(
        total.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Release,
    );
}
