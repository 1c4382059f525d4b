//! A private `redis-server` in a temporary folder, for tests that need their own server (TLS,
//! restarts). It is stopped when the value is dropped, also when the test fails. Ports come
//! from the range 56400-56449 reserved for these tests: each server takes the next one that
//! nothing listens on.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// How long a starting server may take to say it is ready (a deadline against hangs, not a
/// wait: the server's own "Ready to accept connections" line is what the start waits for).
const READY_DEADLINE: Duration = Duration::from_secs(60);

/// The next port to try.
static NEXT_PORT: AtomicU16 = AtomicU16::new(56400);

/// A port of the range that nothing listens on now, never the same twice in one process.
pub fn free_port() -> u16 {
    for _ in 0..50 {
        let port = NEXT_PORT.fetch_add(1, Ordering::Relaxed);
        let port = 56400 + (port - 56400) % 50;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in 56400-56449");
}

/// A running private server.
pub struct PrivateRedis {
    child: Option<Child>,
    dir: tempfile::TempDir,
    args: Vec<String>,
    /// The port it listens on (plain or TLS, as started).
    pub port: u16,
}

/// Whether `redis-server` is installed; when it is not, says so and returns false (or panics
/// when services are required).
pub fn installed() -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !found {
        if super::required() {
            panic!("redis-server is not installed and FAIRQ_REQUIRE_SERVICES is set");
        }
        eprintln!("skipped: redis-server is not installed");
    }
    found
}

impl PrivateRedis {
    /// Starts `redis-server` on a free port with `args` (for example `--appendonly yes`),
    /// persisting nothing unless `args` say otherwise, and waits until it accepts connections.
    pub fn start(args: &[&str]) -> PrivateRedis {
        Self::start_prepared(args, false, |_| {})
    }

    /// Like [`start`](Self::start), after `prepare` wrote what the server needs (certificates)
    /// into its folder, which `args` may name relative to it (the server runs there). With
    /// `tls`, the port is a TLS port (`--tls-port`) and plain TCP is off.
    pub fn start_prepared(args: &[&str], tls: bool, prepare: impl FnOnce(&Path)) -> PrivateRedis {
        let dir = tempfile::tempdir().expect("temp folder for redis-server");
        prepare(dir.path());
        let port = free_port();
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        if tls {
            args.extend([
                "--port".into(),
                "0".into(),
                "--tls-port".into(),
                port.to_string(),
            ]);
        }
        let mut server = PrivateRedis {
            child: None,
            dir,
            args,
            port,
        };
        server.launch();
        server
    }

    /// The server's folder (certificates, AOF files).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A file in the server's folder.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn launch(&mut self) {
        let mut command = Command::new("redis-server");
        command
            .current_dir(self.dir.path())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--save")
            .arg("")
            .arg("--logfile")
            .arg("")
            .arg("--daemonize")
            .arg("no");
        if !self.args.iter().any(|a| a == "--port") {
            command.arg("--port").arg(self.port.to_string());
        }
        command.args(&self.args);
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start redis-server");
        let stdout = child.stdout.take().expect("redis-server's stdout");
        let (ready_tx, ready_rx) = mpsc::channel();
        // Reads the log to its end (a full pipe would stall the server), reporting readiness
        // or the last lines before an early exit.
        std::thread::spawn(move || {
            let mut tail = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("Ready to accept connections") {
                    let _ = ready_tx.send(Ok(()));
                }
                tail.push(line);
                if tail.len() > 20 {
                    tail.remove(0);
                }
            }
            let _ = ready_tx.send(Err(tail.join("\n")));
        });
        self.child = Some(child);
        match ready_rx.recv_timeout(READY_DEADLINE) {
            Ok(Ok(())) => {}
            Ok(Err(log)) => panic!("redis-server exited before it was ready:\n{log}"),
            Err(_) => panic!("redis-server was not ready within {READY_DEADLINE:?}"),
        }
    }

    /// Kills the server (SIGKILL: no shutdown work, like a crash) and waits until it is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts it again on the same folder and settings.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
    }
}
