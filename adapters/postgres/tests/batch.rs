//! The batched worker path on a real server: settlement and claim in one transaction, HOT
//! claims and heartbeats, and promotions that run only when a job can be due (with stores learning of
//! each other's waiting jobs through the due channel).

mod common;

use std::time::Duration;

use fairq_postgres::{PgBackend, PgOptions};
use fairq_worker::{Backend, Finished, JobStatus, NewJob, Settled};

const LEASE: Duration = Duration::from_secs(30);

/// Another store on the test store's schema and clock, as another process would open it.
async fn another_store(t: &common::TestStore, options: PgOptions) -> PgBackend {
    PgBackend::connect(
        &common::url(),
        options.schema(&t.schema).clock(t.clock.clone()),
    )
    .await
    .expect("connect")
}

/// Settles `jobs` as succeeded and claims up to `max` more jobs of queue `q`, in one call.
async fn succeed_and_claim(
    store: &PgBackend,
    jobs: &[fairq_worker::Job],
    max: usize,
) -> fairq_worker::SettledAndClaimed {
    let batch = jobs.iter().map(|j| Finished::succeeded(j.claim)).collect();
    store
        .settle_and_claim(batch, "q", max, LEASE)
        .await
        .unwrap()
}

/// Counters of the jobs table, once every session that wrote them has reported: a backend
/// reports its counters when it exits, so the stores whose updates are counted are dropped
/// first and this waits until the numbers reach `updates`.
async fn table_updates(t: &common::TestStore, updates: i64) -> (i64, i64) {
    let query = "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables \
                 WHERE schemaname = $1 AND relname = 'jobs'";
    tokio::time::timeout(fairq_worker::conformance::PATIENCE, async {
        loop {
            let row = t.admin.query_one(query, &[&t.schema]).await.unwrap();
            let (all, hot): (i64, i64) = (row.get(0), row.get(1));
            if all >= updates {
                return (all, hot);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the server reported the table's counters")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_and_heartbeats_are_hot_updates() {
    let t = store_or_skip!("hot");
    let ids = t
        .store
        .enqueue_many((0..20).map(|i| NewJob::new("q", "k", vec![i])).collect())
        .await
        .unwrap();
    // A claim changes the state, the token, the attempts and the lease, which no index
    // holds: the job keeps its place in the ready order (claims pass over running jobs).
    let worker = another_store(&t, PgOptions::default().pool_size(1)).await;
    let jobs = worker.claim("q", 20, LEASE).await.unwrap();
    assert_eq!(jobs.len(), ids.len());
    drop(worker);
    let (claims, hot_claims) = table_updates(&t, 20).await;
    assert_eq!(claims, 20, "one update per claimed job");
    // Twenty fresh rows with half of each page free: every new version fits on its page.
    assert_eq!(hot_claims, 20, "every claim was a HOT update");
    // A heartbeat changes the lease deadline only, which no index holds.
    let beater = another_store(&t, PgOptions::default().pool_size(1)).await;
    for round in 1..=3 {
        t.clock.advance(Duration::from_secs(1));
        let answers = beater
            .heartbeat_many(jobs.iter().map(|j| j.claim).collect(), LEASE)
            .await
            .unwrap();
        assert!(
            answers.iter().all(Result::is_ok),
            "round {round}: {answers:?}"
        );
    }
    drop(beater);
    let (all, hot) = table_updates(&t, claims + 60).await;
    assert_eq!(all - claims, 60, "one update per extended lease");
    // A HOT update also needs room for the new row version on the same page, which pruning
    // of dead versions usually (not always) provides; with the deadline in an index, none
    // would be HOT.
    let heartbeats_hot = hot - hot_claims;
    println!("{heartbeats_hot} of 60 heartbeats were HOT updates");
    // How many are HOT depends on free room in the pages, which other sessions' work and
    // vacuum timing change; an indexed deadline would make none of them HOT.
    assert!(heartbeats_hot > 0, "no heartbeat was a HOT update");
    // And the rule that makes them HOT: no index of the table holds the lease deadline.
    let indexes = t
        .admin
        .query(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'jobs'",
            &[&t.schema],
        )
        .await
        .unwrap();
    for row in indexes {
        let def: String = row.get(0);
        for column in ["lease_deadline", "state", "token", "attempts"] {
            assert!(!def.contains(column), "{def}");
        }
    }
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_and_claim_is_one_transaction() {
    let t = store_or_skip!("onetx");
    t.store
        .enqueue_many((0..4).map(|i| NewJob::new("q", "k", vec![i])).collect())
        .await
        .unwrap();
    let jobs = t.store.claim("q", 2, LEASE).await.unwrap();
    // A claim the server refuses undoes the settlement: a trigger of this test's schema
    // fails every claim of the queue "trap" (an update of one of its jobs).
    t.store
        .enqueue(NewJob::new("trap", "k", vec![]))
        .await
        .unwrap();
    let schema = &t.schema;
    t.admin
        .batch_execute(&format!(
            "CREATE FUNCTION \"{schema}\".trap() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'the trap queue refuses claims'; END $$;
             CREATE TRIGGER trap BEFORE UPDATE ON \"{schema}\".jobs FOR EACH ROW \
             WHEN (NEW.queue = 'trap') EXECUTE FUNCTION \"{schema}\".trap();"
        ))
        .await
        .unwrap();
    let batch: Vec<Finished> = jobs.iter().map(|j| Finished::new(j, Ok(()))).collect();
    let err = t
        .store
        .settle_and_claim(batch.clone(), "trap", 2, LEASE)
        .await
        .expect_err("the claim fails");
    assert!(!err.is_transient(), "{err}");
    assert!(err.to_string().contains("refuses claims"), "{err}");
    for job in &jobs {
        let info = t.store.get(job.claim.id).await.unwrap().unwrap();
        assert_eq!(info.status(), JobStatus::Running, "nothing was settled");
    }
    // The same batch then settles, and the next jobs are claimed with it.
    let out = t
        .store
        .settle_and_claim(batch, "q", 2, LEASE)
        .await
        .unwrap();
    assert!(out
        .settled
        .iter()
        .all(|a| matches!(a, Ok(Settled::Succeeded))));
    assert_eq!(out.claimed.unwrap().len(), 2);
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_released_by_a_settlement_is_claimed_with_it() {
    let t = store_or_skip!("depclaim");
    let parent = t
        .store
        .enqueue(NewJob::new("q", "k", vec![1]))
        .await
        .unwrap();
    let child = t
        .store
        .enqueue(NewJob::new("q", "k", vec![2]).after(parent))
        .await
        .unwrap();
    let running = t.store.claim("q", 1, LEASE).await.unwrap().remove(0);
    assert_eq!(running.claim.id, parent);
    let out = t
        .store
        .settle_and_claim(vec![Finished::new(&running, Ok(()))], "q", 5, LEASE)
        .await
        .unwrap();
    let claimed = out.claimed.unwrap();
    assert_eq!(
        claimed.len(),
        1,
        "the released dependent is claimable at once"
    );
    assert_eq!(claimed[0].claim.id, child);
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_promote_only_when_they_know_a_job_can_be_due() {
    let t = store_or_skip!("due");
    // A store without a listener that believes what it read for an hour.
    let deaf = another_store(
        &t,
        PgOptions::default()
            .listen(false)
            .poll_interval(Duration::from_secs(3_600)),
    )
    .await;
    // A store with a listener.
    let listening = another_store(&t, PgOptions::default()).await;
    assert!(deaf.claim("q", 1, LEASE).await.unwrap().is_empty());
    tokio::time::timeout(fairq_worker::conformance::PATIENCE, async {
        while !listening.is_listening() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the listener started");
    assert!(listening.claim("q", 1, LEASE).await.unwrap().is_empty());

    // The test store enqueues a job due in a second; both other stores believe nothing waits.
    let id = t
        .store
        .enqueue(NewJob::new("q", "k", vec![]).delay(Duration::from_secs(1)))
        .await
        .unwrap();
    t.clock.advance(Duration::from_secs(1));
    // The deaf store does not promote: it never heard of the job, and its reading is fresh.
    assert!(deaf.claim("q", 1, LEASE).await.unwrap().is_empty());
    // The listening store heard of it on the due channel, and promotes once it is due.
    let claimed = tokio::time::timeout(fairq_worker::conformance::PATIENCE, async {
        loop {
            let jobs = listening.claim("q", 1, LEASE).await.unwrap();
            if let Some(job) = jobs.into_iter().next() {
                return job;
            }
            listening
                .wait_for_jobs("q", Duration::from_millis(50))
                .await;
        }
    })
    .await
    .expect("the listening store claimed the delayed job");
    assert_eq!(claimed.claim.id, id);
    drop((deaf, listening));

    // Without a listener, a store looks again once its reading is older than its polling
    // interval.
    let polling = another_store(
        &t,
        PgOptions::default()
            .listen(false)
            .poll_interval(Duration::ZERO),
    )
    .await;
    assert!(polling.claim("q", 1, LEASE).await.unwrap().is_empty());
    let id = t
        .store
        .enqueue(NewJob::new("q", "k", vec![]).delay(Duration::from_secs(1)))
        .await
        .unwrap();
    t.clock.advance(Duration::from_secs(1));
    let jobs = polling.claim("q", 1, LEASE).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].claim.id, id);
    t.cleanup().await;
}

/// A blocked job waits in `jobs_waiting` (whose predicate no longer tests the state, so that
/// claims stay HOT updates) with a due time past every other: a promotion's scan of the due
/// jobs, which stops at `now`, never reaches it, and the earliest due time a store reads is
/// a real job's. Its dependency's success gives it a real due time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_jobs_wait_after_every_due_time() {
    let t = store_or_skip!("blockeddue");
    let parent = t
        .store
        .enqueue(NewJob::new("q", "k", vec![]))
        .await
        .unwrap();
    let child = t
        .store
        .enqueue(NewJob::new("q", "k", vec![]).after(parent))
        .await
        .unwrap();
    let delayed = t
        .store
        .enqueue(NewJob::new("q", "k", vec![]).delay(Duration::from_secs(5)))
        .await
        .unwrap();
    let due_at = |id: fairq_worker::JobId| {
        let (admin, schema) = (&t.admin, t.schema.clone());
        async move {
            let row = admin
                .query_one(
                    &format!("SELECT due_at FROM \"{schema}\".jobs WHERE id = $1"),
                    &[&(id.0 as i64)],
                )
                .await
                .unwrap();
            row.get::<_, i64>(0)
        }
    };
    assert_eq!(due_at(child).await, i64::MAX);
    let earliest: Option<i64> = t
        .admin
        .query_one(
            &format!(
                "SELECT min(due_at) FROM \"{}\".jobs WHERE queue = 'q' AND round IS NULL",
                t.schema
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        earliest,
        Some(due_at(delayed).await),
        "the delayed job is due first"
    );
    let jobs = t.store.claim("q", 10, LEASE).await.unwrap();
    assert_eq!(jobs.len(), 1, "only the parent is ready: {jobs:?}");
    t.store.complete(jobs[0].claim).await.unwrap();
    assert!(
        due_at(child).await < i64::MAX,
        "released with a real due time"
    );
    let next = t.store.claim("q", 10, LEASE).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].claim.id, child);
    t.cleanup().await;
}

/// Every row of the schema's job tables, as text, in a stable order.
async fn job_tables(t: &common::TestStore) -> Vec<String> {
    let mut rows = Vec::new();
    for table in ["jobs", "rounds", "ghosts", "archive"] {
        let query = format!(
            "SELECT coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '') \
             FROM \"{}\".{table} t",
            t.schema
        );
        let text: String = t.admin.query_one(&query, &[]).await.unwrap().get(0);
        rows.push(format!("{table}:\n{text}"));
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warming_up_opens_the_connections_and_changes_no_row() {
    let t = store_or_skip!("warm", PgOptions::default().pool_size(3));
    t.store
        .enqueue_many(
            (0..6)
                .map(|i| NewJob::new("q", "k", vec![i]).key(format!("tenant-{}", i % 2)))
                .collect(),
        )
        .await
        .unwrap();
    let before = job_tables(&t).await;
    // Asked for more calls than the pool holds: it opens the whole pool and no more.
    t.store.warm_up(10).await.unwrap();
    let status = t.store.pool().status();
    assert_eq!((status.size, status.available), (3, 3), "{status:?}");
    assert_eq!(
        job_tables(&t).await,
        before,
        "a claim of no job and a settlement of nothing leave every row as it was"
    );
    // The queue is served as if nothing had happened: all six, in the fair order.
    let jobs = t.store.claim("q", 10, LEASE).await.unwrap();
    let keys: Vec<_> = jobs.iter().filter_map(|j| j.key.as_deref()).collect();
    assert_eq!(keys, ["tenant-0", "tenant-1"].repeat(3));
    t.cleanup().await;
}

/// Index scans of `jobs_ready` and of `jobs_key_tail` the server has counted, and the jobs
/// table's inserts and updates, once they reach `inserts` and `updates` (a backend reports
/// its counters when it exits, so the stores counted are dropped first).
async fn scans_once(t: &common::TestStore, inserts: i64, updates: i64) -> (i64, i64) {
    let tables = "SELECT n_tup_ins, n_tup_upd FROM pg_stat_user_tables \
                  WHERE schemaname = $1 AND relname = 'jobs'";
    let indexes = "SELECT indexrelname::text, idx_scan FROM pg_stat_user_indexes \
                   WHERE schemaname = $1 AND indexrelname IN ('jobs_ready', 'jobs_key_tail')";
    tokio::time::timeout(fairq_worker::conformance::PATIENCE, async {
        loop {
            let row = t.admin.query_one(tables, &[&t.schema]).await.unwrap();
            if row.get::<_, i64>(0) >= inserts && row.get::<_, i64>(1) >= updates {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the server reported the table's counters");
    let mut scans = (0, 0);
    for row in t.admin.query(indexes, &[&t.schema]).await.unwrap() {
        match row.get::<_, String>(0).as_str() {
            "jobs_ready" => scans.0 = row.get(1),
            _ => scans.1 = row.get(1),
        }
    }
    scans
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_claim_walks_the_ready_index_without_statistics() {
    let t = store_or_skip!("walk");
    // No statistics: the table is never analyzed during the test.
    t.admin
        .batch_execute(&format!(
            "ALTER TABLE \"{}\".jobs SET (autovacuum_enabled = false)",
            t.schema
        ))
        .await
        .unwrap();
    let producer = another_store(&t, PgOptions::default().pool_size(1)).await;
    for chunk in 0..20 {
        let jobs = (0..1_000)
            .map(|i| {
                NewJob::new("q", "k", vec![7; 128]).key(format!("tenant-{}", (chunk + i) % 16))
            })
            .collect();
        producer.enqueue_many(jobs).await.unwrap();
    }
    drop(producer);
    let before = scans_once(&t, 20_000, 0).await;
    // Claims as the worker makes them: with stale statistics the planner read all 20,000
    // ready jobs through `jobs_key_tail` and sorted them (a bitmap scan) for any claim of
    // 128 jobs or more, instead of walking `jobs_ready` in order.
    let worker = another_store(&t, PgOptions::default().pool_size(1)).await;
    let claimed = worker.claim("q", 544, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 544);
    let settled = succeed_and_claim(&worker, &claimed, 544).await;
    assert_eq!(settled.claimed.unwrap().len(), 544);
    drop(worker);
    let after = scans_once(&t, 20_000, 1_088).await;
    assert_eq!(after.0 - before.0, 2, "each claim walked jobs_ready once");
    assert_eq!(after.1, before.1, "no claim read jobs_key_tail");
    let plan = t.store.explain_claim("q", 544).await.unwrap();
    assert!(plan.contains("Index Scan using jobs_ready"), "{plan}");
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_and_settlements_run_the_connections_generic_plans() {
    let t = store_or_skip!("generic");
    // The store's one connection is this pool's, so the test can look at the server's
    // count of custom and generic plans of each statement prepared on it.
    let config: tokio_postgres::Config = common::url().parse().unwrap();
    let pool = deadpool_postgres::Pool::builder(deadpool_postgres::Manager::new(
        config,
        tokio_postgres::NoTls,
    ))
    .max_size(1)
    .runtime(deadpool_postgres::Runtime::Tokio1)
    .build()
    .unwrap();
    let store = PgBackend::from_pool(
        pool.clone(),
        PgOptions::default()
            .schema(&t.schema)
            .clock(t.clock.clone()),
    )
    .unwrap();
    let jobs = (0..12)
        .map(|i| NewJob::new("q", "k", vec![]).key(format!("tenant-{}", i % 3)))
        .collect();
    store.enqueue_many(jobs).await.unwrap();
    // The warm-up plans both statements as the calls after it run them.
    store.warm_up(1).await.unwrap();
    // Past the five executions after which the server would first consider a generic plan.
    let mut claimed = Vec::new();
    for _ in 0..8 {
        claimed.extend(store.claim("q", 1, LEASE).await.unwrap());
    }
    let settled = succeed_and_claim(&store, &claimed, 2).await;
    let last = settled.claimed.unwrap();
    assert_eq!(last.len(), 2);
    // Settlements on their own (the rest of the batch is settled with the claim above).
    for job in last {
        store.complete(job.claim).await.unwrap();
    }
    assert_eq!(
        store
            .get(claimed[0].claim.id)
            .await
            .unwrap()
            .unwrap()
            .status(),
        JobStatus::Succeeded
    );
    let keys: Vec<_> = claimed.iter().map(|j| j.key.clone().unwrap()).collect();
    assert_eq!(
        keys[..3],
        ["tenant-0", "tenant-1", "tenant-2"],
        "fair order"
    );
    let client = pool.get().await.unwrap();
    // The pattern is a parameter, so this query's own text does not match it.
    let plans = |pattern: &'static str| {
        let client = &client;
        async move {
            let row = client
                .query_one(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements \
                     WHERE statement LIKE $1",
                    &[&pattern],
                )
                .await
                .unwrap();
            (row.get::<_, i64>(0), row.get::<_, i64>(1))
        }
    };
    let claim = plans("%picked AS (%ctid AS at%").await;
    assert_eq!(claim, (10, 0), "every claim ran the generic plan");
    let settle = plans("%AS t(id, token, verdict,%").await;
    assert_eq!(settle, (4, 0), "every settlement ran the generic plan");
    drop(client);
    drop(store);
    t.cleanup().await;
}

/// Holding retries makes jobs wait (a held retry that had its place gives it up): like every
/// statement that makes a job wait, it tells the other stores on the due channel, so a store
/// that believed nothing waits promotes the held retry once its time comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_stores_hear_of_held_retries() {
    let t = store_or_skip!("holdnotify");
    let listening = another_store(&t, PgOptions::default()).await;
    tokio::time::timeout(fairq_worker::conformance::PATIENCE, async {
        while !listening.is_listening() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the listener started");
    let policy =
        fairq_core::retry::RetryPolicy::new(5).with_backoff(fairq_core::retry::Backoff::Immediate);
    let id = t
        .store
        .enqueue(NewJob::new("q", "k", vec![]).retry(policy))
        .await
        .unwrap();
    // The listening store runs the job and retries it at once: it gets its place again, and
    // the store's promotion sees nothing left waiting.
    let job = listening.claim("q", 1, LEASE).await.unwrap().remove(0);
    listening
        .fail(&job, fairq_worker::Failure::retryable("down"))
        .await
        .unwrap();
    // Another store holds it back for a second.
    let until = fairq_worker::Clock::now(&t.clock) + 1_000;
    assert_eq!(t.store.hold_retries("q", until).await.unwrap(), 1);
    t.clock.advance(Duration::from_secs(1));
    let claimed = tokio::time::timeout(fairq_worker::conformance::PATIENCE, async {
        loop {
            let jobs = listening.claim("q", 1, LEASE).await.unwrap();
            if let Some(job) = jobs.into_iter().next() {
                return job;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the listening store claimed the held retry");
    assert_eq!(claimed.claim.id, id);
    t.cleanup().await;
}
