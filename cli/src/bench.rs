//! `fairq bench`: a burn-down load test. Enqueue N jobs in batches, then run them all with a
//! [`Worker`] at a given concurrency, and report enqueue and processing rates with the
//! enqueue-to-start and run latency percentiles.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairq_core::stats::{Histogram, Summary};
use fairq_worker::{random_u64, Inspect, Job, JobId, NewJob, QueueConfig, Worker};
use serde::{Deserialize, Serialize};

use crate::args::BenchArgs;
use crate::error::CliError;
use crate::output::{self, Output};
use crate::printable::printable;
use crate::progress;
use crate::stop;
use crate::tally::{lock, Tally};

const KIND: &str = "bench";

/// The load to generate.
///
/// ```
/// let config = fairq_cli::bench::BenchConfig::default();
/// assert_eq!((config.jobs, config.concurrency, config.payload_size), (10_000, 16, 128));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BenchConfig {
    /// Jobs to enqueue and run.
    pub jobs: usize,
    /// Jobs run at once.
    pub concurrency: usize,
    /// Jobs claimed ahead of free slots (`None`: the worker's adaptive default).
    pub prefetch: Option<usize>,
    /// Payload bytes per job.
    pub payload_size: usize,
    /// Fairness keys, assigned round robin.
    pub keys: usize,
    /// Simulated work per job, in ms.
    #[serde(rename = "work_ms", serialize_with = "as_millis")]
    pub work: Duration,
    /// Jobs per enqueue batch.
    pub batch: usize,
    /// The queue (a fresh name when `None`).
    pub queue: Option<String>,
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            jobs: 10_000,
            concurrency: 16,
            prefetch: None,
            payload_size: 128,
            keys: 16,
            work: Duration::ZERO,
            batch: 500,
            queue: None,
        }
    }
}

impl From<&BenchArgs> for BenchConfig {
    fn from(args: &BenchArgs) -> Self {
        BenchConfig {
            jobs: args.jobs,
            concurrency: args.concurrency,
            prefetch: args.prefetch,
            payload_size: args.payload_size,
            keys: args.keys,
            work: args.work,
            batch: args.batch,
            queue: args.queue.clone(),
        }
    }
}

/// The most jobs one bench run takes (its start times alone hold a few GB at that).
const MAX_JOBS: usize = 100_000_000;
/// The most jobs one enqueue call of the bench carries.
const MAX_BATCH: usize = 1_000_000;
/// The most payload bytes one enqueue call of the bench carries: larger payloads make
/// smaller batches (at least one job each), so the jobs of a batch never take more memory
/// than this, whatever `--batch` asks for.
const MAX_BATCH_BYTES: usize = 16 << 20;
/// The most handlers (and the deepest prefetch) a worker runs.
const MAX_CONCURRENCY: usize = 1_000_000;

impl BenchConfig {
    /// Jobs per enqueue call: `batch`, or fewer when their payloads would hold more than
    /// `MAX_BATCH_BYTES` (16 MiB).
    ///
    /// ```
    /// let config = fairq_cli::bench::BenchConfig { payload_size: 4 << 20, ..Default::default() };
    /// assert_eq!(config.enqueue_batch(), 4);
    /// assert_eq!(fairq_cli::bench::BenchConfig::default().enqueue_batch(), 500);
    /// ```
    pub fn enqueue_batch(&self) -> usize {
        self.batch
            .min(MAX_BATCH_BYTES / self.payload_size.max(1))
            .max(1)
    }

    /// Why the settings cannot run, if they cannot.
    pub(crate) fn problem(&self) -> Option<&'static str> {
        if self.jobs == 0 {
            Some("--jobs must be at least 1")
        } else if self.jobs > MAX_JOBS {
            Some("--jobs must be at most 100,000,000")
        } else if self.concurrency == 0 {
            Some("--concurrency must be at least 1")
        } else if self.concurrency > MAX_CONCURRENCY {
            // Checked here, before any job is enqueued: the worker refuses it only later.
            Some("--concurrency must be at most 1,000,000")
        } else if self.prefetch.is_some_and(|p| p > MAX_CONCURRENCY) {
            Some("--prefetch must be at most 1,000,000")
        } else if self.keys == 0 {
            Some("--keys must be at least 1")
        } else if self.batch == 0 {
            Some("--batch must be at least 1")
        } else if self.batch > MAX_BATCH {
            Some("--batch must be at most 1,000,000")
        } else if self.payload_size > 64 << 20 {
            Some("--payload-size must be at most 64 MiB")
        } else {
            None
        }
    }
}

