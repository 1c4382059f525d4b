//! The `fairq` binary driven as a user would: bad input, the demo, operator commands and
//! `work --exec` on every reachable store.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{fairq, service_stores};
use predicates::prelude::*;
use serde_json::Value;

/// Runs `fairq args` in `dir` and returns its stdout parsed as JSON (asserting success).
fn json(dir: &std::path::Path, store: &str, args: &[&str]) -> Value {
    let out = fairq(dir)
        .args(["--store", store, "--json"])
        .args(args)
        .output()
        .expect("run fairq");
    assert!(
        out.status.success(),
        "fairq {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "fairq {args:?} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn one_line_error(expected: &str) -> impl Predicate<str> {
    let expected = expected.to_string();
    predicate::function(move |stderr: &str| {
        stderr.lines().count() == 1
            && stderr.starts_with("error: ")
            && stderr.contains(&expected)
            && !stderr.contains("panicked")
    })
}

#[test]
fn bad_input_gets_one_line_on_stderr_and_a_nonzero_exit() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str, i32)] = &[
        (
            &["--store", "mysql://h/db", "stats"],
            "unknown scheme \"mysql\"",
            1,
        ),
        (&["--store", "./data", "stats"], "expected file:PATH", 1),
        (
            &[
                "--store",
                "memory:",
                "enqueue",
                "-k",
                "x",
                "-p",
                "{not json",
            ],
            "invalid JSON payload",
            1,
        ),
        (
            &["--store", "memory:", "stats", "-q", "nope"],
            "unknown queue \"nope\"",
            1,
        ),
        (
            &["--store", "memory:", "list", "-q", "nope"],
            "unknown queue \"nope\"",
            1,
        ),
        (
            &["list", "--state", "zombie"],
            "possible values: blocked",
            2,
        ),
        (&["prune", "--older-than", "5x"], "unknown time unit", 2),
        (
            &["enqueue", "-k", "x", "--delay", "soon"],
            "invalid value 'soon'",
            2,
        ),
        (&["work", "-q", "a"], "--exec <CMD>", 2),
        (
            &[
                "--store",
                "memory:",
                "work",
                "-q",
                "a",
                "--exec",
                "./missing.sh",
            ],
            "--exec: program \"./missing.sh\" not found",
            1,
        ),
        (&["--store", "memory:", "purge"], "purge needs --queue", 1),
        (
            &["--store", "file:a-file", "stats"],
            "a-file is not a folder",
            1,
        ),
        (
            &["--store", "file:a-file/sub", "list"],
            "cannot use a-file/sub as a store folder",
            1,
        ),
        (
            &["--store", "memory:", "retry", "42"],
            "no job with id 42",
            1,
        ),
        (
            &["--store", "redis://127.0.0.1:1/", "stats"],
            "cannot open store redis://127.0.0.1:1/",
            1,
        ),
        (
            &["--store", "postgres://postgres@127.0.0.1:1/test", "stats"],
            "cannot open store postgres://postgres@127.0.0.1:1/test",
            1,
        ),
        (
            &["--store", "memory:", "demo", "--light-tenants", "0"],
            "--light-tenants and --light-jobs must be at least 1",
            1,
        ),
        (
            &["--store", "memory:", "bench", "--keys", "0"],
            "--keys must be at least 1",
            1,
        ),
    ];
    std::fs::write(dir.path().join("a-file"), b"not a folder").unwrap();
    for (args, expected, code) in cases {
        fairq(dir.path())
            .args(*args)
            .assert()
            .code(*code)
            .stdout("")
            .stderr(one_line_error(expected));
    }
}

#[test]
fn help_and_version_succeed() {
    let dir = tempfile::tempdir().unwrap();
    fairq(dir.path())
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("demo").and(predicate::str::contains("prune")));
    fairq(dir.path())
        .arg("--version")
        .assert()
        .success()
        .stdout(predicate::str::starts_with("fairq "));
}

