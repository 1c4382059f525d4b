//! The worker's metrics, recorded through the [`metrics`](https://docs.rs/metrics) facade
//! when the crate's `metrics` feature is on (without it, nothing is recorded and the facade
//! is not a dependency). Install any recorder (a Prometheus exporter, say) in the process and
//! the numbers appear; without a recorder, recording costs next to nothing.
//!
//! | name | type | labels | what |
//! | --- | --- | --- | --- |
//! | `fairq_jobs_enqueued_total` | counter | queue, kind | jobs enqueued through a [`Metered`](crate::Metered) store |
//! | `fairq_jobs_started_total` | counter | queue, kind | attempts a worker started |
//! | `fairq_jobs_succeeded_total` | counter | queue, kind | attempts whose success the store recorded |
//! | `fairq_jobs_failed_total` | counter | queue, kind | attempts whose failure the store recorded (retried or dead) |
//! | `fairq_jobs_dead_total` | counter | queue, kind | jobs that failed for good |
//! | `fairq_jobs_rescued_total` | counter | queue | jobs of dead workers a worker's rescue took back |
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

use crate::backend::QueueStats;
use crate::job::Job;

/// Jobs enqueued (counter).
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

/// `n` jobs of `kind` were enqueued to `queue`.
pub(crate) fn enqueued(queue: &str, kind: &str, n: u64) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(ENQUEUED, labels(queue, kind, None)).increment(n);
    #[cfg(not(feature = "metrics"))]
    let _ = (queue, kind, n);
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

/// `running` attempts of `queue` run in this worker now.
pub(crate) fn running(queue: &str, running: usize) {
    #[cfg(feature = "metrics")]
    ::metrics::gauge!(RUNNING, "queue" => queue.to_string()).set(running as f64);
    #[cfg(not(feature = "metrics"))]
    let _ = (queue, running);
}

/// The store's numbers of one queue.
pub(crate) fn depth(stats: &QueueStats) {
    #[cfg(feature = "metrics")]
    {
        let c = &stats.counts;
        for (state, n) in [
            ("blocked", c.blocked),
            ("scheduled", c.scheduled),
            ("retrying", c.retrying),
            ("running", c.running),
        ] {
            ::metrics::gauge!(QUEUE_DEPTH, "queue" => stats.queue.clone(), "state" => state)
                .set(n as f64);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = stats;
}

/// True when the crate records metrics (its `metrics` feature is on).
pub(crate) const ON: bool = cfg!(feature = "metrics");
