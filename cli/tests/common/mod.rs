//! Stores for the command-line tests: PostgreSQL and Redis when reachable (each test with its
//! own schema or key prefix, removed afterwards), following the adapters' conventions:
//! `FAIRQ_PG_URL`, `FAIRQ_REDIS_URL`, and `FAIRQ_REQUIRE_SERVICES=1` to fail instead of skip.
#![allow(dead_code)]

use std::time::Duration;

use assert_cmd::Command;
use fairq_postgres::tokio_postgres;
use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::random_u64;

/// The `fairq` binary, run in `dir`, without a store from the environment.
pub fn fairq(dir: &std::path::Path) -> Command {
    let mut cmd = Command::cargo_bin("fairq").expect("the fairq binary");
    cmd.current_dir(dir)
        .env_remove("FAIRQ_STORE")
        .env_remove("RUST_LOG")
        .timeout(Duration::from_secs(120));
    cmd
}

fn required() -> bool {
    fairq_worker::services::required()
}

fn pg_url() -> String {
    std::env::var("FAIRQ_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

fn redis_url() -> String {
    std::env::var("FAIRQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_string())
}

/// Runs `sql` (the simple query protocol, so no parameters) on a fresh connection to the
/// PostgreSQL server at `url`: the first column of the first row it returned, if any.
pub fn pg_simple(url: &str, sql: &str) -> Option<String> {
    runtime().block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("PostgreSQL answers");
        tokio::spawn(conn);
        let messages = client.simple_query(sql).await.expect("the query runs");
        messages.into_iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        })
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A store on a server that tests may use; dropping it deletes everything it held.
pub enum ServiceStore {
    /// A schema of its own.
    Postgres { url: String, schema: String },
    /// A key prefix of its own.
    Redis { url: String, prefix: String },
}

impl ServiceStore {
    /// The `--store` value.
    pub fn arg(&self) -> String {
        match self {
            ServiceStore::Postgres { url, schema } => {
                let sep = if url.contains('?') { '&' } else { '?' };
                format!("{url}{sep}schema={schema}")
            }
            ServiceStore::Redis { url, prefix } => {
                let sep = if url.contains('?') { '&' } else { '?' };
                format!("{url}{sep}prefix={prefix}")
            }
        }
    }

    /// True when the store's PostgreSQL schema exists (Redis stores always do).
    pub fn exists(&self) -> bool {
        let ServiceStore::Postgres { url, schema } = self else {
            return true;
        };
        runtime().block_on(async {
            let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .expect("PostgreSQL answers");
            tokio::spawn(conn);
            let row = client
                .query_one(
                    "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1",
                    &[schema],
                )
                .await
                .expect("a schema query");
            row.get::<_, i64>(0) > 0
        })
    }

    /// A short name for messages.
    pub fn name(&self) -> &'static str {
        match self {
            ServiceStore::Postgres { .. } => "postgres",
            ServiceStore::Redis { .. } => "redis",
        }
    }
}

impl Drop for ServiceStore {
    fn drop(&mut self) {
        let rt = runtime();
        match self {
            ServiceStore::Postgres { url, schema } => {
                let url = url.clone();
                let schema = schema.clone();
                rt.block_on(async move {
                    if let Ok((client, conn)) =
                        tokio_postgres::connect(&url, tokio_postgres::NoTls).await
                    {
                        tokio::spawn(conn);
                        let _ = client
                            .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                            .await;
                    }
                });
            }
            ServiceStore::Redis { url, prefix } => {
                let url = url.clone();
                let prefix = prefix.clone();
                rt.block_on(async move {
                    if let Ok(store) =
                        RedisBackend::connect(&url, RedisOptions::new().prefix(prefix)).await
                    {
                        let _ = store.destroy().await;
                    }
                });
            }
        }
    }
}

/// Whether the shared PostgreSQL server has `ssl=on`.
pub fn pg_ssl_on() -> bool {
    runtime().block_on(async {
        let Ok((client, connection)) =
            tokio_postgres::connect(&pg_url(), tokio_postgres::NoTls).await
        else {
            return false;
        };
        tokio::spawn(connection);
        client
            .query_one("SHOW ssl", &[])
            .await
            .is_ok_and(|row| row.get::<_, String>(0) == "on")
    })
}

fn pg_reachable(url: &str) -> bool {
    runtime().block_on(async {
        matches!(
            tokio::time::timeout(
                Duration::from_secs(3),
                tokio_postgres::connect(url, tokio_postgres::NoTls)
            )
            .await,
            Ok(Ok(_))
        )
    })
}

fn redis_reachable(url: &str) -> bool {
    redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
        .is_ok()
}

/// The server stores reachable now, each fresh. A server that cannot be reached is skipped
/// with a message, or fails the test under `FAIRQ_REQUIRE_SERVICES=1`.
/// The PostgreSQL test store (`None` when the server is skipped) with one job enqueued
/// through the CLI, so its schema exists; with its server URL and schema name.
pub fn postgres_store_with_a_job(dir: &std::path::Path) -> Option<(ServiceStore, String, String)> {
    let store = service_stores()
        .into_iter()
        .find(|s| matches!(s, ServiceStore::Postgres { .. }))?;
    let ServiceStore::Postgres { url, schema } = &store else {
        return None;
    };
    let (url, schema) = (url.clone(), schema.clone());
    fairq(dir)
        .args(["--store", &store.arg(), "enqueue", "-k", "x"])
        .assert()
        .success();
    Some((store, url, schema))
}

pub fn service_stores() -> Vec<ServiceStore> {
    let mut stores = Vec::new();
    let tag = format!("{:012x}", random_u64() & 0xffff_ffff_ffff);
    let pg = pg_url();
    if pg_reachable(&pg) {
        stores.push(ServiceStore::Postgres {
            url: pg,
            schema: format!("fairq_cli_{tag}"),
        });
    } else if required() {
        panic!("PostgreSQL at {pg} is unreachable and FAIRQ_REQUIRE_SERVICES=1");
    } else {
        eprintln!("skipped PostgreSQL: {pg} is unreachable");
    }
    let redis = redis_url();
    if redis_reachable(&redis) {
        stores.push(ServiceStore::Redis {
            url: redis,
            prefix: format!("fairq-cli-{tag}"),
        });
    } else if required() {
        panic!("Redis at {redis} is unreachable and FAIRQ_REQUIRE_SERVICES=1");
    } else {
        eprintln!("skipped Redis: {redis} is unreachable");
    }
    stores
}
