//! Workers that die or lose their connections: nothing is lost, nothing completes twice.

mod common;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch, Notify};

use fairq_core::job::{Lease, LeaseToken, State};
use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::conformance::held_leases;
use fairq_worker::{
    Backend, Claim, Clock, Finished, Job, JobId, JobOutcome, ManualClock, NewJob, QueueConfig,
    Settled, SystemClock, Worker,
};

const CHILD_ENV: &str = "FAIRQ_REDIS_CHILD_PREFIX";
const CHILD_MODE: &str = "FAIRQ_REDIS_CHILD_MODE";
const CHILD_SLOTS: &str = "FAIRQ_REDIS_CHILD_SLOTS";
const CHILD_PREFETCH: &str = "FAIRQ_REDIS_CHILD_PREFETCH";
/// What the worker processes print for the parent, each at the start of a line of its own
/// (after whatever the test harness printed on that line).
const CHILD_TAGS: [&str; 5] = ["CLAIMED ", "RAN ", "HANG ", "ACK ", "HALF"];

/// The body of a worker process: when `CHILD_ENV` names a key prefix, connects to it and
/// runs `body` on the store (bodies never end; the parent kills the process). Otherwise
/// (the test run as part of the suite) returns at once.
fn run_child<F: Future<Output = ()>>(body: impl FnOnce(RedisBackend) -> F) {
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
        body(store).await;
    });
}

/// A worker process: this test binary started again to run only the test `name` on the key
/// prefix `prefix`, with `env` set too. Killed with SIGKILL when dropped, so a failing test
/// never leaves it behind.
struct ChildWorker {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl ChildWorker {
    fn start(name: &str, prefix: &str, env: &[(&str, &str)]) -> ChildWorker {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--nocapture", "--test-threads", "1"])
            .env(CHILD_ENV, prefix)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the child worker");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let ours = CHILD_TAGS
                    .iter()
                    .find_map(|tag| line.find(tag).map(|at| line[at..].to_string()));
                if let Some(ours) = ours {
                    if tx.send(ours).is_err() {
                        break;
                    }
                }
            }
        });
        ChildWorker {
            child,
            lines,
            reader: Some(reader),
        }
    }

    /// The next tagged line the process printed, from its tag on; `None` once it exited.
    async fn next_line(&mut self) -> Option<String> {
        self.lines.recv().await
    }

    /// Kills the process with SIGKILL and waits for it; returns the tagged lines it printed
    /// that were not read yet. Killing it again does nothing.
    fn kill(&mut self) -> Vec<String> {
        let Some(reader) = self.reader.take() else {
            return Vec::new();
        };
        self.child.kill().expect("kill -9 the child");
        self.child.wait().unwrap();
        reader.join().unwrap();
        let mut rest = Vec::new();
        while let Ok(line) = self.lines.try_recv() {
            rest.push(line);
        }
        rest
    }
}

impl ChildWorker {
    /// Reads the process' tagged lines until `enough` says so (seeing every line so far),
    /// kills it with SIGKILL, and returns every tagged line it printed.
    async fn kill_when(mut self, enough: fn(&[String]) -> bool) -> Vec<String> {
        let mut lines = Vec::new();
        let waited = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = self.next_line().await {
                lines.push(line);
                if enough(&lines) {
                    return;
                }
            }
        })
        .await;
        lines.extend(self.kill());
        assert!(
            waited.is_ok(),
            "the child did not get far enough: {lines:?}"
        );
        lines
    }
}

