//! Shared test plumbing: where the server is, whether it must be there, fresh key prefixes
//! that are deleted when the test ends (passed or failed).
#![allow(dead_code)]

pub mod certs;
pub mod cluster;
pub mod proxy;
pub mod server;

use std::ops::Deref;
use std::time::Duration;

use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::conformance::Harness;
use fairq_worker::{random_u64, ManualClock};

/// The server under test.
pub fn url() -> String {
    std::env::var("FAIRQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_string())
}

/// True when a missing server must fail the tests instead of skipping them.
pub fn required() -> bool {
    fairq_worker::services::required()
}

/// Whether the server answers `PING`; when it does not, says so and returns false (or panics
/// when services are required).
pub fn available() -> bool {
    let reachable = redis::Client::open(url().as_str())
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
        .is_ok();
    if !reachable {
        if required() {
            panic!(
                "Redis at {} is unreachable and FAIRQ_REQUIRE_SERVICES is set",
                url()
            );
        }
        eprintln!("skipped: Redis at {} is unreachable", url());
    }
    reachable
}

/// A runtime for tests that run outside `#[tokio::test]` (private servers, proxies) with
/// `threads` worker threads.
pub fn runtime_with(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// [`runtime_with`] two threads.
pub fn runtime() -> tokio::runtime::Runtime {
    runtime_with(2)
}

/// A key prefix no other test uses.
pub fn prefix() -> String {
    format!("fairq-test-{:016x}", random_u64())
}

/// Deletes every key of a prefix when dropped, so a failing test cleans up too. It talks to
/// the server on a connection of its own (no async runtime needed in `drop`).
pub struct Guard {
    url: String,
    prefix: String,
}

impl Guard {
    /// A guard for `prefix` on the server under test.
    pub fn new(prefix: impl Into<String>) -> Self {
        Guard {
            url: url(),
            prefix: prefix.into(),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let Ok(mut conn) = redis::Client::open(self.url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        else {
            return;
        };
        let pattern = format!("{}:*", self.prefix);
        let mut cursor = 0u64;
        loop {
            let Ok((next, keys)): Result<(u64, Vec<String>), _> = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1_000)
                .query(&mut conn)
            else {
                return;
            };
            for key in keys {
                let _: Result<u64, _> = redis::cmd("UNLINK").arg(key).query(&mut conn);
            }
            if next == 0 {
                return;
            }
            cursor = next;
        }
    }
}

/// Options for a fresh deployment on `clock`.
pub fn options(clock: ManualClock) -> RedisOptions {
    RedisOptions::new().prefix(prefix()).clock(clock)
}

/// A store on a fresh prefix, deleted when the value is dropped.
pub struct TestStore {
    store: RedisBackend,
    _guard: Guard,
}

impl Deref for TestStore {
    type Target = RedisBackend;

    fn deref(&self) -> &RedisBackend {
        &self.store
    }
}

/// Connects with `options`; the prefix is deleted when the returned store is dropped.
pub async fn connect(options: RedisOptions) -> TestStore {
    let guard = Guard::new(options.prefix.clone());
    let store = RedisBackend::connect(&url(), options)
        .await
        .expect("connect to Redis");
    TestStore {
        store,
        _guard: guard,
    }
}

/// A store on a fresh prefix, deleted when dropped.
pub async fn store(clock: ManualClock) -> TestStore {
    connect(options(clock)).await
}

/// Makes stores on fresh prefixes and deletes their keys afterwards.
pub struct RedisHarness;

impl Harness for RedisHarness {
    type Backend = RedisBackend;

    async fn create(&self, clock: ManualClock) -> RedisBackend {
        RedisBackend::connect(&url(), options(clock))
            .await
            .expect("connect to Redis")
    }

    async fn cleanup(&self, backend: RedisBackend) {
        backend.destroy().await.expect("delete the test's keys");
    }
}

/// Makes stores that do not keep succeeded jobs (`keep_succeeded(false)`) on fresh prefixes
/// and deletes their keys afterwards.
pub struct RedisHarnessNotKeeping;

impl Harness for RedisHarnessNotKeeping {
    type Backend = RedisBackend;

    async fn create(&self, clock: ManualClock) -> RedisBackend {
        RedisBackend::connect(&url(), options(clock).keep_succeeded(false))
            .await
            .expect("connect to Redis")
    }

    async fn cleanup(&self, backend: RedisBackend) {
        backend.destroy().await.expect("delete the test's keys");
    }
}

/// The shared differential test's view of Redis: releases and holds retries; a store is not
/// reopened (a restart of the server is the crash tests' business).
impl fairq_worker::conformance::differential::Differential for RedisHarness {
    fn capabilities(&self) -> fairq_worker::conformance::differential::Capabilities {
        fairq_worker::conformance::differential::Capabilities {
            release: true,
            reopen: false,
            hold_retries: true,
        }
    }
}

/// Returns from the calling test (after saying why) when the server is unreachable.
#[macro_export]
macro_rules! require_redis {
    () => {
        if !common::available() {
            return;
        }
    };
}

/// Makes stores on fresh prefixes of the private cluster shared by the test binary (see
/// [`cluster::shared`]) and deletes their keys afterwards.
pub struct ClusterHarness {
    pub url: String,
}

impl ClusterHarness {
    /// The harness on the shared cluster, or `None` when it cannot run (said why).
    pub fn shared() -> Option<ClusterHarness> {
        cluster::shared().map(|c| ClusterHarness { url: c.url() })
    }
}

impl Harness for ClusterHarness {
    type Backend = RedisBackend;

    async fn create(&self, clock: ManualClock) -> RedisBackend {
        let store = RedisBackend::connect(&self.url, options(clock))
            .await
            .expect("connect to the cluster");
        assert!(store.is_cluster());
        store
    }

    async fn cleanup(&self, backend: RedisBackend) {
        backend.destroy().await.expect("delete the test's keys");
    }
}

impl fairq_worker::conformance::differential::Differential for ClusterHarness {
    fn capabilities(&self) -> fairq_worker::conformance::differential::Capabilities {
        fairq_worker::conformance::differential::Capabilities {
            release: true,
            reopen: false,
            hold_retries: false,
        }
    }
}

/// Whether a client of the server `conn` talks to is blocked in `BLPOP` (a store's wait for
/// jobs), looked for in `CLIENT LIST` up to 2,000 times with a yield between: how a test
/// knows a wait has started, without sleeping for a guessed time.
pub async fn someone_blocks_in_blpop(conn: &mut impl redis::aio::ConnectionLike) -> bool {
    for _ in 0..2_000 {
        let clients: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(conn)
            .await
            .expect("CLIENT LIST");
        if clients.contains("cmd=blpop") {
            return true;
        }
        tokio::task::yield_now().await;
    }
    false
}

/// Enqueues two jobs of two tenants on `queue`, claims both, completes one and fails the
/// other for good, and checks what the store then says of each: the round trip every
/// connection setting must carry.
pub async fn round_trip(store: &RedisBackend, queue: &str) {
    use fairq_worker::{Backend, Failure, JobStatus, NewJob};
    let a = store
        .enqueue(NewJob::new(queue, "work", b"a".to_vec()).key("t1"))
        .await
        .expect("enqueue a");
    let b = store
        .enqueue(NewJob::new(queue, "work", b"b".to_vec()).key("t2"))
        .await
        .expect("enqueue b");
    let claimed = store
        .claim(queue, 2, Duration::from_secs(30))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 2);
    for job in &claimed {
        if job.claim.id == a {
            store.complete(job.claim).await.expect("complete");
        } else {
            assert_eq!(job.claim.id, b);
            store
                .fail(job, Failure::permanent("failed on purpose"))
                .await
                .expect("fail");
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
}

/// The TLS error inside a failed connect, if that is what it is.
pub fn tls_error(err: &fairq_worker::BackendError) -> Option<&fairq_redis::RedisStoreError> {
    match err {
        fairq_worker::BackendError::Store(inner) => inner
            .downcast_ref::<fairq_redis::RedisStoreError>()
            .filter(|e| matches!(e, fairq_redis::RedisStoreError::Tls { .. })),
        _ => None,
    }
}
