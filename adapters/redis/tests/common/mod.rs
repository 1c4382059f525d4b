//! Shared test plumbing: where the server is, whether it must be there, fresh key prefixes.
#![allow(dead_code)]

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
    std::env::var("FAIRQ_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
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
                "Redis at {} is unreachable and FAIRQ_REQUIRE_SERVICES=1",
                url()
            );
        }
        eprintln!("skipped: Redis at {} is unreachable", url());
    }
    reachable
}

/// A key prefix no other test uses.
pub fn prefix() -> String {
    format!("fairq-test-{:016x}", random_u64())
}

/// Options for a fresh deployment on `clock`.
pub fn options(clock: ManualClock) -> RedisOptions {
    RedisOptions::new().prefix(prefix()).clock(clock)
}

/// A store on a fresh prefix.
pub async fn store(clock: ManualClock) -> RedisBackend {
    RedisBackend::connect(&url(), options(clock))
        .await
        .expect("connect to Redis")
}

/// Makes stores on fresh prefixes and deletes their keys afterwards.
pub struct RedisHarness;

impl Harness for RedisHarness {
    type Backend = RedisBackend;

    async fn create(&self, clock: ManualClock) -> RedisBackend {
        store(clock).await
    }

    async fn cleanup(&self, backend: RedisBackend) {
        backend.destroy().await.expect("delete the test's keys");
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
