//! The store held by this process: the in-memory state machine, its journal writer and the
//! folder's lock, with every [`Backend`] call.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use fairq_core::job::{Lifecycle, Millis};
use fairq_journal::{JournalConfig, JournaledQueue, RecoveryReport, SyncPolicy};
use fairq_worker::Retention;
use fairq_worker::memory::store::Store;
use fairq_worker::{
    Backend, BackendError, Claim, Each, Finished, Job, JobId, JobInfo, ListFilter, LiveCounts,
    NewJob, Purge, QueueStats, Random, ReviveTarget, Settled, SettledAndClaimed, StatusCounts,
    check_hold_until, check_queue_name,
};

use crate::error::{FileError, is_disk_full};
use crate::folder::FolderLock;
use crate::options::{FileOptions, SyncMode};
use crate::remote::wire::{encoded_len, settled_len};
use crate::replay::{Replayed, replay};
use crate::totals::QueueTotals;
use crate::writer::{Shared, State, Writer, acknowledged, frame_target, lock};

/// Name of the journal inside a store folder.
pub(crate) const JOURNAL_NAME: &str = "jobs";
/// Name of the journal reader that tracks which records are still needed.
pub(crate) const READER_NAME: &str = "state";
/// Largest journal item: one frame.
pub(crate) const MAX_ITEM_SIZE: usize = 1 << 30;

struct Inner {
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<Result<(), FileError>>>>,
    /// Released once the writer has closed the journal.
    folder_lock: Mutex<Option<FolderLock>>,
    /// What opening the journal found and repaired.
    report: RecoveryReport,
    /// The largest journal item ([`FileOptions::max_item_size`]): one call's records must
    /// fit in one (see [`check_fits_one_item`]).
    max_item_size: usize,
}

impl Inner {
    fn shutdown(&self) -> Result<(), FileError> {
        lock(&self.shared.state).closed = true;
        self.shared.stop();
        self.shared.wake_all();
        let handle = lock(&self.writer).take();
        let result = match handle {
            Some(handle) => handle.join().unwrap_or_else(|_| {
                Err(FileError::Poisoned {
                    reason: "the journal writer thread panicked".into(),
                })
            }),
            None => Ok(()),
        };
        drop(lock(&self.folder_lock).take());
        result
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(dir = %self.shared.dir.display(), error = %e, "closing the file store failed");
        }
    }
}

/// The store of a folder this process holds. Clones share it; it closes when the last
/// clone is dropped or on [`Local::shutdown`].
#[derive(Clone)]
pub(crate) struct Local {
    inner: Arc<Inner>,
}

