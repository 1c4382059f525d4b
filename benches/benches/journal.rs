//! fairq-journal put and get+commit throughput against the physical baseline and two peers,
//! all in one run:
//!
//! - baseline: a raw `write` + `fdatasync` loop, and raw buffered sequential writes;
//! - peers: `yaque` (appends are flushed to the OS, never synced) and `queue-file` (with and
//!   without its per-add sync);
//! - fairq-journal under each sync policy with 1 and 4 writers, for 64 B, 1 KiB and 64 KiB items.
//!
//! The baseline fdatasync latency is printed first; after criterion's statistics come a table
//! of puts/s and MB/s (from criterion's own samples) and the ratios the journal aims for, each
//! measured in alternating rounds so both sides see the same machine and disk load (targets
//! are for this benchmark only):
//! `Never` at 1 KiB >= 70% of raw buffered bandwidth, `Group` with 4 writers >= 3x `Always`,
//! `Always` >= 90% of the raw fdatasync loop, and >= 2x `yaque` and `queue-file` on the same
//! workload.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use fairq_journal::{JournalConfig, JournaledQueue, SyncPolicy};

const SIZES: [usize; 3] = [64, 1024, 64 * 1024];

/// Throughput accumulated over every sample criterion ran: label → (operations, time).
static RESULTS: Mutex<BTreeMap<String, (u64, Duration)>> = Mutex::new(BTreeMap::new());

fn record(label: &str, ops: u64, took: Duration) {
    let mut r = RESULTS.lock().unwrap();
    let e = r.entry(label.to_string()).or_insert((0, Duration::ZERO));
    e.0 += ops;
    e.1 += took;
}

fn policy_name(p: SyncPolicy) -> &'static str {
    match p {
        SyncPolicy::Always => "always",
        SyncPolicy::Group => "group",
        SyncPolicy::Periodic(_) => "periodic",
        SyncPolicy::Never => "never",
    }
}

const POLICIES: [SyncPolicy; 4] = [
    SyncPolicy::Always,
    SyncPolicy::Group,
    SyncPolicy::Periodic(Duration::from_millis(50)),
    SyncPolicy::Never,
];

fn journal_config(sync: SyncPolicy) -> JournalConfig {
    JournalConfig {
        sync,
        ..JournalConfig::default()
    }
}

/// Runs `iters` puts of `size` bytes split over `writers` threads on a fresh queue.
fn journal_puts(sync: SyncPolicy, size: usize, writers: u64, iters: u64) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "bench", journal_config(sync)).unwrap();
    let data = vec![0xA5u8; size];
    let per = (iters / writers).max(1);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..writers {
            let q = q.clone();
            let data = &data;
            s.spawn(move || {
                for _ in 0..per {
                    q.put(data).unwrap();
                }
            });
        }
    });
    let took = start.elapsed();
    drop(q);
    took.mul_f64(iters as f64 / (per * writers) as f64)
}

fn raw_file(dir: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("raw"))
        .unwrap()
}

/// The physical floor of a durable append: write the bytes, fdatasync, repeat.
fn raw_fdatasync(size: usize, iters: u64) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let mut f = raw_file(dir.path());
    let data = vec![0xA5u8; size];
    let start = Instant::now();
    for _ in 0..iters {
        f.write_all(&data).unwrap();
        f.sync_data().unwrap();
    }
    start.elapsed()
}

/// The physical ceiling of a non-durable append: buffered sequential writes.
fn raw_buffered(size: usize, iters: u64) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let mut f = BufWriter::with_capacity(256 * 1024, raw_file(dir.path()));
    let data = vec![0xA5u8; size];
    let start = Instant::now();
    for _ in 0..iters {
        f.write_all(&data).unwrap();
    }
    f.flush().unwrap();
    start.elapsed()
}

fn yaque_sends(size: usize, iters: u64) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let mut tx = yaque::Sender::open(dir.path().join("q")).unwrap();
    let data = vec![0xA5u8; size];
    let start = Instant::now();
    for _ in 0..iters {
        tx.try_send(&data).unwrap();
    }
    start.elapsed()
}

fn queue_file_adds(size: usize, sync: bool, iters: u64) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let mut qf = queue_file::QueueFile::open(dir.path().join("qf")).unwrap();
    qf.set_sync_writes(sync);
    let data = vec![0xA5u8; size];
    let start = Instant::now();
    for _ in 0..iters {
        qf.add(&data).unwrap();
    }
    start.elapsed()
}

