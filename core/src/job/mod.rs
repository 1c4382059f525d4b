//! The job lifecycle: a state machine with leases, fencing tokens, dependencies and rescue.
//!
//! ```text
//!              dependency succeeded
//!   Blocked ───────────────────────────┐
//!                                      ▼
//!   Scheduled(run_at) ──due──▶ claimable ◀── Retrying(run_at) ◀──┐
//!                                │ claim                          │ fail / rescue,
//!                                ▼                                │ policy retries
//!                     Running{token, deadline, attempt} ──────────┤
//!                                │ complete                       │ fail / rescue,
//!                                ▼                                ▼ policy gives up
//!                           Succeeded                            Dead ──retry──▶ Scheduled
//! ```
//!
//! Every claim increments the job's attempt counter and hands out a fresh [`LeaseToken`].
//! Completion, failure and heartbeats must present the token of the current lease, so a
//! worker whose lease expired and whose job was rescued and claimed again cannot complete it
//! late: the store refuses its stale token ([`TransitionError::StaleLease`]). A rescue (the
//! lease passed its deadline) counts as a failed attempt and goes through the retry policy,
//! so a job that keeps killing its worker does not loop forever.
//!
//! Time is milliseconds since any epoch the caller chooses, as `u64`.
//!
//! ```
//! use core::time::Duration;
//! use fairq_core::job::{Lifecycle, Outcome, State};
//! use fairq_core::retry::RetryPolicy;
//!
//! let policy = RetryPolicy::new(1).with_delays([Duration::from_secs(5)]);
//! let mut job = Lifecycle::ready();
//! let lease = job.claim(0, Duration::from_secs(30)).unwrap();
//! // The handler fails: one retry allowed, 5 s later.
//! assert_eq!(job.fail(lease.token, 1_000, &policy, 0).unwrap(), Outcome::Retry { run_at: 6_000 });
//! assert!(job.claim(5_999, Duration::from_secs(30)).is_err()); // not due yet
//! let lease = job.claim(6_000, Duration::from_secs(30)).unwrap();
//! assert_eq!(lease.attempt, 2);
//! job.complete(lease.token, 7_000).unwrap();
//! assert_eq!(job.state(), &State::Succeeded { at: 7_000 });
//! ```

mod time;
mod verdict;

use core::fmt;
use core::time::Duration;

use crate::retry::RetryPolicy;

pub use time::{check_time, clamp_after, millis, Millis, TimeOutOfRange, MAX_MILLIS};
pub use verdict::{verdict, Setback};

/// A fencing token: identifies one claim of one job. Tokens of a job strictly increase.
///
/// ```
/// use fairq_core::job::Lifecycle;
/// let mut job = Lifecycle::ready();
/// let first = job.claim(0, core::time::Duration::from_secs(1)).unwrap().token;
/// job.rescue(5_000, &fairq_core::retry::RetryPolicy::new(1), 0).unwrap();
/// let second = job.claim(5_000, core::time::Duration::from_secs(1)).unwrap().token;
/// assert!(second > first);
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaseToken(pub u64);

impl fmt::Display for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lease#{}", self.0)
    }
}

/// A granted lease: who may finish the job, until when, and which attempt this is.
///
/// ```
/// let mut job = fairq_core::job::Lifecycle::ready();
/// let lease = job.claim(100, core::time::Duration::from_millis(50)).unwrap();
/// assert_eq!((lease.deadline, lease.attempt), (150, 1));
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The fencing token to present on completion, failure or heartbeat.
    pub token: LeaseToken,
    /// When the lease expires and the job may be rescued.
    pub deadline: Millis,
    /// The 1-based attempt this lease runs.
    pub attempt: u32,
}

/// Why a job is dead.
///
/// ```
/// use fairq_core::job::DeadReason;
/// assert_eq!(DeadReason::RetriesExhausted.to_string(), "retries exhausted");
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadReason {
    /// The handler failed and the policy gave up.
    RetriesExhausted,
    /// The lease expired (the worker died or hung) and the policy gave up.
    LeaseExpired,
    /// An operator or the handler discarded the job.
    Discarded,
}

