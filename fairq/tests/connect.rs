//! `fairq::connect` on every store this machine has: the URL alone picks the store, and the
//! same application code (enqueue, a worker, stats) runs on each. PostgreSQL and Redis come
//! from `FAIRQ_PG_URL` / `FAIRQ_REDIS_URL` (skipped when unreachable, failed instead under
//! `FAIRQ_REQUIRE_SERVICES=1`), each test with a schema or key prefix of its own, removed
//! afterwards even when the test fails.
#![cfg(all(feature = "file", feature = "postgres", feature = "redis"))]

use std::time::Duration;

use fairq::{
    Backend, BackendError, ConnectError, Inspect, Job, NewJob, QueueConfig, Store, Worker,
};

fn required() -> bool {
    fairq::services::required()
}

/// Removes the schema or key prefix of a server store when dropped.
struct Cleanup(Option<Store>, String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Some(store) = self.0.take() else { return };
        let schema = self.1.clone();
        // A fresh thread: the test's runtime may be the one unwinding.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                match store {
                    Store::Postgres(pg) => {
                        if let Ok(client) = pg.pool().get().await {
                            let _ = client
                                .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                                .await;
                        }
                    }
                    Store::Redis(redis) => {
                        let _ = redis.destroy().await;
                    }
                    _ => {}
                }
            });
        })
        .join()
        .ok();
    }
}

