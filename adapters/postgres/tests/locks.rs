//! Row locks held by other sessions: the store's statements wait for them without
//! deadlocking each other, report the server's giving up as transient, and hold as few and as
//! weak locks as their guarantees need. Every wait is set up with locks held by the test's own
//! transactions and observed through `pg_blocking_pids`, never by sleeping.

mod common;

use std::time::Duration;

use fairq_postgres::PgOptions;
use fairq_worker::{Backend, Finished, Inspect, JobStatus, NewJob, Purge, Settled};

const LEASE: Duration = Duration::from_secs(30);

/// Far longer than any step of these tests takes: reached only by a hang.
const HANG: Duration = Duration::from_secs(60);

async fn own_connection() -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&common::url(), tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}

/// A connection driven by a runtime on a thread of its own: it keeps working (and a lock it
/// holds ends when the client is dropped) while the test's own thread is blocked, as when a
/// test on a single-threaded runtime fails and drops its schema.
async fn connection_on_its_own_thread() -> tokio_postgres::Client {
    let (sender, client) = tokio::sync::oneshot::channel();
    let url = common::url();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        runtime.block_on(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("connect");
            let _ = sender.send(client);
            let _ = connection.await;
        });
    });
    client.await.expect("connected")
}

async fn pid(client: &tokio_postgres::Client) -> i32 {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0)
}

/// Waits until at least `n` sessions running a statement on `schema` wait for a lock.
async fn sessions_wait(observer: &tokio_postgres::Client, schema: &str, n: i64) {
    let pattern = format!("%\"{schema}\".%");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let row = observer
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE cardinality(pg_blocking_pids(pid)) > 0 AND query LIKE $1",
                &[&pattern],
            )
            .await
            .expect("read the lock waits");
        if row.get::<_, i64>(0) >= n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "fewer than {n} sessions waited for a lock"
        );
        tokio::task::yield_now().await;
    }
}

/// A worker extends the leases of its jobs while it settles some of them: both wait for a
/// row another session holds, and neither may then wait for the other in a circle (the
/// server would abort one as a deadlock's victim: the heartbeat here, which began to wait
/// first, and whose failure fails the whole call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_and_a_settlement_of_the_same_jobs_do_not_deadlock() {
    let t = store_or_skip!("hbsettle");
    t.store
        .enqueue_many((0..3).map(|i| NewJob::new("q", "k", vec![i])).collect())
        .await
        .unwrap();
    // Enough other jobs, and statistics that know of them, for the plans a real table gets:
    // each entry looked up by primary key, in the order the statement was given them (on a
    // table of a few rows the planner reads the whole table instead, in its own order).
    t.store
        .enqueue_many(
            (0..2_000)
                .map(|_| NewJob::new("other", "k", vec![]))
                .collect(),
        )
        .await
        .unwrap();
    t.admin
        .batch_execute(&format!("ANALYZE \"{}\".jobs", t.schema))
        .await
        .unwrap();
    let jobs = t.store.claim("q", 3, LEASE).await.unwrap();
    assert_eq!(jobs.len(), 3);
    let [j1, j2, j3] = [jobs[0].claim, jobs[1].claim, jobs[2].claim];
    assert!(j1.id < j2.id && j2.id < j3.id);

    // Another session holds the row of j3.
    let holder = own_connection().await;
    let holder_pid = pid(&holder).await;
    holder
        .batch_execute(&format!(
            "BEGIN; SELECT id FROM \"{}\".jobs WHERE id = {} FOR UPDATE",
            t.schema, j3.id.0
        ))
        .await
        .unwrap();

    // The settlement and the heartbeat name their jobs in the worker's order, not the ids'.
    let settler = t.store.clone();
    let settle = tokio::spawn(async move {
        settler
            .settle(vec![
                Finished::succeeded(j2),
                Finished::succeeded(j3),
                Finished::succeeded(j1),
            ])
            .await
    });
    common::someone_waits_for(&t.admin, holder_pid).await;
    let beater = t.store.clone();
    let beat = tokio::spawn(async move { beater.heartbeat_many(vec![j1, j2], LEASE).await });
    // The heartbeat waits for a row the settlement holds.
    sessions_wait(&t.admin, &t.schema, 2).await;
    holder.batch_execute("COMMIT").await.unwrap();

    let settled = tokio::time::timeout(HANG, settle)
        .await
        .expect("the settlement ended")
        .unwrap()
        .expect("the settlement did not fail");
    let beats = tokio::time::timeout(HANG, beat)
        .await
        .expect("the heartbeat ended")
        .unwrap()
        .expect("the heartbeat did not fail");
    assert!(
        settled.iter().all(|a| matches!(a, Ok(Settled::Succeeded))),
        "{settled:?}"
    );
    // The settlement went first: the heartbeat found the jobs finished.
    assert_eq!(beats.len(), 2);
    assert!(beats.iter().all(Result::is_err), "{beats:?}");
    t.cleanup().await;
}

