//! TLS (`rediss://`) against a private `redis-server` started with `--tls-port` and a
//! certificate made for the test by a test certificate authority.

mod common;

use std::time::Duration;

use common::certs::Authority;
use common::server::{self, PrivateRedis};
use common::tls_error;
use fairq_redis::{ClientCertificate, RedisBackend, RedisOptions};
use fairq_worker::{Backend, JobStatus, ManualClock, NewJob};

/// Starts a TLS-only server whose certificate `ca` signed; with `require_client_cert`,
/// clients must show a certificate `ca` signed (`--tls-auth-clients yes`). Its folder holds
/// `ca.crt`, and a client certificate `client.crt` with its key `client.key`.
fn tls_server(ca: &Authority, require_client_cert: bool) -> PrivateRedis {
    PrivateRedis::start_prepared(
        &[
            "--tls-cert-file",
            "server.crt",
            "--tls-key-file",
            "server.key",
            "--tls-ca-cert-file",
            "ca.crt",
            "--tls-auth-clients",
            if require_client_cert { "yes" } else { "no" },
        ],
        true,
        |dir| ca.write_server_files(dir),
    )
}

/// The blocking wait runs on connections of its own; they must speak TLS (and show the
/// client certificate) too. A waiter whose connection failed would sleep instead of
/// blocking in BLPOP, so the server listing a BLPOP client proves the waiter's connection is
/// up; an enqueue then wakes it. Returns the id of the job enqueued (completed by then).
async fn wait_is_woken(store: &RedisBackend, queue: &str) -> fairq_worker::JobId {
    let waiter = store.clone();
    let waited = queue.to_string();
    let wait = tokio::spawn(async move {
        waiter
            .wait_for_jobs(&waited, Duration::from_secs(120))
            .await;
    });
    let mut conn = store.connection();
    assert!(
        common::someone_blocks_in_blpop(&mut conn).await,
        "no waiter ever blocked in BLPOP over TLS"
    );
    let c = store
        .enqueue(NewJob::new(queue, "work", b"c".to_vec()))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .expect("the enqueue woke the waiter")
        .unwrap();
    let claimed = store
        .claim(queue, 1, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(claimed[0].claim.id, c);
    store.complete(claimed[0].claim).await.unwrap();
    c
}

#[test]
fn jobs_are_enqueued_claimed_and_settled_over_tls() {
    if !server::installed() {
        return;
    }
    let ca = Authority::new("fairq test CA");
    let redis = tls_server(&ca, false);
    common::runtime().block_on(async {
        let clock = ManualClock::new(1_000);
        let url = format!("rediss://127.0.0.1:{}/", redis.port);
        let options = common::options(clock.clone()).root_certificate(ca.pem.clone());
        let store = RedisBackend::connect(&url, options.clone())
            .await
            .expect("connect over TLS with the test CA");

        common::round_trip(&store, "tls").await;

        let c = wait_is_woken(&store, "tls").await;

        // The same root named by file in the URL instead of the options.
        let by_file = format!(
            "rediss://127.0.0.1:{}/?cacert={}",
            redis.port,
            redis.file("ca.crt").display()
        );
        let other = RedisBackend::connect(&by_file, options.clone().without_root())
            .await
            .expect("connect with ?cacert=");
        assert_eq!(
            other.get(c).await.unwrap().unwrap().status(),
            JobStatus::Succeeded
        );
        store.destroy().await.unwrap();
    });
}

#[test]
fn a_certificate_from_another_authority_is_a_typed_tls_error() {
    if !server::installed() {
        return;
    }
    let ca = Authority::new("fairq test CA");
    let stranger = Authority::new("some other CA");
    let redis = tls_server(&ca, false);
    common::runtime().block_on(async {
        let url = format!("rediss://127.0.0.1:{}/", redis.port);
        let options = RedisOptions::new()
            .prefix(common::prefix())
            .connect_timeout(Duration::from_secs(5));

        let err = RedisBackend::connect(&url, options.clone().root_certificate(stranger.pem))
            .await
            .unwrap_err();
        let tls = tls_error(&err).unwrap_or_else(|| panic!("not a TLS error: {err:?}"));
        let text = tls.to_string();
        let expected = format!(
            "TLS handshake with Redis at 127.0.0.1:{} failed",
            redis.port
        );
        assert!(text.contains(&expected), "{text}");
        assert!(text.contains("UnknownIssuer"), "{text}");
        assert!(
            !err.is_transient(),
            "a refused certificate is not worth retrying: {err}"
        );

        // The default roots (the Mozilla set) do not know the test CA either.
        let err = RedisBackend::connect(&url, options.clone())
            .await
            .unwrap_err();
        assert!(tls_error(&err).is_some(), "not a TLS error: {err:?}");

        // `#insecure` (the redis crate's) skips the certificate check.
        let insecure = format!("rediss://127.0.0.1:{}/#insecure", redis.port);
        let store = RedisBackend::connect(&insecure, options)
            .await
            .expect("#insecure accepts any certificate");
        let id = store
            .enqueue(NewJob::new("tls", "work", b"x".to_vec()))
            .await
            .unwrap();
        assert!(store.get(id).await.unwrap().is_some());
        store.destroy().await.unwrap();
    });
}

#[test]
fn a_server_that_requires_client_certificates_gets_one_or_refuses() {
    if !server::installed() {
        return;
    }
    let ca = Authority::new("fairq test CA");
    let redis = tls_server(&ca, true);
    let key_pem = std::fs::read_to_string(redis.file("client.key")).unwrap();
    common::runtime().block_on(async {
        let clock = ManualClock::new(1_000);
        // The certificate and key by file, as URL parameters (redis-cli's names).
        let url = format!(
            "rediss://127.0.0.1:{}/?cacert={}&cert={}&key={}",
            redis.port,
            redis.file("ca.crt").display(),
            redis.file("client.crt").display(),
            redis.file("client.key").display(),
        );
        let store = RedisBackend::connect(&url, common::options(clock.clone()))
            .await
            .expect("connect with a client certificate");
        common::round_trip(&store, "mtls").await;
        let c = wait_is_woken(&store, "mtls").await;

        // The same identity given as options.
        let options = common::options(clock.clone())
            .prefix(store.keys().prefix())
            .root_certificate(ca.pem.clone())
            .client_certificate(ClientCertificate::new(
                std::fs::read(redis.file("client.crt")).unwrap(),
                key_pem.clone(),
            ));
        let plain_url = format!("rediss://127.0.0.1:{}/", redis.port);
        let other = RedisBackend::connect(&plain_url, options.clone())
            .await
            .expect("connect with the client certificate given as options");
        assert_eq!(
            other.get(c).await.unwrap().unwrap().status(),
            JobStatus::Succeeded
        );
        assert!(!format!("{options:?}").contains(key_line(&key_pem)));

        // Without a certificate: refused, typed, not worth retrying, and no key in sight.
        let mut without = options.clone();
        without.client_certificate = None;
        let err = RedisBackend::connect(&plain_url, without)
            .await
            .unwrap_err();
        let tls = tls_error(&err).unwrap_or_else(|| panic!("not a TLS error: {err:?}"));
        let text = tls.to_string();
        assert!(
            text.contains(&format!(
                "TLS handshake with Redis at 127.0.0.1:{} failed",
                redis.port
            )),
            "{text}"
        );
        assert!(text.contains("CertificateRequired"), "{text}");
        assert!(!err.is_transient(), "{err}");

        // A certificate of another authority is refused the same way.
        let stranger = Authority::new("some other CA");
        let (cert, key) = stranger.client_pair("intruder");
        let err = RedisBackend::connect(
            &plain_url,
            options
                .clone()
                .client_certificate(ClientCertificate::new(cert, key.clone())),
        )
        .await
        .unwrap_err();
        assert!(tls_error(&err).is_some(), "not a TLS error: {err:?}");
        let text = format!("{err} {err:?}");
        assert!(!text.contains(key_line(&key)), "{text}");
        assert!(!text.contains(key_line(&key_pem)), "{text}");
        store.destroy().await.unwrap();
    });
}

/// A line of a PEM key's body: what a message must never hold.
fn key_line(pem: &str) -> &str {
    pem.lines().nth(1).expect("a PEM body")
}

trait WithoutRoot {
    fn without_root(self) -> Self;
}

impl WithoutRoot for RedisOptions {
    fn without_root(mut self) -> Self {
        self.root_certificate = None;
        self
    }
}
