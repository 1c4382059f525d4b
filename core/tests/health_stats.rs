//! Health verdicts, the sweep breaker and histogram accuracy.

use std::time::Duration;

use fairq_core::health::{ErrorClock, Health, HealthPolicy, SweepBreaker};
use fairq_core::stats::{Histogram, RetryStats, MAX_RELATIVE_ERROR};
use proptest::prelude::*;

const MIN: u64 = 60_000;

#[test]
fn default_allowed_error_time_is_fifteen_minutes() {
    let p = HealthPolicy::default().with_startup_grace(Duration::ZERO);
    assert_eq!(p.evaluate(0, None, 100 * MIN), Health::Healthy);
    assert_eq!(
        p.evaluate(0, Some(10 * MIN), 24 * MIN),
        Health::Degraded { since: 10 * MIN }
    );
    assert_eq!(
        p.evaluate(0, Some(10 * MIN), 25 * MIN),
        Health::Unhealthy { since: 10 * MIN }
    );
}

#[test]
fn startup_grace_keeps_a_new_process_healthy() {
    let p = HealthPolicy::default().with_allowed_error_time(Duration::ZERO);
    let started = 1_000 * MIN;
    assert!(p.evaluate(started, Some(0), started + 9 * MIN).is_healthy());
    assert!(!p
        .evaluate(started, Some(0), started + 10 * MIN)
        .is_healthy());
}

#[test]
fn error_clock_remembers_the_start_of_the_run() {
    let p = HealthPolicy::default().with_startup_grace(Duration::ZERO);
    let mut clock = ErrorClock::default();
    clock.failure(MIN);
    clock.failure(5 * MIN);
    assert_eq!(
        p.evaluate(0, clock.since(), 16 * MIN),
        Health::Unhealthy { since: MIN }
    );
    clock.success();
    assert_eq!(p.evaluate(0, clock.since(), 16 * MIN), Health::Healthy);
}

#[test]
fn error_clock_keeps_the_earliest_failure_whatever_the_order() {
    let p = HealthPolicy::default().with_startup_grace(Duration::ZERO);
    let mut clock = ErrorClock::default();
    // Two settle batches in flight: the later failure is reported first.
    clock.failure(20 * MIN);
    clock.failure(10 * MIN);
    clock.failure(15 * MIN);
    assert_eq!(clock.since(), Some(10 * MIN));
    assert_eq!(
        p.evaluate(0, clock.since(), 25 * MIN),
        Health::Unhealthy { since: 10 * MIN }
    );
    // A success carries no time: it ends the run, and the next run starts afresh.
    clock.success();
    assert_eq!(clock.since(), None);
    clock.failure(30 * MIN);
    assert_eq!(clock.since(), Some(30 * MIN));
}

#[test]
fn breaker_stops_the_sweep_at_the_first_failure() {
    let outcomes = [true, false, true, true];
    let mut breaker = SweepBreaker::new();
    let mut tried = Vec::new();
    for (i, ok) in outcomes.iter().enumerate() {
        if !breaker.allows() {
            break;
        }
        tried.push(i);
        breaker.record(*ok);
    }
    assert_eq!(tried, [0, 1]);
    assert!(breaker.tripped());
    assert_eq!(breaker.attempted(), 2);
}

#[test]
fn retry_stats_count_retries_of_finished_jobs() {
    let mut s = RetryStats::default();
    for attempt in [1, 1, 2, 4] {
        s.succeeded(attempt);
    }
    s.failed();
    s.died();
    assert_eq!((s.ok, s.retries, s.dead, s.failures), (4, 4, 1, 1));
    assert_eq!(s.retry_percentage(), 100.0);
}

#[test]
fn retry_stats_count_the_retries_of_dead_jobs_given_their_attempt() {
    let mut s = RetryStats::default();
    s.succeeded(2);
    s.died_after(5);
    s.died_after(1);
    s.died();
    assert_eq!((s.ok, s.retries, s.dead, s.failures), (1, 5, 3, 0));
    let mut full = RetryStats {
        retries: u64::MAX,
        ..RetryStats::default()
    };
    full.died_after(u32::MAX);
    assert_eq!((full.dead, full.retries), (1, u64::MAX));
}

