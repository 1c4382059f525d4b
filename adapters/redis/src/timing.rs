//! Run times: measured from the claim time the settle script returns, aggregated in the
//! client per queue, and added to the queue's histogram in Redis by one `timing` script call
//! per queue (`timing_flush.rs`) at most every
//! [`RedisOptions::timing_flush`](crate::RedisOptions::timing_flush) (and before this client
//! reads statistics).
//!
//! What this trades: a client that dies loses the run times it had not flushed yet (never the
//! jobs or their counts, which the scripts keep exactly); a flush whose connection breaks is
//! not repeated, so a run time is never counted twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use fairq_core::stats::{Histogram, Summary};

/// Run times of one queue not yet added to Redis.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Pending {
    count: u64,
    sum: u64,
    min: u64,
    max: u64,
    buckets: HashMap<u64, u64>,
}

impl Pending {
    fn record(&mut self, ms: u64) {
        if self.count == 0 {
            self.min = ms;
            self.max = ms;
        }
        self.count += 1;
        self.sum = self.sum.saturating_add(ms);
        self.min = self.min.min(ms);
        self.max = self.max.max(ms);
        *self.buckets.entry(bucket_low(ms)).or_insert(0) += 1;
    }

    fn args(&self) -> Vec<Vec<u8>> {
        let mut args = vec![
            self.count.to_string().into_bytes(),
            self.sum.to_string().into_bytes(),
            self.min.to_string().into_bytes(),
            self.max.to_string().into_bytes(),
        ];
        for (low, n) in &self.buckets {
            args.push(low.to_string().into_bytes());
            args.push(n.to_string().into_bytes());
        }
        args
    }
}

/// The client's pending run times and when they were last flushed.
pub(crate) struct Timing {
    pending: Mutex<HashMap<Arc<str>, Pending>>,
    flushed: Mutex<Instant>,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            pending: Mutex::new(HashMap::new()),
            flushed: Mutex::new(Instant::now()),
        }
    }
}

impl Timing {
    pub(crate) fn record(&self, queue: &Arc<str>, ms: u64) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.entry(Arc::clone(queue)).or_default().record(ms);
        }
    }

    fn take(&self) -> HashMap<Arc<str>, Pending> {
        if let Ok(mut flushed) = self.flushed.lock() {
            *flushed = Instant::now();
        }
        self.pending
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default()
    }

    /// True when the pending times are older than `every` (and marks them as being flushed).
    pub(crate) fn due(&self, every: std::time::Duration) -> bool {
        let Ok(mut flushed) = self.flushed.lock() else {
            return false;
        };
        if flushed.elapsed() < every {
            return false;
        }
        *flushed = Instant::now();
        true
    }

    pub(crate) fn clear(&self) {
        self.take();
    }

    /// The pending times as `timing` script calls (queue base, arguments), emptying them.
    pub(crate) fn drain(&self) -> Vec<(Arc<str>, Vec<Vec<u8>>)> {
        self.take()
            .into_iter()
            .map(|(queue, pending)| (queue, pending.args()))
            .collect()
    }
}

/// The lowest value of `value`'s bucket (the bucketing of fairq-core's `Histogram`: exact
/// below 128, then 64 buckets per power of two).
pub(crate) fn bucket_low(value: u64) -> u64 {
    if value < 128 {
        return value;
    }
    let shift = 63 - value.leading_zeros() - 6;
    (value >> shift) << shift
}

/// Run-time percentiles from the stored buckets and exact totals: the buckets are replayed
/// into a core `Histogram` (one sample of the min and of the max bucket at the exact value,
/// so the histogram's clamping matches one that saw every value).
pub(crate) fn summary(hist: &HashMap<u64, u64>, pstat: &HashMap<String, u64>) -> Summary {
    let get = |k: &str| pstat.get(k).copied().unwrap_or(0);
    let count = get("count");
    if count == 0 {
        return Summary::default();
    }
    let (min, max) = (get("min"), get("max"));
    let mut histogram = Histogram::new();
    if min == max {
        histogram.record_n(min, count);
    } else {
        for (&low, &n) in hist {
            let mut n = n;
            for exact in [min, max] {
                if n > 0 && bucket_low(exact) == low {
                    histogram.record(exact);
                    n -= 1;
                }
            }
            // The rest of the min's bucket lies at or above the min: recorded at the min (same
            // bucket), not at the bucket's low end, which would lower the summary's minimum.
            histogram.record_n(low.max(min), n);
        }
    }
    Summary {
        mean: get("sum") / count,
        ..histogram.summary()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_replay_into_the_same_summary() {
        let values = [
            1_000u64, 1_000, 1_001, 5, 127, 128, 0, 65_535, 2_000_000, 2_000_001,
        ];
        let mut reference = Histogram::new();
        let mut pending = Pending::default();
        for &v in &values {
            reference.record(v);
            pending.record(v);
            let pstat = HashMap::from([
                ("count".to_string(), pending.count),
                ("sum".to_string(), pending.sum),
                ("min".to_string(), pending.min),
                ("max".to_string(), pending.max),
            ]);
            assert_eq!(
                summary(&pending.buckets, &pstat),
                reference.summary(),
                "after {v}"
            );
        }
    }

    /// Found by the shared differential test: two runs of 255 ms and one of 256 ms; the
    /// second 255 was replayed at its bucket's low end (254) and became the minimum.
    #[test]
    fn the_rest_of_the_minimums_bucket_does_not_lower_the_minimum() {
        let mut reference = Histogram::new();
        let mut pending = Pending::default();
        for v in [255u64, 255, 256] {
            reference.record(v);
            pending.record(v);
        }
        let pstat = HashMap::from([
            ("count".to_string(), pending.count),
            ("sum".to_string(), pending.sum),
            ("min".to_string(), pending.min),
            ("max".to_string(), pending.max),
        ]);
        assert_eq!(summary(&pending.buckets, &pstat), reference.summary());
    }

    #[test]
    fn bucket_low_is_within_one_part_in_64() {
        for v in [128u64, 200, 4_095, 1 << 40, u64::MAX] {
            let low = bucket_low(v);
            assert!(low <= v && v - low <= v / 64, "{v} -> {low}");
        }
    }

    #[test]
    fn timing_is_due_once_per_period() {
        let timing = Timing::default();
        assert!(!timing.due(std::time::Duration::from_secs(60)));
        assert!(timing.due(std::time::Duration::ZERO));
    }
}
