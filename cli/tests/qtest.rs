//! `fairq qtest` run as a user would, on small loads: every test answers `--help`, counts
//! exactly the items it was asked for, and refuses bad settings with one line.

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn fairq(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("fairq").expect("the fairq binary");
    cmd.current_dir(dir)
        .env_remove("FAIRQ_STORE")
        .timeout(Duration::from_secs(120));
    cmd
}

/// Runs `fairq --json qtest args` and returns its report.
fn report(args: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out = fairq(dir.path())
        .args(["--json", "qtest"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fairq qtest {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn count(report: &Value, list: &str, name_field: &str, name: &str) -> u64 {
    report[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p[name_field] == name)
        .unwrap_or_else(|| panic!("no {name} in {report}"))["count"]
        .as_u64()
        .unwrap()
}

#[test]
fn every_test_answers_help() {
    let dir = tempfile::tempdir().unwrap();
    let tests = ["many-clients", "fanout", "flood", "put-many", "blocking"];
    let mut listing = fairq(dir.path())
        .args(["qtest", "--help"])
        .assert()
        .success();
    for t in tests {
        listing = listing.stdout(predicate::str::contains(t));
    }
    for (t, option) in [
        ("many-clients", "--consumers"),
        ("fanout", "--readers"),
        ("flood", "--producers"),
        ("put-many", "--batch"),
        ("blocking", "--capacity"),
    ] {
        fairq(dir.path())
            .args(["qtest", t, "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains(option));
    }
}

#[test]
fn many_clients_delivers_every_item_once() {
    let r = report(&[
        "many-clients",
        "-n",
        "300",
        "-p",
        "3",
        "-c",
        "2",
        "--sync",
        "never",
        "--size",
        "64",
    ]);
    assert_eq!(r["test"], "many-clients");
    assert_eq!(count(&r, "phases", "phase", "put"), 300);
    assert_eq!(count(&r, "phases", "phase", "get + commit"), 300);
    assert_eq!(count(&r, "latencies", "what", "put"), 300);
    assert_eq!(count(&r, "latencies", "what", "put to get"), 300);
    assert_eq!(r["settings"]["consumers per reader"], "2");
    assert_percentiles_in_order(&r);
}

/// Every latency's percentiles, p99.9 included, rise to its maximum.
fn assert_percentiles_in_order(report: &Value) {
    for l in report["latencies"].as_array().unwrap() {
        let at = |field: &str| {
            l[field]
                .as_f64()
                .unwrap_or_else(|| panic!("no {field} in {l}"))
        };
        let marks = ["p50_us", "p90_us", "p99_us", "p999_us", "max_us"].map(at);
        assert!(marks.windows(2).all(|w| w[0] <= w[1]), "{l}");
    }
}

#[test]
fn mapped_writes_deliver_every_item() {
    let r = report(&[
        "fanout",
        "-n",
        "500",
        "--readers",
        "2",
        "--sync",
        "never",
        "--mapped-writes",
    ]);
    assert_eq!(r["settings"]["mapped writes"], "yes");
    assert_eq!(count(&r, "phases", "phase", "put"), 500);
    assert_eq!(count(&r, "phases", "phase", "get + commit"), 1000);
}

#[test]
fn puts_that_take_turns_or_share_writes_deliver_every_item() {
    for coalesce in ["off", "on"] {
        let r = report(&[
            "many-clients",
            "-n",
            "600",
            "-p",
            "4",
            "--sync",
            "never",
            "--coalesce",
            coalesce,
        ]);
        assert_eq!(r["settings"]["coalesce"], coalesce);
        assert_eq!(count(&r, "phases", "phase", "put"), 600);
        assert_eq!(count(&r, "phases", "phase", "get + commit"), 600);
    }
}

#[test]
fn fanout_delivers_every_item_to_every_reader() {
    let r = report(&["fanout", "-n", "120", "--readers", "3", "--sync", "group"]);
    assert_eq!(count(&r, "phases", "phase", "put"), 120);
    assert_eq!(count(&r, "phases", "phase", "get + commit"), 360);
    assert_eq!(count(&r, "latencies", "what", "put to get"), 360);
}

#[test]
fn flood_fills_the_journal_then_drains_it() {
    let r = report(&[
        "flood", "-n", "400", "-p", "2", "--sync", "never", "--size", "128",
    ]);
    assert_eq!(count(&r, "phases", "phase", "put"), 400);
    assert_eq!(count(&r, "phases", "phase", "get + commit"), 400);
    let on_disk: u64 = r["settings"]["journal bytes on disk"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(on_disk >= 400 * (36 + 128), "{on_disk}");
}

#[test]
fn put_many_counts_batches_and_items() {
    let r = report(&["put-many", "-n", "250", "-b", "100", "--sync", "always"]);
    assert_eq!(count(&r, "phases", "phase", "put"), 250);
    assert_eq!(
        count(&r, "latencies", "what", "put_many"),
        3,
        "100 + 100 + 50"
    );
    assert_eq!(count(&r, "phases", "phase", "get + commit"), 250);
}

#[test]
fn blocking_queues_hand_every_item_over() {
    for args in [
        &[
            "blocking", "--queue", "fair", "-n", "2000", "--keys", "4", "-p", "2", "-c", "3",
        ][..],
        &[
            "blocking",
            "--queue",
            "fifo",
            "-n",
            "2000",
            "--capacity",
            "8",
        ][..],
    ] {
        let r = report(args);
        assert_eq!(count(&r, "phases", "phase", "push"), 2000, "{args:?}");
        assert_eq!(
            count(&r, "latencies", "what", "push to pop"),
            2000,
            "{args:?}"
        );
    }
}

#[test]
fn a_given_folder_keeps_the_queue_with_everything_committed() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("journal");
    fairq(dir.path())
        .args(["qtest", "fanout", "-n", "50", "--readers", "2", "--dir"])
        .arg(&folder)
        .assert()
        .success()
        .stdout(predicate::str::contains("get + commit"))
        .stdout(predicate::str::contains("put to get"));
    let q = fairq_journal::JournaledQueue::open(&folder, "qtest", Default::default()).unwrap();
    for r in ["reader-0", "reader-1"] {
        assert_eq!(q.reader(r).unwrap().len(), 0, "{r}");
    }
}

#[test]
fn bad_settings_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    fairq(dir.path())
        .args(["qtest", "many-clients", "--size", "4"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--size must be at least 8"));
    fairq(dir.path())
        .args(["qtest", "flood", "--sync", "sometimes"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown sync policy"));
    fairq(dir.path())
        .args(["qtest", "flood", "--sync", "always", "--mapped-writes"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "mapped_writes needs SyncPolicy::Never or SyncPolicy::Periodic",
        ));
    fairq(dir.path())
        .args(["qtest", "blocking", "-c", "0"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("must be at least 1"));
    fairq(dir.path())
        .args(["qtest", "levitate"])
        .assert()
        .code(2);
}

/// Sizes and counts that no machine could hold are refused up front with a clear error
/// (exit status 1), instead of an allocation failure or thousands of threads (the process
/// aborted, status 134).
#[test]
fn sizes_and_counts_past_any_machine_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["many-clients", "-n", "10", "--size", "99999999999"][..],
        &["many-clients", "-n", "10", "-p", "100000"],
        &["many-clients", "-n", "10", "-c", "100000"],
        &["fanout", "-n", "10", "--readers", "100000"],
        &["put-many", "-n", "10", "--batch", "99999999999"],
        &["blocking", "-n", "10", "-p", "100000"],
        &["blocking", "-n", "10", "-c", "100000"],
        &["blocking", "-n", "10", "--capacity", "99999999999"],
    ] {
        fairq(dir.path())
            .arg("qtest")
            .args(args)
            .arg("--quiet")
            // A bound on a broken build, which starts the load instead.
            .timeout(Duration::from_secs(60))
            .assert()
            .code(1)
            .stderr(predicate::str::contains("at most"));
    }
}
