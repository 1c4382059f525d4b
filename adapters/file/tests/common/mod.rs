//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use fairq_file::{FileBackend, FileOptions};
use fairq_worker::{Backend, JobInfo, ListFilter, ManualClock, QueueStats};

/// The manual clock's start.
pub const START: u64 = 1_700_000_000_000;
pub const LEASE: Duration = Duration::from_secs(60);

pub fn open(dir: &Path, clock: &ManualClock) -> FileBackend {
    FileBackend::open(dir, FileOptions::default().clock(clock.clone())).expect("open the store")
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Every job, by id.
pub async fn all_jobs<B: Backend>(store: &B) -> Vec<JobInfo> {
    store
        .list(ListFilter::default().limit(usize::MAX))
        .await
        .expect("list")
}

pub async fn stats<B: Backend>(store: &B) -> Vec<QueueStats> {
    store.stats().await.expect("stats")
}

/// Names of the journal segment files in `dir`.
pub fn segments(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".seg"))
        .collect();
    names.sort();
    names
}