/// A lock the server gave up waiting for (`lock_timeout`, SQLSTATE 55P03) is transient: the
/// same call may succeed once the lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_timeout_is_transient() {
    let t = store_or_skip!("locktimeout");
    let dependency = t
        .store
        .enqueue(NewJob::new("q", "k", vec![]))
        .await
        .unwrap();
    let holder = own_connection().await;
    holder
        .batch_execute(&format!(
            "BEGIN; SELECT id FROM \"{}\".jobs WHERE id = {} FOR UPDATE",
            t.schema, dependency.0
        ))
        .await
        .unwrap();
    let mut client = own_connection().await;
    let tx = client.transaction().await.unwrap();
    // The lock is held until this test lets it go, so the timeout always passes.
    tx.batch_execute("SET LOCAL lock_timeout = '50ms'")
        .await
        .unwrap();
    let err = t
        .store
        .enqueue_in(&tx, NewJob::new("q", "k", vec![]).after(dependency))
        .await
        .expect_err("the dependency's row is locked");
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("55P03"), "{err}");
    drop(tx);
    holder.batch_execute("COMMIT").await.unwrap();
    t.cleanup().await;
}

/// A dependent's enqueue in an open transaction keeps its dependency from finishing, but not
/// from having its lease extended: the worker's heartbeat of the dependency (and of the
/// other jobs in the same call) goes through while the caller's transaction stays open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_enqueue_of_a_dependent_does_not_hold_up_heartbeats() {
    let t = store_or_skip!("depbeat");
    t.store
        .enqueue_many((0..2).map(|i| NewJob::new("q", "k", vec![i])).collect())
        .await
        .unwrap();
    let jobs = t.store.claim("q", 2, LEASE).await.unwrap();
    let (j1, j2) = (jobs[0].claim, jobs[1].claim);
    // j1 already has a dependent.
    t.store
        .enqueue(NewJob::new("later", "k", vec![]).after(j1.id))
        .await
        .unwrap();

    let mut client = own_connection().await;
    let tx = client.transaction().await.unwrap();
    t.store
        .enqueue_in(&tx, NewJob::new("later", "k", vec![]).after(j1.id))
        .await
        .unwrap();
    // A job with a unique key looks its dependency up and marks it in two statements.
    t.store
        .enqueue_in(
            &tx,
            NewJob::new("later", "k", vec![])
                .after(j1.id)
                .unique("u", fairq_worker::OnConflict::Error),
        )
        .await
        .unwrap();
    t.clock.advance(Duration::from_secs(1));
    let beats = tokio::time::timeout(HANG, t.store.heartbeat_many(vec![j2, j1], LEASE))
        .await
        .expect("the heartbeat does not wait for the enqueue's transaction")
        .unwrap();
    assert!(beats.iter().all(Result::is_ok), "{beats:?}");
    tx.commit().await.unwrap();
    t.cleanup().await;
}

