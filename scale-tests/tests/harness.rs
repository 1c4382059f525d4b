//! The harness cleans up after itself: a test that panics with namespaces, a private
//! PostgreSQL and a worker process running leaves none of them behind.

mod common;

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use fairq_scale_tests::{
    binaries, skip_or_fail, Needs, Network, PrivatePostgres, WorkerConfig, WorkerProcess,
};

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn namespaces() -> String {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn links() -> String {
    let out = std::process::Command::new("ip")
        .args(["-br", "link"])
        .output()
        .expect("ip link");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the panicking test made, to look for afterwards.
#[derive(Default, Debug)]
struct Made {
    namespaces: Vec<String>,
    server_pid: u32,
    server_dir: std::path::PathBuf,
    worker_pid: u32,
}

#[test]
fn a_panicking_test_leaves_no_namespace_server_or_process_behind() {
    if !skip_or_fail(&[Needs::Postgres]) {
        return;
    }
    let _one = common::one_at_a_time();
    let made = Mutex::new(Made::default());
    let dir = tempfile::tempdir().expect("a folder");
    // The panic below is the point of the test: keep its message and backtrace out of the log.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(|| {
        let net = Network::create(2).expect("namespaces");
        let pg = PrivatePostgres::start(net.service_ip()).expect("PostgreSQL");
        let url = pg.store_url("fairq_scale");
        let rt = common::runtime();
        rt.block_on(fairq::connect(&url)).expect("the store");
        let mut worker = WorkerProcess::spawn(
            &binaries!(),
            &net.hosts()[1],
            &url,
            &WorkerConfig::new("q"),
            dir.path(),
            "worker",
        )
        .expect("a worker");
        worker
            .wait_ready(Duration::from_secs(90))
            .expect("the worker serves through its namespace");
        {
            let mut made = made.lock().unwrap();
            made.namespaces = net.hosts().iter().map(|h| h.netns.clone()).collect();
            made.server_pid = pg.pid();
            made.server_dir = pg.dir().to_path_buf();
            made.worker_pid = worker.pid();
            assert!(namespaces().contains(&made.namespaces[1]));
            assert!(alive(made.server_pid) && alive(made.worker_pid));
        }
        panic!("the test fails here, with everything running");
    });
    std::panic::set_hook(report);
    assert!(result.is_err(), "the closure panicked");
    let made = made.into_inner().unwrap();
    assert_eq!(made.namespaces.len(), 2, "{made:?}");
    let left = namespaces();
    for netns in &made.namespaces {
        assert!(!left.contains(netns), "{netns} is still there: {left}");
    }
    // fairq-scale-PID-SLOT-INDEX
    let slot: String = made.namespaces[0].rsplit('-').nth(1).unwrap().to_string();
    assert!(
        !links().contains(&format!("fq{slot}h")),
        "a veth pair of slot {slot} is still there: {}",
        links()
    );
    assert!(!alive(made.server_pid), "PostgreSQL still runs");
    assert!(!alive(made.worker_pid), "the worker still runs");
    assert!(
        !made.server_dir.exists(),
        "the server's folder is still there"
    );
}
