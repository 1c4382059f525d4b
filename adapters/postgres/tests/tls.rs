//! TLS against private servers: one with `ssl=on` and a certificate signed by a CA made for
//! the test, one with `ssl=off`. Each `sslmode` is checked by what the server reports in
//! `pg_stat_ssl` and by the typed error of a connection it must refuse.

mod common;

use std::time::Duration;

use common::server::{PrivatePg, TestCerts};
use fairq_postgres::{PgBackend, PgError, PgOptions, SslMode};
use fairq_worker::{Backend, NewJob};

const LEASE: Duration = Duration::from_secs(30);

/// A connection to the private server through its Unix socket, for looking at its sessions.
async fn admin(server: &PrivatePg) -> tokio_postgres::Client {
    let (client, connection) =
        tokio_postgres::connect(&server.socket_conn(), tokio_postgres::NoTls)
            .await
            .expect("admin connection");
    tokio::spawn(connection);
    client
}

/// `(ssl, query)` of every session of application `app`.
async fn sessions(admin: &tokio_postgres::Client, app: &str) -> Vec<(bool, String)> {
    admin
        .query(
            "SELECT s.ssl, coalesce(a.query, '') FROM pg_stat_activity a \
             JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = $1",
            &[&app],
        )
        .await
        .expect("read pg_stat_ssl")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

async fn connect(url: &str, options: PgOptions) -> Result<PgBackend, PgError> {
    PgBackend::connect(url, options.migrate(true).pool_size(2)).await
}

async fn succeeded(store: &PgBackend) -> u64 {
    let stats = store.stats().await.unwrap();
    stats
        .iter()
        .find(|s| s.queue == "q")
        .map_or(0, |s| s.counts.succeeded)
}

async fn wait_listening(store: &PgBackend) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !store.is_listening() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the listener never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Once the store listens, an enqueue's notification (received on the LISTEN connection)
/// ends a 600 s wait: nothing else ends it this early.
async fn notification_wakes(store: &PgBackend) {
    wait_listening(store).await;
    let wait = store.wait_for_jobs("mail", Duration::from_secs(600));
    tokio::pin!(wait);
    assert!(futures::poll!(wait.as_mut()).is_pending());
    store
        .enqueue(NewJob::new("mail", "k", vec![]))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .expect("the enqueue's notification woke the waiter");
}

/// Enqueues, claims and completes one job.
async fn round_trip(store: &PgBackend) {
    let id = store
        .enqueue(NewJob::new("q", "k", vec![1]).key("t"))
        .await
        .unwrap();
    let claimed = store.claim("q", 10, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].claim.id, id);
    store.complete(claimed[0].claim).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmodes_against_a_server_with_tls() {
    let certs = TestCerts::generate("fairq test CA", &["localhost", "127.0.0.1"]);
    let Some(server) = PrivatePg::start(Some(&certs)) else {
        return;
    };
    let admin = admin(&server).await;
    let ca = server.write_file("ca.pem", &certs.ca_pem);
    let other_ca = server.write_file(
        "other-ca.pem",
        &TestCerts::generate("another CA", &["localhost"]).ca_pem,
    );

    // require: jobs go through end to end, and every session of the store, the LISTEN one
    // included, is encrypted.
    let store = connect(
        &server.url("?sslmode=require&application_name=fq_require"),
        PgOptions::default().schema("tls_require"),
    )
    .await
    .expect("sslmode=require connects to a TLS server");
    round_trip(&store).await;
    assert_eq!(succeeded(&store).await, 1);
    notification_wakes(&store).await;
    let seen = sessions(&admin, "fq_require").await;
    assert!(
        seen.iter().any(|(_, q)| q.starts_with("LISTEN")),
        "the LISTEN session: {seen:?}"
    );
    assert!(
        seen.len() >= 2 && seen.iter().all(|(ssl, _)| *ssl),
        "every session is TLS: {seen:?}"
    );
    drop(store);

    // disable: plain, although the server offers TLS.
    let store = connect(
        &server.url("?sslmode=disable&application_name=fq_disable"),
        PgOptions::default().schema("tls_require"),
    )
    .await
    .unwrap();
    store.stats().await.unwrap();
    let seen = sessions(&admin, "fq_disable").await;
    assert!(
        !seen.is_empty() && seen.iter().all(|(ssl, _)| !*ssl),
        "{seen:?}"
    );
    drop(store);

    // verify-full with the CA that signed the certificate: by URL, and by options.
    let url = server.url(&format!(
        "?sslmode=verify-full&sslrootcert={}&application_name=fq_full",
        ca.display()
    ));
    let store = connect(&url, PgOptions::default().schema("tls_require"))
        .await
        .expect("verify-full with the right root");
    assert_eq!(
        succeeded(&store).await,
        1,
        "the same store, over verified TLS"
    );
    assert!(sessions(&admin, "fq_full")
        .await
        .iter()
        .all(|(ssl, _)| *ssl));
    drop(store);
    let store = connect(
        &server.url(""),
        PgOptions::default()
            .schema("tls_require")
            .ssl_mode(SslMode::VerifyFull)
            .ssl_root_cert_pem(certs.ca_pem.clone()),
    )
    .await
    .expect("verify-full with the right root given as options");
    drop(store);

    // verify-full with another CA: refused, with a typed error that says why.
    let url = server.url(&format!(
        "?sslmode=verify-full&sslrootcert={}",
        other_ca.display()
    ));
    let err = connect(&url, PgOptions::default().schema("tls_require"))
        .await
        .unwrap_err();
    assert!(matches!(err, PgError::TlsHandshake(_)), "{err:?}");
    assert!(err.to_string().contains("certificate"), "{err}");
    // A refused certificate is a configuration error, not a server that is down.
    assert!(!fairq_worker::BackendError::from(err).is_transient());
    // require with a root given checks the chain as libpq does.
    let url = server.url(&format!(
        "?sslmode=require&sslrootcert={}",
        other_ca.display()
    ));
    let err = connect(&url, PgOptions::default().schema("tls_require"))
        .await
        .unwrap_err();
    assert!(matches!(err, PgError::TlsHandshake(_)), "{err:?}");

    // A name the certificate does not hold: verify-full refuses, verify-ca accepts.
    let misnamed = |mode: &str| {
        format!(
            "postgres://postgres@db.wrong.invalid:{}/postgres?hostaddr=127.0.0.1&sslmode={mode}&sslrootcert={}",
            server.port(),
            ca.display()
        )
    };
    let err = connect(
        &misnamed("verify-full"),
        PgOptions::default().schema("tls_require"),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, PgError::TlsHandshake(_)), "{err:?}");
    assert!(err.to_string().contains("not valid for name"), "{err}");
    let store = connect(
        &misnamed("verify-ca"),
        PgOptions::default().schema("tls_require"),
    )
    .await
    .expect("verify-ca does not check the name");
    drop(store);

    // A root file that does not exist is a settings error before any connection.
    let err = connect(
        &server.url("?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem"),
        PgOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, PgError::Tls(_)), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmodes_against_a_server_without_tls() {
    let Some(server) = PrivatePg::start(None) else {
        return;
    };
    let admin = admin(&server).await;
    for mode in ["require", "verify-ca", "verify-full"] {
        let err = connect(
            &server.url(&format!("?sslmode={mode}")),
            PgOptions::default().schema("plain"),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, PgError::TlsUnsupported), "{mode}: {err:?}");
        assert!(err.to_string().contains("does not support TLS"), "{err}");
    }
    // prefer (the default) falls back to plain.
    let store = connect(
        &server.url("?application_name=fq_prefer"),
        PgOptions::default().schema("plain"),
    )
    .await
    .expect("prefer connects without TLS");
    store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    let seen = sessions(&admin, "fq_prefer").await;
    assert!(
        !seen.is_empty() && seen.iter().all(|(ssl, _)| !*ssl),
        "{seen:?}"
    );
}

