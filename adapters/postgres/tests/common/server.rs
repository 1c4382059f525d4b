//! A PostgreSQL server of one test: `initdb` in a temporary folder, its own port in
//! 55400-55499 on 127.0.0.1, trust authentication, TLS on with a generated certificate when
//! asked, restartable, and stopped (then deleted) when dropped, also when the test panics.
//!
//! `fairq-scale-tests` has a server like it for its worker processes in network namespaces;
//! this crate cannot use it (that crate depends on this one through `fairq`), and this one
//! adds what the adapter's tests need: TLS, restarts, a fixed port range.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU16, Ordering};

const PORTS: std::ops::Range<u16> = 55400..55500;

/// A CA, a server certificate it signed for `localhost` and `127.0.0.1`, and a client
/// certificate it signed for the user `postgres` (`cert` authentication compares the common
/// name with the user), in PEM.
pub struct TestCerts {
    pub ca_pem: String,
    pub server_pem: String,
    pub server_key_pem: String,
    pub client_pem: String,
    pub client_key_pem: String,
}

impl TestCerts {
    /// A fresh CA (named `name`) and a server certificate for `names`.
    pub fn generate(name: &str, names: &[&str]) -> TestCerts {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
        let ca_key = KeyPair::generate().expect("a CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, name);
        let ca_cert = ca.self_signed(&ca_key).expect("the CA certificate");
        let key = KeyPair::generate().expect("a server key");
        let mut server =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .expect("server params");
        server.distinguished_name.push(
            DnType::CommonName,
            names.first().copied().unwrap_or("server"),
        );
        let server_cert = server
            .signed_by(&key, &ca_cert, &ca_key)
            .expect("the server certificate");
        let client_key = KeyPair::generate().expect("a client key");
        let mut client = CertificateParams::new(Vec::<String>::new()).expect("client params");
        client
            .distinguished_name
            .push(DnType::CommonName, "postgres");
        let client_cert = client
            .signed_by(&client_key, &ca_cert, &ca_key)
            .expect("the client certificate");
        TestCerts {
            ca_pem: ca_cert.pem(),
            server_pem: server_cert.pem(),
            server_key_pem: key.serialize_pem(),
            client_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
        }
    }
}

/// The folder of the newest installed PostgreSQL's programs, or `None`.
pub fn bin_dir() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("pg_ctl").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// A private server; see the module docs.
pub struct PrivatePg {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    uid: u32,
    gid: u32,
    options: String,
    running: bool,
}

fn postgres_ids() -> (u32, u32) {
    let id = |flag: &str| -> u32 {
        let out = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .expect("run id");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("the postgres user exists")
    };
    (id("-u"), id("-g"))
}

impl PrivatePg {
    /// Starts a server with TLS on (when `certs` is given) or off. `None` (after saying why)
    /// when PostgreSQL's programs are not installed and services are not required.
    pub fn start(certs: Option<&TestCerts>) -> Option<PrivatePg> {
        Self::start_with(certs, false)
    }

