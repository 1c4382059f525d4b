//! Job lifecycle sequences: every transition, every refusal, and a property test against a
//! small model.

use std::time::Duration;

use fairq_core::job::{DeadReason, LeaseToken, Lifecycle, Outcome, State, TransitionError};
use fairq_core::retry::RetryPolicy;
use proptest::prelude::*;

const LEASE: Duration = Duration::from_millis(1_000);

#[test]
fn happy_path() {
    let mut job = Lifecycle::scheduled(100);
    assert_eq!(
        job.claim(99, LEASE),
        Err(TransitionError::NotDue { run_at: 100 })
    );
    let lease = job.claim(100, LEASE).unwrap();
    assert_eq!(lease.attempt, 1);
    assert_eq!(lease.deadline, 1_100);
    assert_eq!(job.state(), &State::Running { lease });
    assert_eq!(job.heartbeat(lease.token, 900, LEASE), Ok(1_900));
    job.complete(lease.token, 1_000).unwrap();
    assert_eq!(job.state(), &State::Succeeded { at: 1_000 });
    assert!(job.state().is_final());
    assert_eq!(
        job.claim(2_000, LEASE),
        Err(TransitionError::NotClaimable { state: "succeeded" })
    );
}

#[test]
fn failures_follow_the_policy_then_the_job_dies() {
    let policy = RetryPolicy::new(2).with_delays([Duration::from_secs(1), Duration::from_secs(10)]);
    let mut job = Lifecycle::ready();
    let l1 = job.claim(0, LEASE).unwrap();
    assert_eq!(
        job.fail(l1.token, 5, &policy, 0),
        Ok(Outcome::Retry { run_at: 1_005 })
    );
    assert_eq!(job.state(), &State::Retrying { run_at: 1_005 });
    let l2 = job.claim(1_005, LEASE).unwrap();
    assert_eq!(l2.attempt, 2);
    assert_eq!(
        job.fail(l2.token, 2_000, &policy, 0),
        Ok(Outcome::Retry { run_at: 12_000 })
    );
    let l3 = job.claim(12_000, LEASE).unwrap();
    assert_eq!(
        job.fail(l3.token, 12_500, &policy, 0),
        Ok(Outcome::Dead {
            reason: DeadReason::RetriesExhausted
        })
    );
    assert_eq!(
        job.state(),
        &State::Dead {
            at: 12_500,
            reason: DeadReason::RetriesExhausted
        }
    );
    assert_eq!(job.attempts(), 3);
}

#[test]
fn rescue_counts_an_attempt_and_fences_the_old_worker() {
    let policy = RetryPolicy::new(1);
    let mut job = Lifecycle::ready();
    let old = job.claim(0, LEASE).unwrap();
    assert_eq!(
        job.rescue(999, &policy, 0),
        Err(TransitionError::LeaseNotExpired { deadline: 1_000 })
    );
    assert_eq!(
        job.rescue(1_000, &policy, 0),
        Ok(Outcome::Retry { run_at: 1_000 })
    );
    // The old worker's late messages are refused, before and after a new claim.
    let stale = TransitionError::StaleLease {
        presented: old.token,
        current: None,
    };
    assert_eq!(job.complete(old.token, 1_001), Err(stale));
    let new = job.claim(1_001, LEASE).unwrap();
    assert_eq!(new.attempt, 2);
    assert!(new.token > old.token);
    let stale = TransitionError::StaleLease {
        presented: old.token,
        current: Some(new.token),
    };
    assert_eq!(job.complete(old.token, 1_002), Err(stale));
    assert_eq!(job.heartbeat(old.token, 1_002, LEASE), Err(stale));
    assert_eq!(job.fail(old.token, 1_002, &policy, 0), Err(stale));
    // The second rescue exhausts the single retry.
    assert_eq!(
        job.rescue(2_001, &policy, 0),
        Ok(Outcome::Dead {
            reason: DeadReason::LeaseExpired
        })
    );
    assert_eq!(
        job.state(),
        &State::Dead {
            at: 2_001,
            reason: DeadReason::LeaseExpired
        }
    );
}

#[test]
fn a_completion_after_the_deadline_but_before_any_rescue_is_accepted() {
    let mut job = Lifecycle::ready();
    let lease = job.claim(0, LEASE).unwrap();
    job.complete(lease.token, 5_000).unwrap();
    assert_eq!(
        job.rescue(6_000, &RetryPolicy::new(1), 0),
        Err(TransitionError::NotRunning { state: "succeeded" })
    );
}

#[test]
fn dependencies_block_until_released() {
    let mut job = Lifecycle::blocked();
    assert!(!job.is_claimable(u64::MAX));
    assert_eq!(
        job.claim(0, LEASE),
        Err(TransitionError::NotClaimable { state: "blocked" })
    );
    job.dependency_succeeded(0, 0).unwrap();
    assert_eq!(
        job.dependency_succeeded(0, 0),
        Err(TransitionError::NotBlocked { state: "scheduled" })
    );
    assert!(job.claim(0, LEASE).is_ok());
}

