//! The JSON shapes of the API (see the crate README for examples).

use std::collections::{BTreeMap, HashMap};

use fairq_core::health::{Health, HealthPolicy};
use fairq_core::job::{Millis, State};
use fairq_core::stats::{Histogram, RetryStats, Summary};
use fairq_worker::{
    Capabilities, JobId, JobInfo, JobStatus, KeyBacklog, QueueStats, Started, StatusCounts,
};
use serde::Serialize;

use crate::history::{self, History};

/// The throughput windows, in milliseconds, with their JSON names.
pub(crate) const RATE_WINDOWS: [(&str, Millis); 3] =
    [("1m", 60_000), ("5m", 300_000), ("15m", 900_000)];
/// Chart: this many intervals of this many milliseconds.
pub(crate) const SERIES: (Millis, usize) = (10_000, 60);

/// `GET /api/session`.
#[derive(Debug, Serialize)]
pub(crate) struct SessionView {
    pub store: String,
    pub signed_in: bool,
    /// The CSRF token to send as `X-CSRF-Token` with actions (signed-in browsers only).
    pub csrf: Option<String>,
    pub reads_need_token: bool,
    pub capabilities: Capabilities,
    pub refresh_ms: u64,
}

/// A queue's health verdict.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HealthView {
    /// `healthy`, `degraded` or `unhealthy`.
    pub status: &'static str,
    /// When the oldest job still in error first failed.
    pub failing_since: Option<Millis>,
}

impl HealthView {
    pub(crate) fn judge(stats: &QueueStats, now: Millis) -> Self {
        // The dashboard did not deploy anything: no start-up grace.
        let policy = HealthPolicy::default().with_startup_grace(std::time::Duration::ZERO);
        match policy.evaluate(0, stats.oldest_error_at, now) {
            Health::Healthy => HealthView {
                status: "healthy",
                failing_since: None,
            },
            Health::Degraded { since } => HealthView {
                status: "degraded",
                failing_since: Some(since),
            },
            Health::Unhealthy { since } => HealthView {
                status: "unhealthy",
                failing_since: Some(since),
            },
        }
    }
}

/// One queue in the overview.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct QueueSummary {
    pub name: String,
    pub counts: StatusCounts,
    pub pending: u64,
    pub total: u64,
    pub paused: bool,
    pub health: HealthView,
    /// Jobs finished per second over the last 1, 5 and 15 minutes (`null`: not sampled long
    /// enough).
    pub throughput: BTreeMap<&'static str, Option<f64>>,
    /// Jobs finished so far, by the store's counters.
    pub finished: u64,
    pub retries: RetryStats,
    pub processing_ms: Summary,
    /// `[interval start, jobs/s]` for the chart, oldest first.
    pub series: Vec<(Millis, Option<f64>)>,
}

impl QueueSummary {
    pub(crate) fn new(stats: &QueueStats, paused: bool, history: &History, now: Millis) -> Self {
        QueueSummary {
            name: stats.queue.clone(),
            counts: stats.counts,
            pending: stats.counts.pending(),
            total: stats.counts.total(),
            paused,
            health: HealthView::judge(stats, now),
            throughput: RATE_WINDOWS
                .iter()
                .map(|&(name, window)| (name, history.rate(&stats.queue, now, window)))
                .collect(),
            finished: history::finished(stats),
            retries: stats.retries,
            processing_ms: stats.processing_ms,
            series: history.series(&stats.queue, now, SERIES.0, SERIES.1),
        }
    }
}

/// `GET /api/overview` and each `tick` of `GET /api/events`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Overview {
    pub now: Millis,
    pub store: String,
    pub refresh_ms: u64,
    pub capabilities: Capabilities,
    pub queues: Vec<QueueSummary>,
}

/// Percentiles of a set of durations, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Percentiles {
    pub count: u64,
    pub p50: u64,
    pub p95: u64,
    pub p99: u64,
    pub max: u64,
}

impl Percentiles {
    pub(crate) fn of(values: impl IntoIterator<Item = u64>) -> Option<Self> {
        let mut h = Histogram::new();
        for v in values {
            h.record(v);
        }
        (h.count() > 0).then(|| Percentiles {
            count: h.count(),
            p50: h.p50(),
            p95: h.p95(),
            p99: h.p99(),
            max: h.max(),
        })
    }
}

