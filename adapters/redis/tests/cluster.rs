//! The store on a private Redis Cluster of three masters and three replicas (started by the
//! first test that needs it, stopped when the test process exits): the conformance suite and
//! its pause check, the differential test, and what only a cluster shows (queues spread over the masters, ids,
//! operator calls gathering from every node, dependencies across slots, discovery from one
//! node given by a plain URL, successes not kept deleted within their slot).

mod common;

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use common::cluster;
use common::ClusterHarness;
use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::{Backend, JobId, JobStatus, ListFilter, ManualClock, NewJob, Purge, Retention};

fairq_worker::conformance_tests!({
    match ClusterHarness::shared() {
        Some(harness) => harness,
        None => return,
    }
});

/// Random request sequences on the cluster and on the reference store agree answer for
/// answer.
#[test]
fn the_cluster_store_matches_the_reference_store() {
    let Some(harness) = ClusterHarness::shared() else {
        return;
    };
    fairq_worker::conformance::differential::check(harness, 24);
}

/// Pausing on a cluster: the queue's flag lives in its slot, the listing in another.
#[test]
fn pause_holds_claims_until_resumed() {
    let Some(harness) = ClusterHarness::shared() else {
        return;
    };
    fairq_worker::conformance::run(harness, |store, clock| {
        Box::pin(fairq_worker::conformance::pause::pause_holds_claims_until_resumed(store, clock))
    });
}

async fn connect(url: &str) -> RedisBackend {
    RedisBackend::connect(url, common::options(ManualClock::new(1_700_000_000_000)))
        .await
        .expect("connect to the cluster")
}

/// Queues land on every master, every script of a queue touches only its slot (a script
/// touching another slot fails on a cluster, so each operation succeeding shows it), ids are
/// unique across queues, and stats, list, revive, purge and prune gather from every node.
#[test]
fn queues_spread_over_the_masters_and_operator_calls_gather_from_all_of_them() {
    let Some(cluster) = cluster::shared() else {
        return;
    };
    common::runtime().block_on(async {
        let store = connect(&cluster.url()).await;
        let queues: Vec<String> = (0..24).map(|i| format!("q{i}")).collect();
        let mut ids = HashSet::new();
        for (i, queue) in queues.iter().enumerate() {
            let jobs = (0..3)
                .map(|n| NewJob::new(queue.as_str(), "k", vec![n]).key(format!("t{}", i % 4)))
                .collect();
            for id in store.enqueue_many(jobs).await.expect("enqueue") {
                assert!(ids.insert(id), "id {id} given twice");
            }
        }
        assert_eq!(ids.len(), 72);
        // Where each queue's keys live.
        let mut owners = BTreeSet::new();
        for queue in &queues {
            let key = format!("{}meta", store.keys().queue_base(queue));
            owners.insert(cluster.master_of(&key).expect("an owner"));
        }
        assert_eq!(
            owners.len(),
            3,
            "24 queues on {owners:?}, not on all 3 masters"
        );
        // Every master holds keys of the deployment.
        for master in cluster.masters() {
            let pattern = format!("{}:*", store.keys().prefix());
            let out = cluster.cli(master, &["--scan", "--pattern", &pattern]);
            assert!(out.lines().count() > 0, "master {master} holds no keys");
        }

        let stats = store.stats().await.expect("stats");
        assert_eq!(stats.len(), 24);
        assert!(stats.iter().all(|s| s.counts.scheduled == 3), "{stats:?}");

        let listed = store.list(ListFilter::default()).await.expect("list");
        let listed: HashSet<JobId> = listed.iter().map(|j| j.id).collect();
        assert_eq!(listed, ids);

        // One job of each queue dies, then all are revived at once.
        for queue in &queues {
            let jobs = store
                .claim(queue, 1, Duration::from_secs(30))
                .await
                .expect("claim");
            let failure = fairq_worker::Failure::permanent("no");
            store
                .fail(&jobs[0], failure)
                .await
                .expect("fail permanently");
        }
        let dead = store
            .list(ListFilter {
                status: Some(JobStatus::Dead),
                ..ListFilter::default()
            })
            .await
            .expect("list dead");
        assert_eq!(dead.len(), 24);
        let revived = store
            .revive(fairq_worker::ReviveTarget::AllDead { queue: None })
            .await
            .expect("revive");
        assert_eq!(revived, 24);

        // One job of each queue succeeds and one dies; each outcome is pruned on its own,
        // the rest are purged.
        for queue in &queues {
            let jobs = store
                .claim(queue, 2, Duration::from_secs(30))
                .await
                .expect("claim");
            store.complete(jobs[0].claim).await.expect("complete");
            let failure = fairq_worker::Failure::permanent("no");
            store.fail(&jobs[1], failure).await.expect("fail");
        }
        let keep_dead = Retention::finished(Duration::ZERO).keep_dead();
        assert_eq!(store.prune(keep_dead).await.expect("prune"), 24);
        let dead_only = Retention::forever().dead_for(Duration::ZERO);
        assert_eq!(store.prune(dead_only).await.expect("prune"), 24);
        assert_eq!(store.prune(Duration::ZERO.into()).await.expect("prune"), 0);
        let purged = store.purge(Purge::default()).await.expect("purge");
        assert_eq!(purged, 24);
        let stats = store.stats().await.expect("stats");
        assert!(stats.iter().all(|s| s.counts.total() == 0), "{stats:?}");
        store.destroy().await.expect("destroy");
    });
}

