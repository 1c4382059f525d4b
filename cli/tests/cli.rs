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
            // Sizes past what a run can hold: named, not a capacity-overflow panic.
            &["--store", "memory:", "bench", "-n", "18446744073709551615"],
            "--jobs must be at most 100,000,000",
            1,
        ),
        (
            &[
                "--store",
                "memory:",
                "bench",
                "-n",
                "10",
                "--batch",
                "18446744073709551615",
            ],
            "--batch must be at most 1,000,000",
            1,
        ),
        (
            &["demo", "--heavy-jobs", "18446744073709551615"],
            "--heavy-jobs must be at most 10,000,000",
            1,
        ),
        (
            // A misspelt parameter is named, not dropped (no server is reached).
            &["--store", "redis://127.0.0.1:1/?prefx=app", "stats"],
            "invalid Redis URL: unknown parameter \"prefx\"",
            1,
        ),
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
        (&["stast"], "exist: 'qtest', 'stats'", 2),
        (
            &["enqueue", "-k", "x", "--delay", "8000y"],
            "8000y is too long: delays are at most 100 years",
            2,
        ),
        (
            &["enqueue", "-k", "x", "--backoff", "1s,500000000000y"],
            "500000000000y is too long: delays are at most 100 years",
            2,
        ),
        (
            &["list", "--stat", "dead"],
            "tip: a similar argument exists: '--state'",
            2,
        ),
        (&["revive"], "<ID|--all>", 2),
        (&["retry"], "<ID|--all>", 2),
        (&["list", "-l", "0"], "the limit must be at least 1", 2),
        (
            &["--store", "memory:", "work", "-q", "", "--exec", "true"],
            "the queue must not be empty",
            1,
        ),
        (
            &["--store", "memory:", "enqueue", "-q", "", "-k", "x"],
            "the queue and the kind must not be empty",
            1,
        ),
        (
            &["stats"],
            "no file store at ./fairq-data: the folder does not exist",
            1,
        ),
        (
            &["--store", "file:a-file", "stats"],
            "no file store at a-file: it is a file, not a folder",
            1,
        ),
        (
            &["--store", "file:a-file/sub", "list"],
            "no file store at a-file/sub: a part of the path is not a folder",
            1,
        ),
        (
            &["--store", "file:a-file/sub", "enqueue", "-k", "x"],
            "cannot use a-file/sub as a store folder",
            1,
        ),
        (
            &["--store", "file:no-such-store", "list"],
            "no file store at no-such-store: the folder does not exist",
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
    // None of that created a store (read-only commands never do).
    assert!(!dir.path().join("fairq-data").exists());
    assert!(!dir.path().join("no-such-store").exists());
}

#[test]
fn work_takes_durations_of_any_length() {
    // Times that no clock can reach ("never", in effect) used to panic the worker: a lease
    // in its acker, a shutdown timeout when it stopped.
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file:{}", dir.path().join("store").display());
    json(dir.path(), &store, &["enqueue", "-q", "q", "-k", "k"]);
    let far = "500000000000y";
    fairq(dir.path())
        .args(["--store", &store, "work", "-q", "q", "--until-idle"])
        .args(["--lease", far, "--shutdown-timeout", far, "--poll", far])
        .args(["--job-timeout", far, "--exec", "true"])
        .assert()
        .success()
        .stderr(
            predicate::str::contains("stopped: 1 succeeded")
                .and(predicate::str::contains("panicked").not()),
        );
}