/// Waits and run times of the attempts that started in one window.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LatencyWindow {
    pub window: &'static str,
    pub window_ms: Millis,
    pub started: u64,
    pub wait_ms: Option<Percentiles>,
    pub run_ms: Option<Percentiles>,
}

impl LatencyWindow {
    pub(crate) fn of(started: &[Started], now: Millis, name: &'static str, window: Millis) -> Self {
        let since = now.saturating_sub(window);
        let recent: Vec<&Started> = started.iter().filter(|s| s.started_at >= since).collect();
        LatencyWindow {
            window: name,
            window_ms: window,
            started: recent.len() as u64,
            wait_ms: Percentiles::of(recent.iter().map(|s| s.wait_ms())),
            run_ms: Percentiles::of(recent.iter().filter_map(|s| s.run_ms())),
        }
    }
}

/// `GET /api/queues/{queue}`.
#[derive(Debug, Serialize)]
pub(crate) struct QueueDetail {
    pub now: Millis,
    pub queue: QueueSummary,
    pub latency: Vec<LatencyWindow>,
    /// False when the store stopped reading at its budget: numbers are a sample.
    pub complete: bool,
}

/// The job a key has waiting longest.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct OldestView {
    pub id: JobId,
    pub since: Millis,
    pub age_ms: u64,
}

/// One fairness key in the tenants view.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TenantRow {
    pub key: Option<String>,
    pub due: u64,
    pub later: u64,
    pub retrying: u64,
    pub blocked: u64,
    pub running: u64,
    pub oldest_due: Option<OldestView>,
    /// Attempts started in the window.
    pub served: u64,
    /// This key's part of all attempts started in the window (0 to 1).
    pub share: f64,
    pub wait_ms: Option<Percentiles>,
    /// When an attempt of this key last started (within the longest window).
    pub last_served_at: Option<Millis>,
    /// It has had due jobs and no service for longer than fair scheduling explains: since
    /// the later of its oldest due job's due time and its last start (see README).
    pub behind: bool,
}

/// `GET /api/queues/{queue}/tenants`.
#[derive(Debug, Serialize)]
pub(crate) struct Tenants {
    pub queue: String,
    pub now: Millis,
    pub window_ms: Millis,
    pub complete: bool,
    /// Attempts started per second in the window, all keys together.
    pub served_per_s: f64,
    /// Keys with due jobs now.
    pub keys_due: u64,
    /// How long a key's oldest due job may wait under fair scheduling at the current pace
    /// (`null` when nothing was served in the window).
    pub fair_wait_bound_ms: Option<u64>,
    pub tenants: Vec<TenantRow>,
}

