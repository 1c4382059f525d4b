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
use fairq_worker::{
    Backend, Claim, Clock, Finished, JobId, JobStatus, ManualClock, NewJob, Settled, SystemClock,
};

const CHILD_ENV: &str = "FAIRQ_REDIS_CHILD_PREFIX";
const CHILD_MODE: &str = "FAIRQ_REDIS_CHILD_MODE";

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
    let store = common::connect(options).await;
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
}

/// True for the refusal a completion gets when its own lease already completed the job (a
/// call repeated after its reply was lost): the job is succeeded under our token.
fn settled_by_us(err: &fairq_worker::BackendError) -> bool {
    matches!(
        err,
        fairq_worker::BackendError::Transition {
            source: fairq_core::job::TransitionError::NotRunning { state: "succeeded" },
            ..
        }
    )
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
                    // The repeated completion finds its own first try's success.
                    Err(err) if settled_by_us(&err) => {
                        *ledger.lock().unwrap().entry(job.claim.id).or_default() += 1;
                        done.fetch_add(1, Ordering::SeqCst);
                        progress.notify_one();
                        break;
                    }
                    // Our lease ran out and the job went to another worker.
                    Err(err) if err.is_stale_lease() => break,
                    Err(err) => panic!("complete: {err}"),
                }
            }
        }
    }
}

/// A worker loop on the batched path: settle the last batch and claim the next one in one
/// call (the lease outlives a batch), rescue when idle.
async fn work_in_batches(
    store: RedisBackend,
    queue: &'static str,
    ledger: Ledger,
    done: Arc<AtomicUsize>,
    progress: Arc<Notify>,
    total: usize,
) {
    let lease = Duration::from_secs(1);
    let mut finished: Vec<Finished> = Vec::new();
    while done.load(Ordering::SeqCst) < total || !finished.is_empty() {
        let out = match store
            .settle_and_claim(finished.clone(), queue, 16, lease)
            .await
        {
            Ok(out) => out,
            // Nothing is known: send the same batch again (entries that went through are
            // then refused as no longer running).
            Err(err) if err.is_transient() => continue,
            Err(err) => panic!("settle_and_claim: {err}"),
        };
        for (entry, answer) in finished.iter().zip(&out.settled) {
            match answer {
                Ok(Settled::Succeeded) => {
                    *ledger.lock().unwrap().entry(entry.claim.id).or_default() += 1;
                    done.fetch_add(1, Ordering::SeqCst);
                    progress.notify_one();
                }
                // A repeated batch finds the entry settled by its own first try (the token is
                // ours, so nobody else finished it).
                Err(err) if settled_by_us(err) => {
                    *ledger.lock().unwrap().entry(entry.claim.id).or_default() += 1;
                    done.fetch_add(1, Ordering::SeqCst);
                    progress.notify_one();
                }
                // Our lease ran out and the job went to another worker.
                Err(err) if err.is_stale_lease() => {}
                Err(err) => panic!("settle: {err}"),
                Ok(other) => panic!("a no-op job ended as {other}"),
            }
        }
        let held = out.claimed.unwrap_or_default();
        finished = held.iter().map(|job| Finished::new(job, Ok(()))).collect();
        if finished.is_empty() {
            match store.rescue(queue).await {
                Ok(_) => {}
                Err(err) if err.is_transient() => {}
                Err(err) => panic!("rescue: {err}"),
            }
            store.wait_for_jobs(queue, Duration::from_millis(50)).await;
        }
    }
}

