//! Latency histograms and retry counters, fixed-size and allocation-free.
//!
//! [`Histogram`] buckets values log-linearly: exact below 128, then 64 buckets per power of
//! two. A reported percentile is the midpoint of its bucket, so its relative error is at most
//! 1/128 (0.79 %) of the true value. Recording is a couple of bit operations and an
//! increment; histograms from many workers merge by adding buckets.
//!
//! ```
//! use fairq_core::stats::Histogram;
//!
//! let mut h = Histogram::new();
//! for micros in 1..=1000 {
//!     h.record(micros);
//! }
//! let p99 = h.p99();
//! assert!((p99 as f64 - 990.0).abs() / 990.0 <= 0.01);
//! assert_eq!(h.max(), 1000);
//! ```

use core::fmt;
use core::time::Duration;

/// Sub-buckets per power of two (2^6): sets the precision.
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Values below this are counted exactly.
const EXACT: u64 = 2 * SUB;
/// Buckets needed to cover all of `u64`.
const BUCKETS: usize = (EXACT + (63 - SUB_BITS as u64) * SUB) as usize;

/// Upper bound on the relative error of any reported percentile: 1/128.
///
/// ```
/// assert!(fairq_core::stats::MAX_RELATIVE_ERROR < 0.01);
/// ```
pub const MAX_RELATIVE_ERROR: f64 = 1.0 / (2 * SUB) as f64;

fn bucket_of(value: u64) -> usize {
    if value < EXACT {
        return value as usize;
    }
    let top = 63 - value.leading_zeros(); // >= SUB_BITS + 1
    let shift = top - SUB_BITS;
    let mantissa = value >> shift; // in [SUB, 2 SUB)
    (EXACT + u64::from(shift - 1) * SUB + (mantissa - SUB)) as usize
}

/// The smallest value of a bucket and its width.
fn bucket_range(index: usize) -> (u64, u64) {
    let index = index as u64;
    if index < EXACT {
        return (index, 1);
    }
    let shift = (index - EXACT) / SUB + 1;
    let mantissa = (index - EXACT) % SUB + SUB;
    (mantissa << shift, 1 << shift)
}

/// Parts of one a quantile is resolved to before its rank is taken: 12 decimal places, well
/// above the rounding of a decimal `q` in an `f64` (about 1e-17) and far finer than any
/// quantile anyone asks for.
const Q_SCALE: u64 = 1_000_000_000_000;

/// The 1-based nearest rank of quantile `q` among `count > 0` values: `ceil(q * count)`, at
/// least 1, with `q` clamped to `[0, 1]` (NaN counts as 0) and rounded to 1/[`Q_SCALE`].
///
/// Integer arithmetic after the rounding: in floating point `0.07 * 100.0` is
/// `7.000000000000001`, whose ceiling would be rank 8.
fn nearest_rank(q: f64, count: u64) -> u64 {
    let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
    // Round half up; at most Q_SCALE, as q is at most 1.
    let parts = (q * Q_SCALE as f64 + 0.5) as u64;
    let rank = (u128::from(parts) * u128::from(count)).div_ceil(u128::from(Q_SCALE));
    // At most `count`, so the conversion cannot fail.
    u64::try_from(rank).unwrap_or(count).clamp(1, count)
}

/// A log-bucketed histogram of `u64` values (for example microseconds).
///
/// ```
/// use fairq_core::stats::Histogram;
/// let mut a = Histogram::new();
/// let mut b = Histogram::new();
/// a.record(10);
/// b.record(30);
/// a.merge(&b);
/// assert_eq!((a.count(), a.min(), a.max()), (2, 10, 30));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: [u64; BUCKETS],
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Histogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count)
            .field("min", &self.min())
            .field("p50", &self.p50())
            .field("p99", &self.p99())
            .field("max", &self.max)
            .finish()
    }
}