impl Tenants {
    /// Joins the backlog per key with the attempts started in the window.
    pub(crate) fn build(
        queue: &str,
        backlog: Vec<KeyBacklog>,
        started: &[Started],
        now: Millis,
        window: Millis,
        slack_ms: u64,
        complete: bool,
    ) -> Tenants {
        let since = now.saturating_sub(window);
        let mut served: HashMap<Option<&str>, Vec<u64>> = HashMap::new();
        let mut last: HashMap<Option<&str>, Millis> = HashMap::new();
        for s in started {
            let at = last.entry(s.key.as_deref()).or_insert(s.started_at);
            *at = (*at).max(s.started_at);
            if s.started_at >= since {
                served
                    .entry(s.key.as_deref())
                    .or_default()
                    .push(s.wait_ms());
            }
        }
        let total_served: u64 = served.values().map(|w| w.len() as u64).sum();
        let per_s = total_served as f64 * 1_000.0 / window.max(1) as f64;
        let keys_due = backlog.iter().filter(|k| k.due > 0).count() as u64;
        // Fair scheduling serves a key's head job within 2 (K - 1) claims; at the pace of
        // the window that is this long (never less than two samples' worth of time).
        let bound = (per_s > 0.0)
            .then(|| (2.0 * keys_due as f64 / per_s * 1_000.0) as u64)
            .map(|b| b.max(slack_ms));
        let mut rows: Vec<TenantRow> = Vec::new();
        let mut seen: Vec<Option<String>> = Vec::new();
        for k in backlog {
            let waits = served.get(&k.key.as_deref());
            let last_served_at = last.get(&k.key.as_deref()).copied();
            let oldest_due = k.oldest_due.map(|w| OldestView {
                id: w.id,
                since: w.since,
                age_ms: now.saturating_sub(w.since),
            });
            // How long the key has waited without service: since its oldest due job became
            // due, or since its last start if that came later (a busy key's backlog waits
            // behind its own jobs, which is fair).
            let unserved =
                oldest_due.map(|o| now.saturating_sub(o.since.max(last_served_at.unwrap_or(0))));
            let behind = match (unserved, bound) {
                (Some(u), Some(b)) => u > b,
                // Due jobs and nothing served for a whole window: every waiting key is.
                (Some(u), None) => u > window.max(slack_ms),
                _ => false,
            };
            seen.push(k.key.clone());
            rows.push(TenantRow {
                served: waits.map_or(0, |w| w.len() as u64),
                share: share(waits, total_served),
                wait_ms: waits.and_then(|w| Percentiles::of(w.iter().copied())),
                last_served_at,
                key: k.key,
                due: k.due,
                later: k.later,
                retrying: k.retrying,
                blocked: k.blocked,
                running: k.running,
                oldest_due,
                behind,
            });
        }
        // Keys served in the window that have nothing left.
        let mut idle: Vec<(&Option<&str>, &Vec<u64>)> = served
            .iter()
            .filter(|(k, _)| !seen.iter().any(|s| s.as_deref() == **k))
            .collect();
        idle.sort_by(|a, b| a.0.cmp(b.0));
        for (key, waits) in idle {
            rows.push(TenantRow {
                key: key.map(str::to_string),
                due: 0,
                later: 0,
                retrying: 0,
                blocked: 0,
                running: 0,
                oldest_due: None,
                served: waits.len() as u64,
                share: share(Some(waits), total_served),
                wait_ms: Percentiles::of(waits.iter().copied()),
                last_served_at: last.get(key).copied(),
                behind: false,
            });
        }
        // The biggest backlog first, then the most served.
        rows.sort_by(|a, b| {
            (b.due + b.later, b.served, &a.key).cmp(&(a.due + a.later, a.served, &b.key))
        });
        Tenants {
            queue: queue.to_string(),
            now,
            window_ms: window,
            complete,
            served_per_s: per_s,
            keys_due,
            fair_wait_bound_ms: bound,
            tenants: rows,
        }
    }
}

fn share(waits: Option<&Vec<u64>>, total: u64) -> f64 {
    match (waits, total) {
        (Some(w), t) if t > 0 => w.len() as f64 / t as f64,
        _ => 0.0,
    }
}

/// A job in a list (no payload).
#[derive(Debug, Serialize)]
pub(crate) struct JobRow {
    pub id: JobId,
    pub queue: String,
    pub kind: String,
    pub key: Option<String>,
    pub status: JobStatus,
    pub attempts: u32,
    pub enqueued_at: Millis,
    /// When it may run (waiting jobs) or when its lease ends (running jobs).
    pub run_at: Option<Millis>,
    pub finished_at: Option<Millis>,
    pub last_error: Option<String>,
    pub payload_bytes: usize,
}

impl JobRow {
    pub(crate) fn of(info: &JobInfo) -> JobRow {
        let (run_at, finished_at) = times(&info.state);
        JobRow {
            id: info.id,
            queue: info.queue.clone(),
            kind: info.kind.clone(),
            key: info.key.clone(),
            status: info.status(),
            attempts: info.attempts,
            enqueued_at: info.enqueued_at,
            run_at,
            finished_at,
            last_error: info.last_error.clone(),
            payload_bytes: info.payload.len(),
        }
    }
}

fn times(state: &State) -> (Option<Millis>, Option<Millis>) {
    match *state {
        State::Scheduled { run_at } | State::Retrying { run_at } => (Some(run_at), None),
        State::Running { lease } => (Some(lease.deadline), None),
        State::Succeeded { at } | State::Dead { at, .. } => (None, Some(at)),
        State::Blocked => (None, None),
    }
}

/// `GET /api/jobs`.
#[derive(Debug, Serialize)]
pub(crate) struct JobPage {
    pub jobs: Vec<JobRow>,
    /// Pass as `after` for the next page; `null` on the last page.
    pub next_after: Option<JobId>,
    /// Jobs read to fill the page (with a `key` filter, more than the page holds).
    pub scanned: usize,
}

/// The lease of a running job.
#[derive(Debug, Serialize)]
pub(crate) struct LeaseView {
    pub token: u64,
    pub deadline: Millis,
    pub attempt: u32,
}

