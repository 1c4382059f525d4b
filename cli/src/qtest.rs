//! `fairq qtest`: load tests of the journaled queue and the in-memory wait-queues, after
//! libkestrel's qtest: many producers and consumers, fan-out readers, a flood of puts with
//! nobody reading, batched puts, and the blocking queues' hand-off. Each test prints its
//! throughput and latency percentiles (`--json` for a machine), with a progress bar on
//! stderr while it runs.
//!
//! Every item carries the time it was put (nanoseconds since the test started, in its first
//! eight bytes), so a consumer measures the time from put to get of each delivery.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand, ValueEnum};
use fairq_blocking::{FairWaitQueue, FullPolicy, WaitQueue};
use fairq_core::stats::Histogram;
use fairq_journal::{Coalesce, JournalConfig, JournalError, JournaledQueue, SyncPolicy};
use serde::Serialize;

use crate::error::CliError;
use crate::output::{self, Grid, Output};
use crate::progress;

/// `fairq qtest`.
#[derive(Debug, Clone, Args)]
pub struct QtestArgs {
    /// The load test to run.
    #[command(subcommand)]
    pub test: QtestTest,
}

/// The load tests.
#[derive(Debug, Clone, Subcommand)]
pub enum QtestTest {
    /// Producers put into one journaled queue while consumers share one reader (get, then
    /// commit).
    ManyClients(ManyClientsArgs),
    /// Producers put into one journaled queue with several readers, each drained by its own
    /// consumer: every item is delivered to every reader.
    Fanout(FanoutArgs),
    /// Producers fill a journaled queue nobody reads, then one consumer drains the backlog.
    Flood(FloodArgs),
    /// Producers put batches with `put_many` while one consumer reads them.
    PutMany(PutManyArgs),
    /// Producers and consumers on an in-memory wait-queue (FIFO, or fair by key).
    Blocking(BlockingArgs),
}

/// Settings of every journal test.
#[derive(Debug, Clone, Args)]
pub struct JournalArgs {
    /// Items to put.
    #[arg(long, short = 'n', default_value_t = 100_000)]
    pub items: u64,
    /// Payload bytes per item (at least 8: the put time travels in the payload).
    #[arg(long, default_value_t = 128)]
    pub size: usize,
    /// When puts are durable: never, always, group, or periodic:DURATION (like periodic:50ms).
    #[arg(long, default_value = "group", value_parser = parse_sync)]
    pub sync: SyncPolicy,
    /// Store puts into a memory map of the segment instead of writing them (with --sync
    /// never or periodic:DURATION only).
    #[arg(long)]
    pub mapped_writes: bool,
    /// Whether puts that meet share one write under --sync never or periodic:DURATION:
    /// auto (only with more than two processors), on or off. Puts that sync always share.
    #[arg(long, value_enum, default_value_t = CoalesceArg::Auto)]
    pub coalesce: CoalesceArg,
    /// Folder for the journal [default: a temporary folder, removed afterwards].
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `fairq qtest many-clients`.
#[derive(Debug, Clone, Args)]
pub struct ManyClientsArgs {
    /// Items, their size, the sync policy and the folder.
    #[command(flatten)]
    pub journal: JournalArgs,
    /// Threads putting.
    #[arg(long, short = 'p', default_value_t = 4)]
    pub producers: usize,
    /// Threads getting from the one reader.
    #[arg(long, short = 'c', default_value_t = 4)]
    pub consumers: usize,
}

/// `fairq qtest fanout`.
#[derive(Debug, Clone, Args)]
pub struct FanoutArgs {
    /// Items, their size, the sync policy and the folder.
    #[command(flatten)]
    pub journal: JournalArgs,
    /// Threads putting.
    #[arg(long, short = 'p', default_value_t = 1)]
    pub producers: usize,
    /// Readers, each drained by its own thread.
    #[arg(long, short = 'r', default_value_t = 4)]
    pub readers: usize,
}

/// `fairq qtest flood`.
#[derive(Debug, Clone, Args)]
pub struct FloodArgs {
    /// Items, their size, the sync policy and the folder.
    #[command(flatten)]
    pub journal: JournalArgs,
    /// Threads putting.
    #[arg(long, short = 'p', default_value_t = 4)]
    pub producers: usize,
}

/// `fairq qtest put-many`.
#[derive(Debug, Clone, Args)]
pub struct PutManyArgs {
    /// Items, their size, the sync policy and the folder.
    #[command(flatten)]
    pub journal: JournalArgs,
    /// Threads putting.
    #[arg(long, short = 'p', default_value_t = 1)]
    pub producers: usize,
    /// Items per `put_many`.
    #[arg(long, short = 'b', default_value_t = 100)]
    pub batch: usize,
}

/// `--coalesce`: the journal's `Coalesce` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CoalesceArg {
    /// On with more than two processors, off with one or two.
    Auto,
    /// Puts that meet share one write.
    On,
    /// Puts take turns at the writer's lock, one write each.
    Off,
}