#[test]
fn operators_are_told_what_did_not_happen() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file:{}", dir.path().join("store").display());
    let first = json(
        dir.path(),
        &store,
        &["enqueue", "-q", "mail", "-k", "digest", "--unique", "mon"],
    );
    assert_eq!(first["enqueued"], true);
    fairq(dir.path())
        .args(["--store", &store, "enqueue", "-q", "mail", "-k", "digest"])
        .args(["--unique", "mon", "--if-absent"])
        .assert()
        .success()
        .stdout(format!(
            "nothing enqueued: job {} of queue mail already has unique key mon\n",
            first["id"]
        ));
    let again = json(
        dir.path(),
        &store,
        &[
            "enqueue",
            "-q",
            "mail",
            "-k",
            "digest",
            "--unique",
            "mon",
            "--if-absent",
        ],
    );
    assert_eq!(
        (again["id"].clone(), again["enqueued"].clone()),
        (first["id"].clone(), false.into())
    );
    // A worker on a queue that never had a job says so, and (until idle) stops.
    fairq(dir.path())
        .args([
            "--store",
            &store,
            "work",
            "-q",
            "mial",
            "--until-idle",
            "--exec",
            "true",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "queue \"mial\" has never had a job (queues with jobs: mail); waiting for its first",
        ));
    // Reviving a job that is not dead says where it stands.
    fairq(dir.path())
        .args(["--store", &store, "revive", &first["id"].to_string()])
        .assert()
        .code(1)
        .stderr(one_line_error(&format!(
            "job {} is waiting to run: only dead jobs can be revived",
            first["id"]
        )));
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
fn help_never_shows_the_store_url_from_the_environment() {
    // clap prints an argument's environment value in `--help` unless told not to; a store
    // URL may hold a password.
    let dir = tempfile::tempdir().unwrap();
    for args in [&["--help"][..], &["stats", "--help"], &["work", "-h"]] {
        fairq(dir.path())
            .env("FAIRQ_STORE", "postgres://app:hunter2pass@db.internal/jobs")
            .args(args)
            .assert()
            .success()
            .stdout(
                predicate::str::contains("FAIRQ_STORE")
                    .and(predicate::str::contains("hunter2pass").not()),
            );
    }
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

/// `RUST_LOG` shows the library's log events on stderr (here the worker's trace event per
/// claim); without it a short command prints nothing there; and a log that cannot be
/// written (stderr on a full device) does not stop the command.
#[test]
fn rust_log_prints_the_library_events_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let bench = [
        "--store", "memory:", "bench", "-n", "200", "-c", "4", "--quiet",
    ];
    fairq(dir.path())
        .env("RUST_LOG", "fairq_worker=trace")
        .args(bench)
        .assert()
        .success()
        .stderr(predicate::str::contains("claim returned"));
    fairq(dir.path())
        .args(bench)
        .assert()
        .success()
        .stderr(predicate::str::is_empty());
    #[cfg(target_os = "linux")]
    {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("fairq"))
            .current_dir(dir.path())
            .env_remove("FAIRQ_STORE")
            .env("RUST_LOG", "trace")
            .args(bench)
            .stdout(Stdio::null())
            .stderr(full)
            .spawn()
            .unwrap();
        // A bound on the wait, not a synchronisation: a broken build hangs here.
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                panic!("fairq hung with its log unwritable");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success());
    }
    // A filter that does not parse is reported and ignored.
    fairq(dir.path())
        .env("RUST_LOG", "[broken")
        .args(bench)
        .assert()
        .success()
        .stderr(predicate::str::contains("ignoring RUST_LOG"));
}

/// Lines about the run that cannot be written (stderr on a full device) stop nothing: the
/// dashboard's address from `work --serve` and the warning about a `RUST_LOG` that does not
/// parse are dropped, and the command runs to its end (they used to panic, exit status 101).
#[cfg(target_os = "linux")]
#[test]
fn an_unwritable_stderr_stops_neither_the_dashboard_nor_a_bad_rust_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file:{}", dir.path().join("store").display());
    let run = |rust_log: Option<&str>, args: &[&str]| {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("fairq"));
        command
            .current_dir(dir.path())
            .env_remove("FAIRQ_STORE")
            .env_remove("FAIRQ_TOKEN")
            .env_remove("RUST_LOG")
            .args(["--store", &store])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(full);
        if let Some(filter) = rust_log {
            command.env("RUST_LOG", filter);
        }
        command.status().unwrap()
    };
    let work = [
        "work",
        "-q",
        "q",
        "--until-idle",
        "--serve",
        "127.0.0.1:0",
        "--exec",
        "true",
    ];
    assert_eq!(run(None, &work).code(), Some(0), "work --serve");
    assert_eq!(run(Some("[broken"), &["stats"]).code(), Some(0), "stats");
}

