//! What the scale tests share: a runtime for store calls, one test at a time, worker start-up,
//! store-side reads, and the two scenarios (`fair`, `kill`) that run on any store.
#![allow(dead_code)]

pub mod fair;
pub mod kill;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use fairq::{Backend, JobId, JobStatus, ListFilter, NewJob, QueueStats, Store};
use fairq_scale_tests::{binaries, Host, WorkerConfig, WorkerProcess};

/// How long a worker may take to connect and start serving.
pub const READY_WITHIN: Duration = Duration::from_secs(90);

/// A runtime for the test's own store calls (the workers are separate processes).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Held for the length of a test: each one runs a server and several worker processes, and
/// two at once on a small machine would measure each other.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts a worker named `name` in `host`'s namespace and waits until it serves.
pub fn start_worker(
    host: &Host,
    store_url: &str,
    config: &WorkerConfig,
    dir: &Path,
    name: &str,
) -> WorkerProcess {
    let mut worker = WorkerProcess::spawn(&binaries!(), host, store_url, config, dir, name)
        .expect("a worker process");
    worker
        .wait_ready(READY_WITHIN)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    worker
}

/// The job logs of `workers`, in order (worker `i` of the records is `workers[i]`).
pub fn logs(workers: &[WorkerProcess]) -> Vec<PathBuf> {
    workers.iter().map(|w| w.log().to_path_buf()).collect()
}

/// Enqueues `jobs` in batches of 500; their ids in order.
pub async fn enqueue_all(store: &Store, jobs: Vec<NewJob>) -> Vec<JobId> {
    let mut ids = Vec::with_capacity(jobs.len());
    let mut jobs = jobs.into_iter().peekable();
    while jobs.peek().is_some() {
        let batch: Vec<NewJob> = jobs.by_ref().take(500).collect();
        ids.extend(store.enqueue_many(batch).await.expect("enqueue"));
    }
    ids
}

/// The statistics of `queue` (zeros if the store has none).
pub async fn queue_stats(store: &Store, queue: &str) -> QueueStats {
    store
        .stats()
        .await
        .expect("stats")
        .into_iter()
        .find(|s| s.queue == queue)
        .unwrap_or_else(|| QueueStats::empty(queue))
}

/// The ids of every job of `queue` in `status`, read page by page.
pub async fn ids_in(store: &Store, queue: &str, status: JobStatus) -> Vec<u64> {
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list(ListFilter {
                queue: Some(queue.to_string()),
                status: Some(status),
                after,
                limit: 500,
            })
            .await
            .expect("list");
        ids.extend(page.iter().map(|j| j.id.0));
        match page.last() {
            Some(last) if page.len() == 500 => after = Some(last.id),
            _ => return ids,
        }
    }
}

/// `ids` as a set of numbers.
pub fn id_set(ids: &[JobId]) -> BTreeSet<u64> {
    ids.iter().map(|id| id.0).collect()
}
