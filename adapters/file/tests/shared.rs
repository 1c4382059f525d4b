//! One store folder used by several processes at once: the process that owns it serves it on
//! the folder's socket, the others open it as clients. Producers enqueue while a worker works,
//! the owner is killed with kill -9 and another process takes over: nothing acknowledged is
//! lost.
//!
//! The tests re-run this binary as the other processes (the test `child` with an environment
//! variable naming the part to play). Each process appends one line per event to its own log
//! with single `write` calls, which a kill -9 cannot tear: `O role` once the store is open,
//! `E id` after an enqueue returned, `D id` after a completion returned, `X error` after a
//! call failed.

mod common;

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fairq_file::{FileBackend, FileOptions, Role};
use fairq_worker::{Backend, Finished, JobId, JobStatus, NewJob};

const ROLE: &str = "FAIRQ_SHARED_ROLE";
const DIR: &str = "FAIRQ_SHARED_DIR";
const LOG: &str = "FAIRQ_SHARED_LOG";
const QUEUE: &str = "shared";
/// Jobs each producer enqueues.
const PER_PRODUCER: usize = 300;

fn append(log: &Path, line: &str) {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("open the event log");
    file.write_all(format!("{line}\n").as_bytes())
        .expect("append to the event log");
}

fn lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn ids(log: &Path, tag: &str) -> Vec<u64> {
    lines(log)
        .iter()
        .filter_map(|l| l.strip_prefix(tag)?.strip_prefix(' ')?.parse().ok())
        .collect()
}