async fn run_workers(total: usize, workers: usize, kill_connections: bool) {
    let clock = SystemClock;
    let options = RedisOptions {
        clock: Arc::new(clock),
        ..RedisOptions::new().prefix(common::prefix())
    };
    let _guard = common::Guard::new(options.prefix.clone());
    let producer = RedisBackend::connect(&common::url(), options.clone())
        .await
        .unwrap();
    let queue = "burn";
    let mut ids = Vec::with_capacity(total);
    // Half the jobs up front; the other half while the workers run (and, in the connection
    // test, while connections are killed: a repeated enqueue must not enqueue twice).
    let early = total / 2;
    for chunk in (0..early).collect::<Vec<_>>().chunks(1_000) {
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
    stores.push(producer.clone());
    for w in 0..workers {
        let store = RedisBackend::connect(&common::url(), options.clone())
            .await
            .unwrap();
        stores.push(store.clone());
        let (ledger, done, progress) = (ledger.clone(), done.clone(), progress.clone());
        handles.push(if w % 2 == 0 {
            tokio::spawn(work(store, queue, ledger, done, progress, total))
        } else {
            tokio::spawn(work_in_batches(store, queue, ledger, done, progress, total))
        });
    }
    let late = {
        let producer = producer.clone();
        tokio::spawn(async move {
            let mut ids = Vec::new();
            for chunk in (early..total).collect::<Vec<_>>().chunks(100) {
                let jobs: Vec<NewJob> = chunk
                    .iter()
                    .map(|i| NewJob::new(queue, "work", vec![]).key(format!("tenant-{}", i % 97)))
                    .collect();
                ids.extend(
                    producer
                        .enqueue_many(jobs)
                        .await
                        .expect("enqueue during the run"),
                );
            }
            ids
        })
    };
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
    ids.extend(late.await.expect("producer"));
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
    assert_eq!(
        stats[0].counts.succeeded, total as u64,
        "no job enqueued twice"
    );
    assert_eq!(stats[0].counts.pending(), 0);
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

/// Not a test on its own: started by the mid-batch tests with a prefix and a mode.
/// `half`: claims 20 jobs, settles the first 10 (printing `ACK id` for each), prints `HALF`
/// and hangs holding the rest. `stream`: settles and claims in batches of 16 forever, printing
/// `ACK id` for every acknowledged success, until it is killed.
#[test]
fn child_worker_that_settles_in_batches() {
    let (Ok(prefix), Ok(mode)) = (std::env::var(CHILD_ENV), std::env::var(CHILD_MODE)) else {
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
        let lease = Duration::from_secs(1);
        if mode == "half" {
            let jobs = store.claim("midbatch", 20, lease).await.expect("claim");
            let half: Vec<Finished> = jobs[..10]
                .iter()
                .map(|j| Finished::new(j, Ok(())))
                .collect();
            for (entry, answer) in half.iter().zip(store.settle(half.clone()).await.unwrap()) {
                if answer.is_ok() {
                    println!("ACK {}", entry.claim.id);
                }
            }
            println!("HALF");
            std::future::pending::<()>().await;
        }
        let mut finished: Vec<Finished> = Vec::new();
        loop {
            let out = store
                .settle_and_claim(finished.clone(), "midbatch", 16, lease)
                .await
                .expect("settle and claim");
            for (entry, answer) in finished.iter().zip(&out.settled) {
                if let Ok(Settled::Succeeded) = answer {
                    println!("ACK {}", entry.claim.id);
                }
            }
            finished = out
                .claimed
                .expect("claim")
                .iter()
                .map(|j| Finished::new(j, Ok(())))
                .collect();
        }
    });
}

/// Runs the batch child in `mode` on `prefix`, kills it with SIGKILL once `enough` says so
/// (seeing every line so far), and returns every line it printed.
async fn run_child_until(prefix: &str, mode: &str, enough: fn(&[String]) -> bool) -> Vec<String> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_worker_that_settles_in_batches",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, prefix)
        .env(CHILD_MODE, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the child worker");
    let stdout = child.stdout.take().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // The harness may print its own text before ours on the same line.
            let ours = ["ACK ", "HALF"]
                .iter()
                .find_map(|tag| line.find(tag).map(|at| line[at..].to_string()));
            if let Some(ours) = ours {
                if tx.send(ours).is_err() {
                    break;
                }
            }
        }
    });
    let mut lines = Vec::new();
    let waited = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = rx.recv().await {
            lines.push(line);
            if enough(&lines) {
                return;
            }
        }
    })
    .await;
    // Never leave the child behind, whatever happened.
    child.kill().expect("kill -9 the child");
    child.wait().unwrap();
    reader.join().unwrap();
    while let Ok(line) = rx.try_recv() {
        lines.push(line);
    }
    assert!(
        waited.is_ok(),
        "the child did not get far enough: {lines:?}"
    );
    lines
}

