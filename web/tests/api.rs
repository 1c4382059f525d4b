//! The HTTP API against every store (memory, file, PostgreSQL, Redis): reads match the store,
//! actions change it, and the access rules hold.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::{Seeded, TOKEN, XSS_KEY, XSS_PAYLOAD};
use fairq_file::{FileBackend, FileOptions};
use fairq_web::Config;
use fairq_worker::{Backend, Inspect, JobStatus, ListFilter, MemoryBackend, NewJob};
use reqwest::header::{HeaderMap, AUTHORIZATION, CONTENT_TYPE, COOKIE, HOST, ORIGIN, SET_COOKIE};
use reqwest::{redirect, Client, Method, StatusCode};
use serde_json::Value;

/// A store URL full of secrets: the label source of every server in these tests.
const SECRET_URL: &str =
    "postgres://admin:SuperSecret123@db.internal:5432/jobs?password=AlsoSecret456&schema=billing";
const SECRETS: [&str; 3] = ["SuperSecret123", "AlsoSecret456", "admin"];

struct Api {
    client: Client,
    base: String,
    /// Every body seen, to check for secrets at the end.
    bodies: Vec<String>,
}

impl Api {
    fn new(base: &str) -> Api {
        Api {
            client: Client::builder()
                .redirect(redirect::Policy::none())
                .build()
                .expect("a client"),
            base: base.trim_end_matches('/').to_string(),
            bodies: Vec::new(),
        }
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, format!("{}{path}", self.base))
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> (StatusCode, Value, HeaderMap) {
        let response = request.send().await.expect("a response");
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.expect("a body");
        self.bodies.push(format!("{headers:?}\n{text}"));
        let value = serde_json::from_str(&text).unwrap_or(Value::Null);
        (status, value, headers)
    }

    async fn get(&mut self, path: &str) -> (StatusCode, Value) {
        let req = self
            .request(Method::GET, path)
            .header(AUTHORIZATION, format!("Bearer {TOKEN}"));
        let (status, value, _) = self.send(req).await;
        (status, value)
    }

    async fn post(&mut self, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self
            .request(Method::POST, path)
            .header(AUTHORIZATION, format!("Bearer {TOKEN}"));
        if let Some(body) = body {
            req = req.json(&body);
        }
        let (status, value, _) = self.send(req).await;
        (status, value)
    }
}

fn counts_of(overview: &Value, queue: &str) -> Value {
    overview["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["name"] == queue)
        .unwrap_or_else(|| panic!("queue {queue} in {overview}"))["counts"]
        .clone()
}

fn tenant<'a>(tenants: &'a Value, key: Option<&str>) -> &'a Value {
    tenants["tenants"]
        .as_array()
        .expect("tenants")
        .iter()
        .find(|t| t["key"].as_str() == key)
        .unwrap_or_else(|| panic!("key {key:?} in {tenants}"))
}