#[test]
fn the_demo_ends_with_a_positive_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let out = fairq(dir.path())
        .args([
            "demo",
            "--heavy-jobs",
            "600",
            "--light-tenants",
            "3",
            "--light-jobs",
            "3",
            "--work",
            "1ms",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    let last = text.lines().last().unwrap_or_default();
    assert!(last.starts_with("verdict: fair by key wins"), "{text}");
    assert!(
        text.contains("plain FIFO") && text.contains("light-3"),
        "{text}"
    );
    // The default store is a scratch folder, gone afterwards; the working folder is untouched.
    assert!(text.starts_with("fairq demo on file:"), "{text}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn the_demo_speaks_json() {
    let dir = tempfile::tempdir().unwrap();
    let report = json(
        dir.path(),
        "memory:",
        &[
            "demo",
            "--heavy-jobs",
            "200",
            "--light-tenants",
            "2",
            "--light-jobs",
            "3",
        ],
    );
    assert_eq!(report["verdict"]["fair_wins"], true);
    assert_eq!(report["fair"]["jobs"], 206);
    assert_eq!(report["fifo"]["jobs"], 206);
}

#[test]
fn bench_reports_rates_and_latencies() {
    let dir = tempfile::tempdir().unwrap();
    let report = json(
        dir.path(),
        "memory:",
        &["bench", "-n", "300", "-c", "4", "--payload-size", "64"],
    );
    assert_eq!(report["wait_us"]["count"], 300);
    assert_eq!(report["run_us"]["count"], 300);
    assert!(report["run_per_sec"].as_f64().unwrap() > 0.0);
}

/// enqueue, work (one success, one failure), stats, list --state dead, retry, purge, prune.
fn operator_round_trip(store: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let ok = json(
        path,
        store,
        &[
            "enqueue",
            "-q",
            "mail",
            "-k",
            "welcome",
            "--key",
            "t1",
            "-p",
            r#"{"to":"a"}"#,
        ],
    );
    let bad = json(
        path,
        store,
        &[
            "enqueue",
            "-q",
            "mail",
            "-k",
            "broken",
            "-p",
            "2",
            "--retries",
            "0",
        ],
    );
    let later = json(
        path,
        store,
        &["enqueue", "-q", "other", "-k", "x", "--delay", "1h"],
    );
    let (ok, bad) = (ok["id"].as_u64().unwrap(), bad["id"].as_u64().unwrap());
    assert_ne!(ok, bad);
    assert!(later["id"].is_u64());

    // One worker pass: "broken" jobs fail with the end of stderr as the message.
    let script = r#"if [ "$FAIRQ_KIND" = broken ]; then echo "cannot do $FAIRQ_JOB_ID" >&2; exit 4; fi; cat >> out.txt"#;
    fairq(path)
        .args([
            "--store",
            store,
            "work",
            "-q",
            "mail",
            "--until-idle",
            "--poll",
            "50ms",
        ])
        .args(["--exec", "sh", "-c", script])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "job {ok} mail/welcome key t1 attempt 1: succeeded"
        )))
        .stdout(predicate::str::contains(format!(
            "job {bad} mail/broken attempt 1: failed for good: exit status 4: cannot do {bad}"
        )));
    assert_eq!(
        std::fs::read_to_string(path.join("out.txt")).unwrap(),
        r#"{"to":"a"}"#
    );

    let stats = json(path, store, &["stats"]);
    let mail = stats
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["queue"] == "mail")
        .unwrap();
    assert_eq!(mail["counts"]["succeeded"], 1);
    assert_eq!(mail["counts"]["dead"], 1);
    let other = json(path, store, &["stats", "-q", "other"]);
    assert_eq!(other[0]["counts"]["scheduled"], 1);

    let dead = json(path, store, &["list", "--state", "dead"]);
    let dead = dead.as_array().unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["id"], bad);
    assert_eq!(
        dead[0]["last_error"],
        format!("exit status 4: cannot do {bad}")
    );
    assert_eq!(dead[0]["payload"], 2);

    fairq(path)
        .args(["--store", store, "list", "-q", "mail"])
        .assert()
        .success()
        .stdout(predicate::str::contains("welcome").and(predicate::str::contains("broken")));

    let retried = json(path, store, &["retry", &bad.to_string()]);
    assert_eq!(retried["count"], 1);
    let job = json(path, store, &["list", "-q", "mail", "--state", "scheduled"]);
    assert_eq!(job[0]["id"], bad);
    let retried = json(path, store, &["retry", "--all"]);
    assert_eq!(retried["count"], 0);

    // Nothing finished long ago; everything but running jobs goes with purge --all.
    assert_eq!(
        json(path, store, &["prune", "--older-than", "1h"])["count"],
        0
    );
    let purged = json(
        path,
        store,
        &["purge", "-q", "mail", "--state", "succeeded"],
    );
    assert_eq!(purged["count"], 1);
    let purged = json(path, store, &["purge", "--all"]);
    assert_eq!(purged["count"], 2);
    assert_eq!(json(path, store, &["list"]), serde_json::json!([]));
    fairq(path)
        .args(["--store", store, "list"])
        .assert()
        .success()
        .stdout("no jobs\n");
}

#[test]
fn operator_commands_on_the_file_store() {
    let dir = tempfile::tempdir().unwrap();
    operator_round_trip(&format!("file:{}", dir.path().join("store").display()));
}

#[test]
fn the_default_store_is_the_fairq_data_folder() {
    let dir = tempfile::tempdir().unwrap();
    fairq(dir.path())
        .args(["enqueue", "-k", "x", "-p", "[1, 2]"])
        .assert()
        .success()
        .stdout("enqueued job 1 on queue default (kind x)\n");
    assert!(dir.path().join("fairq-data").is_dir());
    let jobs = json(dir.path(), "file:fairq-data", &["list"]);
    assert_eq!(jobs[0]["payload"], serde_json::json!([1, 2]));
}