impl Drop for ChildWorker {
    fn drop(&mut self) {
        if self.reader.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Not a test on its own: when started by `a_killed_worker_s_job_completes_once_after_rescue`
/// (with the prefix in the environment) it claims the job, reports it and hangs mid-job until
/// it is killed.
#[test]
fn child_worker_that_hangs() {
    run_child(|store| async move {
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

    let mut child = ChildWorker::start("child_worker_that_hangs", &prefix, &[]);
    let line = tokio::time::timeout(Duration::from_secs(30), child.next_line()).await;
    child.kill();
    let line = line.ok().flatten().expect("the child reports its claim");
    let line = line.strip_prefix("CLAIMED ").unwrap();
    let fields: Vec<u64> = line
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    assert_eq!(JobId(fields[0]), id);
    let stale = Claim {
        id,
        token: LeaseToken(fields[1]),
    };

    // The job is held by a dead worker, under the token it printed, until its lease runs out.
    // The deadline is read from the store: the child's lease follows the wall clock, which
    // moved on for as long as the child took to start.
    let held = held_leases(&*store, "crash").await;
    assert_eq!(held.len(), 1);
    let (held_id, lease) = held[0];
    assert_eq!((held_id, lease.token), (id, stale.token));
    clock.set(lease.deadline - 1);
    assert_eq!(store.rescue("crash").await.unwrap(), 0);
    assert!(store
        .claim("crash", 1, Duration::from_secs(30))
        .await
        .unwrap()
        .is_empty());
    clock.set(lease.deadline);
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

/// Holds the workers of `run_workers` back until the connections were killed at each progress
/// point, so every round of kills falls within the run however the tasks are scheduled: round
/// `r` (from 1) is due once `r * every` jobs have completed, and past `r * every + every / 2`
/// completions a worker claims nothing more until round `r` has happened. With no rounds it
/// holds nobody back.
#[derive(Clone)]
struct KillGate {
    every: usize,
    rounds: usize,
    happened: watch::Receiver<usize>,
}

impl KillGate {
    /// Returns once a worker that saw `done` completions may claim again.
    async fn pass(&mut self, done: usize) {
        let (every, rounds) = (self.every, self.rounds);
        self.happened
            .wait_for(|&round| round >= rounds || done < (round + 1) * every + every / 2)
            .await
            .expect("the connection killer ended early");
    }
}

/// A worker loop over the `Backend` trait: claim a batch, complete each job, retry after
/// connection errors, rescue when idle.
async fn work(
    store: RedisBackend,
    queue: &'static str,
    ledger: Ledger,
    done: Arc<AtomicUsize>,
    progress: Arc<Notify>,
    mut gate: KillGate,
    total: usize,
) {
    let lease = Duration::from_secs(1);
    while done.load(Ordering::SeqCst) < total {
        gate.pass(done.load(Ordering::SeqCst)).await;
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
    mut gate: KillGate,
    total: usize,
) {
    let lease = Duration::from_secs(1);
    let mut finished: Vec<Finished> = Vec::new();
    while done.load(Ordering::SeqCst) < total || !finished.is_empty() {
        gate.pass(done.load(Ordering::SeqCst)).await;
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
    // Rounds of connection kills, one each time another tenth of the jobs has completed; the
    // gate makes the workers wait for each, so all of them happen before the last job: past a
    // gate the workers complete at most one batch of 16 each (128 jobs for 8 workers), less
    // than the half tenth (150 of 3,000) between the last gate and the last job.
    let rounds = if kill_connections { 9 } else { 0 };
    let (happened, gate) = watch::channel(0);
    let gate = KillGate {
        every: total / (rounds + 1),
        rounds,
        happened: gate,
    };
    let mut stores = Vec::new();
    let mut handles = Vec::new();
    stores.push(producer.clone());
    for w in 0..workers {
        let store = RedisBackend::connect(&common::url(), options.clone())
            .await
            .unwrap();
        stores.push(store.clone());
        let (ledger, done, progress, gate) =
            (ledger.clone(), done.clone(), progress.clone(), gate.clone());
        handles.push(if w % 2 == 0 {
            tokio::spawn(work(store, queue, ledger, done, progress, gate, total))
        } else {
            tokio::spawn(work_in_batches(
                store, queue, ledger, done, progress, gate, total,
            ))
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
    let killer = kill_connections.then(|| {
        let done = done.clone();
        let progress = progress.clone();
        let every = gate.every;
        tokio::spawn(async move {
            let client = redis::Client::open(common::url()).unwrap();
            let mut admin = client.get_multiplexed_async_connection().await.unwrap();
            // Kill every worker's connection each time another tenth of the jobs is done,
            // then let the workers past the next progress point.
            for round in 1..=rounds {
                while done.load(Ordering::SeqCst) < round * every {
                    progress.notified().await;
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
                happened.send_replace(round);
            }
        })
    });
    ids.extend(late.await.expect("producer"));
    let all = futures_join(handles);
    tokio::time::timeout(Duration::from_secs(120), all)
        .await
        .expect("every job completes in time");
    if let Some(killer) = killer {
        // The workers could not finish before the last round of kills.
        assert_eq!(
            *gate.happened.borrow(),
            rounds,
            "rounds of connection kills"
        );
        killer.await.expect("the connection killer");
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
    run_child(|store| async move {
        let mode = std::env::var(CHILD_MODE).expect("the child's mode");
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

/// The batch child in `mode` on the prefix of `store`.
fn batch_child(store: &RedisBackend, mode: &str) -> ChildWorker {
    ChildWorker::start(
        "child_worker_that_settles_in_batches",
        store.keys().prefix(),
        &[(CHILD_MODE, mode)],
    )
}

fn acked(lines: &[String]) -> Vec<JobId> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("ACK ")?.trim().parse().ok().map(JobId))
        .collect()
}

/// Runs every job left in `queue` once the dead worker's leases have run out
/// ([`rescue_the_dead`]); returns the jobs that ran again.
async fn finish_the_rest(store: &RedisBackend, clock: &ManualClock, queue: &str) -> Vec<JobId> {
    rescue_the_dead(store, clock, queue).await;
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

/// A store on a manual clock starting at the wall clock, with `jobs` jobs in `queue` over 7
/// keys, of the `kinds` in turn; a rescued job is due again at once.
async fn store_with_jobs(
    queue: &str,
    jobs: usize,
    kinds: &[&str],
) -> (common::TestStore, ManualClock, Vec<JobId>) {
    let clock = ManualClock::new(SystemClock.now());
    let store = common::connect(common::options(clock.clone())).await;
    let mut ids = Vec::new();
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(500) {
        let batch = chunk
            .iter()
            .map(|i| {
                NewJob::new(queue, kinds[i % kinds.len()], vec![])
                    .key(format!("t{}", i % 7))
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
    let (store, clock, ids) = store_with_jobs("midbatch", 40, &["work"]).await;
    let lines = batch_child(&store, "half")
        .kill_when(|lines| lines.last().is_some_and(|l| l == "HALF"))
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
    let (store, clock, ids) = store_with_jobs("midbatch", 2_000, &["work"]).await;
    let lines = batch_child(&store, "stream")
        .kill_when(|lines| lines.len() >= 300)
        .await;
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

/// Not a test on its own: started by the pipelined kill tests. A pipelined worker on the
/// queue `pipeline` (batched settlement; `CHILD_SLOTS` slots, 16 unless set, and a prefetch
/// buffer of `CHILD_PREFETCH`, as deep as the slots unless set) that runs jobs of kind
/// `work` at once, printing `RAN id`, and jobs of kind `hang` never to their end, printing
/// `HANG id`; it prints `ACK id` once the store has acknowledged a success. Its leases (60 s)
/// and the buffer's time-to-live (the lease) outlast the tests, so it neither loses nor hands
/// back a job before it is killed.
#[test]
fn child_pipelined_worker() {
    run_child(|store| async move {
        let setting = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
        let mut config = QueueConfig::default()
            .concurrency(setting(CHILD_SLOTS).unwrap_or(PIPELINED_SLOTS))
            .lease(Duration::from_secs(60))
            .poll_interval(Duration::from_millis(50));
        if let Some(depth) = setting(CHILD_PREFETCH) {
            config = config.prefetch(depth);
        }
        let _worker = Worker::builder(store)
            .queue("pipeline", config)
            .handle("work", |job: Job| async move {
                println!("RAN {}", job.claim.id);
                Ok::<_, String>(())
            })
            .handle("hang", |job: Job| async move {
                println!("HANG {}", job.claim.id);
                std::future::pending::<()>().await;
                Ok::<_, String>(())
            })
            .on_finished(|report| {
                if report.outcome == JobOutcome::Succeeded {
                    println!("ACK {}", report.job.claim.id);
                }
            })
            .build()
            .expect("worker")
            .start()
            .expect("start");
        std::future::pending::<()>().await;
    });
}

/// The slots of the pipelined child unless `CHILD_SLOTS` says otherwise.
const PIPELINED_SLOTS: usize = 16;

/// Steps the clock to the last lease of the jobs the store shows running in `queue` (a dead
/// child's leases follow the wall clock, which moved on for as long as the child ran) and
/// rescues every one of them; returns them as they were held.
async fn rescue_the_dead(
    store: &RedisBackend,
    clock: &ManualClock,
    queue: &str,
) -> Vec<(JobId, Lease)> {
    let held = held_leases(store, queue).await;
    if let Some(last) = held.iter().map(|(_, lease)| lease.deadline).max() {
        clock.set(last.max(clock.now()));
    }
    assert_eq!(store.rescue(queue).await.unwrap(), held.len() as u64);
    held
}

/// Runs every job of `queue` that has not succeeded yet (kinds `work` and `hang`) with a fresh
/// pipelined worker in this process, until it has run them all and shut down; returns the
/// attempt each ran as. A job that runs twice fails the test.
async fn run_the_rest(store: &RedisBackend, queue: &str) -> HashMap<JobId, u32> {
    let stats = store.stats().await.unwrap();
    let left = stats
        .iter()
        .find(|s| s.queue == queue)
        .unwrap()
        .counts
        .pending() as usize;
    let (ran_tx, mut ran) = mpsc::unbounded_channel();
    let record = move |job: Job| {
        let ran_tx = ran_tx.clone();
        async move {
            let _ = ran_tx.send((job.claim.id, job.attempt));
            Ok::<_, String>(())
        }
    };
    let worker = Worker::builder(store.clone())
        .queue(
            queue,
            QueueConfig::default()
                .concurrency(4)
                .poll_interval(Duration::from_millis(50)),
        )
        .handle("work", record.clone())
        .handle("hang", record)
        .build()
        .unwrap()
        .start()
        .unwrap();
    let mut attempts = HashMap::new();
    tokio::time::timeout(Duration::from_secs(60), async {
        while attempts.len() < left {
            let (id, attempt) = ran.recv().await.unwrap();
            assert!(attempts.insert(id, attempt).is_none(), "job {id} ran twice");
        }
    })
    .await
    .expect("every job ran");
    assert!(worker.shutdown(Duration::from_secs(10)).await.is_clean());
    assert!(ran.try_recv().is_err(), "a job ran twice");
    let stats = store.stats().await.unwrap();
    let counts = stats.iter().find(|s| s.queue == queue).unwrap().counts;
    assert_eq!(counts.pending(), 0, "{counts:?}");
    attempts
}

/// Settles a success under each of the dead worker's leases; every one must be refused as
/// stale.
async fn assert_fenced(store: &RedisBackend, held: &[(JobId, Lease)]) {
    let stale = held
        .iter()
        .map(|(id, lease)| {
            Finished::succeeded(Claim {
                id: *id,
                token: lease.token,
            })
        })
        .collect();
    for ((id, _), answer) in held.iter().zip(store.settle(stale).await.unwrap()) {
        let err = answer.expect_err("the dead worker's token settled a job");
        assert!(err.is_stale_lease(), "job {id}: {err}");
    }
}

/// A pipelined worker killed with SIGKILL while each of its slots runs a job and its prefetch
/// buffer is full. The buffered jobs were claimed but never started, and a killed process
/// cannot hand them back: they wait for their leases like the running ones. Each held job is
/// rescued with one lost attempt, the dead worker's tokens are refused, and a fresh worker
/// runs every job: the held ones on their second attempt, none lost, none twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_with_a_full_prefetch_buffer_loses_nothing() {
    require_redis!();
    const JOBS: usize = 20;
    const SLOTS: usize = 2;
    const PREFETCH: usize = 6;
    const HELD: usize = SLOTS + PREFETCH;
    let (store, clock, ids) = store_with_jobs("pipeline", JOBS, &["hang"]).await;
    let (slots, depth) = (SLOTS.to_string(), PREFETCH.to_string());
    let mut child = ChildWorker::start(
        "child_pipelined_worker",
        store.keys().prefix(),
        &[(CHILD_SLOTS, &slots), (CHILD_PREFETCH, &depth)],
    );
    // Every slot runs a job that never ends ...
    let mut started = HashSet::new();
    tokio::time::timeout(Duration::from_secs(60), async {
        while started.len() < SLOTS {
            let line = child
                .next_line()
                .await
                .expect("the worker process exited early");
            let id = line.strip_prefix("HANG ").expect("HANG <id>");
            started.insert(JobId(id.trim().parse().expect("a job id")));
        }
    })
    .await
    .expect("the worker process started a job in every slot");
    // ... and the buffer has filled: the store shows the slots' jobs and the buffer's held.
    let before = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let held = held_leases(&*store, "pipeline").await;
            if held.len() >= HELD {
                return held;
            }
            // The next look at the store; the deadline above bounds the wait.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the worker process filled its prefetch buffer");
    assert_eq!(before.len(), HELD, "the buffer stops at its depth");
    let extra = child.kill();
    assert!(
        extra.is_empty(),
        "more jobs started than there are slots: {extra:?}"
    );

    // What the dead worker holds, read once it can renew nothing any more: the same jobs.
    let held = held_leases(&*store, "pipeline").await;
    let ids_of = |held: &[(JobId, Lease)]| held.iter().map(|(id, _)| *id).collect::<HashSet<_>>();
    assert_eq!(
        ids_of(&held),
        ids_of(&before),
        "the buffer stops at its depth"
    );
    assert!(
        started.is_subset(&ids_of(&held)),
        "the running jobs are held"
    );
    // Nothing is rescued before the first lease runs out; everything once the last has.
    let first = held.iter().map(|(_, l)| l.deadline).min().unwrap();
    clock.set(first - 1);
    assert_eq!(store.rescue("pipeline").await.unwrap(), 0);
    assert_eq!(rescue_the_dead(&store, &clock, "pipeline").await, held);
    let stats = store.stats().await.unwrap();
    assert_eq!(
        stats[0].retries.failures, HELD as u64,
        "one lost attempt each"
    );
    assert_fenced(&store, &held).await;

    // A fresh worker runs every job, the held ones on their second attempt.
    let attempts = run_the_rest(&store, "pipeline").await;
    assert_eq!(attempts.len(), JOBS, "nothing is lost");
    for id in &ids {
        let second = held.iter().any(|(h, _)| h == id);
        assert_eq!(
            attempts.get(id),
            Some(&if second { 2 } else { 1 }),
            "job {id}"
        );
    }
    let stats = store.stats().await.unwrap();
    assert_eq!(
        stats[0].counts.succeeded, JOBS as u64,
        "{:?}",
        stats[0].counts
    );
    // A late settlement of the dead worker changes nothing.
    assert_fenced(&store, &held).await;
}

/// How many of `lines` start with `tag`.
fn count(lines: &[String], tag: &str) -> usize {
    lines.iter().filter(|l| l.starts_with(tag)).count()
}

/// The ids of the `lines` that start with `tag`.
fn ids_tagged(lines: &[String], tag: &str) -> HashSet<JobId> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix(tag)?.trim().parse().ok().map(JobId))
        .collect()
}

/// What must hold once the pipelined child printed `lines` and was killed: the jobs it held
/// are rescued once their leases run out and a fresh worker runs the rest; every
/// acknowledged success stays and never runs again; every job runs; the fresh worker runs
/// the held jobs on their second attempt and the others on their first; a job the dead
/// worker ran without acknowledgement runs again only if it was held. Returns the jobs that
/// ran twice.
async fn assert_the_pipelined_kill_loses_nothing(
    store: &RedisBackend,
    clock: &ManualClock,
    ids: &[JobId],
    lines: &[String],
) -> HashSet<JobId> {
    let acked = acked(lines);
    let mut ran_there = ids_tagged(lines, "RAN ");
    ran_there.extend(ids_tagged(lines, "HANG "));
    let held: HashSet<JobId> = rescue_the_dead(store, clock, "pipeline")
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let attempts = run_the_rest(store, "pipeline").await;
    assert_nothing_acknowledged_lost(store, ids, &acked).await;
    for id in ids {
        assert!(
            ran_there.contains(id) || attempts.contains_key(id),
            "job {id} never ran"
        );
    }
    for (id, attempt) in &attempts {
        assert!(!acked.contains(id), "acknowledged job {id} ran again");
        if ran_there.contains(id) {
            assert!(held.contains(id), "job {id} ran unsettled and was not held");
        }
        let expected = if held.contains(id) { 2 } else { 1 };
        assert_eq!(*attempt, expected, "job {id}");
    }
    let twice: HashSet<JobId> = attempts
        .keys()
        .filter(|id| ran_there.contains(id))
        .copied()
        .collect();
    println!(
        "killed worker: {} jobs acknowledged, {} ran without acknowledgement, {} held; the \
         fresh worker ran {} jobs, {} of them a second time",
        acked.len(),
        ran_there.len() - acked.len(),
        held.len(),
        attempts.len(),
        twice.len()
    );
    twice
}

/// A pipelined worker killed with SIGKILL with a batch half-settled: of the jobs it claimed,
/// those of kind `work` ran and were acknowledged, and those of kind `hang` fill every slot,
/// ran and never finished, while the buffer holds more. The acknowledged half never runs
/// again; the hanging half runs a second time, and nothing else does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipelined_worker_killed_with_a_half_settled_batch_loses_nothing_acknowledged() {
    require_redis!();
    let (store, clock, ids) = store_with_jobs("pipeline", 60, &["work", "hang"]).await;
    // Killed once every slot hangs and every job that finished is acknowledged: no slot will
    // free, so the child can do no more.
    let lines = ChildWorker::start("child_pipelined_worker", store.keys().prefix(), &[])
        .kill_when(|lines| {
            count(lines, "HANG ") == PIPELINED_SLOTS && count(lines, "ACK ") == count(lines, "RAN ")
        })
        .await;
    assert_eq!(count(&lines, "HANG "), PIPELINED_SLOTS, "{lines:?}");
    assert!(count(&lines, "ACK ") > 0, "{lines:?}");
    let twice = assert_the_pipelined_kill_loses_nothing(&store, &clock, &ids, &lines).await;
    assert_eq!(
        twice,
        ids_tagged(&lines, "HANG "),
        "the hanging half runs again"
    );
}

/// A pipelined worker killed with SIGKILL in the middle of its stream of batched settlements,
/// once half the jobs are acknowledged: wherever the kill falls (jobs running, finished and
/// waiting for the acker, in a settlement in flight, buffered), nothing acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipelined_worker_killed_mid_stream_loses_nothing_acknowledged() {
    require_redis!();
    const JOBS: usize = 3_000;
    let (store, clock, ids) = store_with_jobs("pipeline", JOBS, &["work"]).await;
    let lines = ChildWorker::start("child_pipelined_worker", store.keys().prefix(), &[])
        .kill_when(|lines| count(lines, "ACK ") >= JOBS / 2)
        .await;
    let acked = count(&lines, "ACK ");
    assert!((JOBS / 2..JOBS).contains(&acked), "{acked}");
    assert_the_pipelined_kill_loses_nothing(&store, &clock, &ids, &lines).await;
}
