//! Throughput from samples: the server reads each queue's count of finished jobs every few
//! seconds and turns the differences into rates over recent windows and a chart series.
//!
//! Only the store's monotonic counters are used (jobs that succeeded plus jobs that died, as
//! [`QueueStats::retries`] counts them), so pruning finished jobs does not look like negative
//! throughput. A counter that goes down (a store reopened with fresh counters) starts over:
//! only increases count.

use std::collections::{BTreeMap, VecDeque};

use fairq_core::job::Millis;
use fairq_worker::QueueStats;

/// One reading of a queue's counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Point {
    at: Millis,
    finished: u64,
}

/// Recent readings per queue.
#[derive(Debug)]
pub(crate) struct History {
    retention: Millis,
    queues: BTreeMap<String, VecDeque<Point>>,
    /// The number of the newest reading recorded (see [`History::record_reading`]).
    newest: u64,
}

/// Jobs finished by a queue so far, by its counters.
pub(crate) fn finished(stats: &QueueStats) -> u64 {
    stats.retries.ok.saturating_add(stats.retries.dead)
}

impl History {
    /// Keeps readings for `retention` milliseconds.
    pub(crate) fn new(retention: Millis) -> Self {
        History {
            retention,
            queues: BTreeMap::new(),
            newest: 0,
        }
    }

    /// Records reading number `reading` (numbered when it was started) at `at`, unless a
    /// later-started reading is already recorded: two readings of the store may overlap and
    /// finish out of order, and the older counts, recorded last, would look like counters
    /// starting over and count the jobs between them twice. Returns whether it was recorded.
    pub(crate) fn record_reading(
        &mut self,
        reading: u64,
        at: Millis,
        stats: &[QueueStats],
    ) -> bool {
        if reading <= self.newest {
            return false;
        }
        self.newest = reading;
        self.record(at, stats);
        true
    }

    /// Records every queue's counter at `at`. A reading at or before a queue's last one
    /// replaces it (two samples in the same instant are one).
    pub(crate) fn record(&mut self, at: Millis, stats: &[QueueStats]) {
        for queue in stats {
            let points = self.queues.entry(queue.queue.clone()).or_default();
            let point = Point {
                at,
                finished: finished(queue),
            };
            match points.back_mut() {
                Some(last) if last.at >= at => {
                    *last = Point {
                        at: last.at,
                        ..point
                    }
                }
                _ => points.push_back(point),
            }
        }
        let horizon = at.saturating_sub(self.retention);
        for points in self.queues.values_mut() {
            // Keep one reading at or before the horizon as the baseline of the oldest window.
            while points.len() > 1 && points[1].at <= horizon {
                points.pop_front();
            }
        }
        self.queues
            .retain(|_, p| p.back().is_some_and(|last| last.at >= horizon));
    }

    /// Jobs finished per second by `queue` over the `window` before `now`, or `None` without
    /// two readings in it.
    pub(crate) fn rate(&self, queue: &str, now: Millis, window: Millis) -> Option<f64> {
        let points = self.queues.get(queue)?;
        let start = now.saturating_sub(window);
        // The baseline: the last reading at or before the window's start, else the first.
        let first = points.iter().rposition(|p| p.at <= start).unwrap_or(0);
        let span = points.iter().skip(first);
        let base = *points.get(first)?;
        let last = *points.back()?;
        if last.at <= base.at {
            return None;
        }
        let done: u64 = span
            .clone()
            .zip(span.skip(1))
            .map(|(a, b)| b.finished.saturating_sub(a.finished))
            .sum();
        Some(done as f64 * 1_000.0 / (last.at - base.at) as f64)
    }

