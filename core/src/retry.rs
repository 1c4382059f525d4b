//! Retry policy: how many times a failed job runs again, and after what delay.
//!
//! A [`RetryPolicy`] is a limit on retries plus a [`Backoff`]. Ask it with
//! [`RetryPolicy::decide`], passing the 1-based number of the attempt that just failed:
//!
//! ```
//! use core::time::Duration;
//! use fairq_core::retry::{Decision, RetryPolicy};
//!
//! // Up to 4 retries (5 runs in all): 1 s after the first failure, then 5 s each time.
//! let policy = RetryPolicy::new(4).with_delays([Duration::from_secs(1), Duration::from_secs(5)]);
//! assert_eq!(policy.decide(1), Decision::Retry { after: Duration::from_secs(1) });
//! assert_eq!(policy.decide(2), Decision::Retry { after: Duration::from_secs(5) });
//! assert_eq!(policy.decide(4), Decision::Retry { after: Duration::from_secs(5) });
//! assert_eq!(policy.decide(5), Decision::GiveUp);
//! ```
//!
//! # The default policy
//!
//! [`RetryPolicy::default`] follows the defaults of River and Sidekiq, two widely deployed job
//! systems: 24 retries (25 runs in all, River's `MaxAttempts`), waiting `attempt⁴` seconds
//! after the n-th failure (1 s, 16 s, 81 s, … about 3.8 days after the 24th). When a random
//! number is supplied, 10 % jitter shortens each delay to somewhere between 90 % and 100 % of
//! it (jitter never lengthens a delay). Altogether a job keeps trying for about three weeks,
//! long enough to ride out a weekend outage of a downstream service. Proletarian's default
//! (never retry) is one call away: [`RetryPolicy::new(0)`](RetryPolicy::new).
//!
//! ```
//! use core::time::Duration;
//! use fairq_core::retry::{Decision, RetryPolicy};
//!
//! let p = RetryPolicy::default();
//! // After the second failure: 16 s, jittered into [14.4 s, 16 s].
//! assert_eq!(p.decide_with_random(2, 0), Decision::Retry { after: Duration::from_millis(14_400) });
//! assert_eq!(p.decide_with_random(2, u64::MAX), Decision::Retry { after: Duration::from_secs(16) });
//! ```

use core::time::Duration;

/// Longest delay schedule kept without the `alloc` feature; extra entries are ignored.
///
/// ```
/// assert_eq!(fairq_core::retry::MAX_DELAYS, 32);
/// ```
pub const MAX_DELAYS: usize = 32;

#[cfg(feature = "alloc")]
type Delays = alloc::vec::Vec<Duration>;
#[cfg(not(feature = "alloc"))]
type Delays = heapless::Vec<Duration, MAX_DELAYS>;

/// What to do after a failed attempt.
///
/// ```
/// use fairq_core::retry::{Decision, RetryPolicy};
/// assert_eq!(RetryPolicy::new(0).decide(1), Decision::GiveUp);
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Run the job again once `after` has passed since the failure.
    Retry {
        /// Delay from the failure to the next run.
        after: Duration,
    },
    /// No retries left: the job is dead.
    GiveUp,
}

/// How the delay before a retry grows.
///
/// ```
/// use core::time::Duration;
/// use fairq_core::retry::{Backoff, RetryPolicy};
///
/// let p = RetryPolicy::new(3).with_backoff(Backoff::Fixed(Duration::from_millis(250)));
/// assert_eq!(p.delay(3), Duration::from_millis(250));
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
// Without an allocator a schedule is kept inline (up to `MAX_DELAYS` entries, 512 bytes):
// there is no box to put it in, and a policy is built once and read, not moved around.
#[cfg_attr(not(feature = "alloc"), allow(clippy::large_enum_variant))]
pub enum Backoff {
    /// Retry at once.
    Immediate,
    /// The same delay every time.
    Fixed(Duration),
    /// The n-th failure waits entry n-1; the last entry repeats once the list runs out.
    Schedule(Delays),
    /// `base * factor^(n-1)`, capped at `cap`.
    Exponential {
        /// Delay after the first failure.
        base: Duration,
        /// Growth per failure (2 doubles).
        factor: u32,
        /// Largest delay.
        cap: Duration,
    },
    /// `unit * n^exponent` after the n-th failure, capped at `cap`.
    Polynomial {
        /// Scale of the curve.
        unit: Duration,
        /// Power of the attempt number.
        exponent: u32,
        /// Largest delay.
        cap: Duration,
    },
}