/// What one bench job carries: padding up to the payload size and when it was enqueued.
///
/// The fields are declared in byte order of their names, so the JSON is in canonical form
/// (compact, keys sorted) and a PostgreSQL store keeps it once, as `jsonb`, as it would a
/// `serde_json::Value` payload; fields out of order would make it keep the exact bytes too.
#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    pad: String,
    t_us: u64,
}

/// Bytes of the JSON around the padding (`{"t_us":…,"pad":""}` with a 12-digit time), so a
/// payload is at most the requested size (a few bytes less while times are short).
const FRAME: usize = 30;

/// The results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchReport {
    /// The store, as displayed.
    pub store: String,
    /// The load.
    pub config: BenchConfig,
    /// The queue used.
    pub queue: String,
    /// Seconds to enqueue every job.
    pub enqueue_seconds: f64,
    /// Jobs enqueued per second.
    pub enqueue_per_sec: f64,
    /// Seconds from the worker's start to the last completion.
    pub run_seconds: f64,
    /// Jobs completed per second.
    pub run_per_sec: f64,
    /// Enqueue to handler start, in microseconds.
    pub wait_us: Summary,
    /// Handler start to the store recording the completion, in microseconds.
    pub run_us: Summary,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

struct Shared {
    origin: Instant,
    wait: Mutex<Histogram>,
    run: Mutex<Histogram>,
    started: Mutex<HashMap<JobId, Instant>>,
    tally: Tally,
}

/// Runs the load test on `store`. `cleanup` purges the queue afterwards, and removes it when
/// the bench named it (no `queue` in `config`).
///
/// ```
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use fairq_cli::bench::{run_bench, BenchConfig};
/// let config = BenchConfig { jobs: 200, concurrency: 4, ..BenchConfig::default() };
/// let report = run_bench(Arc::new(fairq_worker::MemoryBackend::new()), "memory:", &config, true, true)
///     .await
///     .unwrap();
/// assert_eq!((report.wait_us.count, report.run_us.count), (200, 200));
/// assert!(report.run_per_sec > 0.0);
/// # });
/// ```
pub async fn run_bench<B: Inspect>(
    store: Arc<B>,
    store_name: &str,
    config: &BenchConfig,
    quiet: bool,
    cleanup: bool,
) -> Result<BenchReport, CliError> {
    run_bench_until(
        store,
        store_name,
        config,
        quiet,
        cleanup,
        std::future::pending(),
    )
    .await
}

