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

/// Options with `clock` and 64 KiB segments (the smallest), so that a few dozen jobs span
/// several segment files.
pub fn small_segments(clock: &ManualClock) -> FileOptions {
    FileOptions::default()
        .clock(clock.clone())
        .segment_size(64 << 10)
}

/// Copies every file of folder `from` into folder `to`.
pub fn copy_folder(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

/// Payloads of every job in the store in `dir`, by id, read without changing it.
pub fn payloads(
    dir: &Path,
    clock: &ManualClock,
) -> std::collections::BTreeMap<fairq_worker::JobId, Vec<u8>> {
    let store = FileBackend::open_read_only(dir, small_segments(clock)).expect("open read-only");
    let found = runtime().block_on(async {
        all_jobs(&store)
            .await
            .into_iter()
            .map(|j| (j.id, j.payload))
            .collect()
    });
    store.close().expect("close");
    found
}