/// A limit on retries and a backoff between them.
///
/// ```
/// use core::time::Duration;
/// use fairq_core::retry::{Decision, RetryPolicy};
///
/// let p = RetryPolicy::forever().with_exponential(Duration::from_secs(1), Duration::from_secs(60));
/// assert_eq!(p.decide(1_000), Decision::Retry { after: Duration::from_secs(60) });
/// ```
///
/// # Stored policies
///
/// With the `serde` feature a policy is read back as it was written, except that a
/// `jitter_permille` above 1000 (a row edited by hand, say) is clamped to 1000, as
/// [`with_jitter`](Self::with_jitter) does: such a row still loads, and means full jitter.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    max_retries: Option<u32>,
    backoff: Backoff,
    /// Jitter as a fraction of the delay, in parts per thousand (0..=1000).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "clamped_jitter"))]
    jitter_permille: u16,
}

/// The most jitter there is: anywhere from zero to the whole delay.
const FULL_JITTER: u16 = 1000;

/// Reads a stored `jitter_permille`, clamping it to [`FULL_JITTER`] like
/// [`RetryPolicy::with_jitter`].
#[cfg(feature = "serde")]
fn clamped_jitter<'de, D: serde::Deserializer<'de>>(stored: D) -> Result<u16, D::Error> {
    <u16 as serde::Deserialize>::deserialize(stored).map(|permille| permille.min(FULL_JITTER))
}

impl Default for RetryPolicy {
    /// 24 retries, `attempt⁴` seconds apart, with 10 % jitter that shortens each delay to
    /// between 90 % and 100 % of it (see the [module docs](self)).
    fn default() -> Self {
        RetryPolicy {
            max_retries: Some(24),
            backoff: Backoff::Polynomial {
                unit: Duration::from_secs(1),
                exponent: 4,
                cap: Duration::from_secs(7 * 24 * 3600),
            },
            jitter_permille: 100,
        }
    }
}

impl RetryPolicy {
    /// At most `max_retries` retries (so `max_retries + 1` runs), retried at once until a
    /// backoff is set. `new(0)` never retries.
    ///
    /// ```
    /// use fairq_core::retry::{Decision, RetryPolicy};
    /// let p = RetryPolicy::new(2);
    /// assert!(matches!(p.decide(2), Decision::Retry { .. }));
    /// assert_eq!(p.decide(3), Decision::GiveUp);
    /// ```
    pub const fn new(max_retries: u32) -> Self {
        RetryPolicy {
            max_retries: Some(max_retries),
            backoff: Backoff::Immediate,
            jitter_permille: 0,
        }
    }

    /// Retries without limit, at once until a backoff is set.
    ///
    /// ```
    /// use fairq_core::retry::{Decision, RetryPolicy};
    /// assert!(matches!(RetryPolicy::forever().decide(u32::MAX), Decision::Retry { .. }));
    /// ```
    pub const fn forever() -> Self {
        RetryPolicy {
            max_retries: None,
            backoff: Backoff::Immediate,
            jitter_permille: 0,
        }
    }

    /// Uses a delay schedule: the n-th failure waits entry n-1, and the last entry repeats.
    /// An empty schedule retries at once. Without the `alloc` feature only the first
    /// [`MAX_DELAYS`] entries are kept.
    ///
    /// ```
    /// use core::time::Duration;
    /// let p = fairq_core::retry::RetryPolicy::new(9)
    ///     .with_delays([Duration::from_secs(1), Duration::from_secs(10)]);
    /// assert_eq!(p.delay(1), Duration::from_secs(1));
    /// assert_eq!(p.delay(7), Duration::from_secs(10));
    /// ```
    pub fn with_delays(mut self, delays: impl IntoIterator<Item = Duration>) -> Self {
        let mut schedule = Delays::new();
        for delay in delays {
            #[cfg(feature = "alloc")]
            schedule.push(delay);
            #[cfg(not(feature = "alloc"))]
            if schedule.push(delay).is_err() {
                break;
            }
        }
        self.backoff = Backoff::Schedule(schedule);
        self
    }

