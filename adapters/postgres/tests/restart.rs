//! Fault test (issue 13): a private PostgreSQL server, two worker processes and 20,000 jobs;
//! the server is restarted mid-run and one worker is killed with SIGKILL. Every job
//! completes, none is lost, each is acknowledged once, jobs run twice only if they were in
//! flight at the restart or the kill, and the surviving worker recovers on its own (nobody
//! restarts it). The counts are printed.

mod common;

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use common::server::PrivatePg;
use fairq_postgres::{PgBackend, PgOptions};
use fairq_worker::{Backend, Job, JobOutcome, JobStatus, ListFilter, NewJob, QueueConfig, Worker};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

const CHILD_URL: &str = "FAIRQ_PG_RESTART_CHILD_URL";
const JOBS: usize = 20_000;
const CONCURRENCY: usize = 8;
const SCHEMA: &str = "restart";

/// Not a test of its own: a worker process of the fault test (this binary run again with
/// `CHILD_URL` set). It prints `RAN <id>` when a handler runs and `DONE <id>` once the store
/// has acknowledged the job's success.
#[test]
fn restart_child_worker_process() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let store = PgBackend::connect(&url, PgOptions::default().schema(SCHEMA).pool_size(4))
            .await
            .expect("child connects");
        let _worker = Worker::builder(store)
            .queue(
                "q",
                QueueConfig::default()
                    .concurrency(CONCURRENCY)
                    .lease(Duration::from_secs(2))
                    .rescue_interval(Duration::from_millis(300))
                    .poll_interval(Duration::from_millis(100)),
            )
            .error_backoff(Duration::from_millis(20), Duration::from_millis(300))
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
            .expect("start");
        std::future::pending::<()>().await;
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_and_kill_9_lose_nothing() {
    let Some(mut server) = PrivatePg::start(None) else {
        return;
    };
    let url = server.url("");
    let store = PgBackend::connect(&url, PgOptions::default().schema(SCHEMA).migrate(true))
        .await
        .expect("connect");
    for batch in 0..JOBS / 5_000 {
        store
            .enqueue_many(
                (0..5_000)
                    .map(|i| NewJob::new("q", "work", vec![]).key(format!("t{}", (batch + i) % 20)))
                    .collect(),
            )
            .await
            .unwrap();
    }

    // Two worker processes; every line they print comes here, tagged with its process.
    let (lines_tx, mut lines) = mpsc::unbounded_channel::<(usize, String)>();
    let mut children = Vec::new();
    for n in 0..2 {
        let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "restart_child_worker_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_URL, &url)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start a worker process");
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let tx = lines_tx.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = out.next_line().await {
                if tx.send((n, line)).is_err() {
                    break;
                }
            }
        });
        children.push(child);
    }
    drop(lines_tx);

    let parse = |line: &str, tag: &str| {
        line.find(tag)
            .and_then(|at| line[at + tag.len()..].trim().parse::<u64>().ok())
    };
    let mut ran: HashMap<u64, u32> = HashMap::new();
    let mut done: HashMap<u64, u32> = HashMap::new();
    let (mut restarted, mut killed) = (false, false);
    // The store is asked on a timer too, not only when a line arrives: the killed process
    // may have settled jobs it never printed, so the printed count need not reach the total.
    let mut ask = tokio::time::interval(Duration::from_millis(250));
    let finished = tokio::time::timeout(Duration::from_secs(300), async {
        loop {
            let line = tokio::select! {
                line = lines.recv() => match line {
                    Some((_, line)) => Some(line),
                    None => panic!("both worker processes ended"),
                },
                _ = ask.tick() => None,
            };
            let Some(line) = line else {
                if killed {
                    if let Ok(stats) = store.stats().await {
                        if stats
                            .first()
                            .is_some_and(|s| s.counts.succeeded == JOBS as u64)
                        {
                            return stats;
                        }
                    }
                }
                continue;
            };
            if let Some(id) = parse(&line, "RAN ") {
                *ran.entry(id).or_insert(0) += 1;
            } else if let Some(id) = parse(&line, "DONE ") {
                *done.entry(id).or_insert(0) += 1;
            }
            if !restarted && done.len() >= JOBS / 4 {
                // Blocking: both workers see the server go and come back mid-stream.
                tokio::task::block_in_place(|| server.restart());
                restarted = true;
            }
            if !killed && done.len() >= JOBS / 2 {
                children[0].start_kill().expect("SIGKILL");
                killed = true;
            }
        }
    })
    .await;
    let stats = match finished {
        Ok(stats) => stats,
        Err(_) => {
            let stats = store.stats().await;
            panic!(
                "not every job finished: {stats:?}, {} acknowledged",
                done.len()
            );
        }
    };
    assert!(restarted && killed);
    // The workers' last lines: stop them and read everything they printed.
    for child in &mut children {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    while let Some((_, line)) = lines.recv().await {
        if let Some(id) = parse(&line, "RAN ") {
            *ran.entry(id).or_insert(0) += 1;
        } else if let Some(id) = parse(&line, "DONE ") {
            *done.entry(id).or_insert(0) += 1;
        }
    }
    let counts = &stats[0].counts;
    if counts.dead > 0 {
        // Say which jobs died and why before failing: a dead job here is a lost success.
        let dead = store
            .list(ListFilter::default().status(JobStatus::Dead))
            .await
            .expect("list dead jobs");
        let after = store.stats().await.expect("stats");
        panic!("jobs died: {dead:#?}\nstats when finished: {stats:?}\nstats now: {after:?}");
    }
    assert_eq!(counts.succeeded, JOBS as u64);
    assert_eq!(counts.pending(), 0);
    let runs_twice = ran.values().filter(|n| **n > 1).count();
    let extra_runs: u64 = ran.values().map(|n| u64::from(n - 1)).sum();
    let acknowledged_twice = done.values().filter(|n| **n > 1).count();
    println!(
        "restart fault test: {JOBS} jobs, {} ran, {} acknowledged by the workers, {runs_twice} ran \
         more than once, {acknowledged_twice} acknowledged twice, {} failed attempts recorded",
        ran.len(),
        done.len(),
        stats[0].retries.failures,
    );
    assert_eq!(ran.len(), JOBS, "every job ran");
    assert_eq!(acknowledged_twice, 0, "a job was acknowledged twice");
    // A job runs again only after an attempt of it was lost in flight (held by the killed
    // process, or finished but not yet settled when the server went away): the store rescues
    // it when its lease expires and records the lost attempt. Handlers never fail here, so
    // every recorded failure is such a loss, and no run happens without one.
    assert!(
        extra_runs <= stats[0].retries.failures,
        "{extra_runs} repeated runs but only {} lost attempts",
        stats[0].retries.failures
    );
}