#[test]
fn a_released_job_is_due_at_the_later_of_its_own_time_and_its_release() {
    // Delayed past its release: it keeps its delay.
    let mut job = Lifecycle::blocked();
    job.dependency_succeeded(3_600_000, 60_000).unwrap();
    assert_eq!(job.state(), &State::Scheduled { run_at: 3_600_000 });
    assert!(!job.is_claimable(60_000));
    assert!(job.is_claimable(3_600_000));
    // Due before its release: due from the release, never from 0.
    let mut job = Lifecycle::blocked();
    job.dependency_succeeded(1_000, 60_000).unwrap();
    assert_eq!(job.state(), &State::Scheduled { run_at: 60_000 });
}

#[test]
fn discard_and_revive() {
    let mut job = Lifecycle::ready();
    assert_eq!(
        job.revive(0),
        Err(TransitionError::NotDead { state: "scheduled" })
    );
    let lease = job.claim(0, LEASE).unwrap();
    job.discard(lease.token, 3).unwrap();
    assert_eq!(
        job.state(),
        &State::Dead {
            at: 3,
            reason: DeadReason::Discarded
        }
    );
    job.revive(10).unwrap();
    assert_eq!(job.state(), &State::Scheduled { run_at: 10 });
    let again = job.claim(10, LEASE).unwrap();
    assert_eq!(again.attempt, 1);
    assert!(again.token > lease.token);
}

#[test]
fn restore_round_trips_the_stored_parts() {
    let mut job = Lifecycle::ready();
    let lease = job.claim(0, LEASE).unwrap();
    let copy = Lifecycle::restore(*job.state(), job.attempts(), job.last_token());
    assert_eq!(copy, job);
    job.complete(lease.token, 1).unwrap();
}

#[derive(Debug, Clone)]
enum Event {
    Claim,
    CompleteCurrent,
    CompleteStale,
    FailCurrent,
    Heartbeat,
    Rescue,
    Advance(u64),
    Revive,
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    proptest::collection::vec(
        prop_oneof![
            Just(Event::Claim),
            Just(Event::CompleteCurrent),
            Just(Event::CompleteStale),
            Just(Event::FailCurrent),
            Just(Event::Heartbeat),
            Just(Event::Rescue),
            (0u64..3_000).prop_map(Event::Advance),
            Just(Event::Revive),
        ],
        0..60,
    )
}

proptest! {
    /// Invariants over random event sequences: tokens strictly increase per claim, attempts
    /// never exceed max_retries + 1 between revivals, stale tokens are always refused, a
    /// succeeded job never changes again.
    #[test]
    fn lifecycle_invariants(max in 0u32..4, events in events()) {
        let policy = RetryPolicy::new(max).with_delays([Duration::from_millis(500)]);
        let mut job = Lifecycle::ready();
        let mut now = 0u64;
        let mut tokens: Vec<LeaseToken> = Vec::new();
        let mut succeeded = false;
        for event in events {
            let before = job;
            match event {
                Event::Claim => {
                    if let Ok(lease) = job.claim(now, LEASE) {
                        prop_assert!(tokens.last().is_none_or(|t| lease.token > *t));
                        prop_assert_eq!(lease.attempt, job.attempts());
                        tokens.push(lease.token);
                    }
                }
                Event::CompleteCurrent => {
                    if let Some(t) = tokens.last() {
                        if job.complete(*t, now).is_ok() {
                            succeeded = true;
                        }
                    }
                }
                Event::CompleteStale => {
                    if tokens.len() >= 2 {
                        let stale = tokens[tokens.len() - 2];
                        let refused = job.complete(stale, now);
                        let is_stale = matches!(refused, Err(TransitionError::StaleLease { .. }));
                        prop_assert!(is_stale);
                        prop_assert_eq!(job, before);
                    }
                }
                Event::FailCurrent => {
                    if let Some(t) = tokens.last() {
                        let _ = job.fail(*t, now, &policy, 0);
                    }
                }
                Event::Heartbeat => {
                    if let Some(t) = tokens.last() {
                        let _ = job.heartbeat(*t, now, LEASE);
                    }
                }
                Event::Rescue => {
                    if job.rescue(now, &policy, 0).is_err() {
                        prop_assert_eq!(job, before);
                    }
                }
                Event::Advance(ms) => now += ms,
                Event::Revive => {
                    if job.revive(now).is_err() {
                        prop_assert_eq!(job, before);
                    }
                }
            }
            prop_assert!(job.attempts() <= max + 1);
            if succeeded {
                let still_succeeded = matches!(job.state(), State::Succeeded { .. });
                prop_assert!(still_succeeded);
            }
            if let State::Dead { .. } = job.state() {
                // Dead only after the budget is used, unless it was never claimed this life.
                prop_assert!(job.attempts() == max + 1);
            }
        }
    }
}