impl From<CoalesceArg> for Coalesce {
    fn from(c: CoalesceArg) -> Self {
        match c {
            CoalesceArg::Auto => Coalesce::Auto,
            CoalesceArg::On => Coalesce::On,
            CoalesceArg::Off => Coalesce::Off,
        }
    }
}

/// Which in-memory queue `fairq qtest blocking` drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QueueKind {
    /// `WaitQueue`: one FIFO.
    Fifo,
    /// `FairWaitQueue`: fair by key.
    Fair,
}

/// `fairq qtest blocking`.
#[derive(Debug, Clone, Args)]
pub struct BlockingArgs {
    /// The queue to drive.
    #[arg(long, value_enum, default_value_t = QueueKind::Fifo)]
    pub queue: QueueKind,
    /// Items to push.
    #[arg(long, short = 'n', default_value_t = 1_000_000)]
    pub items: u64,
    /// Threads pushing.
    #[arg(long, short = 'p', default_value_t = 4)]
    pub producers: usize,
    /// Threads popping (waiting with a timeout when the queue is empty).
    #[arg(long, short = 'c', default_value_t = 4)]
    pub consumers: usize,
    /// Fairness keys, for `--queue fair` (items go round robin over them).
    #[arg(long, default_value_t = 16)]
    pub keys: usize,
    /// Bound the queue at this many items (producers then wait for room).
    #[arg(long)]
    pub capacity: Option<usize>,
}

fn parse_sync(s: &str) -> Result<SyncPolicy, String> {
    match s {
        "never" => Ok(SyncPolicy::Never),
        "always" => Ok(SyncPolicy::Always),
        "group" => Ok(SyncPolicy::Group),
        other => match other.strip_prefix("periodic:") {
            Some(d) => crate::values::parse_duration(d)
                .map(SyncPolicy::Periodic)
                .map_err(|e| format!("periodic:{d}: {e}")),
            None => Err(format!(
                "unknown sync policy {other:?} (never, always, group, periodic:DURATION)"
            )),
        },
    }
}

fn sync_name(s: SyncPolicy) -> String {
    match s {
        SyncPolicy::Never => "never".into(),
        SyncPolicy::Always => "always".into(),
        SyncPolicy::Group => "group".into(),
        SyncPolicy::Periodic(d) => format!("periodic:{}", output::short_duration(d)),
    }
}

/// What a load test measured.
#[derive(Debug, Clone, Serialize)]
pub struct QtestReport {
    /// The test's name.
    pub test: &'static str,
    /// Its settings.
    pub settings: BTreeMap<&'static str, String>,
    /// Throughput of each phase.
    pub phases: Vec<PhaseReport>,
    /// Latency percentiles.
    pub latencies: Vec<LatencyReport>,
}

/// Throughput of one phase of a load test.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseReport {
    /// What was done.
    pub phase: &'static str,
    /// How many times.
    pub count: u64,
    /// Wall-clock seconds it took.
    pub seconds: f64,
    /// `count` per second.
    pub per_sec: f64,
    /// Payload megabytes per second (0 for the in-memory queues).
    pub mb_per_sec: f64,
}