#[test]
fn operator_commands_on_server_stores() {
    for store in service_stores() {
        eprintln!("operator round trip on {}", store.name());
        operator_round_trip(&store.arg());
    }
}

/// `work` stops claiming on SIGTERM and lets the running job finish.
fn graceful_shutdown(store: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    for i in 1..=3 {
        json(
            path,
            store,
            &["enqueue", "-q", "slow", "-k", "step", "-p", &i.to_string()],
        );
    }
    // The job announces itself, then waits for the test's go-ahead.
    let script = "touch started; while [ ! -e go ]; do sleep 0.01; done; cat >> out.txt";
    let bin = assert_cmd::cargo::cargo_bin("fairq");
    let mut child = std::process::Command::new(bin)
        .current_dir(path)
        .env_remove("FAIRQ_STORE")
        .args([
            "--store", store, "work", "-q", "slow", "-c", "1", "--poll", "50ms",
        ])
        .args(["--exec", "sh", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.join("started").exists() {
        assert!(Instant::now() < deadline, "no job started");
        std::thread::sleep(Duration::from_millis(10));
    }
    if store.starts_with("file:") {
        // The worker holds the folder: another process is told so, in one line.
        fairq(path)
            .args(["--store", store, "stats"])
            .assert()
            .code(1)
            .stderr(one_line_error("in use by another process"));
    }
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // Wait until the worker says it stopped claiming, then let the job finish.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "no shutdown notice: {seen}"
        );
        seen.push_str(&line);
        if line.contains("SIGTERM: no new jobs") {
            break;
        }
    }
    std::fs::write(path.join("go"), b"").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{seen}{rest}");
    assert!(rest.contains("stopped: 1 succeeded"), "{rest}");
    // One job ran to completion; the other two were never claimed.
    assert_eq!(
        std::fs::read_to_string(path.join("out.txt")).unwrap().len(),
        1
    );
    let stats = json(path, store, &["stats", "-q", "slow"]);
    assert_eq!(stats[0]["counts"]["succeeded"], 1);
    assert_eq!(stats[0]["counts"]["scheduled"], 2);
    assert_eq!(stats[0]["counts"]["running"], 0);
}

#[cfg(unix)]
#[test]
fn work_shuts_down_gracefully_on_sigterm_on_the_file_store() {
    let dir = tempfile::tempdir().unwrap();
    graceful_shutdown(&format!("file:{}", dir.path().join("store").display()));
}

#[cfg(unix)]
#[test]
fn work_shuts_down_gracefully_on_sigterm() {
    for store in service_stores() {
        eprintln!("graceful shutdown on {}", store.name());
        graceful_shutdown(&store.arg());
    }
}

/// A second SIGTERM during the shutdown wait ends the worker at once; the job it left
/// running is not lost: reopening the file store rescues it for another attempt.
#[cfg(unix)]
#[test]
fn a_second_signal_stops_at_once_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let store = format!("file:{}", path.join("store").display());
    let id = json(
        path,
        &store,
        &["enqueue", "-q", "q", "-k", "stuck", "-p", "1"],
    )["id"]
        .clone();
    let script = "touch started; while [ ! -e go ]; do sleep 0.01; done";
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("fairq"))
        .current_dir(path)
        .env_remove("FAIRQ_STORE")
        .args(["--store", &store, "work", "-q", "q", "--poll", "50ms"])
        .args(["--exec", "sh", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.join("started").exists() {
        assert!(Instant::now() < deadline, "no job started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let term = |pid: u32| {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    term(child.id());
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "no shutdown notice: {seen}"
        );
        seen.push_str(&line);
        if line.contains("SIGTERM: no new jobs") {
            break;
        }
    }
    term(child.id());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{seen}{rest}");
    assert!(rest.contains("stopping now"), "{rest}");
    assert!(
        rest.contains("error: interrupted during shutdown"),
        "{rest}"
    );
    // The folder is free again, and the abandoned job is back for another attempt.
    let jobs = json(path, &store, &["list", "-q", "q"]);
    assert_eq!(jobs[0]["id"], id);
    assert_eq!(jobs[0]["attempts"], 1);
    assert_ne!(jobs[0]["state"], "running");
    assert_ne!(jobs[0]["state"], "succeeded");
}

/// Ctrl-C during the demo stops it with one line, and its scratch folder goes with it.
#[cfg(unix)]
#[test]
fn an_interrupted_demo_removes_its_scratch_folder() {
    let scratch = tempfile::tempdir().unwrap();
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("fairq"))
        .current_dir(scratch.path())
        .env_remove("FAIRQ_STORE")
        .env("TMPDIR", scratch.path())
        .args(["demo", "--heavy-jobs", "200000"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(scratch.path()).unwrap().count() == 0 {
        assert!(Instant::now() < deadline, "the demo made no scratch folder");
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: stopped by SIGINT\n"
    );
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
}