/// Names and a command's stderr holding terminal escapes are shown escaped in tables and
/// sentences (`\u{1b}[2J`), never raw; JSON keeps them as they are (escaped by JSON itself).
#[cfg(unix)]
#[test]
fn terminal_escapes_in_names_and_errors_are_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file:{}", dir.path().join("store").display());
    let (queue, kind, key) = ("q\u{1b}]0;owned\u{7}", "\u{1b}[2J", "k\u{9b}31m\n");
    let raw = |text: &str| text.contains(['\u{1b}', '\u{7}', '\u{9b}']);
    let run = |args: &[&str]| {
        let out = fairq(dir.path())
            // Whole lines, with the error column.
            .env_remove("COLUMNS")
            .args(["--store", &store])
            .args(args)
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            !raw(&stdout) && !raw(&stderr),
            "{args:?}: {stdout:?} {stderr:?}"
        );
        (out.status.code(), stdout, stderr)
    };
    let (code, stdout, _) = run(&["enqueue", "-q", queue, "-k", kind, "--key", key]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("(kind \\u{1b}[2J, key k\\u{9b}31m\\n)"),
        "{stdout}"
    );
    let (code, stdout, _) = run(&["list"]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("\\u{1b}[2J") && stdout.contains("q\\u{1b}]0;owned\\u{7}"));
    let (code, stdout, _) = run(&["stats"]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("q\\u{1b}]0;owned\\u{7}"), "{stdout}");
    // The job fails for good with the escape on the command's stderr.
    let (code, _, stderr) = run(&[
        "work",
        "-q",
        queue,
        "--until-idle",
        "--exec",
        "sh",
        "-c",
        "printf '\\033[31mred\\n' >&2; exit 3",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let (code, stdout, _) = run(&["list", "--state", "retrying"]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("\\u{1b}[31mred"), "{stdout}");
    let (code, _, stderr) = run(&["list", "-q", "q\u{1b}[1m"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("unknown queue"), "{stderr}");
    for argv in [&["queue", "pause", queue][..], &["queue", "paused"]] {
        let (code, _, _) = run(argv);
        assert_eq!(code, Some(0), "{argv:?}");
    }
    let (_, stdout, _) = run(&["queue", "paused"]);
    assert_eq!(stdout, "q\\u{1b}]0;owned\\u{7}\n");
    // JSON carries the names as they are.
    let jobs = json(dir.path(), &store, &["list"]);
    assert_eq!(jobs[0]["kind"], kind);
    assert_eq!(jobs[0]["key"], key);
}

/// `enqueue` and `work`, which create a store that does not exist, check their input first:
/// a bad payload, an empty queue or kind, or an `--exec` program that does not exist is
/// refused without leaving a new store behind.
#[test]
fn bad_input_creates_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo");
    let store = format!("file:{}", typo.display());
    let cases: &[(&[&str], &str)] = &[
        (&["enqueue", "-k", "x", "-p", "{"], "invalid JSON payload"),
        (&["enqueue", "-q", "", "-k", "x"], "must not be empty"),
        (&["enqueue", "-k", ""], "must not be empty"),
        (
            &["enqueue", "-k", "x", "-p", "@missing.json"],
            "opening the payload file missing.json",
        ),
        (
            &["work", "-q", "q", "--exec", "no-such-program-x"],
            "program \"no-such-program-x\" not found on PATH",
        ),
        (&["work", "-q", "", "--exec", "true"], "must not be empty"),
    ];
    for (args, error) in cases {
        fairq(dir.path())
            .args(["--store", &store])
            .args(*args)
            .assert()
            .code(1)
            .stderr(one_line_error(error));
        assert!(!typo.exists(), "{args:?} created the store");
    }
    fairq(dir.path())
        .args(["--store", &store, "enqueue", "-k", "x"])
        .assert()
        .success();
    assert!(typo.is_dir(), "good input creates the store");
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
    // A taken unique key: --if-absent enqueues nothing and says which job holds it.
    let unique = [
        "enqueue", "-q", "other", "-k", "x", "--delay", "1h", "--unique", "u1",
    ];
    let first = json(path, store, &unique);
    let again = json(path, store, &[&unique[..], &["--if-absent"]].concat());
    assert_eq!(first["enqueued"], true);
    assert_eq!(again["enqueued"], false);
    assert_eq!(again["id"], first["id"]);
    fairq(path)
        .args(["--store", store])
        .args(unique)
        .assert()
        .code(1)
        .stderr(one_line_error("already has job"));

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
    assert_eq!(other[0]["counts"]["scheduled"], 2);

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
    assert_eq!(purged["count"], 3);
    assert_eq!(json(path, store, &["list"]), serde_json::json!([]));
    fairq(path)
        .args(["--store", store, "list"])
        .assert()
        .success()
        .stdout("no jobs\n");

    // Both queues are idle now: removing one takes its counters too; the other stays.
    let removed = json(path, store, &["queue", "remove", "mail"]);
    assert_eq!(removed["action"], "removed");
    let queues: Vec<serde_json::Value> = json(path, store, &["stats"])
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["queue"].clone())
        .collect();
    assert_eq!(queues, vec![serde_json::json!("other")]);
    fairq(path)
        .args(["--store", store, "queue", "remove", "mail"])
        .assert()
        .code(1)
        .stderr(one_line_error("unknown queue \"mail\""));
    json(path, store, &["enqueue", "-q", "other", "-k", "x"]);
    fairq(path)
        .args(["--store", store, "queue", "remove", "other"])
        .assert()
        .code(1)
        .stderr(one_line_error("still has 1 live job"));
}