/// Latency percentiles of one operation, in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyReport {
    /// What was timed.
    pub what: &'static str,
    /// How many were timed.
    pub count: u64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile: where a stall that hits one call in a thousand shows.
    pub p999_us: f64,
    /// Slowest.
    pub max_us: f64,
}

fn latency(what: &'static str, h: &Histogram) -> LatencyReport {
    // Recorded in nanoseconds.
    let us = |ns: u64| ns as f64 / 1e3;
    LatencyReport {
        what,
        count: h.count(),
        p50_us: us(h.p50()),
        p90_us: us(h.p90()),
        p99_us: us(h.p99()),
        p999_us: us(h.quantile(0.999)),
        max_us: us(h.max()),
    }
}

fn phase(name: &'static str, count: u64, took: Duration, item_bytes: usize) -> PhaseReport {
    let seconds = took.as_secs_f64().max(1e-9);
    let per_sec = count as f64 / seconds;
    PhaseReport {
        phase: name,
        count,
        seconds,
        per_sec,
        mb_per_sec: per_sec * item_bytes as f64 / 1e6,
    }
}

fn journal_error(e: JournalError) -> CliError {
    CliError::io("journal", io::Error::other(e))
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Runs a load test and returns what it measured.
///
/// ```
/// use clap::Parser;
/// use fairq_cli::qtest::{run, QtestTest};
/// let cli = fairq_cli::Cli::try_parse_from(["fairq", "qtest", "fanout", "-n", "50", "--readers", "2"]).unwrap();
/// let fairq_cli::Command::Qtest(args) = cli.command else { unreachable!() };
/// let report = run(&args.test, true).unwrap();
/// assert_eq!(report.phases[1].count, 100); // 50 items, each delivered to 2 readers
/// ```
pub fn run(test: &QtestTest, quiet: bool) -> Result<QtestReport, CliError> {
    run_until(test, quiet, &AtomicBool::new(false))
}

/// As [`run`], but the test's threads stop soon after `stop` is raised: the run then returns
/// [`CliError::Stopped`] once they have, its scratch folder removed.
///
/// ```
/// use std::sync::atomic::AtomicBool;
/// use clap::Parser;
/// use fairq_cli::qtest::{run_until, QtestTest};
/// let cli = fairq_cli::Cli::try_parse_from(["fairq", "qtest", "flood", "-n", "1000000"]).unwrap();
/// let fairq_cli::Command::Qtest(args) = cli.command else { unreachable!() };
/// let err = run_until(&args.test, true, &AtomicBool::new(true)).unwrap_err();
/// assert!(matches!(err, fairq_cli::CliError::Stopped(_)));
/// ```
pub fn run_until(
    test: &QtestTest,
    quiet: bool,
    stop: &AtomicBool,
) -> Result<QtestReport, CliError> {
    match test {
        QtestTest::ManyClients(a) => journal_test(
            "many-clients",
            &a.journal,
            Plan {
                producers: a.producers,
                batch: 1,
                readers: 1,
                consumers_per_reader: a.consumers,
                drain_after: false,
            },
            quiet,
            stop,
        ),
        QtestTest::Fanout(a) => journal_test(
            "fanout",
            &a.journal,
            Plan {
                producers: a.producers,
                batch: 1,
                readers: a.readers,
                consumers_per_reader: 1,
                drain_after: false,
            },
            quiet,
            stop,
        ),
        QtestTest::Flood(a) => journal_test(
            "flood",
            &a.journal,
            Plan {
                producers: a.producers,
                batch: 1,
                readers: 1,
                consumers_per_reader: 1,
                drain_after: true,
            },
            quiet,
            stop,
        ),
        QtestTest::PutMany(a) => journal_test(
            "put-many",
            &a.journal,
            Plan {
                producers: a.producers,
                batch: a.batch,
                readers: 1,
                consumers_per_reader: 1,
                drain_after: false,
            },
            quiet,
            stop,
        ),
        QtestTest::Blocking(a) => blocking_test(a, quiet, stop),
    }
}

/// How a journal test puts and reads.
#[derive(Debug, Clone, Copy)]
struct Plan {
    producers: usize,
    /// Items per put (`put_many` above 1).
    batch: usize,
    readers: usize,
    consumers_per_reader: usize,
    /// Read only once every put returned (a flood), instead of while putting.
    drain_after: bool,
}

/// Counts shared by the threads of a test, and the flag that stops them all on an error.
#[derive(Default)]
struct Shared {
    put: AtomicU64,
    delivered: AtomicU64,
    /// Items committed, per reader (its consumers stop when it has all of them).
    per_reader: Vec<AtomicU64>,
    stop: AtomicBool,
}

impl Shared {
    /// True once a thread failed or the run was asked to stop from outside (`asked`).
    fn stopping(&self, asked: &AtomicBool) -> bool {
        self.stop.load(Ordering::Relaxed) || asked.load(Ordering::Relaxed)
    }
}

/// What a run stopped from outside returns.
fn stopped() -> CliError {
    CliError::Stopped("a request to stop")
}

/// The largest `--size`: the journal's largest item (`JournalConfig::max_item_size`).
const MAX_SIZE: usize = 16 << 20;
/// The most producer or consumer threads a test starts.
const MAX_THREADS: usize = 1_000;
/// The largest `--capacity` of a bounded wait-queue, which reserves its slots up front.
const MAX_CAPACITY: usize = 10_000_000;
/// The most bytes of items one `put_many` batch holds.
const MAX_BATCH_BYTES: usize = 64 << 20;

fn journal_test(
    name: &'static str,
    args: &JournalArgs,
    plan: Plan,
    quiet: bool,
    stop: &AtomicBool,
) -> Result<QtestReport, CliError> {
    if args.size < 8 {
        return Err(CliError::Usage(
            "--size must be at least 8 (each item carries its put time)".into(),
        ));
    }
    if args.items == 0 || plan.producers == 0 || plan.readers == 0 {
        return Err(CliError::Usage(
            "--items, --producers and --readers must be at least 1".into(),
        ));
    }
    if plan.consumers_per_reader == 0 || plan.batch == 0 {
        return Err(CliError::Usage(
            "--consumers and --batch must be at least 1".into(),
        ));
    }
    // Past these, a run is an allocation failure or thousands of threads (the process
    // aborted), not a measurement.
    if args.size > MAX_SIZE {
        return Err(CliError::Usage(
            "--size must be at most 16 MiB (the journal's largest item)".into(),
        ));
    }
    if plan.producers > MAX_THREADS
        || plan.readers > MAX_THREADS
        || plan.consumers_per_reader > MAX_THREADS
        || plan.readers.saturating_mul(plan.consumers_per_reader) > MAX_THREADS
    {
        return Err(CliError::Usage(
            "--producers, --readers and --consumers (per reader, times the readers) must be \
             at most 1,000"
                .into(),
        ));
    }
    if plan.batch.saturating_mul(args.size) > MAX_BATCH_BYTES {
        return Err(CliError::Usage(
            "--batch times --size must be at most 64 MiB".into(),
        ));
    }
    let scratch;
    let dir: &Path = match &args.dir {
        Some(d) => d,
        None => {
            scratch = tempfile::Builder::new()
                .prefix("fairq-qtest-")
                .tempdir()
                .map_err(|e| CliError::io("creating a temporary folder", e))?;
            scratch.path()
        }
    };
    let config = JournalConfig {
        sync: args.sync,
        mapped_writes: args.mapped_writes,
        coalesce: args.coalesce.into(),
        ..JournalConfig::default()
    };
    let q = JournaledQueue::open(dir, "qtest", config).map_err(journal_error)?;
    let readers = (0..plan.readers)
        .map(|i| q.reader(&format!("reader-{i}")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(journal_error)?;
    let shared = Shared {
        per_reader: (0..plan.readers).map(|_| AtomicU64::new(0)).collect(),
        ..Shared::default()
    };
    let total = args.items;
    let deliveries = total * plan.readers as u64;
    let t0 = Instant::now();

    let producer = |index: usize| -> Result<Histogram, CliError> {
        let share = total / plan.producers as u64
            + u64::from((index as u64) < total % plan.producers as u64);
        let mut put_latency = Histogram::new();
        let mut payloads = vec![vec![0xA5u8; args.size]; plan.batch];
        let mut left = share;
        while left > 0 && !shared.stopping(stop) {
            let n = left.min(plan.batch as u64) as usize;
            let started = t0.elapsed();
            for p in &mut payloads[..n] {
                p[..8].copy_from_slice(&nanos(started).to_le_bytes());
            }
            let result = if plan.batch == 1 {
                q.put(&payloads[0]).map(|_| ())
            } else {
                let refs: Vec<&[u8]> = payloads[..n].iter().map(Vec::as_slice).collect();
                q.put_many(&refs).map(|_| ())
            };
            result.map_err(journal_error)?;
            put_latency.record(nanos(t0.elapsed().saturating_sub(started)));
            shared.put.fetch_add(n as u64, Ordering::Relaxed);
            left -= n as u64;
        }
        Ok(put_latency)
    };
    let consumer = |index: usize| -> Result<Histogram, CliError> {
        let reader = &readers[index];
        let done = &shared.per_reader[index];
        let mut to_get = Histogram::new();
        loop {
            // Consumers of one reader share its items: stop when the reader has them all.
            if shared.stopping(stop) || done.load(Ordering::Relaxed) >= total {
                return Ok(to_get);
            }
            let Some(item) = reader
                .get_timeout(Duration::from_millis(20))
                .map_err(journal_error)?
            else {
                continue;
            };
            let mut at = [0u8; 8];
            at.copy_from_slice(&item.data[..8]);
            let put_at = Duration::from_nanos(u64::from_le_bytes(at));
            to_get.record(nanos(t0.elapsed().saturating_sub(put_at)));
            reader.commit(item.id).map_err(journal_error)?;
            done.fetch_add(1, Ordering::Relaxed);
            shared.delivered.fetch_add(1, Ordering::Relaxed);
        }
    };

    let mut put_latency = Histogram::new();
    let mut to_get = Histogram::new();
    let mut failure = None;
    let note = |r: Result<Histogram, CliError>,
                into: &mut Histogram,
                failure: &mut Option<CliError>| match r {
        Ok(h) => into.merge(&h),
        Err(e) => {
            shared.stop.store(true, Ordering::Relaxed);
            failure.get_or_insert(e);
        }
    };
    let (put_took, get_took, get_started);
    {
        let bar = progress::bar(
            if plan.drain_after { total } else { deliveries },
            if plan.drain_after { "put" } else { "delivered" },
            quiet,
        );
        let counter = if plan.drain_after {
            &shared.put
        } else {
            &shared.delivered
        };
        let watching = AtomicBool::new(true);
        let results = std::thread::scope(|s| {
            s.spawn(|| watch(&bar, counter, &watching));
            let producers: Vec<_> = (0..plan.producers)
                .map(|i| s.spawn(move || producer(i)))
                .collect();
            let consumers: Vec<_> = if plan.drain_after {
                Vec::new()
            } else {
                spawn_consumers(s, plan, &consumer)
            };
            let put_results: Vec<_> = producers
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(panicked())))
                .collect();
            let put_done = t0.elapsed();
            let get_results: Vec<_> = consumers
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(panicked())))
                .collect();
            watching.store(false, Ordering::Relaxed);
            (put_results, get_results, put_done)
        });
        bar.finish_and_clear();
        let (put_results, mut get_results, put_done) = results;
        put_took = put_done;
        for r in put_results {
            note(r, &mut put_latency, &mut failure);
        }
        get_started = if plan.drain_after {
            t0.elapsed()
        } else {
            Duration::ZERO
        };
        if plan.drain_after && failure.is_none() && !stop.load(Ordering::Relaxed) {
            let bar = progress::bar(deliveries, "drained", quiet);
            let watching = AtomicBool::new(true);
            get_results = std::thread::scope(|s| {
                s.spawn(|| watch(&bar, &shared.delivered, &watching));
                let handles = spawn_consumers(s, plan, &consumer);
                let r = handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err(panicked())))
                    .collect();
                watching.store(false, Ordering::Relaxed);
                r
            });
            bar.finish_and_clear();
        }
        get_took = t0.elapsed().saturating_sub(get_started);
        for r in get_results {
            note(r, &mut to_get, &mut failure);
        }
    }
    let on_disk = journal_bytes(dir);
    q.close().map_err(journal_error)?;
    // Returning drops the scratch folder: it is gone once the caller hears of the stop.
    if stop.load(Ordering::Relaxed) {
        return Err(stopped());
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let mut settings = BTreeMap::new();
    settings.insert("items", total.to_string());
    settings.insert("item bytes", args.size.to_string());
    settings.insert("sync", sync_name(args.sync));
    if args.mapped_writes {
        settings.insert("mapped writes", "yes".to_string());
    }
    if args.coalesce != CoalesceArg::Auto {
        let value = args
            .coalesce
            .to_possible_value()
            .map(|v| v.get_name().to_string());
        settings.insert("coalesce", value.unwrap_or_default());
    }
    settings.insert("producers", plan.producers.to_string());
    settings.insert("readers", plan.readers.to_string());
    settings.insert(
        "consumers per reader",
        plan.consumers_per_reader.to_string(),
    );
    if plan.batch > 1 {
        settings.insert("batch", plan.batch.to_string());
    }
    settings.insert("journal bytes on disk", on_disk.to_string());
    settings.insert(
        "folder",
        match &args.dir {
            Some(d) => d.display().to_string(),
            None => "temporary (removed)".to_string(),
        },
    );
    let put_what = if plan.batch > 1 { "put_many" } else { "put" };
    Ok(QtestReport {
        test: name,
        settings,
        phases: vec![
            phase("put", total, put_took, args.size),
            phase("get + commit", deliveries, get_took, args.size),
        ],
        latencies: vec![
            latency(put_what, &put_latency),
            latency("put to get", &to_get),
        ],
    })
}