impl fmt::Display for DeadReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeadReason::RetriesExhausted => "retries exhausted",
            DeadReason::LeaseExpired => "lease expired",
            DeadReason::Discarded => "discarded",
        })
    }
}

/// Where a job is in its life.
///
/// ```
/// use fairq_core::job::{Lifecycle, State};
/// assert_eq!(Lifecycle::scheduled(10).state(), &State::Scheduled { run_at: 10 });
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Waiting for the job it depends on to succeed.
    Blocked,
    /// Waiting for its first run at `run_at` (0: at once).
    Scheduled {
        /// Earliest time it may be claimed.
        run_at: Millis,
    },
    /// Held by a worker under a lease.
    Running {
        /// The current lease.
        lease: Lease,
    },
    /// Failed and waiting to run again at `run_at`.
    Retrying {
        /// Earliest time it may be claimed again.
        run_at: Millis,
    },
    /// Finished successfully.
    Succeeded {
        /// When.
        at: Millis,
    },
    /// Given up on.
    Dead {
        /// When.
        at: Millis,
        /// Why.
        reason: DeadReason,
    },
}

impl State {
    /// A short lower-case name, for logs, tables and storage.
    ///
    /// ```
    /// assert_eq!(fairq_core::job::State::Blocked.name(), "blocked");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            State::Blocked => "blocked",
            State::Scheduled { .. } => "scheduled",
            State::Running { .. } => "running",
            State::Retrying { .. } => "retrying",
            State::Succeeded { .. } => "succeeded",
            State::Dead { .. } => "dead",
        }
    }

    /// True for `Succeeded` and `Dead`.
    ///
    /// ```
    /// assert!(!fairq_core::job::State::Blocked.is_final());
    /// ```
    pub fn is_final(&self) -> bool {
        matches!(self, State::Succeeded { .. } | State::Dead { .. })
    }
}

/// What a failure or rescue leads to: core's verdict (see [`verdict()`]), which stores apply.
///
/// ```
/// use fairq_core::job::{DeadReason, Lifecycle, Outcome};
/// let mut job = Lifecycle::ready();
/// let lease = job.claim(0, core::time::Duration::from_secs(1)).unwrap();
/// let out = job.fail(lease.token, 10, &fairq_core::retry::RetryPolicy::new(0), 0).unwrap();
/// assert_eq!(out, Outcome::Dead { reason: DeadReason::RetriesExhausted });
/// assert!(out.is_dead());
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The job runs again at `run_at`.
    Retry {
        /// When it becomes claimable.
        run_at: Millis,
    },
    /// The job is dead.
    Dead {
        /// Why: the policy gave up after a failure or a lost lease, or the failure was
        /// permanent.
        reason: DeadReason,
    },
}

impl Outcome {
    /// True for [`Outcome::Dead`].
    ///
    /// ```
    /// assert!(!fairq_core::job::Outcome::Retry { run_at: 1 }.is_dead());
    /// ```
    pub fn is_dead(&self) -> bool {
        matches!(self, Outcome::Dead { .. })
    }

    /// The state a job is in once the outcome is applied at `now`.
    ///
    /// ```
    /// use fairq_core::job::{DeadReason, Outcome, State};
    /// assert_eq!(Outcome::Retry { run_at: 9 }.state(5), State::Retrying { run_at: 9 });
    /// let dead = Outcome::Dead { reason: DeadReason::LeaseExpired };
    /// assert_eq!(dead.state(5), State::Dead { at: 5, reason: DeadReason::LeaseExpired });
    /// ```
    pub fn state(&self, now: Millis) -> State {
        match *self {
            Outcome::Retry { run_at } => State::Retrying { run_at },
            Outcome::Dead { reason } => State::Dead { at: now, reason },
        }
    }
}