/// `bench` and `demo` on a shared store remove the queues they made: `stats` shows nothing.
#[test]
fn bench_and_demo_leave_no_queue_on_server_stores() {
    for store in service_stores() {
        let dir = tempfile::tempdir().unwrap();
        let arg = store.arg();
        json(dir.path(), &arg, &["bench", "-n", "60", "-c", "4"]);
        // The demo's verdict compares waits measured on a shared machine; this test is about
        // what the demo leaves behind, which it cleans up before it judges. A run whose
        // verdict was not the expected one still printed its report and cleaned up.
        let demo = fairq(dir.path())
            .args(["--store", arg.as_str(), "--json", "demo"])
            .args([
                "--heavy-jobs",
                "200",
                "--light-tenants",
                "2",
                "--light-jobs",
                "3",
            ])
            .output()
            .expect("run fairq");
        let stderr = String::from_utf8_lossy(&demo.stderr);
        assert!(
            demo.status.success() || stderr.contains("did not beat FIFO"),
            "the demo failed on {}: {stderr}",
            store.name()
        );
        let report: Value = serde_json::from_slice(&demo.stdout).expect("the demo's report");
        assert!(report["verdict"].is_object(), "{report}");
        let left = json(dir.path(), &arg, &["stats"]);
        assert_eq!(left, serde_json::json!([]), "on {}", store.name());
    }
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
    // The job announces itself, then waits for the test's go-ahead; the SIGTERM that
    // shutdown sends it is noted and does not stop it.
    let script = "trap 'touch got-term' TERM; touch started; \
                  while [ ! -e go ]; do sleep 0.01; done; cat >> out.txt";
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
    wait_for_file(&path.join("started"));
    if store.starts_with("file:") {
        // The worker holds the folder: another process reaches the store through it.
        fairq(path)
            .args(["--store", store, "stats"])
            .assert()
            .success()
            .stdout(predicates::str::contains("slow"));
    }
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // Wait until the worker says it stopped claiming, then let the job finish.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let seen = read_until(&mut stderr, "SIGTERM: no new jobs");
    std::fs::write(path.join("go"), b"").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{seen}{rest}");
    assert!(rest.contains("stopped: 1 succeeded"), "{rest}");
    assert!(
        path.join("got-term").exists(),
        "the command was not sent SIGTERM"
    );
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
    // A command that ignores SIGTERM keeps the shutdown waiting.
    let script = "trap '' TERM; touch started; while [ ! -e go ]; do sleep 0.01; done";
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("fairq"))
        .current_dir(path)
        .env_remove("FAIRQ_STORE")
        .args(["--store", &store, "work", "-q", "q", "--poll", "50ms"])
        .args(["--exec", "sh", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_file(&path.join("started"));
    let term = |pid: u32| {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    term(child.id());
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let seen = read_until(&mut stderr, "SIGTERM: no new jobs");
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
    // The folder is free again. `list` opens it read-only, so it still shows the attempt
    // the stopped worker left running; the next worker to own the folder rescues that job
    // for another attempt (after the retry's backoff, so `--until-idle` leaves it waiting).
    let jobs = json(path, &store, &["list", "-q", "q"]);
    assert_eq!(jobs[0]["id"], id);
    assert_eq!(jobs[0]["attempts"], 1);
    assert_ne!(jobs[0]["state"], "succeeded");
    fairq(path)
        .args(["--store", &store, "work", "-q", "q", "--until-idle"])
        .args(["--poll", "50ms", "--exec", "true"])
        .assert()
        .success();
    let jobs = json(path, &store, &["list", "-q", "q"]);
    assert_eq!(jobs[0]["id"], id);
    assert_eq!(jobs[0]["state"], "retrying", "{jobs}");
    assert_eq!(jobs[0]["attempts"], 1, "{jobs}");
    let error = jobs[0]["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("lease expired"), "{jobs}");
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

/// Starts `fairq --store STORE ARGS` in `dir` with the worker's trace events on stderr,
/// reads them until a claim of a queue named `queue...`, then sends SIGINT: the exit code
/// and everything it printed on stderr.
#[cfg(unix)]
fn interrupt_at_first_claim(
    dir: &std::path::Path,
    store: &str,
    args: &[&str],
    queue: &str,
) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("fairq"))
        .current_dir(dir)
        .env_remove("FAIRQ_STORE")
        .env("RUST_LOG", "fairq_worker=trace")
        .args(["--store", store])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let guard = KillOnDrop(child.id().to_string());
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let claimed = format!("queue={queue}");
    let mut seen = String::new();
    loop {
        let line = read_until(&mut stderr, "claim returned");
        seen.push_str(&line);
        if line.lines().last().is_some_and(|l| l.contains(&claimed)) {
            break;
        }
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    std::io::Read::read_to_string(&mut stderr, &mut seen).unwrap();
    // Its stderr closed: it has ended, and its id is not to be signalled once reaped.
    std::mem::forget(guard);
    (child.wait().unwrap().code(), seen)
}

/// Ctrl-C while `bench` or `demo` runs on a shared store stops their workers and removes
/// their queues before they exit: `stats` shows nothing left behind.
#[cfg(unix)]
#[test]
fn an_interrupted_bench_or_demo_leaves_no_queue_behind() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file:{}", dir.path().join("store").display());
    for (args, queue) in [
        (
            &[
                "bench", "-n", "20000", "-c", "2", "--work", "10ms", "--quiet",
            ][..],
            "bench-",
        ),
        (
            &["demo", "--heavy-jobs", "20000", "--work", "10ms", "--quiet"][..],
            "demo-fifo-",
        ),
    ] {
        let (code, stderr) = interrupt_at_first_claim(dir.path(), &store, args, queue);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.ends_with("error: stopped by SIGINT\n"),
            "{args:?}: {stderr}"
        );
        let left = json(dir.path(), &store, &["stats"]);
        assert_eq!(left, serde_json::json!([]), "{args:?} left a queue behind");
    }
}

/// Ctrl-C during `qtest` stops its load and removes its scratch folder before it exits.
#[cfg(unix)]
#[test]
fn an_interrupted_qtest_removes_its_scratch_folder() {
    let scratch = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("fairq"))
        .current_dir(scratch.path())
        .env_remove("FAIRQ_STORE")
        .env("TMPDIR", scratch.path())
        .env("RUST_LOG", "fairq_journal=debug")
        .args(["--quiet", "qtest", "many-clients", "-n", "100000"])
        .args(["--size", "65536", "--sync", "never"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let guard = KillOnDrop(child.id().to_string());
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    // A segment of the journal was read to its end and retired: the load is under way, in
    // its scratch folder.
    let mut seen = read_until(&mut stderr, "segment retired");
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 1);
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    std::io::Read::read_to_string(&mut stderr, &mut seen).unwrap();
    // Its stderr closed: it has ended, and its id is not to be signalled once reaped.
    std::mem::forget(guard);
    assert_eq!(child.wait().unwrap().code(), Some(1), "{seen}");
    assert!(seen.ends_with("error: stopped by SIGINT\n"), "{seen}");
    let left: Vec<_> = std::fs::read_dir(scratch.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A command that does not run until stopped keeps the default signal action: Ctrl-C ends
/// `enqueue` while it waits for its payload (it used to swallow the signal). The payload
/// comes from a FIFO, so the test knows when fairq is reading it: opening the FIFO to write
/// returns once fairq has opened it to read.
#[cfg(unix)]
#[test]
fn ctrl_c_ends_an_enqueue_waiting_for_its_payload() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fifo = dir.path().join("payload");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("fairq"))
        .current_dir(dir.path())
        .env_remove("FAIRQ_STORE")
        .args(["--store", &format!("file:{}", store.display())])
        .args(["enqueue", "-k", "x", "-p", &format!("@{}", fifo.display())])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (opened, writer) = std::sync::mpsc::channel();
    let path = fifo.clone();
    std::thread::spawn(move || {
        let _ = opened.send(std::fs::OpenOptions::new().write(true).open(path));
    });
    // A bound on a broken build, not a synchronisation: the open returns when fairq reads.
    let writer = match writer.recv_timeout(Duration::from_secs(60)) {
        Ok(writer) => writer.unwrap(),
        Err(_) => {
            let _ = child.kill();
            panic!("fairq never opened its payload");
        }
    };
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let ended = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("Ctrl-C did not end the enqueue");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(!ended.success());
    drop(writer);
    assert!(!store.exists(), "no payload, no store");
}

/// A payload past `--max-payload` is refused while it is read: the sender of 300 MiB is cut
/// off long before the end.
#[test]
fn a_huge_payload_is_refused_without_being_read_whole() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("fairq"))
        .current_dir(dir.path())
        .env_remove("FAIRQ_STORE")
        .env_remove("FAIRQ_MAX_PAYLOAD")
        .args(["--store", "memory:", "enqueue", "-k", "x", "-p", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'7'; 1 << 20];
        let mut sent = 0usize;
        while sent < 300 << 20 {
            if stdin.write_all(&chunk).is_err() {
                break;
            }
            sent += chunk.len();
        }
        sent
    });
    let out = child.wait_with_output().unwrap();
    let sent = writer.join().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: the payload is larger than 16777216 bytes, the most --max-payload allows\n"
    );
    assert!(sent < 300 << 20, "all {sent} bytes were read");
}