/// A job depending on a job of a queue in another slot (on another master) waits for it and
/// is released when it succeeds.
#[test]
fn a_dependency_on_another_masters_queue_is_released_on_success() {
    let Some(cluster) = cluster::shared() else {
        return;
    };
    common::runtime().block_on(async {
        let store = connect(&cluster.url()).await;
        // Two queues on different masters.
        let owner = |q: &str| cluster.master_of(&format!("{}meta", store.keys().queue_base(q)));
        let first = "deps-a";
        let second = (0..100)
            .map(|i| format!("deps-b{i}"))
            .find(|q| owner(q) != owner(first))
            .expect("a queue on another master");
        let dep = store
            .enqueue(NewJob::new(first, "k", vec![]))
            .await
            .expect("enqueue the dependency");
        let dependent = store
            .enqueue(NewJob::new(second.as_str(), "k", vec![]).after(dep))
            .await
            .expect("enqueue the dependent");
        let info = store.get(dependent).await.expect("get").expect("the job");
        assert_eq!(info.status(), JobStatus::Blocked);
        assert!(store
            .claim(&second, 1, Duration::from_secs(30))
            .await
            .expect("claim")
            .is_empty());
        let jobs = store
            .claim(first, 1, Duration::from_secs(30))
            .await
            .expect("claim");
        store.complete(jobs[0].claim).await.expect("complete");
        let jobs = store
            .claim(&second, 1, Duration::from_secs(30))
            .await
            .expect("claim");
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].claim.id, dependent);
        store.destroy().await.expect("destroy");
    });
}

/// A store that does not keep succeeded jobs, on the cluster: a success is deleted inside its
/// queue's slot (unique key released), a dependency on another master is kept and releases its
/// dependent there, and a dependent of a deleted job is refused from either master; a
/// dependency whose dependents on another master were cancelled and purged is deleted.
#[test]
fn successes_not_kept_are_deleted_within_their_slot() {
    let Some(cluster) = cluster::shared() else {
        return;
    };
    common::runtime().block_on(async {
        let options = common::options(ManualClock::new(1_700_000_000_000)).keep_succeeded(false);
        let store = RedisBackend::connect(&cluster.url(), options)
            .await
            .expect("connect to the cluster");
        let owner = |q: &str| cluster.master_of(&format!("{}meta", store.keys().queue_base(q)));
        let first = "keep-a";
        let second = (0..100)
            .map(|i| format!("keep-b{i}"))
            .find(|q| owner(q) != owner(first))
            .expect("a queue on another master");
        let unique = || NewJob::new(first, "k", vec![]).unique("u", fairq_worker::OnConflict::Error);
        let lone = store.enqueue(unique()).await.expect("enqueue");
        let dep = store
            .enqueue(NewJob::new(first, "k", vec![]))
            .await
            .expect("enqueue the dependency");
        let dependent = store
            .enqueue(NewJob::new(second.as_str(), "k", vec![]).after(dep))
            .await
            .expect("enqueue the dependent");
        let jobs = store
            .claim(first, 2, Duration::from_secs(30))
            .await
            .expect("claim");
        assert_eq!(jobs.len(), 2);
        for job in &jobs {
            store.complete(job.claim).await.expect("complete");
        }
        assert!(store.get(lone).await.expect("get").is_none());
        let kept = store.get(dep).await.expect("get").expect("the dependency");
        assert_eq!(kept.status(), JobStatus::Succeeded);
        let jobs = store
            .claim(&second, 1, Duration::from_secs(30))
            .await
            .expect("claim");
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].claim.id, dependent);
        store.enqueue(unique()).await.expect("the unique key is free");
        for queue in [first, second.as_str()] {
            let refused = store
                .enqueue(NewJob::new(queue, "k", vec![]).after(lone))
                .await;
            assert!(
                matches!(refused, Err(fairq_worker::BackendError::UnknownDependency(id)) if id == lone),
                "{queue}: {refused:?}"
            );
        }
        let stats = store.stats().await.expect("stats");
        let a = stats.iter().find(|q| q.queue == first).expect("queue a");
        assert_eq!((a.retries.ok, a.counts.succeeded), (2, 1));
        // Dependents on the other master cancelled and purged before the dependency succeeds:
        // their registrations go, and its success is deleted.
        let dep = store
            .enqueue(NewJob::new(first, "k", vec![]))
            .await
            .expect("enqueue the dependency");
        let mut dependents = Vec::new();
        for _ in 0..2 {
            let job = NewJob::new(second.as_str(), "k", vec![]).after(dep);
            dependents.push(store.enqueue(job).await.expect("enqueue a dependent"));
        }
        fairq_worker::Inspect::cancel(&store, dependents[0])
            .await
            .expect("cancel");
        let purged = store
            .purge(Purge {
                queue: Some(second.clone()),
                status: Some(JobStatus::Blocked),
            })
            .await
            .expect("purge");
        assert_eq!(purged, 1);
        // The job of the unique key enqueued above goes first.
        let jobs = store
            .claim(first, 10, Duration::from_secs(30))
            .await
            .expect("claim");
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[1].claim.id, dep);
        for job in &jobs {
            store.complete(job.claim).await.expect("complete");
        }
        assert!(store.get(dep).await.expect("get").is_none());
        store.destroy().await.expect("destroy");
    });
}

