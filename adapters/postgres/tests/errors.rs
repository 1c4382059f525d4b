//! Clear errors: a bad URL, a dead server, a missing schema, a schema from the future; and
//! `migrate` run by many processes at once.

mod common;

use std::time::Duration;

use fairq_postgres::{PgBackend, PgError, PgOptions, SCHEMA_VERSION};
use fairq_worker::{Backend, BackendError, NewJob};

#[tokio::test]
async fn a_bad_url_is_reported_as_such() {
    for url in [
        "postgres://user@host:notaport/db",
        "postgres://[::1/db",
        "host=a port=x",
    ] {
        let err = PgBackend::connect(url, PgOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(err, PgError::BadUrl(_)), "{url}: {err}");
        assert!(err
            .to_string()
            .contains("invalid PostgreSQL connection string"));
    }
    let err = PgBackend::connect(
        "postgres://postgres@127.0.0.1/test",
        PgOptions::default().schema("bad-name"),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, PgError::BadSchemaName(_)), "{err}");
}

#[tokio::test]
async fn a_dead_server_is_unavailable_and_transient() {
    // Nothing listens on port 1.
    let url = "postgres://postgres@127.0.0.1:1/test";
    let err = PgBackend::connect(
        url,
        PgOptions::default().connect_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, PgError::Unavailable(_)), "{err}");
    assert!(err.to_string().contains("unavailable"));
    let as_backend: BackendError = err.into();
    assert!(as_backend.is_transient());

    // A store built on a pool keeps failing the same way, call after call.
    let config: tokio_postgres::Config = url.parse().unwrap();
    let pool = deadpool_postgres::Pool::builder(deadpool_postgres::Manager::new(
        config,
        tokio_postgres::NoTls,
    ))
    .runtime(deadpool_postgres::Runtime::Tokio1)
    .create_timeout(Some(Duration::from_secs(2)))
    .build()
    .unwrap();
    let store = PgBackend::from_pool(pool, PgOptions::default()).unwrap();
    for _ in 0..2 {
        let err = store
            .enqueue(NewJob::new("q", "k", vec![]))
            .await
            .unwrap_err();
        assert!(err.is_transient(), "{err}");
        let err = store
            .claim("q", 1, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(err.is_transient(), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_schema_says_to_migrate() {
    let Some(admin) = common::admin().await else {
        return;
    };
    let schema = common::unique_schema("missing");
    let err = PgBackend::connect(&common::url(), PgOptions::default().schema(&schema))
        .await
        .unwrap_err();
    assert!(matches!(err, PgError::SchemaMissing { .. }), "{err}");
    assert!(err.to_string().contains("run migrate()"), "{err}");

    // A store whose schema disappears under it says the same on every call.
    let store = PgBackend::connect(
        &common::url(),
        PgOptions::default().schema(&schema).migrate(true),
    )
    .await
    .unwrap();
    common::drop_schema(&admin, &schema).await;
    let err = store
        .enqueue(NewJob::new("q", "k", vec![]))
        .await
        .unwrap_err();
    assert!(!err.is_transient());
    assert!(err.to_string().contains("run migrate()"), "{err}");
    let err = store
        .claim("q", 1, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("run migrate()"), "{err}");
    assert!(store
        .stats()
        .await
        .unwrap_err()
        .to_string()
        .contains("run migrate()"));
    // Migrating brings it back.
    assert_eq!(store.migrate().await.unwrap(), SCHEMA_VERSION as usize);
    store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    common::drop_schema(&admin, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_is_idempotent_and_safe_to_run_concurrently() {
    let Some(admin) = common::admin().await else {
        return;
    };
    let schema = common::unique_schema("migrate");
    let mut runs = Vec::new();
    for _ in 0..4 {
        let schema = schema.clone();
        runs.push(tokio::spawn(async move {
            let store = PgBackend::from_pool(
                deadpool_postgres::Pool::builder(deadpool_postgres::Manager::new(
                    common::url().parse().unwrap(),
                    tokio_postgres::NoTls,
                ))
                .build()
                .unwrap(),
                PgOptions::default().schema(&schema),
            )
            .unwrap();
            store.migrate().await.unwrap()
        }));
    }
    let mut applied = 0;
    for run in runs {
        applied += run.await.unwrap();
    }
    assert_eq!(
        applied, SCHEMA_VERSION as usize,
        "exactly one run applied each migration"
    );
    let version: i32 = admin
        .query_one(
            &format!("SELECT max(version) FROM \"{schema}\".schema_version"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, SCHEMA_VERSION);
    // Version 4 leaves half of each page of the jobs table free for the claim's new row
    // versions.
    let options: Vec<String> = admin
        .query_one(
            "SELECT c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relname = 'jobs'",
            &[&schema],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(options, vec!["fillfactor=50".to_string()]);

    // The schema's recorded version is what decides, at connect without migrating.
    let set_version = |sql: String| {
        let admin = &admin;
        async move { admin.batch_execute(&sql).await.unwrap() }
    };
    let url = common::url();
    let connect = || PgBackend::connect(&url, PgOptions::default().schema(&schema));
    // A schema from an older release is refused until it is upgraded (its statements would
    // fail on the missing tables), and migrating brings it back.
    set_version(format!(
        "DELETE FROM \"{schema}\".schema_version WHERE version = {SCHEMA_VERSION}"
    ))
    .await;
    let err = connect().await.unwrap_err();
    assert!(
        matches!(err, PgError::SchemaTooOld { found, supported, .. }
            if found == SCHEMA_VERSION - 1 && supported == SCHEMA_VERSION),
        "{err}"
    );
    assert!(err.to_string().contains("run migrate()"), "{err}");
    set_version(format!(
        "INSERT INTO \"{schema}\".schema_version (version) VALUES ({SCHEMA_VERSION})"
    ))
    .await;
    connect()
        .await
        .expect("a current schema opens without migrating");

    // A schema from a newer release is refused rather than misused.
    set_version(format!(
        "INSERT INTO \"{schema}\".schema_version (version) VALUES (99)"
    ))
    .await;
    let err = connect().await.unwrap_err();
    assert!(
        matches!(err, PgError::SchemaTooNew { found: 99, .. }),
        "{err}"
    );
    common::drop_schema(&admin, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_sql_files_create_a_working_schema() {
    let files = [
        include_str!("../sql/v1.sql"),
        include_str!("../sql/v2.sql"),
        include_str!("../sql/v3.sql"),
        include_str!("../sql/v4.sql"),
        include_str!("../sql/v5.sql"),
        include_str!("../sql/v6.sql"),
        include_str!("../sql/v7.sql"),
        include_str!("../sql/v8.sql"),
    ];
    assert_eq!(files.len(), fairq_postgres::MIGRATIONS.len());
    for (file, (_, shipped)) in files.iter().zip(fairq_postgres::MIGRATIONS) {
        assert_eq!(file, shipped);
    }
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let taken: bool = admin
        .query_one("SELECT to_regnamespace('fairq') IS NOT NULL", &[])
        .await
        .unwrap()
        .get(0);
    if taken {
        eprintln!("skipping: a schema named fairq already exists on the test server");
        return;
    }
    // What a user's own migration tool would run: the files as shipped, in a transaction that
    // is rolled back so the shared server is left as it was.
    let tx = admin.transaction().await.unwrap();
    for file in files {
        tx.batch_execute(file).await.unwrap();
    }
    let producer = fairq_postgres::Producer::default();
    let id = producer
        .enqueue(&tx, NewJob::new("q", "k", vec![1]).key("a"))
        .await
        .unwrap();
    let round: Option<i64> = tx
        .query_one(
            "SELECT round FROM fairq.jobs WHERE id = $1",
            &[&(id.0 as i64)],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(round, Some(1), "a ready job gets the first round");
    tx.rollback().await.unwrap();
}

/// A store created by the first release, holding jobs (ready, delayed, running), upgrades in
/// place: the jobs keep their order and state and the store works on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_schema_with_jobs_upgrades_in_place() {
    let Some(admin) = common::admin().await else {
        return;
    };
    let schema = common::unique_schema("upgrade");
    let v1 = fairq_postgres::MIGRATIONS[0]
        .1
        .replace("fairq.", &format!("\"{schema}\"."))
        .replace("EXISTS fairq;", &format!("EXISTS \"{schema}\";"));
    admin.batch_execute(&v1).await.unwrap();
    // Rows as version 1 wrote them: two ready jobs of two keys, one delayed, one running, and
    // one blocked on the first.
    admin
        .batch_execute(&format!(
            "INSERT INTO \"{schema}\".jobs (id, queue, kind, key, payload, state, run_at, due_at,
                 round, ready_seq, enqueued_at, has_dependents)
             VALUES (1, 'q', 'k', 'a', '', 'scheduled', 0, 0, 1, 1, 0, true),
                    (2, 'q', 'k', 'b', '', 'scheduled', 0, 0, 1, 2, 0, false),
                    (3, 'q', 'k', 'a', '', 'scheduled', 5000, 5000, NULL, NULL, 0, false);
             INSERT INTO \"{schema}\".jobs (id, queue, kind, key, payload, state, attempts, token,
                 lease_deadline, claimed_at, enqueued_at)
             VALUES (4, 'q', 'k', 'c', '', 'running', 1, 1, 900, 100, 0);
             INSERT INTO \"{schema}\".jobs (id, queue, kind, key, payload, state, run_at, due_at,
                 depends_on, enqueued_at)
             VALUES (5, 'q', 'k', 'd', '', 'blocked', 0, 0, 1, 0);
             SELECT setval('\"{schema}\".job_ids', 5);"
        ))
        .await
        .unwrap();
    let clock = fairq_worker::ManualClock::new(1_000);
    let store = PgBackend::connect(
        &common::url(),
        PgOptions::default()
            .schema(&schema)
            .clock(clock.clone())
            .random(fairq_worker::FixedRandom(0))
            .migrate(true),
    )
    .await
    .unwrap();
    let jobs = store.claim("q", 10, Duration::from_secs(60)).await.unwrap();
    let ids: Vec<u64> = jobs.iter().map(|j| j.claim.id.0).collect();
    assert_eq!(
        ids,
        vec![1, 2],
        "ready jobs keep their order; the delayed and the blocked ones wait"
    );
    // The running job's lease (900) has expired: the rescue finds it (since version 6
    // through `jobs_ready`, where the upgrade gave it a place).
    assert_eq!(store.rescue("q").await.unwrap(), 1);
    // Core's verdict with the store's random numbers (the default policy's jitter).
    let expected = fairq_core::job::verdict(
        &fairq_core::retry::RetryPolicy::default(),
        1,
        fairq_core::job::Setback::LeaseExpired,
        1_000,
        0,
    );
    let fairq_core::job::Outcome::Retry { run_at } = expected else {
        panic!("the default policy retries: {expected:?}");
    };
    let info = store.get(fairq_worker::JobId(4)).await.unwrap().unwrap();
    assert_eq!(info.state, fairq_core::job::State::Retrying { run_at });
    assert!(run_at <= 5_000);
    // The first job's success releases the blocked one.
    store.complete(jobs[0].claim).await.unwrap();
    clock.set(5_000);
    let later = store.claim("q", 10, Duration::from_secs(60)).await.unwrap();
    let mut ids: Vec<u64> = later.iter().map(|j| j.claim.id.0).collect();
    ids.sort();
    assert_eq!(
        ids,
        vec![3, 4, 5],
        "the delayed job came due, the rescued one runs again, the blocked one was released"
    );
    for job in jobs[1..].iter().chain(&later) {
        store.complete(job.claim).await.unwrap();
    }
    let stats = store.stats().await.unwrap();
    assert_eq!(stats[0].counts.succeeded, 5);
    drop(store);
    common::drop_schema(&admin, &schema).await;
}

/// A `postgres://` URL with Redis' port: the probe (a cancel request full of newlines, which
/// Redis answers and PostgreSQL never does) ends the attempt with `NotPostgres`, long before
/// the 10-minute connect timeout this test sets would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_port_is_not_taken_for_postgres() {
    let redis =
        std::env::var("FAIRQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let authority = redis
        .trim_start_matches("redis://")
        .split('/')
        .next()
        .unwrap_or_default();
    let address = authority.rsplit('@').next().unwrap_or_default().to_string();
    if tokio::net::TcpStream::connect(&address).await.is_err() {
        assert!(
            !std::env::var("FAIRQ_REQUIRE_SERVICES").is_ok_and(|v| v == "1"),
            "Redis at {address} is required"
        );
        eprintln!("skipping: no Redis at {address}");
        return;
    }
    let url = format!("postgres://postgres@{address}/test");
    let err = tokio::time::timeout(
        Duration::from_secs(120),
        PgBackend::connect(
            &url,
            PgOptions::default().connect_timeout(Duration::from_secs(600)),
        ),
    )
    .await
    .expect("the probe ended the attempt")
    .unwrap_err();
    assert!(matches!(err, PgError::NotPostgres { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("does not speak the PostgreSQL protocol"),
        "{text}"
    );
    assert!(text.contains("-ERR"), "Redis' answer is shown: {text}");
    assert!(!BackendError::from(err).is_transient());
}

/// Errors the server sends carry its message and SQLSTATE, not just "db error": a role over
/// its connection limit (53300, the class a restart's "shutting down" and "terminating
/// connection" errors are in: unavailable) and a database that does not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_carry_the_servers_message() {
    let Some(admin) = common::admin().await else {
        return;
    };
    let role = format!("fq_limited_{}", std::process::id());
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN CONNECTION LIMIT 0"
        ))
        .await
        .unwrap();
    struct DropRole(String);
    impl Drop for DropRole {
        fn drop(&mut self) {
            let role = self.0.clone();
            let _ = std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(async {
                        if let Some(admin) = common::admin().await {
                            let _ = admin
                                .batch_execute(&format!("DROP ROLE IF EXISTS {role}"))
                                .await;
                        }
                    })
            })
            .join();
        }
    }
    let _role = DropRole(role.clone());
    let base: tokio_postgres::Config = common::url().parse().unwrap();
    let host = match &base.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        #[allow(unreachable_patterns)]
        _ => "127.0.0.1".to_string(),
    };
    let port = base.get_ports().first().copied().unwrap_or(5432);
    let err = PgBackend::connect(
        &format!("postgres://{role}@{host}:{port}/test"),
        PgOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, PgError::Unavailable(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("53300") && text.contains("too many connections"),
        "{text}"
    );
    let err = PgBackend::connect(
        &format!("postgres://postgres@{host}:{port}/fq_no_such_database"),
        PgOptions::default(),
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("3D000") && text.contains("fq_no_such_database"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_in_a_queue_argument_is_the_callers_mistake_not_a_store_failure() {
    // PostgreSQL text cannot hold a NUL: the server refuses the parameter (SQLSTATE 22021),
    // which used to come back as BackendError::Store, as if the store had failed (a 500 on
    // the dashboard, an unhealthy queue for a worker).
    let Some(t) = common::TestStore::new("nularg").await else {
        return;
    };
    let store = &t.store;
    let q = "a\0b";
    let answers: Vec<(&str, Result<(), BackendError>)> = vec![
        (
            "list",
            store
                .list(fairq_worker::ListFilter {
                    queue: Some(q.into()),
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
        (
            "purge",
            store
                .purge(fairq_worker::Purge {
                    queue: Some(q.into()),
                    status: None,
                })
                .await
                .map(drop),
        ),
        (
            "claim",
            store.claim(q, 1, Duration::from_secs(5)).await.map(drop),
        ),
        ("rescue", store.rescue(q).await.map(drop)),
        ("live_counts", store.live_counts(q).await.map(drop)),
    ];
    for (what, answer) in answers {
        match answer {
            Err(BackendError::Invalid(message)) => {
                assert!(message.contains("NUL"), "{what}: {message}")
            }
            other => panic!("{what}: expected Invalid, got {other:?}"),
        }
    }
    t.cleanup().await;
}

/// A pool size beyond `PgOptions::MAX_POOL_SIZE` is taken as that maximum: the pool reserves
/// room for every connection when it is built, and `usize::MAX` made it panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_pool_size_is_taken_as_the_maximum() {
    let t = store_or_skip!(
        "hugepool",
        fairq_postgres::PgOptions::default().pool_size(usize::MAX)
    );
    assert_eq!(
        t.store.pool().status().max_size,
        fairq_postgres::PgOptions::MAX_POOL_SIZE
    );
    let id = t
        .store
        .enqueue(fairq_worker::NewJob::new("q", "k", vec![]))
        .await
        .unwrap();
    assert!(t.store.get(id).await.unwrap().is_some());
    t.cleanup().await;
}
