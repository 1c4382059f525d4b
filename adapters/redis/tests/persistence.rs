//! Issue 13.13: a Redis without the append-only file loses jobs on a restart; the store tells
//! which persistence a server has, so `connect` and `fairq stats` can warn. Each case runs
//! on a private `redis-server` started with the settings in question.

mod common;

use common::server::{self, PrivateRedis};
use fairq_redis::{Persistence, RedisBackend, RedisOptions};

async fn persistence_of(args: &[&str]) -> Persistence {
    let redis = PrivateRedis::start(args);
    let url = format!("redis://127.0.0.1:{}/", redis.port);
    let store = RedisBackend::connect(&url, RedisOptions::new().prefix(common::prefix()))
        .await
        .expect("connect to the private server");
    store.persistence().await.expect("persistence")
}

#[tokio::test]
async fn the_store_tells_what_a_restart_would_lose() {
    if !server::installed() {
        return;
    }
    let nothing = persistence_of(&["--appendonly", "no"]).await;
    assert_eq!(nothing, Persistence::Nothing);
    assert!(nothing.loses_jobs());
    assert!(nothing.to_string().contains("loses every job"), "{nothing}");

    let snapshots = persistence_of(&["--appendonly", "no", "--save", "900 1"]).await;
    assert_eq!(snapshots, Persistence::SnapshotsOnly);
    assert!(snapshots.loses_jobs());

    let aof = persistence_of(&["--appendonly", "yes", "--appendfsync", "always"]).await;
    assert_eq!(
        aof,
        Persistence::AppendOnly {
            fsync: Some("always".into())
        }
    );
    assert!(!aof.loses_jobs());
}
