//! `fairq work`: a [`Worker`] whose handler runs a command per job, until SIGTERM or Ctrl-C
//! (or, with `--until-idle`, until the queues are empty).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fairq_core::job::State as LifeState;
use fairq_worker::{
    Backend, Handlers, Inspect, Job, JobOutcome, JobReport, JobStatus, ListFilter, QueueConfig,
    QueueStats, ShutdownReport, Worker,
};
use serde::Serialize;

use crate::args::WorkArgs;
use crate::error::CliError;
use crate::exec::ExecCommand;
use crate::output::{self, Output};
use crate::printable::printable;
use crate::signals::Signals;

/// One finished attempt, as `--json` prints it.
#[derive(Serialize)]
struct Finished<'a> {
    id: u64,
    queue: &'a str,
    kind: &'a str,
    key: Option<&'a str>,
    attempt: u32,
    outcome: &'static str,
    retry_at: Option<String>,
    elapsed_ms: f64,
    error: Option<&'a str>,
}

fn outcome_name(outcome: &JobOutcome) -> &'static str {
    match outcome {
        JobOutcome::Succeeded => "succeeded",
        JobOutcome::Retry { .. } => "retrying",
        JobOutcome::Dead => "dead",
        JobOutcome::Unrecorded => "unrecorded",
    }
}

/// One line about a finished attempt.
fn finished_line(report: &JobReport, json: bool) -> String {
    let job = &report.job;
    let error = report.result.as_ref().err().map(|f| f.message.as_str());
    let retry_at = match report.outcome {
        JobOutcome::Retry { run_at } => Some(output::timestamp(run_at)),
        _ => None,
    };
    if json {
        let finished = Finished {
            id: job.claim.id.0,
            queue: &job.queue,
            kind: &job.kind,
            key: job.key.as_deref(),
            attempt: job.attempt,
            outcome: outcome_name(&report.outcome),
            retry_at,
            elapsed_ms: report.elapsed.as_secs_f64() * 1e3,
            error,
        };
        return serde_json::to_string(&finished).unwrap_or_default();
    }
    let what = match (&report.outcome, error) {
        (JobOutcome::Succeeded, _) => "succeeded".to_string(),
        (JobOutcome::Retry { .. }, Some(e)) => {
            format!("failed, retry at {}: {e}", retry_at.unwrap_or_default())
        }
        (JobOutcome::Dead, Some(e)) => format!("failed for good: {e}"),
        (JobOutcome::Unrecorded, _) => {
            "finished, but the store did not record it; it will run again".to_string()
        }
        (_, None) => outcome_name(&report.outcome).to_string(),
    };
    // One line per attempt, whatever the names and the command's stderr hold.
    let line = format!(
        "job {} {}/{}{} attempt {}: {what} ({})",
        job.claim.id,
        job.queue,
        &job.kind,
        job.key
            .as_deref()
            .map(|k| format!(" key {k}"))
            .unwrap_or_default(),
        job.attempt,
        output::short_duration(report.elapsed),
    );
    printable(&line).into_owned()
}

/// Counts of finished attempts.
#[derive(Default)]
struct Tally {
    succeeded: AtomicU64,
    retrying: AtomicU64,
    dead: AtomicU64,
    unrecorded: AtomicU64,
}