impl Local {
    /// Opens the store in `dir`, whose lock the caller holds, and replays its journal: every
    /// job, its state and the queues' counters come back as they were after the last
    /// acknowledged change. Jobs that were running belonged to the process that held the
    /// folder before, which is gone: their leases are expired at once and they are rescued
    /// like any expired lease.
    pub(crate) fn open(
        dir: &Path,
        folder_lock: FolderLock,
        options: &FileOptions,
    ) -> Result<Local, FileError> {
        let dir = dir.to_path_buf();
        let journal = JournaledQueue::open(&dir, JOURNAL_NAME, journal_config(options))
            .map_err(|e| match FileError::from(e) {
                FileError::Io { path, source } if is_disk_full(&source) => FileError::DiskFull {
                    path: dir.clone(),
                    unrecorded: format!(
                        "opening the store must write ({}) and could not ({source}); nothing was recorded or changed. Free space, or look at the store read-only (`fairq stats`, `fairq list`)",
                        path.display()
                    ),
                },
                e => e,
            })?;
        let report = journal.recovery_report().clone();
        let reader = journal.reader(READER_NAME)?;
        let now = options.clock.now();

        let Replayed {
            mut records,
            totals,
            next_id,
            ledger,
        } = replay(&dir, &reader)?;

        // Leases of the process that held the folder before are void.
        for record in records.values_mut() {
            record.expire_lease(now);
        }
        let queues: BTreeSet<String> = records.values().map(|r| r.queue().to_string()).collect();
        let mut store = Store::restore(records, next_id, now);
        store.set_keep_succeeded(options.keep_succeeded);
        for (name, queue) in &totals {
            store.set_retry_stats(name, queue.retries);
        }
        store.track_changes();
        let known = store.next_id();
        let random = options.random.clone();
        for queue in &queues {
            store.rescue(queue, now, &mut || random.next_u64());
        }
        let changed = store.take_changed();
        store.take_woken();
        tracing::debug!(dir = %dir.display(), jobs = store.len(), pending_items = ledger.pending(), "file store replayed");

        let state = State {
            store,
            totals,
            hist_dirty: BTreeSet::new(),
            removed_queues: Vec::new(),
            pause_changed: Vec::new(),
            poisoned: None,
            closed: false,
        };
        let shared = Arc::new(Shared::new(
            dir.clone(),
            options.clock.clone(),
            options.random.clone(),
            state,
            options.sync == SyncMode::Always,
        ));
        let mut writer = Writer::new(
            shared.clone(),
            journal,
            reader,
            ledger,
            frame_target(options.max_item_size),
        );
        writer.commit();
        {
            let mut st = lock(&shared.state);
            shared.submit(&mut st, changed, known, false)?;
        }
        let handle = std::thread::Builder::new()
            .name("fairq-file-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| FileError::io(&dir, e))?;
        Ok(Local {
            inner: Arc::new(Inner {
                shared,
                writer: Mutex::new(Some(handle)),
                folder_lock: Mutex::new(Some(folder_lock)),
                report,
                max_item_size: options.max_item_size,
            }),
        })
    }

    /// Writes what is queued, closes the journal (saving the reader's checkpoint so the next
    /// open replays little) and releases the folder's lock. Later calls fail with
    /// [`FileError::Closed`].
    pub(crate) fn shutdown(&self) -> Result<(), FileError> {
        self.inner.shutdown()
    }

    /// What opening the journal found and repaired.
    pub(crate) fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.report
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.inner.shared.dir
    }

    pub(crate) fn now(&self) -> Millis {
        self.inner.shared.now()
    }

    pub(crate) fn len(&self) -> usize {
        lock(&self.inner.shared.state).store.len()
    }

    pub(crate) fn counts(&self, queue: &str) -> StatusCounts {
        lock(&self.inner.shared.state).store.counts(queue)
    }

    pub(crate) fn wake_all(&self) {
        self.inner.shared.wake_all();
    }

    /// Wakes the waiters of `queue` (a resumed queue).
    pub(crate) fn wake_queue(&self, queue: &str) {
        self.inner.shared.wake(BTreeSet::from([queue.to_string()]));
    }

    /// A claim that answers only once it is durable: for claims made through the folder's
    /// socket by another process, whose leases outlive this one (see the crate docs). The
    /// jobs take at most `room` bytes in a message (see [`claim_in`]).
    pub(crate) async fn claim_durable(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
        room: usize,
    ) -> Result<Vec<Job>, BackendError> {
        check_queue_name(queue)?;
        self.change(Persist::Durable, |st, now, _| {
            claim_in(st, queue, max, lease, now, Some(room))
        })
        .await
    }

    /// [`Backend::settle_and_claim`], whose answer (settlements and jobs) takes at most
    /// `room` bytes in a message when `room` is given (see [`claim_in`]).
    pub(crate) async fn settle_and_claim_within(
        &self,
        batch: Vec<Finished>,
        queue: &str,
        max: usize,
        lease: Duration,
        room: Option<usize>,
    ) -> Result<SettledAndClaimed, BackendError> {
        let checked = check_queue_name(queue);
        self.change(Persist::Durable, |st, now, random| {
            let settled = settle_in(st, batch, now, random);
            let room = room.map(|room| room.saturating_sub(settled_len(&settled)));
            let claimed = checked.and_then(|()| claim_in(st, queue, max, lease, now, room));
            Ok(SettledAndClaimed { settled, claimed })
        })
        .await
    }

    /// Applies a change at the clock's current time and queues its records for the journal;
    /// waits until they are durable if `persist` says so.
    pub(crate) async fn change<R>(
        &self,
        persist: Persist,
        f: impl FnOnce(&mut State, Millis, &dyn Random) -> Result<R, BackendError>,
    ) -> Result<R, BackendError> {
        let shared = &self.inner.shared;
        let (result, ack, woken) = {
            let mut st = lock(&shared.state);
            st.usable()?;
            let now = shared.now();
            let known = st.store.next_id();
            let result = f(&mut st, now, shared.random.as_ref());
            let changed = st.store.take_changed();
            let woken = st.store.take_woken();
            let ack = match persist {
                Persist::Durable => shared.submit(&mut st, changed, known, true)?,
                Persist::Queued => shared.submit(&mut st, changed, known, false)?,
                Persist::Memory => None,
            };
            (result, ack, woken)
        };
        shared.wake(woken);
        acknowledged(&shared.dir, ack).await?;
        result
    }

