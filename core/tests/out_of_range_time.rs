//! A `now` past `MAX_MILLIS` (which `check_time` refuses, but core is handed anyway): every
//! time computed from it is still at or after it, so nothing expires or falls due at birth.

use std::time::Duration;

use fairq_core::job::{
    check_time, clamp_after, verdict, Lifecycle, Outcome, Setback, TransitionError, MAX_MILLIS,
};
use fairq_core::retry::RetryPolicy;
use fairq_core::sweep::RetrySweep;

const LATE: u64 = MAX_MILLIS + 1_000;

#[test]
fn a_lease_granted_past_max_millis_lasts_its_length() {
    assert!(check_time(LATE).is_err());
    let mut job = Lifecycle::scheduled(0);
    let lease = job.claim(LATE, Duration::from_secs(30)).unwrap();
    assert_eq!(lease.deadline, LATE + 30_000);
    assert_eq!(
        job.rescue(LATE, &RetryPolicy::new(3), 0),
        Err(TransitionError::LeaseNotExpired {
            deadline: LATE + 30_000
        })
    );
    assert_eq!(
        job.heartbeat(lease.token, LATE + 10_000, Duration::from_secs(30)),
        Ok(LATE + 40_000)
    );
}

#[test]
fn a_retry_or_a_sweep_hold_past_max_millis_is_not_in_the_past() {
    let policy = RetryPolicy::new(3).with_delays([Duration::from_secs(5)]);
    assert_eq!(
        verdict(&policy, 1, Setback::Failed, LATE, 0),
        Outcome::Retry {
            run_at: LATE + 5_000
        }
    );
    let mut sweep = RetrySweep::new(Duration::from_millis(100));
    assert_eq!(sweep.retried(false, LATE), Some(LATE + 100));
}

#[test]
fn clamp_after_keeps_in_range_times_in_range_and_never_goes_back() {
    for now in [0, 1_000, MAX_MILLIS - 1, MAX_MILLIS] {
        assert_eq!(clamp_after(now, Duration::MAX), MAX_MILLIS);
        let after = clamp_after(now, Duration::from_secs(1));
        assert!(after >= now && after <= MAX_MILLIS, "{now} -> {after}");
    }
    for now in [MAX_MILLIS + 1, LATE, u64::MAX] {
        for after in [Duration::ZERO, Duration::from_millis(1), Duration::MAX] {
            assert!(clamp_after(now, after) >= now, "{now} + {after:?}");
        }
    }
}
