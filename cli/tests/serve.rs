//! `fairq serve` and `fairq work --serve` as a user runs them: the binary prints where the
//! dashboard is, serves the store of `--store`, never shows the URL's password, refuses to
//! listen beyond loopback without a token, and stops cleanly on SIGTERM.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{fairq, service_stores};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

/// A `fairq` process serving a dashboard; killed if the test ends early.
struct Served {
    child: tokio::process::Child,
    url: String,
    stderr: Vec<String>,
}

async fn serve(args: &[&str], dir: &std::path::Path) -> Served {
    let bin = assert_cmd::cargo::cargo_bin("fairq");
    let mut child = tokio::process::Command::new(bin)
        .args(args)
        .current_dir(dir)
        .env_remove("FAIRQ_STORE")
        .env_remove("FAIRQ_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("fairq starts");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut stderr = Vec::new();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("stderr") {
            stderr.push(line.clone());
            if let Some(rest) = line.strip_prefix("fairq dashboard on ") {
                return rest.split_whitespace().next().map(str::to_string);
            }
        }
        None
    })
    .await
    .expect("the dashboard line in time")
    .unwrap_or_else(|| panic!("no dashboard line in {stderr:?}"));
    // The token line, when there is one, follows at once.
    if let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_millis(200), lines.next_line()).await
    {
        stderr.push(line);
    }
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Served { child, url, stderr }
}

impl Served {
    async fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        let mut req = reqwest::Client::new().get(format!("{}{path}", self.url));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let response = req.send().await.expect("a response");
        let status = response.status().as_u16();
        (status, response.text().await.expect("a body"))
    }

    /// SIGTERM, then the exit status and stdout.
    async fn stop(self) -> (bool, String) {
        let pid = self.child.id().expect("running");
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(killed.success());
        let output = tokio::time::timeout(Duration::from_secs(60), self.child.wait_with_output())
            .await
            .expect("stops in time")
            .expect("output");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).to_string(),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_shows_a_file_store_until_sigterm() {
    let dir = tempfile::tempdir().expect("a folder");
    let store = format!("file:{}", dir.path().join("data").display());
    fairq(dir.path())
        .args([
            "--store", &store, "enqueue", "-q", "mail", "-k", "send", "--key", "tenant-1",
        ])
        .assert()
        .success();
    let served = serve(
        &["--store", &store, "serve", "--listen", "127.0.0.1:0"],
        dir.path(),
    )
    .await;
    assert!(
        served.url.starts_with("http://127.0.0.1:"),
        "{}",
        served.url
    );
    let token_line = served
        .stderr
        .iter()
        .find(|l| l.contains("actions need this token"));
    assert!(
        token_line.is_some(),
        "a generated token is printed: {:?}",
        served.stderr
    );
    let (status, body) = served.get("api/overview", None).await;
    assert_eq!(status, 200, "{body}");
    let overview: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(overview["queues"][0]["name"], "mail");
    assert_eq!(overview["queues"][0]["counts"]["scheduled"], 1);
    let (status, page) = served.get("", None).await;
    assert_eq!(status, 200);
    assert!(page.contains("/assets/app.js"));
    let (ok, stdout) = served.stop().await;
    assert!(ok, "{stdout}");
    assert!(stdout.contains("stopped by SIGTERM"), "{stdout}");
}

#[test]
fn a_store_password_never_reaches_a_page_or_answer() {
    // The stores are made and dropped outside the runtime (their clean-up blocks).
    for service in service_stores() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let dir = tempfile::tempdir().expect("a folder");
            // PostgreSQL here trusts local connections, so any password works; Redis without a
            // password refuses one, so only its prefix is checked there.
            let arg = service.arg();
            let store = if service.name() == "postgres" {
                arg.replacen("://postgres@", "://postgres:SuperSecret123@", 1)
            } else {
                arg
            };
            // `serve` opens existing stores only: make this one first.
            assert!(fairq(dir.path())
                .args(["--store", &store, "enqueue", "-q", "q", "-k", "k"])
                .output()
                .expect("fairq enqueue")
                .status
                .success());
            let token = "cli-test-token-0123456789";
            let served = serve(
                &[
                    "--store",
                    &store,
                    "serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--token",
                    token,
                    "--refresh",
                    "500ms",
                ],
                dir.path(),
            )
            .await;
            let (status, _) = served.get("api/overview", None).await;
            assert_eq!(status, 401, "{}: a token was set", service.name());
            let mut seen = served.stderr.join("\n");
            for path in [
                "",
                "login",
                "api/session",
                "api/overview",
                "api/health",
                "api/jobs",
            ] {
                let (status, body) = served.get(path, Some(token)).await;
                assert!(status < 500, "{}: {path}: {status} {body}", service.name());
                seen.push_str(&body);
            }
            assert!(
                !seen.contains("SuperSecret123"),
                "{}: {seen}",
                service.name()
            );
            assert!(
                !served.stderr.iter().any(|l| l.contains(token)),
                "the given token is not echoed"
            );
            let (ok, stdout) = served.stop().await;
            assert!(ok, "{}: {stdout}", service.name());
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_serves_the_dashboard_of_its_own_store() {
    let dir = tempfile::tempdir().expect("a folder");
    let store = format!("file:{}", dir.path().join("data").display());
    fairq(dir.path())
        .args([
            "--store", &store, "enqueue", "-q", "later", "-k", "send", "--delay", "1h",
        ])
        .assert()
        .success();
    let served = serve(
        &[
            "--store",
            &store,
            "work",
            "-q",
            "mail",
            "--serve",
            "127.0.0.1:0",
            "--exec",
            "true",
        ],
        dir.path(),
    )
    .await;
    // The worker owns the file store; its dashboard reads the same jobs.
    let (status, body) = served.get("api/queues/later/tenants", None).await;
    assert_eq!(status, 200, "{body}");
    let tenants: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(tenants["tenants"][0]["later"], 1, "{tenants}");
    let (ok, _) = served.stop().await;
    assert!(ok);
}

#[test]
fn serving_a_file_store_that_does_not_exist_is_an_error() {
    let dir = tempfile::tempdir().expect("a folder");
    let store = format!("file:{}", dir.path().join("typo").display());
    let output = fairq(dir.path())
        .args(["--store", &store, "serve", "--listen", "127.0.0.1:0"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    assert!(
        !dir.path().join("typo").exists(),
        "serve never creates a store"
    );
}

#[test]
fn listening_beyond_loopback_needs_a_token() {
    let dir = tempfile::tempdir().expect("a folder");
    let store = format!("file:{}", dir.path().join("data").display());
    fairq(dir.path())
        .args(["--store", &store, "enqueue", "-k", "send"])
        .assert()
        .success();
    let output = fairq(dir.path())
        .args(["--store", &store, "serve", "--listen", "0.0.0.0:0"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("set a token (--token or FAIRQ_TOKEN)"),
        "{stderr}"
    );
}
