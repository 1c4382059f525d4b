//! [`FileBackend`]: the store, its opening (replay) and the [`Backend`] calls.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use fairq_core::job::{Millis, Outcome};
use fairq_journal::{JournalConfig, JournaledQueue, SyncPolicy};
use fairq_worker::memory::store::{Record, Store};
use fairq_worker::{
    Backend, BackendError, Claim, Failure, Job, JobId, JobInfo, ListFilter, NewJob, Purge,
    QueueStats, RetryTarget, StatusCounts, random_u64,
};

use crate::error::FileError;
use crate::frame::{DecodeError, Entry, decode_frame};
use crate::ledger::{Ledger, Touch};
use crate::lock::{FolderLock, prepare_folder};
use crate::options::{FileOptions, SyncMode};
use crate::totals::QueueTotals;
use crate::writer::{Shared, State, Writer, acknowledged, lock};

/// Name of the journal inside a store folder.
pub(crate) const JOURNAL_NAME: &str = "jobs";
/// Name of the journal reader that tracks which records are still needed.
pub(crate) const READER_NAME: &str = "state";
/// Largest journal item: one frame.
const MAX_ITEM_SIZE: usize = 1 << 30;
/// Largest total payload and metadata of one enqueue call.
const MAX_ENQUEUE_BYTES: usize = 256 << 20;

struct Inner {
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<Result<(), FileError>>>>,
    /// Released once the writer has closed the journal.
    folder_lock: Mutex<Option<FolderLock>>,
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

/// A durable job store in one folder on the local file system, on a `fairq-journal` journal.
///
/// It has the semantics of the in-memory reference store (fair claims by key, leases with
/// fencing tokens, retries, rescue, dependencies, unique keys, operator calls) because it *is*
/// that store's state machine, with every change written to the journal before the call that
/// made it returns. See the [crate documentation](crate) for the design and the recovery
/// argument.
///
/// Clones share the store. The store is closed when the last clone is dropped, or with
/// [`FileBackend::close`].
///
/// ```
/// use std::time::Duration;
/// use fairq_file::{FileBackend, FileOptions};
/// use fairq_worker::{Backend, NewJob};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
/// let id = store.enqueue(NewJob::new("mail", "welcome", b"{}".to_vec()).key("tenant-a")).await.unwrap();
/// store.close().unwrap();
///
/// // Reopened, the job is still there.
/// let store = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
/// let jobs = store.claim("mail", 10, Duration::from_secs(30)).await.unwrap();
/// assert_eq!(jobs[0].claim.id, id);
/// store.complete(jobs[0].claim).await.unwrap();
/// # });
/// ```
#[derive(Clone)]
pub struct FileBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for FileBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileBackend")
            .field("dir", &self.inner.shared.dir)
            .finish_non_exhaustive()
    }
}

