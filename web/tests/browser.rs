//! The dashboard in a real headless Chromium, driven through chromedriver (WebDriver): the
//! overview shows a seeded store's queues and counts, the tenants view lists every key with
//! its backlog, the revive action moves a dead job back, a finished queue can be removed
//! from its page (a live one cannot), markup in payloads and keys shows
//! as text, and a dashboard with a token refuses requests without it.
//!
//! Needs Debian's `chromium` and `chromium-driver`; without them the tests skip, unless
//! `FAIRQ_REQUIRE_SERVICES=1`. With `FAIRQ_UPDATE_SCREENSHOTS=1` the overview and tenants
//! screenshots are written to `web/doc/` (the README shows them).

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{TOKEN, XSS_KEY, XSS_PAYLOAD};
use fairq_core::retry::RetryPolicy;
use fairq_web::Config;
use fairq_worker::{
    Backend, Clock, Failure, Inspect, JobId, JobStatus, ManualClock, MemoryBackend, NewJob,
    SystemClock,
};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

/// One browser at a time: the machine is small, and Chromium is not.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long a page may take to show what a test waits for.
const PATIENCE: Duration = Duration::from_secs(30);

fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

/// Chromium under chromedriver, in a fresh profile; everything it started is killed on drop.
struct Browser {
    client: Client,
    driver_group: u32,
    _driver: tokio::process::Child,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // chromedriver and the Chromium it started share its process group.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.driver_group)])
            .stderr(Stdio::null())
            .status();
    }
}