    /// Like [`start`](Self::start); with `require_client_cert`, TCP logins need TLS and a
    /// client certificate that the test CA signed, naming the user (`hostssl ... cert` in
    /// `pg_hba.conf`, the CA as `ssl_ca_file`). The Unix socket in [`dir`](Self::dir) stays
    /// open to `postgres` without a password, for looking at the server.
    pub fn start_with(certs: Option<&TestCerts>, require_client_cert: bool) -> Option<PrivatePg> {
        let Some(bin) = bin_dir() else {
            if std::env::var("FAIRQ_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
                panic!("initdb/pg_ctl not found under /usr/lib/postgresql/*/bin");
            }
            eprintln!("skipping: no PostgreSQL server programs under /usr/lib/postgresql");
            return None;
        };
        let (uid, gid) = postgres_ids();
        static SEQ: AtomicU16 = AtomicU16::new(0);
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("fairq-pg-private-{}-{seq}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("make the server folder");
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).expect("chown the folder");
        let mut server = PrivatePg {
            bin,
            dir,
            port: 0,
            uid,
            gid,
            options: String::new(),
            running: false,
        };
        server.as_postgres(
            Command::new(server.bin.join("initdb"))
                .arg("-D")
                .arg(server.data())
                .args(["-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"])
                .arg("--locale=C"),
            "initdb",
        );
        let sock = server.dir.display().to_string();
        let mut options = format!(
            "-c listen_addresses=127.0.0.1 -c unix_socket_directories={sock} -c fsync=off \
             -c synchronous_commit=off -c full_page_writes=off -c max_connections=100"
        );
        if let Some(certs) = certs {
            let write = |name: &str, text: &str| {
                let path = server.dir.join(name);
                std::fs::write(&path, text).expect("write a certificate file");
                std::os::unix::fs::chown(&path, Some(uid), Some(gid)).expect("chown");
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                    .expect("chmod");
                path
            };
            let cert = write("server.crt", &certs.server_pem);
            let key = write("server.key", &certs.server_key_pem);
            options.push_str(&format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                cert.display(),
                key.display()
            ));
            if require_client_cert {
                let ca = write("client-ca.crt", &certs.ca_pem);
                options.push_str(&format!(" -c ssl_ca_file={}", ca.display()));
                let hba = server.data().join("pg_hba.conf");
                std::fs::write(
                    &hba,
                    "local all all trust\nhostssl all all 127.0.0.1/32 cert\n",
                )
                .expect("write pg_hba.conf");
                std::os::unix::fs::chown(&hba, Some(uid), Some(gid)).expect("chown");
            }
        } else {
            options.push_str(" -c ssl=off");
        }
        server.options = options;
        // Ports of the range are tried from a place that differs between test processes.
        let first = (std::process::id() as u16)
            .wrapping_mul(7)
            .wrapping_add(seq * 13);
        for i in 0..PORTS.len() as u16 {
            let port = PORTS.start + (first.wrapping_add(i) % PORTS.len() as u16);
            if TcpListener::bind(("127.0.0.1", port)).is_err() {
                continue;
            }
            server.port = port;
            if server.try_start() {
                return Some(server);
            }
        }
        panic!(
            "no private PostgreSQL could start on a port in {PORTS:?}: see {}",
            server.log().display()
        );
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    fn as_postgres(&self, command: &mut Command, what: &str) -> bool {
        let out = command
            .uid(self.uid)
            .gid(self.gid)
            .current_dir(&self.dir)
            .env("HOME", &self.dir)
            .output()
            .unwrap_or_else(|e| panic!("run {what}: {e}"));
        if !out.status.success() && what == "initdb" {
            panic!(
                "initdb failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        out.status.success()
    }

    fn try_start(&mut self) -> bool {
        let options = format!("-p {} {}", self.port, self.options);
        let ok = self.as_postgres(
            Command::new(self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(self.data())
                .arg("-l")
                .arg(self.log())
                .args(["-w", "-t", "120", "-o", &options, "start"]),
            "pg_ctl start",
        );
        self.running = ok;
        ok
    }

    /// Stops the server (fast shutdown: sessions are ended, nothing waits for them).
    pub fn stop(&mut self) {
        if self.running {
            self.as_postgres(
                Command::new(self.bin.join("pg_ctl"))
                    .arg("-D")
                    .arg(self.data())
                    .args(["-w", "-t", "120", "-m", "fast", "stop"]),
                "pg_ctl stop",
            );
            self.running = false;
        }
    }

    /// Starts the stopped server again on the same port.
    pub fn start_again(&mut self) {
        assert!(
            self.try_start(),
            "the private PostgreSQL did not start again: see {}",
            self.log().display()
        );
    }

    /// Stops and starts the server.
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A connection string through the server's Unix socket (trusted in every setup).
    pub fn socket_conn(&self) -> String {
        format!(
            "host={} port={} user=postgres dbname=postgres",
            self.dir.display(),
            self.port
        )
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres` followed by `query` (`?a=b&...` or empty).
    pub fn url(&self, query: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres{query}",
            self.port
        )
    }

    /// A file in the server's folder with `text` (for root certificates of a test).
    pub fn write_file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).expect("write a file");
        path
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        if self.running {
            // Immediate: a test that failed may leave sessions that a fast shutdown waits on.
            self.as_postgres(
                Command::new(self.bin.join("pg_ctl"))
                    .arg("-D")
                    .arg(self.data())
                    .args(["-w", "-t", "60", "-m", "immediate", "stop"]),
                "pg_ctl stop",
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
