//! The worker's metrics, recorded through the [`metrics`](https://docs.rs/metrics) facade
//! when the crate's `metrics` feature is on (without it, nothing is recorded and the facade
//! is not a dependency). Install any recorder (a Prometheus exporter, say) in the process and
//! the numbers appear; without a recorder, recording costs next to nothing.
//!
//! | name | type | labels | what |
//! | --- | --- | --- | --- |
//! | `fairq_jobs_enqueued_total` | counter | queue, kind | jobs enqueued through a [`Metered`](crate::Metered) store or the `fairq` facade's `Store` (what `fairq::connect` returns); every job of an accepted call counts, ignored duplicates of a unique key included |
//! | `fairq_jobs_started_total` | counter | queue, kind | attempts a worker started |
//! | `fairq_jobs_succeeded_total` | counter | queue, kind | attempts whose success the store recorded |
//! | `fairq_jobs_failed_total` | counter | queue, kind | attempts whose failure the store recorded (retried or dead) |
//! | `fairq_jobs_dead_total` | counter | queue, kind | jobs that failed for good |
//! | `fairq_jobs_rescued_total` | counter | queue | jobs of dead workers a worker's rescue took back |
//! | `fairq_jobs_pruned_total` | counter | | finished jobs a worker's pruner deleted (see [`WorkerBuilder::prune_finished`](crate::WorkerBuilder::prune_finished)) |
//! | `fairq_job_wait_seconds` | histogram | queue, kind | from when a job became due to when its attempt started |
//! | `fairq_job_run_seconds` | histogram | queue, kind | how long handlers ran |
//! | `fairq_jobs_running` | gauge | queue | attempts running in this worker now |
//! | `fairq_queue_depth` | gauge | queue, state | jobs of the queue in the store by state (`blocked`, `scheduled`, `retrying`, `running`), read every rescue interval |
//!
//! With [`WorkerBuilder::metrics_key_label`](crate::WorkerBuilder::metrics_key_label) the
//! per-job series also carry a `key` label, the fairness key (off by default: one series per
//! tenant can be many series).
//!
//! ```
//! // The names are constants, for dashboards and tests.
//! assert_eq!(fairq_worker::metrics::SUCCEEDED, "fairq_jobs_succeeded_total");
//! ```

use crate::job::Job;
use crate::live_counts::LiveCounts;

/// Jobs enqueued (counter): every job of an enqueue call the store accepted, ignored
/// duplicates of a unique key (`OnConflict::Ignore`) included (see [`Metered`](crate::Metered)).
pub const ENQUEUED: &str = "fairq_jobs_enqueued_total";
/// Attempts started (counter).
pub const STARTED: &str = "fairq_jobs_started_total";
/// Attempts whose success the store recorded (counter).
pub const SUCCEEDED: &str = "fairq_jobs_succeeded_total";
/// Attempts whose failure the store recorded (counter).
pub const FAILED: &str = "fairq_jobs_failed_total";
/// Jobs that failed for good (counter).
pub const DEAD: &str = "fairq_jobs_dead_total";
/// Jobs taken back from dead workers (counter).
pub const RESCUED: &str = "fairq_jobs_rescued_total";
/// Finished jobs a worker's pruner deleted (counter).
pub const PRUNED: &str = "fairq_jobs_pruned_total";
/// Time from due to start, in seconds (histogram).
pub const WAIT_SECONDS: &str = "fairq_job_wait_seconds";
/// Handler run time, in seconds (histogram).
pub const RUN_SECONDS: &str = "fairq_job_run_seconds";
/// Attempts running in a worker (gauge).
pub const RUNNING: &str = "fairq_jobs_running";
/// Jobs in the store per queue and state (gauge).
pub const QUEUE_DEPTH: &str = "fairq_queue_depth";

#[cfg(feature = "metrics")]
fn labels(queue: &str, kind: &str, key: Option<&str>) -> Vec<::metrics::Label> {
    let mut labels = vec![
        ::metrics::Label::new("queue", queue.to_string()),
        ::metrics::Label::new("kind", kind.to_string()),
    ];
    if let Some(key) = key {
        labels.push(::metrics::Label::new("key", key.to_string()));
    }
    labels
}

#[cfg(feature = "metrics")]
fn job_labels(job: &Job, with_key: bool) -> Vec<::metrics::Label> {
    let key = with_key.then(|| job.key.as_deref().unwrap_or(""));
    labels(&job.queue, &job.kind, key)
}