impl Histogram {
    /// An empty histogram.
    ///
    /// ```
    /// assert_eq!(fairq_core::stats::Histogram::new().count(), 0);
    /// ```
    pub const fn new() -> Self {
        Histogram {
            counts: [0; BUCKETS],
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Records one value.
    ///
    /// ```
    /// let mut h = fairq_core::stats::Histogram::new();
    /// h.record(5);
    /// assert_eq!(h.p50(), 5);
    /// ```
    pub fn record(&mut self, value: u64) {
        self.record_n(value, 1);
    }

    /// Records `value` `n` times.
    ///
    /// ```
    /// let mut h = fairq_core::stats::Histogram::new();
    /// h.record_n(7, 3);
    /// assert_eq!(h.count(), 3);
    /// ```
    pub fn record_n(&mut self, value: u64, n: u64) {
        if n == 0 {
            return;
        }
        let bucket = &mut self.counts[bucket_of(value)];
        *bucket = bucket.saturating_add(n);
        self.count = self.count.saturating_add(n);
        self.sum = self.sum.saturating_add(u128::from(value) * u128::from(n));
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    /// Records a duration in microseconds.
    ///
    /// ```
    /// let mut h = fairq_core::stats::Histogram::new();
    /// h.record_duration(core::time::Duration::from_millis(2));
    /// assert_eq!(h.max(), 2_000);
    /// ```
    pub fn record_duration(&mut self, duration: Duration) {
        self.record(u64::try_from(duration.as_micros()).unwrap_or(u64::MAX));
    }

    /// Adds every value of `other` to this histogram.
    ///
    /// ```
    /// let mut a = fairq_core::stats::Histogram::new();
    /// let mut b = fairq_core::stats::Histogram::new();
    /// b.record(1);
    /// a.merge(&b);
    /// assert_eq!(a.count(), 1);
    /// ```
    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine = mine.saturating_add(*theirs);
        }
        self.count = self.count.saturating_add(other.count);
        self.sum = self.sum.saturating_add(other.sum);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Forgets every value.
    ///
    /// ```
    /// let mut h = fairq_core::stats::Histogram::new();
    /// h.record(1);
    /// h.clear();
    /// assert_eq!(h.count(), 0);
    /// ```
    pub fn clear(&mut self) {
        *self = Histogram::new();
    }

    /// Number of recorded values.
    ///
    /// ```
    /// assert_eq!(fairq_core::stats::Histogram::new().count(), 0);
    /// ```
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Smallest recorded value (exact), 0 when empty.
    ///
    /// ```
    /// assert_eq!(fairq_core::stats::Histogram::new().min(), 0);
    /// ```
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }

    /// Largest recorded value (exact), 0 when empty.
    ///
    /// ```
    /// let mut h = fairq_core::stats::Histogram::new();
    /// h.record(123_456_789);
    /// assert_eq!(h.max(), 123_456_789);
    /// ```
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Mean of the recorded values (exact up to integer division), 0 when empty.
    ///
    /// ```
    /// let mut h = fairq_core::stats::Histogram::new();
    /// h.record(1);
    /// h.record(4);
    /// assert_eq!(h.mean(), 2);
    /// ```
    pub fn mean(&self) -> u64 {
        if self.count == 0 {
            return 0;
        }
        u64::try_from(self.sum / u128::from(self.count)).unwrap_or(u64::MAX)
    }

    /// The value at quantile `q` (0.0 to 1.0), within [`MAX_RELATIVE_ERROR`]; 0 when empty.
    ///
    /// The value is the nearest-rank one: the `ceil(q * count)`-th smallest (at least the
    /// first). `q` is taken to 12 decimal places first, so a quantile written in decimal means
    /// what it says although `0.07` is not exact in binary.
    ///
    /// ```
    /// let mut h = fairq_core::stats::Histogram::new();
    /// (1..=100).for_each(|v| h.record(v));
    /// assert_eq!(h.quantile(0.5), 50);
    /// assert_eq!(h.quantile(0.07), 7);
    /// assert_eq!(h.quantile(1.0), 100);
    /// ```
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = nearest_rank(q, self.count);
        let mut seen = 0u64;
        for (index, &n) in self.counts.iter().enumerate() {
            seen = seen.saturating_add(n);
            if seen >= rank {
                let (low, width) = bucket_range(index);
                let mid = low.saturating_add((width - 1) / 2);
                return mid.clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// Median.
    ///
    /// ```
    /// let mut h = fairq_core::stats::Histogram::new();
    /// h.record(3);
    /// assert_eq!(h.p50(), 3);
    /// ```
    pub fn p50(&self) -> u64 {
        self.quantile(0.50)
    }

    /// 90th percentile.
    ///
    /// ```
    /// assert_eq!(fairq_core::stats::Histogram::new().p90(), 0);
    /// ```
    pub fn p90(&self) -> u64 {
        self.quantile(0.90)
    }

    /// 95th percentile.
    ///
    /// ```
    /// assert_eq!(fairq_core::stats::Histogram::new().p95(), 0);
    /// ```
    pub fn p95(&self) -> u64 {
        self.quantile(0.95)
    }

    /// 99th percentile.
    ///
    /// ```
    /// assert_eq!(fairq_core::stats::Histogram::new().p99(), 0);
    /// ```
    pub fn p99(&self) -> u64 {
        self.quantile(0.99)
    }

    /// The usual summary in one value.
    ///
    /// ```
    /// let mut h = fairq_core::stats::Histogram::new();
    /// h.record(8);
    /// let s = h.summary();
    /// assert_eq!((s.count, s.p50, s.max), (1, 8, 8));
    /// ```
    pub fn summary(&self) -> Summary {
        Summary {
            count: self.count,
            min: self.min(),
            mean: self.mean(),
            p50: self.p50(),
            p90: self.p90(),
            p95: self.p95(),
            p99: self.p99(),
            max: self.max,
        }
    }
}

/// Percentiles of a [`Histogram`], in the histogram's unit.
///
/// ```
/// let s = fairq_core::stats::Histogram::new().summary();
/// assert_eq!(s.count, 0);
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Number of values.
    pub count: u64,
    /// Smallest value.
    pub min: u64,
    /// Mean.
    pub mean: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 95th percentile.
    pub p95: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest value.
    pub max: u64,
}

/// How often jobs needed retries, per queue. Every count stops at `u64::MAX` rather than
/// wrapping, like [`Histogram`]'s.
///
/// ```
/// use fairq_core::stats::RetryStats;
/// let mut s = RetryStats::default();
/// s.succeeded(1); // first try
/// s.succeeded(3); // after two retries
/// s.died();
/// assert_eq!((s.ok, s.retries, s.dead), (2, 2, 1));
/// assert_eq!(s.retry_percentage(), 100.0);
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryStats {
    /// Jobs that succeeded.
    pub ok: u64,
    /// Retries run (attempts after the first) by the jobs recorded with
    /// [`succeeded`](Self::succeeded) or [`died_after`](Self::died_after). A death recorded
    /// with [`died`](Self::died) adds none, as that call does not know the attempt.
    pub retries: u64,
    /// Jobs that died.
    pub dead: u64,
    /// Failed attempts (each failure or rescue).
    pub failures: u64,
}

impl RetryStats {
    /// Records a job that succeeded on its `attempt`-th run.
    ///
    /// ```
    /// let mut s = fairq_core::stats::RetryStats::default();
    /// s.succeeded(2);
    /// assert_eq!(s.retries, 1);
    /// ```
    pub fn succeeded(&mut self, attempt: u32) {
        self.ok = self.ok.saturating_add(1);
        self.retries = self
            .retries
            .saturating_add(u64::from(attempt.saturating_sub(1)));
    }

    /// Records a failed attempt.
    ///
    /// ```
    /// let mut s = fairq_core::stats::RetryStats::default();
    /// s.failed();
    /// assert_eq!(s.failures, 1);
    /// ```
    pub fn failed(&mut self) {
        self.failures = self.failures.saturating_add(1);
    }

    /// Records a job that died, without its retries (see [`died_after`](Self::died_after)).
    ///
    /// ```
    /// let mut s = fairq_core::stats::RetryStats::default();
    /// s.died();
    /// assert_eq!((s.dead, s.retries), (1, 0));
    /// ```
    pub fn died(&mut self) {
        self.dead = self.dead.saturating_add(1);
    }

    /// Records a job that died on its `attempt`-th run, counting its retries as
    /// [`succeeded`](Self::succeeded) does.
    ///
    /// ```
    /// let mut s = fairq_core::stats::RetryStats::default();
    /// s.died_after(4); // gave up after three retries
    /// assert_eq!((s.dead, s.retries), (1, 3));
    /// ```
    pub fn died_after(&mut self, attempt: u32) {
        self.died();
        self.retries = self
            .retries
            .saturating_add(u64::from(attempt.saturating_sub(1)));
    }

    /// Retries per successful job, in percent (0 when nothing succeeded).
    ///
    /// ```
    /// assert_eq!(fairq_core::stats::RetryStats::default().retry_percentage(), 0.0);
    /// ```
    pub fn retry_percentage(&self) -> f64 {
        if self.ok == 0 {
            0.0
        } else {
            self.retries as f64 * 100.0 / self.ok as f64
        }
    }

    /// Adds another set of counters.
    ///
    /// ```
    /// let mut a = fairq_core::stats::RetryStats::default();
    /// let mut b = a;
    /// b.died();
    /// a.merge(&b);
    /// assert_eq!(a.dead, 1);
    /// ```
    pub fn merge(&mut self, other: &RetryStats) {
        self.ok = self.ok.saturating_add(other.ok);
        self.retries = self.retries.saturating_add(other.retries);
        self.dead = self.dead.saturating_add(other.dead);
        self.failures = self.failures.saturating_add(other.failures);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_round_trip_and_cover_u64() {
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        for index in 0..BUCKETS {
            let (low, width) = bucket_range(index);
            assert_eq!(bucket_of(low), index);
            assert_eq!(bucket_of(low + (width - 1)), index);
            if index + 1 < BUCKETS {
                assert_eq!(bucket_range(index + 1).0, low + width, "gap after {index}");
            }
        }
    }
}