/// A server whose `pg_hba.conf` says `hostssl ... cert`: the client certificate (by URL and
/// by options) is shown on every connection, the pool's and the LISTEN one; without one, or
/// with one of another authority, the login is refused with a typed error that never holds
/// the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_against_a_server_that_requires_them() {
    let certs = TestCerts::generate("fairq test CA", &["localhost", "127.0.0.1"]);
    let Some(server) = PrivatePg::start_with(Some(&certs), true) else {
        return;
    };
    let admin = admin(&server).await;
    let ca = server.write_file("ca.pem", &certs.ca_pem);
    let cert = server.write_file("client.crt", &certs.client_pem);
    let key = server.write_file("client.key", &certs.client_key_pem);
    let key_line = certs.client_key_pem.lines().nth(1).unwrap().to_string();
    let verified = format!("?sslmode=verify-full&sslrootcert={}", ca.display());

    let url = server.url(&format!(
        "{verified}&sslcert={}&sslkey={}&application_name=fq_mtls",
        cert.display(),
        key.display()
    ));
    let store = connect(&url, PgOptions::default().schema("mtls"))
        .await
        .expect("a client certificate the server trusts");
    round_trip(&store).await;
    notification_wakes(&store).await;
    // Every session, the LISTEN one included, is TLS and showed the certificate.
    let seen: Vec<(bool, String, String)> = admin
        .query(
            "SELECT s.ssl, coalesce(s.client_dn, ''), coalesce(a.query, '') \
             FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
             WHERE a.application_name = 'fq_mtls'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert!(
        seen.iter().any(|(_, _, q)| q.starts_with("LISTEN")),
        "the LISTEN session: {seen:?}"
    );
    assert!(
        seen.len() >= 2 && seen.iter().all(|(ssl, dn, _)| *ssl && dn == "/CN=postgres"),
        "every session shows the client certificate: {seen:?}"
    );
    drop(store);

    // The same identity as options (PEM text), the URL naming only the roots.
    let store = connect(
        &server.url(&verified),
        PgOptions::default()
            .schema("mtls")
            .ssl_client_cert_pem(certs.client_pem.clone(), certs.client_key_pem.clone()),
    )
    .await
    .expect("the client certificate given as options");
    assert_eq!(succeeded(&store).await, 1, "the same store");
    drop(store);

    // No certificate: the server refuses the login, and says why.
    let err = connect(&server.url(&verified), PgOptions::default().schema("mtls"))
        .await
        .unwrap_err();
    assert!(matches!(err, PgError::Auth(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("requires a valid client certificate"),
        "{err}"
    );
    assert!(!fairq_worker::BackendError::from(err).is_transient());

    // A certificate of another authority: the server ends the handshake.
    let stranger = TestCerts::generate("another CA", &["localhost"]);
    let err = connect(
        &server.url(&verified),
        PgOptions::default()
            .schema("mtls")
            .ssl_client_cert_pem(stranger.client_pem.clone(), stranger.client_key_pem.clone()),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, PgError::TlsHandshake(_)), "{err:?}");
    let text = format!("{err} {err:?}");
    assert!(
        !text.contains(stranger.client_key_pem.lines().nth(1).unwrap()),
        "{text}"
    );

    // Only one half of the pair, or a key that is not one: settings errors naming the file,
    // never the key.
    let err = connect(
        &server.url(&format!("{verified}&sslcert={}", cert.display())),
        PgOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, PgError::Tls(_)), "{err:?}");
    assert!(err.to_string().contains("sslkey"), "{err}");
    let not_a_key = server.write_file(
        "broken.key",
        &certs.client_key_pem.replace("PRIVATE KEY", "NOTHING"),
    );
    let err = connect(
        &server.url(&format!(
            "{verified}&sslcert={}&sslkey={}",
            cert.display(),
            not_a_key.display()
        )),
        PgOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, PgError::Tls(_)), "{err:?}");
    let text = format!("{err} {err:?}");
    assert!(text.contains("broken.key"), "{text}");
    assert!(!text.contains(&key_line), "{text}");
}
