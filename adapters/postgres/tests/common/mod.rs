//! Shared test set-up: each test gets its own schema on the server named by `FAIRQ_PG_URL`
//! and drops it afterwards. Without a server the tests skip, unless
//! `FAIRQ_REQUIRE_SERVICES=1`, which turns a missing server into a failure.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fairq_postgres::{PgBackend, PgOptions};
use fairq_worker::ManualClock;

/// The server to test against.
pub fn url() -> String {
    std::env::var("FAIRQ_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

fn required() -> bool {
    fairq_worker::services::required()
}

/// A plain connection to the test server, or `None` (after saying so) when it is down and
/// not required.
pub async fn admin() -> Option<tokio_postgres::Client> {
    let url = url();
    let connect = tokio_postgres::connect(&url, tokio_postgres::NoTls);
    match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok((client, connection))) => {
            tokio::spawn(connection);
            Some(client)
        }
        Ok(Err(e)) => unreachable_server(&e.to_string()),
        Err(_) => unreachable_server("connect timed out"),
    }
}

fn unreachable_server(why: &str) -> Option<tokio_postgres::Client> {
    if required() {
        panic!(
            "PostgreSQL at {} is required (FAIRQ_REQUIRE_SERVICES=1) but unreachable: {why}",
            url()
        );
    }
    eprintln!("skipping: PostgreSQL at {} is unreachable ({why})", url());
    None
}

/// A schema name no other test uses.
pub fn unique_schema(tag: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut tag: String = tag.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    tag.truncate(16);
    format!("fqt_{tag}_{}_{n}_{nanos}", std::process::id())
}

/// A migrated store in a fresh schema, on a manual clock starting at 1,000,000 ms.
pub struct TestStore {
    pub store: PgBackend,
    pub clock: ManualClock,
    pub schema: String,
    pub admin: tokio_postgres::Client,
    cleaned: bool,
}

impl Drop for TestStore {
    /// A test that panicked never reached `cleanup`: drop its schema from another thread
    /// (this one may be inside a runtime).
    fn drop(&mut self) {
        if self.cleaned {
            return;
        }
        let schema = self.schema.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime");
            runtime.block_on(async {
                if let Some(admin) = admin().await {
                    drop_schema(&admin, &schema).await;
                }
            });
        })
        .join();
    }
}

impl TestStore {
    /// `None` when the server is down and not required.
    pub async fn new(tag: &str) -> Option<TestStore> {
        TestStore::with_options(tag, PgOptions::default().pool_size(8)).await
    }

    pub async fn with_options(tag: &str, options: PgOptions) -> Option<TestStore> {
        let admin = admin().await?;
        let schema = unique_schema(tag);
        let clock = ManualClock::new(1_000_000);
        let store = PgBackend::connect(
            &url(),
            options.schema(&schema).clock(clock.clone()).migrate(true),
        )
        .await
        .expect("connect and migrate");
        Some(TestStore {
            store,
            clock,
            schema,
            admin,
            cleaned: false,
        })
    }

    /// Drops the schema.
    pub async fn cleanup(mut self) {
        drop_schema(&self.admin, &self.schema).await;
        self.cleaned = true;
    }
}

pub async fn drop_schema(admin: &tokio_postgres::Client, schema: &str) {
    admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await
        .expect("drop the test schema");
}

/// Starts a store test: binds a [`TestStore`] or returns early when the server is absent.
#[macro_export]
macro_rules! store_or_skip {
    ($tag:expr) => {
        match common::TestStore::new($tag).await {
            Some(t) => t,
            None => return,
        }
    };
    ($tag:expr, $options:expr) => {
        match common::TestStore::with_options($tag, $options).await {
            Some(t) => t,
            None => return,
        }
    };
}

/// Whether the server answers (sync, for test bodies that are not async). Panics instead of
/// returning `false` when `FAIRQ_REQUIRE_SERVICES=1`.
pub fn available() -> bool {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async { admin().await.is_some() })
}

/// Makes each conformance check a store in its own schema, dropped afterwards.
pub struct PgHarness;

/// [`PgHarness`] whose stores delete succeeded jobs (`keep_succeeded(false)`).
pub struct PgHarnessNotKeeping;

/// A store in a fresh schema of its own, on `clock`.
async fn conformance_store(clock: ManualClock, keep_succeeded: bool) -> PgBackend {
    let schema = unique_schema("conf");
    PgBackend::connect(
        &url(),
        PgOptions::default()
            .schema(&schema)
            .pool_size(8)
            .clock(clock)
            .keep_succeeded(keep_succeeded)
            .migrate(true),
    )
    .await
    .expect("connect and migrate")
}

/// Closes `backend` and drops its schema.
async fn conformance_cleanup(backend: PgBackend) {
    let schema = backend.schema().to_string();
    drop(backend);
    if let Some(admin) = admin().await {
        drop_schema(&admin, &schema).await;
    }
}

impl fairq_worker::conformance::Harness for PgHarness {
    type Backend = PgBackend;

    async fn create(&self, clock: ManualClock) -> PgBackend {
        conformance_store(clock, true).await
    }

    async fn cleanup(&self, backend: PgBackend) {
        conformance_cleanup(backend).await
    }
}

impl fairq_worker::conformance::Harness for PgHarnessNotKeeping {
    type Backend = PgBackend;

    async fn create(&self, clock: ManualClock) -> PgBackend {
        conformance_store(clock, false).await
    }

    async fn cleanup(&self, backend: PgBackend) {
        conformance_cleanup(backend).await
    }
}
pub mod server;

/// Waits until a session is blocked on a lock held by the session with backend id `holder`
/// (observed through `pg_blocking_pids`, never by sleeping for a guessed time).
pub async fn someone_waits_for(observer: &tokio_postgres::Client, holder: i32) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let row = observer
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                &[&holder],
            )
            .await
            .expect("read the lock waits");
        if row.get::<_, i64>(0) > 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "nobody waited for the lock"
        );
        tokio::task::yield_now().await;
    }
}
