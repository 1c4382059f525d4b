//! `enqueue_many` is one durable write: on disk entirely or not at all; wake-ups reach
//! waiting workers in the same process.

mod common;

use std::time::Duration;

use common::{START, open, runtime, segments};
use fairq_file::{FileBackend, FileOptions, Role};
use fairq_journal::{JournalConfig, JournaledQueue};
use fairq_worker::conformance::PATIENCE;
use fairq_worker::{Backend, BackendError, Failure, ManualClock, NewJob, OnConflict, ReviveTarget};

/// Items the store's journal reader has not committed yet.
fn uncommitted_items(dir: &std::path::Path) -> usize {
    let journal = JournaledQueue::open(dir, "jobs", JournalConfig::default()).unwrap();
    let reader = journal.reader("state").unwrap();
    let mut n = 0;
    while reader.get().unwrap().is_some() {
        n += 1;
    }
    n
}

fn batch(n: usize) -> Vec<NewJob> {
    (0..n)
        .map(|i| NewJob::new("b", "kind", vec![1; 32]).key(format!("k{}", i % 4)))
        .collect()
}

#[test]
fn enqueue_many_is_one_journal_write() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START);
    runtime().block_on(async {
        let store = open(dir.path(), &clock);
        assert_eq!(store.enqueue_many(batch(200)).await.unwrap().len(), 200);
        store.close().unwrap();
    });
    assert_eq!(uncommitted_items(dir.path()), 1);
}

#[test]
fn a_torn_batch_is_lost_whole() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START);
    runtime().block_on(async {
        let store = open(dir.path(), &clock);
        store
            .enqueue(NewJob::new("b", "kind", vec![]))
            .await
            .unwrap();
        store.enqueue_many(batch(50)).await.unwrap();
        store.close().unwrap();
    });
    // Cut the journal inside the batch's record, as a power loss during its write would.
    let segment = dir.path().join(&segments(dir.path())[0]);
    let len = std::fs::metadata(&segment).unwrap().len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap();
    file.set_len(len - 100).unwrap();
    drop(file);
    runtime().block_on(async {
        let store = open(dir.path(), &clock);
        assert_eq!(
            store.counts("b").scheduled,
            1,
            "a batch must not be half there"
        );
    });
}

#[test]
fn waiting_workers_wake_on_enqueue_and_on_retry() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START);
    // One thread: `yield_now` lets the spawned waiter run until it waits, so the change below
    // happens while it is registered and only a wake-up can end its hour-long wait.
    let single = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    single.block_on(async {
        let store = open(dir.path(), &clock);
        let waiter = {
            let store = store.clone();
            tokio::spawn(async move { store.wait_for_jobs("w", Duration::from_secs(3600)).await })
        };
        tokio::task::yield_now().await;
        let id = store
            .enqueue(NewJob::new("w", "kind", vec![]).retry(fairq_core::retry::RetryPolicy::new(0)))
            .await
            .unwrap();
        tokio::time::timeout(PATIENCE, waiter)
            .await
            .expect("the enqueue woke the waiter")
            .unwrap();
        let job = store
            .claim("w", 1, Duration::from_secs(60))
            .await
            .unwrap()
            .remove(0);
        store.fail(&job, Failure::retryable("x")).await.unwrap();
        let waiter = {
            let store = store.clone();
            tokio::spawn(async move { store.wait_for_jobs("w", Duration::from_secs(3600)).await })
        };
        tokio::task::yield_now().await;
        assert_eq!(store.revive(ReviveTarget::One(id)).await.unwrap(), 1);
        tokio::time::timeout(PATIENCE, waiter)
            .await
            .expect("the retry woke the waiter")
            .unwrap();
    });
}

/// Jobs within every limit of a call (no payload at all) whose records are larger than one
/// journal item: scaled down, with items of 64 KiB (1 GiB for real, where about 350,000 jobs
/// with 1 KiB keys do it).
fn too_large_for_one_item() -> Vec<NewJob> {
    (0..40)
        .map(|i| {
            NewJob::new("q", "kind", vec![])
                .key("k".repeat(1024))
                .unique(format!("{i:04}{}", "u".repeat(1000)), OnConflict::Error)
        })
        .collect()
}

/// An enqueue whose records would not fit in one journal item is refused as invalid, by
/// the owner and through a client alike, and changes nothing; the store goes on taking
/// calls (it was poisoned: the journal refused the item). The same jobs in two calls fit.
#[test]
fn an_enqueue_larger_than_one_journal_item_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START);
    runtime().block_on(async {
        let options = FileOptions::default()
            .clock(clock.clone())
            .max_item_size(64 << 10);
        let owner = FileBackend::open(dir.path(), options.clone()).unwrap();
        let client = FileBackend::open(dir.path(), options).unwrap();
        assert_eq!((owner.role(), client.role()), (Role::Owner, Role::Client));
        for store in [&owner, &client] {
            match store.enqueue_many(too_large_for_one_item()).await {
                Err(BackendError::Invalid(message)) => {
                    assert!(message.contains("smaller calls"), "{message}");
                    assert!(!message.contains("kkkk") && !message.contains("uuuu"));
                }
                other => panic!("expected Invalid, got {other:?}"),
            }
            assert_eq!(owner.len(), 0, "the refused call changed nothing");
        }
        let mut jobs = too_large_for_one_item();
        let second = jobs.split_off(20);
        assert_eq!(owner.enqueue_many(jobs).await.unwrap().len(), 20);
        assert_eq!(client.enqueue_many(second).await.unwrap().len(), 20);
        owner
            .enqueue(NewJob::new("q", "kind", b"x".to_vec()))
            .await
            .unwrap();
        client.close().unwrap();
        owner.close().unwrap();
    });
    let store = open(dir.path(), &clock);
    assert_eq!(store.len(), 41, "every accepted job survives a reopen");
}
