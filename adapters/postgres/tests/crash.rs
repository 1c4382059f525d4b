//! Crashes: a worker process killed with SIGKILL mid-job, and connections terminated by the
//! server mid-run. Nothing is lost and a rescued job completes exactly once.

mod common;

use std::collections::{HashMap, HashSet};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairq_core::job::{Lease, State};
use fairq_core::retry::RetryPolicy;
use fairq_postgres::{PgBackend, PgOptions};
use fairq_worker::conformance::held_leases;
use fairq_worker::{Backend, Job, JobId, JobOutcome, NewJob, QueueConfig, Worker, WorkerHandle};
use tokio::io::{AsyncBufReadExt, BufReader};

const CHILD_SCHEMA: &str = "FAIRQ_PG_TEST_CHILD_SCHEMA";
const BATCH_CHILD_SCHEMA: &str = "FAIRQ_PG_TEST_BATCH_CHILD_SCHEMA";
const CHILD_SLOTS: &str = "FAIRQ_PG_TEST_CHILD_SLOTS";
const CHILD_PREFETCH: &str = "FAIRQ_PG_TEST_CHILD_PREFETCH";
const CHILD_LEASE_SECS: &str = "FAIRQ_PG_TEST_CHILD_LEASE_SECS";

/// Starts this test binary again as the worker process `name` (a test that returns at once
/// unless `env` names its schema), with its standard output piped to the caller.
fn start_child(name: &str, env: &[(&str, String)]) -> tokio::process::Child {
    let mut command = tokio::process::Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("FAIRQ_PG_URL", common::url())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    for (key, value) in env {
        command.env(key, value);
    }
    command.spawn().expect("start the worker process")
}

/// The body of a worker process: when `schema_var` is set, connects to that schema with
/// `pool` connections, starts the worker `build` makes and runs until killed.
fn run_child(
    schema_var: &str,
    pool: usize,
    build: impl FnOnce(PgBackend) -> WorkerHandle<PgBackend>,
) {
    let Ok(schema) = std::env::var(schema_var) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let store = PgBackend::connect(
            &common::url(),
            PgOptions::default().schema(&schema).pool_size(pool),
        )
        .await
        .expect("child connects");
        let _worker = build(store);
        std::future::pending::<()>().await;
    });
}