/// Jobs about to be enqueued, counted by queue and kind, so that they can be recorded in
/// `fairq_jobs_enqueued_total` once the store accepted them: take the tally before handing
/// the jobs over, [`record`](Self::record) it after the store said yes. Without the crate's
/// `metrics` feature it holds and records nothing.
///
/// [`Metered`](crate::Metered) counts this way; so does a store that counts its own
/// enqueues (the `fairq` facade's `Store`).
///
/// ```
/// use fairq_worker::{metrics::EnqueueTally, Backend, MemoryBackend, NewJob};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryBackend::new();
/// let jobs = vec![NewJob::new("mail", "welcome", vec![]), NewJob::new("mail", "bye", vec![])];
/// let tally = EnqueueTally::of(&jobs);
/// store.enqueue_many(jobs).await.unwrap();
/// tally.record(); // +1 for {queue="mail",kind="welcome"}, +1 for {queue="mail",kind="bye"}
/// # });
/// ```
#[derive(Debug, Default)]
#[must_use = "a tally counts nothing until it is recorded"]
pub struct EnqueueTally {
    #[cfg(feature = "metrics")]
    counts: std::collections::BTreeMap<(String, String), u64>,
}

impl EnqueueTally {
    /// The tally of `jobs`.
    ///
    /// ```
    /// let job = fairq_worker::NewJob::new("q", "k", vec![]);
    /// fairq_worker::metrics::EnqueueTally::of(std::slice::from_ref(&job)).record();
    /// ```
    pub fn of(jobs: &[crate::job::NewJob]) -> EnqueueTally {
        #[cfg(feature = "metrics")]
        {
            let mut counts = std::collections::BTreeMap::new();
            for job in jobs {
                *counts
                    .entry((job.queue.clone(), job.kind.clone()))
                    .or_default() += 1;
            }
            EnqueueTally { counts }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = jobs;
            EnqueueTally {}
        }
    }

    /// Adds the tally to `fairq_jobs_enqueued_total{queue, kind}`.
    ///
    /// ```
    /// fairq_worker::metrics::EnqueueTally::of(&[]).record();
    /// ```
    pub fn record(self) {
        #[cfg(feature = "metrics")]
        for ((queue, kind), n) in self.counts {
            ::metrics::counter!(ENQUEUED, labels(&queue, &kind, None)).increment(n);
        }
    }
}

/// An attempt of `job` started `wait_ms` after the job became due.
pub(crate) fn started(job: &Job, wait_ms: u64, with_key: bool) {
    #[cfg(feature = "metrics")]
    {
        let labels = job_labels(job, with_key);
        ::metrics::counter!(STARTED, labels.clone()).increment(1);
        ::metrics::histogram!(WAIT_SECONDS, labels).record(wait_ms as f64 / 1e3);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (job, wait_ms, with_key);
}

/// An attempt of `job` ran for `elapsed`.
pub(crate) fn ran(job: &Job, elapsed: std::time::Duration, with_key: bool) {
    #[cfg(feature = "metrics")]
    ::metrics::histogram!(RUN_SECONDS, job_labels(job, with_key)).record(elapsed.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (job, elapsed, with_key);
}

/// The store recorded an attempt of `job`: a success, or a failure (`dead`: for good).
pub(crate) fn settled(job: &Job, succeeded: bool, dead: bool, with_key: bool) {
    #[cfg(feature = "metrics")]
    {
        let labels = job_labels(job, with_key);
        if succeeded {
            ::metrics::counter!(SUCCEEDED, labels).increment(1);
        } else {
            ::metrics::counter!(FAILED, labels.clone()).increment(1);
            if dead {
                ::metrics::counter!(DEAD, labels).increment(1);
            }
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (job, succeeded, dead, with_key);
}

/// A rescue of `queue` took back `n` jobs.
pub(crate) fn rescued(queue: &str, n: u64) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(RESCUED, "queue" => queue.to_string()).increment(n);
    #[cfg(not(feature = "metrics"))]
    let _ = (queue, n);
}

/// A worker's pruner deleted `n` finished jobs.
pub(crate) fn pruned(n: u64) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(PRUNED).increment(n);
    #[cfg(not(feature = "metrics"))]
    let _ = n;
}

/// `running` attempts of `queue` run in this worker now.
pub(crate) fn running(queue: &str, running: usize) {
    #[cfg(feature = "metrics")]
    ::metrics::gauge!(RUNNING, "queue" => queue.to_string()).set(running as f64);
    #[cfg(not(feature = "metrics"))]
    let _ = (queue, running);
}

/// The live jobs of `queue` per status, as the store counts them.
pub(crate) fn depth(queue: &str, live: LiveCounts) {
    #[cfg(feature = "metrics")]
    for (state, n) in [
        ("blocked", live.blocked),
        ("scheduled", live.scheduled),
        ("retrying", live.retrying),
        ("running", live.running),
    ] {
        ::metrics::gauge!(QUEUE_DEPTH, "queue" => queue.to_string(), "state" => state)
            .set(n as f64);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (queue, live);
}

/// True when the crate records metrics (its `metrics` feature is on).
pub(crate) const ON: bool = cfg!(feature = "metrics");