/// As [`run_bench`], but stops early once `stop` resolves: no more jobs are enqueued, the
/// worker is shut down, the queue is cleaned up as `cleanup` says, and then the error `stop`
/// gave is returned.
///
/// ```
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use fairq_cli::bench::{run_bench_until, BenchConfig};
/// use fairq_cli::CliError;
/// use fairq_worker::Backend;
/// let store = Arc::new(fairq_worker::MemoryBackend::new());
/// let config = BenchConfig { jobs: 200, ..BenchConfig::default() };
/// let stop = async { CliError::Stopped("SIGINT") };
/// let err = run_bench_until(Arc::clone(&store), "memory:", &config, true, true, stop)
///     .await
///     .unwrap_err();
/// assert!(matches!(err, CliError::Stopped("SIGINT")));
/// assert!(store.stats().await.unwrap().is_empty(), "nothing left behind");
/// # });
/// ```
pub async fn run_bench_until<B: Inspect>(
    store: Arc<B>,
    store_name: &str,
    config: &BenchConfig,
    quiet: bool,
    cleanup: bool,
    stop: impl Future<Output = CliError>,
) -> Result<BenchReport, CliError> {
    let mut stop = std::pin::pin!(stop);
    if let Some(problem) = config.problem() {
        return Err(CliError::Usage(problem.to_string()));
    }
    let queue = match &config.queue {
        Some(named) => {
            // The bench runs only its own kind of job and purges the queue afterwards: on
            // a queue with other work it would fail those jobs, then delete them.
            let live = store.live_counts(named).await?.total();
            if live > 0 {
                return Err(CliError::Usage(format!(
                    "queue {named:?} has {live} jobs waiting or running: the bench needs a \
                     queue of its own (leave out --queue for a fresh one)"
                )));
            }
            // No worker is handed a paused queue's jobs: the bench would wait for ever.
            if store.paused().await?.contains(named) {
                return Err(CliError::Usage(format!(
                    "queue {named:?} is paused: the bench would wait for ever for its jobs \
                     (`fairq queue resume {named}` first, or leave out --queue for a fresh one)"
                )));
            }
            named.clone()
        }
        None => format!("bench-{:08x}", random_u64() as u32),
    };
    let shared = Arc::new(Shared {
        origin: Instant::now(),
        wait: Mutex::new(Histogram::new()),
        run: Mutex::new(Histogram::new()),
        // Grown as jobs start beyond the first million, not reserved for all at once.
        started: Mutex::new(HashMap::with_capacity(config.jobs.min(1 << 20))),
        tally: Tally::new(config.jobs),
    });
    let pad = "x".repeat(config.payload_size.saturating_sub(FRAME));
    let batch = config.enqueue_batch();

    // Phase 1: enqueue everything.
    let bar = progress::bar(config.jobs as u64, "enqueue", quiet);
    let enqueue_start = Instant::now();
    let mut next = 0;
    let mut stopped = None;
    while next < config.jobs {
        // Checked between batches: a batch cut short might still be committed after the
        // cleanup, and be left behind.
        stopped = stop::requested(stop.as_mut()).await;
        if stopped.is_some() {
            break;
        }
        let n = batch.min(config.jobs - next);
        let mut batch = Vec::with_capacity(n);
        for i in next..next + n {
            let payload = Payload {
                pad: pad.clone(),
                t_us: micros(shared.origin.elapsed()),
            };
            let job = NewJob::json(&queue, KIND, &payload)
                .map_err(|e| CliError::Usage(e.to_string()))?
                .key(format!("key-{}", i % config.keys));
            batch.push(job);
        }
        store.enqueue_many(batch).await?;
        next += n;
        bar.inc(n as u64);
    }
    let enqueue_elapsed = enqueue_start.elapsed();
    bar.finish_and_clear();

    // Phase 2: burn it down.
    let bar = progress::bar(config.jobs as u64, "run", quiet);
    let on_job = Arc::clone(&shared);
    let on_done = Arc::clone(&shared);
    let work = config.work;
    let bar_done = bar.clone();
    let mut queue_config = QueueConfig::default()
        .concurrency(config.concurrency)
        .lease(Duration::from_secs(60))
        .poll_interval(Duration::from_millis(20));
    if let Some(depth) = config.prefetch {
        queue_config = queue_config.prefetch(depth);
    }
    let worker = Worker::builder(Arc::clone(&store))
        .queue(queue.clone(), queue_config)
        .error_backoff(Duration::from_millis(20), Duration::from_secs(1))
        .handle_json(KIND, move |payload: Payload, job: Job| {
            let shared = Arc::clone(&on_job);
            async move {
                let now = Instant::now();
                let wait = micros(now - shared.origin).saturating_sub(payload.t_us);
                lock(&shared.wait).record(wait);
                lock(&shared.started).insert(job.claim.id, now);
                if !work.is_zero() {
                    tokio::time::sleep(work).await;
                }
                Ok::<(), String>(())
            }
        })
        .on_finished(move |report| {
            if let Some(start) = lock(&on_done.started).remove(&report.job.claim.id) {
                lock(&on_done.run).record(micros(start.elapsed()));
            }
            on_done.tally.record(report, &bar_done);
        })
        .build()?;
    if stopped.is_none() {
        // The store's connections are opened and its statements prepared before the clock
        // starts: the drain is timed, not connecting to the server (as the peers' harnesses
        // time theirs, from a ready worker).
        tokio::select! {
            warm = worker.warm_up() => warm?,
            err = stop.as_mut() => stopped = Some(err),
        }
    }
    let mut run_elapsed = Duration::ZERO;
    if stopped.is_none() {
        let run_start = Instant::now();
        let handle = worker.start()?;
        tokio::select! {
            () = shared.tally.all_finished() => {}
            err = stop.as_mut() => stopped = Some(err),
        }
        run_elapsed = run_start.elapsed();
        bar.finish_and_clear();
        // Running jobs finish and prefetched ones are handed back: a cleanup after a stop
        // finds every job of the queue.
        handle.shutdown(Duration::from_secs(10)).await;
    } else {
        bar.finish_and_clear();
    }
    if cleanup {
        // A queue the bench named itself goes entirely; one it was given keeps its history.
        crate::cleanup::clear_queue(&*store, &queue, config.queue.is_none()).await?;
    }
    if let Some(err) = stopped {
        return Err(err);
    }
    if let Some(first) = shared.tally.first_failure() {
        return Err(CliError::Verdict(format!("a bench job failed: {first}")));
    }
    let secs = |d: Duration| d.as_secs_f64().max(1e-9);
    let wait_us = lock(&shared.wait).summary();
    let run_us = lock(&shared.run).summary();
    Ok(BenchReport {
        store: store_name.to_string(),
        // With the batch size used.
        config: BenchConfig {
            batch,
            ..config.clone()
        },
        queue,
        enqueue_seconds: enqueue_elapsed.as_secs_f64(),
        enqueue_per_sec: config.jobs as f64 / secs(enqueue_elapsed),
        run_seconds: run_elapsed.as_secs_f64(),
        run_per_sec: config.jobs as f64 / secs(run_elapsed),
        wait_us,
        run_us,
    })
}

