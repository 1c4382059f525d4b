//! Operator commands: enqueue, stats, list, retry, purge, prune. Each works on any
//! [`Backend`], so it is tested on the in-memory store and runs unchanged on the others.

use std::io::Read;

use fairq_core::job::{Millis, State as LifeState};
use fairq_core::retry::RetryPolicy;
use fairq_worker::{
    Backend, BackendError, Inspect, JobId, JobInfo, JobStatus, ListFilter, NewJob, OnConflict,
    Purge, QueueStats, ReviveTarget,
};
use serde::Serialize;

use crate::args::{
    EnqueueArgs, ListArgs, PruneArgs, PurgeArgs, QueueAction, QueueArgs, ReviveArgs, StatsArgs,
};
use crate::error::CliError;
use crate::output::{self, Output};
use crate::printable::printable;

/// Reads at most `max` bytes of `source` (named `what` in messages); a source with more is
/// refused as soon as the byte past the limit arrives, without reading the rest.
fn read_limited(source: impl Read, max: u64, what: &str) -> Result<Vec<u8>, CliError> {
    let mut bytes = Vec::new();
    source
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::io(format!("reading the payload from {what}"), e))?;
    if bytes.len() as u64 > max {
        return Err(too_big(max));
    }
    Ok(bytes)
}

fn too_big(max: u64) -> CliError {
    CliError::Usage(format!(
        "the payload is larger than {max} bytes, the most --max-payload allows"
    ))
}

/// `json` (valid JSON) without the whitespace between its tokens; strings, numbers and
/// the order of keys are kept byte for byte.
fn compact_json(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in json {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = b == b'"';
            out.push(b);
        }
    }
    out
}

/// The file `@PATH` names, whatever bytes `PATH` holds; `None` without the `@`.
fn file_name(payload: &std::ffi::OsStr) -> Option<&std::path::Path> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        payload
            .as_bytes()
            .strip_prefix(b"@")
            .map(|name| std::path::Path::new(std::ffi::OsStr::from_bytes(name)))
    }
    #[cfg(not(unix))]
    {
        payload
            .to_str()
            .and_then(|text| text.strip_prefix('@'))
            .map(std::path::Path::new)
    }
}

/// Builds the job `fairq enqueue` adds; `stdin` is read when the payload is `-`, a file
/// when it is `@PATH`; either way at most `--max-payload` bytes are read.
pub(crate) fn build_job(args: &EnqueueArgs, stdin: impl Read) -> Result<NewJob, CliError> {
    let max = args.max_payload;
    let bytes = if args.payload == "-" {
        read_limited(stdin, max, "stdin")?
    } else if let Some(path) = file_name(&args.payload) {
        let shown = path.display().to_string();
        let file = std::fs::File::open(path)
            .map_err(|e| CliError::io(format!("opening the payload file {shown}"), e))?;
        read_limited(file, max, &shown)?
    } else {
        let Some(text) = args.payload.to_str() else {
            return Err(CliError::Usage(
                "invalid JSON payload: the text given is not UTF-8".into(),
            ));
        };
        if text.len() as u64 > max {
            return Err(too_big(max));
        }
        text.as_bytes().to_vec()
    };
    // Checked as JSON, then stored compact but otherwise exactly as given: a number past
    // 64 bits, or one with more digits than a float keeps, stays as written (read into a
    // `serde_json::Value` and written out again it became a rounded float), and keys keep
    // their order.
    serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).map_err(CliError::BadPayload)?;
    let mut job = NewJob::new(&args.queue, &args.kind, compact_json(&bytes));
    if args.queue.is_empty() || args.kind.is_empty() {
        return Err(CliError::Usage(
            "the queue and the kind must not be empty".into(),
        ));
    }
    if let Some(key) = &args.key {
        job = job.key(key);
    }
    if let Some(delay) = args.delay {
        job = job.delay(delay);
    }
    if let Some(policy) = retry_policy(args.retries, &args.backoff) {
        job = job.retry(policy);
    }
    if let Some(unique) = &args.unique {
        // A duplicate is always reported by the store, so `enqueue` can say whether
        // anything was added; with --if-absent it is then not an error.
        job = job.unique(unique, OnConflict::Error);
    }
    if let Some(after) = args.after {
        job = job.after(JobId(after));
    }
    for (name, value) in &args.meta {
        job = job.meta(name, value);
    }
    Ok(job)
}

/// The policy for `--retries` and `--backoff`, or `None` for the store's default.
fn retry_policy(retries: Option<u32>, backoff: &[std::time::Duration]) -> Option<RetryPolicy> {
    if retries.is_none() && backoff.is_empty() {
        return None;
    }
    let default = RetryPolicy::default();
    let max = retries.or(default.max_retries()).unwrap_or(24);
    let policy = RetryPolicy::new(max);
    Some(if backoff.is_empty() {
        policy
            .with_backoff(default.backoff().clone())
            .with_jitter(default.jitter_permille())
    } else {
        policy.with_delays(backoff.iter().copied())
    })
}

#[derive(Serialize)]
struct Enqueued<'a> {
    id: u64,
    queue: &'a str,
    kind: &'a str,
    key: Option<&'a str>,
    /// False when `--if-absent` found the unique key taken and added nothing.
    enqueued: bool,
}

/// `fairq enqueue` of `job`, which [`build_job`] made from `args` (before the store was
/// opened, so bad input never creates a store).
pub(crate) async fn enqueue<B: Backend>(
    store: &B,
    args: &EnqueueArgs,
    job: NewJob,
    out: &mut Output,
) -> Result<(), CliError> {
    let (id, enqueued) = match store.enqueue(job).await {
        Ok(id) => (id, true),
        Err(BackendError::Duplicate { existing, .. }) if args.if_absent => (existing, false),
        Err(e) => return Err(e.into()),
    };
    if out.is_json() {
        out.json(&Enqueued {
            id: id.0,
            queue: &args.queue,
            kind: &args.kind,
            key: args.key.as_deref(),
            enqueued,
        })
    } else if !enqueued {
        out.line(format!(
            "nothing enqueued: job {id} of queue {} already has unique key {}",
            printable(&args.queue),
            printable(args.unique.as_deref().unwrap_or_default())
        ))
    } else {
        out.line(format!(
            "enqueued job {id} on queue {} (kind {}{})",
            printable(&args.queue),
            printable(&args.kind),
            args.key
                .as_deref()
                .map(|k| format!(", key {}", printable(k)))
                .unwrap_or_default()
        ))
    }
}

