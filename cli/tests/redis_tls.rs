//! `--store rediss://...` end to end: the CLI (and under it `fairq::connect`) against a
//! private `redis-server` that speaks only TLS, with a certificate made for the test, on
//! a free port of 56450-56499.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::fairq;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

/// A port of 56450-56499 that nothing listens on, never the same twice in this process (the
/// tests run side by side).
fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    (0..50)
        .map(|_| 56450 + NEXT.fetch_add(1, Ordering::Relaxed) % 50)
        .find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        .expect("a free port in 56450-56499")
}

/// Kills the server when the test ends, passed or failed.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn authority(name: &str) -> (rcgen::Certificate, KeyPair) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().unwrap();
    (params.self_signed(&key).unwrap(), key)
}

/// Writes the certificates into `dir` (`ca.crt`, `other.crt` of another CA, and a client
/// certificate `client.crt` with `client.key`) and starts a TLS-only server there, which
/// with `require_client_cert` refuses clients without a certificate; waits for its "Ready
/// to accept connections" line. None when redis-server is not installed (a skip, unless
/// services are required).
fn start(dir: &Path, port: u16, require_client_cert: bool) -> Option<Server> {
    let (ca, ca_key) = authority("fairq cli test CA");
    let params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    std::fs::write(dir.join("ca.crt"), ca.pem()).unwrap();
    std::fs::write(dir.join("server.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
    let (other, _) = authority("another CA");
    std::fs::write(dir.join("other.crt"), other.pem()).unwrap();
    let client_key = KeyPair::generate().unwrap();
    let client = CertificateParams::new(Vec::<String>::new())
        .unwrap()
        .signed_by(&client_key, &ca, &ca_key)
        .unwrap();
    std::fs::write(dir.join("client.crt"), client.pem()).unwrap();
    std::fs::write(dir.join("client.key"), client_key.serialize_pem()).unwrap();

    let spawned = Command::new("redis-server")
        .current_dir(dir)
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args([
            "--tls-cert-file",
            "server.crt",
            "--tls-key-file",
            "server.key",
        ])
        .args(["--tls-ca-cert-file", "ca.crt", "--tls-auth-clients"])
        .arg(if require_client_cert { "yes" } else { "no" })
        .args(["--save", "", "--appendonly", "no", "--logfile", ""])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            if fairq_worker::services::required() {
                panic!("cannot start redis-server ({e}) and FAIRQ_REQUIRE_SERVICES is set");
            }
            eprintln!("skipped: cannot start redis-server: {e}");
            return None;
        }
    };
    let stdout = child.stdout.take().unwrap();
    let server = Server(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains("Ready to accept connections") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("redis-server did not become ready");
    Some(server)
}

#[test]
fn the_cli_works_over_tls_and_names_a_refused_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let Some(_server) = start(dir.path(), port, false) else {
        return;
    };
    let ca = dir.path().join("ca.crt");
    let store = format!(
        "rediss://127.0.0.1:{port}/?cacert={}&prefix=cli-tls",
        ca.display()
    );
    fairq(dir.path())
        .args([
            "--store", &store, "enqueue", "-q", "mail", "-k", "welcome", "-p", "1",
        ])
        .assert()
        .success();
    let out = fairq(dir.path())
        .args(["--store", &store, "--json", "stats"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The private server runs without the append-only file (issue 13.13): stats says what
    // a restart would lose, on stderr, so the JSON on stdout stays clean.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: Redis: the server persists nothing")
            && stderr.contains("appendonly yes"),
        "{stderr}"
    );
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(stats.to_string().contains("\"mail\""), "{stats}");

    let wrong = format!(
        "rediss://127.0.0.1:{port}/?cacert={}&prefix=cli-tls",
        dir.path().join("other.crt").display()
    );
    let out = fairq(dir.path())
        .args(["--store", &wrong, "stats"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = format!("TLS handshake with Redis at 127.0.0.1:{port} failed");
    assert!(stderr.contains(&expected), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// `cert=` and `key=` in `--store` reach the connection: a server that requires a client
/// certificate takes the CLI's, and refuses the CLI without one in one line that says why.
#[test]
fn the_cli_shows_a_client_certificate_from_the_store_url() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let Some(_server) = start(dir.path(), port, true) else {
        return;
    };
    let file = |name: &str| dir.path().join(name).display().to_string();
    let base = format!(
        "rediss://127.0.0.1:{port}/?cacert={}&prefix=cli-mtls",
        file("ca.crt")
    );
    let with_cert = format!(
        "{base}&cert={}&key={}",
        file("client.crt"),
        file("client.key")
    );
    fairq(dir.path())
        .args([
            "--store", &with_cert, "enqueue", "-q", "mail", "-k", "welcome",
        ])
        .assert()
        .success();
    let out = fairq(dir.path())
        .args(["--store", &with_cert, "--json", "stats"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"mail\""));

    let out = fairq(dir.path())
        .args(["--store", &base, "stats"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = format!("TLS handshake with Redis at 127.0.0.1:{port} failed");
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(stderr.contains("CertificateRequired"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
