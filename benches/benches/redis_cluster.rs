//! fairq-redis on one Redis node against a Redis Cluster of three masters, in one run.
//!
//! The bench starts its own servers on 127.0.0.1, ports 57000-57499 (cluster buses 500
//! above), in a temporary folder, and stops them at the end: one `redis-server` without
//! cluster mode, and three masters joined with `redis-cli --cluster create` (no replicas:
//! this measures the spread of queues over masters, not replication). On each it runs the same
//! work: `JOBS` no-op jobs over `QUEUES` queues enqueued by `enqueue_many`, then burnt down by
//! two `settle_and_claim` loops per queue of up to 8 jobs each. It prints jobs/s for both
//! stores and their ratio.
//!
//! On one machine the three masters share its cores with each other and with the bench, so
//! the ratio shows the cluster's client-side cost more than its capacity; on separate machines
//! each master serves a third of the queues.
//!
//! Needs `redis-server` and `redis-cli`; without them it says so and exits successfully. Run
//! with `cargo bench -p fairq-benches --bench redis_cluster`.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::{random_u64, Backend, Finished, NewJob};

const JOBS: usize = 100_000;
const QUEUES: usize = 12;
const LOOPS_PER_QUEUE: usize = 2;
const BATCH: usize = 8;
const LEASE: Duration = Duration::from_secs(300);
const FIRST_PORT: u16 = 57_000;
const LAST_PORT: u16 = 57_500;
const BUS_OFFSET: u16 = 500;

/// Servers started by the bench, killed when dropped.
struct Servers {
    children: Vec<Child>,
    _dir: tempfile::TempDir,
}

impl Drop for Servers {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_port(after: u16) -> Option<u16> {
    (after..LAST_PORT).find(|&p| {
        TcpListener::bind(("127.0.0.1", p)).is_ok()
            && TcpListener::bind(("127.0.0.1", p + BUS_OFFSET)).is_ok()
    })
}

fn cli(port: u16, args: &[&str]) -> String {
    Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// Polls `ready` for up to a minute (servers starting; not a measurement).
fn await_ready(what: &str, ready: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `n` servers (in cluster mode when `cluster`); returns them with their ports.
fn start(n: usize, cluster: bool) -> (Servers, Vec<u16>) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let mut servers = Servers {
        children: Vec::new(),
        _dir: dir,
    };
    let mut ports = Vec::new();
    let mut next = FIRST_PORT;
    for _ in 0..n {
        let port = free_port(next).expect("a free port in 57000-57499");
        next = port + 1;
        let node_dir = servers._dir.path().join(port.to_string());
        std::fs::create_dir_all(&node_dir).expect("node folder");
        let mut cmd = Command::new("redis-server");
        cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&node_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if cluster {
            cmd.args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ])
            .args(["--cluster-port", &(port + BUS_OFFSET).to_string()]);
        }
        servers
            .children
            .push(cmd.spawn().expect("start redis-server"));
        await_ready("redis-server", || cli(port, &["ping"]).trim() == "PONG");
        ports.push(port);
    }
    if cluster {
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        for port in &ports {
            create.arg(format!("127.0.0.1:{port}"));
        }
        let ok = create
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .expect("redis-cli --cluster create")
            .success();
        assert!(ok, "redis-cli --cluster create failed");
        await_ready("the cluster", || {
            ports
                .iter()
                .all(|p| cli(*p, &["cluster", "info"]).contains("cluster_state:ok"))
        });
    }
    (servers, ports)
}

/// Enqueue rate and burn-down rate on the store at `url`.
async fn measure(url: &str) -> (f64, f64) {
    let store = RedisBackend::connect(
        url,
        RedisOptions::new().prefix(format!("fairq-bench-{:016x}", random_u64())),
    )
    .await
    .expect("connect");
    let queues: Vec<String> = (0..QUEUES).map(|q| format!("bench-{q}")).collect();
    let start = Instant::now();
    let mut sends = Vec::new();
    for chunk in (0..JOBS).collect::<Vec<_>>().chunks(5_000) {
        let jobs: Vec<NewJob> = chunk
            .iter()
            .map(|i| NewJob::new(queues[i % QUEUES].as_str(), "noop", Vec::new()))
            .collect();
        sends.push(store.enqueue_many(jobs));
    }
    for ids in futures::future::join_all(sends).await {
        ids.expect("enqueue");
    }
    let enqueue = JOBS as f64 / start.elapsed().as_secs_f64();

    let start = Instant::now();
    let mut tasks = Vec::new();
    for queue in &queues {
        for _ in 0..LOOPS_PER_QUEUE {
            let store = store.clone();
            let queue = queue.clone();
            tasks.push(tokio::spawn(async move {
                let mut finished: Vec<Finished> = Vec::new();
                loop {
                    let out = store
                        .settle_and_claim(std::mem::take(&mut finished), &queue, BATCH, LEASE)
                        .await
                        .expect("settle and claim");
                    for answer in out.settled {
                        answer.expect("settled");
                    }
                    let jobs = out.claimed.expect("claimed");
                    if jobs.is_empty() {
                        return;
                    }
                    finished = jobs.iter().map(|job| Finished::new(job, Ok(()))).collect();
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("burn-down loop");
    }
    let burn = JOBS as f64 / start.elapsed().as_secs_f64();
    store.destroy().await.expect("cleanup");
    (enqueue, burn)
}

async fn run() {
    let found = ["redis-server", "redis-cli"].iter().all(|p| {
        Command::new(p)
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok()
    });
    if !found {
        println!("redis_cluster bench skipped: redis-server or redis-cli is missing");
        return;
    }
    let (single, single_ports) = start(1, false);
    let (one_enq, one_burn) = measure(&format!("redis://127.0.0.1:{}/", single_ports[0])).await;
    drop(single);
    let (cluster, ports) = start(3, true);
    let nodes: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let (cl_enq, cl_burn) = measure(&format!("redis+cluster://{}/", nodes.join(","))).await;
    drop(cluster);

    println!(
        "fairq-redis, one node vs a 3-master cluster ({JOBS} jobs over {QUEUES} queues, \
         {LOOPS_PER_QUEUE} settle_and_claim loops of {BATCH} per queue)"
    );
    println!("| measurement | 1 node | 3-master cluster | cluster / 1 node |");
    println!("|---|---|---|---|");
    println!(
        "| enqueue_many | {one_enq:.0} jobs/s | {cl_enq:.0} jobs/s | {:.2} |",
        cl_enq / one_enq
    );
    println!(
        "| burn-down | {one_burn:.0} jobs/s | {cl_burn:.0} jobs/s | {:.2} |",
        cl_burn / one_burn
    );
}

fn main() {
    // Listing (as test runners do) measures nothing.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run());
}