    /// Uses exponential backoff doubling from `base` up to `cap`.
    ///
    /// ```
    /// use core::time::Duration;
    /// let p = fairq_core::retry::RetryPolicy::new(9)
    ///     .with_exponential(Duration::from_millis(100), Duration::from_secs(1));
    /// assert_eq!(p.delay(1), Duration::from_millis(100));
    /// assert_eq!(p.delay(3), Duration::from_millis(400));
    /// assert_eq!(p.delay(9), Duration::from_secs(1));
    /// ```
    pub fn with_exponential(self, base: Duration, cap: Duration) -> Self {
        self.with_backoff(Backoff::Exponential {
            base,
            factor: 2,
            cap,
        })
    }

    /// Uses any [`Backoff`].
    ///
    /// ```
    /// use fairq_core::retry::{Backoff, RetryPolicy};
    /// let p = RetryPolicy::new(1).with_backoff(Backoff::Immediate);
    /// assert_eq!(p.delay(1), core::time::Duration::ZERO);
    /// ```
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Spreads each delay by up to `permille`/1000 of itself, driven by the random number given
    /// to [`decide_with_random`](Self::decide_with_random). `1000` is "full jitter" (anywhere
    /// from zero to the delay); values above 1000 count as 1000.
    ///
    /// ```
    /// use core::time::Duration;
    /// use fairq_core::retry::{Decision, RetryPolicy};
    /// let p = RetryPolicy::new(3).with_delays([Duration::from_secs(10)]).with_jitter(500);
    /// // The random number picks a point in [5 s, 10 s].
    /// assert_eq!(p.decide_with_random(1, 0), Decision::Retry { after: Duration::from_secs(5) });
    /// assert_eq!(p.decide_with_random(1, u64::MAX), Decision::Retry { after: Duration::from_secs(10) });
    /// ```
    pub fn with_jitter(mut self, permille: u16) -> Self {
        self.jitter_permille = permille.min(FULL_JITTER);
        self
    }

    /// The retry limit (`None`: forever).
    ///
    /// ```
    /// assert_eq!(fairq_core::retry::RetryPolicy::new(3).max_retries(), Some(3));
    /// ```
    pub fn max_retries(&self) -> Option<u32> {
        self.max_retries
    }

    /// The backoff in use.
    ///
    /// ```
    /// use fairq_core::retry::{Backoff, RetryPolicy};
    /// assert_eq!(RetryPolicy::new(1).backoff(), &Backoff::Immediate);
    /// ```
    pub fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// The jitter in parts per thousand.
    ///
    /// ```
    /// assert_eq!(fairq_core::retry::RetryPolicy::default().jitter_permille(), 100);
    /// ```
    pub fn jitter_permille(&self) -> u16 {
        self.jitter_permille
    }

    /// How many retries remain after the 1-based `attempt` failed (`None`: unlimited).
    ///
    /// ```
    /// let p = fairq_core::retry::RetryPolicy::new(2);
    /// assert_eq!(p.retries_left(1), Some(2));
    /// assert_eq!(p.retries_left(3), Some(0));
    /// ```
    pub fn retries_left(&self, attempt: u32) -> Option<u32> {
        let used = attempt.max(1) - 1;
        self.max_retries.map(|max| max.saturating_sub(used))
    }

    /// The un-jittered delay after the 1-based `attempt` failed (attempt 0 counts as 1).
    ///
    /// ```
    /// let p = fairq_core::retry::RetryPolicy::default();
    /// assert_eq!(p.delay(2), core::time::Duration::from_secs(16));
    /// ```
    pub fn delay(&self, attempt: u32) -> Duration {
        let n = attempt.max(1);
        match &self.backoff {
            Backoff::Immediate => Duration::ZERO,
            Backoff::Fixed(delay) => *delay,
            Backoff::Schedule(delays) => {
                let index = (n as usize - 1).min(delays.len().saturating_sub(1));
                delays.get(index).copied().unwrap_or(Duration::ZERO)
            }
            Backoff::Exponential { base, factor, cap } => {
                grown(*base, u128::from(*factor).checked_pow(n - 1), *cap)
            }
            Backoff::Polynomial {
                unit,
                exponent,
                cap,
            } => grown(*unit, u128::from(n).checked_pow(*exponent), *cap),
        }
    }

