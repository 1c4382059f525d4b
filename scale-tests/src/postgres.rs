//! A PostgreSQL server made for one test: `initdb` in a temporary folder, listening on one
//! address and a free port, trust authentication, stopped and deleted on drop.

use std::io::Write;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use rustix::process::Signal;
use tempfile::TempDir;

use crate::cmd::run;
use crate::services::{find_program, postgres_user};
use crate::{wait_for, Guarded, HarnessError};

/// How long a fresh server may take to accept connections (a loaded 2-core machine is slow).
const READY_WITHIN: Duration = Duration::from_secs(90);

/// A port nobody listens on at `ip` right now.
pub(crate) fn free_port(ip: Ipv4Addr) -> Result<u16, HarnessError> {
    let listener = TcpListener::bind((ip, 0))
        .map_err(|e| HarnessError::io(format!("finding a free port on {ip}"), e))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| HarnessError::io("reading a bound port", e))
}

/// A private PostgreSQL server.
///
/// ```no_run
/// let server = fairq_scale_tests::PrivatePostgres::start("127.0.0.1".parse().unwrap()).unwrap();
/// assert!(server.store_url("jobs").ends_with("/postgres?schema=jobs"));
/// ```
#[derive(Debug)]
pub struct PrivatePostgres {
    ip: Ipv4Addr,
    port: u16,
    // Declared before the folder: the server stops before its files are deleted.
    server: Guarded,
    dir: TempDir,
}

impl PrivatePostgres {
    /// Makes a cluster with `initdb` and starts it on `ip`, on a free port.
    pub fn start(ip: Ipv4Addr) -> Result<PrivatePostgres, HarnessError> {
        let initdb = find_program("initdb").ok_or(HarnessError::Missing("initdb".into()))?;
        let postgres = find_program("postgres").ok_or(HarnessError::Missing("postgres".into()))?;
        let ready = find_program("pg_isready").ok_or(HarnessError::Missing("pg_isready".into()))?;
        let (uid, gid) = postgres_user()?;
        let dir = tempfile::Builder::new()
            .prefix("fairq-scale-pg-")
            .tempdir()
            .map_err(|e| HarnessError::io("making a temporary folder", e))?;
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
            .map_err(|e| HarnessError::io("handing the folder to postgres", e))?;
        let data = dir.path().join("data");
        run(Command::new(&initdb)
            .uid(uid)
            .gid(gid)
            .current_dir(dir.path())
            .env("HOME", dir.path())
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ]))?;
        // initdb trusts the loopback addresses only; the namespaces come from the veth
        // subnets. The server listens on one private address alone.
        let hba = data.join("pg_hba.conf");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&hba)
            .and_then(|mut f| f.write_all(b"host all all 0.0.0.0/0 trust\n"))
            .map_err(|e| HarnessError::io("allowing the namespaces in pg_hba.conf", e))?;
        let mut last = None;
        for _ in 0..5 {
            let port = free_port(ip)?;
            match Self::launch(&postgres, &ready, dir.path(), &data, ip, port, uid, gid) {
                Ok(server) => {
                    return Ok(PrivatePostgres {
                        ip,
                        port,
                        server,
                        dir,
                    })
                }
                // Another process may have taken the port between the probe and the start.
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| HarnessError::Other("PostgreSQL did not start".into())))
    }

    #[allow(clippy::too_many_arguments)]
    fn launch(
        postgres: &Path,
        ready: &Path,
        dir: &Path,
        data: &Path,
        ip: Ipv4Addr,
        port: u16,
        uid: u32,
        gid: u32,
    ) -> Result<Guarded, HarnessError> {
        let log_path = dir.join(format!("postgres-{port}.log"));
        let log = std::fs::File::create(&log_path)
            .map_err(|e| HarnessError::io("creating the server log", e))?;
        let mut command = Command::new(postgres);
        command
            .uid(uid)
            .gid(gid)
            .current_dir(dir)
            .arg("-D")
            .arg(data)
            .arg("-p")
            .arg(port.to_string())
            .arg("-c")
            .arg(format!("listen_addresses={ip}"))
            .arg("-c")
            .arg(format!("unix_socket_directories={}", dir.display()))
            // The tests kill workers, never this server: durability of its files is not
            // under test, and fsync would only slow a loaded machine down.
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=300"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        // SIGINT is PostgreSQL's fast shutdown: running sessions are ended, nothing waits.
        let mut server =
            Guarded::spawn(format!("PostgreSQL on {ip}:{port}"), command)?.stop_with(Signal::INT);
        let started = wait_for("PostgreSQL to accept connections", READY_WITHIN, || {
            if let Some(status) = server.exited() {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Some(Err(HarnessError::Other(format!(
                    "PostgreSQL exited ({status}) while starting: {log}"
                ))));
            }
            let accepting = Command::new(ready)
                .args(["-q", "-h", &ip.to_string(), "-p", &port.to_string()])
                .status()
                .is_ok_and(|s| s.success());
            accepting.then_some(Ok(()))
        });
        started??;
        Ok(server)
    }

    /// `postgres://postgres@IP:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@{}:{}/postgres", self.ip, self.port)
    }

    /// The `--store` URL of a fairq store in `schema`.
    pub fn store_url(&self, schema: &str) -> String {
        format!("{}?schema={schema}", self.url())
    }

    /// The server's folder (its data and log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }
}
