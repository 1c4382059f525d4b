//! A master of a private 3-master, 3-replica cluster is killed (`kill -9`) while a producer
//! enqueues and four workers run the jobs: the workers follow the new topology and carry on.
//! Each run prints how many jobs were acknowledged, completed, lost and run more than once.
//!
//! With `wait_for_replicas(1, ..)` no acknowledged job may be lost. Without it, the jobs the
//! killed master acknowledged but had not yet sent to its replica may be lost (Redis
//! replicates asynchronously): that run only checks that the work goes on, and prints what
//! was lost.
//!
//! `FAIRQ_FAILOVER_JOBS` sets the number of jobs of the waiting run (default 20,000; the run
//! without waiting enqueues a quarter of it).

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::cluster::{self, LocalCluster};
use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::{Backend, Job, NewJob, QueueConfig, Worker};
use tokio::sync::Notify;

const QUEUES: usize = 8;
const WORKERS: usize = 4;
const BATCH: usize = 100;
/// The longest the run may take to finish every acknowledged job after the last enqueue (a
/// bound for a failing run, not a synchronisation).
const PATIENCE: Duration = Duration::from_secs(60);
/// A run in which no job ran for this long is over.
const QUIET: Duration = Duration::from_secs(10);

/// The runs start clusters of their own, one at a time (ports are picked when free).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn jobs_knob() -> usize {
    std::env::var("FAIRQ_FAILOVER_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

/// What a run saw.
#[derive(Debug)]
struct Counts {
    acknowledged: usize,
    completed: usize,
    lost: usize,
    duplicated: usize,
    enqueue_retries: usize,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "acknowledged {}, completed {}, lost {}, duplicated {} (enqueue calls repeated \
             after errors: {})",
            self.acknowledged, self.completed, self.lost, self.duplicated, self.enqueue_retries
        )
    }
}

fn queue(i: usize) -> String {
    format!("failover-{}", i % QUEUES)
}

