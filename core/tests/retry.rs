//! Retry tables: the delay and verdict for each attempt under each kind of policy.

use std::time::Duration;

use fairq_core::retry::{Backoff, Decision, RetryPolicy};
use proptest::prelude::*;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn retry(after: Duration) -> Decision {
    Decision::Retry { after }
}

#[test]
fn zero_retries_never_retries() {
    let p = RetryPolicy::new(0);
    assert_eq!(p.decide(1), Decision::GiveUp);
    assert_eq!(p.decide(0), Decision::GiveUp);
}

#[test]
fn n_retries_means_n_plus_one_runs() {
    let p = RetryPolicy::new(4).with_delays([secs(1), secs(5)]);
    let table: Vec<Decision> = (1..=6).map(|attempt| p.decide(attempt)).collect();
    assert_eq!(
        table,
        [
            retry(secs(1)),
            retry(secs(5)),
            retry(secs(5)),
            retry(secs(5)),
            Decision::GiveUp,
            Decision::GiveUp
        ]
    );
}

#[test]
fn schedule_entry_n_minus_one_then_last_repeats() {
    let p = RetryPolicy::forever().with_delays([secs(1), secs(2), secs(3)]);
    let delays: Vec<Duration> = (1..=5).map(|a| p.delay(a)).collect();
    assert_eq!(delays, [secs(1), secs(2), secs(3), secs(3), secs(3)]);
}

#[test]
fn no_delays_means_retry_at_once() {
    let p = RetryPolicy::new(2).with_delays([]);
    assert_eq!(p.decide(1), retry(Duration::ZERO));
    assert_eq!(RetryPolicy::new(2).decide(2), retry(Duration::ZERO));
}

#[test]
fn forever_never_gives_up() {
    let p = RetryPolicy::forever();
    for attempt in [1, 2, 1_000, u32::MAX] {
        assert!(matches!(p.decide(attempt), Decision::Retry { .. }));
    }
    assert_eq!(p.retries_left(10), None);
}

#[test]
fn exponential_doubles_and_caps() {
    let p = RetryPolicy::new(100).with_exponential(Duration::from_millis(100), secs(5));
    let delays: Vec<u128> = (1..=8).map(|a| p.delay(a).as_millis()).collect();
    assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
    // Huge attempt numbers saturate at the cap instead of overflowing.
    assert_eq!(p.delay(u32::MAX), secs(5));
    let tripled = RetryPolicy::new(3).with_backoff(Backoff::Exponential {
        base: secs(1),
        factor: 3,
        cap: secs(100),
    });
    assert_eq!(tripled.delay(3), secs(9));
    // A growth past 32 bits reaches the cap however small the base.
    let tiny = RetryPolicy::forever().with_exponential(Duration::from_micros(1), secs(7200));
    assert_eq!(tiny.delay(34), secs(7200));
    assert_eq!(tiny.delay(u32::MAX), secs(7200));
    let quartic = RetryPolicy::forever().with_backoff(Backoff::Polynomial {
        unit: Duration::from_micros(1),
        exponent: 4,
        cap: secs(7 * 24 * 3600),
    });
    assert_eq!(quartic.delay(300), secs(8100));
    let zero = RetryPolicy::forever().with_exponential(Duration::ZERO, secs(5));
    assert_eq!(zero.delay(u32::MAX), Duration::ZERO);
}

#[test]
fn default_policy_follows_river_and_sidekiq() {
    let p = RetryPolicy::default();
    assert_eq!(p.max_retries(), Some(24));
    assert_eq!(p.delay(1), secs(1));
    assert_eq!(p.delay(2), secs(16));
    assert_eq!(p.delay(3), secs(81));
    assert_eq!(p.delay(24), secs(24u64.pow(4)));
    assert_eq!(p.decide(24), retry(secs(24u64.pow(4))));
    assert_eq!(p.decide(25), Decision::GiveUp);
    // Total time spent retrying: about three weeks.
    let total: u64 = (1..=24).map(|a| p.delay(a).as_secs()).sum();
    assert!((20 * 86_400..25 * 86_400).contains(&total), "total {total}");
    // 10 % jitter, which only shortens: from 90 % to 100 % of the delay.
    assert_eq!(p.jitter_permille(), 100);
    assert_eq!(
        p.decide_with_random(2, 0),
        retry(Duration::from_millis(14_400))
    );
    assert_eq!(p.decide_with_random(2, u64::MAX), retry(secs(16)));
}

#[test]
fn jitter_needs_the_random_number_and_gives_up_the_same() {
    let p = RetryPolicy::new(1)
        .with_delays([secs(10)])
        .with_jitter(1000);
    assert_eq!(p.decide(1), retry(secs(10)));
    assert_eq!(p.decide_with_random(1, 0), retry(Duration::ZERO));
    assert_eq!(p.decide_with_random(2, 0), Decision::GiveUp);
    assert_eq!(
        RetryPolicy::new(1).with_jitter(5_000).jitter_permille(),
        1000
    );
}

proptest! {
    #[test]
    fn jittered_delay_stays_within_its_band(
        base_ms in 0u64..10_000_000,
        permille in 0u16..=1000,
        random in any::<u64>(),
        attempt in 1u32..50,
    ) {
        let p = RetryPolicy::forever()
            .with_delays([Duration::from_millis(base_ms)])
            .with_jitter(permille);
        let Decision::Retry { after } = p.decide_with_random(attempt, random) else {
            panic!("forever gave up");
        };
        let full = Duration::from_millis(base_ms);
        let low = full - full * u32::from(permille) / 1000;
        prop_assert!(after <= full);
        prop_assert!(after + Duration::from_nanos(1) >= low);
    }

    #[test]
    fn retries_left_counts_down_to_give_up(max in 0u32..100, attempt in 1u32..200) {
        let p = RetryPolicy::new(max);
        let left = p.retries_left(attempt).unwrap();
        prop_assert_eq!(left, max.saturating_sub(attempt - 1));
        prop_assert_eq!(p.decide(attempt) == Decision::GiveUp, left == 0);
    }
}

#[test]
fn jitter_on_the_longest_delay_does_not_overflow() {
    let p = RetryPolicy::new(1)
        .with_backoff(Backoff::Fixed(Duration::MAX))
        .with_jitter(1000);
    for random in [0, 1, u64::MAX / 2, u64::MAX] {
        let Decision::Retry { after } = p.decide_with_random(1, random) else {
            panic!("one retry is allowed");
        };
        assert!(after <= Duration::MAX);
    }
    assert_eq!(
        p.decide_with_random(1, u64::MAX),
        Decision::Retry {
            after: Duration::MAX
        }
    );
}