/// A plain `redis://` URL naming one node of a cluster finds the whole cluster, and so does
/// `?cluster=true`; both see the same jobs.
#[test]
fn one_node_by_a_plain_url_discovers_the_cluster() {
    let Some(cluster) = cluster::shared() else {
        return;
    };
    common::runtime().block_on(async {
        let port = cluster.nodes[1].port;
        let options = common::options(ManualClock::new(1_700_000_000_000));
        let prefix = options.prefix.clone();
        let plain = RedisBackend::connect(&format!("redis://127.0.0.1:{port}/"), options)
            .await
            .expect("connect by one node");
        assert!(plain.is_cluster());
        let explicit = RedisBackend::connect(
            &format!("redis://127.0.0.1:{port}/?cluster=true"),
            RedisOptions::new().prefix(prefix),
        )
        .await
        .expect("connect with ?cluster=true");
        assert!(explicit.is_cluster());
        let mut ids = Vec::new();
        for i in 0..12 {
            ids.push(
                plain
                    .enqueue(NewJob::new(format!("plain{i}"), "k", vec![]))
                    .await
                    .expect("enqueue"),
            );
        }
        for id in ids {
            assert!(explicit.get(id).await.expect("get").is_some(), "job {id}");
        }
        plain.destroy().await.expect("destroy");
    });
}

/// A request that times out renews the store's cluster connection (the `redis` crate's
/// cluster connection was seen to stop answering altogether after a failover under load);
/// the store then works on the new connection. The master of the queue is paused
/// (`CLIENT PAUSE`) for longer than the response timeout; the cluster is a private one, so
/// the pause slows no other test.
#[test]
fn a_request_that_times_out_renews_the_cluster_connection() {
    if !cluster::programs_available() {
        return;
    }
    let cluster =
        cluster::LocalCluster::start(3, 0).unwrap_or_else(|e| panic!("private cluster: {e}"));
    common::runtime().block_on(async {
        let mut options = common::options(ManualClock::new(1_700_000_000_000))
            .response_timeout(Duration::from_millis(300));
        // No repeats behind the test's back: the paused call must fail.
        options.retries = 0;
        let store = RedisBackend::connect(&cluster.url(), options)
            .await
            .expect("connect to the cluster");
        store
            .enqueue(NewJob::new("renewed", "k", b"1".to_vec()))
            .await
            .expect("enqueue before the pause");
        assert_eq!(store.connection_renewals(), 0);

        let key = format!("{}meta", store.keys().queue_base("renewed"));
        let master = cluster.master_of(&key).expect("the queue's master");
        assert_eq!(
            cluster
                .cli(master, &["client", "pause", "1500", "ALL"])
                .trim(),
            "OK"
        );
        let err = store
            .enqueue(NewJob::new("renewed", "k", b"2".to_vec()))
            .await
            .expect_err("the queue's master is paused");
        assert!(err.is_transient(), "{err}");
        assert_eq!(store.connection_renewals(), 1, "after {err}");

        // Once the pause is over, the new connection carries the store's calls.
        let until = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            match store
                .enqueue(NewJob::new("renewed", "k", b"3".to_vec()))
                .await
            {
                Ok(_) => break,
                Err(err) if err.is_transient() && std::time::Instant::now() < until => {}
                Err(err) => panic!("enqueue after the pause: {err}"),
            }
        }
        let claimed = store
            .claim("renewed", 10, Duration::from_secs(30))
            .await
            .expect("claim on the renewed connection");
        let payloads: Vec<Vec<u8>> = claimed.iter().map(|j| j.payload.clone()).collect();
        assert!(payloads.contains(&b"1".to_vec()) && payloads.contains(&b"3".to_vec()));
        let _ = store.destroy().await;
    });
}