fn journal_get_commit(size: usize, iters: u64) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "bench", journal_config(SyncPolicy::Never)).unwrap();
    let r = q.reader("consumer").unwrap();
    let data = vec![0xA5u8; size];
    for _ in 0..iters {
        q.put(&data).unwrap();
    }
    let start = Instant::now();
    for _ in 0..iters {
        let item = r.get().unwrap().unwrap();
        r.commit(item.id).unwrap();
    }
    start.elapsed()
}

fn yaque_recv_commit(size: usize, iters: u64) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("q");
    let mut tx = yaque::Sender::open(&base).unwrap();
    let data = vec![0xA5u8; size];
    for _ in 0..iters {
        tx.try_send(&data).unwrap();
    }
    let mut rx = yaque::Receiver::open(&base).unwrap();
    let start = Instant::now();
    for _ in 0..iters {
        let guard = rx.try_recv().unwrap();
        guard.commit().unwrap();
    }
    start.elapsed()
}

fn queue_file_peek_remove(size: usize, iters: u64) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let mut qf = queue_file::QueueFile::open(dir.path().join("qf")).unwrap();
    qf.set_sync_writes(false);
    let data = vec![0xA5u8; size];
    for _ in 0..iters {
        qf.add(&data).unwrap();
    }
    let start = Instant::now();
    for _ in 0..iters {
        std::hint::black_box(qf.peek().unwrap());
        qf.remove().unwrap();
    }
    start.elapsed()
}

fn print_fdatasync_latency() {
    let dir = tempfile::tempdir().unwrap();
    let n = 200;
    let took = raw_fdatasync(64, n);
    println!(
        "baseline: write(64 B) + fdatasync latency {:.1} us ({:.0} syncs/s) on {}",
        took.as_secs_f64() * 1e6 / n as f64,
        n as f64 / took.as_secs_f64(),
        dir.path()
            .parent()
            .map_or("?".into(), |p| p.display().to_string()),
    );
}

fn bench_puts(c: &mut Criterion) {
    for size in SIZES {
        let mut g = c.benchmark_group(format!("put/{size}B"));
        g.throughput(Throughput::Bytes(size as u64));
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_millis(700));
        let mut run = |label: String, f: &dyn Fn(u64) -> Duration| {
            g.bench_function(BenchmarkId::from_parameter(&label), |b| {
                b.iter_custom(|iters| {
                    let took = f(iters);
                    record(&format!("put/{size}/{label}"), iters, took);
                    took
                })
            });
        };
        run("raw-fdatasync".into(), &|n| raw_fdatasync(size, n));
        run("raw-buffered".into(), &|n| raw_buffered(size, n));
        for policy in POLICIES {
            for writers in [1u64, 4] {
                let label = format!("journal-{}-{writers}w", policy_name(policy));
                run(label, &|n| journal_puts(policy, size, writers, n));
            }
        }
        run("yaque".into(), &|n| yaque_sends(size, n));
        run("queue-file-sync".into(), &|n| {
            queue_file_adds(size, true, n)
        });
        run("queue-file-nosync".into(), &|n| {
            queue_file_adds(size, false, n)
        });
        g.finish();
    }
}

fn bench_get_commit(c: &mut Criterion) {
    for size in SIZES {
        let mut g = c.benchmark_group(format!("get-commit/{size}B"));
        g.throughput(Throughput::Bytes(size as u64));
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_millis(700));
        let mut run = |label: &str, f: &dyn Fn(u64) -> Duration| {
            g.bench_function(BenchmarkId::from_parameter(label), |b| {
                b.iter_custom(|iters| {
                    let took = f(iters);
                    record(&format!("get/{size}/{label}"), iters, took);
                    took
                })
            });
        };
        run("journal", &|n| journal_get_commit(size, n));
        run("yaque", &|n| yaque_recv_commit(size, n));
        run("queue-file", &|n| queue_file_peek_remove(size, n));
        g.finish();
    }
}