/// Every check, on one seeded store.
async fn suite<B: Inspect>(store: Arc<B>, name: &str) {
    let seeded: Seeded = common::seed(&*store).await;
    let caps = store.capabilities();
    let server = common::start(Arc::clone(&store), Config::new(SECRET_URL).token(TOKEN)).await;
    let mut api = Api::new(&server.url);

    // Reads need the token once one is set; a wrong one is refused.
    let (status, body, response) = api.send(api.request(Method::GET, "/api/overview")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{name}: {body}");
    assert!(response.contains_key("www-authenticate"));
    let wrong = api
        .request(Method::GET, "/api/overview")
        .header(AUTHORIZATION, "Bearer not-the-token-at-all");
    assert_eq!(api.send(wrong).await.0, StatusCode::UNAUTHORIZED, "{name}");
    let (status, _, response) = api.send(api.request(Method::GET, "/")).await;
    assert_eq!(
        status,
        StatusCode::SEE_OTHER,
        "{name}: pages send anonymous readers to sign in"
    );
    assert_eq!(response["location"], "/login");

    // The overview matches the store.
    let (status, overview) = api.get("/api/overview").await;
    assert_eq!(status, StatusCode::OK, "{name}: {overview}");
    assert_eq!(
        overview["store"],
        "postgres://db.internal:5432/jobs?schema=billing"
    );
    for stats in store.stats().await.expect("stats") {
        let counts = counts_of(&overview, &stats.queue);
        for status in JobStatus::ALL {
            assert_eq!(
                counts[status.as_str()].as_u64(),
                Some(stats.counts.get(status)),
                "{name}: {} {status}",
                stats.queue
            );
        }
    }
    let mail = counts_of(&overview, "mail");
    assert_eq!(
        (
            mail["scheduled"].as_u64(),
            mail["running"].as_u64(),
            mail["dead"].as_u64()
        ),
        (Some(9), Some(1), Some(1)),
        "{name}: {mail}"
    );

    // The tenants view: each key's backlog.
    let (status, tenants) = api.get("/api/queues/mail/tenants?window=60").await;
    assert_eq!(status, StatusCode::OK, "{name}: {tenants}");
    assert_eq!(tenants["window_ms"], 60_000);
    let heavy = tenant(&tenants, Some("heavy"));
    assert_eq!(heavy["due"], 5, "{name}: {heavy}");
    assert_eq!(
        heavy["oldest_due"]["id"], seeded.first_heavy.0,
        "{name}: {heavy}"
    );
    let light = tenant(&tenants, Some("light"));
    assert_eq!(
        (
            light["due"].as_u64(),
            light["later"].as_u64(),
            light["running"].as_u64()
        ),
        (Some(1), Some(1), Some(1)),
        "{name}: {light}"
    );
    assert_eq!(tenant(&tenants, None)["due"], 1, "{name}");
    assert_eq!(tenant(&tenants, Some(XSS_KEY))["due"], 1, "{name}");
    assert_eq!(
        tenants["tenants"][0]["key"], "heavy",
        "{name}: biggest backlog first"
    );
    let (status, _) = api.get("/api/queues/nope/tenants").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{name}");

    let (status, detail) = api.get("/api/queues/mail").await;
    assert_eq!(status, StatusCode::OK, "{name}: {detail}");
    assert_eq!(detail["latency"].as_array().map(Vec::len), Some(3));
    assert_eq!(detail["queue"]["counts"]["dead"], 1);

    // Jobs, a page at a time, match the store's list.
    let expected: Vec<u64> = store
        .list(ListFilter::default().queue("mail").limit(1_000))
        .await
        .expect("list")
        .iter()
        .map(|j| j.id.0)
        .collect();
    let mut seen = Vec::new();
    let mut after = String::new();
    loop {
        let (status, page) = api
            .get(&format!("/api/jobs?queue=mail&limit=3{after}"))
            .await;
        assert_eq!(status, StatusCode::OK, "{name}: {page}");
        seen.extend(
            page["jobs"]
                .as_array()
                .expect("jobs")
                .iter()
                .map(|j| j["id"].as_u64().expect("id")),
        );
        match page["next_after"].as_u64() {
            Some(next) => after = format!("&after={next}"),
            None => break,
        }
        assert!(seen.len() <= expected.len(), "{name}: paging does not end");
    }
    assert_eq!(seen, expected, "{name}");
    let (_, heavy_jobs) = api.get("/api/jobs?queue=mail&key=heavy&limit=2").await;
    assert_eq!(
        heavy_jobs["jobs"].as_array().map(Vec::len),
        Some(2),
        "{name}"
    );
    assert!(
        heavy_jobs["next_after"].is_u64(),
        "{name}: a full page has a next one"
    );
    let (_, all_heavy) = api.get("/api/jobs?key=heavy").await;
    let keys: BTreeSet<&str> = all_heavy["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .filter_map(|j| j["key"].as_str())
        .collect();
    assert_eq!(
        (all_heavy["jobs"].as_array().map(Vec::len), keys),
        (Some(5), BTreeSet::from(["heavy"])),
        "{name}"
    );
    let (_, keyless) = api.get("/api/jobs?queue=mail&no_key=true").await;
    assert_eq!(keyless["jobs"].as_array().map(Vec::len), Some(1), "{name}");
    let (_, dead) = api.get("/api/jobs?state=dead").await;
    assert_eq!(dead["jobs"][0]["id"], seeded.dead.0, "{name}");
    assert_eq!(dead["jobs"][0]["last_error"], "smtp said <no>", "{name}");
    let (status, bad) = api.get("/api/jobs?state=zombie").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {bad}");

    // One job's full record, payload as sent.
    let (status, job) = api.get(&format!("/api/jobs/{}", seeded.xss.0)).await;
    assert_eq!(status, StatusCode::OK, "{name}: {job}");
    assert_eq!(job["payload"]["text"], XSS_PAYLOAD);
    assert_eq!(job["payload"]["json"], true);
    assert_eq!(job["key"], XSS_KEY);
    assert_eq!(job["metadata"]["<b>meta</b>"], "<i>value</i>");
    let (_, running) = api.get(&format!("/api/jobs/{}", seeded.running.0)).await;
    assert_eq!(running["status"], "running", "{name}");
    assert_eq!(running["lease"]["attempt"], 1, "{name}: {running}");
    assert_eq!(
        api.get("/api/jobs/987654321").await.0,
        StatusCode::NOT_FOUND
    );

    // Revive a dead job; reviving it again is a conflict.
    let (status, revived) = api
        .post(&format!("/api/jobs/{}/revive", seeded.dead.0), None)
        .await;
    assert_eq!(
        (status, revived["revived"].as_u64()),
        (StatusCode::OK, Some(1)),
        "{name}: {revived}"
    );
    let info = store.get(seeded.dead).await.expect("get").expect("the job");
    assert_eq!(info.status(), JobStatus::Scheduled, "{name}");
    let (status, _) = api
        .post(&format!("/api/jobs/{}/revive", seeded.dead.0), None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{name}");
    let (status, all) = api.post("/api/queues/mail/revive", None).await;
    assert_eq!(
        (status, all["revived"].as_u64()),
        (StatusCode::OK, Some(0)),
        "{name}"
    );

    // Every store cancels a waiting job (and says so); running and unknown jobs are refused.
    assert!(caps.cancel, "{name}: every store can cancel one job");
    assert_eq!(
        overview["capabilities"]["cancel"],
        Value::Bool(true),
        "{name}: the overview names the capability"
    );
    let (status, body) = api
        .post(&format!("/api/jobs/{}/cancel", seeded.later.0), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{name}: {body}");
    assert_eq!(body["cancelled"].as_u64(), Some(seeded.later.0), "{name}");
    assert!(
        store.get(seeded.later).await.expect("get").is_none(),
        "{name}: the cancelled job is gone"
    );
    let (status, body) = api
        .post(&format!("/api/jobs/{}/cancel", seeded.later.0), None)
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "{name}: a cancelled job is not found again: {body}"
    );
    let (status, body) = api
        .post(&format!("/api/jobs/{}/cancel", seeded.running.0), None)
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "{name}: running jobs are not cancelled: {body}"
    );
    assert_eq!(
        store
            .get(seeded.running)
            .await
            .expect("get")
            .map(|info| info.status()),
        Some(JobStatus::Running),
        "{name}: a refused cancel leaves the job running"
    );
    // Pause where the store can; a clear refusal where it cannot.
    let (status, body) = api.post("/api/queues/images/pause", None).await;
    if caps.pause {
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        let (_, overview) = api.get("/api/overview").await;
        let images = overview["queues"]
            .as_array()
            .expect("queues")
            .iter()
            .find(|q| q["name"] == "images")
            .cloned();
        assert_eq!(
            images.map(|q| q["paused"].clone()),
            Some(Value::Bool(true)),
            "{name}"
        );
        assert!(store
            .claim("images", 1, std::time::Duration::from_secs(5))
            .await
            .expect("claim")
            .is_empty());
        assert_eq!(
            api.post("/api/queues/images/resume", None).await.0,
            StatusCode::OK
        );
        assert_eq!(
            store
                .claim("images", 1, std::time::Duration::from_secs(5))
                .await
                .expect("claim")
                .len(),
            1
        );
    } else {
        assert_eq!(status, StatusCode::NOT_IMPLEMENTED, "{name}: {body}");
    }

    // Removing a queue: refused while it has live jobs, then it goes with its finished jobs.
    let (status, body) = api.post("/api/queues/mail/remove", None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{name}: {body}");
    store
        .enqueue(NewJob::new("scratch", "k", b"{}".to_vec()))
        .await
        .expect("enqueue");
    let done = store
        .claim("scratch", 1, std::time::Duration::from_secs(30))
        .await
        .expect("claim")
        .remove(0);
    store.complete(done.claim).await.expect("complete");
    let (status, removed) = api.post("/api/queues/scratch/remove", None).await;
    assert_eq!(
        (status, removed["removed"].as_u64()),
        (StatusCode::OK, Some(1)),
        "{name}: {removed}"
    );
    let (_, overview) = api.get("/api/overview").await;
    assert!(
        !overview["queues"]
            .as_array()
            .expect("queues")
            .iter()
            .any(|q| q["name"] == "scratch"),
        "{name}: a removed queue leaves the overview"
    );
    let (status, body) = api.post("/api/queues/scratch/remove", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{name}: {body}");

    // Purge: never running jobs; by state.
    let (status, _) = api
        .post(
            "/api/queues/mail/purge",
            Some(serde_json::json!({"state": "running"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{name}");
    let (status, purged) = api
        .post(
            "/api/queues/mail/purge",
            Some(serde_json::json!({"state": "succeeded"})),
        )
        .await;
    assert_eq!(
        (status, purged["purged"].as_u64()),
        (StatusCode::OK, Some(0)),
        "{name}: {purged}"
    );
    let (status, _) = api
        .post(
            "/api/queues/mail/purge",
            Some(serde_json::json!({"colour": "red"})),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "{name}: unknown fields are refused"
    );

    // A browser session: the cookie reads, actions also need the CSRF token, and cross-site
    // posts are refused.
    let login = api
        .request(Method::POST, "/login")
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(format!("token={TOKEN}"));
    let (status, _, response) = api.send(login).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{name}");
    let set_cookie = response[SET_COOKIE].to_str().expect("ascii").to_string();
    assert!(
        set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"),
        "{set_cookie}"
    );
    let cookie = set_cookie.split(';').next().expect("a cookie").to_string();
    let (status, session, _) = api
        .send(
            api.request(Method::GET, "/api/session")
                .header(COOKIE, &cookie),
        )
        .await;
    assert_eq!(
        (status, session["signed_in"].as_bool()),
        (StatusCode::OK, Some(true)),
        "{name}"
    );
    let csrf = session["csrf"].as_str().expect("a csrf token").to_string();
    let (client, base) = (api.client.clone(), api.base.clone());
    let revive_all = || {
        client
            .post(format!("{base}/api/queues/mail/revive"))
            .header(COOKIE, &cookie)
    };
    let (status, _, _) = api.send(revive_all()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{name}: no CSRF token");
    let (status, _, _) = api
        .send(revive_all().header("x-csrf-token", "forged"))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{name}: wrong CSRF token");
    let cross = revive_all()
        .header("x-csrf-token", &csrf)
        .header(ORIGIN, "http://evil.example");
    assert_eq!(
        api.send(cross).await.0,
        StatusCode::FORBIDDEN,
        "{name}: cross-site"
    );
    let (status, _, _) = api.send(revive_all().header("x-csrf-token", &csrf)).await;
    assert_eq!(status, StatusCode::OK, "{name}");
    let bad_login = api
        .request(Method::POST, "/login")
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body("token=wrong-token-wrong-token");
    let (status, _, response) = api.send(bad_login).await;
    assert_eq!(
        (status, &response["location"]),
        (
            StatusCode::SEE_OTHER,
            &"/login?failed=1".parse().expect("a header")
        )
    );
    assert!(!response.contains_key(SET_COOKIE));

    // DNS rebinding: a Host that is not loopback is refused even with the token.
    let rebound = api
        .request(Method::GET, "/api/overview")
        .header(AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(HOST, "evil.example");
    assert_eq!(api.send(rebound).await.0, StatusCode::FORBIDDEN, "{name}");

    // Security headers on pages and answers.
    let (status, _, response) = api.send(api.request(Method::GET, "/login")).await;
    assert_eq!(status, StatusCode::OK);
    let csp = response["content-security-policy"].to_str().expect("ascii");
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert_eq!(response["x-content-type-options"], "nosniff");

    // Health, and the event stream's first event.
    let (status, health) = api.get("/api/health").await;
    assert_eq!(
        (status, health["healthy"].as_bool()),
        (StatusCode::OK, Some(true)),
        "{name}: {health}"
    );
    server.handle.sample().await.expect("a sample");
    let mut events = api
        .request(Method::GET, "/api/events")
        .header(AUTHORIZATION, format!("Bearer {TOKEN}"))
        .send()
        .await
        .expect("events");
    assert_eq!(events.headers()[CONTENT_TYPE], "text/event-stream");
    let first = events.chunk().await.expect("a chunk").expect("an event");
    let first = String::from_utf8_lossy(&first).to_string();
    assert!(first.starts_with("event: tick"), "{name}: {first}");
    api.bodies.push(first);
    drop(events);

    // No credential of the store URL ever left the server.
    for body in &api.bodies {
        for secret in SECRETS {
            assert!(!body.contains(secret), "{name}: {secret} leaked in {body}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_on_the_memory_store() {
    suite(Arc::new(MemoryBackend::new()), "memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_on_the_file_store() {
    let dir = tempfile::tempdir().expect("a folder");
    let store = FileBackend::open(dir.path(), FileOptions::default()).expect("open");
    suite(Arc::new(store), "file").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_on_postgres() {
    let Some(guard) = common::pg_store().await else {
        return;
    };
    suite(Arc::new(guard.store.clone()), "postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_on_redis() {
    let Some(guard) = common::redis_store().await else {
        return;
    };
    suite(Arc::new(guard.store.clone()), "redis").await;
}

#[tokio::test]
async fn without_a_token_loopback_reads_are_open_and_actions_need_the_generated_token() {
    let store = Arc::new(MemoryBackend::new());
    let seeded = common::seed(&*store).await;
    let server = common::start(Arc::clone(&store), Config::new("memory:")).await;
    let token = server.generated_token.clone().expect("a generated token");
    let mut api = Api::new(&server.url);
    let (status, _, _) = api.send(api.request(Method::GET, "/api/overview")).await;
    assert_eq!(status, StatusCode::OK);
    let path = format!("/api/jobs/{}/revive", seeded.dead.0);
    let (status, body, _) = api.send(api.request(Method::POST, &path)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(
        store
            .get(seeded.dead)
            .await
            .expect("get")
            .map(|j| j.status()),
        Some(JobStatus::Dead)
    );
    let with = api
        .request(Method::POST, &path)
        .header(AUTHORIZATION, format!("Bearer {token}"));
    assert_eq!(api.send(with).await.0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_ends_with_its_session() {
    // Signing out gives no more access: the live stream opened with the session ends.
    let store = Arc::new(MemoryBackend::new());
    let server = common::start(Arc::clone(&store), Config::new("memory:").token(TOKEN)).await;
    let mut api = Api::new(&server.url);
    let login = api
        .request(Method::POST, "/login")
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(format!("token={TOKEN}"));
    let (_, _, response) = api.send(login).await;
    let cookie = response[SET_COOKIE]
        .to_str()
        .expect("ascii")
        .split(';')
        .next()
        .expect("a cookie")
        .to_string();
    let (_, session, _) = api
        .send(
            api.request(Method::GET, "/api/session")
                .header(COOKIE, &cookie),
        )
        .await;
    let csrf = session["csrf"].as_str().expect("a csrf token").to_string();
    server.handle.sample().await.expect("a sample");
    let mut events = api
        .request(Method::GET, "/api/events")
        .header(COOKIE, &cookie)
        .send()
        .await
        .expect("events");
    let patience = std::time::Duration::from_secs(30);
    let first = tokio::time::timeout(patience, events.chunk())
        .await
        .expect("the first event")
        .expect("a chunk")
        .expect("an event");
    assert!(String::from_utf8_lossy(&first).starts_with("event: tick"));
    let logout = api
        .request(Method::POST, "/logout")
        .header(COOKIE, &cookie)
        .header("x-csrf-token", &csrf);
    assert_eq!(api.send(logout).await.0, StatusCode::NO_CONTENT);
    server.handle.sample().await.expect("a sample");
    let next = tokio::time::timeout(patience, events.chunk())
        .await
        .expect("the stream answers")
        .expect("a clean end");
    assert!(
        next.is_none(),
        "the stream went on after sign-out: {:?}",
        next.map(|b| String::from_utf8_lossy(&b).to_string())
    );
}

#[tokio::test]
async fn malformed_requests_are_answered_in_json_too() {
    // The README promises JSON for every answer; axum's own extractors and its method
    // check answered these in plain text (or with no body at all).
    let store = Arc::new(MemoryBackend::new());
    common::seed(&*store).await;
    let server = common::start(Arc::clone(&store), Config::new("memory:").token(TOKEN)).await;
    let mut api = Api::new(&server.url);
    for (path, status, says) in [
        ("/api/jobs/abc", StatusCode::BAD_REQUEST, "abc"),
        (
            "/api/jobs/99999999999999999999",
            StatusCode::BAD_REQUEST,
            "u64",
        ),
        ("/api/queues/%FF/tenants", StatusCode::BAD_REQUEST, "UTF-8"),
        (
            "/api/queues/mail/tenants?window=abc",
            StatusCode::BAD_REQUEST,
            "window",
        ),
        ("/api/jobs?limit=-1", StatusCode::BAD_REQUEST, "limit"),
        ("/api/jobs?after=soon", StatusCode::BAD_REQUEST, "after"),
        ("/api/nothing-here", StatusCode::NOT_FOUND, "no such page"),
    ] {
        let (got, body) = api.get(path).await;
        assert_eq!(got, status, "{path}: {body}");
        let error = body["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{path}: {body}"));
        assert!(error.contains(says), "{path}: {error}");
    }
    // Outside the API's own routes too: a missing static file, a malformed sign-in page
    // query, a sign-in that is not a form or lacks its field, an oversize action body.
    let (status, body) = api.get("/assets/nope.js").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(body["error"].as_str().is_some(), "{body}");
    let (status, body) = api.get("/login?failed=1&failed=2").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"].as_str().is_some(), "{body}");
    let origin = server.url.trim_end_matches('/').to_string();
    for (kind, text, status) in [
        (
            "application/json",
            "{\"token\":\"x\"}",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "application/x-www-form-urlencoded",
            "x=1",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let req = api
            .request(Method::POST, "/login")
            .header("origin", &origin)
            .header("content-type", kind)
            .body(text);
        let (got, body, _) = api.send(req).await;
        assert_eq!(got, status, "{kind}: {body}");
        assert!(body["error"].as_str().is_some(), "{kind}: {body}");
    }
    let req = api
        .request(Method::POST, "/api/queues/mail/purge")
        .header(AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .body(vec![b' '; 3 << 20]);
    let (status, body, _) = api.send(req).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert!(body["error"].as_str().is_some(), "{body}");
    // A known path with the wrong method: 405, JSON, and the methods it takes.
    let req = api
        .request(Method::DELETE, "/api/overview")
        .header(AUTHORIZATION, format!("Bearer {TOKEN}"));
    let (status, body, headers) = api.send(req).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");
    assert!(body["error"].as_str().is_some(), "{body}");
    assert!(
        headers
            .get("allow")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|allow| allow.contains("GET")),
        "{headers:?}"
    );
}

#[tokio::test]
async fn refresh_intervals_are_kept_within_a_day_and_100_ms() {
    // `Duration::MAX` is a natural way to ask for "hardly ever": it used to overflow the
    // history's length (a panic in debug builds, a history that kept nothing in release)
    // and the per-key answers' slack, and could overflow the sampler's timer.
    let store = Arc::new(MemoryBackend::new());
    common::seed(&*store).await;
    for (asked, kept) in [
        (std::time::Duration::MAX, fairq_web::MAX_REFRESH),
        (std::time::Duration::ZERO, fairq_web::MIN_REFRESH),
    ] {
        let config = Config::new("memory:").token(TOKEN).refresh(asked);
        let server = common::start(Arc::clone(&store), config).await;
        let mut api = Api::new(&server.url);
        let (status, session) = api.get("/api/session").await;
        assert_eq!(status, StatusCode::OK, "{session}");
        assert_eq!(
            session["refresh_ms"].as_u64(),
            Some(kept.as_millis() as u64)
        );
        let (status, tenants) = api.get("/api/queues/mail/tenants?window=60").await;
        assert_eq!(status, StatusCode::OK, "{tenants}");
        let (status, overview) = api.get("/api/overview").await;
        assert_eq!(status, StatusCode::OK, "{overview}");
    }
}

#[tokio::test]
async fn a_non_loopback_address_needs_a_token_and_short_tokens_are_refused() {
    let no_token = fairq_web::Server::bind(
        MemoryBackend::new(),
        Config::new("memory:").listen("0.0.0.0:0".parse().expect("an address")),
    )
    .await;
    assert!(matches!(
        no_token,
        Err(fairq_web::WebError::TokenRequired(_))
    ));
    let short = fairq_web::Server::bind(
        MemoryBackend::new(),
        Config::new("memory:")
            .listen("127.0.0.1:0".parse().expect("an address"))
            .token("short"),
    )
    .await;
    assert!(matches!(short, Err(fairq_web::WebError::WeakToken(16))));
    // Sixteen spaces are no token; neither is one no header can carry.
    for (token, weak) in [
        (" ".repeat(16), true),
        ("pässwörd-ünïcödé-x".to_string(), false),
    ] {
        let refused = fairq_web::Server::bind(
            MemoryBackend::new(),
            Config::new("memory:")
                .listen("127.0.0.1:0".parse().expect("an address"))
                .token(token.as_str()),
        )
        .await;
        match (refused, weak) {
            (Err(fairq_web::WebError::WeakToken(16)), true) => {}
            (Err(fairq_web::WebError::UnsendableToken), false) => {}
            (other, _) => panic!("{token:?}: {:?}", other.err()),
        }
    }
}

#[tokio::test]
async fn a_queue_made_since_the_last_sample_is_found() {
    // `GET /api/queues/{queue}` looked the queue up in the last sample only: for up to one
    // refresh interval a queue that exists (its tenants view answered) was "not found".
    let store = Arc::new(MemoryBackend::new());
    common::seed(&*store).await;
    let config = Config::new("memory:")
        .token(TOKEN)
        .refresh(fairq_web::MAX_REFRESH);
    let server = common::start(Arc::clone(&store), config).await;
    let mut api = Api::new(&server.url);
    let (status, overview) = api.get("/api/overview").await;
    assert_eq!(status, StatusCode::OK, "{overview}");
    store
        .enqueue(NewJob::new("fresh", "send", b"{}".to_vec()).key("k"))
        .await
        .expect("enqueue");
    let (status, tenants) = api.get("/api/queues/fresh/tenants").await;
    assert_eq!(status, StatusCode::OK, "{tenants}");
    let (status, detail) = api.get("/api/queues/fresh").await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    assert_eq!(detail["queue"]["name"], "fresh", "{detail}");
    assert_eq!(detail["queue"]["pending"].as_u64(), Some(1), "{detail}");
    // An unknown queue is still not found.
    let (status, body) = api.get("/api/queues/never").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

#[tokio::test]
async fn a_queue_paused_before_its_first_job_is_shown_and_can_be_resumed() {
    // A queue can be paused before its first job (the CLI says so, and the API accepts it),
    // but the overview listed only queues with jobs: the pause was invisible, and the page
    // offered no way to resume it.
    let store = Arc::new(MemoryBackend::new());
    common::seed(&*store).await;
    let server = common::start(Arc::clone(&store), Config::new("memory:").token(TOKEN)).await;
    let mut api = Api::new(&server.url);
    let (status, body) = api.post("/api/queues/reports/pause", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, overview) = api.get("/api/overview").await;
    assert_eq!(status, StatusCode::OK, "{overview}");
    let reports = overview["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["name"] == "reports")
        .cloned()
        .unwrap_or_else(|| panic!("the paused queue is not listed: {overview}"));
    assert_eq!(reports["paused"], true, "{reports}");
    assert_eq!(reports["total"].as_u64(), Some(0), "{reports}");
    let (status, detail) = api.get("/api/queues/reports").await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    assert_eq!(detail["queue"]["paused"], true, "{detail}");
    // The queue page reads its tenants view too.
    let (status, tenants) = api.get("/api/queues/reports/tenants").await;
    assert_eq!(status, StatusCode::OK, "{tenants}");
    assert_eq!(
        tenants["tenants"].as_array().map(Vec::len),
        Some(0),
        "{tenants}"
    );
    let (status, body) = api.post("/api/queues/reports/resume", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, overview) = api.get("/api/overview").await;
    assert!(
        !overview["queues"]
            .as_array()
            .expect("queues")
            .iter()
            .any(|q| q["name"] == "reports"),
        "a resumed queue without jobs is gone again: {overview}"
    );
}

#[tokio::test]
async fn a_key_and_no_key_together_are_refused() {
    // `key=heavy&no_key=true` asks for jobs with key `heavy` and without a key: no job is
    // both. The filter used to drop `no_key` silently and answer `heavy`'s jobs.
    let store = Arc::new(MemoryBackend::new());
    common::seed(&*store).await;
    let server = common::start(Arc::clone(&store), Config::new("memory:").token(TOKEN)).await;
    let mut api = Api::new(&server.url);
    let (status, body) = api.get("/api/jobs?key=heavy&no_key=true").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let error = body["error"].as_str().unwrap_or_else(|| panic!("{body}"));
    assert!(error.contains("no_key"), "{error}");
    // Each alone still filters; an empty key is no key filter.
    for path in [
        "/api/jobs?key=heavy",
        "/api/jobs?no_key=true",
        "/api/jobs?key=&no_key=true",
    ] {
        let (status, body) = api.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
}
