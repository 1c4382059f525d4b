//! Workers that die or lose their connections: nothing is lost, nothing completes twice.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use fairq_core::job::{LeaseToken, State};
use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::{Backend, Claim, Clock, JobId, JobStatus, ManualClock, NewJob, SystemClock};

const CHILD_ENV: &str = "FAIRQ_REDIS_CHILD_PREFIX";

/// Not a test on its own: when started by `a_killed_worker_s_job_completes_once_after_rescue`
/// (with the prefix in the environment) it claims the job, reports it and hangs mid-job until
/// it is killed.
#[test]
fn child_worker_that_hangs() {
    let Ok(prefix) = std::env::var(CHILD_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = RedisBackend::connect(&common::url(), RedisOptions::new().prefix(prefix))
            .await
            .expect("child connects");
        let job = store
            .claim("crash", 1, Duration::from_secs(1))
            .await
            .expect("child claims")
            .remove(0);
        println!("CLAIMED {} {}", job.claim.id, job.claim.token.0);
        std::future::pending::<()>().await;
    });
}

#[tokio::test]
async fn a_killed_worker_s_job_completes_once_after_rescue() {
    require_redis!();
    // The parent reads time from a manual clock starting at the wall clock, so it can step past
    // the child's lease without waiting for it.
    let clock = ManualClock::new(SystemClock.now());
    let options = common::options(clock.clone());
    let prefix = options.prefix.clone();
    let store = RedisBackend::connect(&common::url(), options)
        .await
        .unwrap();
    let id = store
        .enqueue(
            NewJob::new("crash", "work", b"x".to_vec())
                .retry(fairq_core::retry::RetryPolicy::new(3)),
        )
        .await
        .unwrap();

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_worker_that_hangs",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, &prefix)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the child worker");
    let stdout = child.stdout.take().unwrap();
    let read = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            // The harness may print its own text before ours on the same line.
            .find_map(|l| l.split_once("CLAIMED ").map(|(_, rest)| rest.to_string()))
    });
    // Never leave the child behind, whatever it printed.
    let line = tokio::time::timeout(Duration::from_secs(30), read).await;
    child.kill().expect("kill -9 the child");
    child.wait().unwrap();
    let line = line
        .ok()
        .and_then(Result::ok)
        .flatten()
        .expect("the child reports its claim");
    let fields: Vec<u64> = line
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    assert_eq!(JobId(fields[0]), id);
    let stale = Claim {
        id,
        token: LeaseToken(fields[1]),
    };

    // The job is held by a dead worker until its lease runs out.
    assert_eq!(
        store.get(id).await.unwrap().unwrap().status(),
        JobStatus::Running
    );
    assert_eq!(store.rescue("crash").await.unwrap(), 0);
    assert!(store
        .claim("crash", 1, Duration::from_secs(30))
        .await
        .unwrap()
        .is_empty());
    clock.advance(Duration::from_secs(5));
    assert_eq!(store.rescue("crash").await.unwrap(), 1);
    let job = store
        .claim("crash", 1, Duration::from_secs(30))
        .await
        .unwrap()
        .remove(0);
    assert_eq!((job.claim.id, job.attempt), (id, 2));
    store.complete(job.claim).await.unwrap();
    // The dead worker's token is fenced off.
    let err = store.complete(stale).await.unwrap_err();
    assert!(err.is_stale_lease(), "{err}");
    let info = store.get(id).await.unwrap().unwrap();
    assert!(matches!(info.state, State::Succeeded { .. }));
    assert_eq!(info.attempts, 2);
    let stats = store.stats().await.unwrap();
    assert_eq!((stats[0].retries.ok, stats[0].retries.failures), (1, 1));
    store.destroy().await.unwrap();
}

/// Completions per job, as seen by the workers.
type Ledger = Arc<Mutex<HashMap<JobId, u32>>>;

