//! The file store under faults, driven through the `fairq` binary: read-only commands on a
//! folder that cannot be written (they change nothing in it), repairs printed as warnings
//! instead of happening silently, and a full disk reported as such.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::fairq;
use fairq_journal::fingerprint::FolderFingerprint;

/// Everything observable about a folder's entries (name, mode, size, content, modification
/// time).
fn observe(dir: &Path) -> FolderFingerprint {
    FolderFingerprint::take(dir).unwrap()
}

/// The journal segment files in `dir`, oldest first.
fn segment_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut segs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segs.sort();
    segs
}

fn last_segment(dir: &Path) -> std::path::PathBuf {
    segment_files(dir).pop().unwrap()
}

/// Enqueues jobs with payloads 1 to `n` into `store`, one `fairq enqueue` each.
fn enqueue_numbered(dir: &Path, store: &str, n: u32) {
    for i in 1..=n {
        fairq(dir)
            .args(["--store", store, "enqueue", "-k", "x", "-p", &i.to_string()])
            .assert()
            .success();
    }
}

#[test]
fn stats_and_list_look_at_a_read_only_folder_without_changing_it_and_report_repairs() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("store");
    let store = format!("file:{}", folder.display());
    enqueue_numbered(dir.path(), &store, 3);
    // The remains of a torn write after the last record.
    let segment = last_segment(&folder);
    let mut bytes = std::fs::read(&segment).unwrap();
    let valid = bytes.len();
    bytes.extend_from_slice(&[0x5A; 9]);
    std::fs::write(&segment, &bytes).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o500)).unwrap();
    let before = observe(&folder);
    for command in ["list", "stats"] {
        let out = fairq(dir.path())
            .args(["--store", &store, "--json", command])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{command}: {stderr}");
        let name = segment.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            stderr.starts_with("warning: ")
                && stderr.contains(&name)
                && stderr.contains(&format!("9 bytes at offset {valid}"))
                && stderr.contains("torn tail"),
            "{command}: {stderr}"
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if command == "list" {
            assert_eq!(json.as_array().unwrap().len(), 3, "{json}");
        }
    }
    assert_eq!(
        observe(&folder),
        before,
        "a read-only command changed the store folder"
    );
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A command that writes cuts the tail off, and says so too.
    let out = fairq(dir.path())
        .args(["--store", &store, "enqueue", "-k", "x"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cut off: a torn tail"), "{stderr}");
}

#[test]
fn a_damaged_store_is_refused_with_a_hint_and_fairq_salvage_rebuilds_it() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("store");
    let store = format!("file:{}", folder.display());
    enqueue_numbered(dir.path(), &store, 4);
    // A flipped byte in the first segment, before the newest one: damage, not a torn tail.
    let segs = segment_files(&folder);
    assert!(segs.len() >= 2, "{segs:?}");
    let mut bytes = std::fs::read(&segs[0]).unwrap();
    let at = bytes.len() - 3;
    bytes[at] ^= 0x01;
    std::fs::write(&segs[0], &bytes).unwrap();

    let out = fairq(dir.path())
        .args(["--store", &store, "list"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("corrupt journal file"), "{stderr}");
    assert!(stderr.contains("hint: `fairq salvage --to"), "{stderr}");

    let before = observe(&folder);
    let rebuilt = dir.path().join("rebuilt");
    let out = fairq(dir.path())
        .args(["--store", &store, "--json", "salvage", "--to"])
        .arg(&rebuilt)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["jobs"], 3, "{report}");
    assert_eq!(report["lost_anything"], true, "{report}");
    let name = segs[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        report["damage"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with(&name),
        "{report}"
    );
    assert_eq!(
        observe(&folder),
        before,
        "salvage changed the damaged folder"
    );

    let out = fairq(dir.path())
        .args(["--json", "list", "--store"])
        .arg(format!("file:{}", rebuilt.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jobs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let payloads: Vec<_> = jobs
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["payload"].clone())
        .collect();
    assert_eq!(payloads, [2, 3, 4], "{jobs}");
}

#[test]
fn a_full_disk_is_reported_as_full_and_can_still_be_inspected() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("small");
    std::fs::create_dir(&mount).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&mount)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here (fairq-file's tests cover a full disk)");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&mount);
    let store = format!("file:{}", mount.join("store").display());
    let payload = format!("\"{}\"", "x".repeat(16_000));
    let mut enqueued = 0;
    let stderr = loop {
        let out = fairq(dir.path())
            .args(["--store", &store, "enqueue", "-k", "x", "-p", &payload])
            .output()
            .unwrap();
        if !out.status.success() {
            break String::from_utf8_lossy(&out.stderr).into_owned();
        }
        enqueued += 1;
        assert!(enqueued < 100, "256 KiB never filled up");
    };
    assert!(
        stderr.contains("is full") && stderr.contains("not recorded")
            || stderr.contains("nothing was recorded"),
        "{stderr}"
    );
    assert!(!stderr.contains("cannot use"), "{stderr}");
    // Looking still works, and shows every job that was acknowledged.
    let out = fairq(dir.path())
        .args(["--store", &store, "--json", "list", "--limit", "1000"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json.as_array().unwrap().len(), enqueued);
}

/// Rounds of the kill -9 loop (the issue asks for 30 over 5,000 jobs).
const KILL_ROUNDS: usize = 30;
const KILL_JOBS: usize = 5_000;
/// Commands a round lets start before fairq is killed.
const RUNS_PER_ROUND: usize = 120;

fn lines_of(path: &Path) -> Vec<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => text.lines().map(str::to_string).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// `fairq work --exec` over 5,000 jobs, killed with SIGKILL 30 times in the middle of its
/// jobs, then run until idle: every job succeeds in the end, every job's command ran, and no
/// job whose success fairq had reported (it reports once the store recorded it) ran again.
#[test]
fn kill_9_of_fairq_work_in_a_loop_loses_no_job_and_reruns_no_acknowledged_one() {
    use fairq::file::{FileBackend, FileOptions};
    use fairq::{Backend, NewJob};
    use fairq_core::retry::{Backoff, RetryPolicy};

    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("store");
    let store_url = format!("file:{}", folder.display());
    let runs = dir.path().join("runs.log");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = FileBackend::open(&folder, FileOptions::default()).unwrap();
        // A rescued job (its fairq was killed) runs again at once, however often.
        let policy = RetryPolicy::forever().with_backoff(Backoff::Immediate);
        for chunk in 0..KILL_JOBS / 500 {
            let jobs: Vec<NewJob> = (0..500)
                .map(|i| {
                    NewJob::new(
                        "default",
                        "run",
                        format!("{}", chunk * 500 + i).into_bytes(),
                    )
                    .key(format!("tenant-{}", i % 10))
                    .retry(policy.clone())
                })
                .collect();
            store.enqueue_many(jobs).await.unwrap();
        }
        store.close().unwrap();
    });
    let script = r#"echo "$ROUND $FAIRQ_JOB_ID" >> "$RUNS""#;
    let start = |round: &str, until_idle: bool| {
        let out = std::fs::File::create(dir.path().join(format!("out.{round}"))).unwrap();
        let err = std::fs::File::create(dir.path().join(format!("err.{round}"))).unwrap();
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("fairq"));
        cmd.current_dir(dir.path())
            .env_remove("FAIRQ_STORE")
            .env("ROUND", round)
            .env("RUNS", &runs)
            .args(["--store", &store_url, "--json", "work", "-q", "default"])
            .args(["--concurrency", "8", "--poll", "50ms"]);
        if until_idle {
            cmd.arg("--until-idle");
        }
        cmd.args(["--exec", "sh", "-c", script])
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap()
    };
    let started = Instant::now();
    for round in 0..KILL_ROUNDS {
        let before = lines_of(&runs).len();
        let mut child = start(&round.to_string(), false);
        let deadline = Instant::now() + Duration::from_secs(120);
        while lines_of(&runs).len() < before + RUNS_PER_ROUND {
            assert!(Instant::now() < deadline, "round {round} ran nothing");
            if let Some(status) = child.try_wait().unwrap() {
                let err = std::fs::read_to_string(dir.path().join(format!("err.{round}")));
                panic!(
                    "fairq work ended by itself in round {round} ({status}): {}",
                    err.unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let mut last = start("final", true);
    assert!(last.wait().unwrap().success(), "the final run failed");
    eprintln!(
        "{KILL_ROUNDS} kill -9 rounds and a final run over {KILL_JOBS} jobs in {:.1?}",
        started.elapsed()
    );

    // Every job succeeded.
    runtime.block_on(async {
        let store = FileBackend::open(&folder, FileOptions::default()).unwrap();
        let stats = store.stats().await.unwrap();
        assert_eq!(stats[0].counts.succeeded, KILL_JOBS as u64, "{stats:?}");
        assert_eq!(stats[0].counts.pending(), 0, "{stats:?}");
        store.close().unwrap();
    });
    // Every job's command ran, and none ran in a round after the one that reported it done.
    let round_no = |r: &str| {
        if r == "final" {
            KILL_ROUNDS
        } else {
            r.parse().unwrap()
        }
    };
    let mut ran: std::collections::HashMap<u64, Vec<usize>> = Default::default();
    for line in lines_of(&runs) {
        let (round, id) = line.split_once(' ').expect("a run line");
        ran.entry(id.parse().unwrap())
            .or_default()
            .push(round_no(round));
    }
    assert_eq!(ran.len(), KILL_JOBS);
    let mut reported = 0;
    for round in (0..KILL_ROUNDS)
        .map(|r| r.to_string())
        .chain(["final".into()])
    {
        for line in lines_of(&dir.path().join(format!("out.{round}"))) {
            // A line cut by the kill is not a report.
            let Ok(report) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if report["outcome"] != "succeeded" {
                continue;
            }
            reported += 1;
            let id = report["id"].as_u64().unwrap();
            let later: Vec<usize> = ran[&id]
                .iter()
                .copied()
                .filter(|&r| r > round_no(&round))
                .collect();
            assert!(
                later.is_empty(),
                "job {id} was reported done in round {round} and ran again in rounds {later:?}"
            );
        }
    }
    // A job settled just before a kill may miss its report line; most have one, so the
    // check above has teeth.
    assert!(reported >= KILL_JOBS / 2, "{reported} successes reported");
}
