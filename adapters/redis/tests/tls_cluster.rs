//! Redis Cluster over TLS: private clusters whose nodes listen on TLS ports only (plain TCP
//! off) and speak TLS on the cluster bus and in replication, with certificates of a test
//! authority. One checks the server (3 masters, 3 replicas), one also asks clients for a
//! certificate (3 masters).

mod common;

use common::certs::Authority;
use common::cluster::{self, LocalCluster};
use common::tls_error;
use fairq_redis::{ClientCertificate, RedisBackend, RedisOptions};
use fairq_worker::{Backend, BackendError, JobStatus, ManualClock, NewJob};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn options() -> RedisOptions {
    common::options(ManualClock::new(1_700_000_000_000))
}

/// The refused connection's TLS error, with what every refusal must say: the node, the
/// reason, and that retrying will not help.
fn refused(err: &BackendError, reason: &str) -> String {
    let tls = tls_error(err).unwrap_or_else(|| panic!("not a TLS error: {err:?}"));
    let text = tls.to_string();
    assert!(
        text.starts_with("TLS handshake with Redis at 127.0.0.1:"),
        "{text}"
    );
    assert!(text.contains(reason), "{text}");
    assert!(
        !err.is_transient(),
        "a refused certificate is not worth retrying: {err}"
    );
    text
}

#[test]
fn a_tls_cluster_trusts_the_root_it_is_given() {
    if !cluster::programs_available() {
        return;
    }
    let ca = Authority::new("fairq cluster CA");
    let cluster = LocalCluster::start_tls(3, 1, &ca, false)
        .unwrap_or_else(|e| panic!("private TLS cluster: {e}"));
    let url = cluster.url();
    assert!(url.starts_with("rediss+cluster://"), "{url}");
    runtime().block_on(async {
        let store = RedisBackend::connect(&url, options().root_certificate(ca.pem.clone()))
            .await
            .expect("connect to the TLS cluster with its root");
        assert!(store.is_cluster());
        // Queues whose keys land on different masters: every master's connection is TLS.
        for i in 0..6 {
            common::round_trip(&store, &format!("tls{i}")).await;
        }
        let mut owners = std::collections::BTreeSet::new();
        for i in 0..6 {
            let key = format!("{}meta", store.keys().queue_base(&format!("tls{i}")));
            owners.insert(cluster.master_of(&key).expect("an owner"));
        }
        assert!(owners.len() >= 2, "6 queues all on {owners:?}");

        // The root by file (`cacert=`), and the cluster discovered from one node given by a
        // plain `rediss://` URL.
        let node = cluster.nodes[0].port;
        let by_file = format!(
            "rediss://127.0.0.1:{node}/?cluster=true&cacert={}",
            cluster.file(node, "ca.crt").display()
        );
        let other = RedisBackend::connect(&by_file, options().prefix(store.keys().prefix()))
            .await
            .expect("discover the TLS cluster with ?cacert=");
        assert!(other.is_cluster());
        let id = other
            .enqueue(NewJob::new("tls0", "work", b"x".to_vec()))
            .await
            .unwrap();
        assert_eq!(
            store.get(id).await.unwrap().unwrap().status(),
            JobStatus::Scheduled
        );
        let stats = other.stats().await.unwrap();
        assert_eq!(stats.len(), 6, "{stats:?}");
        store.destroy().await.unwrap();

        // A root of another authority, and the default roots: refused, typed.
        let stranger = Authority::new("some other CA");
        let err = RedisBackend::connect(&url, options().root_certificate(stranger.pem))
            .await
            .unwrap_err();
        refused(&err, "UnknownIssuer");
        let err = RedisBackend::connect(&url, options()).await.unwrap_err();
        refused(&err, "UnknownIssuer");
        // `#insecure` checks nothing, also when a root is given.
        let insecure = RedisBackend::connect(
            &format!("{url}#insecure"),
            options().root_certificate(Authority::new("a third CA").pem),
        )
        .await
        .expect("#insecure accepts any certificate");
        assert!(insecure.is_cluster());
        insecure.destroy().await.unwrap();
        // A plain URL to a TLS-only cluster: no certificate problem, just nobody there.
        let plain = url.replacen("rediss+cluster", "redis+cluster", 1);
        let err = RedisBackend::connect(
            &plain,
            options().connect_timeout(std::time::Duration::from_secs(2)),
        )
        .await
        .unwrap_err();
        assert!(tls_error(&err).is_none(), "{err:?}");
    });
}

#[test]
fn a_cluster_that_requires_client_certificates_gets_one_or_refuses() {
    if !cluster::programs_available() {
        return;
    }
    let ca = Authority::new("fairq cluster CA");
    let cluster = LocalCluster::start_tls(3, 0, &ca, true)
        .unwrap_or_else(|e| panic!("private mutual-TLS cluster: {e}"));
    let node = cluster.nodes[0].port;
    let file = |name: &str| cluster.file(node, name).display().to_string();
    let key_pem = std::fs::read_to_string(file("client.key")).unwrap();
    runtime().block_on(async {
        let url = format!(
            "{}?cacert={}&cert={}&key={}",
            cluster.url(),
            file("ca.crt"),
            file("client.crt"),
            file("client.key")
        );
        let store = RedisBackend::connect(&url, options())
            .await
            .expect("connect with a client certificate");
        assert!(store.is_cluster());
        for i in 0..6 {
            common::round_trip(&store, &format!("mtls{i}")).await;
        }
        // Blocking waits open cluster connections of their own: they show the certificate
        // too. A waiter without a connection sleeps out its timeout instead of blocking in
        // BLPOP, so the node of the queue's signal key listing a BLPOP client proves the
        // waiter's connection is up; then only the enqueue's signal ends a 600 s wait early.
        let waiter = store.clone();
        let wait = tokio::spawn(async move {
            waiter
                .wait_for_jobs("mtls0", std::time::Duration::from_secs(600))
                .await;
        });
        let signal = format!("{}signal", store.keys().queue_base("mtls0"));
        let owner = cluster.master_of(&signal).expect("the signal key's master");
        let blocked = (0..2_000).any(|_| {
            cluster
                .cli(owner, &["client", "list"])
                .contains("cmd=blpop")
        });
        assert!(blocked, "no waiter ever blocked in BLPOP on {owner}");
        store
            .enqueue(NewJob::new("mtls0", "work", vec![]))
            .await
            .unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(60), wait)
            .await
            .expect("the enqueue woke the waiter")
            .unwrap();

        // The identity as options, the root by options too.
        let with_options = options()
            .prefix(store.keys().prefix())
            .root_certificate(ca.pem.clone())
            .client_certificate(ClientCertificate::new(
                std::fs::read(file("client.crt")).unwrap(),
                key_pem.clone(),
            ));
        let other = RedisBackend::connect(&cluster.url(), with_options.clone())
            .await
            .expect("connect with the client certificate given as options");
        assert!(!other.stats().await.unwrap().is_empty());

        // Without a certificate: refused, typed, and no key in the message.
        let mut without = with_options.clone();
        without.client_certificate = None;
        let err = RedisBackend::connect(&cluster.url(), without)
            .await
            .unwrap_err();
        let text = refused(&err, "CertificateRequired");
        let key_line = key_pem.lines().nth(1).unwrap();
        assert!(!text.contains(key_line) && !format!("{err:?}").contains(key_line));
        store.destroy().await.unwrap();
    });
}
