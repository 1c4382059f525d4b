//! The server's state: the store, the access rules, the throughput history and short-lived
//! answers shared by every request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fairq_core::job::{millis, Millis};
use fairq_worker::{BackendError, Clock, Inspect, KeyBacklog, QueueStats, Started};
use tokio::sync::watch;

use crate::auth::Auth;
use crate::history::History;
use crate::model::{Overview, QueueSummary, RATE_WINDOWS};
use crate::Scrubber;

/// The longest window the API reports on; per-key queries look this far back.
pub(crate) const LONGEST_WINDOW: Millis = RATE_WINDOWS[2].1;

/// What the event stream sends: the event name and its JSON.
pub(crate) type Tick = Option<(&'static str, Arc<String>)>;

/// One queue's per-key answers, reused for one refresh interval.
#[derive(Debug)]
pub(crate) struct QueueScan {
    pub at: Millis,
    pub backlog: Vec<KeyBacklog>,
    pub started: Vec<Started>,
    pub complete: bool,
}

/// Everything a request handler needs.
pub(crate) struct App<B> {
    pub store: B,
    pub clock: Arc<dyn Clock>,
    pub auth: Auth,
    pub scrub: Scrubber,
    pub label: String,
    pub refresh: Duration,
    pub budget: usize,
    history: Mutex<History>,
    latest: Mutex<Option<Arc<Overview>>>,
    /// Readings of the store started so far, to number them (see `History::record_reading`).
    readings: AtomicU64,
    ticks: watch::Sender<Tick>,
    scans: Mutex<HashMap<String, Arc<QueueScan>>>,
    /// Set when the server stops, so open event streams end.
    pub stopping: watch::Sender<bool>,
}

impl<B: Inspect> App<B> {
    pub(crate) fn new(
        store: B,
        clock: Arc<dyn Clock>,
        auth: Auth,
        scrub: Scrubber,
        label: String,
        refresh: Duration,
        budget: usize,
    ) -> Self {
        App {
            store,
            clock,
            auth,
            scrub,
            label,
            refresh,
            budget,
            history: Mutex::new(History::new(LONGEST_WINDOW + millis(refresh))),
            latest: Mutex::new(None),
            readings: AtomicU64::new(0),
            ticks: watch::Sender::new(None),
            scans: Mutex::new(HashMap::new()),
            stopping: watch::Sender::new(false),
        }
    }

    pub(crate) fn now(&self) -> Millis {
        self.clock.now()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Tick> {
        self.ticks.subscribe()
    }

    /// Reads the store's numbers now, records them, and tells the event streams.
    pub(crate) async fn sample(&self) -> Result<Arc<Overview>, BackendError> {
        let result = self.read_overview().await;
        match &result {
            Ok(overview) => {
                let json = serde_json::to_string(&**overview).unwrap_or_else(|_| "{}".into());
                self.ticks.send_replace(Some(("tick", Arc::new(json))));
            }
            Err(err) => {
                let message = self.scrub.clean(&err.to_string());
                tracing::warn!(error = %message, "sampling the store failed");
                let json = serde_json::json!({ "error": message }).to_string();
                self.ticks.send_replace(Some(("problem", Arc::new(json))));
            }
        }
        result
    }

    async fn read_overview(&self) -> Result<Arc<Overview>, BackendError> {
        let reading = self.readings.fetch_add(1, Ordering::Relaxed) + 1;
        let mut stats = self.store.stats().await?;
        let paused = self.store.paused().await?;
        // A queue paused before its first job has no counts yet: list it anyway, so the
        // pause shows and can be undone.
        let mut extra: Vec<QueueStats> = paused
            .iter()
            .filter(|name| !stats.iter().any(|s| &s.queue == *name))
            .map(|name| QueueStats::empty(name.clone()))
            .collect();
        if !extra.is_empty() {
            stats.append(&mut extra);
            stats.sort_by(|a, b| a.queue.cmp(&b.queue));
        }
        let now = self.now();
        let fresh;
        let overview = {
            let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
            fresh = history.record_reading(reading, now, &stats);
            Overview {
                now,
                store: self.label.clone(),
                refresh_ms: millis(self.refresh),
                capabilities: self.store.capabilities(),
                queues: stats
                    .iter()
                    .map(|s| QueueSummary::new(s, paused.contains(&s.queue), &history, now))
                    .collect(),
            }
        };
        let overview = Arc::new(overview);
        if fresh {
            *self.latest.lock().unwrap_or_else(PoisonError::into_inner) = Some(overview.clone());
        }
        Ok(overview)
    }

    /// The last sample if it is younger than the refresh interval, else a new one.
    pub(crate) async fn overview(&self) -> Result<Arc<Overview>, BackendError> {
        let now = self.now();
        let latest = self
            .latest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match latest {
            Some(o) if now.saturating_sub(o.now) < millis(self.refresh) && o.now <= now => Ok(o),
            _ => self.sample().await,
        }
    }

    /// `queue`'s backlog per key and its attempts of the longest window, reused for one
    /// refresh interval.
    pub(crate) async fn scan(&self, queue: &str) -> Result<Arc<QueueScan>, BackendError> {
        let now = self.now();
        let cached = self
            .scans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(queue)
            .cloned();
        if let Some(scan) = cached
            && now.saturating_sub(scan.at) < millis(self.refresh)
            && scan.at <= now
        {
            return Ok(scan);
        }
        let backlog = self.store.backlog_by_key(queue, now, self.budget).await?;
        let since = now.saturating_sub(LONGEST_WINDOW);
        let started = self.store.started_since(queue, since, self.budget).await?;
        let scan = Arc::new(QueueScan {
            at: now,
            complete: backlog.complete && started.complete,
            backlog: backlog.items,
            started: started.items,
        });
        let mut scans = self.scans.lock().unwrap_or_else(PoisonError::into_inner);
        // Forget queues nobody looked at lately.
        scans.retain(|_, s| now.saturating_sub(s.at) < LONGEST_WINDOW);
        scans.insert(queue.to_string(), scan.clone());
        Ok(scan)
    }

    /// Forgets cached answers after an action changed the store.
    pub(crate) fn invalidate(&self) {
        self.scans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        *self.latest.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}
