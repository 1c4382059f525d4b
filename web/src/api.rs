//! The JSON API: reads under `GET /api/...`, actions under `POST /api/...`.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use fairq_worker::{Inspect, JobId, JobStatus, ListFilter, Purge, ReviveTarget};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::json;

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiBody, ApiPath, ApiQuery};
use crate::model::{
    HealthView, JobDetail, JobPage, JobRow, LatencyWindow, QueueDetail, SessionView, Tenants,
    RATE_WINDOWS,
};

type AppState<B> = State<Arc<App<B>>>;
type ApiResult = Result<Response, ApiError>;

/// Largest page of `GET /api/jobs`.
const MAX_PAGE: usize = 500;

fn store_error<B>(app: &App<B>) -> impl Fn(fairq_worker::BackendError) -> ApiError + '_ {
    move |err| ApiError::store(&err, &app.scrub)
}

/// `GET /api/session`: who the caller is and what the server can do.
pub(crate) async fn session<B: Inspect>(
    State(app): AppState<B>,
    Extension(caller): Extension<Caller>,
) -> Json<SessionView> {
    let (signed_in, csrf) = match caller {
        Caller::Session { csrf, .. } => (true, Some(csrf)),
        Caller::Bearer => (true, None),
        Caller::Anonymous => (false, None),
    };
    Json(SessionView {
        store: app.label.clone(),
        signed_in,
        csrf,
        reads_need_token: app.auth.reads_need_token(),
        capabilities: app.store.capabilities(),
        refresh_ms: fairq_core::job::millis(app.refresh),
    })
}

/// `GET /api/overview`.
pub(crate) async fn overview<B: Inspect>(State(app): AppState<B>) -> ApiResult {
    let overview = app.overview().await.map_err(store_error(&app))?;
    Ok(Json(&*overview).into_response())
}

/// `GET /api/health`: 200 when every queue is healthy, 503 otherwise.
pub(crate) async fn health<B: Inspect>(State(app): AppState<B>) -> ApiResult {
    let stats = app.store.stats().await.map_err(store_error(&app))?;
    let now = app.now();
    let queues: Vec<_> = stats
        .iter()
        .map(|s| {
            let h = HealthView::judge(s, now);
            json!({ "queue": s.queue, "status": h.status, "failing_since": h.failing_since })
        })
        .collect();
    let healthy = queues.iter().all(|q| q["status"] != "unhealthy");
    let status = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    Ok((
        status,
        Json(json!({ "healthy": healthy, "queues": queues })),
    )
        .into_response())
}

/// `GET /api/events`: server-sent events, one `tick` (the overview) per sample, or a
/// `problem` when the store could not be read. A stream opened with a browser session ends
/// once that session is closed (`/logout`) or expires.
pub(crate) async fn events<B: Inspect>(
    State(app): AppState<B>,
    Extension(caller): Extension<Caller>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let mut ticks = app.subscribe();
    ticks.mark_changed();
    let mut stopping = app.stopping.subscribe();
    let stopped = async move {
        let _ = stopping.wait_for(|s| *s).await;
    };
    let session = match caller {
        Caller::Session { id, .. } => Some(id),
        Caller::Bearer | Caller::Anonymous => None,
    };
    let stream = futures::stream::unfold(ticks, move |mut ticks| {
        let (app, session) = (Arc::clone(&app), session.clone());
        async move {
            loop {
                ticks.changed().await.ok()?;
                if let Some(id) = &session
                    && !app.auth.session_open(id, app.now())
                {
                    return None;
                }
                let tick = ticks.borrow_and_update().clone();
                if let Some((name, data)) = tick {
                    let event = Event::default().event(name).data(data.as_str());
                    return Some((Ok(event), ticks));
                }
            }
        }
    })
    .take_until(Box::pin(stopped));
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// Refuses a queue the store does not know: one without jobs or counters that is not
/// paused either (the overview lists a queue paused before its first job).
async fn known_queue<B: Inspect>(app: &App<B>, queue: &str) -> Result<(), ApiError> {
    let stats = app.store.stats().await.map_err(store_error(app))?;
    if stats.iter().any(|s| s.queue == queue) {
        return Ok(());
    }
    let paused = app.store.paused().await.map_err(store_error(app))?;
    if paused.iter().any(|p| p == queue) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no queue named {queue:?}"),
        ))
    }
}