/// The lock an open enqueue of a dependent holds on its dependency still keeps the dependency
/// from finishing before the dependent commits: the settlement waits, and then (even in a store
/// that does not keep succeeded jobs) archives the dependency, so the dependent is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependency_does_not_finish_under_an_open_enqueue_of_its_dependent() {
    let t = store_or_skip!(
        "depfinish",
        fairq_postgres::PgOptions::default()
            .pool_size(8)
            .keep_succeeded(false)
    );
    t.store
        .enqueue(NewJob::new("q", "k", vec![]))
        .await
        .unwrap();
    let parent = t.store.claim("q", 1, LEASE).await.unwrap().remove(0);
    let first = t
        .store
        .enqueue(NewJob::new("later", "k", vec![]).after(parent.claim.id))
        .await
        .unwrap();

    let mut client = own_connection().await;
    let tx_pid = pid(&client).await;
    let tx = client.transaction().await.unwrap();
    let second = t
        .store
        .enqueue_in(
            &tx,
            NewJob::new("later", "k", vec![]).after(parent.claim.id),
        )
        .await
        .unwrap();
    let settler = t.store.clone();
    let claim = parent.claim;
    let settle =
        tokio::spawn(async move { settler.settle(vec![Finished::succeeded(claim)]).await });
    common::someone_waits_for(&t.admin, tx_pid).await;
    tx.commit().await.unwrap();
    let settled = tokio::time::timeout(HANG, settle)
        .await
        .expect("the settlement ended")
        .unwrap()
        .unwrap();
    assert!(matches!(settled[0], Ok(Settled::Succeeded)), "{settled:?}");
    let info = t.store.get(parent.claim.id).await.unwrap();
    assert_eq!(
        info.expect("archived").status(),
        fairq_worker::JobStatus::Succeeded,
        "a dependency with dependents is archived"
    );
    // The rescue pass releases a dependent the settlement's snapshot did not see.
    t.store.rescue("later").await.unwrap();
    let ready: Vec<_> = t
        .store
        .claim("later", 10, LEASE)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.claim.id)
        .collect();
    assert_eq!(ready, vec![first, second]);
    t.cleanup().await;
}

/// A job that died long ago, in queue `queue`: claimed and failed for good, then the clock
/// moves on two hours.
async fn old_dead_job(t: &common::TestStore, queue: &str) -> fairq_worker::JobId {
    t.store
        .enqueue(NewJob::new(queue, "k", vec![]))
        .await
        .unwrap();
    let job = t.store.claim(queue, 1, LEASE).await.unwrap().remove(0);
    t.store
        .fail(&job, fairq_worker::Failure::permanent("no"))
        .await
        .unwrap();
    t.clock.advance(Duration::from_secs(7_200));
    job.claim.id
}

/// A prune waits for the archive row an open enqueue of a dependent of a dead job holds; once
/// the dependent commits, the dead job has a job waiting for it and is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prune_keeps_a_dead_job_whose_dependent_committed_while_it_waited() {
    let t = store_or_skip!("prunewait");
    let dead = old_dead_job(&t, "q").await;
    let mut client = own_connection().await;
    let tx_pid = pid(&client).await;
    let tx = client.transaction().await.unwrap();
    let dependent = t
        .store
        .enqueue_in(&tx, NewJob::new("q", "k", vec![]).after(dead))
        .await
        .unwrap();
    let pruner = t.store.clone();
    let hour = Duration::from_secs(3_600);
    let prune = tokio::spawn(async move {
        pruner
            .prune(fairq_worker::Retention::finished(hour).dead_for(hour))
            .await
    });
    common::someone_waits_for(&t.admin, tx_pid).await;
    tx.commit().await.unwrap();
    let pruned = tokio::time::timeout(HANG, prune)
        .await
        .expect("the prune ended")
        .unwrap()
        .unwrap();
    assert_eq!(pruned, 0);
    let kept = t.store.get(dead).await.unwrap();
    assert_eq!(
        kept.map(|j| j.status()),
        Some(fairq_worker::JobStatus::Dead),
        "the dead job a committed job waits for was pruned"
    );
    let waiting = t.store.get(dependent).await.unwrap().expect("committed");
    assert_eq!(waiting.status(), fairq_worker::JobStatus::Blocked);
    // Once nothing waits for it, it goes.
    t.store
        .purge(fairq_worker::Purge {
            queue: Some("q".into()),
            status: Some(fairq_worker::JobStatus::Blocked),
        })
        .await
        .unwrap();
    let pruned = t
        .store
        .prune(fairq_worker::Retention::finished(hour).dead_for(hour))
        .await
        .unwrap();
    assert_eq!(pruned, 1);
    assert!(t.store.get(dead).await.unwrap().is_none());
    t.cleanup().await;
}

