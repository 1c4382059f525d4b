//! Time as fairq counts it: whole milliseconds, and the range every store can hold.
//!
//! Every time in fairq is a [`Millis`] since an epoch the caller picks (the stores use the Unix
//! epoch). The range is capped at [`MAX_MILLIS`], the last millisecond of the year 9999: that
//! is what calendars and formatters print, what a Lua number (a double, exact to 2^53) and a
//! SQL `bigint` hold exactly, and far beyond any real schedule. Stores refuse a job scheduled
//! later ([`check_time`]) and clamp computed times ([`clamp_after`]) instead of storing a
//! number they cannot read back.

use core::time::Duration;

/// Milliseconds since an epoch of the caller's choosing.
pub type Millis = u64;

/// The latest time fairq represents: 9999-12-31T23:59:59.999Z in milliseconds since the Unix
/// epoch.
///
/// ```
/// assert_eq!(fairq_core::job::MAX_MILLIS, 253_402_300_799_999);
/// ```
pub const MAX_MILLIS: Millis = 253_402_300_799_999;

/// Converts a duration to whole milliseconds, saturating.
///
/// ```
/// assert_eq!(fairq_core::job::millis(core::time::Duration::from_secs(2)), 2_000);
/// ```
pub fn millis(duration: Duration) -> Millis {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// `now + after`, never past [`MAX_MILLIS`] and never before `now`.
///
/// A `now` already past [`MAX_MILLIS`] (one [`check_time`] refuses) cannot be brought back
/// into range by the clamp, and clamping would put the result before `now`: a lease expired
/// when granted, a retry in the past. Such a `now` gets `now + after` (saturating) instead,
/// so a lease still lasts its length. Callers that store the result should refuse such a
/// `now` first.
///
/// ```
/// use core::time::Duration;
/// use fairq_core::job::{clamp_after, MAX_MILLIS};
/// assert_eq!(clamp_after(1_000, Duration::from_secs(1)), 2_000);
/// assert_eq!(clamp_after(1_000, Duration::MAX), MAX_MILLIS);
/// assert_eq!(clamp_after(MAX_MILLIS + 1, Duration::from_secs(1)), MAX_MILLIS + 1_001);
/// ```
pub fn clamp_after(now: Millis, after: Duration) -> Millis {
    let later = now.saturating_add(millis(after));
    if now > MAX_MILLIS {
        later
    } else {
        later.min(MAX_MILLIS)
    }
}

/// A time beyond [`MAX_MILLIS`].
///
/// ```
/// use fairq_core::job::{check_time, TimeOutOfRange, MAX_MILLIS};
/// assert_eq!(check_time(5), Ok(5));
/// assert_eq!(check_time(MAX_MILLIS + 1), Err(TimeOutOfRange { millis: MAX_MILLIS + 1 }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeOutOfRange {
    /// The time that was asked for.
    pub millis: Millis,
}

impl core::fmt::Display for TimeOutOfRange {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "time {} ms is beyond the latest time fairq can store ({MAX_MILLIS} ms, the end of \
             the year 9999)",
            self.millis
        )
    }
}

impl core::error::Error for TimeOutOfRange {}

/// Accepts a time up to [`MAX_MILLIS`].
///
/// ```
/// assert!(fairq_core::job::check_time(u64::MAX).is_err());
/// ```
pub fn check_time(millis: Millis) -> Result<Millis, TimeOutOfRange> {
    if millis > MAX_MILLIS {
        Err(TimeOutOfRange { millis })
    } else {
        Ok(millis)
    }
}
