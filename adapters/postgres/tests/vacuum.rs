//! Whether the server cleans the store's tables: what `vacuuming` reports against the server's
//! own settings, a table with autovacuum turned off, and `vacuum` removing dead rows.

mod common;

use std::time::Duration;

use fairq_worker::{Backend, NewJob};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuuming_reports_the_servers_setting_and_tables_turned_off() {
    let t = store_or_skip!("vacuuming");
    let server_on: bool = t
        .admin
        .query_one(
            "SELECT current_setting('autovacuum')::bool AND current_setting('track_counts')::bool",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let before = t.store.vacuuming().await.unwrap();
    assert_eq!(before.autovacuum, server_on);
    assert!(before.tables_off.is_empty(), "{before:?}");
    assert_eq!(before.needs_vacuum(), !server_on);

    t.admin
        .batch_execute(&format!(
            "ALTER TABLE \"{s}\".jobs SET (autovacuum_enabled = false); \
             ALTER TABLE \"{s}\".archive SET (autovacuum_enabled = off)",
            s = t.schema
        ))
        .await
        .unwrap();
    let off = t.store.vacuuming().await.unwrap();
    assert_eq!(
        off.tables_off,
        vec!["archive".to_string(), "jobs".to_string()]
    );
    assert!(off.needs_vacuum());
    let text = off.to_string();
    assert!(text.contains("VACUUM"), "{text}");
    if server_on {
        assert!(text.contains("archive, jobs"), "{text}");
    }
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuum_vacuums_and_analyses_every_job_table() {
    let t = store_or_skip!("vacuum");
    let s = &t.store;
    let jobs: Vec<NewJob> = (0..200)
        .map(|i| NewJob::new("v", "k", vec![b'x'; 16]).key(format!("k{}", i % 4)))
        .collect();
    s.enqueue_many(jobs).await.unwrap();
    let claimed = s.claim("v", 200, Duration::from_secs(30)).await.unwrap();
    assert_eq!(claimed.len(), 200);
    for job in &claimed {
        s.complete(job.claim).await.unwrap();
    }
    let counts = || async {
        // A fresh statistics snapshot each time (the session caches one per transaction).
        t.admin
            .batch_execute("SELECT pg_stat_clear_snapshot()")
            .await
            .unwrap();
        t.admin
            .query(
                "SELECT relname::text, vacuum_count, analyze_count FROM pg_stat_user_tables \
                 WHERE schemaname = $1 AND relname IN ('jobs', 'archive', 'rounds', 'ghosts') \
                 ORDER BY relname",
                &[&t.schema],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r.get::<_, String>(0),
                    r.get::<_, i64>(1),
                    r.get::<_, i64>(2),
                )
            })
            .collect::<Vec<_>>()
    };
    let before = counts().await;
    assert_eq!(before.len(), 4, "{before:?}");
    s.vacuum().await.unwrap();
    let after = counts().await;
    for ((table, vacuums, analyses), (_, vacuums_after, analyses_after)) in
        before.iter().zip(&after)
    {
        assert_eq!(*vacuums_after, vacuums + 1, "{table} was not vacuumed");
        assert_eq!(*analyses_after, analyses + 1, "{table} was not analysed");
    }
    t.cleanup().await;
}