/// Enqueues three jobs for two tenants and runs them with a worker: the application code
/// of the crate docs, whatever the store.
async fn run_jobs(store: &Store) {
    let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel();
    let worker = Worker::builder(store.clone())
        .queue("mail", QueueConfig::default().concurrency(2))
        .handle_json("welcome", move |to: String, _job: Job| {
            let done = done_tx.clone();
            async move {
                done.send(to).ok();
                Ok::<(), String>(())
            }
        })
        .build()
        .unwrap()
        .start()
        .unwrap();
    for (to, tenant) in [("ada", "t1"), ("bob", "t2"), ("cy", "t1")] {
        store
            .enqueue(NewJob::json("mail", "welcome", &to).unwrap().key(tenant))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    while seen.len() < 3 {
        seen.push(
            tokio::time::timeout(Duration::from_secs(60), done.recv())
                .await
                .expect("the worker ran every job")
                .unwrap(),
        );
    }
    seen.sort();
    assert_eq!(seen, ["ada", "bob", "cy"]);
    assert!(worker.shutdown(Duration::from_secs(10)).await.is_clean());
    let stats = store.stats().await.unwrap();
    let mail = stats.iter().find(|s| s.queue == "mail").unwrap();
    assert_eq!(mail.counts.succeeded, 3);
    cancel_one(store).await;
}

/// The facade hands the dashboard's cancel to the store inside, whichever it is.
async fn cancel_one(store: &Store) {
    assert!(store.capabilities().cancel, "{} cancels", store.kind());
    let id = store
        .enqueue(NewJob::new("cancelled", "welcome", vec![]))
        .await
        .unwrap();
    store.cancel(id).await.unwrap();
    assert!(store.get(id).await.unwrap().is_none());
    let again = store.cancel(id).await.unwrap_err();
    assert!(
        matches!(again, BackendError::NotFound(found) if found == id),
        "{again}"
    );
}

fn tag() -> String {
    format!("{:010x}", fairq::random_u64() & 0xff_ffff_ffff)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_store_by_url() {
    let dir = tempfile::tempdir().unwrap();
    let store = fairq::connect(&format!("file:{}", dir.path().join("jobs").display()))
        .await
        .unwrap();
    assert_eq!(store.kind(), "file");
    run_jobs(&store).await;
}

/// Runs one job on a file store opened by `url` and returns how many succeeded jobs it
/// still lists.
async fn succeeded_jobs_listed(url: &str) -> usize {
    let store = fairq::connect(url).await.unwrap();
    store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    let job = store
        .claim("q", 1, Duration::from_secs(30))
        .await
        .unwrap()
        .remove(0);
    store.complete(job.claim).await.unwrap();
    let listed = store
        .list(fairq::ListFilter::default().status(fairq::JobStatus::Succeeded))
        .await
        .unwrap();
    listed.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_url_says_whether_succeeded_jobs_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("kept").display().to_string();
    let dropped = dir.path().join("dropped").display().to_string();
    assert_eq!(succeeded_jobs_listed(&format!("file:{kept}")).await, 1);
    assert_eq!(
        succeeded_jobs_listed(&format!("file:{dropped}?keep_succeeded=false")).await,
        0
    );
    // The option is not part of the folder's name.
    assert!(dir.path().join("dropped").is_dir());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_by_url() {
    let base = std::env::var("FAIRQ_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string());
    let schema = format!("fairq_facade_{}", tag());
    let sep = if base.contains('?') { '&' } else { '?' };
    let options = fairq::ConnectOptions::default().connect_timeout(Duration::from_secs(3));
    let store = match fairq::connect_with(&format!("{base}{sep}schema={schema}"), &options).await {
        Ok(store) => store,
        Err(e) if e.is_transient() && !required() => {
            eprintln!("skipped: PostgreSQL unreachable: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let _cleanup = Cleanup(Some(store.clone()), schema);
    assert_eq!(store.kind(), "postgres");
    run_jobs(&store).await;
}

/// `sslmode=require` in the URL: the store's sessions are encrypted (the shared test server
/// has `ssl=on`, as Debian's PostgreSQL does; with it off, the typed refusal is checked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_by_url_with_sslmode_require() {
    use fairq::postgres::{tokio_postgres, PgError};
    let base = std::env::var("FAIRQ_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string());
    let tag = tag();
    let schema = format!("fairq_facade_tls_{tag}");
    let app = format!("fq_facade_{tag}");
    let sep = if base.contains('?') { '&' } else { '?' };
    let Ok((admin, connection)) = tokio_postgres::connect(&base, tokio_postgres::NoTls).await
    else {
        assert!(!required(), "PostgreSQL at {base} is required");
        return;
    };
    tokio::spawn(connection);
    let ssl_on: String = admin.query_one("SHOW ssl", &[]).await.unwrap().get(0);
    let url = format!("{base}{sep}sslmode=require&application_name={app}&schema={schema}");
    let result = fairq::connect(&url).await;
    if ssl_on != "on" {
        let err = result.unwrap_err();
        let ConnectError::Open {
            source: fairq::BackendError::Store(source),
            ..
        } = &err
        else {
            panic!("{err:?}")
        };
        assert!(
            matches!(
                source.downcast_ref::<PgError>(),
                Some(PgError::TlsUnsupported)
            ),
            "{err:?}"
        );
        return;
    }
    let store = result.expect("sslmode=require connects");
    let _cleanup = Cleanup(Some(store.clone()), schema);
    run_jobs(&store).await;
    let ssl: Vec<bool> = admin
        .query(
            "SELECT s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
             WHERE a.application_name = $1",
            &[&app],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(!ssl.is_empty() && ssl.iter().all(|s| *s), "{ssl:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_by_url() {
    let base =
        std::env::var("FAIRQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_string());
    let prefix = format!("fairq-facade-{}", tag());
    let sep = if base.contains('?') { '&' } else { '?' };
    let store = match fairq::connect(&format!("{base}{sep}prefix={prefix}")).await {
        Ok(store) => store,
        Err(e) if e.is_transient() && !required() => {
            eprintln!("skipped: Redis unreachable: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let _cleanup = Cleanup(Some(store.clone()), prefix);
    assert_eq!(store.kind(), "redis");
    run_jobs(&store).await;
}

#[tokio::test]
async fn a_mistyped_scheme_is_a_clear_error() {
    let err = fairq::connect("postgress://h/db").await.unwrap_err();
    assert!(matches!(err, ConnectError::BadUrl { .. }), "{err}");
    assert!(err.to_string().contains("unknown scheme \"postgress\""));
}

/// Every message of `err`'s source chain, and its `Debug`.
fn everything_shown(err: &ConnectError) -> String {
    let mut text = format!("{err:?}");
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = next {
        text.push('\n');
        text.push_str(&e.to_string());
        next = e.source();
    }
    text
}

/// A scheme in capitals names the same store and reaches its driver in lower case (the
/// attempt fails on the closed port, not on the URL), and the error of a failed connect
/// shows no password, however it is printed.
#[tokio::test]
async fn a_scheme_in_capitals_is_understood_and_its_error_shows_no_password() {
    let options = fairq::ConnectOptions::default().connect_timeout(Duration::from_secs(2));
    for url in [
        "POSTGRES://bob:hunter2@127.0.0.1:1/app?application_name=x",
        "PostgreSQL://bob:hunter2@127.0.0.1:1/app",
        "REDIS://:hunter2@127.0.0.1:1/",
    ] {
        let err = fairq::connect_with(url, &options).await.unwrap_err();
        let shown = everything_shown(&err);
        assert!(err.is_transient(), "{url}: {shown}");
        assert!(!shown.contains("hunter2"), "{url}: {shown}");
    }
    let pg = fairq::postgres::PgOptions::default().connect_timeout(Duration::from_secs(2));
    let err = fairq::postgres::connect(
        "POSTGRES://bob:hunter2@127.0.0.1:1/app?application_name=x",
        pg,
    )
    .await
    .unwrap_err();
    let shown = everything_shown(&err);
    assert!(err.is_transient() && !shown.contains("hunter2"), "{shown}");
    let redis = fairq::redis::RedisOptions::new().connect_timeout(Duration::from_secs(2));
    let err = fairq::redis::connect("Redis://:hunter2@127.0.0.1:1/", redis)
        .await
        .unwrap_err();
    let shown = everything_shown(&err);
    assert!(err.is_transient() && !shown.contains("hunter2"), "{shown}");
}

/// A pool size of any value is taken within bounds: the connect returns (here, the closed
/// port's error) instead of panicking while the pool is built.
#[tokio::test]
async fn a_huge_pool_size_is_bounded_instead_of_panicking() {
    let by_setter = fairq::ConnectOptions::default()
        .connect_timeout(Duration::from_secs(2))
        .pool_size(usize::MAX);
    assert_eq!(by_setter.pool_size, fairq::ConnectOptions::MAX_POOL_SIZE);
    let mut by_field = by_setter.clone();
    by_field.pool_size = usize::MAX;
    for options in [by_setter, by_field] {
        let err = fairq::connect_with("postgres://bob@127.0.0.1:1/app", &options)
            .await
            .unwrap_err();
        assert!(err.is_transient(), "{err}");
    }
}
