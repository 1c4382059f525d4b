//! Enqueueing inside the caller's transaction, and the wake-ups that follow a commit.

mod common;

use std::time::Duration;

use fairq_postgres::Producer;
use fairq_worker::{Backend, BackendError, ListFilter, NewJob, OnConflict};

const LEASE: Duration = Duration::from_secs(30);

async fn own_connection() -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&common::url(), tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_job_runs_and_is_invisible_until_the_commit() {
    let t = store_or_skip!("commit");
    let mut client = own_connection().await;
    let producer = t.store.producer();
    let tx = client.transaction().await.unwrap();
    tx.batch_execute("CREATE TEMP TABLE orders (id int)")
        .await
        .unwrap();
    tx.execute("INSERT INTO orders VALUES (1)", &[])
        .await
        .unwrap();
    let id = producer
        .enqueue(&tx, NewJob::new("mail", "receipt", b"1".to_vec()))
        .await
        .unwrap();
    // Other sessions see nothing yet.
    assert!(t.store.get(id).await.unwrap().is_none());
    assert!(t.store.claim("mail", 10, LEASE).await.unwrap().is_empty());
    tx.commit().await.unwrap();
    let jobs = t.store.claim("mail", 10, LEASE).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].claim.id, id);
    assert_eq!(jobs[0].payload, b"1");
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_job_never_existed() {
    let t = store_or_skip!("rollback");
    let mut client = own_connection().await;
    let tx = client.transaction().await.unwrap();
    let ids = t
        .store
        .enqueue_many_in(
            &tx,
            (0..3).map(|i| NewJob::new("mail", "k", vec![i])).collect(),
        )
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    for id in ids {
        assert!(t.store.get(id).await.unwrap().is_none());
    }
    assert!(t.store.claim("mail", 10, LEASE).await.unwrap().is_empty());
    assert!(t
        .store
        .list(ListFilter::default())
        .await
        .unwrap()
        .is_empty());
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_inside_a_transaction_undoes_the_batch_but_not_the_transaction() {
    let t = store_or_skip!("txdup");
    t.store
        .enqueue(NewJob::new("q", "k", vec![]).unique("u1", OnConflict::Error))
        .await
        .unwrap();
    let mut client = own_connection().await;
    let tx = client.transaction().await.unwrap();
    tx.batch_execute("CREATE TEMP TABLE notes (t text); INSERT INTO notes VALUES ('kept')")
        .await
        .unwrap();
    let err = t
        .store
        .enqueue_many_in(
            &tx,
            vec![
                NewJob::new("q", "k", vec![]),
                NewJob::new("q", "k", vec![]).unique("u1", OnConflict::Error),
            ],
        )
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::Duplicate { .. }));
    // The caller's transaction is still usable and its own work commits.
    let kept: String = tx
        .query_one("SELECT t FROM notes", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, "kept");
    tx.commit().await.unwrap();
    assert_eq!(t.store.list(ListFilter::default()).await.unwrap().len(), 1);
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_producer_needs_no_pool() {
    let t = store_or_skip!("producer");
    let client = own_connection().await;
    let producer = Producer::new(&t.schema)
        .unwrap()
        .with_clock(t.clock.clone());
    let id = producer
        .enqueue(&client, NewJob::new("q", "k", vec![7]).key("a"))
        .await
        .unwrap();
    let job = t.store.claim("q", 1, LEASE).await.unwrap().remove(0);
    assert_eq!(job.claim.id, id);
    assert_eq!(job.enqueued_at, 1_000_000);
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_wakes_an_idle_waiter() {
    let t = store_or_skip!("notify");
    let store = t.store.clone();
    // The listener's (re)start wakes everyone once; let that happen first.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !store.is_listening() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the listener never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Polled once, the waiter has registered and looked: nothing is due, so it parks.
    let wait = store.wait_for_jobs("mail", Duration::from_secs(600));
    tokio::pin!(wait);
    assert!(futures::poll!(wait.as_mut()).is_pending());
    let mut client = own_connection().await;
    let tx = client.transaction().await.unwrap();
    store
        .enqueue_in(&tx, NewJob::new("mail", "k", vec![]))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // Only the commit's notification can end a 600 s wait this early.
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("the commit's notification woke the waiter");
    t.cleanup().await;
}

/// A ready job enqueued through a client (a caller's transaction, say) takes its place after
/// the jobs of its queue whose time came before it, as an enqueue through the store does:
/// the reference store makes those due first. Nothing is promoted inside the caller's
/// transaction: the new job waits behind them for the queue's next promotion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_enqueued_in_a_transaction_goes_after_jobs_already_due() {
    let t = store_or_skip!("txdue");
    let delayed = t
        .store
        .enqueue(
            NewJob::new("q", "k", vec![])
                .key("k")
                .delay(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    t.clock.advance(Duration::from_secs(2));
    let mut client = own_connection().await;
    let tx = client.transaction().await.unwrap();
    let ready = t
        .store
        .enqueue_many_in(
            &tx,
            vec![
                NewJob::new("q", "k", vec![1]).key("k"),
                NewJob::new("q", "k", vec![2]).key("k"),
            ],
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let lone = t
        .store
        .producer()
        .enqueue(&client, NewJob::new("q", "k", vec![3]).key("k"))
        .await
        .unwrap();
    let mut order = Vec::new();
    for _ in 0..4 {
        let jobs = t.store.claim("q", 1, LEASE).await.unwrap();
        order.extend(jobs.iter().map(|j| j.claim.id));
    }
    assert_eq!(order, vec![delayed, ready[0], ready[1], lone]);
    assert!(t.store.claim("q", 1, LEASE).await.unwrap().is_empty());
    t.cleanup().await;
}

/// Reviving every dead job while a transaction takes the unique key of one of them: that
/// one stays dead (its key was taken meanwhile, as in the reference store) and the others
/// are revived, rather than the whole revival failing on the unique index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revival_of_all_dead_jobs_leaves_dead_a_job_whose_key_a_transaction_took() {
    let t = store_or_skip!("revrace");
    let s = &t.store;
    let keyed = s
        .enqueue(NewJob::new("q", "k", vec![]).unique("u", OnConflict::Error))
        .await
        .unwrap();
    let plain = s.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    for job in s.claim("q", 2, LEASE).await.unwrap() {
        s.fail(&job, fairq_worker::Failure::permanent("down"))
            .await
            .unwrap();
    }
    let mut client = own_connection().await;
    let holder: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let tx = client.transaction().await.unwrap();
    let taker = s
        .enqueue_in(
            &tx,
            NewJob::new("q", "k", vec![]).unique("u", OnConflict::Error),
        )
        .await
        .unwrap();

    let reviver = s.clone();
    let revival = tokio::spawn(async move {
        reviver
            .revive(fairq_worker::ReviveTarget::AllDead {
                queue: Some("q".into()),
            })
            .await
    });
    common::someone_waits_for(&t.admin, holder).await;
    tx.commit().await.unwrap();
    assert_eq!(revival.await.unwrap().unwrap(), 1);

    let status = |id| async move { s.get(id).await.unwrap().expect("exists").status() };
    assert_eq!(status(keyed).await, fairq_worker::JobStatus::Dead);
    assert_eq!(status(plain).await, fairq_worker::JobStatus::Scheduled);
    assert_eq!(status(taker).await, fairq_worker::JobStatus::Scheduled);

    // A single revival that loses its key the same way is refused as a duplicate.
    let lone = s
        .enqueue(NewJob::new("q2", "k", vec![]).unique("v", OnConflict::Error))
        .await
        .unwrap();
    let job = s.claim("q2", 1, LEASE).await.unwrap().remove(0);
    s.fail(&job, fairq_worker::Failure::permanent("down"))
        .await
        .unwrap();
    let tx = client.transaction().await.unwrap();
    let taker = s
        .enqueue_in(
            &tx,
            NewJob::new("q2", "k", vec![]).unique("v", OnConflict::Error),
        )
        .await
        .unwrap();
    let reviver = s.clone();
    let revival =
        tokio::spawn(async move { reviver.revive(fairq_worker::ReviveTarget::One(lone)).await });
    common::someone_waits_for(&t.admin, holder).await;
    tx.commit().await.unwrap();
    match revival.await.unwrap() {
        Err(BackendError::Duplicate { existing, .. }) => assert_eq!(existing, taker),
        other => panic!("a revival whose key was taken answered {other:?}"),
    }
    assert_eq!(status(lone).await, fairq_worker::JobStatus::Dead);
    t.cleanup().await;
}