    pub(crate) fn read<R>(&self, f: impl FnOnce(&State) -> R) -> Result<R, BackendError> {
        let st = lock(&self.inner.shared.state);
        st.usable()?;
        Ok(f(&st))
    }
}

/// Every queue's statistics, with the run-time summaries the store keeps beside its jobs.
pub(crate) fn stats_of(st: &State) -> Vec<QueueStats> {
    let mut stats = st.store.stats();
    for queue in &mut stats {
        queue.processing_ms = st
            .totals
            .get(&queue.queue)
            .map(QueueTotals::summary)
            .unwrap_or_default();
    }
    stats
}

/// The journal's configuration for a store opened with `options`.
pub(crate) fn journal_config(options: &FileOptions) -> JournalConfig {
    let config = JournalConfig {
        segment_size: options.segment_size.max(64 << 10),
        sync: match options.sync {
            SyncMode::Group => SyncPolicy::Group,
            SyncMode::Always => SyncPolicy::Always,
        },
        max_item_size: options.max_item_size,
        file_mode: options.file_mode,
        dir_mode: options.dir_mode,
        ..JournalConfig::default()
    };
    match &options.storage {
        Some(storage) => JournalConfig {
            storage: storage.clone(),
            ..config
        },
        None => config,
    }
}

/// How far a change is written before its call returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Persist {
    /// Written and synced: the call returns once the change survives a crash.
    Durable,
    /// Queued for the journal, which writes it with the next frame; the call does not wait.
    /// For claims only: see "Claims do not wait" in the crate documentation.
    Queued,
    /// Not written at all (lease extensions).
    Memory,
}

/// Claims up to `max` of `queue`'s jobs, none while the queue is paused.
///
/// With a `room`, the claim is for another process and its jobs must fit in one message
/// (the client refuses a larger one, and a job claimed but not received would stay running
/// under a lease nobody holds): jobs are taken one at a time, in the order a claim of `max`
/// would take them, while their encoded size fits in `room` bytes. The first job that does
/// not fit is handed back at once (due again, its attempt refunded, as a release does: it
/// goes behind its key's other due jobs), so the claim returns fewer jobs than asked; the
/// caller claims again for the rest. A job too large for any message to another process
/// (only possible with a `room` smaller than one job can take) fails the claim with
/// [`BackendError::Invalid`], the job left due for the owner's own workers.
fn claim_in(
    st: &mut State,
    queue: &str,
    max: usize,
    lease: Duration,
    now: Millis,
    room: Option<usize>,
) -> Result<Vec<Job>, BackendError> {
    if st.is_paused(queue) {
        return Ok(Vec::new());
    }
    let Some(room) = room else {
        return Ok(st.store.claim(queue, max, lease, now));
    };
    let mut jobs = Vec::new();
    let mut used = 0usize;
    while jobs.len() < max {
        let Some(job) = st.store.claim(queue, 1, lease, now).pop() else {
            break;
        };
        let size = encoded_len(&job);
        if size <= room.saturating_sub(used) {
            used += size;
            jobs.push(job);
            continue;
        }
        if let Some(Err(e)) = st.store.release(vec![job.claim], now).pop() {
            // Not possible: the claim was made a moment ago under the same lock.
            return Err(e);
        }
        if jobs.is_empty() {
            return Err(BackendError::Invalid(format!(
                "job {} takes {size} bytes, more than an answer to another process may carry \
                 ({room}); only the process that holds the store folder can claim it",
                job.claim.id
            )));
        }
        break;
    }
    Ok(jobs)
}

/// The most bytes a frame's header takes: the format version and the id counter (a u64 as
/// a varint).
const FRAME_HEADER_MAX: usize = 1 + 10;