impl FileBackend {
    /// Opens the store in folder `path`, creating the folder if needed, and takes the
    /// folder's lock: only one process (and one open store) may use a folder at a time.
    ///
    /// Opening replays the journal: every job, its state and the queues' counters come back
    /// as they were after the last acknowledged change. Jobs that were running belonged to
    /// the process that held the folder before, which is gone: their leases are expired at
    /// once and they are rescued like any expired lease (the lost attempt counts, the retry
    /// policy decides).
    ///
    /// Errors: [`FileError::NotAFolder`] and [`FileError::Io`] for a path that is not a usable
    /// folder, [`FileError::Locked`] when another process holds it,
    /// [`FileError::CorruptJournal`] / [`FileError::CorruptRecord`] for damaged files, and
    /// [`FileError::UnsupportedVersion`] for a folder written by a newer version.
    ///
    /// ```
    /// use fairq_file::{FileBackend, FileError, FileOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
    /// let again = FileBackend::open(dir.path(), FileOptions::default());
    /// assert!(matches!(again, Err(FileError::Locked { .. })));
    /// drop(store);
    /// assert!(FileBackend::open(dir.path(), FileOptions::default()).is_ok());
    /// ```
    pub fn open(path: impl AsRef<Path>, options: FileOptions) -> Result<FileBackend, FileError> {
        let dir = path.as_ref().to_path_buf();
        prepare_folder(&dir)?;
        let folder_lock = FolderLock::acquire(&dir)?;
        let config = JournalConfig {
            segment_size: options.segment_size.max(64 << 10),
            sync: match options.sync {
                SyncMode::Group => SyncPolicy::Group,
                SyncMode::Always => SyncPolicy::Always,
            },
            max_item_size: MAX_ITEM_SIZE,
            ..JournalConfig::default()
        };
        let config = match &options.storage {
            Some(storage) => JournalConfig {
                storage: storage.clone(),
                ..config
            },
            None => config,
        };
        let journal = JournaledQueue::open(&dir, JOURNAL_NAME, config)?;
        let reader = journal.reader(READER_NAME)?;
        let now = options.clock.now();

        // Replay: every uncommitted item, in id order; the last record of a job wins.
        let mut records: BTreeMap<JobId, Record> = BTreeMap::new();
        let mut totals: BTreeMap<String, QueueTotals> = BTreeMap::new();
        let mut next_id = 0;
        let mut ledger = Ledger::default();
        while let Some(item) = reader.get()? {
            let frame = decode_frame(&item.data).map_err(|e| match e {
                DecodeError::Version(found) => FileError::UnsupportedVersion {
                    item: item.id.0,
                    found,
                    supported: crate::frame::FORMAT_VERSION,
                },
                DecodeError::Invalid(reason) => FileError::CorruptRecord {
                    path: dir.clone(),
                    item: item.id.0,
                    reason,
                },
            })?;
            next_id = next_id.max(frame.next_id);
            let mut touches = Vec::with_capacity(frame.entries.len());
            for entry in frame.entries {
                match entry {
                    Entry::Job(id, record) => {
                        records.insert(id, *record);
                        touches.push(Touch::Job(id));
                    }
                    Entry::Deleted(id) => {
                        records.remove(&id);
                        touches.push(Touch::Deleted(id));
                    }
                    Entry::Queue(name, queue) => {
                        touches.push(Touch::Queue(name.clone()));
                        totals.insert(name, queue);
                    }
                }
            }
            ledger.written(item.id.0, &touches);
            ledger.read(item.id.0);
        }

        // Leases of the process that held the folder before are void.
        for record in records.values_mut() {
            record.expire_lease(now);
        }
        let queues: BTreeSet<String> = records.values().map(|r| r.queue().to_string()).collect();
        let mut store = Store::restore(records, next_id, now);
        for (name, queue) in &totals {
            store.set_retry_stats(name, queue.retries);
        }
        store.track_changes();
        for queue in &queues {
            store.rescue(queue, now, &mut random_u64);
        }
        let changed = store.take_changed();
        store.take_woken();
        tracing::debug!(dir = %dir.display(), jobs = store.len(), pending_items = ledger.pending(), "file store replayed");

        let state = State {
            store,
            totals,
            hist_dirty: BTreeSet::new(),
            poisoned: None,
            closed: false,
        };
        let shared = Arc::new(Shared::new(
            dir.clone(),
            options.clock.clone(),
            state,
            options.sync == SyncMode::Always,
        ));
        let mut writer = Writer::new(shared.clone(), journal, reader, ledger);
        writer.commit();
        {
            let mut st = lock(&shared.state);
            shared.submit(&mut st, changed, false)?;
        }
        let handle = std::thread::Builder::new()
            .name("fairq-file-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| FileError::io(&dir, e))?;
        Ok(FileBackend {
            inner: Arc::new(Inner {
                shared,
                writer: Mutex::new(Some(handle)),
                folder_lock: Mutex::new(Some(folder_lock)),
            }),
        })
    }

    /// Writes what is queued, closes the journal (saving the reader's checkpoint so the next
    /// open replays little) and releases the folder's lock. Later calls on this store and its
    /// clones fail with [`FileError::Closed`]. Dropping the last clone closes it too.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap();
    /// store.close().unwrap();
    /// ```
    pub fn close(&self) -> Result<(), FileError> {
        self.inner.shutdown()
    }

    /// The store's folder.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap();
    /// assert_eq!(store.path(), dir.path());
    /// ```
    pub fn path(&self) -> &Path {
        &self.inner.shared.dir
    }

    /// The store's current time.
    ///
    /// ```
    /// use fairq_file::{FileBackend, FileOptions};
    /// use fairq_worker::ManualClock;
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = FileBackend::open(dir.path(), FileOptions::default().clock(ManualClock::new(9))).unwrap();
    /// assert_eq!(store.now(), 9);
    /// ```
    pub fn now(&self) -> Millis {
        self.inner.shared.now()
    }

    /// Number of stored jobs, finished ones included.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap();
    /// assert_eq!(store.len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        lock(&self.inner.shared.state).store.len()
    }

    /// True when no job is stored.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// assert!(fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Jobs per status in `queue`.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_worker::{Backend, NewJob};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap();
    /// store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    /// assert_eq!(store.counts("q").scheduled, 1);
    /// # });
    /// ```
    pub fn counts(&self, queue: &str) -> StatusCounts {
        lock(&self.inner.shared.state).store.counts(queue)
    }

    /// Wakes every task waiting in [`Backend::wait_for_jobs`] (after moving a manual clock).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap().wake_all();
    /// ```
    pub fn wake_all(&self) {
        self.inner.shared.wake_all();
    }

    /// Applies a change at the clock's current time, queues its records for the journal and
    /// waits until they are durable (or, with `persist` off, does not write at all).
    async fn change<R>(
        &self,
        persist: bool,
        f: impl FnOnce(&mut State, Millis) -> Result<R, BackendError>,
    ) -> Result<R, BackendError> {
        let shared = &self.inner.shared;
        let (result, ack, woken) = {
            let mut st = lock(&shared.state);
            st.usable()?;
            let now = shared.now();
            let result = f(&mut st, now);
            let changed = st.store.take_changed();
            let woken = st.store.take_woken();
            let ack = if persist {
                shared.submit(&mut st, changed, true)?
            } else {
                None
            };
            (result, ack, woken)
        };
        shared.wake(woken);
        acknowledged(ack).await?;
        result
    }

