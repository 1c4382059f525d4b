//! Kill -9 of a worker process in the middle of jobs, over several rounds, then a clean run:
//! every acknowledged enqueue is processed, and no job runs again once its completion was
//! acknowledged (durable).
//!
//! The test re-runs its own binary as the worker process (selected by an environment
//! variable). The worker appends one line per event to a log file with single `write` calls in
//! append mode, which a kill -9 cannot tear or lose (the data is in the kernel already):
//! `E id` after an enqueue returned, `S id attempt` before a job's work starts, `D id` after
//! its completion returned.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fairq_core::retry::{Backoff, RetryPolicy};
use fairq_file::{FileBackend, FileError, FileOptions};
use fairq_worker::{Backend, JobId, JobStatus, NewJob};

const CHILD_DIR: &str = "FAIRQ_FILE_CRASH_DIR";
const CHILD_FINAL: &str = "FAIRQ_FILE_CRASH_FINAL";
const TEST_NAME: &str = "kill_nine_mid_job_loses_nothing";
const ROUNDS: usize = 6;
/// Jobs a killed worker enqueues at most (it is usually killed before).
const PER_ROUND: usize = 400;

struct Log(Mutex<std::fs::File>);

impl Log {
    fn open(path: &Path) -> Log {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open the event log");
        Log(Mutex::new(file))
    }

    fn line(&self, text: String) {
        let mut file = self.0.lock().unwrap();
        file.write_all(format!("{text}\n").as_bytes())
            .expect("append to the event log");
    }
}

fn policy() -> RetryPolicy {
    RetryPolicy::forever().with_backoff(Backoff::Immediate)
}

/// The worker process: enqueues (unless final), and runs jobs with four concurrent workers.
fn child(dir: PathBuf, last: bool) {
    let runtime = common::runtime();
    runtime.block_on(async move {
        let store = FileBackend::open(dir.join("store"), FileOptions::default()).expect("open");
        let log = Arc::new(Log::open(&dir.join("events.log")));
        log.line("O".into());
        let mut tasks = Vec::new();
        if !last {
            let store = store.clone();
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..PER_ROUND {
                    let job = NewJob::new("crash", "work", vec![1; 64])
                        .key(format!("tenant-{}", i % 5))
                        .retry(policy());
                    let id = store.enqueue(job).await.expect("enqueue");
                    log.line(format!("E {id}"));
                }
            }));
        }
        for _ in 0..4 {
            let store = store.clone();
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let jobs = store
                        .claim("crash", 1, Duration::from_secs(60))
                        .await
                        .expect("claim");
                    let Some(job) = jobs.into_iter().next() else {
                        if last && store.counts("crash").pending() == 0 {
                            return;
                        }
                        store
                            .wait_for_jobs("crash", Duration::from_millis(20))
                            .await;
                        continue;
                    };
                    log.line(format!("S {} {}", job.claim.id, job.attempt));
                    // Some work, so kills land inside jobs too.
                    tokio::time::sleep(Duration::from_millis(job.claim.id.0 % 3)).await;
                    store.complete(job.claim).await.expect("complete");
                    log.line(format!("D {}", job.claim.id));
                }
            }));
        }
        for task in tasks {
            task.await.expect("task");
        }
        store.close().expect("close");
    });
}

fn spawn(dir: &Path, last: bool) -> std::process::Child {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    if last {
        cmd.env(CHILD_FINAL, "1");
    }
    cmd.spawn().expect("spawn the worker process")
}

fn log_lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("events.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Waits until the worker has opened the store (its first log line for this round).
fn wait_opened(dir: &Path, opened_before: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while log_lines(dir).iter().filter(|l| *l == "O").count() <= opened_before {
        assert!(
            Instant::now() < deadline,
            "the worker process never opened the store"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn kill_nine_mid_job_loses_nothing() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        child(PathBuf::from(dir), std::env::var_os(CHILD_FINAL).is_some());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    eprintln!("kill -9 test seed {seed}");
    let mut random = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    for round in 0..ROUNDS {
        let mut worker = spawn(dir.path(), false);
        wait_opened(dir.path(), round);
        // While the worker runs, nobody else may own its folder.
        match FileBackend::open(
            dir.path().join("store"),
            FileOptions::default().share(false),
        ) {
            Err(FileError::Locked { .. }) => {}
            other => panic!("a second process took a held store: {other:?}"),
        }
        // Kill at a random moment: some rounds early, some deep into the work.
        std::thread::sleep(Duration::from_millis(20 + random(400)));
        worker.kill().expect("kill -9");
        worker.wait().expect("reap");
    }
    let mut worker = spawn(dir.path(), true);
    let status = worker.wait().expect("wait for the final worker");
    assert!(status.success(), "the final worker failed: {status}");

    let lines = log_lines(dir.path());
    let mut enqueued = BTreeSet::new();
    let mut done_at: HashMap<u64, usize> = HashMap::new();
    let mut runs_after_done = Vec::new();
    let mut starts = 0;
    for (at, line) in lines.iter().enumerate() {
        let mut parts = line.split(' ');
        let tag = parts.next().unwrap_or_default();
        let id = parts.next().and_then(|p| p.parse::<u64>().ok());
        match (tag, id) {
            ("E", Some(id)) => {
                enqueued.insert(id);
            }
            ("S", Some(id)) => {
                starts += 1;
                if let Some(done) = done_at.get(&id) {
                    runs_after_done.push((id, *done, at));
                }
            }
            ("D", Some(id)) => {
                done_at.entry(id).or_insert(at);
            }
            _ => {}
        }
    }
    assert!(
        runs_after_done.is_empty(),
        "jobs ran again after their completion was acknowledged: {runs_after_done:?}"
    );
    assert!(!enqueued.is_empty(), "no enqueue was acknowledged");
    eprintln!(
        "{} acknowledged enqueues, {} starts, {} acknowledged completions",
        enqueued.len(),
        starts,
        done_at.len()
    );

    // Every acknowledged enqueue was processed, and the store agrees.
    let runtime = common::runtime();
    runtime.block_on(async {
        let store = FileBackend::open(dir.path().join("store"), FileOptions::default()).unwrap();
        for id in &enqueued {
            let info = store.get(JobId(*id)).await.unwrap();
            let status = info.map(|i| i.status());
            assert_eq!(status, Some(JobStatus::Succeeded), "job {id}");
        }
        let counts = store.counts("crash");
        assert_eq!(counts.pending(), 0);
        assert!(counts.succeeded >= enqueued.len() as u64);
    });
}