#[test]
fn retry_stats_stop_at_the_largest_count() {
    let full = RetryStats {
        ok: u64::MAX,
        retries: u64::MAX,
        dead: u64::MAX,
        failures: u64::MAX,
    };
    let mut merged = full;
    merged.merge(&RetryStats {
        ok: 1,
        retries: 2,
        dead: 3,
        failures: 4,
    });
    assert_eq!(merged, full);

    let mut s = full;
    s.succeeded(u32::MAX);
    s.failed();
    s.died();
    assert_eq!(s, full);

    let mut s = RetryStats {
        retries: u64::MAX - 1,
        ..RetryStats::default()
    };
    s.succeeded(4);
    assert_eq!((s.ok, s.retries), (1, u64::MAX));
}

#[test]
fn every_percentile_of_one_to_a_hundred_is_its_own_rank() {
    let mut h = Histogram::new();
    (1..=100).for_each(|v| h.record(v));
    for k in 0..=100u64 {
        let q = k as f64 / 100.0;
        assert_eq!(h.quantile(q), k.max(1), "q = {q}");
    }
    // The ones a floating-point ceiling got one rank too high.
    for (q, want) in [(0.07, 7), (0.14, 14), (0.28, 28), (0.55, 55), (0.56, 56)] {
        assert_eq!(h.quantile(q), want, "q = {q}");
    }
}

/// The nearest-rank value for the quantile `numerator / 10^digits`, in integers.
fn nearest_rank_value(sorted: &[u64], numerator: u64, digits: u32) -> u64 {
    let len = sorted.len() as u64;
    let rank = (numerator * len).div_ceil(10u64.pow(digits)).clamp(1, len);
    sorted[rank as usize - 1]
}

fn exact_quantile(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

proptest! {
    /// Every reported quantile is within 1/128 of the exact order statistic.
    #[test]
    fn quantiles_are_within_the_documented_error(
        values in proptest::collection::vec(
            prop_oneof![0u64..200, 0u64..100_000, any::<u64>()], 1..500),
        q in 0.0f64..=1.0,
    ) {
        let mut h = Histogram::new();
        for v in &values {
            h.record(*v);
        }
        let mut sorted = values.clone();
        sorted.sort_unstable();
        let exact = exact_quantile(&sorted, q) as f64;
        let got = h.quantile(q) as f64;
        prop_assert!((got - exact).abs() <= exact * MAX_RELATIVE_ERROR,
            "q={} exact={} got={}", q, exact, got);
        prop_assert_eq!(h.max(), *sorted.last().unwrap());
        prop_assert_eq!(h.min(), sorted[0]);
        prop_assert_eq!(h.count(), values.len() as u64);
    }

    /// A quantile written with up to six decimals picks exactly the nearest rank (values
    /// below 128 are kept exactly, so the answer is the exact order statistic).
    #[test]
    fn a_decimal_quantile_is_the_exact_nearest_rank(
        values in proptest::collection::vec(0u64..128, 1..2_000),
        (digits, numerator) in (1u32..=6).prop_flat_map(|d| (Just(d), 0..=10u64.pow(d))),
    ) {
        let mut h = Histogram::new();
        for v in &values {
            h.record(*v);
        }
        let mut sorted = values.clone();
        sorted.sort_unstable();
        let q = numerator as f64 / 10f64.powi(digits as i32);
        prop_assert_eq!(h.quantile(q), nearest_rank_value(&sorted, numerator, digits),
            "q = {}, {} values", q, values.len());
    }

    /// Merging two histograms equals recording everything into one.
    #[test]
    fn merge_is_recording_both(a in proptest::collection::vec(any::<u64>(), 0..100),
                               b in proptest::collection::vec(any::<u64>(), 0..100)) {
        let mut ha = Histogram::new();
        let mut hb = Histogram::new();
        let mut all = Histogram::new();
        a.iter().for_each(|v| { ha.record(*v); all.record(*v); });
        b.iter().for_each(|v| { hb.record(*v); all.record(*v); });
        ha.merge(&hb);
        prop_assert_eq!(ha, all);
    }
}

#[test]
fn percentiles_of_a_uniform_range() {
    let mut h = Histogram::new();
    for v in 1..=100_000u64 {
        h.record(v);
    }
    let s = h.summary();
    for (got, want) in [
        (s.p50, 50_000.0),
        (s.p90, 90_000.0),
        (s.p95, 95_000.0),
        (s.p99, 99_000.0),
    ] {
        assert!(
            (got as f64 - want).abs() / want <= MAX_RELATIVE_ERROR,
            "{got} vs {want}"
        );
    }
    assert_eq!(s.max, 100_000);
    assert_eq!(s.min, 1);
    assert_eq!(s.mean, 50_000);
    const { assert!(MAX_RELATIVE_ERROR <= 0.01) };
}
