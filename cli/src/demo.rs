//! `fairq demo`: the same jobs through fair-by-key scheduling and through a plain FIFO.
//!
//! One heavy tenant queues a large backlog; a few light tenants then submit jobs one at a
//! time while that backlog drains. Each light job arrives when the heavy tenant has started a
//! fixed share of its backlog, so both runs see the same arrivals. The fair run keys every
//! job by its tenant; the FIFO run puts the same jobs under one shared key, which makes the
//! store serve them in arrival order. Real [`Worker`]s run both; each job records its wait
//! (enqueue to handler start) and then simulates some work.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairq_core::retry::RetryPolicy;
use fairq_core::stats::{Histogram, Summary};
use fairq_worker::{random_u64, Backend, Job, NewJob, QueueConfig, Worker};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::args::DemoArgs;
use crate::error::CliError;
use crate::output::{self, Output};
use crate::printable::printable;
use crate::progress;
use crate::stop;
use crate::tally::{lock, Tally};

/// The tenant with the backlog.
pub const HEAVY: &str = "heavy";
/// Handler kind of every demo job.
const KIND: &str = "demo";
/// The share of the heavy backlog (in percent) by which every light job has arrived.
const ARRIVALS_BY_PERCENT: usize = 70;

/// The demo's workload and workers.
///
/// ```
/// let config = fairq_cli::demo::DemoConfig { heavy_jobs: 5_000, ..Default::default() };
/// assert_eq!((config.light_tenants, config.light_jobs), (4, 10));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DemoConfig {
    /// Jobs in the heavy tenant's backlog.
    pub heavy_jobs: usize,
    /// Light tenants.
    pub light_tenants: usize,
    /// Jobs per light tenant.
    pub light_jobs: usize,
    /// Simulated work per job.
    #[serde(serialize_with = "as_millis")]
    pub work: Duration,
    /// Worker instances.
    pub workers: usize,
    /// Jobs per worker at once.
    pub concurrency: usize,
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            heavy_jobs: 6_000,
            light_tenants: 4,
            light_jobs: 10,
            work: Duration::from_millis(4),
            workers: 2,
            concurrency: 4,
        }
    }
}

impl From<&DemoArgs> for DemoConfig {
    fn from(args: &DemoArgs) -> Self {
        DemoConfig {
            heavy_jobs: args.heavy_jobs,
            light_tenants: args.light_tenants,
            light_jobs: args.light_jobs,
            work: args.work,
            workers: args.workers,
            concurrency: args.concurrency,
        }
    }
}

impl DemoConfig {
    /// The name of light tenant `i` (0-based).
    pub(crate) fn light_tenant(&self, i: usize) -> String {
        format!("light-{}", i + 1)
    }

    /// Every job of one run.
    pub(crate) fn total_jobs(&self) -> usize {
        self.heavy_jobs + self.light_tenants * self.light_jobs
    }

    /// How many heavy jobs have started when wave `wave` (0-based) of light jobs arrives:
    /// the waves are spread evenly over the first 70 % of the backlog.
    pub(crate) fn arrival_point(&self, wave: usize) -> usize {
        self.heavy_jobs * ARRIVALS_BY_PERCENT * (wave + 1) / (100 * self.light_jobs.max(1))
    }

    /// Why the settings cannot make a meaningful demo, if they cannot.
    pub(crate) fn problem(&self) -> Option<String> {
        if self.heavy_jobs < 20 {
            Some("--heavy-jobs must be at least 20 for a backlog worth the name".into())
        } else if self.heavy_jobs > 10_000_000 {
            Some("--heavy-jobs must be at most 10,000,000".into())
        } else if self.light_tenants > 10_000 {
            Some("--light-tenants must be at most 10,000".into())
        } else if self.workers > 1_000 {
            Some("--workers must be at most 1,000".into())
        } else if self.light_tenants == 0 || self.light_jobs == 0 {
            Some("--light-tenants and --light-jobs must be at least 1".into())
        } else if self.light_jobs > self.heavy_jobs / 2 {
            Some("--light-jobs must be at most half of --heavy-jobs".into())
        } else if self.workers == 0 || self.concurrency == 0 {
            Some("--workers and --concurrency must be at least 1".into())
        } else if self.concurrency > 1_000_000 {
            // Checked before the backlog is enqueued: the worker refuses it only later.
            Some("--concurrency must be at most 1,000,000".into())
        } else {
            None
        }
    }
}