/// `GET /api/queues/{queue}`: the overview's numbers plus waits and run times per window.
pub(crate) async fn queue<B: Inspect>(
    State(app): AppState<B>,
    ApiPath(queue): ApiPath<String>,
) -> ApiResult {
    let overview = app.overview().await.map_err(store_error(&app))?;
    let mut summary = overview.queues.iter().find(|q| q.name == queue).cloned();
    if summary.is_none() {
        // The last sample may predate the queue: ask the store before saying it is unknown
        // (and sample anew, which every open event stream sees, only for a queue it knows).
        known_queue(&app, &queue).await?;
        let fresh = app.sample().await.map_err(store_error(&app))?;
        summary = fresh.queues.iter().find(|q| q.name == queue).cloned();
    }
    let Some(summary) = summary else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no queue named {queue:?}"),
        ));
    };
    let scan = app.scan(&queue).await.map_err(store_error(&app))?;
    let latency = RATE_WINDOWS
        .iter()
        .map(|&(name, window)| LatencyWindow::of(&scan.started, scan.at, name, window))
        .collect();
    Ok(Json(QueueDetail {
        now: scan.at,
        queue: summary,
        latency,
        complete: scan.complete,
    })
    .into_response())
}

/// Query of `GET /api/queues/{queue}/tenants`.
#[derive(Debug, Deserialize)]
pub(crate) struct TenantsQuery {
    /// The window for served jobs and waits, in seconds (default 300, at most 900).
    window: Option<u64>,
}

/// `GET /api/queues/{queue}/tenants`: every fairness key's backlog, oldest waiting job,
/// jobs served and waits in the window.
pub(crate) async fn tenants<B: Inspect>(
    State(app): AppState<B>,
    ApiPath(queue): ApiPath<String>,
    ApiQuery(q): ApiQuery<TenantsQuery>,
) -> ApiResult {
    let window = q.window.unwrap_or(300).clamp(10, 900) * 1_000;
    known_queue(&app, &queue).await?;
    let scan = app.scan(&queue).await.map_err(store_error(&app))?;
    let slack = 2 * fairq_core::job::millis(app.refresh);
    Ok(Json(Tenants::build(
        &queue,
        scan.backlog.clone(),
        &scan.started,
        scan.at,
        window,
        slack,
        scan.complete,
    ))
    .into_response())
}

/// Query of `GET /api/jobs`.
#[derive(Debug, Deserialize)]
pub(crate) struct JobsQuery {
    queue: Option<String>,
    state: Option<String>,
    /// Only jobs of this fairness key.
    key: Option<String>,
    /// Only jobs without a fairness key.
    #[serde(default)]
    no_key: bool,
    after: Option<u64>,
    limit: Option<usize>,
}

/// `GET /api/jobs`: jobs by id, filtered by queue, state and key, a page at a time.
pub(crate) async fn jobs<B: Inspect>(
    State(app): AppState<B>,
    ApiQuery(q): ApiQuery<JobsQuery>,
) -> ApiResult {
    let status = match q.state.as_deref().filter(|s| !s.is_empty()) {
        Some(s) => Some(
            s.parse::<JobStatus>()
                .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?,
        ),
        None => None,
    };
    let limit = q.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let queue = q.queue.filter(|s| !s.is_empty());
    let key = q.key.filter(|s| !s.is_empty());
    if key.is_some() && q.no_key {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "key and no_key=true exclude each other: a job has one key or none",
        ));
    }
    let keyed = key.is_some() || q.no_key;
    let mut after = q.after.map(JobId);
    let mut jobs = Vec::new();
    let mut scanned = 0;
    // Without a key filter one page of the store is the answer; with one, read on until the
    // page is full or the budget is spent.
    loop {
        let want = if keyed { MAX_PAGE } else { limit };
        let page = app
            .store
            .list(ListFilter {
                queue: queue.clone(),
                status,
                after,
                limit: want,
            })
            .await
            .map_err(store_error(&app))?;
        scanned += page.len();
        let full = page.len() == want;
        for info in &page {
            after = Some(info.id);
            let matches = match (&key, q.no_key) {
                (Some(k), _) => info.key.as_deref() == Some(k.as_str()),
                (None, true) => info.key.is_none(),
                (None, false) => true,
            };
            if matches {
                jobs.push(JobRow::of(info));
                if jobs.len() == limit {
                    break;
                }
            }
        }
        let page_done = jobs.len() == limit;
        if page_done || !full || scanned >= app.budget {
            let more = full || page_done;
            return Ok(Json(JobPage {
                next_after: if more { after } else { None },
                jobs,
                scanned,
            })
            .into_response());
        }
    }
}

/// `GET /api/jobs/{id}`: one job's full record.
pub(crate) async fn job<B: Inspect>(
    State(app): AppState<B>,
    ApiPath(id): ApiPath<u64>,
) -> ApiResult {
    match app.store.get(JobId(id)).await.map_err(store_error(&app))? {
        Some(info) => Ok(Json(JobDetail::of(&info)).into_response()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("job {id} not found"),
        )),
    }
}

