//! Redis servers made for one test: a single `redis-server`, or a cluster of masters with
//! replicas, on private ports of one address, stopped (and their folders deleted) on drop.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::cmd::run;
use crate::postgres::free_port;
use crate::services::find_program;
use crate::{wait_for, Guarded, HarnessError};

/// How long servers may take to answer, and a cluster to agree on its slots.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// A cluster node's bus listens on its port plus this (`--cluster-port`).
const BUS_OFFSET: u16 = 500;
/// Cluster nodes take data ports from here up to `LAST_NODE_PORT` (buses 500 above): the
/// range kept for private clusters of the Redis adapter's and these tests.
const FIRST_NODE_PORT: u16 = 57_000;
const LAST_NODE_PORT: u16 = 57_500;

fn program(name: &str) -> Result<PathBuf, HarnessError> {
    find_program(name).ok_or_else(|| HarnessError::Missing(name.into()))
}

fn temp_dir(prefix: &str) -> Result<TempDir, HarnessError> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| HarnessError::io("making a temporary folder", e))
}

/// `redis-cli -h IP -p PORT ARGS...`, its output.
fn cli(addr: SocketAddr, args: &[&str]) -> Result<String, HarnessError> {
    run(Command::new(program("redis-cli")?)
        .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .args(args))
}

/// Starts `redis-server` on `addr` with `extra` settings, logging to `dir`, and waits
/// until it answers PING.
fn launch(addr: SocketAddr, dir: &Path, extra: &[&str]) -> Result<Guarded, HarnessError> {
    let mut command = Command::new(program("redis-server")?);
    command
        .args(["--bind", &addr.ip().to_string()])
        .args(["--port", &addr.port().to_string()])
        .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join(format!("redis-{}.log", addr.port())))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut server = Guarded::spawn(format!("redis-server on {addr}"), command)?;
    let what = format!("redis-server on {addr} to answer");
    wait_for(&what, READY_WITHIN, || {
        if let Some(status) = server.exited() {
            let log = std::fs::read_to_string(dir.join(format!("redis-{}.log", addr.port())))
                .unwrap_or_default();
            return Some(Err(HarnessError::Other(format!(
                "redis-server on {addr} exited ({status}): {log}"
            ))));
        }
        cli(addr, &["ping"])
            .ok()
            .filter(|out| out.trim() == "PONG")
            .map(|_| Ok(()))
    })??;
    Ok(server)
}

/// A private `redis-server`.
///
/// ```no_run
/// let redis = fairq_scale_tests::PrivateRedis::start("127.0.0.1".parse().unwrap()).unwrap();
/// assert!(redis.url().starts_with("redis://127.0.0.1:"));
/// ```
#[derive(Debug)]
pub struct PrivateRedis {
    addr: SocketAddr,
    server: Guarded,
    dir: TempDir,
}

impl PrivateRedis {
    /// Starts a server on `ip`, on a free port, without persistence.
    pub fn start(ip: Ipv4Addr) -> Result<PrivateRedis, HarnessError> {
        let dir = temp_dir("fairq-scale-redis-")?;
        let mut last = None;
        for _ in 0..5 {
            let addr = SocketAddr::from((ip, free_port(ip)?));
            match launch(addr, dir.path(), &[]) {
                Ok(server) => return Ok(PrivateRedis { addr, server, dir }),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| HarnessError::Other("redis-server did not start".into())))
    }

    /// `redis://IP:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's folder (its log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }
}

/// Ports `port` and `port + BUS_OFFSET` on `ip`, both free now, from the cluster range.
fn free_node_port(ip: Ipv4Addr, taken: &[u16]) -> Result<u16, HarnessError> {
    for port in FIRST_NODE_PORT..LAST_NODE_PORT {
        if taken.contains(&port) {
            continue;
        }
        if TcpListener::bind((ip, port)).is_ok()
            && TcpListener::bind((ip, port + BUS_OFFSET)).is_ok()
        {
            return Ok(port);
        }
    }
    Err(HarnessError::Other(format!(
        "no free port pair (port, port + {BUS_OFFSET}) in {FIRST_NODE_PORT}-{LAST_NODE_PORT} on {ip}"
    )))
}

