//! A connection that goes silent without closing (its state dropped by a firewall or NAT)
//! is replaced after the first request on it times out; with renewal turned off, every
//! request keeps timing out. The store reaches the test server through a proxy that can
//! freeze the connections it carries (`common::proxy`).

mod common;

use std::time::Duration;

use common::proxy::Proxy;
use fairq_redis::RedisBackend;
use fairq_worker::{Backend, ManualClock, NewJob};
use redis::ConnectionAddr;

/// A proxy in front of the test server, and the URL that reaches the server through it.
fn proxied() -> (Proxy, String) {
    let info = redis::Client::open(common::url().as_str())
        .expect("test server URL")
        .get_connection_info()
        .clone();
    let ConnectionAddr::Tcp(host, port) = info.addr else {
        panic!("the test server must be reached over plain TCP");
    };
    let proxy = Proxy::start(format!("{host}:{port}"));
    let url = format!("redis://127.0.0.1:{}/{}", proxy.port(), info.redis.db);
    (proxy, url)
}

/// A store through the proxy whose calls fail after one timeout (no repeats behind the
/// test's back), holding one job enqueued while the connection worked.
async fn store(url: &str, renew: bool) -> (RedisBackend, common::Guard) {
    let mut options = common::options(ManualClock::new(1_700_000_000_000))
        .response_timeout(Duration::from_millis(300));
    options.retries = 0;
    options.renew_on_timeout = renew;
    let guard = common::Guard::new(options.prefix.clone());
    let store = RedisBackend::connect(url, options)
        .await
        .expect("connect through the proxy");
    store
        .enqueue(NewJob::new("silent", "k", b"1".to_vec()))
        .await
        .expect("enqueue before the freeze");
    assert_eq!(store.connection_renewals(), 0);
    (store, guard)
}

#[test]
fn a_request_that_times_out_renews_a_silent_connection() {
    if !common::available() {
        return;
    }
    let (proxy, url) = proxied();
    common::runtime().block_on(async {
        let (store, _guard) = store(&url, true).await;

        proxy.freeze();
        let opened = proxy.accepted();
        let err = store
            .enqueue(NewJob::new("silent", "k", b"2".to_vec()))
            .await
            .expect_err("the connection is silent");
        assert!(err.is_transient(), "{err}");
        assert_eq!(store.connection_renewals(), 1, "after {err}");
        assert!(proxy.accepted() > opened, "a new connection was opened");

        store
            .enqueue(NewJob::new("silent", "k", b"3".to_vec()))
            .await
            .expect("enqueue on the renewed connection");
        let claimed = store
            .claim("silent", 10, Duration::from_secs(30))
            .await
            .expect("claim on the renewed connection");
        let payloads: Vec<Vec<u8>> = claimed.iter().map(|j| j.payload.clone()).collect();
        // The frozen request never reached the server.
        assert_eq!(payloads, vec![b"1".to_vec(), b"3".to_vec()]);
        assert_eq!(store.connection_renewals(), 1);
    });
}

#[test]
fn without_renewal_a_silent_connection_keeps_timing_out() {
    if !common::available() {
        return;
    }
    let (proxy, url) = proxied();
    common::runtime().block_on(async {
        let (store, _guard) = store(&url, false).await;
        proxy.freeze();
        for i in 2..4 {
            let err = store
                .enqueue(NewJob::new("silent", "k", vec![i]))
                .await
                .expect_err("the connection is silent and kept");
            assert!(err.is_transient(), "{err}");
        }
        assert_eq!(store.connection_renewals(), 0);
    });
}