impl Browser {
    /// `None` (after saying so) when Chromium or chromedriver is missing and not required.
    async fn start() -> Option<Browser> {
        let chromium = find_program(&["chromium", "chromium-browser"]);
        let driver = find_program(&["chromedriver"]);
        let (Some(chromium), Some(driver)) = (chromium, driver) else {
            if fairq_worker::services::required() {
                panic!("chromium and chromedriver are required (FAIRQ_REQUIRE_SERVICES=1)");
            }
            eprintln!("skipping: chromium or chromedriver is not installed");
            return None;
        };
        let mut child = tokio::process::Command::new(driver)
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        let group = child.id().expect("a pid");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let port = tokio::time::timeout(PATIENCE, async {
            while let Some(line) = lines.next_line().await.expect("chromedriver output") {
                if let Some(rest) = line.split("started successfully on port ").nth(1) {
                    return rest.trim_end_matches('.').parse::<u16>().ok();
                }
            }
            None
        })
        .await
        .expect("chromedriver says its port")
        .expect("a port");
        // Keep reading its output so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let profile = tempfile::tempdir().expect("a profile folder");
        let args = vec![
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            "--hide-scrollbars".into(),
            "--window-size=1280,800".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({ "binary": chromium, "args": args }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a browser session");
        Some(Browser {
            client,
            driver_group: group,
            _driver: child,
            _profile: profile,
        })
    }

    async fn close(self) {
        let _ = self.client.clone().close().await;
    }

    async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("navigate");
    }

    /// Waits until the element at `css` shows `expected`.
    async fn wait_text(&self, css: &str, expected: &str) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut last = None;
        while tokio::time::Instant::now() < deadline {
            if let Ok(el) = self.client.find(Locator::Css(css)).await {
                match el.text().await {
                    Ok(text) if text.trim() == expected => return,
                    Ok(text) => last = Some(text),
                    Err(_) => {}
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{css} never showed {expected:?} (last: {last:?})");
    }

    async fn text(&self, css: &str) -> String {
        let el = self
            .client
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"));
        el.text().await.expect("text")
    }

    async fn click(&self, css: &str) {
        self.client
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
            .click()
            .await
            .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    async fn sign_in(&self, base: &str, token: &str) {
        self.goto(&format!("{base}login")).await;
        let input = self
            .client
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css("#token"))
            .await
            .expect("the token field");
        input.send_keys(token).await.expect("type");
        self.click("form button[type=submit]").await;
    }

    /// True when the page is no wider than the window (nothing sticks out sideways).
    async fn fits(&self) -> bool {
        let fits = self
            .client
            .execute(
                "return document.documentElement.scrollWidth <= window.innerWidth;",
                vec![],
            )
            .await
            .expect("script");
        fits == Value::Bool(true)
    }

    async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("a screenshot");
        let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::write(&tmp, &png).expect("write the screenshot");
        if std::env::var("FAIRQ_UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1") {
            let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("doc").join(name);
            std::fs::create_dir_all(doc.parent().expect("a folder")).expect("doc folder");
            std::fs::write(&doc, &png).expect("write the screenshot");
        }
    }
}

/// The ids the story leaves for the tests.
struct Story {
    dead: JobId,
    xss: JobId,
}

/// Ten minutes of a fair queue, replayed on a manual clock that ends at the real time (so the
/// page's "ago" texts read right): tenant `acme` enqueues 12 jobs every 10 s, three small
/// tenants one each, and workers finish 12 jobs every 10 s, fairly. Queue `reports` holds a
/// dead job and a job with markup in its payload, key and metadata.
async fn story(store: &MemoryBackend, clock: &ManualClock, sample: impl AsyncFn()) -> Story {
    let lease = Duration::from_secs(300);
    for step in 0..60u64 {
        let mut jobs = Vec::new();
        for i in 0..12 {
            jobs.push(
                NewJob::json("emails", "send", &json!({"invoice": step * 12 + i}))
                    .expect("json")
                    .key("acme"),
            );
        }
        for (n, tenant) in ["globex", "initech", "umbrella"].iter().enumerate() {
            if (step + n as u64).is_multiple_of(2) {
                jobs.push(
                    NewJob::json("emails", "send", &json!({"step": step}))
                        .expect("json")
                        .key(*tenant),
                );
            }
        }
        store.enqueue_many(jobs).await.expect("enqueue");
        clock.advance(Duration::from_millis(1_500));
        let claimed = store.claim("emails", 12, lease).await.expect("claim");
        clock.advance(Duration::from_millis(400));
        for job in claimed {
            store.complete(job.claim).await.expect("complete");
        }
        clock.advance(Duration::from_millis(8_100));
        sample().await;
    }
    // A little backlog for every tenant at the end, three of them being worked on.
    let mut tail = Vec::new();
    for tenant in ["acme", "globex", "initech", "umbrella"] {
        for _ in 0..2 {
            tail.push(NewJob::new("emails", "send", b"{}".to_vec()).key(tenant));
        }
    }
    store.enqueue_many(tail).await.expect("enqueue");
    clock.advance(Duration::from_millis(50));
    store.claim("emails", 3, lease).await.expect("claim");
    let policy = RetryPolicy::new(0);
    let dead = store
        .enqueue(
            NewJob::json("reports", "render", &json!({"month": "2024-05"}))
                .expect("json")
                .key("globex")
                .retry(policy),
        )
        .await
        .expect("enqueue");
    let job = store
        .claim("reports", 1, lease)
        .await
        .expect("claim")
        .remove(0);
    store
        .fail(&job, Failure::retryable("renderer crashed: <exit 139>"))
        .await
        .expect("fail");
    let xss = store
        .enqueue(
            NewJob::new("reports", "render", XSS_PAYLOAD.as_bytes().to_vec())
                .key(XSS_KEY)
                .meta("<b>meta</b>", "<img src=x onerror=window.__xss=4>"),
        )
        .await
        .expect("enqueue");
    store
        .enqueue(NewJob::new("reports", "render", b"{}".to_vec()).key("initech"))
        .await
        .expect("enqueue");
    sample().await;
    Story { dead, xss }
}

/// A store with the story in it, served on a free port (`token`: the configured one).
async fn dashboard(token: Option<&str>) -> (MemoryBackend, Story, common::Running<MemoryBackend>) {
    let clock = ManualClock::new(SystemClock.now() - 10 * 60_000 - 100);
    let store = MemoryBackend::with_clock(clock.clone());
    let mut config = Config::new("memory:")
        .clock(clock.clone())
        .refresh(Duration::from_secs(10));
    if let Some(t) = token {
        config = config.token(t);
    }
    let server = common::start(store.clone(), config).await;
    let handle = server.handle.clone();
    let story = story(&store, &clock, async || {
        handle.sample().await.expect("a sample");
    })
    .await;
    (store, story, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_and_the_tenants_view_show_the_seeded_store() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(browser) = Browser::start().await else {
        return;
    };
    let (store, _, server) = dashboard(None).await;
    browser.goto(&server.url).await;
    for queue in ["emails", "reports"] {
        let counts = store.counts(queue);
        for status in JobStatus::ALL {
            let css = format!("[data-queue=\"{queue}\"] [data-count=\"{status}\"]");
            browser
                .wait_text(&css, &counts.get(status).to_string())
                .await;
        }
    }
    let rate = browser
        .text("[data-queue=\"emails\"] [data-window=\"5m\"] b")
        .await;
    assert_eq!(rate, "1.20/s", "12 jobs per 10 s");
    browser.screenshot("overview.png").await;
    assert!(browser.fits().await);

    browser
        .goto(&format!("{}#/queues/emails", server.url))
        .await;
    let backlog = store
        .backlog_by_key("emails", store.now(), usize::MAX)
        .await
        .expect("backlog");
    assert_eq!(backlog.items.len(), 4);
    for key in &backlog.items {
        let name = key.key.as_deref().expect("every key is named");
        let row = format!("#tenants tr[data-key=\"{name}\"]");
        browser
            .wait_text(&format!("{row} [data-col=\"due\"]"), &key.due.to_string())
            .await;
        let running = browser.text(&format!("{row} [data-col=\"running\"]")).await;
        assert_eq!(running, key.running.to_string(), "{name}");
    }
    // The heavy tenant's backlog comes first; every tenant was served in the window.
    assert_eq!(
        browser.text("#tenants tbody tr:first-child th").await,
        "acme"
    );
    for name in ["acme", "globex", "initech", "umbrella"] {
        let served = browser
            .text(&format!(
                "#tenants tr[data-key=\"{name}\"] [data-col=\"served\"]"
            ))
            .await;
        assert_ne!(served, "0", "{name}");
    }
    // Fair scheduling serves every tenant: none is marked behind.
    let behind = browser
        .client
        .execute(
            "return document.querySelectorAll('#tenants tr.behind').length;",
            vec![],
        )
        .await
        .expect("script");
    assert_eq!(behind, json!(0));
    browser.screenshot("tenants.png").await;
    assert!(browser.fits().await);

    // On a phone-sized screen nothing sticks out sideways (wide tables scroll inside).
    browser
        .client
        .set_window_size(390, 844)
        .await
        .expect("resize");
    assert!(browser.fits().await, "tenants view at 390 px");
    browser.goto(&server.url).await;
    browser
        .wait_text("[data-queue=\"reports\"] [data-count=\"dead\"]", "1")
        .await;
    assert!(browser.fits().await, "overview at 390 px");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviving_a_dead_job_from_its_page_moves_it_back() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(browser) = Browser::start().await else {
        return;
    };
    let (store, story, server) = dashboard(None).await;
    let token = server.generated_token.clone().expect("a generated token");
    browser.sign_in(&server.url, &token).await;
    browser.wait_text("#who", "Sign out").await;
    browser
        .goto(&format!("{}#/jobs/{}", server.url, story.dead.0))
        .await;
    browser.wait_text("h1 [data-status]", "dead").await;
    browser.click("#revive").await;
    browser
        .wait_text(
            "#confirm-text",
            &format!(
                "Revive job {}? It runs again with a fresh retry budget.",
                story.dead.0
            ),
        )
        .await;
    browser.click("#confirm-ok").await;
    browser.wait_text("h1 [data-status]", "scheduled").await;
    let info = store.get(story.dead).await.expect("get").expect("the job");
    assert_eq!(info.status(), JobStatus::Scheduled);
    assert_eq!(store.counts("reports").dead, 0);
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_finished_queue_from_its_page_takes_it_off_the_overview() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(browser) = Browser::start().await else {
        return;
    };
    let (store, _, server) = dashboard(None).await;
    // A queue whose only job has finished.
    store
        .enqueue(NewJob::new("scratch", "k", b"{}".to_vec()))
        .await
        .expect("enqueue");
    let job = store
        .claim("scratch", 1, Duration::from_secs(30))
        .await
        .expect("claim")
        .remove(0);
    store.complete(job.claim).await.expect("complete");
    // The dashboard reads the store through its sampler: take a sample that sees the queue.
    server.handle.sample().await.expect("a sample");
    let token = server.generated_token.clone().expect("a generated token");
    browser.sign_in(&server.url, &token).await;
    browser.wait_text("#who", "Sign out").await;

    // A queue with live jobs offers the button disabled.
    browser
        .goto(&format!("{}#/queues/emails", server.url))
        .await;
    let live = browser
        .client
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css("section[data-queue=\"emails\"] #remove-queue"))
        .await
        .expect("the remove button");
    assert!(!live.is_enabled().await.expect("enabled?"));

    browser
        .goto(&format!("{}#/queues/scratch", server.url))
        .await;
    browser
        .click("section[data-queue=\"scratch\"] #remove-queue")
        .await;
    browser
        .wait_text(
            "#confirm-text",
            "Remove queue scratch, its finished jobs and its counters? This cannot be undone.",
        )
        .await;
    browser.click("#confirm-ok").await;
    // Back on the overview, which lists the other queues and not this one.
    browser
        .wait_text(
            "[data-queue=\"reports\"] [data-count=\"dead\"]",
            &store.counts("reports").dead.to_string(),
        )
        .await;
    let left = browser
        .client
        .find_all(Locator::Css("[data-queue=\"scratch\"]"))
        .await
        .expect("find");
    assert!(left.is_empty(), "the removed queue is off the overview");
    assert!(!store
        .stats()
        .await
        .expect("stats")
        .iter()
        .any(|s| s.queue == "scratch"));
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markup_in_payloads_keys_and_metadata_shows_as_text() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(browser) = Browser::start().await else {
        return;
    };
    let (_store, story, server) = dashboard(None).await;
    browser
        .goto(&format!("{}#/jobs/{}", server.url, story.xss.0))
        .await;
    let parsed: Value = serde_json::from_str(XSS_PAYLOAD).expect("json");
    let pretty = serde_json::to_string_pretty(&parsed).expect("json");
    browser.wait_text("#payload", &pretty).await;
    assert_eq!(browser.text("[data-field=\"key\"]").await, XSS_KEY);
    assert!(browser
        .text("table")
        .await
        .contains("<img src=x onerror=window.__xss=4>"));
    browser
        .goto(&format!("{}#/queues/reports", server.url))
        .await;
    browser
        .wait_text("#tenants tbody tr:first-child th", XSS_KEY)
        .await;
    browser
        .goto(&format!("{}#/jobs?queue=reports", server.url))
        .await;
    assert!(browser.text("#jobs").await.contains(XSS_KEY));
    let state = browser
        .client
        .execute("return [typeof window.__xss, document.querySelectorAll('#view img, #view script, #view b, #view i').length];", vec![])
        .await
        .expect("script");
    assert_eq!(
        state,
        json!(["undefined", 0]),
        "no markup from the store became an element"
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_set_requests_without_it_are_refused() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(browser) = Browser::start().await else {
        return;
    };
    let (store, story, server) = dashboard(Some(TOKEN)).await;
    browser.goto(&format!("{}api/overview", server.url)).await;
    assert!(browser.text("body").await.contains("needs the token"));
    browser.goto(&server.url).await;
    browser.wait_text("h1", "Sign in").await;
    assert_eq!(
        browser.client.current_url().await.expect("url").path(),
        "/login"
    );
    browser.sign_in(&server.url, "not-the-token-at-all").await;
    browser
        .wait_text(".notice", "That token is not right.")
        .await;

    browser.sign_in(&server.url, TOKEN).await;
    browser
        .wait_text("[data-queue=\"reports\"] [data-count=\"dead\"]", "1")
        .await;
    // Signed in, an action still needs the page's CSRF token: a bare POST is refused.
    let status = browser
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch('/api/jobs/' + arguments[0] + '/revive', { method: 'POST', credentials: 'same-origin' })
               .then((r) => done(r.status), (e) => done(String(e)));",
            vec![json!(story.dead.0)],
        )
        .await
        .expect("script");
    assert_eq!(status, json!(403));
    assert_eq!(store.counts("reports").dead, 1);
    browser.close().await;
}