/// Prints the report as two tables (or JSON).
pub(crate) fn print(report: &BenchReport, out: &mut Output) -> Result<(), CliError> {
    if out.is_json() {
        return out.json(report);
    }
    let c = &report.config;
    out.line(format!("fairq bench on {}", printable(&report.store)))?;
    out.line(format!(
        "{} jobs of {} bytes over {} keys, {} at a time, {} of work each (queue {})",
        c.jobs,
        c.payload_size,
        c.keys,
        c.concurrency,
        output::short_duration(c.work),
        printable(&report.queue)
    ))?;
    out.line("")?;
    let mut rates = output::Grid::new(["phase", "jobs", "time", "rate"])
        .right(&[1, 2, 3])
        .prose(&[0]);
    rates.row(vec![
        format!("enqueue (batches of {})", c.batch),
        c.jobs.to_string(),
        output::short_duration(Duration::from_secs_f64(report.enqueue_seconds)),
        format!("{:.0} jobs/s", report.enqueue_per_sec),
    ]);
    rates.row(vec![
        "claim, run, complete".to_string(),
        c.jobs.to_string(),
        output::short_duration(Duration::from_secs_f64(report.run_seconds)),
        format!("{:.0} jobs/s", report.run_per_sec),
    ]);
    out.table(&rates)?;
    out.line("")?;
    let mut latency = output::Grid::new(["latency", "p50", "p90", "p95", "p99", "max"])
        .right(&[1, 2, 3, 4, 5])
        .prose(&[0]);
    for (name, s) in [
        ("enqueue to start", &report.wait_us),
        ("start to recorded completion", &report.run_us),
    ] {
        latency.row(vec![
            name.to_string(),
            output::micros(s.p50),
            output::micros(s.p90),
            output::micros(s.p95),
            output::micros(s.p99),
            output::micros(s.max),
        ]);
    }
    out.table(&latency)
}

#[cfg(test)]
mod tests {
    use fairq_worker::{Backend, JobStatus, ListFilter, MemoryBackend};

    use super::*;
    use crate::output::Format;

    #[test]
    fn payloads_have_the_requested_size() {
        let payload = Payload {
            pad: "x".repeat(200 - FRAME),
            t_us: 123_456_789_012,
        };
        assert_eq!(serde_json::to_vec(&payload).unwrap().len(), 200);
    }