/// Fails with [`CliError::UnknownQueue`] unless `queue` has jobs in `store`.
async fn check_queue<B: Backend>(store: &B, queue: &str) -> Result<(), CliError> {
    let stats = store.stats().await?;
    if stats.iter().any(|s| s.queue == queue) {
        Ok(())
    } else {
        Err(CliError::UnknownQueue {
            queue: queue.to_string(),
            known: stats.into_iter().map(|s| s.queue).collect(),
        })
    }
}

#[derive(Serialize)]
struct StatsRow<'a> {
    #[serde(flatten)]
    stats: &'a QueueStats,
    pending: u64,
    retry_percentage: f64,
}

/// `fairq stats`; ages are relative to `now` (ms since the Unix epoch).
pub(crate) async fn stats<B: Backend>(
    store: &B,
    args: &StatsArgs,
    now: Millis,
    out: &mut Output,
) -> Result<(), CliError> {
    let mut all = store.stats().await?;
    if let Some(queue) = &args.queue {
        if !all.iter().any(|s| &s.queue == queue) {
            return Err(CliError::UnknownQueue {
                queue: queue.clone(),
                known: all.into_iter().map(|s| s.queue).collect(),
            });
        }
        all.retain(|s| &s.queue == queue);
    }
    all.sort_by(|a, b| a.queue.cmp(&b.queue));
    if out.is_json() {
        let rows: Vec<StatsRow<'_>> = all
            .iter()
            .map(|stats| StatsRow {
                stats,
                pending: stats.counts.pending(),
                retry_percentage: stats.retries.retry_percentage(),
            })
            .collect();
        return out.json(&rows);
    }
    if all.is_empty() {
        return out.line("no jobs");
    }
    let counts = [
        "blocked",
        "scheduled",
        "running",
        "retrying",
        "succeeded",
        "dead",
    ];
    let timings = [
        "retries",
        "run p50",
        "run p95",
        "run p99",
        "oldest error",
        "next retry",
    ];
    let count_cells = |s: &QueueStats| {
        let c = &s.counts;
        [
            c.blocked,
            c.scheduled,
            c.running,
            c.retrying,
            c.succeeded,
            c.dead,
        ]
        .map(|n| n.to_string())
    };
    let timing_cells = |s: &QueueStats| {
        let ms = |v: u64| {
            if s.processing_ms.count == 0 {
                "-".to_string()
            } else {
                output::short_duration(std::time::Duration::from_millis(v))
            }
        };
        [
            format!("{:.1}%", s.retries.retry_percentage()),
            ms(s.processing_ms.p50),
            ms(s.processing_ms.p95),
            ms(s.processing_ms.p99),
            s.oldest_error_at
                .map(|at| output::age(at, now))
                .unwrap_or_else(|| "-".into()),
            // After a retry sweep stopped at a failed retry, the time of the next sweep.
            match s.next_retry_at {
                None => "-".into(),
                Some(at) if at <= now => "due".into(),
                Some(at) => output::age(at, now),
            },
        ]
    };
    let queue = std::iter::once("queue");
    let mut wide = output::Grid::new(queue.clone().chain(counts).chain(timings))
        .right(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        .prose(&[11, 12]);
    for s in &all {
        let mut row = vec![s.queue.clone()];
        row.extend(count_cells(s));
        row.extend(timing_cells(s));
        wide.row(row);
    }
    if out.fits(&wide) {
        return out.table(&wide);
    }
    // A narrow terminal: the counts, then the retries and timings.
    let mut jobs = output::Grid::new(queue.clone().chain(counts)).right(&[1, 2, 3, 4, 5, 6]);
    let mut times = output::Grid::new(queue.chain(timings))
        .right(&[1, 2, 3, 4])
        .prose(&[5, 6]);
    for s in &all {
        jobs.row(
            std::iter::once(s.queue.clone())
                .chain(count_cells(s))
                .collect(),
        );
        times.row(
            std::iter::once(s.queue.clone())
                .chain(timing_cells(s))
                .collect(),
        );
    }
    out.table(&jobs)?;
    out.table(&times)
}

/// A job as `fairq list --json` prints it.
#[derive(Serialize)]
struct JobRow {
    id: u64,
    queue: String,
    kind: String,
    key: Option<String>,
    state: JobStatus,
    attempts: u32,
    enqueued_at: String,
    /// When it becomes due (scheduled, retrying), its lease deadline (running), or when it
    /// finished.
    at: Option<String>,
    dead_reason: Option<String>,
    last_error: Option<String>,
    unique_key: Option<String>,
    depends_on: Option<u64>,
    /// The payload as stored when it is JSON (numbers, key order and escapes as written),
    /// or else its text as a JSON string.
    payload: Payload,
    metadata: std::collections::BTreeMap<String, String>,
}

/// A job's payload in `list --json`.
#[derive(Serialize)]
#[serde(untagged)]
enum Payload {
    /// JSON, written out byte for byte.
    Json(Box<serde_json::value::RawValue>),
    /// Anything else, as text.
    Text(String),
}

/// The time that matters for a job in its state.
fn state_time(state: &LifeState) -> Option<u64> {
    match state {
        LifeState::Blocked => None,
        LifeState::Scheduled { run_at } | LifeState::Retrying { run_at } => Some(*run_at),
        LifeState::Running { lease } => Some(lease.deadline),
        LifeState::Succeeded { at } | LifeState::Dead { at, .. } => Some(*at),
    }
}

fn job_row(info: JobInfo) -> JobRow {
    // Not read into a `serde_json::Value`: that rounds numbers past 64 bits or a float's
    // digits, sorts keys, and refuses what it cannot hold (`1e400`, deep nesting).
    let payload = std::str::from_utf8(&info.payload)
        .ok()
        .and_then(|text| serde_json::value::RawValue::from_string(text.trim().to_string()).ok())
        .map_or_else(
            || Payload::Text(String::from_utf8_lossy(&info.payload).into_owned()),
            Payload::Json,
        );
    JobRow {
        id: info.id.0,
        state: info.status(),
        at: state_time(&info.state).map(output::timestamp),
        dead_reason: match &info.state {
            LifeState::Dead { reason, .. } => Some(reason.to_string()),
            _ => None,
        },
        queue: info.queue,
        kind: info.kind,
        key: info.key,
        attempts: info.attempts,
        enqueued_at: output::timestamp(info.enqueued_at),
        last_error: info.last_error,
        unique_key: info.unique_key,
        depends_on: info.depends_on.map(|d| d.0),
        payload,
        metadata: info.metadata,
    }
}

/// A short description of when, for the table.
fn when(state: &LifeState, now: u64) -> String {
    match state {
        LifeState::Blocked => "waits for its dependency".into(),
        LifeState::Scheduled { run_at } | LifeState::Retrying { run_at } => {
            if *run_at <= now {
                "due".into()
            } else {
                format!("due {}", output::age(*run_at, now))
            }
        }
        LifeState::Running { lease } => format!("lease ends {}", output::age(lease.deadline, now)),
        LifeState::Succeeded { at } => format!("finished {}", output::age(*at, now)),
        LifeState::Dead { at, reason } => format!("died {} ({reason})", output::age(*at, now)),
    }
}

/// Cuts `text` to at most `max` characters, marking the cut.
fn clip(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// `fairq list`; ages are relative to `now` (ms since the Unix epoch).
pub(crate) async fn list<B: Backend>(
    store: &B,
    args: &ListArgs,
    now: Millis,
    out: &mut Output,
) -> Result<(), CliError> {
    if let Some(queue) = &args.queue {
        check_queue(store, queue).await?;
    }
    let filter = ListFilter {
        queue: args.queue.clone(),
        status: args.state.map(JobStatus::from),
        after: args.after.map(JobId),
        limit: args.limit,
    };
    let jobs = store.list(filter).await?;
    if out.is_json() {
        let rows: Vec<JobRow> = jobs.into_iter().map(job_row).collect();
        return out.json(&rows);
    }
    if jobs.is_empty() {
        return out.line("no jobs");
    }
    let shown = jobs.len();
    let first = jobs.first().map(|j| j.id);
    let last = jobs.last().map(|j| j.id);
    let error = |job: &JobInfo| {
        job.last_error
            .as_deref()
            .map(|e| clip(e, 60))
            .unwrap_or_else(|| "-".into())
    };
    let mut wide = output::Grid::new([
        "id",
        "queue",
        "kind",
        "key",
        "state",
        "attempts",
        "enqueued",
        "when",
        "last error",
    ])
    .right(&[0, 5])
    .prose(&[6, 7, 8]);
    for job in &jobs {
        wide.row(vec![
            job.id.to_string(),
            job.queue.clone(),
            job.kind.clone(),
            job.key.clone().unwrap_or_else(|| "-".into()),
            job.status().to_string(),
            job.attempts.to_string(),
            output::age(job.enqueued_at, now),
            when(&job.state, now),
            error(job),
        ]);
    }
    if out.fits(&wide) {
        out.table(&wide)?;
    } else {
        // A narrow terminal: without the enqueue age, then without the errors, then
        // without the attempt counts (`--json` has everything).
        let narrow = |with_errors: bool, with_tries: bool| {
            let mut headers = vec!["id", "queue", "kind", "key", "state", "when"];
            if with_tries {
                headers.push("tries");
            }
            if with_errors {
                headers.push("last error");
            }
            let mut grid = output::Grid::new(headers).right(&[0, 6]).prose(&[5, 7]);
            for job in &jobs {
                let mut row = vec![
                    job.id.to_string(),
                    job.queue.clone(),
                    job.kind.clone(),
                    job.key.clone().unwrap_or_else(|| "-".into()),
                    job.status().to_string(),
                    when(&job.state, now),
                ];
                if with_tries {
                    row.push(job.attempts.to_string());
                }
                if with_errors {
                    row.push(error(job));
                }
                grid.row(row);
            }
            grid
        };
        let choice = [
            narrow(true, true),
            narrow(false, true),
            narrow(false, false),
        ]
        .into_iter()
        .enumerate()
        .find(|(_, grid)| out.fits(grid));
        let (level, grid) = choice.unwrap_or_else(|| (2, narrow(false, false)));
        out.table(&grid)?;
        if level > 0 && jobs.iter().any(|j| j.last_error.is_some()) {
            out.line("(last errors left out to fit the terminal: --json shows them)")?;
        }
    }
    if shown == args.limit
        && let (Some(first), Some(last)) = (first, last)
    {
        out.line(format!(
            "{shown} jobs shown (ids {first} to {last}), the most one page holds: \
             add --after {last} for the next page"
        ))?;
    }
    Ok(())
}

#[derive(Serialize)]
struct Count<'a> {
    action: &'a str,
    count: u64,
}

fn report(out: &mut Output, action: &str, count: u64, sentence: String) -> Result<(), CliError> {
    if out.is_json() {
        out.json(&Count { action, count })
    } else {
        out.line(sentence)
    }
}

fn jobs(n: u64) -> String {
    if n == 1 {
        "1 job".into()
    } else {
        format!("{n} jobs")
    }
}

/// Where a job stands, as a sentence ends: "job 4 {is running}".
fn standing(status: JobStatus) -> &'static str {
    match status {
        JobStatus::Blocked => "is waiting for its dependency",
        JobStatus::Scheduled => "is waiting to run",
        JobStatus::Running => "is running",
        JobStatus::Retrying => "is waiting for a retry",
        JobStatus::Succeeded => "has succeeded",
        JobStatus::Dead => "is dead",
    }
}