/// An event that the job's current state does not allow.
///
/// ```
/// use fairq_core::job::{Lifecycle, TransitionError};
/// let mut job = Lifecycle::ready();
/// let err = job.complete(fairq_core::job::LeaseToken(1), 0).unwrap_err();
/// assert_eq!(err, TransitionError::NotRunning { state: "scheduled" });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransitionError {
    /// The job is not in a state that can be claimed.
    NotClaimable {
        /// The current state's name.
        state: &'static str,
    },
    /// The job is scheduled later than `now`.
    NotDue {
        /// When it becomes claimable.
        run_at: Millis,
    },
    /// The event needs a running job.
    NotRunning {
        /// The current state's name.
        state: &'static str,
    },
    /// The token is not the current lease's: the caller's lease was lost (fencing).
    StaleLease {
        /// The token presented.
        presented: LeaseToken,
        /// The token of the lease held now, if the job is running again.
        current: Option<LeaseToken>,
    },
    /// A rescue was attempted before the lease deadline.
    LeaseNotExpired {
        /// The lease deadline.
        deadline: Millis,
    },
    /// The event needs a blocked job.
    NotBlocked {
        /// The current state's name.
        state: &'static str,
    },
    /// The event needs a dead job.
    NotDead {
        /// The current state's name.
        state: &'static str,
    },
    /// Every lease token has been issued: the last one was `u64::MAX`, and a token reused
    /// would let a superseded lease act again. Only a job restored from a corrupt record
    /// gets here.
    ///
    /// ```
    /// use fairq_core::job::{Lifecycle, State, TransitionError};
    /// let mut job = Lifecycle::restore(State::Scheduled { run_at: 0 }, 1, u64::MAX);
    /// let err = job.claim(0, core::time::Duration::from_secs(1)).unwrap_err();
    /// assert_eq!(err, TransitionError::TokensExhausted);
    /// ```
    TokensExhausted,
}

impl fmt::Display for TransitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransitionError::NotClaimable { state } => write!(f, "a {state} job cannot be claimed"),
            TransitionError::NotDue { run_at } => write!(f, "job is not due before {run_at} ms"),
            TransitionError::NotRunning { state } => write!(f, "job is {state}, not running"),
            TransitionError::StaleLease {
                presented,
                current: Some(current),
            } => write!(
                f,
                "stale lease: {presented} was superseded by {current} (the job was rescued)"
            ),
            TransitionError::StaleLease {
                presented,
                current: None,
            } => write!(
                f,
                "stale lease: {presented} is no longer held (the job was rescued)"
            ),
            TransitionError::LeaseNotExpired { deadline } => {
                write!(f, "lease is valid until {deadline} ms")
            }
            TransitionError::NotBlocked { state } => write!(f, "job is {state}, not blocked"),
            TransitionError::NotDead { state } => write!(f, "job is {state}, not dead"),
            TransitionError::TokensExhausted => {
                write!(
                    f,
                    "the job has used every lease token and cannot be claimed"
                )
            }
        }
    }
}

impl core::error::Error for TransitionError {}

/// One job's lifecycle: its state, attempts so far and lease counter.
///
/// Stores persist the three numbers ([`state`](Self::state), [`attempts`](Self::attempts),
/// [`last_token`](Self::last_token)) and rebuild the machine with [`Lifecycle::restore`].
///
/// ```
/// use fairq_core::job::{Lifecycle, State};
/// let mut job = Lifecycle::blocked();
/// assert!(!job.is_claimable(0));
/// job.dependency_succeeded(0, 0).unwrap();
/// assert!(job.is_claimable(0));
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifecycle {
    state: State,
    attempts: u32,
    last_token: u64,
}

impl Lifecycle {
    /// A job that may run at once.
    ///
    /// ```
    /// assert!(fairq_core::job::Lifecycle::ready().is_claimable(0));
    /// ```
    pub const fn ready() -> Self {
        Self::scheduled(0)
    }

    /// A job that may run from `run_at` on.
    ///
    /// ```
    /// let job = fairq_core::job::Lifecycle::scheduled(50);
    /// assert!(!job.is_claimable(49) && job.is_claimable(50));
    /// ```
    pub const fn scheduled(run_at: Millis) -> Self {
        Lifecycle {
            state: State::Scheduled { run_at },
            attempts: 0,
            last_token: 0,
        }
    }