/// Waits (without a timing assumption: up to a generous deadline, then fails) until `log`
/// has a line for which `seen` holds.
fn wait_for(log: &Path, what: &str, seen: impl Fn(&[String]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !seen(&lines(log)) {
        assert!(
            Instant::now() < deadline,
            "never saw {what} in {}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A process this test started, killed if the test fails before it ends.
struct Process(Child);

impl Process {
    fn kill(&mut self) {
        self.0.kill().expect("kill -9");
        self.0.wait().expect("reap");
    }

    fn succeeds(&mut self) -> bool {
        self.0.wait().expect("wait for a process").success()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn spawn(role: &str, dir: &Path, log: &Path) -> Process {
    let child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["child", "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(DIR, dir)
        .env(LOG, log)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn a process");
    Process(child)
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Owner => "owner",
        Role::Client => "client",
        _ => "other",
    }
}

/// The part a re-run of this binary plays.
#[test]
fn child() {
    let (Some(role), Some(dir), Some(log)) = (
        std::env::var_os(ROLE),
        std::env::var_os(DIR),
        std::env::var_os(LOG),
    ) else {
        return;
    };
    let (dir, log) = (PathBuf::from(dir), PathBuf::from(log));
    let runtime = common::runtime();
    runtime.block_on(async move {
        match role.to_str().unwrap_or_default() {
            "worker" => worker(&dir, &log).await,
            "producer" => producer(&dir, &log).await,
            other => panic!("unknown part {other}"),
        }
    });
}

/// Opens the store, works the queue in batches until the folder's `done` file exists and
/// nothing is pending, then closes it.
async fn worker(dir: &Path, log: &Path) {
    let store = FileBackend::open(dir.join("store"), FileOptions::default()).expect("open");
    append(log, &format!("O {}", role_name(store.role())));
    loop {
        let jobs = store
            .claim(QUEUE, 16, Duration::from_secs(60))
            .await
            .expect("claim");
        if jobs.is_empty() {
            if dir.join("done").exists() && store.counts(QUEUE).pending() == 0 {
                break;
            }
            store.wait_for_jobs(QUEUE, Duration::from_millis(20)).await;
            continue;
        }
        let batch = jobs.iter().map(|j| Finished::new(j, Ok(()))).collect();
        let answers = store.settle(batch).await.expect("settle");
        for (job, answer) in jobs.iter().zip(answers) {
            answer.expect("complete");
            append(log, &format!("D {}", job.claim.id));
        }
    }
    store.close().expect("close");
}

/// Opens the store and enqueues `PER_PRODUCER` jobs, one by one and in small batches; a
/// failed call is logged and tried again until it is acknowledged.
async fn producer(dir: &Path, log: &Path) {
    let store = FileBackend::open(dir.join("store"), FileOptions::default()).expect("open");
    append(log, &format!("O {}", role_name(store.role())));
    let mut made = 0;
    while made < PER_PRODUCER {
        let n = if made % 3 == 0 { 1 } else { 4 }.min(PER_PRODUCER - made);
        let jobs: Vec<NewJob> = (0..n)
            .map(|i| NewJob::new(QUEUE, "work", vec![7; 100]).key(format!("k{}", (made + i) % 5)))
            .collect();
        match store.enqueue_many(jobs).await {
            Ok(ids) => {
                for id in ids {
                    append(log, &format!("E {id}"));
                }
                made += n;
            }
            Err(e) => {
                append(log, &format!("X {e}"));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    store.close().expect("close");
}

/// Every acknowledged enqueue of the producers' logs succeeded in the store.
fn assert_all_done(dir: &Path, producer_logs: &[PathBuf]) -> usize {
    let enqueued: BTreeSet<u64> = producer_logs.iter().flat_map(|l| ids(l, "E")).collect();
    let runtime = common::runtime();
    runtime.block_on(async {
        let store = FileBackend::open(dir.join("store"), FileOptions::default()).unwrap();
        assert_eq!(store.role(), Role::Owner);
        for id in &enqueued {
            let status = store.get(JobId(*id)).await.unwrap().map(|i| i.status());
            assert_eq!(status, Some(JobStatus::Succeeded), "job {id}");
        }
        assert_eq!(store.counts(QUEUE).pending(), 0);
        store.close().unwrap();
    });
    enqueued.len()
}

#[test]
fn two_producers_enqueue_while_a_third_process_works() {
    let dir = tempfile::tempdir().unwrap();
    let logs: Vec<PathBuf> = ["worker", "p1", "p2"]
        .iter()
        .map(|n| dir.path().join(format!("{n}.log")))
        .collect();
    let mut worker = spawn("worker", dir.path(), &logs[0]);
    wait_for(&logs[0], "the worker's open", |l| !l.is_empty());
    assert_eq!(lines(&logs[0])[0], "O owner");
    let mut producers: Vec<Process> = logs[1..]
        .iter()
        .map(|log| spawn("producer", dir.path(), log))
        .collect();
    for producer in &mut producers {
        assert!(producer.succeeds(), "a producer failed");
    }
    for log in &logs[1..] {
        assert_eq!(lines(log)[0], "O client");
        assert!(
            !lines(log).iter().any(|l| l.starts_with('X')),
            "a producer's call failed: {:?}",
            lines(log)
        );
        assert_eq!(ids(log, "E").len(), PER_PRODUCER);
    }
    std::fs::write(dir.path().join("done"), b"").unwrap();
    assert!(worker.succeeds(), "the worker failed");
    // Nothing crashed: every job ran exactly once, and the store agrees.
    let mut done = ids(&logs[0], "D");
    done.sort_unstable();
    let mut enqueued: Vec<u64> = logs[1..].iter().flat_map(|l| ids(l, "E")).collect();
    enqueued.sort_unstable();
    assert_eq!(done, enqueued);
    assert_eq!(assert_all_done(dir.path(), &logs[1..]), 2 * PER_PRODUCER);
}

#[test]
fn the_owner_killed_mid_run_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let first_log = dir.path().join("worker-1.log");
    let second_log = dir.path().join("worker-2.log");
    let producer_logs: Vec<PathBuf> = ["p1", "p2"]
        .iter()
        .map(|n| dir.path().join(format!("{n}.log")))
        .collect();
    let mut first = spawn("worker", dir.path(), &first_log);
    wait_for(&first_log, "the first worker's open", |l| !l.is_empty());
    // Two producers enqueue while the owner works.
    let mut producers: Vec<Process> = producer_logs
        .iter()
        .map(|log| spawn("producer", dir.path(), log))
        .collect();
    for log in &producer_logs {
        wait_for(log, "50 acknowledged enqueues", |l| {
            l.iter().filter(|l| l.starts_with('E')).count() >= 50
        });
    }
    first.kill();
    // With no owner left, each producer's calls fail with a clear error.
    for log in &producer_logs {
        wait_for(log, "a failed call", |l| {
            l.iter().any(|l| l.starts_with('X'))
        });
        let failure = lines(log).into_iter().find(|l| l.starts_with('X')).unwrap();
        eprintln!("a producer was told: {failure}");
        assert!(
            failure.contains("store folder") && failure.contains("unavailable"),
            "{failure}"
        );
    }
    // The killed owner left its socket behind; the next process to open the folder takes it
    // over, and the producers reconnect to it.
    assert!(dir.path().join("store").join("fairq.sock").exists());
    let mut second = spawn("worker", dir.path(), &second_log);
    for producer in &mut producers {
        assert!(producer.succeeds(), "a producer failed");
    }
    assert_eq!(lines(&second_log)[0], "O owner");
    std::fs::write(dir.path().join("done"), b"").unwrap();
    assert!(second.succeeds(), "the second worker failed");
    let acknowledged = assert_all_done(dir.path(), &producer_logs);
    assert!(acknowledged >= 2 * PER_PRODUCER);
    // A job whose completion the killed owner acknowledged is never run again.
    let completed_before: BTreeSet<u64> = ids(&first_log, "D").into_iter().collect();
    let run_again: Vec<u64> = ids(&second_log, "D")
        .into_iter()
        .filter(|id| completed_before.contains(id))
        .collect();
    assert!(run_again.is_empty(), "completed twice: {run_again:?}");
    eprintln!(
        "{acknowledged} acknowledged enqueues, {} completed before the kill, {} failed calls while no process owned the folder",
        completed_before.len(),
        producer_logs
            .iter()
            .flat_map(|l| lines(l))
            .filter(|l| l.starts_with('X'))
            .count()
    );
}

#[test]
fn a_clients_claim_is_durable_before_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("worker.log");
    // An owner that works another queue: it never touches ours.
    let mut owner = spawn("worker", dir.path(), &log);
    wait_for(&log, "the owner's open", |l| !l.is_empty());
    let runtime = common::runtime();
    let id = runtime.block_on(async {
        let store = FileBackend::open(dir.path().join("store"), FileOptions::default()).unwrap();
        assert_eq!(store.role(), Role::Client);
        let id = store
            .enqueue(NewJob::new("mine", "k", vec![]))
            .await
            .unwrap();
        let jobs = store
            .claim("mine", 1, Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(jobs[0].claim.id, id);
        // Killed right after the claim returned: it must be on disk already.
        owner.kill();
        let err = store.complete(jobs[0].claim).await.unwrap_err();
        assert!(err.is_transient(), "{err}");
        id
    });
    runtime.block_on(async {
        let store = FileBackend::open(dir.path().join("store"), FileOptions::default()).unwrap();
        assert_eq!(store.role(), Role::Owner);
        let info = store.get(id).await.unwrap().unwrap();
        // Rescued with its attempt counted: the claim was durable.
        assert_eq!((info.status(), info.attempts), (JobStatus::Retrying, 1));
    });
}

/// An owner on its way out can still hold the folder's lock and socket for a moment (it was
/// just killed and a child it was forking keeps copies of its descriptors until the child
/// execs or dies): a process opening the folder then connects, and the connection ends
/// during the handshake. That is waited out like a socket nobody serves, and the opener
/// becomes the owner once the lock is free, instead of failing.
#[test]
fn an_owner_going_away_during_the_handshake_is_waited_out() {
    let dir = tempfile::tempdir().unwrap();
    FileBackend::open(dir.path(), FileOptions::default())
        .unwrap()
        .close()
        .unwrap();
    // The stand-in for the dying owner: the lock, and a socket that closes the one
    // connection it accepts before the handshake, then lets go of both.
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.path().join("fairq.lock"))
        .unwrap();
    fs4::FileExt::try_lock(&lock).expect("the folder's lock is free");
    let socket = dir.path().join("fairq.sock");
    let _ = std::fs::remove_file(&socket);
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let dying = std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        drop(conn);
        drop(listener);
        let _ = std::fs::remove_file(&socket);
        drop(lock);
    });
    let store = FileBackend::open(dir.path(), FileOptions::default())
        .expect("the opener waits for the lock instead of failing");
    dying.join().unwrap();
    assert_eq!(store.role(), Role::Owner);
    store.close().unwrap();
}