/// `fairq revive` (alias `retry`).
pub(crate) async fn revive<B: Backend>(
    store: &B,
    args: &ReviveArgs,
    out: &mut Output,
) -> Result<(), CliError> {
    let target = match (args.id, args.all) {
        (Some(id), false) => {
            let info = store
                .get(JobId(id))
                .await?
                .ok_or(CliError::UnknownJob(id))?;
            if info.status() != JobStatus::Dead {
                return Err(CliError::Usage(format!(
                    "job {id} {}: only dead jobs can be revived",
                    standing(info.status())
                )));
            }
            ReviveTarget::One(JobId(id))
        }
        (None, true) => {
            if let Some(queue) = &args.queue {
                check_queue(store, queue).await?;
            }
            ReviveTarget::AllDead {
                queue: args.queue.clone(),
            }
        }
        _ => {
            return Err(CliError::Usage(
                "give the id of a dead job, or --all for every dead job".to_string(),
            ))
        }
    };
    let n = store.revive(target).await?;
    report(out, "revived", n, format!("revived {}", jobs(n)))
}

/// `fairq purge`.
pub(crate) async fn purge<B: Backend>(
    store: &B,
    args: &PurgeArgs,
    out: &mut Output,
) -> Result<(), CliError> {
    if !args.all && args.queue.is_none() && args.state.is_none() {
        return Err(CliError::Usage(
            "purge needs --queue, --state or both (or --all to delete every job that is not \
             running)"
                .to_string(),
        ));
    }
    if args.state == Some(crate::args::State::Running) {
        // The store would delete none, and the command would say so as if done.
        return Err(CliError::Usage(
            "--state running: running jobs are never purged, since a worker holds them; \
             they end as succeeded or failed (or are rescued once their lease expires), and \
             can be purged then"
                .to_string(),
        ));
    }
    if let Some(queue) = &args.queue {
        check_queue(store, queue).await?;
    }
    let n = store
        .purge(Purge {
            queue: args.queue.clone(),
            status: args.state.map(JobStatus::from),
        })
        .await?;
    report(out, "purged", n, format!("deleted {}", jobs(n)))
}