/// The removal of a queue whose only job is dead waits for the archive row an open enqueue of
/// a dependent into the queue holds; once the dependent commits, the queue has a live job:
/// the removal is refused and the dead job kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_is_not_removed_under_a_dependent_that_committed_while_it_waited() {
    let t = store_or_skip!("removewait");
    let dead = old_dead_job(&t, "q").await;
    let mut client = own_connection().await;
    let tx_pid = pid(&client).await;
    let tx = client.transaction().await.unwrap();
    let dependent = t
        .store
        .enqueue_in(&tx, NewJob::new("q", "k", vec![]).after(dead))
        .await
        .unwrap();
    let remover = t.store.clone();
    let removal = tokio::spawn(async move { remover.remove_queue("q").await });
    common::someone_waits_for(&t.admin, tx_pid).await;
    tx.commit().await.unwrap();
    let removed = tokio::time::timeout(HANG, removal)
        .await
        .expect("the removal ended")
        .unwrap();
    match removed {
        Err(fairq_worker::BackendError::QueueNotEmpty { live, .. }) => assert_eq!(live, 1),
        other => panic!("the removal answered {other:?}"),
    }
    let kept = t.store.get(dead).await.unwrap();
    assert_eq!(
        kept.map(|j| j.status()),
        Some(fairq_worker::JobStatus::Dead)
    );
    let waiting = t.store.get(dependent).await.unwrap().expect("committed");
    assert_eq!(waiting.status(), fairq_worker::JobStatus::Blocked);
    t.cleanup().await;
}

/// An idle worker whose queue's only ready job is locked by another session does not claim in
/// a loop: once a claim came back empty after the job looked ready, its next wait sleeps
/// until a notification names the queue (the polling interval here is a minute).
///
/// Deterministic on one thread: the wait's look at the queue is held up by a lock on the
/// `paused` table until the test lets it go, and the look is over once the wait gives its
/// pooled connection back; in the same poll the wait either returns or begins to sleep. The
/// sessions holding locks run on threads of their own, so a failure ends them.
#[tokio::test]
async fn a_wait_does_not_return_for_a_ready_job_another_session_holds() {
    let t = store_or_skip!(
        "nospin",
        fairq_postgres::PgOptions::default()
            .pool_size(2)
            .poll_interval(Duration::from_secs(60))
    );
    let locked = t
        .store
        .enqueue(NewJob::new("q", "k", vec![]))
        .await
        .unwrap();
    let holder = connection_on_its_own_thread().await;
    holder
        .batch_execute(&format!(
            "BEGIN; SELECT id FROM \"{}\".jobs WHERE id = {} FOR UPDATE",
            t.schema, locked.0
        ))
        .await
        .unwrap();

    // A worker's loop: the claim passes over the locked job, the job looks ready, so the
    // wait returns at once; the next claim takes nothing again.
    assert!(t.store.claim("q", 1, LEASE).await.unwrap().is_empty());
    tokio::time::timeout(HANG, t.store.wait_for_jobs("q", HANG))
        .await
        .expect("the first wait returns at once: the job looks ready");
    assert!(t.store.claim("q", 1, LEASE).await.unwrap().is_empty());
    // No wake-up of the listener's start may end the wait below.
    let deadline = tokio::time::Instant::now() + HANG;
    while !t.store.is_listening() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the listener never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // Hold the next wait's look at the queue until it is known to be under way.
    let gate = connection_on_its_own_thread().await;
    let gate_pid = pid(&gate).await;
    gate.batch_execute(&format!(
        "BEGIN; LOCK TABLE \"{}\".paused IN ACCESS EXCLUSIVE MODE",
        t.schema
    ))
    .await
    .unwrap();
    let store = t.store.clone();
    let wait = tokio::spawn(async move { store.wait_for_jobs("q", HANG).await });
    common::someone_waits_for(&t.admin, gate_pid).await;
    gate.batch_execute("COMMIT").await.unwrap();
    // The look is over once its connection is back in the pool.
    let pool = t.store.pool();
    while pool.status().available < pool.status().size {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the look never ended"
        );
        tokio::task::yield_now().await;
    }
    assert!(
        !wait.is_finished(),
        "the wait returned at once for a job no claim can take"
    );
    // A notification of the queue ends it.
    t.admin
        .execute(
            "SELECT pg_notify($1, 'q')",
            &[&format!("fairq_{}", t.schema)],
        )
        .await
        .unwrap();
    tokio::time::timeout(HANG, wait)
        .await
        .expect("the notification ended the wait")
        .unwrap();

    holder.batch_execute("COMMIT").await.unwrap();
    let jobs = t.store.claim("q", 1, LEASE).await.unwrap();
    assert_eq!(jobs.len(), 1, "the job is claimed once its row is free");
    t.cleanup().await;
}

