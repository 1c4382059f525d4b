//! A private Redis Cluster for tests: masters with replicas on ports 57000-57999 of
//! 127.0.0.1 (data ports 57000-57499, each node's cluster bus 500 above), in a temporary
//! folder.
//!
//! With [`LocalCluster::start_tls`] every node's port is a TLS port (plain TCP off), and the
//! cluster bus and replication speak TLS too, with certificates of a test authority.
//!
//! Each node runs under a small `sh` watchdog that holds the test process's end of a pipe: when
//! the test process exits, for whatever reason, the pipe closes, the watchdog kills its node
//! and deletes the node's folder. So a cluster shared by every test of a binary (see
//! [`shared`]) is stopped at exit without a teardown hook, and a dropped [`LocalCluster`]
//! stops its nodes at once.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::certs::Authority;

/// Data ports are taken from here up.
const FIRST_PORT: u16 = 57_000;
/// Data ports end below this; bus ports are `port + BUS_OFFSET`.
const LAST_PORT: u16 = 57_500;
const BUS_OFFSET: u16 = 500;
/// How long the nodes may take to start and agree (a readiness bound, not a synchronisation).
const READY_WITHIN: Duration = Duration::from_secs(60);

/// The next data port to try: clusters started by one test process never pick the same.
static NEXT_PORT: AtomicU16 = AtomicU16::new(FIRST_PORT);

/// The next data port of the range whose bus port is free too.
fn next_free_port() -> Result<u16, String> {
    for _ in FIRST_PORT..LAST_PORT {
        let n = NEXT_PORT.fetch_add(1, Ordering::Relaxed);
        let port = FIRST_PORT + (n - FIRST_PORT) % (LAST_PORT - FIRST_PORT);
        if free(port) {
            return Ok(port);
        }
    }
    Err("no free ports left in 57000-57499".into())
}

/// What every node of a TLS cluster gets in its folder: the CA certificate (`ca.crt`), a
/// server certificate (`server.crt`, `server.key`, also shown as the client certificate on
/// the bus and in replication), and a client certificate for `redis-cli` (`client.crt`,
/// `client.key`).
struct TlsFiles {
    files: Vec<(&'static str, String)>,
    /// Whether clients must show a certificate (`--tls-auth-clients yes`).
    require_client_cert: bool,
}

/// One node: its port, its server's process id, its watchdog.
pub struct Node {
    pub port: u16,
    pub pid: u32,
    watchdog: Child,
}

/// A running private cluster.
pub struct LocalCluster {
    pub nodes: Vec<Node>,
    /// Watchdogs of nodes that were restarted (their servers are dead).
    retired: Vec<Node>,
    dir: tempfile::TempDir,
    tls: Option<TlsFiles>,
}

fn free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
        && TcpListener::bind(("127.0.0.1", port + BUS_OFFSET)).is_ok()
}