/// Credentials in `--store` never reach the terminal, whatever their form.
#[test]
fn store_credentials_are_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    for store in [
        "postgres://postgres@127.0.0.1:1/test?password=hunter2",
        "redis://127.0.0.1:1/?password=hunter2",
        "mysql://u:hunter2@h/db",
        "postgres://u:hun/ter2@127.0.0.1:1/db",
        "redis://:hun/ter2@127.0.0.1:1/",
        "rediss://u:hunter2@127.0.0.1:1/0?prefix=p",
    ] {
        let out = fairq(dir.path())
            .args(["--store", store, "stats"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{store}: {stderr}");
        assert!(
            !stderr.contains("hunter2") && !stderr.contains("ter2") && stderr.contains("***"),
            "{store}: {stderr}"
        );
    }
}

/// Waits (up to a minute) until `path` exists.
fn wait_for_file(path: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// True while process `pid` exists and is not a zombie.
#[cfg(target_os = "linux")]
fn alive(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses.
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Reads stderr lines until one contains `text`.
fn read_until(stderr: &mut BufReader<std::process::ChildStderr>, text: &str) -> String {
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "never saw {text:?}: {seen}"
        );
        seen.push_str(&line);
        if line.contains(text) {
            return seen;
        }
    }
}

/// Ctrl-C in a terminal signals the whole foreground process group. The commands run in
/// groups of their own, so only fairq gets the SIGINT: it sends them SIGTERM and lets them
/// finish.
#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_in_a_terminal_stops_fairq_gracefully_not_its_commands() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let store = format!("file:{}", path.join("store").display());
    json(path, &store, &["enqueue", "-q", "q", "-k", "k", "-p", "1"]);
    let script = "trap 'touch got-int' INT; trap 'touch got-term' TERM; touch started; \
                  while [ ! -e go ]; do sleep 0.01; done; cat >> out.txt";
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("fairq"))
        .current_dir(path)
        .env_remove("FAIRQ_STORE")
        .args(["--store", &store, "work", "-q", "q", "--poll", "50ms"])
        .args(["--exec", "sh", "-c", script])
        // fairq leads a group, as a shell's foreground job does.
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_file(&path.join("started"));
    // What the terminal does on Ctrl-C: SIGINT to every process of the foreground group.
    let group = format!("-{}", child.id());
    let status = std::process::Command::new("kill")
        .args(["-INT", "--", &group])
        .status()
        .unwrap();
    assert!(status.success());
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let seen = read_until(&mut stderr, "SIGINT: no new jobs");
    std::fs::write(path.join("go"), b"").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{seen}{rest}");
    assert!(rest.contains("stopped: 1 succeeded"), "{seen}{rest}");
    assert!(
        !path.join("got-int").exists(),
        "the command got the terminal's SIGINT"
    );
    assert!(
        path.join("got-term").exists(),
        "the command was not sent SIGTERM"
    );
    assert_eq!(std::fs::read_to_string(path.join("out.txt")).unwrap(), "1");
}