/// How one run keys its jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Each job keyed by its tenant.
    FairByKey,
    /// Every job under one shared key: arrival order.
    Fifo,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::FairByKey => "fair by key",
            Mode::Fifo => "plain FIFO",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Mode::FairByKey => "fair",
            Mode::Fifo => "fifo",
        }
    }
}

/// A tenant's waits in one run, in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TenantWaits {
    /// The tenant (or `all light tenants`).
    pub tenant: String,
    /// Enqueue-to-start waits in microseconds.
    pub wait_us: Summary,
}

/// One run's numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// How jobs were keyed.
    pub mode: Mode,
    /// Jobs run.
    pub jobs: u64,
    /// From the workers' start to the last job's completion.
    pub seconds: f64,
    /// Jobs per second.
    pub jobs_per_sec: f64,
    /// Waits per tenant: the heavy tenant, each light tenant, then all light tenants.
    pub tenants: Vec<TenantWaits>,
    /// All light tenants' waits together.
    #[serde(skip)]
    pub light: Histogram,
}

/// The outcome of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// True when the light tenants' slowest (p99) wait under fair scheduling was shorter
    /// than their median wait under FIFO.
    pub fair_wins: bool,
    /// FIFO median light wait over fair median light wait.
    pub light_speedup: f64,
    /// Fair throughput over FIFO throughput.
    pub throughput_ratio: f64,
    /// The sentence printed last.
    pub text: String,
}

/// Both runs and the verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DemoReport {
    /// The store, as displayed.
    pub store: String,
    /// The workload.
    pub config: DemoConfig,
    /// The plain FIFO run (the baseline).
    pub fifo: RunReport,
    /// The fair-by-key run.
    pub fair: RunReport,
    /// The comparison.
    pub verdict: Verdict,
}

/// What a demo job carries: its tenant and when it was enqueued, in microseconds since the
/// run's origin.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Payload {
    tenant: String,
    t_us: u64,
}