/// Waits until at least `n` sessions wait for a lock the session `holder` holds; returns
/// their backend ids.
async fn waiters_of(observer: &tokio_postgres::Client, holder: i32, n: usize) -> Vec<i32> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let pids: Vec<i32> = observer
            .query(
                "SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                &[&holder],
            )
            .await
            .expect("read the lock waits")
            .iter()
            .map(|r| r.get(0))
            .collect();
        if pids.len() >= n {
            return pids;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "fewer than {n} sessions waited for a lock of {holder}"
        );
        tokio::task::yield_now().await;
    }
}

/// `settle_and_claim` commits the settlement and the claim together, then explains the
/// entries the settlement refused, which can take another statement (an entry refused
/// because its job changed under the statement is sent again). When that statement fails,
/// the claimed jobs are still handed over (else they would wait for their leases to
/// expire), and the entry whose outcome is unknown says so.
///
/// The statement sent again is made to wait (a trigger of the test holds every `DELETE` on
/// the jobs table after the first until the test lets go of a lock) and is then cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_claimed_with_a_settlement_are_handed_over_when_its_answer_fails() {
    let t = store_or_skip!("claimkept");
    t.store
        .enqueue(NewJob::new("q", "k", vec![1]))
        .await
        .unwrap();
    let x = t.store.claim("q", 1, LEASE).await.unwrap().remove(0);
    let y = t
        .store
        .enqueue(NewJob::new("q", "k", vec![2]))
        .await
        .unwrap();
    t.admin
        .batch_execute(&format!(
            r#"
            CREATE SEQUENCE "{s}".deletes;
            CREATE FUNCTION "{s}".later_deletes_wait() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF nextval('"{s}".deletes') >= 2 THEN
                    PERFORM pg_advisory_xact_lock(hashtextextended('{s}', 7));
                END IF;
                RETURN NULL;
            END $$;
            CREATE TRIGGER later_deletes_wait BEFORE DELETE ON "{s}".jobs
                FOR EACH STATEMENT EXECUTE FUNCTION "{s}".later_deletes_wait();
            "#,
            s = t.schema
        ))
        .await
        .unwrap();
    let gate = connection_on_its_own_thread().await;
    let gate_pid = pid(&gate).await;
    gate.execute(
        "SELECT pg_advisory_lock(hashtextextended($1, 7))",
        &[&t.schema],
    )
    .await
    .unwrap();

    // Another session changes the job (its token) under the settlement: the settlement
    // waits for it, then finds the job changed and refuses the entry, though the
    // statement's own look at the job (its snapshot) shows it as the entry expects, so the
    // entry is sent again.
    let changer = connection_on_its_own_thread().await;
    let changer_pid = pid(&changer).await;
    changer
        .batch_execute(&format!(
            "BEGIN; UPDATE \"{}\".jobs SET token = token + 1 WHERE id = {}",
            t.schema, x.claim.id.0
        ))
        .await
        .unwrap();
    let store = t.store.clone();
    let claim = x.claim;
    let both = tokio::spawn(async move {
        store
            .settle_and_claim(vec![Finished::succeeded(claim)], "q", 1, LEASE)
            .await
    });
    common::someone_waits_for(&t.admin, changer_pid).await;
    changer.batch_execute("COMMIT").await.unwrap();
    // The entry sent again waits for the gate: cancel it.
    for pid in waiters_of(&t.admin, gate_pid, 1).await {
        t.admin
            .execute("SELECT pg_cancel_backend($1)", &[&pid])
            .await
            .unwrap();
    }
    let both = tokio::time::timeout(HANG, both)
        .await
        .expect("settle_and_claim ended")
        .unwrap()
        .expect("the claim committed: settle_and_claim answers");
    let claimed = both.claimed.expect("the claimed jobs");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].claim.id, y);
    assert_eq!(both.settled.len(), 1);
    let unknown = both.settled[0]
        .as_ref()
        .expect_err("the entry's outcome is unknown");
    assert!(unknown.is_transient(), "{unknown}");
    drop(gate);
    t.cleanup().await;
}