    /// A job waiting for a dependency; see [`dependency_succeeded`](Self::dependency_succeeded).
    ///
    /// ```
    /// assert_eq!(fairq_core::job::Lifecycle::blocked().state().name(), "blocked");
    /// ```
    pub const fn blocked() -> Self {
        Lifecycle {
            state: State::Blocked,
            attempts: 0,
            last_token: 0,
        }
    }

    /// Rebuilds a lifecycle from stored parts.
    ///
    /// ```
    /// use fairq_core::job::{Lifecycle, State};
    /// let job = Lifecycle::restore(State::Retrying { run_at: 9 }, 2, 2);
    /// assert_eq!(job.attempts(), 2);
    /// ```
    pub const fn restore(state: State, attempts: u32, last_token: u64) -> Self {
        Lifecycle {
            state,
            attempts,
            last_token,
        }
    }

    /// Rebuilds the lifecycle of a running job from the three fields a store keeps for it:
    /// its lease's token, deadline and attempt. The attempt counter and the last token issued
    /// are those of the lease, which holds for every running job (a claim issues the newest
    /// token and counts the attempt).
    ///
    /// Stores that hold jobs in rows or hashes use it to apply a transition with this state
    /// machine instead of re-deriving the rule.
    ///
    /// ```
    /// use fairq_core::job::{Lease, LeaseToken, Lifecycle, State};
    /// let lease = Lease { token: LeaseToken(4), deadline: 9_000, attempt: 2 };
    /// let mut job = Lifecycle::running(lease);
    /// assert_eq!((job.attempts(), job.last_token()), (2, 4));
    /// assert!(job.complete(LeaseToken(3), 100).is_err()); // fenced
    /// job.complete(LeaseToken(4), 100).unwrap();
    /// ```
    pub const fn running(lease: Lease) -> Self {
        Lifecycle {
            state: State::Running { lease },
            attempts: lease.attempt,
            last_token: lease.token.0,
        }
    }

    /// The current state.
    ///
    /// ```
    /// assert_eq!(fairq_core::job::Lifecycle::ready().state().name(), "scheduled");
    /// ```
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Attempts started so far (claims and rescued claims).
    ///
    /// ```
    /// assert_eq!(fairq_core::job::Lifecycle::ready().attempts(), 0);
    /// ```
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The most recent lease token issued (0: never claimed).
    ///
    /// ```
    /// assert_eq!(fairq_core::job::Lifecycle::ready().last_token(), 0);
    /// ```
    pub fn last_token(&self) -> u64 {
        self.last_token
    }

    /// The time from which the job may be claimed, if it is waiting for time only.
    ///
    /// ```
    /// assert_eq!(fairq_core::job::Lifecycle::scheduled(7).due_at(), Some(7));
    /// ```
    pub fn due_at(&self) -> Option<Millis> {
        match self.state {
            State::Scheduled { run_at } | State::Retrying { run_at } => Some(run_at),
            _ => None,
        }
    }

    /// True when [`claim`](Self::claim) at `now` would succeed.
    ///
    /// ```
    /// assert!(fairq_core::job::Lifecycle::scheduled(5).is_claimable(5));
    /// ```
    pub fn is_claimable(&self, now: Millis) -> bool {
        self.due_at().is_some_and(|run_at| run_at <= now)
    }