/// `fairq prune`.
pub(crate) async fn prune<B: Backend>(
    store: &B,
    args: &PruneArgs,
    out: &mut Output,
) -> Result<(), CliError> {
    let retention = args.retention();
    let n = store.prune(retention).await?;
    let what = match (retention.succeeded, retention.dead) {
        (Some(ok), Some(dead)) if ok == dead => format!(
            "that finished (succeeded or died) more than {} ago",
            output::long_duration(ok)
        ),
        (Some(ok), Some(dead)) => format!(
            "that succeeded more than {} ago or died more than {} ago",
            output::long_duration(ok),
            output::long_duration(dead)
        ),
        (Some(ok), None) => format!(
            "that succeeded more than {} ago (dead jobs kept)",
            output::long_duration(ok)
        ),
        (None, Some(dead)) => format!("that died more than {} ago", output::long_duration(dead)),
        (None, None) => "(nothing to prune by)".to_string(),
    };
    report(out, "pruned", n, format!("pruned {} {what}", jobs(n)))
}

/// `fairq vacuum`: `VACUUM (ANALYZE)` of a PostgreSQL store's job tables, with the dead rows
/// the statistics counted before and after.
pub(crate) async fn vacuum(store: &crate::store::Store, out: &mut Output) -> Result<(), CliError> {
    let crate::store::Store::Postgres(pg) = store else {
        return Err(CliError::Usage(
            "only PostgreSQL stores need vacuuming: the file and Redis stores give space back \
             themselves"
                .into(),
        ));
    };
    let before = pg.vacuuming().await?;
    pg.vacuum().await?;
    let after = pg.vacuuming().await?;
    let removed = before.dead_rows.saturating_sub(after.dead_rows);
    report(
        out,
        "vacuumed",
        removed,
        format!(
            "vacuumed and analysed the job tables: {} dead rows before, {} after; {}",
            before.dead_rows,
            after.dead_rows,
            if after.needs_vacuum() {
                "autovacuum is off, so run this regularly"
            } else {
                "autovacuum is on"
            }
        ),
    )
}

