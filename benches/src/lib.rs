//! Shared helpers for the fairq benchmarks: a small in-process timer for the ratio tables
//! that every benchmark prints next to criterion's own statistics, and the idle
//! enqueue-to-start latency measured the same way for every store.
#![deny(missing_docs)]

pub mod async_cases;
mod latency;
mod pin;

use std::time::Instant;

pub use latency::{idle_latency, latency_line};
pub use pin::{two_cpus, Pinned};

/// CPU time consumed so far by the calling thread, in nanoseconds.
///
/// On a shared machine a wall-clock sample also counts the time the thread spent waiting for
/// a core while other processes ran; the thread's CPU time counts only the time it ran, so
/// it is the fairer clock for single-threaded comparisons taken under load. (It still
/// includes the cost of caches that other processes emptied.)
///
/// ```
/// let before = fairq_benches::thread_cpu_ns();
/// let mut x = 0u64;
/// for i in 0..1_000_000u64 {
///     x = std::hint::black_box(x.wrapping_add(i));
/// }
/// assert!(fairq_benches::thread_cpu_ns() > before);
/// ```
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Runs `op` `ops` times per sample, `samples` times after a warm-up, and returns the median
/// time per operation in nanoseconds.
///
/// ```
/// let ns = fairq_benches::time_per_op(3, 1_000, |i| {
///     std::hint::black_box(i * 2);
/// });
/// assert!(ns < 1_000_000.0);
/// ```
pub fn time_per_op(samples: usize, ops: u64, mut op: impl FnMut(u64)) -> f64 {
    for i in 0..ops.min(10_000) {
        op(i);
    }
    let mut times: Vec<f64> = (0..samples.max(1))
        .map(|_| {
            let start = Instant::now();
            for i in 0..ops {
                op(i);
            }
            start.elapsed().as_nanos() as f64 / ops.max(1) as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// The 1, 5 and 15 minute load averages as the kernel reports them (`/proc/loadavg`), to
/// print next to timings taken on a shared machine; "unknown" where there is no such file.
///
/// ```
/// assert!(!fairq_benches::load_average().is_empty());
/// ```
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// A row of a ratio table: a label, our time, the baseline's time.
#[derive(Debug, Clone)]
pub struct Ratio {
    /// What was measured.
    pub label: String,
    /// Our time per operation, in nanoseconds.
    pub ours: f64,
    /// The baseline's or peer's time per operation, in nanoseconds.
    pub baseline: f64,
    /// The target ratio (ours / baseline) the benchmark aims for, if any.
    pub target: Option<f64>,
}

impl Ratio {
    /// ours / baseline.
    ///
    /// ```
    /// let r = fairq_benches::Ratio {
    ///     label: "x".into(),
    ///     ours: 30.0,
    ///     baseline: 10.0,
    ///     target: Some(3.0),
    /// };
    /// assert_eq!(r.ratio(), 3.0);
    /// ```
    pub fn ratio(&self) -> f64 {
        self.ours / self.baseline.max(1e-12)
    }
}

/// Prints a ratio table to stdout (ours, baseline, ratio, target and whether it was met).
///
/// ```
/// fairq_benches::print_ratio_table("demo", "VecDeque", &[]);
/// ```
pub fn print_ratio_table(title: &str, baseline_name: &str, rows: &[Ratio]) {
    println!();
    println!("== {title} ==");
    println!(
        "{:<34} {:>12} {:>12} {:>8} {:>10}",
        "case", "fairq", baseline_name, "ratio", "target"
    );
    for row in rows {
        let target = match row.target {
            Some(t) if row.ratio() <= t => format!("<={t:.1} ok"),
            Some(t) => format!("<={t:.1} MISS"),
            None => "-".to_string(),
        };
        println!(
            "{:<34} {:>12} {:>12} {:>7.2}x {:>10}",
            row.label,
            format!("{:.1} ns", row.ours),
            format!("{:.1} ns", row.baseline),
            row.ratio(),
            target
        );
    }
}