/// A worker loop over the `Backend` trait: claim a batch, complete each job, retry after
/// connection errors, rescue when idle.
async fn work(
    store: RedisBackend,
    queue: &'static str,
    ledger: Ledger,
    done: Arc<AtomicUsize>,
    progress: Arc<Notify>,
    total: usize,
) {
    let lease = Duration::from_secs(1);
    while done.load(Ordering::SeqCst) < total {
        let jobs = match store.claim(queue, 16, lease).await {
            Ok(jobs) => jobs,
            Err(err) if err.is_transient() => continue,
            Err(err) => panic!("claim: {err}"),
        };
        if jobs.is_empty() {
            match store.rescue(queue).await {
                Ok(_) => {}
                Err(err) if err.is_transient() => {}
                Err(err) => panic!("rescue: {err}"),
            }
            store.wait_for_jobs(queue, Duration::from_millis(50)).await;
            continue;
        }
        for job in jobs {
            loop {
                match store.complete(job.claim).await {
                    Ok(()) => {
                        *ledger.lock().unwrap().entry(job.claim.id).or_default() += 1;
                        done.fetch_add(1, Ordering::SeqCst);
                        progress.notify_one();
                        break;
                    }
                    Err(err) if err.is_transient() => continue,
                    // Our lease ran out and the job went to another worker.
                    Err(err) if err.is_stale_lease() => break,
                    Err(err) => panic!("complete: {err}"),
                }
            }
        }
    }
}

async fn run_workers(total: usize, workers: usize, kill_connections: bool) {
    let clock = SystemClock;
    let options = RedisOptions {
        clock: Arc::new(clock),
        ..RedisOptions::new().prefix(common::prefix())
    };
    let producer = RedisBackend::connect(&common::url(), options.clone())
        .await
        .unwrap();
    let queue = "burn";
    let mut ids = Vec::with_capacity(total);
    for chunk in (0..total).collect::<Vec<_>>().chunks(1_000) {
        let jobs = chunk
            .iter()
            .map(|i| NewJob::new(queue, "work", vec![]).key(format!("tenant-{}", i % 97)))
            .collect();
        ids.extend(producer.enqueue_many(jobs).await.unwrap());
    }
    let ledger: Ledger = Arc::default();
    let done = Arc::new(AtomicUsize::new(0));
    let progress = Arc::new(Notify::new());
    let mut stores = Vec::new();
    let mut handles = Vec::new();
    for _ in 0..workers {
        let store = RedisBackend::connect(&common::url(), options.clone())
            .await
            .unwrap();
        stores.push(store.clone());
        handles.push(tokio::spawn(work(
            store,
            queue,
            ledger.clone(),
            done.clone(),
            progress.clone(),
            total,
        )));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let killer = kill_connections.then(|| {
        let stop = stop.clone();
        let done = done.clone();
        let progress = progress.clone();
        tokio::spawn(async move {
            let client = redis::Client::open(common::url()).unwrap();
            let mut admin = client.get_multiplexed_async_connection().await.unwrap();
            let mut kills = 0;
            // Kill every worker's connection each time another tenth of the jobs is done.
            let mut next = total / 10;
            while !stop.load(Ordering::SeqCst) && kills < 9 {
                if done.load(Ordering::SeqCst) < next {
                    progress.notified().await;
                    continue;
                }
                for store in &stores {
                    let id: Result<i64, _> = redis::cmd("CLIENT")
                        .arg("ID")
                        .query_async(&mut store.connection())
                        .await;
                    if let Ok(id) = id {
                        let _: Result<i64, _> = redis::cmd("CLIENT")
                            .arg("KILL")
                            .arg("ID")
                            .arg(id)
                            .query_async(&mut admin)
                            .await;
                    }
                }
                kills += 1;
                next += total / 10;
            }
            kills
        })
    });
    let all = futures_join(handles);
    tokio::time::timeout(Duration::from_secs(120), all)
        .await
        .expect("every job completes in time");
    stop.store(true, Ordering::SeqCst);
    progress.notify_one();
    if let Some(killer) = killer {
        let kills = killer.await.unwrap();
        assert!(
            kills >= 5,
            "connections were killed mid-run ({kills} rounds)"
        );
    }
    let ledger = ledger.lock().unwrap().clone();
    assert_eq!(ledger.len(), total, "every job completed");
    for id in &ids {
        assert_eq!(ledger.get(id), Some(&1), "job {id} completed exactly once");
    }
    let stats = producer.stats().await.unwrap();
    assert_eq!(stats[0].counts.succeeded, total as u64);
    assert_eq!(stats[0].counts.pending(), 0);
    producer.destroy().await.unwrap();
}

async fn futures_join(handles: Vec<tokio::task::JoinHandle<()>>) {
    for handle in handles {
        handle.await.expect("worker task");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_jobs_over_eight_workers_complete_exactly_once() {
    require_redis!();
    run_workers(10_000, 8, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connections_lose_nothing() {
    require_redis!();
    run_workers(3_000, 8, true).await;
}