/// Starts `fairq work -q q --exec sh -c script` on `store` in `path`, and waits until the
/// script has created the file `started`.
#[cfg(target_os = "linux")]
fn work_until_started(path: &std::path::Path, store: &str, script: &str) -> std::process::Child {
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("fairq"))
        .current_dir(path)
        .env_remove("FAIRQ_STORE")
        .args(["--store", store, "work", "-q", "q", "--poll", "50ms"])
        .args(["--exec", "sh", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_file(&path.join("started"));
    child
}

/// Kills process `pid` when dropped, so a failing test leaves nothing running.
struct KillOnDrop(String);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &self.0])
            .status();
    }
}

/// kill -9 of fairq takes its running command with it (parent-death signal) instead of
/// leaving it running while the job is rescued and run again.
#[cfg(target_os = "linux")]
#[test]
fn kill_9_of_fairq_leaves_no_command_running() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let store = format!("file:{}", path.join("store").display());
    json(path, &store, &["enqueue", "-q", "q", "-k", "k", "-p", "1"]);
    // Runs until the test says so (it never does).
    let script = "echo $$ > pid; touch started; while [ ! -e go ]; do sleep 0.01; done";
    let mut child = work_until_started(path, &store, script);
    let pid = std::fs::read_to_string(path.join("pid"))
        .unwrap()
        .trim()
        .to_string();
    let _cleanup = KillOnDrop(pid.clone());
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while alive(&pid) {
        assert!(
            Instant::now() < deadline,
            "command {pid} still runs after fairq was killed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Nothing is lost: the job is there for another attempt.
    let jobs = json(path, &store, &["list", "-q", "q"]);
    assert_eq!(jobs[0]["attempts"], 1);
    assert_ne!(jobs[0]["state"], "succeeded");
}

/// A command never reads a truncated payload, even when fairq dies while the command has
/// read none of it yet: here a process the command left in the background (beyond the reach
/// of the parent-death signal) reads its stdin after fairq was killed, and gets all of it.
#[cfg(target_os = "linux")]
#[test]
fn a_command_never_reads_a_truncated_payload() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let store = format!("file:{}", path.join("store").display());
    // A 1 MiB JSON string: far more than a pipe buffer holds.
    let payload = format!("\"{}\"", "x".repeat(1 << 20));
    std::fs::write(path.join("payload.json"), &payload).unwrap();
    json(
        path,
        &store,
        &["enqueue", "-q", "q", "-k", "k", "-p", "@payload.json"],
    );
    // (A background list's stdin is /dev/null unless given: keep the real one on fd 3.)
    let script = "exec 3<&0; ( while [ ! -e go ]; do sleep 0.01; done; wc -c > count.part; \
                  mv count.part count ) <&3 & echo $! > pid; touch started; wait";
    let mut child = work_until_started(path, &store, script);
    let _cleanup = KillOnDrop(
        std::fs::read_to_string(path.join("pid"))
            .unwrap()
            .trim()
            .into(),
    );
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::write(path.join("go"), b"").unwrap();
    wait_for_file(&path.join("count"));
    let count = std::fs::read_to_string(path.join("count")).unwrap();
    assert_eq!(
        count.trim(),
        payload.len().to_string(),
        "a truncated payload was read"
    );
}

/// `GET /metrics` from `addr` over plain HTTP/1.1; the response body.
fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
}

