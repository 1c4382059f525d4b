//! Instants a duration after another, for durations of any size.
//!
//! Leases, intervals and deadlines come from the caller, and `Duration::MAX` is a natural
//! way to say "never" or "wait as long as it takes". Adding such a duration to an `Instant`
//! panics (an `Instant` holds far less than `Duration::MAX`), so every instant the worker
//! computes from a configured duration goes through [`later`], which caps the duration at
//! [`FAR`]: about thirty years, as tokio does for its own far-off timers. A wait that long
//! never ends in practice, and the arithmetic on the result can no longer overflow either.

use std::time::Duration;

use tokio::time::Instant;

/// The longest wait the worker schedules: 30 years of 365 days.
pub(crate) const FAR: Duration = Duration::from_secs(30 * 365 * 86_400);

/// `at + after`, with `after` capped at [`FAR`].
pub(crate) fn later(at: Instant, after: Duration) -> Instant {
    at + after.min(FAR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_durations_are_added_exactly() {
        let now = Instant::now();
        assert_eq!(
            later(now, Duration::from_millis(1500)) - now,
            Duration::from_millis(1500)
        );
        assert_eq!(later(now, FAR) - now, FAR);
    }

    #[test]
    fn durations_past_what_an_instant_holds_are_capped() {
        let now = Instant::now();
        assert_eq!(later(now, Duration::MAX) - now, FAR);
        assert_eq!(later(now, Duration::from_secs(u64::MAX)) - now, FAR);
        // What the worker then does with such an instant stays in range as well.
        let far = later(now, Duration::MAX);
        assert!(later(far, Duration::from_secs(3_600)) > far);
    }
}