/// Not a test of its own: the worker process that the kill test starts (this binary run
/// again with `CHILD_SCHEMA` set). Its handler announces the job on stdout and never ends.
#[test]
fn child_worker_process() {
    // Slots, prefetch depth and lease: 1, the default and 3 s unless the test says otherwise.
    let setting = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    run_child(CHILD_SCHEMA, 2, |store| {
        let mut config = QueueConfig::default()
            .concurrency(setting(CHILD_SLOTS).unwrap_or(1))
            .lease(Duration::from_secs(
                setting(CHILD_LEASE_SECS).unwrap_or(3) as u64
            ))
            .poll_interval(Duration::from_millis(100));
        if let Some(depth) = setting(CHILD_PREFETCH) {
            config = config.prefetch(depth);
        }
        Worker::builder(store)
            .queue("crash", config)
            .handle("hang", |job: Job| async move {
                println!("RUNNING {} {}", job.claim.id, job.claim.token.0);
                std::future::pending::<()>().await;
                Ok::<_, String>(())
            })
            .build()
            .expect("worker")
            .start()
            .expect("start")
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_workers_job_completes_exactly_once_after_rescue() {
    let t = store_or_skip!("kill9");
    let id = t
        .store
        .enqueue(NewJob::new("crash", "hang", vec![]).retry(RetryPolicy::new(3)))
        .await
        .unwrap();
    let mut child = start_child("child_worker_process", &[(CHILD_SCHEMA, t.schema.clone())]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let announced = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("read the child") {
            // The test harness prints "test <name> ... " on the same line first.
            if let Some(at) = line.find("RUNNING ") {
                return line[at + "RUNNING ".len()..].to_string();
            }
        }
        panic!("the worker process exited without running the job");
    })
    .await
    .expect("the worker process picked the job up");
    let mut parts = announced.split_whitespace();
    assert_eq!(parts.next(), Some(id.to_string().as_str()));
    let child_token: u64 = parts.next().unwrap().parse().unwrap();
    child.start_kill().expect("SIGKILL");
    child.wait().await.expect("reap the child");

    // The lease is as the dead worker last renewed it; once it passes, a rescue frees the job.
    let info = t.store.get(id).await.unwrap().unwrap();
    let State::Running { lease } = info.state else {
        panic!(
            "the job should still be held by the dead worker: {:?}",
            info.state
        );
    };
    assert_eq!(lease.token.0, child_token);
    t.clock.set(lease.deadline - 1);
    assert_eq!(t.store.rescue("crash").await.unwrap(), 0);
    t.clock.set(lease.deadline);
    assert_eq!(t.store.rescue("crash").await.unwrap(), 1);
    let job = t
        .store
        .claim("crash", 10, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(job.len(), 1);
    assert_eq!(job[0].attempt, 2);
    t.store.complete(job[0].claim).await.unwrap();
    // Had the dead worker come back, its completion would be refused.
    let stale = fairq_worker::Claim {
        id,
        token: lease.token,
    };
    assert!(t.store.complete(stale).await.unwrap_err().is_stale_lease());
    let stats = t.store.stats().await.unwrap();
    assert_eq!(stats[0].counts.succeeded, 1);
    assert_eq!(stats[0].retries.ok, 1);
    assert_eq!(stats[0].retries.failures, 1, "the lost attempt counts once");
    t.cleanup().await;
}

/// A worker killed with SIGKILL while every slot runs a job and its prefetch buffer is full:
/// the buffered jobs were claimed but never started, and a killed process cannot hand them
/// back, so they wait for their leases like the running ones. Nothing is lost; each of the
/// held jobs is rescued with one lost attempt, and the dead worker's tokens are refused. The
/// worker's leases (60 s) and its buffer's time-to-live (the lease) outlast the test, so it
/// neither rescues its own jobs nor hands buffered ones back before it is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_with_a_full_prefetch_buffer_loses_nothing() {
    const JOBS: usize = 20;
    const SLOTS: usize = 2;
    const PREFETCH: usize = 6;
    const HELD: usize = SLOTS + PREFETCH;
    let t = store_or_skip!("killprefetch");
    let ids = t
        .store
        .enqueue_many(
            (0..JOBS)
                .map(|i| NewJob::new("crash", "hang", vec![]).key(format!("k{}", i % 3)))
                .collect(),
        )
        .await
        .unwrap();
    let mut child = start_child(
        "child_worker_process",
        &[
            (CHILD_SCHEMA, t.schema.clone()),
            (CHILD_SLOTS, SLOTS.to_string()),
            (CHILD_PREFETCH, PREFETCH.to_string()),
            (CHILD_LEASE_SECS, 60.to_string()),
        ],
    );
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Every slot busy (its handler never ends) ...
    let mut started = HashSet::new();
    tokio::time::timeout(Duration::from_secs(60), async {
        while started.len() < SLOTS {
            let line = lines.next_line().await.expect("read the child");
            let line = line.expect("the worker process exited early");
            if let Some(at) = line.find("RUNNING ") {
                let id: u64 = line[at + "RUNNING ".len()..]
                    .split_whitespace()
                    .next()
                    .and_then(|id| id.parse().ok())
                    .expect("RUNNING <id> <token>");
                started.insert(JobId(id));
            }
        }
    })
    .await
    .expect("the worker process started a job in every slot");
    // ... and the buffer full: the store shows every slot's job and the buffer's as held.
    let before = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let held = held_leases(&t.store, "crash").await;
            if held.len() >= HELD {
                return held;
            }
            // The next look at the store; the deadline above bounds the wait.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the worker process filled its prefetch buffer");
    assert_eq!(before.len(), HELD, "the buffer stops at its depth");
    child.start_kill().expect("SIGKILL");
    child.wait().await.expect("reap the child");

    // What the dead worker holds, read once it can renew nothing any more: the same jobs,
    // under the leases it last renewed.
    let leases = held_leases(&t.store, "crash").await;
    let ids_of = |held: &[(JobId, Lease)]| held.iter().map(|(id, _)| *id).collect::<HashSet<_>>();
    assert_eq!(ids_of(&leases), ids_of(&before), "the same jobs are held");
    assert!(
        started.is_subset(&ids_of(&leases)),
        "the running jobs are held"
    );
    // Nothing is rescued before the first lease runs out; once the last has, one rescue frees
    // every held job, each with one lost attempt.
    let first = leases.iter().map(|(_, l)| l.deadline).min().unwrap();
    let last = leases.iter().map(|(_, l)| l.deadline).max().unwrap();
    t.clock.set(first - 1);
    assert_eq!(t.store.rescue("crash").await.unwrap(), 0);
    t.clock.set(last);
    assert_eq!(t.store.rescue("crash").await.unwrap(), HELD as u64);
    let stats = t.store.stats().await.unwrap();
    assert_eq!(stats[0].retries.failures, HELD as u64);
    // The dead worker's tokens no longer settle anything.
    for (id, lease) in &leases {
        let stale = fairq_worker::Claim {
            id: *id,
            token: lease.token,
        };
        let err = t.store.complete(stale).await.unwrap_err();
        assert!(err.is_stale_lease(), "job {id}: {err}");
    }

    // After the retries' delay every job runs: the held ones on their second attempt.
    t.clock.set(last + 3_600_000);
    let jobs = t
        .store
        .claim("crash", JOBS * 2, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(jobs.len(), JOBS, "nothing is lost");
    for job in &jobs {
        let was_held = leases.iter().any(|(id, _)| *id == job.claim.id);
        assert_eq!(
            job.attempt,
            if was_held { 2 } else { 1 },
            "job {}",
            job.claim.id
        );
        t.store.complete(job.claim).await.unwrap();
    }
    let mut claimed: Vec<JobId> = jobs.iter().map(|j| j.claim.id).collect();
    claimed.sort();
    let mut enqueued = ids.clone();
    enqueued.sort();
    assert_eq!(claimed, enqueued);
    let stats = t.store.stats().await.unwrap();
    assert_eq!(stats[0].counts.succeeded, JOBS as u64);
    assert_eq!(stats[0].counts.pending(), 0);
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_connections_lose_nothing() {
    terminated_connections(true).await;
}

/// The same with succeeded jobs deleted, not archived: a settlement retried after its reply
/// was lost finds them gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_connections_lose_nothing_when_successes_are_not_kept() {
    terminated_connections(false).await;
}

async fn terminated_connections(keep_succeeded: bool) {
    let Some(admin) = common::admin().await else {
        return;
    };
    const N: usize = 1_500;
    let schema = common::unique_schema("term");
    let app = format!("fq_{}", &schema[4..]);
    let base = common::url();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}application_name={app}");
    // Real time here: lost claims must come back by lease expiry.
    let store = PgBackend::connect(
        &url,
        PgOptions::default()
            .schema(&schema)
            .pool_size(4)
            .keep_succeeded(keep_succeeded)
            .migrate(true),
    )
    .await
    .unwrap();
    let ids = store
        .enqueue_many(
            (0..N)
                .map(|i| NewJob::new("q", "work", vec![]).key(format!("t{}", i % 20)))
                .collect(),
        )
        .await
        .unwrap();
    let runs: Arc<Mutex<HashMap<JobId, u32>>> = Arc::default();
    let (progress_tx, mut progress) = tokio::sync::watch::channel(0usize);
    let progress_tx = Arc::new(progress_tx);
    let handler_runs = runs.clone();
    let worker = Worker::builder(store.clone())
        .queue(
            "q",
            QueueConfig::default()
                .concurrency(8)
                .lease(Duration::from_secs(1))
                .rescue_interval(Duration::from_millis(300))
                .poll_interval(Duration::from_millis(100)),
        )
        .error_backoff(Duration::from_millis(10), Duration::from_millis(200))
        .handle("work", move |job: Job| {
            let runs = handler_runs.clone();
            let progress_tx = progress_tx.clone();
            async move {
                let distinct = {
                    let mut runs = runs.lock().unwrap();
                    *runs.entry(job.claim.id).or_insert(0) += 1;
                    runs.len()
                };
                progress_tx.send_replace(distinct);
                Ok::<_, String>(())
            }
        })
        .build()
        .unwrap()
        .start()
        .unwrap();

    // Three times during the run, the server kills every connection of the store.
    let mut terminated = 0;
    for step in 1..=3 {
        tokio::time::timeout(
            Duration::from_secs(60),
            progress.wait_for(|n| *n >= step * N / 4),
        )
        .await
        .expect("progress")
        .unwrap();
        let rows = admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .await
            .unwrap();
        terminated += rows.len();
    }
    assert!(
        terminated >= 3,
        "connections were terminated ({terminated})"
    );

    // Everything finishes: lost replies come back through lease expiry and rescue.
    let finished = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            if let Ok(stats) = store.stats().await {
                if stats
                    .first()
                    .is_some_and(|s| s.retries.ok == N as u64 && s.counts.pending() == 0)
                {
                    return stats;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("every job succeeded");
    let kept = if keep_succeeded { N as u64 } else { 0 };
    assert_eq!(finished[0].counts.succeeded, kept);
    worker.shutdown(Duration::from_secs(10)).await;
    {
        let runs = runs.lock().unwrap();
        assert!(
            ids.iter().all(|id| runs.contains_key(id)),
            "a job never ran"
        );
    }
    drop(store);
    common::drop_schema(&admin, &schema).await;
}

/// Not a test of its own: the worker process the mid-batch kill test starts. It works through
/// its queue at full speed with batched settlement, printing `RAN <id>` when a handler runs
/// and `DONE <id>` once the store has acknowledged the job's success.
#[test]
fn child_batch_worker_process() {
    run_child(BATCH_CHILD_SCHEMA, 4, |store| {
        Worker::builder(store)
            .queue(
                "batch",
                QueueConfig::default()
                    .concurrency(16)
                    .lease(Duration::from_secs(2))
                    .poll_interval(Duration::from_millis(50)),
            )
            .handle("work", |job: Job| async move {
                println!("RAN {}", job.claim.id);
                Ok::<_, String>(())
            })
            .on_finished(|report| {
                if report.outcome == JobOutcome::Succeeded {
                    println!("DONE {}", report.job.claim.id);
                }
            })
            .build()
            .expect("worker")
            .start()
            .expect("start")
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_batch_loses_nothing_acknowledged() {
    const N: usize = 3_000;
    let t = store_or_skip!("killbatch");
    let ids: Vec<JobId> = t
        .store
        .enqueue_many(
            (0..N)
                .map(|i| NewJob::new("batch", "work", vec![]).key(format!("t{}", i % 10)))
                .collect(),
        )
        .await
        .unwrap();
    let mut child = start_child(
        "child_batch_worker_process",
        &[(BATCH_CHILD_SCHEMA, t.schema.clone())],
    );
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ran: HashMap<JobId, u32> = HashMap::new();
    let mut acknowledged: Vec<JobId> = Vec::new();
    let mut killed = false;
    let parse = |line: &str, tag: &str| {
        line.find(tag)
            .and_then(|at| line[at + tag.len()..].trim().parse::<u64>().ok())
            .map(JobId)
    };
    // Read until the child has half the jobs acknowledged, kill it with SIGKILL in the middle
    // of its stream of settlements, then read what it printed before it died.
    tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = lines.next_line().await.expect("read the child") {
            if let Some(id) = parse(&line, "RAN ") {
                *ran.entry(id).or_insert(0) += 1;
            } else if let Some(id) = parse(&line, "DONE ") {
                acknowledged.push(id);
                if !killed && acknowledged.len() >= N / 2 {
                    child.start_kill().expect("SIGKILL");
                    killed = true;
                }
            }
        }
    })
    .await
    .expect("the worker process ran and died");
    assert!(killed, "the child exited before it was killed");
    child.wait().await.expect("reap the child");
    let in_flight = ran.len() - acknowledged.len();
    // Nothing acknowledged is lost: every acknowledged job is recorded as succeeded.
    for id in &acknowledged {
        let info = t.store.get(*id).await.unwrap().unwrap();
        assert_eq!(
            info.status(),
            fairq_worker::JobStatus::Succeeded,
            "job {id}"
        );
    }

    // A new worker (on the real clock, like the dead one) rescues what the dead one held and
    // finishes the queue.
    let store = PgBackend::connect(
        &common::url(),
        PgOptions::default().schema(&t.schema).pool_size(4),
    )
    .await
    .unwrap();
    let reran: Arc<Mutex<HashMap<JobId, u32>>> = Arc::default();
    let counted = reran.clone();
    let worker = Worker::builder(store.clone())
        .queue(
            "batch",
            QueueConfig::default()
                .concurrency(16)
                .lease(Duration::from_secs(30))
                .rescue_interval(Duration::from_millis(200))
                .poll_interval(Duration::from_millis(50)),
        )
        .handle("work", move |job: Job| {
            let counted = counted.clone();
            async move {
                *counted.lock().unwrap().entry(job.claim.id).or_insert(0) += 1;
                Ok::<_, String>(())
            }
        })
        .build()
        .unwrap()
        .start()
        .unwrap();
    let stats = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            let stats = store.stats().await.unwrap();
            if stats
                .first()
                .is_some_and(|s| s.counts.succeeded == N as u64)
            {
                return stats;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("every job succeeded");
    worker.shutdown(Duration::from_secs(10)).await;
    assert_eq!(stats[0].counts.pending(), 0);
    let reran = reran.lock().unwrap().clone();
    let acknowledged_set: std::collections::HashSet<JobId> = acknowledged.iter().copied().collect();
    for id in &ids {
        assert!(
            ran.contains_key(id) || reran.contains_key(id),
            "job {id} never ran"
        );
        assert!(
            !(acknowledged_set.contains(id) && reran.contains_key(id)),
            "job {id} was acknowledged by the killed worker and ran again"
        );
    }
    let twice = ids
        .iter()
        .filter(|id| ran.contains_key(id) && reran.contains_key(id))
        .count();
    assert!(
        twice <= in_flight,
        "only jobs in flight run twice ({twice} > {in_flight})"
    );
    println!(
        "killed worker: {} jobs acknowledged, {} ran without acknowledgement; the new worker ran \
         {} jobs, {} of them a second time",
        acknowledged.len(),
        in_flight,
        reran.len(),
        twice
    );
    drop(store);
    t.cleanup().await;
}