fn acked(lines: &[String]) -> Vec<JobId> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("ACK ")?.trim().parse().ok().map(JobId))
        .collect()
}

/// Runs every job left in `queue` after the dead worker's leases expire; returns the jobs
/// that ran again.
async fn finish_the_rest(store: &RedisBackend, clock: &ManualClock, queue: &str) -> Vec<JobId> {
    clock.advance(Duration::from_secs(5));
    store.rescue(queue).await.unwrap();
    let mut again = Vec::new();
    loop {
        let jobs = store
            .claim(queue, 100, Duration::from_secs(30))
            .await
            .unwrap();
        if jobs.is_empty() {
            return again;
        }
        let batch: Vec<Finished> = jobs.iter().map(|j| Finished::new(j, Ok(()))).collect();
        for answer in store.settle(batch).await.unwrap() {
            assert_eq!(answer.unwrap(), Settled::Succeeded);
        }
        again.extend(jobs.iter().filter(|j| j.attempt > 1).map(|j| j.claim.id));
    }
}

/// Every job succeeded; the acknowledged ones ran once (their success was kept).
async fn assert_nothing_acknowledged_lost(store: &RedisBackend, ids: &[JobId], acked: &[JobId]) {
    let stats = store.stats().await.unwrap();
    assert_eq!(
        stats[0].counts.succeeded,
        ids.len() as u64,
        "{:?}",
        stats[0].counts
    );
    for id in acked {
        let info = store.get(*id).await.unwrap().unwrap();
        assert!(matches!(info.state, State::Succeeded { .. }), "{id}");
        assert_eq!(info.attempts, 1, "acknowledged job {id} ran again");
    }
}

async fn midbatch_store(jobs: usize) -> (common::TestStore, ManualClock, Vec<JobId>) {
    let clock = ManualClock::new(SystemClock.now());
    let store = common::connect(common::options(clock.clone())).await;
    let mut ids = Vec::new();
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(500) {
        let batch = chunk
            .iter()
            .map(|i| {
                NewJob::new("midbatch", "work", vec![])
                    .key(format!("t{}", i % 7))
                    // A rescued job is due again at once.
                    .retry(fairq_core::retry::RetryPolicy::new(3).with_delays([Duration::ZERO]))
            })
            .collect();
        ids.extend(store.enqueue_many(batch).await.unwrap());
    }
    (store, clock, ids)
}

#[tokio::test]
async fn a_worker_killed_with_a_half_settled_batch_loses_nothing_acknowledged() {
    require_redis!();
    let (store, clock, ids) = midbatch_store(40).await;
    let lines = run_child_until(store.keys().prefix(), "half", |lines| {
        lines.last().is_some_and(|l| l == "HALF")
    })
    .await;
    let acked = acked(&lines);
    assert_eq!(acked.len(), 10, "{lines:?}");
    let stats = store.stats().await.unwrap();
    assert_eq!(
        (stats[0].counts.succeeded, stats[0].counts.running),
        (10, 10)
    );
    let again = finish_the_rest(&store, &clock, "midbatch").await;
    assert_eq!(
        again.len(),
        10,
        "the unsettled half runs again after its leases expire"
    );
    assert!(again.iter().all(|id| !acked.contains(id)));
    assert_nothing_acknowledged_lost(&store, &ids, &acked).await;
}

#[tokio::test]
async fn a_worker_killed_at_any_point_of_its_batches_loses_nothing_acknowledged() {
    require_redis!();
    let (store, clock, ids) = midbatch_store(2_000).await;
    let lines = run_child_until(store.keys().prefix(), "stream", |lines| lines.len() >= 300).await;
    let acked = acked(&lines);
    assert!(
        acked.len() >= 300 && acked.len() < ids.len(),
        "{}",
        acked.len()
    );
    let again = finish_the_rest(&store, &clock, "midbatch").await;
    // Only what the dead worker held unacknowledged (at most two batches) runs twice.
    assert!(again.len() <= 32, "{} jobs ran again", again.len());
    assert!(again.iter().all(|id| !acked.contains(id)));
    assert_nothing_acknowledged_lost(&store, &ids, &acked).await;
}