    /// Starts an attempt under a lease of `lease` length (its deadline is
    /// [`clamp_after`]`(now, lease)`: never past [`MAX_MILLIS`] while `now` is in range, so
    /// `Duration::MAX` is a lease that never expires, and never before `now`).
    ///
    /// ```
    /// let mut job = fairq_core::job::Lifecycle::ready();
    /// let lease = job.claim(10, core::time::Duration::from_millis(5)).unwrap();
    /// assert_eq!(lease.deadline, 15);
    /// assert!(job.claim(10, core::time::Duration::from_millis(5)).is_err()); // already running
    /// let endless = fairq_core::job::Lifecycle::ready().claim(10, core::time::Duration::MAX);
    /// assert_eq!(endless.unwrap().deadline, fairq_core::job::MAX_MILLIS);
    /// ```
    pub fn claim(&mut self, now: Millis, lease: Duration) -> Result<Lease, TransitionError> {
        match self.due_at() {
            None => Err(TransitionError::NotClaimable {
                state: self.state.name(),
            }),
            Some(run_at) if run_at > now => Err(TransitionError::NotDue { run_at }),
            Some(_) => {
                let Some(token) = self.last_token.checked_add(1) else {
                    return Err(TransitionError::TokensExhausted);
                };
                self.attempts = self.attempts.saturating_add(1);
                self.last_token = token;
                let granted = Lease {
                    token: LeaseToken(self.last_token),
                    deadline: clamp_after(now, lease),
                    attempt: self.attempts,
                };
                self.state = State::Running { lease: granted };
                Ok(granted)
            }
        }
    }

    /// Extends the current lease to `now + lease` (as [`clamp_after`] bounds it: never past
    /// [`MAX_MILLIS`] while `now` is in range; never shorter than it was); returns the new
    /// deadline.
    ///
    /// ```
    /// use core::time::Duration;
    /// let mut job = fairq_core::job::Lifecycle::ready();
    /// let lease = job.claim(0, Duration::from_millis(10)).unwrap();
    /// assert_eq!(job.heartbeat(lease.token, 8, Duration::from_millis(10)).unwrap(), 18);
    /// ```
    pub fn heartbeat(
        &mut self,
        token: LeaseToken,
        now: Millis,
        lease: Duration,
    ) -> Result<Millis, TransitionError> {
        let current = self.running_lease(token)?;
        let deadline = clamp_after(now, lease).max(current.deadline);
        self.state = State::Running {
            lease: Lease {
                deadline,
                ..current
            },
        };
        Ok(deadline)
    }

    /// Marks the job succeeded. A completion with a superseded token is refused.
    ///
    /// ```
    /// let mut job = fairq_core::job::Lifecycle::ready();
    /// let lease = job.claim(0, core::time::Duration::from_secs(1)).unwrap();
    /// job.complete(lease.token, 3).unwrap();
    /// assert!(job.state().is_final());
    /// ```
    pub fn complete(&mut self, token: LeaseToken, now: Millis) -> Result<(), TransitionError> {
        self.running_lease(token)?;
        self.state = State::Succeeded { at: now };
        Ok(())
    }

    /// Records a failed attempt and applies `policy` (with `random` driving its jitter).
    ///
    /// ```
    /// use fairq_core::job::{Lifecycle, Outcome};
    /// use fairq_core::retry::RetryPolicy;
    /// let mut job = Lifecycle::ready();
    /// let lease = job.claim(0, core::time::Duration::from_secs(1)).unwrap();
    /// assert_eq!(job.fail(lease.token, 5, &RetryPolicy::new(1), 0).unwrap(), Outcome::Retry { run_at: 5 });
    /// ```
    pub fn fail(
        &mut self,
        token: LeaseToken,
        now: Millis,
        policy: &RetryPolicy,
        random: u64,
    ) -> Result<Outcome, TransitionError> {
        let lease = self.running_lease(token)?;
        Ok(self.apply(
            verdict(policy, lease.attempt, Setback::Failed, now, random),
            now,
        ))
    }

    /// Marks a running job dead at once, whatever its policy (for a job the handler knows
    /// cannot succeed, such as an undecodable payload).
    ///
    /// ```
    /// use fairq_core::job::{DeadReason, Lifecycle, State};
    /// let mut job = Lifecycle::ready();
    /// let lease = job.claim(0, core::time::Duration::from_secs(1)).unwrap();
    /// job.discard(lease.token, 4).unwrap();
    /// assert_eq!(job.state(), &State::Dead { at: 4, reason: DeadReason::Discarded });
    /// ```
    pub fn discard(&mut self, token: LeaseToken, now: Millis) -> Result<(), TransitionError> {
        self.running_lease(token)?;
        self.state = State::Dead {
            at: now,
            reason: DeadReason::Discarded,
        };
        Ok(())
    }