/// The most bytes a job's full record entry takes beyond what the job as enqueued encodes:
/// the entry's tag (a varint, at most 5 bytes) and the job's id (10); of the record, the
/// enqueue time, the claim time and the due time (10 each), the empty last error and error
/// start (1 each). Its lifecycle and retry policy are counted apart (see [`record_bound`]).
const RECORD_EXTRA: usize = 5 + 10 + 10 + 10 + 10 + 1 + 1;

/// An upper bound on the bytes `job`'s full record takes in a frame once enqueued.
///
/// The record holds the job's queue, kind, fairness key, payload, unique key, dependency and
/// metadata, encoded as in the [`NewJob`] (same types), so the job's own encoding counts them
/// (and its schedule and conflict rule, which the record does not keep, on top). What the
/// record adds: its retry policy in full (the job may leave it to the default), its
/// lifecycle (a new job's is scheduled or blocked, at most the former at the latest time),
/// and [`RECORD_EXTRA`].
fn record_bound(job: &NewJob) -> usize {
    encoded_len(job)
        .saturating_add(encoded_len(&job.effective_retry()))
        .saturating_add(encoded_len(&Lifecycle::scheduled(Millis::MAX)))
        .saturating_add(RECORD_EXTRA)
}

/// Refuses an enqueue whose records could take more than one journal item of
/// `max_item_size` bytes, as [`BackendError::Invalid`], before the call changes anything.
///
/// A call is one change, and a change is written as one journal item, all of it or none
/// (splitting it would give up that promise). The journal refuses a larger item, and a
/// failed write poisons the store: every later call would fail until it is reopened. The
/// limits on a call ([`fairq_worker::MAX_CALL_BYTES`] of payload and metadata) do not count
/// the rest of a record (names, keys, retry policy, times), so a call within them can still
/// be too large: about 350,000 jobs with 1 KiB fairness and unique keys and no payload, with
/// the 1 GiB items of a store. The bound counts each job's record generously
/// ([`record_bound`]), the totals of the queues the change writes, and the frame's header.
/// The message names sizes only, never a payload.
fn check_fits_one_item(
    st: &State,
    jobs: &[NewJob],
    max_item_size: usize,
) -> Result<(), BackendError> {
    let mut bound = FRAME_HEADER_MAX;
    for job in jobs {
        bound = bound.saturating_add(record_bound(job));
    }
    // The totals of every queue the change may write (see `encode_changes`): each a tag
    // (at most 5 bytes), the name and the counters; tombstones of removed queues likewise.
    let default = QueueTotals::default();
    let mut queues: BTreeSet<&str> = jobs.iter().map(|job| job.queue.as_str()).collect();
    queues.extend(st.pause_changed.iter().map(String::as_str));
    queues.extend(st.hist_dirty.iter().map(String::as_str));
    for queue in queues {
        let totals = st.totals.get(queue).unwrap_or(&default);
        bound = bound
            .saturating_add(5)
            .saturating_add(encoded_len(queue))
            .saturating_add(encoded_len(totals));
    }
    for queue in &st.removed_queues {
        bound = bound.saturating_add(5).saturating_add(encoded_len(queue));
    }
    if bound > max_item_size {
        return Err(BackendError::Invalid(format!(
            "the call's {} jobs may take up to {bound} bytes in the journal, more than one \
             journal item holds ({max_item_size}); a call is written in one item, all or \
             nothing: enqueue the jobs in smaller calls",
            jobs.len()
        )));
    }
    Ok(())
}

/// Settles `batch` on the state, counting each settled attempt's run time in its queue's
/// totals.
fn settle_in(
    st: &mut State,
    batch: Vec<Finished>,
    now: Millis,
    random: &dyn Random,
) -> Each<Settled> {
    // A store that deletes successes as it records them: the queue of each is noted first.
    let deletes = !st.store.keeps_succeeded();
    let started: Vec<(JobId, Option<Millis>, Option<String>)> = batch
        .iter()
        .map(|f| {
            let record = st.store.record(f.claim.id);
            (
                f.claim.id,
                record.map(|r| r.claimed_at()),
                record.filter(|_| deletes).map(|r| r.queue().to_string()),
            )
        })
        .collect();
    let answers = st.store.settle(batch, now, &mut || random.next_u64());
    for ((id, claimed_at, noted), answer) in started.iter().zip(&answers) {
        let (Some(claimed_at), true) = (*claimed_at, answer.is_ok()) else {
            continue;
        };
        let Some(queue) = st.store.record(*id).map(|r| r.queue()).or(noted.as_deref()) else {
            continue;
        };
        let elapsed = now.saturating_sub(claimed_at);
        match st.totals.get_mut(queue) {
            Some(totals) => totals.record(elapsed),
            None => st
                .totals
                .entry(queue.to_string())
                .or_default()
                .record(elapsed),
        }
        if !st.hist_dirty.contains(queue) {
            st.hist_dirty.insert(queue.to_string());
        }
    }
    answers
}

