//! Fault test (issue 13): a Redis restart with the append-only file on (`appendonly yes`,
//! `appendfsync always`) while two workers work through 20,000 jobs, and one of them killed
//! mid-batch. Every job must complete; an acknowledged completion must never run again, so
//! the only jobs that run twice are ones in flight (claimed, run, not yet acknowledged) at the
//! kill or at the restart. The counts are printed.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::server::{self, PrivateRedis};
use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::{Backend, BackendError, Finished, Job, JobId, NewJob};

const JOBS: usize = 20_000;
const BATCH: usize = 100;
const QUEUE: &str = "restart";
const LEASE: Duration = Duration::from_secs(1);
/// How long a call may keep failing (the server is down) before the test gives up: a
/// deadline against hangs, not a wait.
const PATIENCE: Duration = Duration::from_secs(60);

/// What the workers saw.
#[derive(Default)]
struct Log {
    /// Runs per job.
    runs: HashMap<JobId, u32>,
    /// Jobs whose completion the store acknowledged.
    acked: HashSet<JobId>,
    /// Acknowledged jobs that ran again (must stay empty).
    ran_after_ack: Vec<JobId>,
}

impl Log {
    fn ran(&mut self, id: JobId) {
        if self.acked.contains(&id) {
            self.ran_after_ack.push(id);
        }
        *self.runs.entry(id).or_default() += 1;
    }
}

/// Repeats `call` while the store is unavailable (the server restarting).
async fn patiently<T, F, Fut>(what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, BackendError>>,
{
    let until = Instant::now() + PATIENCE;
    loop {
        match call().await {
            Ok(value) => return value,
            Err(err) if err.is_transient() && Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(err) => panic!("{what}: {err}"),
        }
    }
}

/// One worker: claims a batch, runs it (records the runs), settles it. With `die_after`, it
/// stops after that many batches right after running a batch, before settling it, as a
/// process killed mid-batch would.
async fn worker(
    store: RedisBackend,
    log: Arc<Mutex<Log>>,
    done: Arc<AtomicU64>,
    batches: Arc<tokio::sync::watch::Sender<u64>>,
    die_after: Option<u64>,
) {
    let mut mine = 0u64;
    while done.load(Ordering::SeqCst) < JOBS as u64 {
        let jobs: Vec<Job> = patiently("claim", || store.claim(QUEUE, BATCH, LEASE)).await;
        if jobs.is_empty() {
            // Jobs of the dead worker come back once their leases expire.
            patiently("rescue", || store.rescue(QUEUE)).await;
            store.wait_for_jobs(QUEUE, Duration::from_millis(100)).await;
            continue;
        }
        {
            let mut log = log.lock().unwrap();
            for job in &jobs {
                log.ran(job.claim.id);
            }
        }
        mine += 1;
        batches.send_modify(|n| *n += 1);
        if die_after.is_some_and(|n| mine >= n) {
            return;
        }
        let finished: Vec<Finished> = jobs.iter().map(|job| Finished::new(job, Ok(()))).collect();
        let answers = patiently("settle", || store.settle(finished.clone())).await;
        let mut log = log.lock().unwrap();
        for (job, answer) in jobs.iter().zip(answers) {
            match answer {
                Ok(_) => {
                    if log.acked.insert(job.claim.id) {
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                }
                // The lease ran out during the restart and the job was rescued (or already
                // finished by the worker that got it): refused, not acknowledged.
                Err(BackendError::Transition { .. }) => {}
                Err(err) => panic!("settling {}: {err}", job.claim.id),
            }
        }
    }
}

#[test]
fn a_redis_restart_with_aof_loses_no_job() {
    if !server::installed() {
        return;
    }
    let redis = Arc::new(Mutex::new(PrivateRedis::start(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ])));
    let url = format!("redis://127.0.0.1:{}/", redis.lock().unwrap().port);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let options = RedisOptions::new().prefix("restart");
        let producer = RedisBackend::connect(&url, options.clone()).await.unwrap();
        for start in (0..JOBS).step_by(500) {
            let jobs = (start..(start + 500).min(JOBS))
                .map(|i| {
                    NewJob::new(QUEUE, "n", (i as u64).to_le_bytes().to_vec())
                        .key(format!("t{}", i % 7))
                })
                .collect();
            producer.enqueue_many(jobs).await.unwrap();
        }
        let log = Arc::new(Mutex::new(Log::default()));
        let done = Arc::new(AtomicU64::new(0));
        let batches = Arc::new(tokio::sync::watch::Sender::new(0u64));
        let mut seen = batches.subscribe();
        let mut handles = Vec::new();
        for die_after in [None, Some(30)] {
            let store = RedisBackend::connect(&url, options.clone()).await.unwrap();
            handles.push(tokio::spawn(worker(
                store,
                Arc::clone(&log),
                Arc::clone(&done),
                Arc::clone(&batches),
                die_after,
            )));
        }
        // Restart the server once the workers are well into the run.
        let restarted = Arc::new(AtomicBool::new(false));
        seen.wait_for(|n| *n >= 60).await.unwrap();
        let server = Arc::clone(&redis);
        let flag = Arc::clone(&restarted);
        tokio::task::spawn_blocking(move || {
            server.lock().unwrap().restart();
            flag.store(true, Ordering::SeqCst);
        })
        .await
        .unwrap();
        // A server that lost the jobs would leave the workers looking for them forever: a
        // deadline against that hang, not a wait.
        tokio::time::timeout(4 * PATIENCE, futures::future::join_all(handles))
            .await
            .expect("the workers did not finish: jobs were lost in the restart")
            .into_iter()
            .for_each(|joined| joined.expect("a worker panicked"));
        assert!(restarted.load(Ordering::SeqCst));

        let stats = producer.stats().await.unwrap();
        let log = log.lock().unwrap();
        let duplicates: Vec<_> = log.runs.iter().filter(|(_, n)| **n > 1).collect();
        println!(
            "{JOBS} jobs: {} ran, {} acknowledged, {} ran more than once (in flight at the \
             kill or the restart), {} ran again after an acknowledgement; store: {:?}",
            log.runs.len(),
            log.acked.len(),
            duplicates.len(),
            log.ran_after_ack.len(),
            stats[0].counts
        );
        assert!(
            log.ran_after_ack.is_empty(),
            "acknowledged jobs ran again: {:?}",
            log.ran_after_ack
        );
        assert_eq!(log.runs.len(), JOBS, "every job ran");
        assert_eq!(
            log.acked.len(),
            JOBS,
            "every job's completion was acknowledged"
        );
        assert_eq!(stats[0].counts.succeeded, JOBS as u64, "none lost");
        assert_eq!(stats[0].counts.pending() + stats[0].counts.running, 0);
        // At most the killed worker's batch and the batches in flight at the restart.
        assert!(
            duplicates.len() <= 3 * BATCH,
            "{} duplicates",
            duplicates.len()
        );
        assert!(
            !duplicates.is_empty(),
            "the killed worker's batch ran twice"
        );
    });
}