/// `work --metrics ADDR` serves Prometheus text; after a run it holds every attempt.
#[cfg(unix)]
#[test]
fn work_serves_metrics_for_prometheus() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let store = format!("file:{}", path.join("store").display());
    for (kind, payload) in [("ok", "1"), ("ok", "2"), ("bad", "3")] {
        json(
            path,
            &store,
            &[
                "enqueue",
                "-q",
                "q",
                "-k",
                kind,
                "-p",
                payload,
                "--retries",
                "0",
            ],
        );
    }
    // A free port: bound, read, let go.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("fairq"))
        .current_dir(path)
        .env_remove("FAIRQ_STORE")
        .args(["--store", &store, "work", "-q", "q", "--poll", "50ms"])
        .args(["--metrics", &addr])
        .args(["--exec", "sh", "-c", "test \"$FAIRQ_KIND\" = ok"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _cleanup = KillOnDrop(child.id().to_string());
    // Three attempts reported, one line each.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..3 {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0);
    }
    let body = scrape(&addr);
    for expected in [
        "fairq_cli_attempts_total{queue=\"q\",kind=\"ok\",outcome=\"succeeded\"} 2",
        "fairq_cli_attempts_total{queue=\"q\",kind=\"bad\",outcome=\"dead\"} 1",
        "fairq_cli_attempt_seconds_count{queue=\"q\",kind=\"ok\"} 2",
        "fairq_cli_running_commands 0",
        // The worker's own series.
        "fairq_jobs_started_total{queue=\"q\",kind=\"ok\"} 2",
        "fairq_jobs_started_total{queue=\"q\",kind=\"bad\"} 1",
        "fairq_jobs_succeeded_total{queue=\"q\",kind=\"ok\"} 2",
        "fairq_jobs_failed_total{queue=\"q\",kind=\"bad\"} 1",
        "fairq_jobs_dead_total{queue=\"q\",kind=\"bad\"} 1",
        "fairq_job_run_seconds_count{queue=\"q\",kind=\"ok\"} 2",
        "fairq_job_wait_seconds_count{queue=\"q\",kind=\"bad\"} 1",
        "fairq_jobs_running{queue=\"q\"} 0",
    ] {
        assert!(body.contains(expected), "no {expected:?} in:\n{body}");
    }
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(child.wait().unwrap().success());
}

/// Read-only commands never create a store on a server either: a PostgreSQL schema that
/// does not exist is an error, and is still missing afterwards.
#[test]
fn read_only_commands_create_no_postgres_schema() {
    let dir = tempfile::tempdir().unwrap();
    for store in service_stores() {
        if store.name() != "postgres" {
            continue;
        }
        for command in ["stats", "list"] {
            fairq(dir.path())
                .args(["--store", &store.arg(), command])
                .assert()
                .code(1)
                .stderr(one_line_error(
                    "does not exist or is incomplete: run migrate() (or apply sql/v1.sql) \
                     before using the store; `fairq enqueue` or `fairq work` on this store \
                     creates it",
                ));
        }
        assert!(!store.exists(), "a read-only command created the schema");
        fairq(dir.path())
            .args(["--store", &store.arg(), "enqueue", "-k", "x"])
            .assert()
            .success();
        assert!(store.exists());
    }
}

/// `stats` warns when nothing vacuums a PostgreSQL store's job tables (autovacuum off on the
/// server, or on one of the tables): every job leaves dead rows that slow claims down.
#[test]
fn stats_warns_when_nothing_vacuums_the_postgres_tables() {
    let dir = tempfile::tempdir().unwrap();
    if let Some((store, url, schema)) = common::postgres_store_with_a_job(dir.path()) {
        let (url, schema) = (url.as_str(), schema.as_str());
        let server_on = common::pg_simple(url, "SELECT current_setting('autovacuum')::bool")
            .as_deref()
            == Some("t");
        let stats = fairq(dir.path())
            .args(["--store", &store.arg(), "stats"])
            .assert()
            .success();
        let stderr = String::from_utf8_lossy(&stats.get_output().stderr).to_string();
        assert_eq!(
            stderr.contains("warning: PostgreSQL: autovacuum is off"),
            !server_on,
            "{stderr}"
        );
        common::pg_simple(
            url,
            &format!("ALTER TABLE \"{schema}\".jobs SET (autovacuum_enabled = false)"),
        );
        let stats = fairq(dir.path())
            .args(["--store", &store.arg(), "stats"])
            .assert()
            .success();
        let stderr = String::from_utf8_lossy(&stats.get_output().stderr).to_string();
        assert!(
            stderr.contains("warning: PostgreSQL: autovacuum is off on the"),
            "{stderr}"
        );
        assert!(stderr.contains("VACUUM"), "{stderr}");
    }
}