/// Microseconds since `origin`.
fn micros_since(origin: Instant) -> u64 {
    u64::try_from(origin.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// What the handlers and hooks of one run share.
struct RunState {
    origin: Instant,
    waits: Mutex<BTreeMap<String, Histogram>>,
    heavy_started: watch::Sender<usize>,
    tally: Tally,
}

fn demo_job(queue: &str, mode: Mode, tenant: &str, origin: Instant) -> Result<NewJob, CliError> {
    let payload = Payload {
        tenant: tenant.to_string(),
        t_us: micros_since(origin),
    };
    let job = NewJob::json(queue, KIND, &payload)
        .map_err(|e| CliError::Usage(e.to_string()))?
        // A demo job that fails is a bug to report, not something to wait out.
        .retry(RetryPolicy::new(0));
    Ok(match mode {
        Mode::FairByKey => job.key(tenant),
        Mode::Fifo => job,
    })
}

/// Runs the workload once in `mode` on a fresh queue of `store`; once `stop` resolves, stops
/// the workers, cleans up as `cleanup` says and returns the error `stop` gave.
async fn run_once<B: Backend, F: Future<Output = CliError>>(
    store: &Arc<B>,
    config: &DemoConfig,
    mode: Mode,
    quiet: bool,
    cleanup: bool,
    mut stop: Pin<&mut F>,
) -> Result<RunReport, CliError> {
    let queue = format!("demo-{}-{:08x}", mode.slug(), random_u64() as u32);
    let total = config.total_jobs();
    let state = Arc::new(RunState {
        origin: Instant::now(),
        waits: Mutex::new(BTreeMap::new()),
        heavy_started: watch::Sender::new(0),
        tally: Tally::new(total),
    });

    // The backlog is in place before any worker starts.
    let mut backlog = Vec::with_capacity(config.heavy_jobs);
    for _ in 0..config.heavy_jobs {
        backlog.push(demo_job(&queue, mode, HEAVY, state.origin)?);
    }
    for chunk in backlog.chunks(500) {
        // Checked between chunks: a chunk cut short might still be committed after the
        // cleanup, and be left behind.
        if let Some(err) = stop::requested(stop.as_mut()).await {
            if cleanup {
                crate::cleanup::clear_queue(store, &queue, true).await?;
            }
            return Err(err);
        }
        store.enqueue_many(chunk.to_vec()).await?;
    }

    let bar = progress::bar(total as u64, mode.label(), quiet);
    let mut handles = Vec::with_capacity(config.workers);
    let started = Instant::now();
    for _ in 0..config.workers {
        let on_job = Arc::clone(&state);
        let on_done = Arc::clone(&state);
        let work = config.work;
        let bar = bar.clone();
        let worker = Worker::builder(Arc::clone(store))
            .queue(
                queue.clone(),
                // A light tenant's job starts within its fair bound of the jobs claimed
                // after it arrived, plus the jobs the worker already held: the prefetch
                // depth is pinned to the concurrency, as the worker's README advises where
                // a newly active key's wait matters more than throughput (an adaptive depth
                // that grew under a slow store let light jobs wait behind a hundred heavy
                // ones, as long as under FIFO).
                QueueConfig::default()
                    .concurrency(config.concurrency)
                    .prefetch(config.concurrency)
                    .lease(Duration::from_secs(30))
                    .poll_interval(Duration::from_millis(20)),
            )
            .error_backoff(Duration::from_millis(20), Duration::from_secs(1))
            .handle_json(KIND, move |payload: Payload, _job: Job| {
                let state = Arc::clone(&on_job);
                async move {
                    let wait = micros_since(state.origin).saturating_sub(payload.t_us);
                    lock(&state.waits)
                        .entry(payload.tenant.clone())
                        .or_default()
                        .record(wait);
                    if payload.tenant == HEAVY {
                        state.heavy_started.send_modify(|n| *n += 1);
                    }
                    tokio::time::sleep(work).await;
                    Ok::<(), String>(())
                }
            })
            .on_finished(move |report| {
                on_done.tally.record(report, &bar);
            })
            .build()?;
        handles.push(worker.start()?);
    }

    // Raised on a stop: the feeder and the wait for the last job end at their next wait,
    // never inside an enqueue (one cut short might be committed after the cleanup).
    let stopping = watch::Sender::new(false);
    // Light tenants submit one job each per wave, at fixed points of the heavy backlog.
    let feeder = async {
        let mut heavy = state.heavy_started.subscribe();
        let mut stopped = stopping.subscribe();
        for wave in 0..config.light_jobs {
            let point = config.arrival_point(wave);
            tokio::select! {
                reached = heavy.wait_for(|n| *n >= point) => {
                    reached.map_err(|_| CliError::Usage("the demo's workers stopped early".into()))?;
                }
                _ = stopped.wait_for(|s| *s) => break,
            }
            let mut jobs = Vec::with_capacity(config.light_tenants);
            for tenant in 0..config.light_tenants {
                jobs.push(demo_job(
                    &queue,
                    mode,
                    &config.light_tenant(tenant),
                    state.origin,
                )?);
            }
            store.enqueue_many(jobs).await?;
        }
        Ok::<(), CliError>(())
    };
    let all_done = async {
        let mut stopped = stopping.subscribe();
        tokio::select! {
            () = state.tally.all_finished() => {}
            _ = stopped.wait_for(|s| *s) => {}
        }
        Ok::<(), CliError>(())
    };
    let limit = Duration::from_secs(300);
    let run = tokio::time::timeout(limit, async { tokio::try_join!(feeder, all_done) });
    let mut run = std::pin::pin!(run);
    let outcome = tokio::select! {
        outcome = &mut run => outcome,
        err = stop => {
            stopping.send_replace(true);
            let _ = run.await;
            // Returned as the run's error once the workers stopped and the queue is cleaned
            // up.
            Ok(Err(err))
        }
    };
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    // Running jobs finish and prefetched ones are handed back: a cleanup after a stop finds
    // every job of the queue.
    for handle in handles {
        handle.shutdown(Duration::from_secs(5)).await;
    }
    if cleanup {
        crate::cleanup::clear_queue(store, &queue, true).await?;
    }
    match outcome {
        Err(_) => {
            return Err(CliError::Verdict(format!(
                "the {} run did not finish within {}",
                mode.label(),
                humantime::format_duration(limit)
            )))
        }
        Ok(Err(e)) => return Err(e),
        Ok(Ok(_)) => {}
    }
    if let Some(first) = state.tally.first_failure() {
        return Err(CliError::Verdict(format!(
            "a job of the {} run failed: {first}",
            mode.label()
        )));
    }

    let waits = std::mem::take(&mut *lock(&state.waits));
    let mut tenants = Vec::new();
    let mut light = Histogram::new();
    if let Some(h) = waits.get(HEAVY) {
        tenants.push(TenantWaits {
            tenant: HEAVY.to_string(),
            wait_us: h.summary(),
        });
    }
    for i in 0..config.light_tenants {
        let name = config.light_tenant(i);
        if let Some(h) = waits.get(&name) {
            light.merge(h);
            tenants.push(TenantWaits {
                tenant: name,
                wait_us: h.summary(),
            });
        }
    }
    tenants.push(TenantWaits {
        tenant: "all light tenants".to_string(),
        wait_us: light.summary(),
    });
    let seconds = elapsed.as_secs_f64();
    Ok(RunReport {
        mode,
        jobs: total as u64,
        seconds,
        jobs_per_sec: total as f64 / seconds.max(1e-9),
        tenants,
        light,
    })
}

/// Judges the two runs.
fn verdict(fifo: &RunReport, fair: &RunReport) -> Verdict {
    let (fair_p50, fair_p99) = (fair.light.p50(), fair.light.p99());
    let (fifo_p50, fifo_p99) = (fifo.light.p50(), fifo.light.p99());
    let fair_wins = fair.light.count() > 0 && fifo.light.count() > 0 && fair_p99 < fifo_p50;
    let light_speedup = fifo_p50 as f64 / fair_p50.max(1) as f64;
    let throughput_ratio = fair.jobs_per_sec / fifo.jobs_per_sec.max(1e-9);
    let text = if fair_wins {
        format!(
            "verdict: fair by key wins: the light tenants' median wait fell from {} under FIFO \
             to {} ({light_speedup:.0}x sooner; p99 {} -> {}), at {throughput_ratio:.2}x \
             FIFO's throughput ({:.0} vs {:.0} jobs/s)",
            output::micros(fifo_p50),
            output::micros(fair_p50),
            output::micros(fifo_p99),
            output::micros(fair_p99),
            fair.jobs_per_sec,
            fifo.jobs_per_sec,
        )
    } else {
        format!(
            "verdict: UNEXPECTED: under fair scheduling the light tenants' p99 wait ({}) was \
             not below their FIFO median ({})",
            output::micros(fair_p99),
            output::micros(fifo_p50)
        )
    };
    Verdict {
        fair_wins,
        light_speedup,
        throughput_ratio,
        text,
    }
}

/// Runs a short untimed warm-up, then the FIFO baseline and the fair run, on `store`.
/// `cleanup` removes the demo's queues afterwards, jobs and counters (for shared stores).
///
/// ```
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use fairq_cli::demo::{run_demo, DemoConfig};
/// let config = DemoConfig { heavy_jobs: 200, light_tenants: 2, light_jobs: 3, ..DemoConfig::default() };
/// let report = run_demo(Arc::new(fairq_worker::MemoryBackend::new()), "memory:", &config, true, false)
///     .await
///     .unwrap();
/// assert!(report.verdict.fair_wins, "{}", report.verdict.text);
/// assert_eq!(report.fair.jobs, 206);
/// # });
/// ```
pub async fn run_demo<B: Backend>(
    store: Arc<B>,
    store_name: &str,
    config: &DemoConfig,
    quiet: bool,
    cleanup: bool,
) -> Result<DemoReport, CliError> {
    run_demo_until(
        store,
        store_name,
        config,
        quiet,
        cleanup,
        std::future::pending(),
    )
    .await
}

/// As [`run_demo`], but stops early once `stop` resolves: the workers are shut down, the
/// queue of the run under way is cleaned up as `cleanup` says, and then the error `stop`
/// gave is returned.
///
/// ```
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use fairq_cli::demo::{run_demo_until, DemoConfig};
/// use fairq_cli::CliError;
/// use fairq_worker::Backend;
/// let store = Arc::new(fairq_worker::MemoryBackend::new());
/// let stop = async { CliError::Stopped("SIGTERM") };
/// let err = run_demo_until(Arc::clone(&store), "memory:", &DemoConfig::default(), true, true, stop)
///     .await
///     .unwrap_err();
/// assert!(matches!(err, CliError::Stopped("SIGTERM")));
/// assert!(store.stats().await.unwrap().is_empty(), "nothing left behind");
/// # });
/// ```
pub async fn run_demo_until<B: Backend>(
    store: Arc<B>,
    store_name: &str,
    config: &DemoConfig,
    quiet: bool,
    cleanup: bool,
    stop: impl Future<Output = CliError>,
) -> Result<DemoReport, CliError> {
    let mut stop = std::pin::pin!(stop);
    if let Some(problem) = config.problem() {
        return Err(CliError::Usage(problem));
    }
    let warm_up = DemoConfig {
        heavy_jobs: 40,
        light_tenants: 1,
        light_jobs: 1,
        ..config.clone()
    };
    run_once(
        &store,
        &warm_up,
        Mode::FairByKey,
        true,
        cleanup,
        stop.as_mut(),
    )
    .await?;
    let fifo = run_once(&store, config, Mode::Fifo, quiet, cleanup, stop.as_mut()).await?;
    let fair = run_once(&store, config, Mode::FairByKey, quiet, cleanup, stop).await?;
    let verdict = verdict(&fifo, &fair);
    Ok(DemoReport {
        store: store_name.to_string(),
        config: config.clone(),
        fifo,
        fair,
        verdict,
    })
}

/// Prints the report: the workload, a throughput table, a wait table and the verdict.
pub(crate) fn print(report: &DemoReport, out: &mut Output) -> Result<(), CliError> {
    if out.is_json() {
        return out.json(report);
    }
    let c = &report.config;
    out.line(format!("fairq demo on {}", printable(&report.store)))?;
    out.line(format!(
        "1 heavy tenant with a backlog of {} jobs; {} light tenants with {} jobs each, \
         arriving while the backlog drains; {} workers x {} jobs at a time, {} of work per job",
        c.heavy_jobs,
        c.light_tenants,
        c.light_jobs,
        c.workers,
        c.concurrency,
        output::short_duration(c.work),
    ))?;
    out.line("")?;
    let mut runs =
        output::Grid::new(["scheduling", "jobs", "time", "throughput"]).right(&[1, 2, 3]);
    for run in [&report.fifo, &report.fair] {
        runs.row(vec![
            run.mode.label().to_string(),
            run.jobs.to_string(),
            output::short_duration(Duration::from_secs_f64(run.seconds)),
            format!("{:.0} jobs/s", run.jobs_per_sec),
        ]);
    }
    out.table(&runs)?;
    out.line("")?;
    let mut waits = output::Grid::new([
        "tenant",
        "jobs",
        "FIFO wait p50",
        "FIFO p99",
        "FIFO max",
        "fair wait p50",
        "fair p99",
        "fair max",
    ])
    .right(&[1, 2, 3, 4, 5, 6, 7])
    .prose(&[0]);
    for (fifo, fair) in report.fifo.tenants.iter().zip(&report.fair.tenants) {
        let (a, b) = (&fifo.wait_us, &fair.wait_us);
        waits.row(vec![
            fair.tenant.clone(),
            b.count.to_string(),
            output::micros(a.p50),
            output::micros(a.p99),
            output::micros(a.max),
            output::micros(b.p50),
            output::micros(b.p99),
            output::micros(b.max),
        ]);
    }
    out.table(&waits)?;
    out.line("(wait: from enqueue to the start of the job's handler)")?;
    out.line("")?;
    out.line(&report.verdict.text)
}

#[cfg(test)]
mod tests {
    use fairq_worker::MemoryBackend;

    use super::*;
    use crate::output::Format;

    fn small() -> DemoConfig {
        DemoConfig {
            heavy_jobs: 600,
            light_tenants: 3,
            light_jobs: 4,
            work: Duration::from_millis(1),
            workers: 2,
            concurrency: 3,
        }
    }

    #[test]
    fn arrivals_spread_over_most_of_the_backlog() {
        let c = small();
        let points: Vec<usize> = (0..c.light_jobs).map(|w| c.arrival_point(w)).collect();
        assert_eq!(points, [105, 210, 315, 420]);
        assert!(points.iter().all(|&p| p < c.heavy_jobs));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fair_scheduling_beats_fifo_for_light_tenants_on_the_memory_store() {
        let store = Arc::new(MemoryBackend::new());
        let report = run_demo(Arc::clone(&store), "memory:", &small(), true, true)
            .await
            .unwrap();
        assert!(report.verdict.fair_wins, "{}", report.verdict.text);
        for run in [&report.fifo, &report.fair] {
            assert_eq!(run.jobs, 612);
            let heavy = &run.tenants[0];
            assert_eq!((heavy.tenant.as_str(), heavy.wait_us.count), (HEAVY, 600));
            let light = run.tenants.last().unwrap();
            assert_eq!(light.wait_us.count, 12);
            assert_eq!(run.tenants.len(), 1 + 3 + 1);
        }
        // Cleaned up: no job is left behind.
        assert!(store.is_empty(), "demo queues were not purged");
        assert!(
            store.stats().await.unwrap().is_empty(),
            "demo queues were not removed"
        );

        let mut out = Output::buffer(Format::Table);
        print(&report, &mut out).unwrap();
        let text = out.contents();
        assert!(text.contains("plain FIFO") && text.contains("fair by key"));
        assert!(text.contains("light-3") && text.contains("all light tenants"));
        assert!(text
            .lines()
            .last()
            .unwrap()
            .starts_with("verdict: fair by key wins"));

        let mut out = Output::buffer(Format::Json);
        print(&report, &mut out).unwrap();
        let json: serde_json::Value = serde_json::from_str(&out.contents()).unwrap();
        assert_eq!(json["verdict"]["fair_wins"], true);
        assert_eq!(json["fair"]["mode"], "fair_by_key");
        assert_eq!(json["config"]["heavy_jobs"], 600);
    }

    #[test]
    fn the_verdict_is_negative_when_fifo_serves_light_tenants_as_fast() {
        let run = |mode, waits: &[u64]| {
            let mut light = Histogram::new();
            for &w in waits {
                light.record(w);
            }
            RunReport {
                mode,
                jobs: 10,
                seconds: 1.0,
                jobs_per_sec: 10.0,
                tenants: vec![],
                light,
            }
        };
        let v = verdict(
            &run(Mode::Fifo, &[100, 200, 300]),
            &run(Mode::FairByKey, &[100, 200, 300]),
        );
        assert!(!v.fair_wins);
        assert!(v.text.starts_with("verdict: UNEXPECTED"));
        let v = verdict(
            &run(Mode::Fifo, &[50_000, 80_000, 90_000]),
            &run(Mode::FairByKey, &[1_000, 2_000, 3_000]),
        );
        assert!(v.fair_wins);
        // Histogram percentiles are bucket midpoints, within 1/128 of the true value.
        assert!((v.light_speedup - 40.0).abs() < 0.5, "{}", v.light_speedup);
        assert_eq!(v.throughput_ratio, 1.0);
    }

    #[tokio::test]
    async fn settings_without_light_tenants_are_refused() {
        let config = DemoConfig {
            light_tenants: 0,
            ..small()
        };
        let err = run_demo(
            Arc::new(MemoryBackend::new()),
            "memory:",
            &config,
            true,
            false,
        )
        .await
        .unwrap_err();
        assert!(matches!(err, CliError::Usage(_)));
    }
}
