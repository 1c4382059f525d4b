//! Per-queue counters that outlive the jobs they count: retry counters and the run-time
//! histogram, persisted so that stats survive a restart.

use std::collections::BTreeMap;

use fairq_core::job::Millis;
use fairq_core::stats::{Histogram, RetryStats, Summary};
use serde::{Deserialize, Serialize};

/// The lowest value of `value`'s histogram bucket: exact below 128, then 64 buckets per power
/// of two, the bucketing of [`Histogram`]. Replaying each bucket's values at its lowest value
/// lands them in the same bucket.
fn bucket_low(value: u64) -> u64 {
    if value < 128 {
        return value;
    }
    let shift = 63 - value.leading_zeros() - 6;
    (value >> shift) << shift
}

/// One queue's persisted counters, and whether it is paused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct QueueTotals {
    /// The store's retry counters of the queue.
    pub(crate) retries: RetryStats,
    /// Claim-to-finish times (ms): bucket low value → count.
    buckets: BTreeMap<u64, u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
    /// The queue hands out no job until it is resumed (frames of version 4 on).
    pub(crate) paused: bool,
}

/// A queue's counters as frames before version 4 hold them: without the pause flag.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct QueueTotalsV3 {
    retries: RetryStats,
    buckets: BTreeMap<u64, u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl From<QueueTotalsV3> for QueueTotals {
    fn from(old: QueueTotalsV3) -> Self {
        QueueTotals {
            retries: old.retries,
            buckets: old.buckets,
            count: old.count,
            sum: old.sum,
            min: old.min,
            max: old.max,
            paused: false,
        }
    }
}

impl QueueTotals {
    /// Counts one finished attempt that ran `elapsed` milliseconds.
    pub(crate) fn record(&mut self, elapsed: Millis) {
        *self.buckets.entry(bucket_low(elapsed)).or_default() += 1;
        self.min = if self.count == 0 {
            elapsed
        } else {
            self.min.min(elapsed)
        };
        self.max = self.max.max(elapsed);
        self.count += 1;
        self.sum += u128::from(elapsed);
    }

    /// The run-time summary, equal to that of a [`Histogram`] that saw every value: the
    /// buckets are replayed into one, with the exact minimum and maximum recorded at their
    /// values so its clamping matches, and the exact mean.
    pub(crate) fn summary(&self) -> Summary {
        if self.count == 0 {
            return Summary::default();
        }
        let mut histogram = Histogram::new();
        for (&low, &n) in &self.buckets {
            let mut n = n;
            if n > 0 && bucket_low(self.max) == low {
                histogram.record(self.max);
                n -= 1;
            }
            // Any value of the bucket lands in it; none may fall below the minimum.
            histogram.record_n(low.max(self.min), n);
        }
        let mean = u64::try_from(self.sum / u128::from(self.count)).unwrap_or(u64::MAX);
        Summary {
            mean,
            ..histogram.summary()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn summary_equals_a_histogram_of_every_value(values in prop::collection::vec(prop_oneof![0u64..300, 0u64..5_000_000, any::<u64>().prop_map(|v| v >> 20)], 1..200)) {
            let mut totals = QueueTotals::default();
            let mut reference = Histogram::new();
            for v in &values {
                totals.record(*v);
                reference.record(*v);
            }
            prop_assert_eq!(totals.summary(), reference.summary());
        }
    }

    #[test]
    fn empty_totals_summarise_to_zero() {
        assert_eq!(QueueTotals::default().summary(), Summary::default());
    }

    #[test]
    fn bucket_low_stays_in_the_bucket() {
        for v in [0u64, 127, 128, 129, 255, 256, 1000, 123_456, u64::MAX] {
            let low = bucket_low(v);
            assert!(low <= v);
            assert_eq!(bucket_low(low), low);
        }
    }
}