fn panicked() -> CliError {
    CliError::Verdict("a load test thread panicked".into())
}

/// A consumer of reader number `n`.
type Consumer<'a> = dyn Fn(usize) -> Result<Histogram, CliError> + Sync + 'a;

fn spawn_consumers<'scope, 'env>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    plan: Plan,
    consumer: &'env Consumer<'env>,
) -> Vec<std::thread::ScopedJoinHandle<'scope, Result<Histogram, CliError>>> {
    (0..plan.readers)
        .flat_map(|r| (0..plan.consumers_per_reader).map(move |_| r))
        .map(|r| s.spawn(move || consumer(r)))
        .collect()
}

/// Moves the progress bar until `watching` is cleared.
fn watch(bar: &indicatif::ProgressBar, counter: &AtomicU64, watching: &AtomicBool) {
    while watching.load(Ordering::Relaxed) {
        bar.set_position(counter.load(Ordering::Relaxed));
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

/// Bytes of the queue's segment files.
fn journal_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".seg"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// An in-memory queue under test: push and pop of timestamps.
enum MemQueue {
    Fifo(Box<WaitQueue<u64>>),
    Fair(Box<FairWaitQueue<usize, u64>>),
}

impl MemQueue {
    fn push(&self, key: usize, item: u64) -> bool {
        const WAIT: Duration = Duration::from_secs(3600);
        match self {
            MemQueue::Fifo(q) => match q.capacity() {
                None => q.push(item).is_ok(),
                Some(_) => q.push_timeout(item, WAIT).is_ok(),
            },
            MemQueue::Fair(q) => match q.capacity() {
                None => q.push(key, item).is_ok(),
                Some(_) => q.push_timeout(key, item, WAIT).is_ok(),
            },
        }
    }

    fn pop(&self, timeout: Duration) -> Option<u64> {
        match self {
            MemQueue::Fifo(q) => q.pop_timeout(timeout),
            MemQueue::Fair(q) => q.pop_timeout(timeout),
        }
    }

    /// Refuses every push from now on, those waiting for room included.
    fn close(&self) {
        match self {
            MemQueue::Fifo(q) => q.close(),
            MemQueue::Fair(q) => q.close(),
        }
    }
}

fn blocking_test(
    a: &BlockingArgs,
    quiet: bool,
    stop: &AtomicBool,
) -> Result<QtestReport, CliError> {
    if a.items == 0 || a.producers == 0 || a.consumers == 0 || a.keys == 0 {
        return Err(CliError::Usage(
            "--items, --producers, --consumers and --keys must be at least 1".into(),
        ));
    }
    if a.producers > MAX_THREADS || a.consumers > MAX_THREADS {
        return Err(CliError::Usage(
            "--producers and --consumers must be at most 1,000".into(),
        ));
    }
    if a.capacity == Some(0) {
        return Err(CliError::Usage("--capacity must be at least 1".into()));
    }
    // A bounded queue reserves its slots up front.
    if a.capacity.is_some_and(|c| c > MAX_CAPACITY) {
        return Err(CliError::Usage(
            "--capacity must be at most 10,000,000".into(),
        ));
    }
    let q = match (a.queue, a.capacity) {
        (QueueKind::Fifo, None) => MemQueue::Fifo(Box::new(WaitQueue::unbounded())),
        (QueueKind::Fifo, Some(c)) => {
            MemQueue::Fifo(Box::new(WaitQueue::bounded(c, FullPolicy::Refuse)))
        }
        (QueueKind::Fair, None) => MemQueue::Fair(Box::new(FairWaitQueue::unbounded())),
        (QueueKind::Fair, Some(c)) => MemQueue::Fair(Box::new(FairWaitQueue::with_capacity(c))),
    };
    let shared = Shared::default();
    let t0 = Instant::now();
    let bar = progress::bar(a.items, "popped", quiet);
    let watching = AtomicBool::new(true);
    let (pushed_in, hists) = std::thread::scope(|s| {
        s.spawn(|| watch(&bar, &shared.delivered, &watching));
        let producers: Vec<_> = (0..a.producers)
            .map(|i| {
                let (q, shared) = (&q, &shared);
                s.spawn(move || {
                    let share = a.items / a.producers as u64
                        + u64::from((i as u64) < a.items % a.producers as u64);
                    for n in 0..share {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        let key = (i + n as usize * a.producers) % a.keys;
                        if !q.push(key, nanos(t0.elapsed())) {
                            shared.stop.store(true, Ordering::Relaxed);
                            return;
                        }
                        shared.put.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..a.consumers)
            .map(|_| {
                let (q, shared) = (&q, &shared);
                s.spawn(move || {
                    let mut handoff = Histogram::new();
                    while shared.delivered.load(Ordering::Relaxed) < a.items
                        && !shared.stopping(stop)
                    {
                        if let Some(at) = q.pop(Duration::from_millis(20)) {
                            handoff.record(nanos(t0.elapsed()).saturating_sub(at));
                            shared.delivered.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if stop.load(Ordering::Relaxed) {
                        // A producer waiting for room in a bounded queue would wait on.
                        q.close();
                    }
                    handoff
                })
            })
            .collect();
        for p in producers {
            let _ = p.join();
        }
        let pushed_in = t0.elapsed();
        let hists: Vec<Histogram> = consumers
            .into_iter()
            .filter_map(|c| c.join().ok())
            .collect();
        watching.store(false, Ordering::Relaxed);
        (pushed_in, hists)
    });
    bar.finish_and_clear();
    let took = t0.elapsed();
    if stop.load(Ordering::Relaxed) {
        return Err(stopped());
    }
    if shared.stop.load(Ordering::Relaxed) {
        return Err(CliError::Verdict(
            "a push was refused: the queue closed".into(),
        ));
    }
    let mut handoff = Histogram::new();
    for h in &hists {
        handoff.merge(h);
    }
    let mut settings = BTreeMap::new();
    settings.insert(
        "queue",
        match a.queue {
            QueueKind::Fifo => "fifo".to_string(),
            QueueKind::Fair => format!("fair over {} keys", a.keys),
        },
    );
    settings.insert("items", a.items.to_string());
    settings.insert("producers", a.producers.to_string());
    settings.insert("consumers", a.consumers.to_string());
    settings.insert(
        "capacity",
        a.capacity
            .map_or("unbounded".to_string(), |c| c.to_string()),
    );
    Ok(QtestReport {
        test: "blocking",
        settings,
        phases: vec![
            phase("push", a.items, pushed_in, 0),
            phase("push to last pop", a.items, took, 0),
        ],
        latencies: vec![latency("push to pop", &handoff)],
    })
}

/// Prints a report: settings, then the throughput and latency tables (or one JSON object).
pub(crate) fn print(report: &QtestReport, out: &mut Output) -> Result<(), CliError> {
    if out.is_json() {
        return out.json(report);
    }
    let settings: Vec<String> = report
        .settings
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    out.line(format!(
        "fairq qtest {}: {}",
        report.test,
        settings.join(", ")
    ))?;
    out.line("")?;
    let mut phases = Grid::new(["phase", "count", "time", "rate", "MB/s"])
        .right(&[1, 2, 3, 4])
        .prose(&[0]);
    for p in &report.phases {
        phases.row(vec![
            p.phase.to_string(),
            p.count.to_string(),
            output::short_duration(Duration::from_secs_f64(p.seconds)),
            format!("{:.0}/s", p.per_sec),
            if p.mb_per_sec > 0.0 {
                format!("{:.1}", p.mb_per_sec)
            } else {
                "-".to_string()
            },
        ]);
    }
    out.table(&phases)?;
    out.line("")?;
    let mut lat = Grid::new(["latency", "count", "p50", "p90", "p99", "p99.9", "max"])
        .right(&[1, 2, 3, 4, 5, 6])
        .prose(&[0]);
    let d = |us: f64| output::short_duration(Duration::from_secs_f64(us / 1e6));
    for l in &report.latencies {
        lat.row(vec![
            l.what.to_string(),
            l.count.to_string(),
            d(l.p50_us),
            d(l.p90_us),
            d(l.p99_us),
            d(l.p999_us),
            d(l.max_us),
        ]);
    }
    out.table(&lat)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::args::{Cli, Command};

    fn test(argv: &[&str]) -> QtestTest {
        let cli = Cli::try_parse_from([&["fairq", "qtest"], argv].concat()).unwrap();
        let Command::Qtest(args) = cli.command else {
            unreachable!()
        };
        args.test
    }

    /// Whenever the stop comes (here while the run starts), the run returns: producers
    /// waiting for room in a full bounded queue are let go too.
    #[test]
    fn a_stop_ends_every_test_even_with_producers_waiting_for_room() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().display().to_string();
        for argv in [
            &["blocking", "-n", "100000000", "--capacity", "1", "-c", "1"][..],
            &[
                "blocking",
                "--queue",
                "fair",
                "-n",
                "100000000",
                "--capacity",
                "1",
            ],
            &[
                "flood",
                "-n",
                "100000000",
                "--sync",
                "never",
                "--dir",
                &folder,
            ],
            &[
                "many-clients",
                "-n",
                "100000000",
                "--sync",
                "never",
                "--dir",
                &folder,
            ],
        ] {
            let test = test(argv);
            let stop = AtomicBool::new(false);
            std::thread::scope(|s| {
                let run = s.spawn(|| run_until(&test, true, &stop));
                stop.store(true, Ordering::Relaxed);
                let ran = run.join().unwrap();
                assert!(matches!(ran, Err(CliError::Stopped(_))), "{argv:?}");
            });
        }
    }
}