    /// Jobs finished per second by `queue` in each of `buckets` intervals of `bucket` ms
    /// ending at `now` (oldest first), as `(interval start, rate)`; `None` for intervals
    /// before the first reading.
    pub(crate) fn series(
        &self,
        queue: &str,
        now: Millis,
        bucket: Millis,
        buckets: usize,
    ) -> Vec<(Millis, Option<f64>)> {
        let bucket = bucket.max(1);
        let start = now.saturating_sub(bucket * buckets as Millis);
        let mut done = vec![None::<u64>; buckets];
        if let Some(points) = self.queues.get(queue) {
            for (a, b) in points.iter().zip(points.iter().skip(1)) {
                if b.at <= start || b.at > now {
                    continue;
                }
                let i = (((b.at - start - 1) / bucket) as usize).min(buckets - 1);
                *done[i].get_or_insert(0) += b.finished.saturating_sub(a.finished);
            }
            // Intervals after the first reading but without a new one finished nothing.
            if let Some(first) = points.front() {
                for (i, slot) in done.iter_mut().enumerate() {
                    let end = start + (i as Millis + 1) * bucket;
                    if slot.is_none() && end > first.at {
                        *slot = Some(0);
                    }
                }
            }
        }
        done.into_iter()
            .enumerate()
            .map(|(i, n)| {
                let at = start + i as Millis * bucket;
                (at, n.map(|n| n as f64 * 1_000.0 / bucket as f64))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairq_core::stats::RetryStats;

    fn stats(queue: &str, ok: u64, dead: u64) -> QueueStats {
        let mut s = QueueStats::empty(queue);
        s.retries = RetryStats {
            ok,
            dead,
            ..RetryStats::default()
        };
        s
    }

    #[test]
    fn rates_come_from_counter_increases_over_the_window() {
        let mut h = History::new(15 * 60_000);
        h.record(0, &[stats("q", 0, 0)]);
        h.record(10_000, &[stats("q", 90, 10)]);
        h.record(20_000, &[stats("q", 190, 10)]);
        assert_eq!(h.rate("q", 20_000, 60_000), Some(10.0));
        // The last 10 s only: 100 jobs.
        assert_eq!(h.rate("q", 20_000, 10_000), Some(10.0));
        assert_eq!(h.rate("other", 20_000, 10_000), None);
    }

    #[test]
    fn a_counter_reset_is_not_negative_throughput() {
        let mut h = History::new(60_000);
        h.record(0, &[stats("q", 100, 0)]);
        h.record(1_000, &[stats("q", 0, 0)]); // reopened with fresh counters
        h.record(2_000, &[stats("q", 4, 0)]);
        assert_eq!(h.rate("q", 2_000, 60_000), Some(2.0));
    }

    #[test]
    fn one_reading_is_no_rate_and_same_instant_readings_merge() {
        let mut h = History::new(60_000);
        h.record(5, &[stats("q", 1, 0)]);
        assert_eq!(h.rate("q", 5, 1_000), None);
        h.record(5, &[stats("q", 3, 0)]);
        h.record(1_005, &[stats("q", 4, 0)]);
        assert_eq!(h.rate("q", 1_005, 1_000), Some(1.0));
    }

    #[test]
    fn old_readings_are_forgotten_but_one_baseline_stays() {
        let mut h = History::new(1_000);
        for t in 0..10 {
            h.record(t * 500, &[stats("q", t * 5, 0)]);
        }
        let points = &h.queues["q"];
        assert!(points.len() <= 4, "{points:?}");
        assert_eq!(h.rate("q", 4_500, 1_000), Some(10.0));
    }

    #[test]
    fn series_buckets_increases_and_marks_time_before_the_first_reading() {
        let mut h = History::new(60_000);
        h.record(15_000, &[stats("q", 0, 0)]);
        h.record(25_000, &[stats("q", 50, 0)]);
        h.record(30_000, &[stats("q", 50, 0)]);
        let series = h.series("q", 30_000, 10_000, 3);
        assert_eq!(
            series,
            vec![(0, None), (10_000, Some(0.0)), (20_000, Some(5.0))]
        );
    }

    #[test]
    fn a_reading_that_finishes_after_a_later_one_counts_nothing_twice() {
        let mut h = History::new(600_000);
        assert!(h.record_reading(1, 0, &[stats("q", 0, 0)]));
        // Reading 3 started after reading 2 but finished first.
        assert!(h.record_reading(3, 10_000, &[stats("q", 110, 0)]));
        assert!(!h.record_reading(2, 10_001, &[stats("q", 100, 0)]));
        assert!(h.record_reading(4, 20_000, &[stats("q", 112, 0)]));
        // 112 jobs in 20 s; counting 100 -> 112 after 110 would make it 122.
        let rate = h.rate("q", 20_000, 20_000).expect("a rate");
        assert!((rate - 5.6).abs() < 1e-9, "{rate}");
    }
}