/// A private Redis Cluster: `masters` masters with `replicas` replicas each, made with
/// `redis-cli --cluster create`, every node on its own port of one address, in 57000-57499
/// (their bus ports 500 above). Started, it has every slot assigned and says `cluster_state:ok` on every
/// node; dropped, every node is stopped and the folder deleted.
///
/// ```no_run
/// let cluster = fairq_scale_tests::RedisCluster::start("127.0.0.1".parse().unwrap(), 3, 1).unwrap();
/// assert_eq!(cluster.nodes().len(), 6);
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<SocketAddr>,
    servers: Vec<Guarded>,
    dir: TempDir,
}

impl RedisCluster {
    /// Starts the nodes, creates the cluster, and waits until every node agrees it is ok.
    pub fn start(
        ip: Ipv4Addr,
        masters: usize,
        replicas: usize,
    ) -> Result<RedisCluster, HarnessError> {
        if masters < 3 {
            return Err(HarnessError::Other(
                "Redis Cluster needs at least 3 masters".into(),
            ));
        }
        let dir = temp_dir("fairq-scale-cluster-")?;
        let count = masters * (1 + replicas);
        let mut cluster = RedisCluster {
            nodes: Vec::with_capacity(count),
            servers: Vec::with_capacity(count),
            dir,
        };
        for _ in 0..count {
            let taken: Vec<u16> = cluster.nodes.iter().map(SocketAddr::port).collect();
            let port = free_node_port(ip, &taken)?;
            let addr = SocketAddr::from((ip, port));
            let config = format!("nodes-{port}.conf");
            let bus = (port + BUS_OFFSET).to_string();
            let server = launch(
                addr,
                cluster.dir.path(),
                &[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    &config,
                    "--cluster-port",
                    &bus,
                    "--cluster-node-timeout",
                    "2000",
                ],
            )?;
            cluster.nodes.push(addr);
            cluster.servers.push(server);
        }
        let mut create = Command::new(program("redis-cli")?);
        create.arg("--cluster").arg("create");
        for node in &cluster.nodes {
            create.arg(node.to_string());
        }
        create.args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"]);
        run(&mut create)?;
        let nodes = cluster.nodes.clone();
        wait_for(
            "every cluster node to say cluster_state:ok",
            READY_WITHIN,
            || {
                nodes
                    .iter()
                    .all(|&node| {
                        cli(node, &["cluster", "info"]).is_ok_and(|info| {
                            let info = cluster_info(&info);
                            info.get("cluster_state").map(String::as_str) == Some("ok")
                                && info.get("cluster_slots_assigned").map(String::as_str)
                                    == Some("16384")
                                && info.get("cluster_known_nodes") == Some(&count.to_string())
                        })
                    })
                    .then_some(())
            },
        )?;
        Ok(cluster)
    }

    /// Every node's address, masters first as created (`redis-cli` assigns roles).
    pub fn nodes(&self) -> &[SocketAddr] {
        &self.nodes
    }

    /// `redis://IP:PORT/` of each node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| format!("redis://{n}/")).collect()
    }

    /// The `--store` URL of the cluster (every node listed) with key prefix `prefix`.
    ///
    /// ```no_run
    /// let cluster = fairq_scale_tests::RedisCluster::start("127.0.0.1".parse().unwrap(), 3, 1).unwrap();
    /// assert!(cluster.store_url("p").starts_with("redis+cluster://127.0.0.1:"));
    /// ```
    pub fn store_url(&self, prefix: &str) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(SocketAddr::to_string).collect();
        format!("redis+cluster://{}/?prefix={prefix}", nodes.join(","))
    }

    /// The cluster's folder (node configurations and logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `kill -9` of node `index`, for failover tests.
    pub fn kill_node(&mut self, index: usize) -> Result<(), HarnessError> {
        let server = self
            .servers
            .get_mut(index)
            .ok_or_else(|| HarnessError::Other(format!("no node {index}")))?;
        server.kill9().map(|_| ())
    }

    /// The process ids of the nodes.
    pub fn pids(&self) -> Vec<u32> {
        self.servers.iter().map(Guarded::pid).collect()
    }
}

/// The `name:value` lines of `CLUSTER INFO` (or `INFO`) as pairs.
///
/// ```
/// let info = fairq_scale_tests::cluster_info("cluster_state:ok\r\ncluster_known_nodes:6\r\n");
/// assert_eq!(info["cluster_state"], "ok");
/// assert_eq!(info["cluster_known_nodes"], "6");
/// ```
pub fn cluster_info(text: &str) -> std::collections::HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.trim().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