/// The `name:value` lines of an `INFO`-style answer.
pub fn info(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.trim().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Polls `ready` until it holds or [`READY_WITHIN`] passes.
fn await_ready(what: &str, mut ready: impl FnMut() -> bool) -> Result<(), String> {
    let until = Instant::now() + READY_WITHIN;
    while !ready() {
        if Instant::now() > until {
            return Err(format!("timed out waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

impl LocalCluster {
    /// Starts `masters` masters with `replicas` replicas each and waits until every node says
    /// `cluster_state:ok` and every master has its replicas.
    pub fn start(masters: usize, replicas: usize) -> Result<LocalCluster, String> {
        Self::start_with(masters, replicas, None)
    }

    /// Like [`start`](Self::start), over TLS only: certificates signed by `ca`, and with
    /// `require_client_cert` clients must show one that `ca` signed.
    pub fn start_tls(
        masters: usize,
        replicas: usize,
        ca: &Authority,
        require_client_cert: bool,
    ) -> Result<LocalCluster, String> {
        let (server, server_key) = ca.server_pair();
        let (client, client_key) = ca.client_pair("redis-cli");
        let files = vec![
            ("ca.crt", ca.pem.clone()),
            ("server.crt", server),
            ("server.key", server_key),
            ("client.crt", client),
            ("client.key", client_key),
        ];
        Self::start_with(
            masters,
            replicas,
            Some(TlsFiles {
                files,
                require_client_cert,
            }),
        )
    }

    fn start_with(
        masters: usize,
        replicas: usize,
        tls: Option<TlsFiles>,
    ) -> Result<LocalCluster, String> {
        let dir = tempfile::Builder::new()
            .prefix("fairq-redis-cluster-")
            .tempdir()
            .map_err(|e| format!("temporary folder: {e}"))?;
        let mut cluster = LocalCluster {
            nodes: Vec::new(),
            retired: Vec::new(),
            dir,
            tls,
        };
        let count = masters * (1 + replicas);
        while cluster.nodes.len() < count {
            let node = cluster.launch(next_free_port()?)?;
            cluster.nodes.push(node);
        }
        let first = cluster.nodes[0].port;
        let mut create = cluster.cli_command(first);
        create.args(["--cluster", "create"]);
        for node in &cluster.nodes {
            create.arg(format!("127.0.0.1:{}", node.port));
        }
        let out = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("redis-cli --cluster create: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        let ports: Vec<u16> = cluster.nodes.iter().map(|n| n.port).collect();
        await_ready("the cluster to agree", || {
            ports.iter().all(|&p| {
                let i = info(&cluster.cli(p, &["cluster", "info"]));
                i.get("cluster_state").map(String::as_str) == Some("ok")
                    && i.get("cluster_known_nodes") == Some(&count.to_string())
            }) && cluster.masters().len() == masters
                && cluster.masters().iter().all(|&m| {
                    info(&cluster.cli(m, &["info", "replication"])).get("connected_slaves")
                        == Some(&replicas.to_string())
                })
                // A replica counts as connected from its first PSYNC, before it has any
                // data; one that never finished its first sync cannot be promoted, so a
                // master killed that early never fails over.
                && ports.iter().all(|&p| {
                    let i = info(&cluster.cli(p, &["info", "replication"]));
                    i.get("role").map(String::as_str) != Some("slave")
                        || i.get("master_link_status").map(String::as_str) == Some("up")
                })
        })?;
        Ok(cluster)
    }

    fn launch(&self, port: u16) -> Result<Node, String> {
        let node_dir = self.dir.path().join(port.to_string());
        std::fs::create_dir_all(&node_dir).map_err(|e| format!("node folder: {e}"))?;
        let ports = match &self.tls {
            None => format!("--port {port}"),
            Some(tls) => {
                for (name, text) in &tls.files {
                    std::fs::write(node_dir.join(name), text)
                        .map_err(|e| format!("writing {name}: {e}"))?;
                }
                format!(
                    "--port 0 --tls-port {port} --tls-cluster yes --tls-replication yes \
                     --tls-cert-file {dir}/server.crt --tls-key-file {dir}/server.key \
                     --tls-ca-cert-file {dir}/ca.crt --tls-auth-clients {auth}",
                    dir = node_dir.display(),
                    auth = if tls.require_client_cert { "yes" } else { "no" },
                )
            }
        };
        let server = format!(
            "redis-server --bind 127.0.0.1 {ports} --cluster-port {bus} \
             --cluster-enabled yes --cluster-config-file nodes.conf \
             --cluster-node-timeout 1000 --save '' --appendonly no --protected-mode no \
             --dir {dir} --logfile {dir}/redis.log",
            bus = port + BUS_OFFSET,
            dir = node_dir.display(),
        );
        // The server runs in the background (stdin /dev/null); the watchdog reads its own
        // stdin, our pipe, until it closes, then kills the server and removes its folder.
        let script = format!(
            "{server} & pid=$!; echo $pid; read _; kill -9 $pid 2>/dev/null; wait $pid; \
             rm -rf {dir}; rmdir {parent} 2>/dev/null",
            dir = node_dir.display(),
            parent = self.dir.path().display(),
        );
        let mut watchdog = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting redis-server: {e}"))?;
        let mut line = String::new();
        let stdout = watchdog.stdout.take().ok_or("no watchdog output")?;
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("watchdog: {e}"))?;
        let pid = line
            .trim()
            .parse()
            .map_err(|_| format!("watchdog said {line:?}"))?;
        await_ready(&format!("redis-server on port {port}"), || {
            self.cli(port, &["ping"]).trim() == "PONG"
        })?;
        Ok(Node {
            port,
            pid,
            watchdog,
        })
    }

    /// `redis+cluster://` URL listing every node (`rediss+cluster://` over TLS).
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}+cluster://{}/", nodes.join(","))
    }

    /// A file of the node on `port`'s folder (over TLS: `ca.crt`, `client.crt`, ...).
    pub fn file(&self, port: u16, name: &str) -> PathBuf {
        self.dir.path().join(port.to_string()).join(name)
    }

    /// `redis-cli` for the node on `port`, with the cluster's TLS settings.
    fn cli_command(&self, port: u16) -> Command {
        let mut command = Command::new("redis-cli");
        command.args(["-h", "127.0.0.1", "-p", &port.to_string()]);
        if self.tls.is_some() {
            command.arg("--tls");
            for (flag, name) in [
                ("--cacert", "ca.crt"),
                ("--cert", "client.crt"),
                ("--key", "client.key"),
            ] {
                command.arg(flag).arg(self.file(port, name));
            }
        }
        command
    }

    /// `redis-cli -p PORT ARGS...` (over TLS when the cluster speaks it), its output (empty
    /// when it could not run).
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        self.cli_command(port)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// The ports of the nodes that are masters now and answer.
    pub fn masters(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| {
                info(&self.cli(n.port, &["info", "replication"]))
                    .get("role")
                    .map(String::as_str)
                    == Some("master")
            })
            .map(|n| n.port)
            .collect()
    }

    /// The port of the master serving `key` now (asked of any live node).
    pub fn master_of(&self, key: &str) -> Option<u16> {
        let slot: u16 = self.nodes.iter().find_map(|n| {
            self.cli(n.port, &["cluster", "keyslot", key])
                .trim()
                .parse()
                .ok()
        })?;
        for node in &self.nodes {
            let nodes = self.cli(node.port, &["cluster", "nodes"]);
            for line in nodes.lines() {
                let fields: Vec<&str> = line.split_whitespace().collect();
                if fields.len() < 9 || !fields[2].contains("master") || fields[2].contains("fail") {
                    continue;
                }
                let serves = fields[8..].iter().any(|range| match range.split_once('-') {
                    Some((a, b)) => {
                        a.parse::<u16>().is_ok_and(|a| a <= slot)
                            && b.parse::<u16>().is_ok_and(|b| slot <= b)
                    }
                    None => range.parse::<u16>() == Ok(slot),
                });
                if serves {
                    let port = fields[1].split(['@', ':']).nth(1)?.parse().ok()?;
                    return Some(port);
                }
            }
            if !nodes.is_empty() {
                return None;
            }
        }
        None
    }

    /// `kill -9` of the node on `port`.
    pub fn kill9(&self, port: u16) {
        if let Some(node) = self.nodes.iter().find(|n| n.port == port) {
            let _ = Command::new("kill")
                .args(["-9", &node.pid.to_string()])
                .status();
        }
    }

    /// Starts the node on `port` again after [`kill9`](Self::kill9), with its folder and
    /// cluster configuration: it rejoins the cluster (as a replica when its slots were taken
    /// over meanwhile).
    pub fn restart(&mut self, port: u16) -> Result<(), String> {
        let index = self
            .nodes
            .iter()
            .position(|n| n.port == port)
            .ok_or_else(|| format!("no node on port {port}"))?;
        let node = self.launch(port)?;
        let old = std::mem::replace(&mut self.nodes[index], node);
        self.retired.push(old);
        Ok(())
    }

    /// The cluster's folder.
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Whether the node on `port` is a replica whose link to its master is up (its first
    /// sync done).
    pub fn synced_replica(&self, port: u16) -> bool {
        let replication = info(&self.cli(port, &["info", "replication"]));
        replication.get("role").map(String::as_str) == Some("slave")
            && replication.get("master_link_status").map(String::as_str) == Some("up")
    }

    /// What each node says of itself, for a failing test's message: its role, its link to
    /// its master, what it knows of the cluster, and the last lines of its log.
    pub fn report(&self) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            let replication = info(&self.cli(node.port, &["info", "replication"]));
            let field = |name: &str| replication.get(name).map_or("?", String::as_str).to_owned();
            out.push_str(&format!(
                "\n--- node {} (pid {}): role {}, master_link_status {}, connected_slaves {}\n",
                node.port,
                node.pid,
                field("role"),
                field("master_link_status"),
                field("connected_slaves"),
            ));
            out.push_str(&self.cli(node.port, &["cluster", "nodes"]));
            if field("role") == "master" {
                // Offsets and replica acknowledgements, and what each client is doing (a
                // client blocked in WAIT shows `cmd=wait`, flag `b`).
                for line in self.cli(node.port, &["info", "replication"]).lines() {
                    if line.contains("offset") || line.starts_with("slave") {
                        out.push_str(&format!("  > {}\n", line.trim()));
                    }
                }
                for line in self.cli(node.port, &["client", "list"]).lines() {
                    out.push_str(&format!("  c {line}\n"));
                }
            }
            let log =
                std::fs::read_to_string(self.file(node.port, "redis.log")).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            for line in &lines[lines.len().saturating_sub(40)..] {
                out.push_str("  | ");
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for node in self.nodes.iter_mut().chain(self.retired.iter_mut()) {
            // Closing the pipe makes the watchdog kill its server.
            drop(node.watchdog.stdin.take());
        }
        for node in self.nodes.iter_mut().chain(self.retired.iter_mut()) {
            let _ = node.watchdog.wait();
        }
    }
}

/// Whether `redis-server` and `redis-cli` can be run; when not, says so and returns false, or
/// panics when services are required.
pub fn programs_available() -> bool {
    let found = ["redis-server", "redis-cli"].iter().all(|p| {
        Command::new(p)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    });
    if !found {
        if super::required() {
            panic!("redis-server or redis-cli is missing and FAIRQ_REQUIRE_SERVICES is set");
        }
        eprintln!("skipped: redis-server or redis-cli is missing");
    }
    found
}

/// One 3-master, 3-replica cluster shared by every test of the binary, started on first use
/// and stopped when the test process exits. `None` (after saying why) when the programs are
/// missing and services are not required.
pub fn shared() -> Option<&'static LocalCluster> {
    static CLUSTER: OnceLock<Option<LocalCluster>> = OnceLock::new();
    CLUSTER
        .get_or_init(|| {
            if !programs_available() {
                return None;
            }
            Some(LocalCluster::start(3, 1).unwrap_or_else(|e| panic!("private cluster: {e}")))
        })
        .as_ref()
}