    /// Decides what follows the failure of the 1-based `attempt`, without jitter.
    ///
    /// ```
    /// use core::time::Duration;
    /// use fairq_core::retry::{Decision, RetryPolicy};
    /// let p = RetryPolicy::new(1).with_delays([Duration::from_secs(3)]);
    /// assert_eq!(p.decide(1), Decision::Retry { after: Duration::from_secs(3) });
    /// assert_eq!(p.decide(2), Decision::GiveUp);
    /// ```
    pub fn decide(&self, attempt: u32) -> Decision {
        match self.retries_left(attempt) {
            Some(0) => Decision::GiveUp,
            _ => Decision::Retry {
                after: self.delay(attempt),
            },
        }
    }

    /// Like [`decide`](Self::decide), with the policy's jitter driven by `random` (any
    /// uniformly distributed `u64`). `u64::MAX` gives the full delay, `0` the shortest.
    ///
    /// ```
    /// use core::time::Duration;
    /// use fairq_core::retry::{Decision, RetryPolicy};
    /// let p = RetryPolicy::new(1).with_delays([Duration::from_secs(8)]).with_jitter(1000);
    /// assert_eq!(p.decide_with_random(1, 0), Decision::Retry { after: Duration::ZERO });
    /// let Decision::Retry { after } = p.decide_with_random(1, u64::MAX / 2) else { panic!() };
    /// assert!(after > Duration::from_millis(3_999) && after <= Duration::from_secs(4));
    /// ```
    pub fn decide_with_random(&self, attempt: u32, random: u64) -> Decision {
        match self.decide(attempt) {
            Decision::Retry { after } => Decision::Retry {
                after: jittered(after, self.jitter_permille, random),
            },
            Decision::GiveUp => Decision::GiveUp,
        }
    }
}

/// `delay * (1 - j) + delay * j * random / u64::MAX`, computed in nanoseconds without floats.
/// A `permille` above 1000 counts as 1000, so the result is always within `[0, delay]`.
fn jittered(delay: Duration, permille: u16, random: u64) -> Duration {
    // Checked here as well as where the policy is built: a `spread` above `nanos` would
    // underflow below, whatever path the value came in by.
    let permille = permille.min(FULL_JITTER);
    if permille == 0 {
        return delay;
    }
    let nanos = delay.as_nanos();
    let spread = nanos * u128::from(permille) / u128::from(FULL_JITTER);
    // spread * random / MAX in two parts, so a delay near Duration::MAX cannot overflow.
    let max = u128::from(u64::MAX);
    let random = u128::from(random);
    let offset = (spread / max) * random + (spread % max) * random / max;
    let total = nanos - spread + offset;
    let secs = u64::try_from(total / 1_000_000_000).unwrap_or(u64::MAX);
    Duration::new(secs, (total % 1_000_000_000) as u32)
}

/// `base * growth`, at most `cap`, computed in nanoseconds; a growth past `u128` (`None`)
/// is past any cap too, unless `base` is zero.
fn grown(base: Duration, growth: Option<u128>, cap: Duration) -> Duration {
    if base.is_zero() {
        return Duration::ZERO;
    }
    match growth.and_then(|g| base.as_nanos().checked_mul(g)) {
        // At most the cap's nanoseconds, so the seconds fit in a u64.
        Some(nanos) if nanos <= cap.as_nanos() => Duration::new(
            (nanos / 1_000_000_000) as u64,
            (nanos % 1_000_000_000) as u32,
        ),
        _ => cap,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_above_1000_permille_counts_as_full_jitter() {
        let delay = Duration::from_secs(10);
        for random in [0, 1, u64::MAX / 3, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
            for permille in [1001, 1500, u16::MAX] {
                assert_eq!(
                    jittered(delay, permille, random),
                    jittered(delay, FULL_JITTER, random),
                    "{permille} permille, random {random}"
                );
            }
        }
        assert_eq!(jittered(Duration::MAX, u16::MAX, u64::MAX), Duration::MAX);
        assert_eq!(jittered(delay, u16::MAX, 0), Duration::ZERO);
    }
}