impl Backend for Local {
    async fn enqueue(&self, job: NewJob) -> Result<JobId, BackendError> {
        let ids = self.enqueue_many(vec![job]).await?;
        ids.into_iter()
            .next()
            .ok_or_else(|| BackendError::Invalid("nothing enqueued".into()))
    }

    /// The whole call is one change, written in one journal item: a call whose records
    /// could take more than an item holds is refused as [`BackendError::Invalid`] before
    /// anything changes (see [`check_fits_one_item`]).
    async fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        let max_item_size = self.inner.max_item_size;
        self.change(Persist::Durable, |st, now, _| {
            check_fits_one_item(st, &jobs, max_item_size)?;
            st.store.enqueue_many(jobs, now)
        })
        .await
    }

    /// Claims without waiting for the disk: the claim is written with the next frame, and a
    /// crash before that hands the job out again as if it had never been claimed (see the
    /// crate documentation).
    async fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        check_queue_name(queue)?;
        self.change(Persist::Queued, |st, now, _| {
            claim_in(st, queue, max, lease, now, None)
        })
        .await
    }

    /// Settles the whole batch in one change: its records share one journal frame and one
    /// sync.
    async fn settle(&self, batch: Vec<Finished>) -> Result<Each<Settled>, BackendError> {
        self.change(Persist::Durable, |st, now, random| {
            Ok(settle_in(st, batch, now, random))
        })
        .await
    }

    /// Settles `batch` and claims the next jobs under one lock, in one journal frame: the
    /// call returns once the settlement (and the claim with it) is durable.
    async fn settle_and_claim(
        &self,
        batch: Vec<Finished>,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<SettledAndClaimed, BackendError> {
        self.settle_and_claim_within(batch, queue, max, lease, None)
            .await
    }

    async fn release(&self, claims: Vec<Claim>) -> Result<Each<()>, BackendError> {
        self.change(Persist::Durable, |st, now, _| {
            Ok(st.store.release(claims, now))
        })
        .await
    }

    /// Extends a lease in memory only: leases do not outlive the process (a reopened store
    /// rescues every job that was running), so a deadline is not worth a disk write.
    async fn heartbeat(&self, claim: Claim, lease: Duration) -> Result<Millis, BackendError> {
        self.change(Persist::Memory, |st, now, _| {
            st.store.heartbeat(claim, lease, now)
        })
        .await
    }

    /// Extends every lease under one lock, in memory only (see [`heartbeat`](Self::heartbeat)).
    async fn heartbeat_many(
        &self,
        claims: Vec<Claim>,
        lease: Duration,
    ) -> Result<Each<Millis>, BackendError> {
        self.change(Persist::Memory, |st, now, _| {
            Ok(claims
                .into_iter()
                .map(|claim| st.store.heartbeat(claim, lease, now))
                .collect())
        })
        .await
    }

    async fn rescue(&self, queue: &str) -> Result<u64, BackendError> {
        check_queue_name(queue)?;
        self.change(Persist::Durable, |st, now, random| {
            Ok(st.store.rescue(queue, now, &mut || random.next_u64()))
        })
        .await
    }

    async fn hold_retries(&self, queue: &str, until: Millis) -> Result<u64, BackendError> {
        check_queue_name(queue)?;
        check_hold_until(until)?;
        self.change(Persist::Durable, |st, now, _| {
            Ok(st.store.hold_retries(queue, until, now))
        })
        .await
    }

    fn wait_for_jobs(&self, queue: &str, timeout: Duration) -> impl Future<Output = ()> + Send {
        let this = self.clone();
        let notify = self.inner.shared.waker(queue);
        let queue = queue.to_string();
        async move {
            let notified = notify.notified();
            tokio::pin!(notified);
            // Register before looking, so a change in between is not missed.
            notified.as_mut().enable();
            let now = this.now();
            let due = {
                let st = lock(&this.inner.shared.state);
                if st.usable().is_err() {
                    return;
                }
                // A paused queue hands out nothing until its resume, which wakes this wait.
                if st.is_paused(&queue) {
                    Err(None)
                } else {
                    st.store.due(&queue, now)
                }
            };
            let wait = match due {
                Ok(()) => return,
                Err(Some(at)) => timeout.min(Duration::from_millis(at.saturating_sub(now))),
                Err(None) => timeout,
            };
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    async fn stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        self.read(stats_of)
    }

    async fn live_counts(&self, queue: &str) -> Result<LiveCounts, BackendError> {
        check_queue_name(queue)?;
        self.read(|st| st.store.counts(queue).into())
    }

    async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        filter.check()?;
        self.read(|st| st.store.list(&filter))
    }

    async fn get(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        self.read(|st| st.store.get(id))
    }

    async fn revive(&self, target: ReviveTarget) -> Result<u64, BackendError> {
        target.check()?;
        self.change(Persist::Durable, |st, now, _| st.store.revive(target, now))
            .await
    }

    async fn purge(&self, purge: Purge) -> Result<u64, BackendError> {
        purge.check()?;
        self.change(Persist::Durable, |st, _, _| Ok(st.store.purge(&purge)))
            .await
    }

    async fn prune(&self, retention: Retention) -> Result<u64, BackendError> {
        if retention.keeps_everything() {
            return Ok(0);
        }
        self.change(Persist::Durable, |st, now, _| {
            Ok(st.store.prune(&retention, now))
        })
        .await
    }

    async fn remove_queue(&self, queue: &str) -> Result<u64, BackendError> {
        check_queue_name(queue)?;
        self.change(Persist::Durable, |st, _, _| {
            let removed = match st.store.remove_queue(queue) {
                // A queue that was only ever paused has no jobs nor counters in the store.
                Err(BackendError::UnknownQueue(_)) if st.totals.contains_key(queue) => 0,
                other => other?,
            };
            // Its counters go too, in the journal by a tombstone after the deleted jobs'.
            st.totals.remove(queue);
            st.hist_dirty.remove(queue);
            st.removed_queues.push(queue.to_string());
            Ok(removed)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Batch;
    use fairq_core::job::MAX_MILLIS;
    use fairq_core::retry::RetryPolicy;
    use fairq_worker::{MAX_KEY_LEN, MAX_NAME_LEN, OnConflict, Schedule};

    /// The bound is never below a record's real size, whatever the job carries: the check
    /// against the journal's item size relies on it.
    #[test]
    fn a_records_bound_is_never_below_its_size() {
        let delays: Vec<Duration> = (0..32)
            .map(|i| Duration::from_secs(u64::MAX >> i))
            .collect();
        let jobs = vec![
            NewJob::new("q", "k", vec![]),
            NewJob::new(
                "q".repeat(MAX_NAME_LEN),
                "k".repeat(MAX_NAME_LEN),
                vec![7; 300],
            )
            .key("t".repeat(MAX_KEY_LEN))
            .unique("u".repeat(MAX_KEY_LEN), OnConflict::Error)
            .meta("trace", "x".repeat(200))
            .meta("user", "y")
            .retry(RetryPolicy::forever().with_delays(delays).with_jitter(1000)),
            NewJob {
                schedule: Schedule::At(MAX_MILLIS),
                ..NewJob::new("q", "k", vec![1])
            },
        ];
        let mut store = Store::default();
        let now = MAX_MILLIS - 1;
        let first = store.enqueue_many(jobs[..1].to_vec(), now).unwrap()[0];
        let mut jobs = jobs;
        jobs.push(NewJob::new("q", "k", vec![]).after(first));
        let ids = store.enqueue_many(jobs.clone(), now).unwrap();
        for (job, id) in jobs.iter().zip(ids) {
            let mut batch = Batch::default();
            batch.job(id, store.record(id).unwrap()).unwrap();
            assert!(
                record_bound(job) >= batch.bytes.len(),
                "bound {} below the record's {} bytes",
                record_bound(job),
                batch.bytes.len()
            );
        }
    }
}
