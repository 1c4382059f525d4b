//! The journal writer: one thread that turns queued change batches into durable frames,
//! reads them back and commits what the [`Ledger`] no longer needs.
//!
//! Requests apply their change to the in-memory [`Store`] and queue its encoded records while
//! still holding the store's lock, so the queue's order is the order of the changes. The
//! writer takes everything queued since its last write and puts it into one journal item
//! (group commit: one sync for every request that waited meanwhile), then acknowledges those
//! requests. A failed write poisons the store: nothing
//! later is written, and every request fails until the store is reopened.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use fairq_core::job::Millis;
use fairq_journal::{ItemId, JournaledQueue, Reader};
use fairq_worker::memory::store::Store;
use fairq_worker::{BackendError, Clock, JobId, Random};
use tokio::sync::{Notify, oneshot};

use crate::error::FileError;
use crate::frame::{Batch, frame_header};
use crate::ledger::{Entity, Ledger, Touch};
use crate::totals::QueueTotals;

/// Records moved per relocation round, at most (and at most a frame's target in bytes).
const RELOCATE_BUDGET: usize = 512;

/// The size at which frames are cut at batch boundaries, for a journal whose items hold at
/// most `max_item_size` bytes: a 128th of it (8 MiB of 1 GiB), so that a frame of several
/// batches, or a relocation's records, is always far from the limit.
pub(crate) fn frame_target(max_item_size: usize) -> usize {
    (max_item_size / 128).max(1)
}

/// Locks a mutex, recovering the data if a thread panicked while holding it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The store's state behind one lock.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) store: Store,
    pub(crate) totals: BTreeMap<String, QueueTotals>,
    /// Queues whose run-time histogram changed since their last persisted totals.
    pub(crate) hist_dirty: BTreeSet<String>,
    /// Queues removed since the last frame was encoded: their tombstones go in the next one.
    pub(crate) removed_queues: Vec<String>,
    /// Queues paused or resumed since the last frame was encoded: their totals, which hold
    /// the flag, go in the next one.
    pub(crate) pause_changed: Vec<String>,
    pub(crate) poisoned: Option<String>,
    pub(crate) closed: bool,
}

impl State {
    /// Whether `queue` is paused (see `pause.rs`).
    pub(crate) fn is_paused(&self, queue: &str) -> bool {
        self.totals.get(queue).is_some_and(|t| t.paused)
    }