/// `POST /api/jobs/{id}/revive`: a dead job runs again with a fresh retry budget.
pub(crate) async fn revive_job<B: Inspect>(
    State(app): AppState<B>,
    ApiPath(id): ApiPath<u64>,
) -> ApiResult {
    let n = app
        .store
        .revive(ReviveTarget::One(JobId(id)))
        .await
        .map_err(store_error(&app))?;
    app.invalidate();
    tracing::info!(job = id, "revived from the dashboard");
    Ok(Json(json!({ "revived": n })).into_response())
}

/// `POST /api/jobs/{id}/cancel`: deletes a job that is not running.
pub(crate) async fn cancel_job<B: Inspect>(
    State(app): AppState<B>,
    ApiPath(id): ApiPath<u64>,
) -> ApiResult {
    if !app.store.capabilities().cancel {
        return Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "this store cannot cancel one job",
        ));
    }
    app.store
        .cancel(JobId(id))
        .await
        .map_err(store_error(&app))?;
    app.invalidate();
    tracing::info!(job = id, "cancelled from the dashboard");
    Ok(Json(json!({ "cancelled": id })).into_response())
}

/// `POST /api/queues/{queue}/revive`: every dead job of the queue runs again.
pub(crate) async fn revive_queue<B: Inspect>(
    State(app): AppState<B>,
    ApiPath(queue): ApiPath<String>,
) -> ApiResult {
    let n = app
        .store
        .revive(ReviveTarget::AllDead {
            queue: Some(queue.clone()),
        })
        .await
        .map_err(store_error(&app))?;
    app.invalidate();
    tracing::info!(%queue, revived = n, "revived dead jobs from the dashboard");
    Ok(Json(json!({ "revived": n })).into_response())
}

/// Body of `POST /api/queues/{queue}/purge`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PurgeBody {
    /// Only jobs in this state (never `running`); absent: every job that is not running.
    state: Option<String>,
}

/// `POST /api/queues/{queue}/purge`: deletes the queue's jobs in a state (never running
/// ones).
pub(crate) async fn purge_queue<B: Inspect>(
    State(app): AppState<B>,
    ApiPath(queue): ApiPath<String>,
    ApiBody(body): ApiBody,
) -> ApiResult {
    let body: PurgeBody = if body.iter().all(u8::is_ascii_whitespace) {
        PurgeBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("bad body: {e}")))?
    };
    let status = match body.state.as_deref() {
        Some("running") => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "running jobs are never purged",
            ));
        }
        Some(s) => Some(
            s.parse::<JobStatus>()
                .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?,
        ),
        None => None,
    };
    let n = app
        .store
        .purge(Purge {
            queue: Some(queue.clone()),
            status,
        })
        .await
        .map_err(store_error(&app))?;
    app.invalidate();
    tracing::info!(%queue, purged = n, "purged from the dashboard");
    Ok(Json(json!({ "purged": n })).into_response())
}

async fn set_paused<B: Inspect>(app: &App<B>, queue: &str, paused: bool) -> ApiResult {
    if !app.store.capabilities().pause {
        return Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "this store cannot pause queues",
        ));
    }
    app.store
        .set_paused(queue, paused)
        .await
        .map_err(store_error(app))?;
    app.invalidate();
    tracing::info!(%queue, paused, "pause changed from the dashboard");
    Ok(Json(json!({ "queue": queue, "paused": paused })).into_response())
}

/// `POST /api/queues/{queue}/pause`.
pub(crate) async fn pause_queue<B: Inspect>(
    State(app): AppState<B>,
    ApiPath(queue): ApiPath<String>,
) -> ApiResult {
    set_paused(&app, &queue, true).await
}

/// `POST /api/queues/{queue}/remove`: removes a queue that has no live job, with its
/// finished jobs and counters (409 while it has live jobs, 404 for an unknown queue).
pub(crate) async fn remove_queue<B: Inspect>(
    State(app): AppState<B>,
    ApiPath(queue): ApiPath<String>,
) -> ApiResult {
    let removed = app
        .store
        .remove_queue(&queue)
        .await
        .map_err(store_error(&app))?;
    app.invalidate();
    tracing::info!(%queue, removed, "queue removed from the dashboard");
    Ok(Json(json!({ "queue": queue, "removed": removed })).into_response())
}

/// `POST /api/queues/{queue}/resume`.
pub(crate) async fn resume_queue<B: Inspect>(
    State(app): AppState<B>,
    ApiPath(queue): ApiPath<String>,
) -> ApiResult {
    set_paused(&app, &queue, false).await
}
