//! Core's verdict against a literal reading of the rule, and the lifecycle applying it.

use std::time::Duration;

use fairq_core::job::{
    verdict, DeadReason, Lease, LeaseToken, Lifecycle, Outcome, Setback, State, TransitionError,
    MAX_MILLIS,
};
use fairq_core::retry::{Backoff, Decision, RetryPolicy};
use proptest::prelude::*;

fn policy() -> impl Strategy<Value = RetryPolicy> {
    let backoff = prop_oneof![
        Just(Backoff::Immediate),
        (0u64..u64::MAX).prop_map(|ms| Backoff::Fixed(Duration::from_millis(ms))),
        prop::collection::vec(0u64..10_000_000, 1..4)
            .prop_map(|v| Backoff::Schedule(v.into_iter().map(Duration::from_millis).collect())),
        (1u64..100_000, 1u32..10, 0u64..u64::MAX).prop_map(|(base, factor, cap)| {
            Backoff::Exponential {
                base: Duration::from_millis(base),
                factor,
                cap: Duration::from_millis(cap),
            }
        }),
    ];
    (prop::option::of(0u32..30), backoff, 0u16..=1000).prop_map(|(max, backoff, jitter)| {
        let p = match max {
            Some(n) => RetryPolicy::new(n),
            None => RetryPolicy::forever(),
        };
        p.with_backoff(backoff).with_jitter(jitter)
    })
}

fn setback() -> impl Strategy<Value = Setback> {
    prop_oneof![
        Just(Setback::Failed),
        Just(Setback::Permanent),
        Just(Setback::LeaseExpired)
    ]
}

proptest! {
    /// The verdict is the policy's decision, read literally: permanent failures die as
    /// discarded; otherwise a retry at `now + after` (never past MAX_MILLIS) or death with the
    /// setback's reason.
    #[test]
    fn verdict_is_the_policy_read_literally(
        p in policy(),
        attempt in 1u32..40,
        s in setback(),
        now in 0u64..=MAX_MILLIS,
        random in any::<u64>(),
    ) {
        let expected = match (s, p.decide_with_random(attempt, random)) {
            (Setback::Permanent, _) => Outcome::Dead { reason: DeadReason::Discarded },
            (_, Decision::GiveUp) => Outcome::Dead {
                reason: if s == Setback::Failed {
                    DeadReason::RetriesExhausted
                } else {
                    DeadReason::LeaseExpired
                },
            },
            (_, Decision::Retry { after }) => {
                let ms = u128::from(now) + after.as_millis();
                Outcome::Retry { run_at: ms.min(u128::from(MAX_MILLIS)) as u64 }
            }
        };
        prop_assert_eq!(verdict(&p, attempt, s, now, random), expected);
    }

    /// Every lifecycle transition that ends an attempt applies exactly the verdict.
    #[test]
    fn lifecycle_applies_the_verdict(
        p in policy(),
        attempt in 1u32..40,
        s in setback(),
        now in 0u64..MAX_MILLIS,
        random in any::<u64>(),
    ) {
        let lease = Lease { token: LeaseToken(7), deadline: now, attempt };
        let expected = verdict(&p, attempt, s, now, random);
        let mut job = Lifecycle::running(lease);
        let got = match s {
            Setback::LeaseExpired => job.rescue(now, &p, random),
            _ => job.setback(lease.token, s, now, &p, random),
        };
        prop_assert_eq!(got, Ok(expected));
        prop_assert_eq!(*job.state(), expected.state(now));
        // The attempt counter and the spent token survive the verdict.
        prop_assert_eq!((job.attempts(), job.last_token()), (attempt, 7));
    }
}

#[test]
fn a_released_job_is_due_again_without_losing_an_attempt() {
    let policy = RetryPolicy::new(1);
    let mut job = Lifecycle::ready();
    let first = job.claim(0, Duration::from_secs(30)).unwrap();
    job.fail(first.token, 10, &policy, 0).unwrap();
    let second = job.claim(10, Duration::from_secs(30)).unwrap();
    assert_eq!(second.attempt, 2);
    job.release(second.token, 20).unwrap();
    // Still a retry (one attempt behind it), due now, and the next claim is attempt 2 again.
    assert_eq!(job.state(), &State::Retrying { run_at: 20 });
    assert_eq!(job.attempts(), 1);
    let third = job.claim(20, Duration::from_secs(30)).unwrap();
    assert_eq!(third.attempt, 2);
    // The released lease is fenced.
    assert!(matches!(
        job.complete(second.token, 21),
        Err(TransitionError::StaleLease { .. })
    ));
    job.complete(third.token, 22).unwrap();
}

#[test]
fn release_needs_the_current_lease() {
    let mut job = Lifecycle::ready();
    assert!(matches!(
        job.release(LeaseToken(1), 0),
        Err(TransitionError::NotRunning { .. })
    ));
    let lease = job.claim(0, Duration::from_secs(1)).unwrap();
    assert!(job.release(LeaseToken(lease.token.0 + 1), 0).is_err());
    assert_eq!(job.attempts(), 1);
}
