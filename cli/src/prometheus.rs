//! `fairq work --metrics ADDR`: every metric of the process served for Prometheus at
//! `http://ADDR/metrics`: what the worker records through the `metrics` facade (the
//! `fairq_jobs_*`, `fairq_job_*` and `fairq_queue_depth` series of
//! [`fairq_worker::metrics`], with the crate's default `metrics` feature), and the command
//! line's own numbers per attempt of an `--exec` command.

use std::net::SocketAddr;

use fairq_worker::{JobOutcome, JobReport};
use metrics_exporter_prometheus::PrometheusBuilder;

use crate::error::CliError;

/// Attempts that finished, by queue, kind and outcome (`succeeded`, `retrying`, `dead`,
/// `unrecorded`).
pub(crate) const ATTEMPTS: &str = "fairq_cli_attempts_total";
/// How long attempts ran, in seconds, by queue and kind.
pub(crate) const ATTEMPT_SECONDS: &str = "fairq_cli_attempt_seconds";
/// Commands running now.
pub(crate) const RUNNING: &str = "fairq_cli_running_commands";

/// Installs the Prometheus recorder for the whole process and serves it on `addr` from the
/// current tokio runtime.
pub(crate) fn serve(addr: SocketAddr) -> Result<(), CliError> {
    let cannot = |reason: String| CliError::Usage(format!("--metrics {addr}: {reason}"));
    let (recorder, exporter) = PrometheusBuilder::new()
        .with_http_listener(addr)
        .build()
        .map_err(|e| cannot(e.to_string()))?;
    metrics::set_global_recorder(recorder)
        .map_err(|_| cannot("metrics are already being recorded in this process".into()))?;
    metrics::describe_counter!(
        ATTEMPTS,
        "Finished attempts of --exec commands, by outcome."
    );
    metrics::describe_histogram!(
        ATTEMPT_SECONDS,
        metrics::Unit::Seconds,
        "Run time of --exec attempts."
    );
    metrics::describe_gauge!(RUNNING, "--exec commands running now.");
    describe_worker_metrics();
    tokio::spawn(async move {
        if let Err(e) = exporter.await {
            crate::output_error_line(&format!("warning: the metrics endpoint stopped: {e:?}"));
        }
    });
    Ok(())
}

/// Records one finished attempt of a job of kind `kind` (a no-op without a recorder).
pub(crate) fn record_attempt(report: &JobReport, kind: &str) {
    let outcome = match report.outcome {
        JobOutcome::Succeeded => "succeeded",
        JobOutcome::Retry { .. } => "retrying",
        JobOutcome::Dead => "dead",
        JobOutcome::Unrecorded => "unrecorded",
    };
    let queue = report.job.queue.clone();
    metrics::counter!(ATTEMPTS, "queue" => queue.clone(), "kind" => kind.to_string(), "outcome" => outcome)
        .increment(1);
    metrics::histogram!(ATTEMPT_SECONDS, "queue" => queue, "kind" => kind.to_string())
        .record(report.elapsed.as_secs_f64());
}

/// Help lines for the worker's series.
fn describe_worker_metrics() {
    use fairq_worker::metrics as m;
    metrics::describe_counter!(m::ENQUEUED, "Jobs the store accepted from this process.");
    metrics::describe_counter!(m::STARTED, "Attempts the worker started.");
    metrics::describe_counter!(m::SUCCEEDED, "Attempts whose success the store recorded.");
    metrics::describe_counter!(m::FAILED, "Attempts whose failure the store recorded.");
    metrics::describe_counter!(m::DEAD, "Jobs that failed for good.");
    metrics::describe_counter!(m::RESCUED, "Jobs of dead workers taken back by a rescue.");
    metrics::describe_histogram!(
        m::WAIT_SECONDS,
        metrics::Unit::Seconds,
        "From when a job became due to when its attempt started."
    );
    metrics::describe_histogram!(
        m::RUN_SECONDS,
        metrics::Unit::Seconds,
        "How long handlers ran."
    );
    metrics::describe_gauge!(m::RUNNING, "Attempts running in this worker.");
    metrics::describe_gauge!(m::QUEUE_DEPTH, "Jobs in the store by queue and state.");
}