/// Runs `total` jobs through four workers, killing the master of the first queue's slot once
/// a third of them were acknowledged, and restarting it (it comes back as a replica) once
/// its replica has taken over.
async fn run(cluster: Arc<Mutex<LocalCluster>>, total: usize, wait: bool) -> Counts {
    let url = cluster.lock().unwrap().url();
    let mut options = RedisOptions::new()
        .prefix(common::prefix())
        .response_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1));
    if wait {
        options = options.wait_for_replicas(1, Duration::from_secs(2));
    }
    let store = RedisBackend::connect(&url, options)
        .await
        .expect("connect to the cluster");

    // Executions per job index (the payload).
    let runs: Arc<Mutex<HashMap<u64, u32>>> = Arc::default();
    let progress = Arc::new(Notify::new());
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        let runs = Arc::clone(&runs);
        let progress = Arc::clone(&progress);
        let mut builder = Worker::builder(store.clone())
            .error_backoff(Duration::from_millis(10), Duration::from_millis(500))
            .handle("n", move |job: Job| {
                let runs = Arc::clone(&runs);
                let progress = Arc::clone(&progress);
                async move {
                    let bytes: [u8; 8] =
                        job.payload.as_slice().try_into().map_err(|_| "payload")?;
                    *runs
                        .lock()
                        .unwrap()
                        .entry(u64::from_le_bytes(bytes))
                        .or_default() += 1;
                    progress.notify_one();
                    Ok::<_, &str>(())
                }
            });
        for q in 0..QUEUES {
            builder = builder.queue(
                queue(q),
                QueueConfig::default()
                    .concurrency(8)
                    .lease(Duration::from_secs(3))
                    .rescue_interval(Duration::from_millis(500)),
            );
        }
        workers.push(builder.build().expect("a worker").start().expect("start"));
    }

    let victim = {
        let c = cluster.lock().unwrap();
        let key = format!("{}meta", store.keys().queue_base(&queue(0)));
        c.master_of(&key).expect("the first queue's master")
    };
    let killed = Arc::new(AtomicBool::new(false));
    let mut acknowledged = Vec::with_capacity(total);
    let mut enqueue_retries = 0;
    let mut restarter = None;
    for start in (0..total).step_by(BATCH) {
        if start >= total / 3 && !killed.swap(true, Ordering::SeqCst) {
            cluster.lock().unwrap().kill9(victim);
            eprintln!("killed master {victim} after {start} acknowledged jobs");
            let cluster = Arc::clone(&cluster);
            let key = format!("{}meta", store.keys().queue_base(&queue(0)));
            // Once the replica took over, the old master comes back (as its replica), so
            // that WAIT has a replica to count again.
            restarter = Some(tokio::task::spawn_blocking(move || {
                let until = Instant::now() + PATIENCE;
                loop {
                    let owner = cluster.lock().unwrap().master_of(&key);
                    if owner.is_some_and(|o| o != victim) {
                        eprintln!("slot taken over by {owner:?}; restarting {victim}");
                        break;
                    }
                    assert!(Instant::now() < until, "no failover within {PATIENCE:?}");
                    std::thread::sleep(Duration::from_millis(50));
                }
                cluster.lock().unwrap().restart(victim).expect("restart");
                // Until it has synced, no write on its old slots can be confirmed.
                let restarted = Instant::now();
                loop {
                    let cluster = cluster.lock().unwrap();
                    if cluster.synced_replica(victim) {
                        eprintln!(
                            "{victim} synced as a replica {:?} after its restart",
                            restarted.elapsed()
                        );
                        break;
                    }
                    assert!(
                        restarted.elapsed() < PATIENCE,
                        "{victim} did not sync as a replica within {PATIENCE:?}{}",
                        cluster.report()
                    );
                    drop(cluster);
                    std::thread::sleep(Duration::from_millis(50));
                }
            }));
        }
        let end = (start + BATCH).min(total);
        let jobs: Vec<NewJob> = (start..end)
            .map(|i| NewJob::new(queue(i), "n", (i as u64).to_le_bytes().to_vec()))
            .collect();
        let until = Instant::now() + PATIENCE;
        loop {
            match store.enqueue_many(jobs.clone()).await {
                Ok(_) => break,
                Err(err) if err.is_transient() && Instant::now() < until => {
                    enqueue_retries += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(err) => panic!("enqueue: {err}{}", cluster.lock().unwrap().report()),
            }
        }
        acknowledged.extend((start..end).map(|i| i as u64));
    }
    if let Some(restarter) = restarter {
        restarter.await.expect("the failover and restart");
    }

    // Every acknowledged job runs; a run that stops making progress for `QUIET` ends here
    // (without waiting for replicas, lost jobs never come), and the counts tell.
    let until = Instant::now() + PATIENCE;
    loop {
        let notified = progress.notified();
        let done = {
            let runs = runs.lock().unwrap();
            acknowledged.iter().filter(|i| runs.contains_key(i)).count()
        };
        if done == acknowledged.len() || Instant::now() > until {
            break;
        }
        if tokio::time::timeout(QUIET, notified).await.is_err() {
            break;
        }
    }
    for worker in workers {
        worker.shutdown(Duration::from_secs(10)).await;
    }
    let runs = runs.lock().unwrap().clone();
    let lost = acknowledged
        .iter()
        .filter(|i| !runs.contains_key(i))
        .count();
    let duplicated = runs.values().map(|n| (n - 1) as usize).sum();
    eprintln!(
        "cluster connection renewals: {}",
        store.connection_renewals()
    );
    let _ = store.destroy().await;
    Counts {
        acknowledged: acknowledged.len(),
        completed: runs.len(),
        lost,
        duplicated,
        enqueue_retries,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    common::runtime_with(4)
}

#[test]
fn with_wait_for_replicas_a_master_failover_loses_no_acknowledged_job() {
    if !cluster::programs_available() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Arc::new(Mutex::new(
        LocalCluster::start(3, 1).unwrap_or_else(|e| panic!("private cluster: {e}")),
    ));
    let total = jobs_knob();
    let counts = runtime().block_on(run(Arc::clone(&cluster), total, true));
    eprintln!("failover with wait_for_replicas(1): {counts}");
    assert_eq!(counts.acknowledged, total);
    assert_eq!(counts.lost, 0, "{counts}");
    assert_eq!(counts.completed, total, "{counts}");
}

#[test]
fn without_waiting_the_workers_carry_on_through_a_master_failover() {
    if !cluster::programs_available() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Arc::new(Mutex::new(
        LocalCluster::start(3, 1).unwrap_or_else(|e| panic!("private cluster: {e}")),
    ));
    let total = (jobs_knob() / 4).max(BATCH * 4);
    let counts = runtime().block_on(run(Arc::clone(&cluster), total, false));
    eprintln!("failover without waiting: {counts}");
    assert_eq!(counts.acknowledged, total);
    // Only what the killed master had not replicated can be missing: jobs of its queue.
    assert!(counts.lost <= total / QUEUES, "{counts}");
    assert_eq!(counts.completed + counts.lost, total, "{counts}");
}