fn print_table() {
    println!();
    println!("== fairq-journal throughput (mean over every criterion sample) ==");
    println!("{:<34} {:>12} {:>10}", "case", "ops/s", "MB/s");
    let rows: Vec<(String, u64, Duration)> = RESULTS
        .lock()
        .unwrap()
        .iter()
        .map(|(k, (n, t))| (k.clone(), *n, *t))
        .collect();
    for (label, ops, took) in rows {
        let size: f64 = label
            .split('/')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0.0);
        let per_sec = ops as f64 / took.as_secs_f64().max(1e-12);
        println!(
            "{:<34} {:>12.0} {:>10.1}",
            label,
            per_sec,
            per_sec * size / 1e6
        );
    }
}

type Run<'a> = &'a dyn Fn(u64) -> Duration;

/// Measures `a` against `b` in alternating rounds (so both see the same disk and machine
/// load) and returns the median and the range of the per-round throughput ratios a/b.
fn paired(a: Run<'_>, b: Run<'_>) -> (f64, f64, f64) {
    let ops_for = |f: Run<'_>| {
        let per_op = f(16).as_secs_f64() / 16.0;
        ((0.1 / per_op.max(1e-9)) as u64).clamp(16, 500_000)
    };
    let (na, nb) = (ops_for(a), ops_for(b));
    let mut ratios: Vec<f64> = (0..5)
        .map(|_| {
            let ta = a(na).as_secs_f64().max(1e-12);
            let tb = b(nb).as_secs_f64().max(1e-12);
            (na as f64 / ta) / (nb as f64 / tb)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    (ratios[2], ratios[0], ratios[4])
}

fn print_ratios() {
    println!();
    println!(
        "== ratios, measured in 5 alternating rounds each (higher is better for the journal) =="
    );
    println!(
        "{:<48} {:>8} {:>17} {:>10}",
        "comparison", "median", "range", "target"
    );
    let row = |label: String, a: Run<'_>, b: Run<'_>, target: Option<f64>| {
        let (m, lo, hi) = paired(a, b);
        let t = match target {
            Some(t) if m >= t => format!(">={t:.1} ok"),
            Some(t) => format!(">={t:.1} MISS"),
            None => "-".into(),
        };
        println!(
            "{label:<48} {m:>7.2}x {:>17} {t:>10}",
            format!("{lo:.2}x..{hi:.2}x")
        );
    };
    let never = SyncPolicy::Never;
    let always = SyncPolicy::Always;
    let group = SyncPolicy::Group;
    for size in SIZES {
        row(
            format!("{size} B: never / raw buffered write"),
            &|n| journal_puts(never, size, 1, n),
            &|n| raw_buffered(size, n),
            (size == 1024).then_some(0.7),
        );
        row(
            format!("{size} B: always / raw write+fdatasync"),
            &|n| journal_puts(always, size, 1, n),
            &|n| raw_fdatasync(size, n),
            Some(0.9),
        );
        row(
            format!("{size} B: group 4 writers / always 4 writers"),
            &|n| journal_puts(group, size, 4, n),
            &|n| journal_puts(always, size, 4, n),
            Some(3.0),
        );
        row(
            format!("{size} B: group 4 writers / always 1 writer"),
            &|n| journal_puts(group, size, 4, n),
            &|n| journal_puts(always, size, 1, n),
            None,
        );
        row(
            format!("{size} B: never / yaque (both unsynced)"),
            &|n| journal_puts(never, size, 1, n),
            &|n| yaque_sends(size, n),
            Some(2.0),
        );
        row(
            format!("{size} B: never / queue-file unsynced"),
            &|n| journal_puts(never, size, 1, n),
            &|n| queue_file_adds(size, false, n),
            Some(2.0),
        );
        row(
            format!("{size} B: always / queue-file synced"),
            &|n| journal_puts(always, size, 1, n),
            &|n| queue_file_adds(size, true, n),
            Some(2.0),
        );
        row(
            format!("{size} B: get+commit / yaque recv+commit"),
            &|n| journal_get_commit(size, n),
            &|n| yaque_recv_commit(size, n),
            Some(2.0),
        );
        row(
            format!("{size} B: get+commit / queue-file peek+remove"),
            &|n| journal_get_commit(size, n),
            &|n| queue_file_peek_remove(size, n),
            Some(2.0),
        );
    }
}

fn main() {
    print_fdatasync_latency();
    let mut c = Criterion::default().configure_from_args();
    bench_puts(&mut c);
    bench_get_commit(&mut c);
    c.final_summary();
    print_table();
    print_ratios();
}