    /// The paused queues, by name.
    pub(crate) fn paused_queues(&self) -> Vec<String> {
        self.totals
            .iter()
            .filter(|(_, t)| t.paused)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Fails when the store cannot take requests.
    pub(crate) fn usable(&self) -> Result<(), FileError> {
        if self.closed {
            return Err(FileError::Closed);
        }
        match &self.poisoned {
            Some(reason) => Err(FileError::Poisoned {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// Why a request's change was not written.
#[derive(Debug, Clone)]
pub(crate) struct WriteFailure {
    /// What went wrong (also the reason the store is poisoned).
    reason: String,
    /// The disk is full: the request is told so, and what it did not record.
    disk_full: bool,
    /// The changes of the request that were not recorded.
    unrecorded: String,
}

/// The acknowledgement a request waits for.
pub(crate) type Ack = oneshot::Receiver<Result<(), WriteFailure>>;

struct Queued {
    batch: Batch,
    next_id: u64,
    ack: Option<oneshot::Sender<Result<(), WriteFailure>>>,
}

/// The jobs whose changes `touches` hold, for an error message ("jobs 4, 5 and 3 more").
fn describe(touches: &[Touch]) -> String {
    let mut jobs = BTreeSet::new();
    let mut queues = BTreeSet::new();
    for touch in touches {
        match touch {
            Touch::Job(id) | Touch::Progress(id) | Touch::Deleted(id) => {
                jobs.insert(id.0);
            }
            Touch::Queue(name) | Touch::QueueRemoved(name) => {
                queues.insert(name.as_str());
            }
        }
    }
    const SHOWN: usize = 5;
    let mut text = match jobs.len() {
        0 => String::new(),
        1 => "the change to job ".to_string(),
        _ => "the changes to jobs ".to_string(),
    };
    let listed: Vec<String> = jobs.iter().take(SHOWN).map(u64::to_string).collect();
    text.push_str(&listed.join(", "));
    if jobs.len() > SHOWN {
        text.push_str(&format!(" and {} more", jobs.len() - SHOWN));
    }
    if jobs.is_empty() {
        text.push_str(if queues.is_empty() {
            ""
        } else {
            "the counters of this call's queues"
        });
    }
    text
}

#[derive(Default)]
struct Pending {
    batches: Vec<Queued>,
    stop: bool,
    /// The writer is waiting for work: the next batch must wake it. While it is busy it
    /// takes whatever queued meanwhile without being told, so a request costs no wake-up.
    idle: bool,
    /// The writer took batches and has not yet answered them all.
    busy: bool,
}

/// What request handlers and the writer thread share.
pub(crate) struct Shared {
    pub(crate) dir: PathBuf,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) random: Arc<dyn Random>,
    pub(crate) state: Mutex<State>,
    pending: Mutex<Pending>,
    pending_cv: Condvar,
    wakers: Mutex<HashMap<String, Arc<Notify>>>,
    /// One frame per batch (no group commit).
    pub(crate) one_per_frame: bool,
}

impl Shared {
    pub(crate) fn new(
        dir: PathBuf,
        clock: Arc<dyn Clock>,
        random: Arc<dyn Random>,
        state: State,
        one_per_frame: bool,
    ) -> Self {
        Shared {
            dir,
            clock,
            random,
            state: Mutex::new(state),
            pending: Mutex::new(Pending::default()),
            pending_cv: Condvar::new(),
            wakers: Mutex::new(HashMap::new()),
            one_per_frame,
        }
    }

    pub(crate) fn now(&self) -> Millis {
        self.clock.now()
    }

    /// Encodes the changed jobs (and the counters of their queues, where they changed) and
    /// queues them for the writer. Must be called with the state locked, right after the
    /// change, so that batches queue in the order of the changes. Jobs with ids above
    /// `known` were created by the change and get their full record; the others only their
    /// progress.
    pub(crate) fn submit(
        &self,
        st: &mut State,
        changed: BTreeSet<JobId>,
        known: u64,
        want_ack: bool,
    ) -> Result<Option<Ack>, FileError> {
        match encode_changes(st, changed, known) {
            Ok(batch) => {
                let mut pending = lock(&self.pending);
                // A change that wrote nothing still answers only once everything queued before
                // it is durable: what it read (an enqueue's existing unique job, say) may be.
                if batch.is_empty() && (!want_ack || (pending.batches.is_empty() && !pending.busy))
                {
                    return Ok(None);
                }
                let (tx, rx) = if want_ack {
                    let (tx, rx) = oneshot::channel();
                    (Some(tx), Some(rx))
                } else {
                    (None, None)
                };
                let next_id = st.store.next_id();
                pending.batches.push(Queued {
                    batch,
                    next_id,
                    ack: tx,
                });
                if pending.idle {
                    pending.idle = false;
                    self.pending_cv.notify_one();
                }
                Ok(rx)
            }
            Err(e) => {
                let reason = format!("cannot encode a record: {e}");
                st.poisoned = Some(reason.clone());
                Err(FileError::Poisoned { reason })
            }
        }
    }

    /// The notifier of `queue`'s waiters.
    pub(crate) fn waker(&self, queue: &str) -> Arc<Notify> {
        lock(&self.wakers)
            .entry(queue.to_string())
            .or_insert_with(|| Arc::new(Notify::new()))
            .clone()
    }

    /// Wakes the waiters of these queues.
    pub(crate) fn wake(&self, queues: BTreeSet<String>) {
        if queues.is_empty() {
            return;
        }
        let wakers = lock(&self.wakers);
        for queue in queues {
            if let Some(notify) = wakers.get(&queue) {
                notify.notify_waiters();
            }
        }
    }

    /// Wakes every waiter.
    pub(crate) fn wake_all(&self) {
        for notify in lock(&self.wakers).values() {
            notify.notify_waiters();
        }
    }

    /// Asks the writer to finish what is queued and stop.
    pub(crate) fn stop(&self) {
        lock(&self.pending).stop = true;
        self.pending_cv.notify_all();
    }
}

/// Waits for a request's acknowledgement. A full disk is reported as such, with what the
/// request did not record.
pub(crate) async fn acknowledged(dir: &Path, ack: Option<Ack>) -> Result<(), BackendError> {
    let Some(ack) = ack else { return Ok(()) };
    match ack.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(failure)) if failure.disk_full => {
            let what = match failure.unrecorded.as_str() {
                // A call that changed nothing waited for the changes queued before it.
                "" => "the changes queued before this call were".to_string(),
                some if some.starts_with("the changes") => format!("{some} were"),
                some => format!("{some} was"),
            };
            Err(FileError::DiskFull {
                path: dir.to_path_buf(),
                unrecorded: format!(
                    "{what} not recorded, nor any later change; the store takes no changes until it is reopened with free space (everything acknowledged before is on disk)"
                ),
            }
            .into())
        }
        Ok(Err(failure)) => Err(FileError::Poisoned {
            reason: failure.reason,
        }
        .into()),
        Err(_) => Err(FileError::Closed.into()),
    }
}

fn encode_changes(
    st: &mut State,
    changed: BTreeSet<JobId>,
    known: u64,
) -> Result<Batch, postcard::Error> {
    let mut batch = Batch::default();
    let mut queues: Vec<String> = Vec::new();
    for id in changed {
        match st.store.record(id) {
            Some(record) => {
                if id.0 > known {
                    batch.job(id, record)?;
                } else {
                    batch.progress(id, record)?;
                }
                if !queues.iter().any(|q| q == record.queue()) {
                    queues.push(record.queue().to_string());
                }
            }
            None => batch.deleted(id)?,
        }
    }
    let flagged = std::mem::take(&mut st.pause_changed);
    for queue in &flagged {
        if !queues.contains(queue) {
            queues.push(queue.clone());
        }
    }
    // Run times counted for jobs deleted as they succeeded (a store that does not keep
    // them): no record names their queue.
    for queue in &st.hist_dirty {
        if !queues.contains(queue) {
            queues.push(queue.clone());
        }
    }
    for queue in queues {
        let retries = st.store.retry_stats(&queue).unwrap_or_default();
        let hist_changed = st.hist_dirty.remove(&queue);
        // A queue is recorded when it first appears: queues outlive their jobs.
        let first_seen = !st.totals.contains_key(&queue);
        let totals = st.totals.entry(queue.clone()).or_default();
        if first_seen || hist_changed || totals.retries != retries || flagged.contains(&queue) {
            totals.retries = retries;
            batch.queue(&queue, totals)?;
        }
    }
    for queue in std::mem::take(&mut st.removed_queues) {
        batch.queue_removed(&queue)?;
    }
    Ok(batch)
}

/// The writer thread's own state: the journal, its reader and the ledger.
pub(crate) struct Writer {
    pub(crate) shared: Arc<Shared>,
    pub(crate) journal: JournaledQueue,
    pub(crate) reader: Reader,
    pub(crate) ledger: Ledger,
    failed: Option<WriteFailure>,
    /// See [`frame_target`].
    frame_target: usize,
}

impl Writer {
    pub(crate) fn new(
        shared: Arc<Shared>,
        journal: JournaledQueue,
        reader: Reader,
        ledger: Ledger,
        frame_target: usize,
    ) -> Self {
        Writer {
            shared,
            journal,
            reader,
            ledger,
            failed: None,
            frame_target,
        }
    }

    /// Writes queued batches until asked to stop, then closes the journal.
    pub(crate) fn run(mut self) -> Result<(), FileError> {
        loop {
            let (batches, stop) = self.take();
            if !batches.is_empty() {
                self.write_batches(batches);
                self.relocate();
                continue;
            }
            if stop {
                break;
            }
        }
        let closed = self.journal.close().map_err(FileError::from);
        match self.failed {
            Some(failure) => Err(FileError::Poisoned {
                reason: failure.reason,
            }),
            None => closed,
        }
    }

    fn take(&self) -> (Vec<Queued>, bool) {
        let mut pending = lock(&self.shared.pending);
        while pending.batches.is_empty() && !pending.stop {
            pending.idle = true;
            pending.busy = false;
            pending = self
                .shared
                .pending_cv
                .wait(pending)
                .unwrap_or_else(|p| p.into_inner());
        }
        pending.idle = false;
        pending.busy = !pending.batches.is_empty();
        (std::mem::take(&mut pending.batches), pending.stop)
    }

    fn write_batches(&mut self, batches: Vec<Queued>) {
        let mut frame: Vec<Queued> = Vec::new();
        let mut size = 0;
        for queued in batches {
            if !frame.is_empty()
                && (self.shared.one_per_frame
                    || size + queued.batch.bytes.len() > self.frame_target)
            {
                self.write_frame(std::mem::take(&mut frame));
                size = 0;
            }
            size += queued.batch.bytes.len();
            frame.push(queued);
        }
        if !frame.is_empty() {
            self.write_frame(frame);
        }
    }

    fn write_frame(&mut self, frame: Vec<Queued>) {
        let result = match &self.failed {
            Some(failure) => Err(failure.clone()),
            // Only requests waiting for what was written before them: nothing to write.
            None if frame.iter().all(|q| q.batch.is_empty()) => Ok(()),
            None => {
                let next_id = frame.iter().map(|q| q.next_id).max().unwrap_or(0);
                let mut bytes = frame_header(next_id);
                let mut touches = Vec::new();
                for queued in &frame {
                    bytes.extend_from_slice(&queued.batch.bytes);
                    touches.extend(queued.batch.touches.iter().cloned());
                }
                self.write(&bytes, &touches).map_err(|e| {
                    let disk_full = e.is_disk_full();
                    let reason = if disk_full {
                        format!("writing to the journal failed: the disk is full ({e})")
                    } else {
                        format!("writing to the journal failed: {e}")
                    };
                    tracing::error!(dir = %self.shared.dir.display(), %reason, "file store poisoned");
                    let failure = WriteFailure {
                        reason: reason.clone(),
                        disk_full,
                        unrecorded: String::new(),
                    };
                    self.failed = Some(failure.clone());
                    lock(&self.shared.state).poisoned = Some(reason);
                    failure
                })
            }
        };
        for queued in frame {
            if let Some(ack) = queued.ack {
                let answer = result.clone().map_err(|failure| WriteFailure {
                    unrecorded: describe(&queued.batch.touches),
                    ..failure
                });
                // The requester may have gone away; nothing to tell then.
                let _ = ack.send(answer);
            }
        }
    }

    /// Puts one frame, reads it back and commits what it superseded.
    pub(crate) fn write(&mut self, bytes: &[u8], touches: &[Touch]) -> Result<(), FileError> {
        let item = self.journal.put(bytes)?;
        self.ledger.written(item.0, touches);
        while let Some(read) = self.reader.get()? {
            self.ledger.read(read.id.0);
        }
        self.commit();
        Ok(())
    }

    /// Commits every item the ledger no longer needs.
    pub(crate) fn commit(&mut self) {
        for id in self.ledger.take_committable() {
            if let Err(e) = self.reader.commit(ItemId(id)) {
                tracing::warn!(dir = %self.shared.dir.display(), item = id, error = %e, "could not commit a superseded journal item");
            }
        }
    }

    /// Rewrites the live records of the oldest items when they hold back a lot of garbage.
    ///
    /// One round moves records until they reach the frame target in bytes (the ledger's
    /// budget counts records, whatever their payloads): a record that would take the batch
    /// past it waits for the next round, which follows the write of this one. So the frame
    /// is at most the target or a single record, and a single record fits in a journal item
    /// (it was written in one before, with the frame's header): the journal never refuses a
    /// relocation as too large, which would poison the store (and again at every reopen).
    fn relocate(&mut self) {
        if self.failed.is_some() {
            return;
        }
        let entities = self.ledger.relocation(RELOCATE_BUDGET);
        if entities.is_empty() {
            return;
        }
        let st = lock(&self.shared.state);
        let mut batch = Batch::default();
        let mut encoded = Ok(());
        let mut moved = BTreeSet::new();
        for entity in entities {
            let mark = batch.mark();
            encoded = match &entity {
                // A job moves as one full record (its progress included), whichever of its
                // records held the old item. A job deleted meanwhile has its tombstone queued
                // already.
                Entity::Job(id) | Entity::Progress(id) if moved.insert(*id) => {
                    match st.store.record(*id) {
                        Some(record) => batch.job(*id, record),
                        None => Ok(()),
                    }
                }
                Entity::Job(_) | Entity::Progress(_) => Ok(()),
                Entity::Queue(name) => match st.totals.get(name) {
                    Some(totals) => batch.queue(name, totals),
                    None => Ok(()),
                },
            };
            if encoded.is_err() {
                break;
            }
            if batch.bytes.len() > self.frame_target && mark.bytes > 0 {
                // This record goes first in the next round.
                batch.truncate(mark);
                break;
            }
        }
        if let Err(e) = encoded {
            tracing::warn!(error = %e, "could not encode records to relocate");
            return;
        }
        if batch.is_empty() {
            return;
        }
        let next_id = st.store.next_id();
        lock(&self.shared.pending).batches.push(Queued {
            batch,
            next_id,
            ack: None,
        });
        drop(st);
    }
}

#[cfg(test)]
mod tests {
    use fairq_worker::JobId;

    use super::describe;
    use crate::ledger::Touch;

    #[test]
    fn unrecorded_changes_are_named_by_job() {
        assert_eq!(describe(&[Touch::Job(JobId(4))]), "the change to job 4");
        let many: Vec<Touch> = (1..=7)
            .map(|i| Touch::Progress(JobId(i)))
            .chain([Touch::Deleted(JobId(3)), Touch::Queue("q".into())])
            .collect();
        assert_eq!(
            describe(&many),
            "the changes to jobs 1, 2, 3, 4, 5 and 2 more"
        );
        assert_eq!(
            describe(&[Touch::Queue("q".into())]),
            "the counters of this call's queues"
        );
        assert_eq!(describe(&[]), "");
    }
}