    /// Ends the running attempt in `setback`, applying core's [`verdict()`] (the single entry
    /// for failures: [`fail`](Self::fail) and [`discard`](Self::discard) are its two common
    /// cases).
    ///
    /// ```
    /// use fairq_core::job::{DeadReason, Lifecycle, Outcome, Setback};
    /// use fairq_core::retry::RetryPolicy;
    /// let mut job = Lifecycle::ready();
    /// let lease = job.claim(0, core::time::Duration::from_secs(1)).unwrap();
    /// let out = job.setback(lease.token, Setback::Permanent, 3, &RetryPolicy::new(5), 0).unwrap();
    /// assert_eq!(out, Outcome::Dead { reason: DeadReason::Discarded });
    /// ```
    pub fn setback(
        &mut self,
        token: LeaseToken,
        setback: Setback,
        now: Millis,
        policy: &RetryPolicy,
        random: u64,
    ) -> Result<Outcome, TransitionError> {
        let lease = self.running_lease(token)?;
        Ok(self.apply(verdict(policy, lease.attempt, setback, now, random), now))
    }

    /// Hands a claimed job back before its handler started (a worker's prefetched job at
    /// shutdown): the attempt is refunded and the job is due again at `now`. The token stays
    /// spent, so the lease's holder is fenced off like after a rescue.
    ///
    /// ```
    /// use fairq_core::job::{LeaseToken, Lifecycle, State};
    /// let mut job = Lifecycle::ready();
    /// let lease = job.claim(0, core::time::Duration::from_secs(30)).unwrap();
    /// job.release(lease.token, 5).unwrap();
    /// assert_eq!((job.state(), job.attempts()), (&State::Scheduled { run_at: 5 }, 0));
    /// assert!(job.complete(lease.token, 6).is_err());
    /// let again = job.claim(6, core::time::Duration::from_secs(30)).unwrap();
    /// assert_eq!((again.attempt, again.token), (1, LeaseToken(2)));
    /// ```
    pub fn release(&mut self, token: LeaseToken, now: Millis) -> Result<(), TransitionError> {
        self.running_lease(token)?;
        self.attempts = self.attempts.saturating_sub(1);
        // A job with attempts behind it is a retry; a fresh one is scheduled.
        self.state = if self.attempts > 0 {
            State::Retrying { run_at: now }
        } else {
            State::Scheduled { run_at: now }
        };
        Ok(())
    }

    /// Takes back a job whose lease expired (its worker died or hung). The lost attempt counts
    /// as a failure and goes through `policy`.
    ///
    /// ```
    /// use fairq_core::job::{Lifecycle, Outcome};
    /// use fairq_core::retry::RetryPolicy;
    /// let mut job = Lifecycle::ready();
    /// job.claim(0, core::time::Duration::from_millis(100)).unwrap();
    /// assert!(job.rescue(99, &RetryPolicy::new(3), 0).is_err());
    /// assert_eq!(job.rescue(100, &RetryPolicy::new(3), 0).unwrap(), Outcome::Retry { run_at: 100 });
    /// ```
    pub fn rescue(
        &mut self,
        now: Millis,
        policy: &RetryPolicy,
        random: u64,
    ) -> Result<Outcome, TransitionError> {
        let State::Running { lease } = self.state else {
            return Err(TransitionError::NotRunning {
                state: self.state.name(),
            });
        };
        if now < lease.deadline {
            return Err(TransitionError::LeaseNotExpired {
                deadline: lease.deadline,
            });
        }
        Ok(self.apply(
            verdict(policy, lease.attempt, Setback::LeaseExpired, now, random),
            now,
        ))
    }