/// `fairq vacuum` vacuums a PostgreSQL store's job tables (their vacuum counts go up) and
/// refuses a file store with a one-line error.
#[test]
fn vacuum_cleans_postgres_tables_and_refuses_other_stores() {
    let dir = tempfile::tempdir().unwrap();
    fairq(dir.path())
        .args(["enqueue", "-k", "x"])
        .assert()
        .success();
    fairq(dir.path())
        .args(["vacuum"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "only PostgreSQL stores need vacuuming",
        ));
    if let Some((store, url, schema)) = common::postgres_store_with_a_job(dir.path()) {
        let (url, schema) = (url.as_str(), schema.as_str());
        let vacuums = || {
            common::pg_simple(
                url,
                &format!(
                    "SELECT vacuum_count FROM pg_stat_user_tables \
                     WHERE schemaname = '{schema}' AND relname = 'jobs'"
                ),
            )
            .and_then(|n| n.parse::<i64>().ok())
            .expect("the jobs table's statistics")
        };
        let before = vacuums();
        let run = fairq(dir.path())
            .args(["--store", &store.arg(), "--json", "vacuum"])
            .assert()
            .success();
        let reply: Value = serde_json::from_slice(&run.get_output().stdout).unwrap();
        assert_eq!(reply["action"], "vacuumed", "{reply}");
        assert_eq!(vacuums(), before + 1, "the jobs table was not vacuumed");
        fairq(dir.path())
            .args(["--store", &store.arg(), "vacuum"])
            .assert()
            .success()
            .stdout(predicate::str::contains(
                "vacuumed and analysed the job tables",
            ));
    }
}

/// `--store` passes libpq's TLS parameters on: `sslmode=require` works against the shared
/// server (which has `ssl=on`, as Debian's PostgreSQL does; with it off, the refusal is
/// checked), and a root certificate or client certificate file that does not exist is named
/// in a one-line error.
#[test]
fn postgres_store_urls_take_tls_parameters() {
    let dir = tempfile::tempdir().unwrap();
    fairq(dir.path())
        .args([
            "--store",
            "postgres://postgres@127.0.0.1:1/test?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
            "stats",
        ])
        .assert()
        .code(1)
        .stderr(one_line_error("/nonexistent/ca.pem"));
    // The client certificate's parameters reach the TLS settings too (the driver alone
    // would refuse them as unknown options).
    fairq(dir.path())
        .args([
            "--store",
            "postgres://postgres@127.0.0.1:1/test?sslmode=require&sslcert=/nonexistent/app.crt&sslkey=/nonexistent/app.key",
            "stats",
        ])
        .assert()
        .code(1)
        .stderr(one_line_error("client certificate in /nonexistent/app.crt"));
    for store in service_stores() {
        if store.name() != "postgres" {
            continue;
        }
        let url = format!("{}&sslmode=require", store.arg());
        if !common::pg_ssl_on() {
            fairq(dir.path())
                .args(["--store", &url, "enqueue", "-k", "x"])
                .assert()
                .code(1)
                .stderr(one_line_error("does not support TLS"));
            continue;
        }
        fairq(dir.path())
            .args(["--store", &url, "enqueue", "-k", "x"])
            .assert()
            .success();
        let stats = json(dir.path(), &url, &["stats"]);
        assert!(stats.to_string().contains("\"pending\":1"), "{stats}");
    }
}

/// Help and version that cannot be written (stdout on a full device) are a failure, as any
/// other output that cannot be written is: exit status 1 and the reason on stderr, not 0.
#[cfg(target_os = "linux")]
#[test]
fn help_and_version_that_cannot_be_written_fail() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["--help"][..],
        &["list", "--help"],
        &["help", "stats"],
        &["--version"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("fairq"))
            .current_dir(dir.path())
            .env_remove("FAIRQ_STORE")
            .args(args)
            .stdin(Stdio::null())
            .stdout(full)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: writing to standard output: "),
            "{args:?}: {stderr}"
        );
    }
}

/// `-p @PATH` reads a file whatever bytes its name holds: a name that is not UTF-8 (Linux
/// allows any byte but `/` and NUL) is a file like any other, not a parse error.
#[cfg(target_os = "linux")]
#[test]
fn a_payload_file_whose_name_is_not_utf8_is_read() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let name = std::ffi::OsStr::from_bytes(b"payload-\xff.json");
    std::fs::write(dir.path().join(name), br#"{"to": "ada"}"#).unwrap();
    let mut arg = std::ffi::OsString::from("@");
    arg.push(name);
    fairq(dir.path())
        .args([
            "--store",
            "file:store",
            "--json",
            "enqueue",
            "-k",
            "welcome",
            "-p",
        ])
        .arg(&arg)
        .assert()
        .success()
        .stdout(predicate::str::contains(r#""enqueued":true"#));
    fairq(dir.path())
        .args(["--store", "file:store", "--json", "list"])
        .assert()
        .success()
        .stdout(predicate::str::contains(r#""payload":{"to":"ada"}"#));
    // A missing one is named, its bytes shown as well as text allows.
    let mut missing = std::ffi::OsString::from("@");
    missing.push(std::ffi::OsStr::from_bytes(b"missing-\xff"));
    fairq(dir.path())
        .args(["--store", "file:store", "enqueue", "-k", "welcome", "-p"])
        .arg(&missing)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "opening the payload file missing-",
        ));
}