/// A payload as text (when it is UTF-8) or base64 bytes.
#[derive(Debug, Serialize)]
pub(crate) struct PayloadView {
    pub bytes: usize,
    /// The payload as UTF-8 text, when it is.
    pub text: Option<String>,
    /// True when `text` is JSON.
    pub json: bool,
    /// Hex of the first 4 KiB, when the payload is not UTF-8.
    pub hex: Option<String>,
}

/// `GET /api/jobs/{id}`.
#[derive(Debug, Serialize)]
pub(crate) struct JobDetail {
    #[serde(flatten)]
    pub row: JobRow,
    pub dead_reason: Option<String>,
    pub lease: Option<LeaseView>,
    pub unique_key: Option<String>,
    pub depends_on: Option<JobId>,
    pub metadata: BTreeMap<String, String>,
    pub payload: PayloadView,
}

impl JobDetail {
    pub(crate) fn of(info: &JobInfo) -> JobDetail {
        let text = std::str::from_utf8(&info.payload).ok().map(str::to_string);
        let json = text
            .as_deref()
            .is_some_and(|t| serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok());
        let hex = text.is_none().then(|| {
            info.payload
                .iter()
                .take(4096)
                .map(|b| format!("{b:02x}"))
                .collect()
        });
        JobDetail {
            row: JobRow::of(info),
            dead_reason: match info.state {
                State::Dead { reason, .. } => Some(reason.to_string()),
                _ => None,
            },
            lease: match info.state {
                State::Running { lease } => Some(LeaseView {
                    token: lease.token.0,
                    deadline: lease.deadline,
                    attempt: lease.attempt,
                }),
                _ => None,
            },
            unique_key: info.unique_key.clone(),
            depends_on: info.depends_on,
            metadata: info.metadata.clone(),
            payload: PayloadView {
                bytes: info.payload.len(),
                text,
                json,
                hex,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairq_worker::Waiting;

    fn started(key: &str, run_at: Millis, started_at: Millis) -> Started {
        Started {
            id: JobId(started_at),
            key: Some(key.to_string()),
            run_at,
            started_at,
            finished_at: None,
            succeeded: false,
        }
    }

    fn backlog(key: &str, due: u64, oldest: Millis) -> KeyBacklog {
        let mut k = KeyBacklog::new(Some(key.to_string()));
        k.due = due;
        k.oldest_due = Some(Waiting {
            id: JobId(1),
            since: oldest,
        });
        k
    }

    #[test]
    fn a_key_waiting_longer_than_the_fair_bound_is_behind() {
        // 2 keys due; 20 starts in a 10 s window: 2 per second, bound 2 s. The heavy key's
        // head became due 2 s ago; the light one has waited 9.5 s since it was last served.
        let mut starts: Vec<Started> = (0..19).map(|i| started("heavy", 0, 100_000 + i)).collect();
        starts.push(started("light", 95_000, 100_500));
        let t = Tenants::build(
            "q",
            vec![backlog("heavy", 500, 108_000), backlog("light", 1, 100_000)],
            &starts,
            110_000,
            10_000,
            1_000,
            true,
        );
        assert_eq!(t.fair_wait_bound_ms, Some(2_000));
        let light = t
            .tenants
            .iter()
            .find(|r| r.key.as_deref() == Some("light"))
            .unwrap();
        let heavy = t
            .tenants
            .iter()
            .find(|r| r.key.as_deref() == Some("heavy"))
            .unwrap();
        assert!(light.behind && !heavy.behind);
        assert_eq!((heavy.served, light.served), (19, 1));
        assert_eq!(light.wait_ms.unwrap().max, 5_500);
        assert!((heavy.share - 0.95).abs() < 1e-9);
        // The biggest backlog comes first.
        assert_eq!(t.tenants[0].key.as_deref(), Some("heavy"));
    }

    #[test]
    fn keys_served_with_nothing_left_are_listed_and_old_starts_ignored() {
        let starts = vec![started("gone", 0, 50), started("old", 0, 1)];
        let t = Tenants::build("q", vec![], &starts, 100, 60, 1, true);
        assert_eq!(t.tenants.len(), 1);
        assert_eq!(t.tenants[0].key.as_deref(), Some("gone"));
        assert_eq!(t.tenants[0].served, 1);
    }

    #[test]
    fn with_nothing_served_a_key_waiting_a_whole_window_is_behind() {
        let t = Tenants::build("q", vec![backlog("a", 1, 0)], &[], 10_000, 5_000, 100, true);
        assert_eq!(t.fair_wait_bound_ms, None);
        assert!(t.tenants[0].behind);
    }
}