    fn read<R>(&self, f: impl FnOnce(&State) -> R) -> Result<R, BackendError> {
        let st = lock(&self.inner.shared.state);
        st.usable()?;
        Ok(f(&st))
    }
}

fn check_size(jobs: &[NewJob]) -> Result<(), BackendError> {
    let bytes: usize = jobs
        .iter()
        .map(|j| {
            j.payload.len()
                + j.metadata
                    .iter()
                    .map(|(k, v)| k.len() + v.len())
                    .sum::<usize>()
        })
        .sum();
    if bytes > MAX_ENQUEUE_BYTES {
        return Err(BackendError::Invalid(format!(
            "{bytes} bytes of payload and metadata in one call; the file store takes at most {MAX_ENQUEUE_BYTES}"
        )));
    }
    Ok(())
}

/// Records a finished attempt's run time in its queue's totals.
fn record_run_time(st: &mut State, before: Option<(String, Millis)>, now: Millis) {
    if let Some((queue, claimed_at)) = before {
        st.totals
            .entry(queue.clone())
            .or_default()
            .record(now.saturating_sub(claimed_at));
        st.hist_dirty.insert(queue);
    }
}

fn running_since(st: &State, id: JobId) -> Option<(String, Millis)> {
    st.store
        .record(id)
        .map(|r| (r.queue().to_string(), r.claimed_at()))
}

impl Backend for FileBackend {
    async fn enqueue(&self, job: NewJob) -> Result<JobId, BackendError> {
        let ids = self.enqueue_many(vec![job]).await?;
        ids.into_iter()
            .next()
            .ok_or_else(|| BackendError::Invalid("nothing enqueued".into()))
    }

    async fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        check_size(&jobs)?;
        self.change(true, |st, now| st.store.enqueue_many(jobs, now))
            .await
    }

    async fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        self.change(true, |st, now| Ok(st.store.claim(queue, max, lease, now)))
            .await
    }

    async fn complete(&self, claim: Claim) -> Result<(), BackendError> {
        self.change(true, |st, now| {
            let before = running_since(st, claim.id);
            st.store.complete(claim, now)?;
            record_run_time(st, before, now);
            Ok(())
        })
        .await
    }

    async fn fail(&self, claim: Claim, failure: Failure) -> Result<Outcome, BackendError> {
        self.change(true, |st, now| {
            let before = running_since(st, claim.id);
            let outcome = st.store.fail(claim, failure, now, random_u64())?;
            record_run_time(st, before, now);
            Ok(outcome)
        })
        .await
    }

    /// Extends a lease in memory only: leases do not outlive the process (a reopened store
    /// rescues every job that was running), so a deadline is not worth a disk write.
    async fn heartbeat(&self, claim: Claim, lease: Duration) -> Result<Millis, BackendError> {
        self.change(false, |st, now| st.store.heartbeat(claim, lease, now))
            .await
    }

    async fn rescue(&self, queue: &str) -> Result<u64, BackendError> {
        self.change(true, |st, now| {
            Ok(st.store.rescue(queue, now, &mut random_u64))
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
                st.store.due(&queue, now)
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
        self.read(|st| {
            let mut stats = st.store.stats();
            for queue in &mut stats {
                queue.processing_ms = st
                    .totals
                    .get(&queue.queue)
                    .map(QueueTotals::summary)
                    .unwrap_or_default();
            }
            stats
        })
    }

    async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        self.read(|st| st.store.list(&filter))
    }

    async fn get(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        self.read(|st| st.store.get(id))
    }

    async fn retry(&self, target: RetryTarget) -> Result<u64, BackendError> {
        self.change(true, |st, now| st.store.retry(target, now))
            .await
    }

    async fn purge(&self, purge: Purge) -> Result<u64, BackendError> {
        self.change(true, |st, _| Ok(st.store.purge(&purge))).await
    }

    async fn prune(&self, older_than: Duration) -> Result<u64, BackendError> {
        self.change(true, |st, now| Ok(st.store.prune(older_than, now)))
            .await
    }
}

/// The folder a `file:PATH` store URL names (`file:` alone or an empty path: `./fairq-data`).
///
/// ```
/// use std::path::PathBuf;
/// assert_eq!(fairq_file::folder_from_url("file:/var/q"), Some(PathBuf::from("/var/q")));
/// assert_eq!(fairq_file::folder_from_url("file:"), Some(PathBuf::from("./fairq-data")));
/// assert_eq!(fairq_file::folder_from_url("redis://x"), None);
/// ```
pub fn folder_from_url(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("file:")?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    if rest.is_empty() {
        Some(PathBuf::from(crate::DEFAULT_FOLDER))
    } else {
        Some(PathBuf::from(rest))
    }
}