impl Tally {
    fn add(&self, outcome: &JobOutcome) {
        let counter = match outcome {
            JobOutcome::Succeeded => &self.succeeded,
            JobOutcome::Retry { .. } => &self.retrying,
            JobOutcome::Dead => &self.dead,
            JobOutcome::Unrecorded => &self.unrecorded,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Serialize)]
struct Summary {
    event: &'static str,
    succeeded: u64,
    failed_will_retry: u64,
    dead: u64,
    unrecorded: u64,
    abandoned: Vec<u64>,
}

/// The last line `work` prints on stderr: what the run's attempts came to.
fn summary_line(summary: &Summary) -> String {
    let unrecorded = if summary.unrecorded == 0 {
        String::new()
    } else {
        format!(", {} not recorded (will run again)", summary.unrecorded)
    };
    let abandoned = if summary.abandoned.is_empty() {
        String::new()
    } else {
        format!(
            "; still running at the deadline, left to be rescued: {}",
            summary
                .abandoned
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "fairq: stopped: {} succeeded, {} failed and will retry, {} dead{unrecorded}{abandoned}",
        summary.succeeded, summary.failed_will_retry, summary.dead
    )
}

/// True when no job of `queues` is running in the store or due now (jobs scheduled for
/// later, jobs blocked on a dependency, and the jobs of a paused queue, which no claim
/// takes until it is resumed, do not count).
async fn nothing_due<B: Inspect>(store: &B, queues: &[String]) -> Result<bool, CliError> {
    let stats = store.stats().await?;
    let paused = store.paused().await?;
    let mine: Vec<&QueueStats> = stats.iter().filter(|s| queues.contains(&s.queue)).collect();
    if mine.iter().any(|s| s.counts.running > 0) {
        return Ok(false);
    }
    let now = output::now_millis();
    for queue in mine.into_iter().filter(|q| !paused.contains(&q.queue)) {
        for status in [JobStatus::Scheduled, JobStatus::Retrying] {
            if queue.counts.get(status) == 0 {
                continue;
            }
            let mut after = None;
            loop {
                let page = store
                    .list(ListFilter {
                        queue: Some(queue.queue.clone()),
                        status: Some(status),
                        after,
                        limit: 500,
                    })
                    .await?;
                let due = page.iter().any(|job| match job.state {
                    LifeState::Scheduled { run_at } | LifeState::Retrying { run_at } => {
                        run_at <= now
                    }
                    _ => false,
                });
                if due {
                    return Ok(false);
                }
                match page.last() {
                    Some(last) if page.len() == 500 => after = Some(last.id),
                    _ => break,
                }
            }
        }
    }
    Ok(true)
}

/// Resolves once the worker runs nothing and nothing of `queues` is running or due, seen
/// twice in a row (so a job claimed or retried between two looks is not missed).
async fn idle<B: Inspect>(
    store: &B,
    queues: &[String],
    running: impl Fn() -> usize,
) -> Result<(), CliError> {
    let mut quiet = 0;
    loop {
        if running() == 0 && nothing_due(store, queues).await? && running() == 0 {
            quiet += 1;
            if quiet == 2 {
                return Ok(());
            }
        } else {
            quiet = 0;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Writes one line to stderr, credentials hidden, ignoring a closed stream.
pub(crate) fn note(text: &str) {
    crate::output_error_line(text);
}

/// The command `work` runs per job, from `args`; refused when a queue name is empty or the
/// program cannot be found (checked before the store is opened).
pub(crate) fn command(args: &WorkArgs) -> Result<ExecCommand, CliError> {
    if args.queue.iter().any(String::is_empty) {
        return Err(CliError::Usage("the queue must not be empty".into()));
    }
    let mut command = ExecCommand::new(args.exec.iter().cloned())
        .ok_or_else(|| CliError::Usage("--exec needs a command".into()))?;
    command.check().map_err(CliError::Usage)?;
    if let Some(limit) = args.job_timeout {
        command = command.timeout(limit);
    }
    Ok(command)
}

/// `fairq work`: serves `args`' queues with `command` (from [`command`]).
pub(crate) async fn work<B: Inspect>(
    store: Arc<B>,
    args: &WorkArgs,
    command: ExecCommand,
    signals: &mut Signals,
    out: &mut Output,
) -> Result<(), CliError> {
    let children = command.children();
    let command = Arc::new(command);
    let tally = Arc::new(Tally::default());
    let json = out.is_json();

    let mut builder = Worker::builder(Arc::clone(&store))
        .shutdown_timeout(args.shutdown_timeout)
        .error_backoff(Duration::from_millis(200), Duration::from_secs(10));
    for queue in &args.queue {
        let mut config = QueueConfig::default()
            .concurrency(args.concurrency)
            .lease(args.lease)
            .poll_interval(args.poll);
        if let Some(depth) = args.prefetch {
            config = config.prefetch(depth);
        }
        builder = builder.queue(queue.clone(), config);
    }
    let retention = crate::args::retention(args.prune_after, args.prune_dead_after, args.keep_dead);
    if !retention.keeps_everything() {
        builder = builder.prune_finished(retention);
    }
    let run = Arc::clone(&command);
    let finished = Arc::clone(&tally);
    let worker = builder
        // One handler serves every kind; jobs keep their own kind (in logs and metrics too).
        .handlers(Handlers::new().otherwise(move |job: Job| {
            let command = Arc::clone(&run);
            async move {
                let kind = job.kind.clone();
                command.run(&job, &kind).await
            }
        }))
        .on_finished(move |report| {
            finished.add(&report.outcome);
            crate::prometheus::record_attempt(report, &report.job.kind);
            let line = finished_line(report, json);
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
        })
        .on_error(|err| note(&format!("warning: {err}")))
        .build()?;

    // A queue name with a typo would wait forever in silence: say which queues are new.
    let known: Vec<String> = store.stats().await?.into_iter().map(|s| s.queue).collect();
    for queue in args.queue.iter().filter(|q| !known.contains(q)) {
        let others = if known.is_empty() {
            "the store has no jobs yet".to_string()
        } else {
            format!("queues with jobs: {}", known.join(", "))
        };
        note(&format!(
            "fairq: queue {queue:?} has never had a job ({others}); waiting for its first"
        ));
    }
    if let Some(addr) = args.metrics {
        crate::prometheus::serve(addr)?;
        note(&format!(
            "fairq: metrics for Prometheus at http://{addr}/metrics"
        ));
    }
    // Connections opened and statements prepared before the first job arrives.
    worker.warm_up().await?;
    let handle = worker.start()?;
    note(&format!(
        "fairq: serving {} with `{}` ({} at a time per queue); SIGTERM or Ctrl-C stops",
        args.queue.join(", "),
        command.display(),
        args.concurrency
    ));
    let why = if args.until_idle {
        tokio::select! {
            signal = signals.recv() => signal?,
            done = idle(&*store, &args.queue, || handle.running()) => { done?; "idle" }
        }
    } else {
        signals.recv().await?
    };
    let running = handle.running();
    let shutdown = handle.shutdown(args.shutdown_timeout);
    tokio::pin!(shutdown);
    // The first poll of the shutdown stops claiming; only then is that announced.
    let early: Option<ShutdownReport> = tokio::select! {
        biased;
        report = &mut shutdown => Some(report),
        () = std::future::ready(()) => None,
    };
    if why != "idle" {
        // The commands run in process groups of their own, so a Ctrl-C in the terminal did
        // not reach them: ask them to finish now.
        children.terminate();
        note(&format!(
            "fairq: {why}: no new jobs; sent SIGTERM to the running commands and waiting up \
             to {} for {running} running job(s)",
            humantime::format_duration(args.shutdown_timeout),
        ));
    }
    let report = match early {
        Some(report) => report,
        None => {
            tokio::select! {
                report = &mut shutdown => report,
                signal = signals.recv() => {
                    // A second signal: stop waiting. Running jobs end with the process; their
                    // leases expire and another worker rescues them.
                    note(&format!("fairq: {}: stopping now", signal?));
                    return Err(CliError::Interrupted);
                }
            }
        }
    };
    let summary = Summary {
        event: "stopped",
        succeeded: tally.succeeded.load(Ordering::Relaxed),
        failed_will_retry: tally.retrying.load(Ordering::Relaxed),
        dead: tally.dead.load(Ordering::Relaxed),
        unrecorded: tally.unrecorded.load(Ordering::Relaxed),
        abandoned: report.abandoned.iter().map(|id| id.0).collect(),
    };
    if json {
        out.json(&summary)?;
    } else {
        note(&summary_line(&summary));
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use fairq_worker::{MemoryBackend, NewJob};

    use super::*;
    use crate::output::Format;

    #[test]
    fn finished_lines_say_what_happened() {
        let mut job = Job::example(vec![]);
        job.kind = "mail".into();
        job.key = Some("t".into());
        let report = JobReport {
            job,
            result: Err(fairq_worker::Failure::retryable("exit status 2: boom")),
            outcome: JobOutcome::Dead,
            elapsed: Duration::from_millis(3),
        };
        assert_eq!(
            finished_line(&report, false),
            "job 1 default/mail key t attempt 1: failed for good: exit status 2: boom (3.00 ms)"
        );
        let json: serde_json::Value = serde_json::from_str(&finished_line(&report, true)).unwrap();
        assert_eq!(json["outcome"], "dead");
        assert_eq!(json["kind"], "mail");
        assert_eq!(json["error"], "exit status 2: boom");
    }

    #[test]
    fn the_summary_counts_outcomes_the_store_did_not_record() {
        let mut summary = Summary {
            event: "stopped",
            succeeded: 3,
            failed_will_retry: 1,
            dead: 0,
            unrecorded: 0,
            abandoned: vec![],
        };
        assert_eq!(
            summary_line(&summary),
            "fairq: stopped: 3 succeeded, 1 failed and will retry, 0 dead"
        );
        summary.unrecorded = 2;
        assert_eq!(
            summary_line(&summary),
            "fairq: stopped: 3 succeeded, 1 failed and will retry, 0 dead, 2 not recorded \
             (will run again)"
        );
        summary.abandoned = vec![7, 9];
        assert_eq!(
            summary_line(&summary),
            "fairq: stopped: 3 succeeded, 1 failed and will retry, 0 dead, 2 not recorded \
             (will run again); still running at the deadline, left to be rescued: 7, 9"
        );
    }

    /// `fairq work --queue q --concurrency 1 --until-idle --exec EXEC...`, polling often.
    fn until_idle(exec: Vec<String>) -> WorkArgs {
        WorkArgs {
            queue: vec!["q".into()],
            concurrency: 1,
            prefetch: None,
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(10),
            job_timeout: None,
            shutdown_timeout: Duration::from_secs(5),
            until_idle: true,
            prune_after: None,
            prune_dead_after: None,
            keep_dead: false,
            serve: None,
            dashboard: crate::serve::DashboardArgs {
                token: None,
                refresh: Duration::from_secs(2),
            },
            metrics: None,
            exec,
        }
    }

    #[tokio::test]
    async fn until_idle_stops_when_only_a_paused_queues_jobs_are_left() {
        // No claim takes a paused queue's jobs: waiting for them would never end.
        let store = Arc::new(MemoryBackend::new());
        let waiting = store
            .enqueue(NewJob::new("q", "a", b"1".to_vec()))
            .await
            .unwrap();
        store.set_paused("q", true).await.unwrap();
        let mut out = Output::buffer(Format::Json);
        let mut signals = Signals::listen().unwrap();
        let worked = tokio::time::timeout(
            Duration::from_secs(60),
            work(
                Arc::clone(&store),
                &until_idle(vec!["true".into()]),
                command(&until_idle(vec!["true".into()])).unwrap(),
                &mut signals,
                &mut out,
            ),
        )
        .await
        .expect("until-idle returns on a paused queue");
        worked.unwrap();
        let job = store.get(waiting).await.unwrap().unwrap();
        assert_eq!(
            job.status(),
            JobStatus::Scheduled,
            "left for the queue's resumption"
        );
    }

    #[tokio::test]
    async fn until_idle_runs_every_job_of_every_kind_then_stops() {
        let dir = tempfile::tempdir().unwrap();
        let out_file = dir.path().join("out.txt");
        let store = Arc::new(MemoryBackend::new());
        for (kind, payload) in [("a", "1"), ("b", "2"), ("c", "3")] {
            store
                .enqueue(NewJob::new("q", kind, payload.as_bytes().to_vec()))
                .await
                .unwrap();
        }
        let failing = store
            .enqueue(
                NewJob::new("q", "d", b"x".to_vec()).retry(fairq_core::retry::RetryPolicy::new(0)),
            )
            .await
            .unwrap();
        let later = store
            .enqueue(NewJob::new("q", "a", b"9".to_vec()).delay(Duration::from_secs(3_600)))
            .await
            .unwrap();
        let script = format!(
            "[ \"$FAIRQ_KIND\" = d ] && {{ echo nope >&2; exit 1; }}; {{ cat; echo \" $FAIRQ_KIND\"; }} >> {}",
            out_file.display()
        );
        let args = until_idle(vec!["sh".into(), "-c".into(), script]);
        let mut out = Output::buffer(Format::Json);
        let mut signals = Signals::listen().unwrap();
        work(
            Arc::clone(&store),
            &args,
            command(&args).unwrap(),
            &mut signals,
            &mut out,
        )
        .await
        .unwrap();
        let summary: serde_json::Value = serde_json::from_str(&out.contents()).unwrap();
        assert_eq!(summary["succeeded"], 3);
        assert_eq!(summary["dead"], 1);
        let mut lines: Vec<String> = std::fs::read_to_string(&out_file)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        lines.sort();
        assert_eq!(lines, ["1 a", "2 b", "3 c"]);
        let dead = store.get(failing).await.unwrap().unwrap();
        assert_eq!(dead.status(), JobStatus::Dead);
        assert_eq!(dead.last_error.as_deref(), Some("exit status 1: nope"));
        // A job due later does not keep the worker busy; it waits for another run.
        let later = store.get(later).await.unwrap().unwrap();
        assert_eq!(later.status(), JobStatus::Scheduled);
    }

    #[tokio::test]
    async fn prune_after_deletes_jobs_that_finished_long_ago_in_every_queue_keeping_dead_ones() {
        let clock = fairq_worker::ManualClock::new(1_700_000_000_000);
        let store = Arc::new(MemoryBackend::with_clock(clock.clone()));
        // Jobs of another queue that finished two hours before the worker starts: one
        // succeeded, one died (kept by --keep-dead).
        let finish = |succeed: bool| {
            let store = Arc::clone(&store);
            async move {
                let job = NewJob::new("elsewhere", "a", Vec::new())
                    .retry(fairq_worker::fairq_core::retry::RetryPolicy::new(0));
                let id = store.enqueue(job).await.unwrap();
                let claimed = store
                    .claim("elsewhere", 1, Duration::from_secs(30))
                    .await
                    .unwrap();
                if succeed {
                    store.complete(claimed[0].claim).await.unwrap();
                } else {
                    let no = fairq_worker::Failure::retryable("no");
                    store.fail(&claimed[0], no).await.unwrap();
                }
                id
            }
        };
        let old = finish(true).await;
        let dead = finish(false).await;
        clock.advance(Duration::from_secs(2 * 3_600));
        let fresh = store
            .enqueue(NewJob::new("q", "a", Vec::new()))
            .await
            .unwrap();
        let args = WorkArgs {
            prune_after: Some(Duration::from_secs(3_600)),
            keep_dead: true,
            ..until_idle(vec!["true".into()])
        };
        let mut out = Output::buffer(Format::Json);
        let mut signals = Signals::listen().unwrap();
        work(
            Arc::clone(&store),
            &args,
            command(&args).unwrap(),
            &mut signals,
            &mut out,
        )
        .await
        .unwrap();
        assert!(store.get(old).await.unwrap().is_none(), "pruned");
        let dead = store.get(dead).await.unwrap().expect("dead jobs kept");
        assert_eq!(dead.status(), JobStatus::Dead);
        // The job this run finished is younger than the age: kept.
        let fresh = store.get(fresh).await.unwrap().unwrap();
        assert_eq!(fresh.status(), JobStatus::Succeeded);
    }
}