/// A purge or cancel that deletes a job's last known dependent while another dependent's
/// enqueue is open in a caller's transaction leaves the job marked as having dependents, and
/// does not wait for that transaction. The open enqueue read the mark already set and wrote
/// nothing; a mark cleared under it (the new dependent not yet visible) would let the job's
/// success be deleted when recorded, releasing no one: the dependent blocked for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_or_cancel_keeps_the_mark_of_a_job_an_open_enqueue_names() {
    let t = store_or_skip!(
        "depmark",
        PgOptions::default().pool_size(4).keep_succeeded(false)
    );
    for cancel in [false, true] {
        let dep = t
            .store
            .enqueue(NewJob::new("q", "k", vec![]))
            .await
            .unwrap();
        let first = t
            .store
            .enqueue(NewJob::new("first", "k", vec![]).after(dep))
            .await
            .unwrap();
        let mut client = own_connection().await;
        let tx = client.transaction().await.unwrap();
        let late = t
            .store
            .enqueue_in(&tx, NewJob::new("late", "k", vec![]).after(dep))
            .await
            .unwrap();
        let delete = async {
            if cancel {
                t.store.cancel(first).await.map(|()| 1)
            } else {
                t.store
                    .purge(Purge {
                        queue: Some("first".into()),
                        status: None,
                    })
                    .await
            }
        };
        let deleted = tokio::time::timeout(HANG, delete)
            .await
            .expect("the delete does not wait for the open enqueue")
            .unwrap();
        assert_eq!(deleted, 1, "cancel: {cancel}");
        tx.commit().await.unwrap();
        let jobs = t.store.claim("q", 1, LEASE).await.unwrap();
        assert_eq!(jobs.len(), 1);
        t.store.complete(jobs[0].claim).await.unwrap();
        assert_eq!(
            t.store.get(late).await.unwrap().map(|i| i.status()),
            Some(JobStatus::Scheduled),
            "the dependent enqueued meanwhile is released (cancel: {cancel})"
        );
        assert_eq!(
            t.store.get(dep).await.unwrap().map(|i| i.status()),
            Some(JobStatus::Succeeded),
            "the success is kept for it (cancel: {cancel})"
        );
        let gone = t
            .store
            .purge(Purge {
                queue: Some("late".into()),
                status: None,
            })
            .await
            .unwrap();
        assert_eq!(gone, 1);
    }
    t.cleanup().await;
}
