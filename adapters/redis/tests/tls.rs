//! TLS (`rediss://`) against a private `redis-server` started with `--tls-port` and a
//! certificate made for the test by a test certificate authority.

mod common;

use std::time::Duration;

use common::certs::Authority;
use common::server::{self, PrivateRedis};
use fairq_redis::{RedisBackend, RedisOptions, RedisStoreError};
use fairq_worker::{Backend, BackendError, Failure, JobStatus, ManualClock, NewJob};

/// Starts a TLS-only server whose certificate `ca` signed.
fn tls_server(ca: &Authority) -> PrivateRedis {
    PrivateRedis::start_prepared(
        &[
            "--tls-cert-file",
            "server.crt",
            "--tls-key-file",
            "server.key",
            "--tls-ca-cert-file",
            "ca.crt",
            "--tls-auth-clients",
            "no",
        ],
        true,
        |dir| ca.write_server_files(dir),
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The TLS error inside a failed connect, if that is what it is.
fn tls_error(err: &BackendError) -> Option<&RedisStoreError> {
    match err {
        BackendError::Store(inner) => inner
            .downcast_ref::<RedisStoreError>()
            .filter(|e| matches!(e, RedisStoreError::Tls { .. })),
        _ => None,
    }
}

#[test]
fn jobs_are_enqueued_claimed_and_settled_over_tls() {
    if !server::installed() {
        return;
    }
    let ca = Authority::new("fairq test CA");
    let redis = tls_server(&ca);
    runtime().block_on(async {
        let clock = ManualClock::new(1_000);
        let url = format!("rediss://127.0.0.1:{}/", redis.port);
        let options = common::options(clock.clone()).root_certificate(ca.pem.clone());
        let store = RedisBackend::connect(&url, options.clone())
            .await
            .expect("connect over TLS with the test CA");

        let a = store
            .enqueue(NewJob::new("tls", "work", b"a".to_vec()).key("t1"))
            .await
            .unwrap();
        let b = store
            .enqueue(NewJob::new("tls", "work", b"b".to_vec()).key("t2"))
            .await
            .unwrap();
        let claimed = store
            .claim("tls", 2, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(claimed.len(), 2);
        for job in &claimed {
            if job.claim.id == a {
                store.complete(job.claim).await.unwrap();
            } else {
                assert_eq!(job.claim.id, b);
                store
                    .fail(job, Failure::permanent("over TLS"))
                    .await
                    .unwrap();
            }
        }
        assert_eq!(
            store.get(a).await.unwrap().unwrap().status(),
            JobStatus::Succeeded
        );
        assert_eq!(
            store.get(b).await.unwrap().unwrap().status(),
            JobStatus::Dead
        );

        // The blocking wait runs on connections of its own; they must speak TLS too. A
        // waiter whose connection failed would sleep instead of blocking in BLPOP, so the
        // server listing a BLPOP client proves the waiter's connection is up.
        let waiter = store.clone();
        let wait = tokio::spawn(async move {
            waiter.wait_for_jobs("tls", Duration::from_secs(120)).await;
        });
        let mut conn = store.connection();
        let mut blocked = false;
        for _ in 0..2_000 {
            let clients: String = redis::cmd("CLIENT")
                .arg("LIST")
                .query_async(&mut conn)
                .await
                .unwrap();
            if clients.contains("cmd=blpop") {
                blocked = true;
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(blocked, "no waiter ever blocked in BLPOP over TLS");
        let c = store
            .enqueue(NewJob::new("tls", "work", b"c".to_vec()))
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .expect("the enqueue woke the waiter")
            .unwrap();
        let claimed = store
            .claim("tls", 1, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(claimed[0].claim.id, c);
        store.complete(claimed[0].claim).await.unwrap();

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
    let redis = tls_server(&ca);
    runtime().block_on(async {
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

trait WithoutRoot {
    fn without_root(self) -> Self;
}

impl WithoutRoot for RedisOptions {
    fn without_root(mut self) -> Self {
        self.root_certificate = None;
        self
    }
}