    /// Moves a job that waits for a retry and would be due before `until` to `until` (a
    /// queue's retry sweep holding its retries back after one failed again). Other jobs,
    /// including a retry due later, are left alone; returns whether the job moved.
    ///
    /// ```
    /// use fairq_core::job::{Lifecycle, State};
    /// use fairq_core::retry::RetryPolicy;
    /// let mut job = Lifecycle::ready();
    /// let lease = job.claim(0, core::time::Duration::from_secs(1)).unwrap();
    /// job.fail(lease.token, 10, &RetryPolicy::new(3), 0).unwrap(); // retry due at 10
    /// assert!(job.postpone_retry(500));
    /// assert_eq!(job.state(), &State::Retrying { run_at: 500 });
    /// assert!(!job.postpone_retry(400)); // already due later
    /// assert!(!Lifecycle::ready().postpone_retry(500)); // not a retry
    /// ```
    pub fn postpone_retry(&mut self, until: Millis) -> bool {
        match self.state {
            State::Retrying { run_at } if run_at < until => {
                self.state = State::Retrying { run_at: until };
                true
            }
            _ => false,
        }
    }

    /// Releases a blocked job once the job it depends on has succeeded, at `now`: it waits
    /// for both, so it becomes due at the later of its own `run_at` (when it may first run,
    /// as enqueued) and `now`. A delayed job keeps its delay; one whose time has passed is
    /// due from its release, not from its enqueue.
    ///
    /// ```
    /// use fairq_core::job::{Lifecycle, State};
    /// // Enqueued to run at 5_000; its dependency succeeds at 2_000.
    /// let mut job = Lifecycle::blocked();
    /// job.dependency_succeeded(5_000, 2_000).unwrap();
    /// assert_eq!(job.state(), &State::Scheduled { run_at: 5_000 });
    /// assert!(job.dependency_succeeded(5_000, 2_000).is_err());
    /// // Enqueued to run at once (at 1_000); released at 2_000.
    /// let mut job = Lifecycle::blocked();
    /// job.dependency_succeeded(1_000, 2_000).unwrap();
    /// assert_eq!(job.state(), &State::Scheduled { run_at: 2_000 });
    /// ```
    pub fn dependency_succeeded(
        &mut self,
        run_at: Millis,
        now: Millis,
    ) -> Result<(), TransitionError> {
        if self.state != State::Blocked {
            return Err(TransitionError::NotBlocked {
                state: self.state.name(),
            });
        }
        self.state = State::Scheduled {
            run_at: run_at.max(now),
        };
        Ok(())
    }

    /// Operator retry of a dead job: it becomes claimable at `now` with a fresh retry budget
    /// (its attempt count restarts; lease tokens keep increasing).
    ///
    /// ```
    /// use fairq_core::job::Lifecycle;
    /// use fairq_core::retry::RetryPolicy;
    /// let mut job = Lifecycle::ready();
    /// let lease = job.claim(0, core::time::Duration::from_secs(1)).unwrap();
    /// job.fail(lease.token, 1, &RetryPolicy::new(0), 0).unwrap();
    /// job.revive(2).unwrap();
    /// assert!(job.is_claimable(2));
    /// assert_eq!(job.attempts(), 0);
    /// ```
    pub fn revive(&mut self, now: Millis) -> Result<(), TransitionError> {
        if !matches!(self.state, State::Dead { .. }) {
            return Err(TransitionError::NotDead {
                state: self.state.name(),
            });
        }
        self.state = State::Scheduled { run_at: now };
        self.attempts = 0;
        Ok(())
    }

    fn running_lease(&self, token: LeaseToken) -> Result<Lease, TransitionError> {
        match self.state {
            State::Running { lease } if lease.token == token => Ok(lease),
            State::Running { lease } => Err(TransitionError::StaleLease {
                presented: token,
                current: Some(lease.token),
            }),
            // The holder of the last lease asking again after the job finished.
            _ if self.state.is_final() && token.0 == self.last_token => {
                Err(TransitionError::NotRunning {
                    state: self.state.name(),
                })
            }
            // Any token issued before was fenced off by a rescue or a newer claim.
            _ if token.0 != 0 && token.0 <= self.last_token => Err(TransitionError::StaleLease {
                presented: token,
                current: None,
            }),
            _ => Err(TransitionError::NotRunning {
                state: self.state.name(),
            }),
        }
    }

    /// Puts core's verdict into effect.
    fn apply(&mut self, outcome: Outcome, now: Millis) -> Outcome {
        self.state = outcome.state(now);
        outcome
    }
}