    #[test]
    fn payloads_are_canonical_json() {
        let payload = Payload {
            pad: "xy".into(),
            t_us: 7,
        };
        let bytes = serde_json::to_vec(&payload).unwrap();
        // A `Value` writes object keys sorted: the same bytes only if the fields are in order.
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(serde_json::to_vec(&value).unwrap(), bytes);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn settings_the_worker_would_refuse_are_refused_before_enqueueing() {
        let store = Arc::new(MemoryBackend::new());
        for config in [
            BenchConfig {
                concurrency: 2_000_000,
                ..BenchConfig::default()
            },
            BenchConfig {
                prefetch: Some(2_000_000),
                ..BenchConfig::default()
            },
        ] {
            assert!(config.problem().is_some());
            assert!(
                run_bench(Arc::clone(&store), "memory:", &config, true, false)
                    .await
                    .is_err()
            );
        }
        assert!(
            store.stats().await.unwrap().is_empty(),
            "a queue was left behind"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_named_queue_with_other_work_is_left_alone() {
        let store = Arc::new(MemoryBackend::new());
        let theirs = store
            .enqueue(NewJob::new("b", "welcome", b"{}".to_vec()))
            .await
            .unwrap();
        let config = BenchConfig {
            jobs: 10,
            queue: Some("b".into()),
            ..BenchConfig::default()
        };
        let err = run_bench(Arc::clone(&store), "memory:", &config, true, true)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("a queue of its own"), "{err}");
        let job = store
            .get(theirs)
            .await
            .unwrap()
            .expect("their job is still there");
        assert_eq!(job.status(), JobStatus::Scheduled);
        assert_eq!(store.live_counts("b").await.unwrap().total(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_named_paused_queue_is_refused_before_enqueueing() {
        let store = Arc::new(MemoryBackend::new());
        store.set_paused("b", true).await.unwrap();
        let config = BenchConfig {
            jobs: 10,
            queue: Some("b".into()),
            ..BenchConfig::default()
        };
        // A bound on a broken build, which waits for ever.
        let ran = tokio::time::timeout(
            Duration::from_secs(60),
            run_bench(Arc::clone(&store), "memory:", &config, true, true),
        )
        .await
        .expect("the bench returns on a paused queue");
        let err = ran.unwrap_err();
        assert!(matches!(err, CliError::Usage(_)), "{err}");
        assert!(err.to_string().contains("is paused"), "{err}");
        assert_eq!(store.live_counts("b").await.unwrap().total(), 0);
        assert_eq!(store.paused().await.unwrap(), ["b"], "still paused");
    }

    /// Large payloads make smaller enqueue batches: one batch holds at most
    /// `MAX_BATCH_BYTES` of payload, whatever `--batch` says, so `--payload-size 64MiB` with
    /// the default batch of 500 does not build 32 GiB of jobs in memory at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn large_payloads_make_smaller_batches() {
        let store = Arc::new(MemoryBackend::new());
        let config = BenchConfig {
            jobs: 12,
            concurrency: 4,
            payload_size: 4 << 20,
            ..BenchConfig::default()
        };
        let report = run_bench(Arc::clone(&store), "memory:", &config, true, true)
            .await
            .unwrap();
        assert_eq!(report.run_us.count, 12);
        assert!(
            report.config.batch * report.config.payload_size <= MAX_BATCH_BYTES,
            "batches of {}",
            report.config.batch
        );
        let mut out = Output::buffer(Format::Table);
        print(&report, &mut out).unwrap();
        assert!(
            out.contents().contains("enqueue (batches of 4)"),
            "{}",
            out.contents()
        );
        // Small payloads keep the batch asked for.
        let small = BenchConfig::default();
        assert_eq!(small.enqueue_batch(), 500);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_job_runs_once_and_is_measured() {
        let store = Arc::new(MemoryBackend::new());
        let config = BenchConfig {
            jobs: 500,
            concurrency: 8,
            keys: 3,
            batch: 64,
            queue: Some("b".into()),
            ..BenchConfig::default()
        };
        let report = run_bench(Arc::clone(&store), "memory:", &config, true, false)
            .await
            .unwrap();
        assert_eq!(report.wait_us.count, 500);
        assert_eq!(report.run_us.count, 500);
        assert!(report.wait_us.max >= report.wait_us.p50);
        let done = store
            .list(ListFilter::default().queue("b").limit(1_000))
            .await
            .unwrap();
        assert_eq!(done.len(), 500);
        assert!(done
            .iter()
            .all(|j| j.status() == JobStatus::Succeeded && j.attempts == 1));
        let keys: std::collections::BTreeSet<_> =
            done.iter().filter_map(|j| j.key.clone()).collect();
        assert_eq!(keys.len(), 3);

        let mut out = Output::buffer(Format::Table);
        print(&report, &mut out).unwrap();
        assert!(out.contents().contains("enqueue to start"));
        let mut out = Output::buffer(Format::Json);
        print(&report, &mut out).unwrap();
        let json: serde_json::Value = serde_json::from_str(&out.contents()).unwrap();
        assert_eq!(json["wait_us"]["count"], 500);
        assert_eq!(json["queue"], "b");
    }

    #[tokio::test]
    async fn cleanup_purges_the_queue_and_bad_settings_are_refused() {
        let store = Arc::new(MemoryBackend::new());
        let config = BenchConfig {
            jobs: 50,
            concurrency: 2,
            ..BenchConfig::default()
        };
        run_bench(Arc::clone(&store), "memory:", &config, true, true)
            .await
            .unwrap();
        assert!(store.is_empty());
        assert!(
            store.stats().await.unwrap().is_empty(),
            "the bench's queue was not removed"
        );
        let config = BenchConfig {
            keys: 0,
            ..BenchConfig::default()
        };
        assert!(matches!(
            run_bench(store, "memory:", &config, true, true).await,
            Err(CliError::Usage(_))
        ));
    }
}