/// `fairq queue`.
pub(crate) async fn queue<B: Inspect>(
    store: &B,
    args: &QueueArgs,
    out: &mut Output,
) -> Result<(), CliError> {
    match &args.action {
        QueueAction::Remove { name } => match store.remove_queue(name).await {
            Ok(n) => report(
                out,
                "removed",
                n,
                format!(
                    "removed queue {name:?} and its {n} finished job{}",
                    if n == 1 { "" } else { "s" }
                ),
            ),
            Err(BackendError::UnknownQueue(_)) => {
                let stats = store.stats().await?;
                Err(CliError::UnknownQueue {
                    queue: name.clone(),
                    known: stats.into_iter().map(|s| s.queue).collect(),
                })
            }
            Err(e) => Err(e.into()),
        },
        // Either way a queue that is already as asked is an error, not a change counted.
        QueueAction::Pause { name } => {
            if store.paused().await?.contains(name) {
                return Err(CliError::AlreadyPaused(name.clone()));
            }
            store.set_paused(name, true).await?;
            report(out, "paused", 1, format!("paused queue {name:?}"))
        }
        QueueAction::Resume { name } => {
            let paused = store.paused().await?;
            if !paused.contains(name) {
                return Err(CliError::NotPaused {
                    queue: name.clone(),
                    paused,
                });
            }
            store.set_paused(name, false).await?;
            report(out, "resumed", 1, format!("resumed queue {name:?}"))
        }
        QueueAction::Paused => {
            let paused = store.paused().await?;
            if out.is_json() {
                out.json(&paused)
            } else if paused.is_empty() {
                out.line("no queue is paused")
            } else {
                let names: Vec<_> = paused.iter().map(|name| printable(name)).collect();
                out.line(names.join("\n"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;
    use fairq_worker::{Clock, Failure, ManualClock, MemoryBackend};

    use super::*;
    use crate::args::{Cli, Command};
    use crate::output::Format;

    fn parse(args: &[&str]) -> Command {
        let mut all = vec!["fairq"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).unwrap().command
    }

    fn enqueue_args(args: &[&str]) -> EnqueueArgs {
        let mut all = vec!["enqueue"];
        all.extend_from_slice(args);
        match parse(&all) {
            Command::Enqueue(e) => e,
            other => panic!("{other:?}"),
        }
    }

    /// A store with one dead job on "mail", one succeeded on "mail", one scheduled on "web".
    async fn fixture() -> (MemoryBackend, ManualClock, JobId) {
        let clock = ManualClock::new(1_000_000);
        let store = MemoryBackend::with_clock(clock.clone());
        let dead = store
            .enqueue(NewJob::new("mail", "send", b"1".to_vec()).retry(RetryPolicy::new(0)))
            .await
            .unwrap();
        store
            .enqueue(NewJob::new("mail", "send", b"2".to_vec()))
            .await
            .unwrap();
        store
            .enqueue(NewJob::new("web", "hook", b"3".to_vec()).delay(Duration::from_secs(60)))
            .await
            .unwrap();
        let claimed = store
            .claim("mail", 2, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(claimed.len(), 2);
        for job in claimed {
            if job.claim.id == dead {
                store
                    .fail(&job, Failure::retryable("smtp said no"))
                    .await
                    .unwrap();
            } else {
                store.complete(job.claim).await.unwrap();
            }
        }
        (store, clock, dead)
    }

    #[test]
    fn payloads_must_be_json() {
        let err =
            build_job(&enqueue_args(&["-k", "x", "-p", "{oops"]), std::io::empty()).unwrap_err();
        assert!(err.to_string().starts_with("invalid JSON payload"), "{err}");
        let job = build_job(
            &enqueue_args(&["-k", "x", "-p", "-"]),
            &b" {\"a\": [1, 2]} "[..],
        )
        .unwrap();
        assert_eq!(job.payload, br#"{"a":[1,2]}"#);
        let job = build_job(&enqueue_args(&["-k", "x"]), std::io::empty()).unwrap();
        assert_eq!(job.payload, b"null");
    }

    #[test]
    fn payloads_are_stored_as_given_but_compact() {
        // Numbers past 64 bits or a float's digits, escapes, spaces inside strings and the
        // order of keys all stay as written; only the space between tokens goes.
        let given = "{ \"z\" : 123456789012345678901 ,\n \"a b\": [1e400, 0.1000000000000000055511151231257827, \"q\\\" \\\\ \"] }";
        let job = build_job(&enqueue_args(&["-k", "x", "-p", given]), std::io::empty()).unwrap();
        assert_eq!(
            String::from_utf8(job.payload).unwrap(),
            "{\"z\":123456789012345678901,\"a b\":[1e400,0.1000000000000000055511151231257827,\"q\\\" \\\\ \"]}"
        );
    }

    #[test]
    fn enqueue_flags_reach_the_job() {
        let args = enqueue_args(&[
            "-q",
            "mail",
            "-k",
            "welcome",
            "--key",
            "t",
            "--delay",
            "30s",
            "--unique",
            "u",
            "--if-absent",
            "--after",
            "4",
            "--meta",
            "trace=abc",
            "--backoff",
            "1s,5s",
        ]);
        let job = build_job(&args, std::io::empty()).unwrap();
        assert_eq!(job.queue, "mail");
        assert_eq!(job.kind, "welcome");
        assert_eq!(
            job.schedule,
            fairq_worker::Schedule::After(Duration::from_secs(30))
        );
        assert_eq!(job.unique_key.as_deref(), Some("u"));
        assert_eq!(job.on_conflict, OnConflict::Error);
        assert_eq!(job.depends_on, Some(JobId(4)));
        assert_eq!(job.metadata["trace"], "abc");
        let policy = job.retry.unwrap();
        assert_eq!(policy.max_retries(), Some(24));
        assert_eq!(policy.delay(1), Duration::from_secs(1));
        assert_eq!(policy.delay(5), Duration::from_secs(5));
        let job = build_job(&enqueue_args(&["-k", "x"]), std::io::empty()).unwrap();
        assert_eq!(job.retry, None);
        let policy = retry_policy(Some(2), &[]).unwrap();
        assert_eq!(policy.max_retries(), Some(2));
        assert_eq!(policy.backoff(), RetryPolicy::default().backoff());
    }

    #[tokio::test]
    async fn enqueue_adds_a_job_and_reports_its_id() {
        let store = MemoryBackend::new();
        let mut out = Output::buffer(Format::Json);
        let args = enqueue_args(&["-q", "mail", "-k", "welcome", "--key", "t1", "-p", "[1]"]);
        let job = build_job(&args, std::io::empty()).unwrap();
        enqueue(&store, &args, job, &mut out).await.unwrap();
        let printed: serde_json::Value = serde_json::from_str(&out.contents()).unwrap();
        let id = JobId(printed["id"].as_u64().unwrap());
        let info = store.get(id).await.unwrap().unwrap();
        assert_eq!(info.key.as_deref(), Some("t1"));
        assert_eq!(info.payload, b"[1]");
        assert_eq!(printed["queue"], "mail");
    }

    #[tokio::test]
    async fn stats_count_per_queue_and_refuse_unknown_queues() {
        let (store, clock, _) = fixture().await;
        let mut out = Output::buffer(Format::Json);
        stats(&store, &StatsArgs { queue: None }, clock.now(), &mut out)
            .await
            .unwrap();
        let rows: serde_json::Value = serde_json::from_str(&out.contents()).unwrap();
        assert_eq!(rows.as_array().unwrap().len(), 2);
        assert_eq!(rows[0]["queue"], "mail");
        assert_eq!(rows[0]["counts"]["dead"], 1);
        assert_eq!(rows[0]["counts"]["succeeded"], 1);
        assert_eq!(rows[1]["counts"]["scheduled"], 1);
        assert_eq!(rows[1]["pending"], 1);

        let mut out = Output::buffer(Format::Table);
        let args = StatsArgs {
            queue: Some("web".into()),
        };
        stats(&store, &args, clock.now(), &mut out).await.unwrap();
        assert!(out.contents().contains("web"));
        assert!(!out.contents().contains("mail"));

        let args = StatsArgs {
            queue: Some("nope".into()),
        };
        let err = stats(&store, &args, clock.now(), &mut out)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown queue \"nope\" (queues with jobs: mail, web)"
        );
    }

    /// After a retry sweep stopped, `stats` shows when the next one begins.
    #[tokio::test]
    async fn stats_show_when_held_retries_run() {
        let clock = ManualClock::new(1_000_000);
        let store = MemoryBackend::with_clock(clock.clone());
        let policy = RetryPolicy::new(3).with_delays([Duration::from_secs(1)]);
        store
            .enqueue(NewJob::new("crm", "sync", vec![]).retry(policy))
            .await
            .unwrap();
        let job = store
            .claim("crm", 1, Duration::from_secs(30))
            .await
            .unwrap()
            .remove(0);
        store.fail(&job, Failure::retryable("down")).await.unwrap();
        clock.advance(Duration::from_secs(1));
        let until = clock.now() + 120_000;
        assert_eq!(store.hold_retries("crm", until).await.unwrap(), 1);

        let mut out = Output::buffer(Format::Json);
        stats(&store, &StatsArgs { queue: None }, clock.now(), &mut out)
            .await
            .unwrap();
        let rows: serde_json::Value = serde_json::from_str(&out.contents()).unwrap();
        assert_eq!(rows[0]["next_retry_at"], until);

        let mut out = Output::buffer(Format::Table);
        stats(&store, &StatsArgs { queue: None }, clock.now(), &mut out)
            .await
            .unwrap();
        let text = out.contents();
        assert!(
            text.contains("next retry") && text.contains("in 2m"),
            "{text}"
        );
        let mut out = Output::buffer(Format::Table);
        stats(&store, &StatsArgs { queue: None }, until, &mut out)
            .await
            .unwrap();
        assert!(out.contents().contains("due"), "{}", out.contents());
    }

    #[tokio::test]
    async fn list_filters_by_state_and_queue() {
        let (store, clock, dead) = fixture().await;
        let mut out = Output::buffer(Format::Json);
        let Command::List(args) = parse(&["list", "--state", "dead"]) else {
            unreachable!()
        };
        list(&store, &args, clock.now(), &mut out).await.unwrap();
        let rows: serde_json::Value = serde_json::from_str(&out.contents()).unwrap();
        assert_eq!(rows.as_array().unwrap().len(), 1);
        assert_eq!(rows[0]["id"], dead.0);
        assert_eq!(rows[0]["state"], "dead");
        assert_eq!(rows[0]["last_error"], "smtp said no");
        assert_eq!(rows[0]["dead_reason"], "retries exhausted");
        assert_eq!(rows[0]["payload"], 1);

        let mut out = Output::buffer(Format::Table);
        let Command::List(args) = parse(&["list", "-q", "web"]) else {
            unreachable!()
        };
        list(&store, &args, clock.now(), &mut out).await.unwrap();
        let text = out.contents();
        assert!(
            text.contains("hook") && text.contains("due in 1m"),
            "{text}"
        );
        assert!(!text.contains("send"));

        let Command::List(args) = parse(&["list", "-q", "none"]) else {
            unreachable!()
        };
        assert!(matches!(
            list(&store, &args, clock.now(), &mut out).await,
            Err(CliError::UnknownQueue { .. })
        ));
    }

    #[tokio::test]
    async fn list_pages_with_after() {
        let clock = ManualClock::new(0);
        let store = MemoryBackend::with_clock(clock.clone());
        for i in 0..5 {
            store
                .enqueue(NewJob::new("q", "k", format!("{i}").into_bytes()))
                .await
                .unwrap();
        }
        let mut out = Output::buffer(Format::Table);
        let Command::List(args) = parse(&["list", "--limit", "2"]) else {
            unreachable!()
        };
        list(&store, &args, clock.now(), &mut out).await.unwrap();
        let text = out.contents();
        let next = text
            .lines()
            .last()
            .and_then(|l| {
                l.strip_prefix("2 jobs shown (ids 1 to 2), the most one page holds: add --after ")
            })
            .and_then(|l| l.strip_suffix(" for the next page"))
            .unwrap()
            .to_string();
        assert_eq!(next, "2");
        let Command::List(args) = parse(&["list", "--after", &next, "--json"]) else {
            unreachable!()
        };
        let mut out = Output::buffer(Format::Json);
        list(&store, &args, clock.now(), &mut out).await.unwrap();
        let rows: serde_json::Value = serde_json::from_str(&out.contents()).unwrap();
        assert_eq!(rows.as_array().unwrap().len(), 3);
    }

    /// Every line within 80 columns, and every word whole.
    fn assert_fits_80(text: &str, words: &[&str]) {
        for line in text.lines() {
            assert!(
                line.chars().count() <= 80,
                "{} columns:\n{text}",
                line.chars().count()
            );
        }
        for word in words {
            assert!(text.contains(word), "{word:?} was cut:\n{text}");
        }
    }

    #[tokio::test]
    async fn tables_fit_80_columns_without_cutting_words() {
        let (store, clock, _) = fixture().await;
        let job = store
            .enqueue(NewJob::new("notifications", "push-message", b"1".to_vec()).key("tenant-42"))
            .await
            .unwrap();
        let claimed = store
            .claim("notifications", 1, Duration::from_secs(60))
            .await
            .unwrap();
        store
            .fail(
                &claimed[0],
                Failure::retryable("upstream gateway answered 503 Service Unavailable again"),
            )
            .await
            .unwrap();
        let mut out = Output::buffer(Format::Table).width(80);
        let Command::Stats(args) = parse(&["stats"]) else {
            unreachable!()
        };
        stats(&store, &args, clock.now(), &mut out).await.unwrap();
        assert_fits_80(
            &out.contents(),
            &[
                "notifications",
                "scheduled",
                "succeeded",
                "retrying",
                "oldest",
                "p99",
            ],
        );
        let mut out = Output::buffer(Format::Table).width(80);
        let Command::List(args) = parse(&["list"]) else {
            unreachable!()
        };
        list(&store, &args, clock.now(), &mut out).await.unwrap();
        assert_fits_80(
            &out.contents(),
            &[
                "notifications",
                "push-message",
                "tenant-42",
                "retrying",
                "scheduled",
                "exhausted)",
            ],
        );
        assert!(out.contents().contains(&job.to_string()));
        // Without a width (a pipe), one wide table.
        let mut out = Output::buffer(Format::Table);
        let Command::Stats(args) = parse(&["stats"]) else {
            unreachable!()
        };
        stats(&store, &args, clock.now(), &mut out).await.unwrap();
        assert_eq!(out.contents().matches("queue").count(), 1);
        assert!(out.contents().lines().any(|l| l.chars().count() > 80));
    }

    /// `list --json` shows a payload exactly as it was stored: a number past 64 bits or a
    /// float's digits, and the order of keys, as written (read into a `serde_json::Value` it
    /// came out rounded and sorted), and JSON that `serde_json::Value` refuses (a number out
    /// of a float's range, nesting past its recursion limit) as JSON, not as a string.
    #[tokio::test]
    async fn list_json_shows_payloads_as_stored() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for payload in [
            r#"{"z":123456789012345678901,"a":0.1000000000000000055511151231257827}"#,
            "1e400",
            deep.as_str(),
        ] {
            let store = MemoryBackend::with_clock(ManualClock::new(0));
            store
                .enqueue(NewJob::new("q", "k", payload.as_bytes().to_vec()))
                .await
                .unwrap();
            let mut out = Output::buffer(Format::Json);
            let Command::List(args) = parse(&["list"]) else {
                unreachable!()
            };
            list(&store, &args, 0, &mut out).await.unwrap();
            let text = out.contents();
            assert!(
                text.contains(&format!(r#""payload":{payload},"#)),
                "{payload}: {text}"
            );
        }
    }

    /// A time past the year 9999 (a foreign or damaged record; stores refuse to write one)
    /// lists without a panic, in JSON and in a table.
    #[tokio::test]
    async fn far_future_times_list_without_panicking() {
        let store = MemoryBackend::with_clock(ManualClock::new(0));
        let id = store
            .enqueue(NewJob::new("q", "k", b"1".to_vec()))
            .await
            .unwrap();
        let mut info = store.get(id).await.unwrap().unwrap();
        info.enqueued_at = u64::MAX;
        info.state = LifeState::Scheduled { run_at: u64::MAX };
        assert!(when(&info.state, 0).starts_with("due in "));
        let row = serde_json::to_value(job_row(info)).unwrap();
        assert_eq!(
            row["at"],
            "18446744073709551615 ms after 1970-01-01T00:00:00Z (after the year 9999)"
        );
        assert_eq!(row["enqueued_at"], row["at"]);
    }

    #[tokio::test]
    async fn revive_brings_back_one_or_all_dead_jobs() {
        let (store, _, dead) = fixture().await;
        let mut out = Output::buffer(Format::Json);
        let Command::Revive(args) = parse(&["revive", &dead.0.to_string()]) else {
            unreachable!()
        };
        revive(&store, &args, &mut out).await.unwrap();
        assert_eq!(out.contents(), "{\"action\":\"revived\",\"count\":1}\n");
        assert_eq!(
            store.get(dead).await.unwrap().unwrap().status(),
            JobStatus::Scheduled
        );
        // No longer dead: reviving it again is refused, and so is an unknown id.
        let err = revive(&store, &args, &mut out).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("job {dead} is waiting to run: only dead jobs can be revived")
        );
        let Command::Revive(args) = parse(&["retry", "999"]) else {
            unreachable!()
        };
        assert!(matches!(
            revive(&store, &args, &mut out).await,
            Err(CliError::UnknownJob(999))
        ));

        let (store, _, dead) = fixture().await;
        let mut out = Output::buffer(Format::Table);
        let Command::Revive(args) = parse(&["retry", "--all", "-q", "mail"]) else {
            unreachable!()
        };
        revive(&store, &args, &mut out).await.unwrap();
        assert_eq!(out.contents(), "revived 1 job\n");
        assert_eq!(
            store.get(dead).await.unwrap().unwrap().status(),
            JobStatus::Scheduled
        );
    }

    #[tokio::test]
    async fn purge_needs_a_filter_and_spares_other_queues() {
        let (store, _, _) = fixture().await;
        let mut out = Output::buffer(Format::Table);
        let Command::Purge(args) = parse(&["purge"]) else {
            unreachable!()
        };
        assert!(matches!(
            purge(&store, &args, &mut out).await,
            Err(CliError::Usage(_))
        ));
        let Command::Purge(args) = parse(&["purge", "-q", "mail"]) else {
            unreachable!()
        };
        purge(&store, &args, &mut out).await.unwrap();
        assert_eq!(out.contents(), "deleted 2 jobs\n");
        let left = store.list(ListFilter::default()).await.unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].queue, "web");
    }

    #[tokio::test]
    async fn purging_running_jobs_is_refused_as_it_would_delete_none() {
        let (store, _, _) = fixture().await;
        store
            .enqueue(NewJob::new("web", "hook", b"4".to_vec()))
            .await
            .unwrap();
        let running = store
            .claim("web", 1, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(running.len(), 1);
        let mut out = Output::buffer(Format::Table);
        for argv in [
            &["purge", "--state", "running"][..],
            &["purge", "-q", "web", "--state", "running"],
        ] {
            let Command::Purge(args) = parse(argv) else {
                unreachable!()
            };
            let err = purge(&store, &args, &mut out).await.unwrap_err();
            assert!(matches!(err, CliError::Usage(_)), "{err}");
            assert!(
                err.to_string().contains("running jobs are never purged"),
                "{err}"
            );
        }
        assert_eq!(out.contents(), "", "nothing reported as deleted");
        let job = store.get(running[0].claim.id).await.unwrap().unwrap();
        assert_eq!(job.status(), JobStatus::Running);
    }

    #[tokio::test]
    async fn queue_remove_takes_only_a_queue_without_live_jobs() {
        let (store, _, _) = fixture().await;
        let mut out = Output::buffer(Format::Table);
        let Command::Queue(args) = parse(&["queue", "remove", "web"]) else {
            unreachable!()
        };
        let err = queue(&store, &args, &mut out).await.unwrap_err();
        assert!(
            matches!(
                err,
                CliError::Store(BackendError::QueueNotEmpty { live: 1, .. })
            ),
            "{err}"
        );
        assert!(err.to_string().contains("1 live job"), "{err}");
        let Command::Queue(args) = parse(&["queue", "remove", "mail"]) else {
            unreachable!()
        };
        queue(&store, &args, &mut out).await.unwrap();
        assert_eq!(
            out.contents(),
            "removed queue \"mail\" and its 2 finished jobs\n"
        );
        let queues: Vec<String> = store
            .stats()
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.queue)
            .collect();
        assert_eq!(queues, vec!["web".to_string()]);
        let err = queue(&store, &args, &mut out).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown queue \"mail\" (queues with jobs: web)"
        );
    }

    #[tokio::test]
    async fn queue_pause_holds_a_queue_until_resume() {
        let (store, _, _) = fixture().await;
        store
            .enqueue(NewJob::new("tasks", "k", b"4".to_vec()))
            .await
            .unwrap();
        let mut out = Output::buffer(Format::Table);
        for argv in [
            &["queue", "paused"][..],
            &["queue", "pause", "tasks"],
            &["queue", "paused"],
        ] {
            let Command::Queue(args) = parse(argv) else {
                unreachable!()
            };
            queue(&store, &args, &mut out).await.unwrap();
        }
        assert_eq!(
            out.contents(),
            "no queue is paused\npaused queue \"tasks\"\ntasks\n"
        );
        assert!(store
            .claim("tasks", 10, std::time::Duration::from_secs(30))
            .await
            .unwrap()
            .is_empty());
        let mut out = Output::buffer(Format::Json);
        for argv in [&["queue", "resume", "tasks"][..], &["queue", "paused"]] {
            let Command::Queue(args) = parse(argv) else {
                unreachable!()
            };
            queue(&store, &args, &mut out).await.unwrap();
        }
        assert_eq!(out.contents(), "{\"action\":\"resumed\",\"count\":1}\n[]\n");
        assert!(!store
            .claim("tasks", 10, std::time::Duration::from_secs(30))
            .await
            .unwrap()
            .is_empty());
    }

    #[tokio::test]
    async fn pausing_a_paused_queue_or_resuming_one_that_is_not_fails() {
        let store = MemoryBackend::new();
        let mut out = Output::buffer(Format::Json);
        let run = |argv: &'static [&'static str]| {
            let Command::Queue(args) = parse(argv) else {
                unreachable!()
            };
            args
        };
        let err = queue(&store, &run(&["queue", "resume", "tasks"]), &mut out)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "queue \"tasks\" is not paused (no queue is paused)"
        );
        for name in ["mail", "web"] {
            store.set_paused(name, true).await.unwrap();
        }
        let err = queue(&store, &run(&["queue", "resume", "tasks"]), &mut out)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "queue \"tasks\" is not paused (paused queues: mail, web)"
        );
        let err = queue(&store, &run(&["queue", "pause", "mail"]), &mut out)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "queue \"mail\" is already paused");
        assert_eq!(out.contents(), "", "nothing reported as done");
        assert_eq!(store.paused().await.unwrap(), ["mail", "web"]);
    }

    #[tokio::test]
    async fn prune_deletes_only_old_finished_jobs() {
        let (store, clock, _) = fixture().await;
        let mut out = Output::buffer(Format::Json);
        let Command::Prune(args) = parse(&["prune", "--older-than", "1h"]) else {
            unreachable!()
        };
        prune(&store, &args, &mut out).await.unwrap();
        assert_eq!(out.contents(), "{\"action\":\"pruned\",\"count\":0}\n");
        clock.advance(Duration::from_secs(3_601));
        let mut out = Output::buffer(Format::Table);
        prune(&store, &args, &mut out).await.unwrap();
        assert_eq!(
            out.contents(),
            "pruned 2 jobs that finished (succeeded or died) more than 1 hour ago\n"
        );
        assert_eq!(store.list(ListFilter::default()).await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn prune_keeps_dead_jobs_for_their_own_age() {
        let (store, clock, dead) = fixture().await;
        clock.advance(Duration::from_secs(3_601));
        let mut out = Output::buffer(Format::Table);
        let Command::Prune(args) = parse(&["prune", "--older-than", "1h", "--keep-dead"]) else {
            unreachable!()
        };
        prune(&store, &args, &mut out).await.unwrap();
        assert_eq!(
            out.contents(),
            "pruned 1 job that succeeded more than 1 hour ago (dead jobs kept)\n"
        );
        assert!(
            store.get(dead).await.unwrap().is_some(),
            "the dead job stays"
        );
        let mut out = Output::buffer(Format::Table);
        let Command::Prune(args) = parse(&["prune", "--dead-older-than", "2h"]) else {
            unreachable!()
        };
        prune(&store, &args, &mut out).await.unwrap();
        assert_eq!(
            out.contents(),
            "pruned 0 jobs that died more than 2 hours ago\n"
        );
        clock.advance(Duration::from_secs(3_600));
        let mut out = Output::buffer(Format::Json);
        prune(&store, &args, &mut out).await.unwrap();
        assert_eq!(out.contents(), "{\"action\":\"pruned\",\"count\":1}\n");
        assert!(store.get(dead).await.unwrap().is_none());
    }

    #[test]
    fn clipping_marks_the_cut() {
        assert_eq!(clip("a\nb", 10), "a b");
        assert_eq!(clip("abcdef", 4), "abc…");
    }
}
