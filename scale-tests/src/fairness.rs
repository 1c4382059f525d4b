//! The fair bound across processes, and how a wait is measured against it.
//!
//! **The rule.** Every fairq store hands out jobs in the order of fairq-core's fair queue: a
//! key that gets a job while `K` keys have jobs waiting is served within `2 (K - 1)`
//! deliveries of other keys' jobs, however deep their backlogs (one snapshot of heads may be
//! in progress, and the key joins the next one). On PostgreSQL that order is a property of
//! the rows (`round`, `ready_seq`), so it is one order for every process that claims.
//!
//! **What is measured.** The tests record when each job's command starts, in any process, on
//! the host's clock, and merge the records into one order of starts. A light job enqueued
//! at time `T` (taken just after the enqueue returned) is *overtaken* by every start of
//! another key's job after `T` and before its own start.
//!
//! **The bound** ([`FairBound::limit`]). Each such start is of a job that was either
//! 1. claimed before the light job was enqueued and not started by `T`: such a job sits in a
//!    worker's prefetch buffer or between its claim and its command's start, so each process
//!    holds at most `concurrency + prefetch` of them: `N (c + p)` in all;
//! 2. claimed after the light job became ready but ahead of it in the fair order: at most
//!    `2 (K - 1)` (the rule above);
//! 3. claimed after the light job, by another process, but started first. A process starts
//!    its jobs in claim order, so the light job waits in its own process's pipeline until
//!    at most `p` slots there have freed up (the jobs buffered ahead of it, then its own
//!    turn). Meanwhile each other process frees its slots too and starts a job in each: `c`
//!    at once if all its slots happen to free together, and then about as many as the light
//!    job's process, times how much faster it runs. This is the one term that rests on
//!    speeds rather than on the order: with the light job's process running up to `S` times
//!    slower than the others, it is `(N - 1) (S p + c)`.
//!
//! So `overtaken ≤ 2 (K - 1) + N (c + p) + (N - 1) (S p + c)`. The tests take `S = 4`: a
//! 2-core machine running three workers, a server and their job commands (and, while the
//! tests were written, a dozen compilers besides, load average 15 to 19) does slow one process
//! down against the others that much, and the light jobs' worst waits came close to the
//! bound with `S = 3`. The first two terms alone (`2 (K - 1) + N (c + p)`, 30 for the test's
//! sizes) are *not* a bound once workers prefetch: a light job claimed into the buffer of a
//! process that is momentarily slow waits for that process while the others start later
//! claims; measured, up to 49 starts. A store or worker that is fair only within a process
//! (each one claims a FIFO batch and reorders it) or not at all makes the light job wait
//! behind the heavy backlog: thousands of starts, far above the bound.

use crate::record::{Event, Step};

/// The parameters of the bound.
///
/// ```
/// use fairq_scale_tests::fairness::FairBound;
/// // 3 processes, 4 at a time each with a prefetch of 4, one heavy and three light keys,
/// // the light job's process up to 4 times slower than the others.
/// let bound = FairBound { processes: 3, keys: 4, concurrency: 4, prefetch: 4, slower: 4 };
/// assert_eq!(bound.claims_ahead(), 6);
/// assert_eq!(bound.held_before(), 24);
/// assert_eq!(bound.started_meanwhile(), 40);
/// assert_eq!(bound.limit(), 70);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FairBound {
    /// Worker processes (`N`).
    pub processes: usize,
    /// Keys with jobs waiting while the light job waits (`K`), its own included.
    pub keys: usize,
    /// Jobs each process runs at once (`c`).
    pub concurrency: usize,
    /// Jobs each process may hold claimed ahead of free slots (`p`).
    pub prefetch: usize,
    /// How many times slower than the others the light job's process may run while the
    /// light job waits in it (`S`).
    pub slower: usize,
}

impl FairBound {
    /// `2 (K - 1)`: other keys' jobs the fair order may put before the light job.
    pub fn claims_ahead(&self) -> usize {
        2 * self.keys.saturating_sub(1)
    }

    /// `N (c + p)`: jobs claimed before the light job and not yet started.
    pub fn held_before(&self) -> usize {
        self.processes * (self.concurrency + self.prefetch)
    }

    /// `(N - 1) (S p + c)`: starts in other processes while the light job waits in its
    /// own process's pipeline.
    pub fn started_meanwhile(&self) -> usize {
        self.processes.saturating_sub(1) * (self.slower * self.prefetch + self.concurrency)
    }

    /// The most other-key starts a light job may see between its enqueue and its start.
    pub fn limit(&self) -> usize {
        self.claims_ahead() + self.held_before() + self.started_meanwhile()
    }
}

/// The start of `job`'s first attempt, if recorded.
pub fn first_start(events: &[Event], job: u64) -> Option<&Event> {
    events
        .iter()
        .find(|e| e.job == job && e.step == Step::Start)
}

/// How many jobs of keys other than `key` started after `from_ns` and before `job`'s first
/// start; `None` if `job` has not started. `events` must be in time order
/// ([`read_logs`](crate::record::read_logs) returns them so).
///
/// ```
/// use fairq_scale_tests::fairness::overtaken;
/// use fairq_scale_tests::record::{Event, Step};
/// let start = |at_ns, job, key: &str| Event { step: Step::Start, at_ns, job, attempt: 1, key: key.into(), worker: 0 };
/// let events = [start(1, 1, "h"), start(3, 2, "h"), start(4, 9, "l"), start(5, 3, "h")];
/// assert_eq!(overtaken(&events, 9, "l", 2), Some(1));
/// assert_eq!(overtaken(&events, 9, "l", 0), Some(2));
/// assert_eq!(overtaken(&events, 7, "l", 0), None);
/// ```
pub fn overtaken(events: &[Event], job: u64, key: &str, from_ns: u128) -> Option<usize> {
    let start = first_start(events, job)?;
    Some(
        events
            .iter()
            .filter(|e| e.step == Step::Start && e.key != key)
            .filter(|e| e.at_ns > from_ns && e.at_ns < start.at_ns)
            .count(),
    )
}
