//! Shared set-up of the dashboard tests: stores (PostgreSQL and Redis when reachable, each
//! test with its own schema or key prefix, removed afterwards), a seeded queue, and a
//! running server.
#![allow(dead_code)]

use std::time::Duration;

use fairq_core::retry::RetryPolicy;
use fairq_postgres::{tokio_postgres, PgBackend, PgOptions};
use fairq_redis::{RedisBackend, RedisOptions};
use fairq_web::{Config, Handle, Server};
use fairq_worker::{random_u64, Backend, Failure, Inspect, JobId, NewJob};

/// A token long enough for the server.
pub const TOKEN: &str = "test-token-0123456789abcdef";

/// A payload and key that would run script if a page inserted them as HTML.
pub const XSS_PAYLOAD: &str =
    r#"{"note":"<script>window.__xss=1</script><img src=x onerror=\"window.__xss=2\">"}"#;
pub const XSS_KEY: &str = "<img src=x onerror=window.__xss=3>";

fn required() -> bool {
    fairq_worker::services::required()
}

pub fn pg_url() -> String {
    std::env::var("FAIRQ_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

pub fn redis_url() -> String {
    std::env::var("FAIRQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_string())
}

fn skip(what: &str, why: &str) {
    if required() {
        panic!("{what} is required (FAIRQ_REQUIRE_SERVICES=1) but unreachable: {why}");
    }
    eprintln!("skipping {what}: unreachable ({why})");
}

fn tag() -> String {
    format!("{:010x}", random_u64() & 0xff_ffff_ffff)
}

/// A PostgreSQL store in a schema of its own, dropped with the guard.
pub struct PgGuard {
    pub store: PgBackend,
    schema: String,
}

impl Drop for PgGuard {
    fn drop(&mut self) {
        let schema = self.schema.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                if let Ok((client, conn)) =
                    tokio_postgres::connect(&pg_url(), tokio_postgres::NoTls).await
                {
                    tokio::spawn(conn);
                    let _ = client
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                        .await;
                }
            });
        })
        .join();
    }
}

/// `None` (after saying so) when PostgreSQL is down and not required.
pub async fn pg_store() -> Option<PgGuard> {
    let schema = format!("fairq_web_{}", tag());
    let url = pg_url();
    let connect = PgBackend::connect(
        &url,
        PgOptions::default()
            .schema(schema.clone())
            .migrate(true)
            .pool_size(4)
            .connect_timeout(Duration::from_secs(5)),
    );
    match tokio::time::timeout(Duration::from_secs(10), connect).await {
        Ok(Ok(store)) => Some(PgGuard { store, schema }),
        Ok(Err(e)) => {
            skip("PostgreSQL", &e.to_string());
            None
        }
        Err(_) => {
            skip("PostgreSQL", "connect timed out");
            None
        }
    }
}

/// A Redis store under a key prefix of its own, deleted with the guard.
pub struct RedisGuard {
    pub store: RedisBackend,
}

impl Drop for RedisGuard {
    fn drop(&mut self) {
        let store = self.store.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                let _ = store.destroy().await;
            });
        })
        .join();
    }
}

/// `None` (after saying so) when Redis is down and not required.
pub async fn redis_store() -> Option<RedisGuard> {
    let options = RedisOptions::new()
        .prefix(format!("fairq-web-{}", tag()))
        .connect_timeout(Duration::from_secs(5));
    match tokio::time::timeout(
        Duration::from_secs(10),
        RedisBackend::connect(&redis_url(), options),
    )
    .await
    {
        Ok(Ok(store)) => Some(RedisGuard { store }),
        Ok(Err(e)) => {
            skip("Redis", &e.to_string());
            None
        }
        Err(_) => {
            skip("Redis", "connect timed out");
            None
        }
    }
}

/// The ids of the jobs [`seed`] made.
#[derive(Debug, Clone, Copy)]
pub struct Seeded {
    pub dead: JobId,
    pub running: JobId,
    pub later: JobId,
    pub xss: JobId,
    pub first_heavy: JobId,
}

/// Queue `mail`: 5 jobs of key `heavy`, 1 of `light`, 1 without a key, 1 delayed an hour
/// (key `light`), one running (key `light`), one dead (key `light`) and one with markup in
/// its payload and key; queue `images`: 2 jobs.
pub async fn seed<B: Backend>(store: &B) -> Seeded {
    let running = store
        .enqueue(NewJob::new("mail", "send", b"{}".to_vec()).key("light"))
        .await
        .expect("enqueue");
    let claimed = store
        .claim("mail", 1, Duration::from_secs(3600))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].claim.id, running);
    let dead = store
        .enqueue(
            NewJob::new("mail", "send", b"{\"to\":\"x\"}".to_vec())
                .key("light")
                .retry(RetryPolicy::new(0)),
        )
        .await
        .expect("enqueue");
    let claimed = store
        .claim("mail", 1, Duration::from_secs(3600))
        .await
        .expect("claim");
    assert_eq!(claimed[0].claim.id, dead);
    store
        .fail(&claimed[0], Failure::retryable("smtp said <no>"))
        .await
        .expect("fail");
    let mut jobs = Vec::new();
    for i in 0..5 {
        jobs.push(NewJob::json("mail", "send", &i).expect("json").key("heavy"));
    }
    jobs.push(NewJob::new("mail", "send", b"1".to_vec()).key("light"));
    jobs.push(NewJob::new("mail", "send", b"2".to_vec()));
    let ids = store.enqueue_many(jobs).await.expect("enqueue");
    let later = store
        .enqueue(
            NewJob::new("mail", "send", b"3".to_vec())
                .key("light")
                .delay(Duration::from_secs(3600)),
        )
        .await
        .expect("enqueue");
    let xss = store
        .enqueue(
            NewJob::new("mail", "send", XSS_PAYLOAD.as_bytes().to_vec())
                .key(XSS_KEY)
                .meta("<b>meta</b>", "<i>value</i>"),
        )
        .await
        .expect("enqueue");
    store
        .enqueue_many(vec![NewJob::new("images", "resize", vec![]); 2])
        .await
        .expect("enqueue");
    Seeded {
        dead,
        running,
        later,
        xss,
        first_heavy: ids[0],
    }
}

/// A server over `store` on a free loopback port, stopped when dropped.
pub struct Running<B> {
    pub url: String,
    pub handle: Handle<B>,
    pub generated_token: Option<String>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl<B> Drop for Running<B> {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts a server; `config` is completed with a free loopback port and no background
/// sampling (tests sample through the handle, or requests sample when data is stale).
pub async fn start<B: Inspect>(store: B, config: Config) -> Running<B> {
    let config = config
        .listen("127.0.0.1:0".parse().expect("an address"))
        .background_sampling(false);
    let server = Server::bind(store, config).await.expect("bind");
    let url = server.url();
    let handle = server.handle();
    let generated_token = server.generated_token().map(str::to_string);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    Running {
        url,
        handle,
        generated_token,
        stop: Some(stop),
    }
}
