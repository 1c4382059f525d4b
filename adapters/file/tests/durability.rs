//! What each call waits for: claims return before their record is synced, every other change
//! only once it is durable; later changes of a job write a few dozen bytes, not its payload.

mod common;

use std::time::Duration;

use common::{LEASE, START, open, runtime};
use fairq_file::{FileBackend, FileOptions};
use fairq_journal::sim::{SimDisk, SimFaults};
use fairq_worker::{Backend, Finished, JobStatus, ManualClock, NewJob};

fn sim_options(disk: &SimDisk, clock: &ManualClock) -> FileOptions {
    FileOptions::default()
        .clock(clock.clone())
        .storage(disk.clone())
}

/// Bytes in the store's journal segments.
fn journal_bytes(dir: &std::path::Path) -> u64 {
    common::segments(dir)
        .iter()
        .map(|name| std::fs::metadata(dir.join(name)).unwrap().len())
        .sum()
}

#[test]
fn a_claim_does_not_wait_for_its_sync() {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimDisk::new(3);
    let clock = ManualClock::new(START);
    runtime().block_on(async {
        let store = FileBackend::open(dir.path(), sim_options(&disk, &clock)).unwrap();
        store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
        // From now on no sync succeeds: a call that waits for one fails.
        disk.set_faults(SimFaults {
            sync_error_per_mille: 1000,
            ..SimFaults::default()
        });
        let jobs = store.claim("q", 1, LEASE).await.unwrap();
        assert_eq!(jobs.len(), 1, "the claim answered without its sync");
        let err = store.complete(jobs[0].claim).await.unwrap_err();
        assert!(err.to_string().contains("reopen"), "{err}");
    });
}

#[test]
fn a_claim_is_durable_once_a_later_change_is() {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimDisk::new(4);
    let clock = ManualClock::new(START);
    let options = sim_options(&disk, &clock);
    runtime().block_on(async {
        let store = FileBackend::open(dir.path(), options.clone()).unwrap();
        let id = store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
        let claimed = store.claim("q", 1, LEASE).await.unwrap();
        assert_eq!(claimed[0].claim.id, id);
        // A durable change after the claim: the journal keeps changes in order, so the claim
        // is on disk too.
        store
            .enqueue(NewJob::new("other", "k", vec![]))
            .await
            .unwrap();
        disk.crash();
        drop(store);
        disk.restart();
        let store = FileBackend::open(dir.path(), options).unwrap();
        let info = store.get(id).await.unwrap().unwrap();
        // The claimed attempt counted: the job was rescued, not handed out as new.
        assert_eq!(
            (info.status(), info.attempts),
            (JobStatus::Retrying, 1),
            "{info:?}"
        );
    });
}

#[test]
fn a_settled_job_costs_a_few_dozen_bytes_not_its_payload() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START);
    let jobs = 50;
    runtime().block_on(async {
        let store = open(dir.path(), &clock);
        let batch = (0..jobs)
            .map(|i| NewJob::new("q", "k", vec![7; 8 << 10]).key(format!("t{}", i % 3)))
            .collect();
        store.enqueue_many(batch).await.unwrap();
        let before = journal_bytes(dir.path());
        let claimed = store.claim("q", jobs, LEASE).await.unwrap();
        clock.advance(Duration::from_millis(5));
        let finished = claimed.iter().map(|j| Finished::new(j, Ok(()))).collect();
        for answer in store.settle(finished).await.unwrap() {
            answer.unwrap();
        }
        let grown = journal_bytes(dir.path()) - before;
        // A claim and a completion per job, plus the queue's counters and frame headers:
        // far below one 8 KiB payload per job.
        assert!(
            grown < 100 * jobs as u64,
            "{grown} bytes written to claim and settle {jobs} jobs"
        );
        assert_eq!(store.counts("q").succeeded, jobs as u64);
        store.close().unwrap();
        // The records read back as the whole job.
        let store = open(dir.path(), &clock);
        assert_eq!(store.counts("q").succeeded, jobs as u64);
        let info = store.get(claimed[0].claim.id).await.unwrap().unwrap();
        assert_eq!(info.payload, vec![7; 8 << 10]);
        assert_eq!(info.started_at, Some(START));
    });
}

#[test]
fn settle_and_claim_is_one_durable_change() {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimDisk::new(5);
    let clock = ManualClock::new(START);
    let options = sim_options(&disk, &clock);
    runtime().block_on(async {
        let store = FileBackend::open(dir.path(), options.clone()).unwrap();
        let batch = (0..4).map(|_| NewJob::new("q", "k", vec![])).collect();
        store.enqueue_many(batch).await.unwrap();
        let first = store.claim("q", 2, LEASE).await.unwrap();
        let syncs = disk.sync_count();
        let finished = first.iter().map(|j| Finished::new(j, Ok(()))).collect();
        let answer = store
            .settle_and_claim(finished, "q", 2, LEASE)
            .await
            .unwrap();
        assert!(answer.settled.iter().all(Result::is_ok));
        let next = answer.claimed.unwrap();
        assert_eq!(next.len(), 2);
        // Answered after a sync that covered the settlement and the claim together.
        assert!(disk.sync_count() > syncs);
        disk.crash();
        drop(store);
        disk.restart();
        let store = FileBackend::open(dir.path(), options).unwrap();
        let counts = store.counts("q");
        assert_eq!(counts.succeeded, 2);
        // The second claim was durable with the settlement: rescued, attempt counted.
        assert_eq!(counts.retrying, 2, "{counts:?}");
    });
}

#[test]
fn heartbeat_many_extends_live_leases_and_refuses_stale_ones() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START);
    runtime().block_on(async {
        let store = open(dir.path(), &clock);
        let batch = (0..3).map(|_| NewJob::new("q", "k", vec![])).collect();
        store.enqueue_many(batch).await.unwrap();
        let jobs = store.claim("q", 3, LEASE).await.unwrap();
        store.complete(jobs[1].claim).await.unwrap();
        clock.advance(Duration::from_secs(10));
        let claims = jobs.iter().map(|j| j.claim).collect();
        let answers = store
            .heartbeat_many(claims, Duration::from_secs(120))
            .await
            .unwrap();
        assert_eq!(answers.len(), 3);
        assert_eq!(*answers[0].as_ref().unwrap(), START + 130_000);
        assert!(
            answers[1].is_err(),
            "a finished job's lease is not extended"
        );
        assert_eq!(*answers[2].as_ref().unwrap(), START + 130_000);
    });
}
