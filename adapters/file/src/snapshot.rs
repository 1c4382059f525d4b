//! A read-only view of a store folder that no process owns: the journal read once, without
//! creating, repairing or locking anything for writing, so a store can be inspected on a
//! full disk or a read-only mount.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairq_core::job::Millis;
use fairq_journal::{JournaledQueue, RecoveryReport};
use fairq_worker::Retention;
use fairq_worker::memory::store::Store;
use fairq_worker::{
    Backend, BackendError, Claim, Clock, Each, Finished, Job, JobId, JobInfo, ListFilter, NewJob,
    Purge, QueueStats, ReviveTarget, Settled, SettledAndClaimed, StatusCounts,
};

use crate::error::FileError;
use crate::local::{JOURNAL_NAME, READER_NAME, journal_config, stats_of};
use crate::options::FileOptions;
use crate::replay::{Replayed, replay};
use crate::writer::{State, lock};

/// The store as its journal holds it, read once. Jobs that were running when the folder's
/// last owner stopped are shown running (the next owner rescues them).
pub(crate) struct Snapshot {
    dir: PathBuf,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    report: RecoveryReport,
}

impl Snapshot {
    /// Reads the journal in `dir` read-only. The caller keeps an owner out meanwhile (the
    /// folder's lock taken shared); the journal's own lock is taken shared too.
    pub(crate) fn open(dir: &Path, options: &FileOptions) -> Result<Snapshot, FileError> {
        let journal = JournaledQueue::open_read_only(dir, JOURNAL_NAME, journal_config(options))?;
        let report = journal.recovery_report().clone();
        let reader = journal.reader(READER_NAME)?;
        let Replayed {
            records,
            totals,
            next_id,
            ..
        } = replay(dir, &reader)?;
        drop(reader);
        journal.close()?;
        let now = options.clock.now();
        let mut store = Store::restore(records, next_id, now);
        for (name, queue) in &totals {
            store.set_retry_stats(name, queue.retries);
        }
        Ok(Snapshot {
            dir: dir.to_path_buf(),
            clock: options.clock.clone(),
            state: Mutex::new(State {
                store,
                totals,
                hist_dirty: BTreeSet::new(),
                removed_queues: Vec::new(),
                pause_changed: Vec::new(),
                poisoned: None,
                closed: false,
            }),
            report,
        })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn now(&self) -> Millis {
        self.clock.now()
    }

    pub(crate) fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    pub(crate) fn len(&self) -> usize {
        lock(&self.state).store.len()
    }

    /// The queues paused when the folder was read.
    pub(crate) fn paused(&self) -> Vec<String> {
        lock(&self.state).paused_queues()
    }

    pub(crate) fn counts(&self, queue: &str) -> StatusCounts {
        lock(&self.state).store.counts(queue)
    }

    fn refuse<T>(&self, operation: &'static str) -> Result<T, BackendError> {
        Err(FileError::ReadOnly {
            path: self.dir.clone(),
            operation,
        }
        .into())
    }
}

impl Backend for Snapshot {
    async fn enqueue(&self, _job: NewJob) -> Result<JobId, BackendError> {
        self.refuse("enqueue")
    }

    async fn enqueue_many(&self, _jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        self.refuse("enqueue")
    }

    async fn claim(
        &self,
        _queue: &str,
        _max: usize,
        _lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        self.refuse("claim")
    }

    async fn settle(&self, _batch: Vec<Finished>) -> Result<Each<Settled>, BackendError> {
        self.refuse("settle")
    }

    async fn settle_and_claim(
        &self,
        _batch: Vec<Finished>,
        _queue: &str,
        _max: usize,
        _lease: Duration,
    ) -> Result<SettledAndClaimed, BackendError> {
        self.refuse("settle")
    }

    async fn release(&self, _claims: Vec<Claim>) -> Result<Each<()>, BackendError> {
        self.refuse("release")
    }

    async fn heartbeat(&self, _claim: Claim, _lease: Duration) -> Result<Millis, BackendError> {
        self.refuse("heartbeat")
    }

    async fn heartbeat_many(
        &self,
        _claims: Vec<Claim>,
        _lease: Duration,
    ) -> Result<Each<Millis>, BackendError> {
        self.refuse("heartbeat")
    }

    async fn rescue(&self, _queue: &str) -> Result<u64, BackendError> {
        self.refuse("rescue")
    }

    async fn hold_retries(&self, _queue: &str, _until: Millis) -> Result<u64, BackendError> {
        self.refuse("hold_retries")
    }

    /// Nothing changes in a snapshot: waits out the timeout.
    fn wait_for_jobs(&self, _queue: &str, timeout: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(timeout)
    }

    async fn stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        Ok(stats_of(&lock(&self.state)))
    }

    async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        filter.check()?;
        Ok(lock(&self.state).store.list(&filter))
    }

    async fn get(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        Ok(lock(&self.state).store.get(id))
    }

    async fn revive(&self, _target: ReviveTarget) -> Result<u64, BackendError> {
        self.refuse("revive")
    }

    async fn purge(&self, _purge: Purge) -> Result<u64, BackendError> {
        self.refuse("purge")
    }

    async fn prune(&self, _retention: Retention) -> Result<u64, BackendError> {
        self.refuse("prune")
    }

    async fn remove_queue(&self, _queue: &str) -> Result<u64, BackendError> {
        self.refuse("remove_queue")
    }
}
