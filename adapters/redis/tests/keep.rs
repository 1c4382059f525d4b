//! A store that does not keep succeeded jobs (`RedisOptions::keep_succeeded(false)`):
//! successes are deleted from every structure and still counted as a keeping store counts
//! them; deaths and jobs with dependents are kept; a dependency that was deleted is unknown; a
//! settlement repeated after its reply was lost answers that the deleted job succeeded; a
//! worker's drain leaves no job behind.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::proxy::Proxy;
use fairq_core::retry::RetryPolicy;
use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::{
    Backend, BackendError, Failure, Finished, Inspect, Job, JobId, JobOutcome, JobStatus,
    ManualClock, NewJob, OnConflict, Purge, QueueConfig, QueueStats, Settled, Worker,
};
use redis::ConnectionAddr;

const LEASE: Duration = Duration::from_secs(30);

fn clock() -> ManualClock {
    ManualClock::new(fairq_worker::conformance::START)
}

/// A store on a fresh prefix that keeps succeeded jobs or not.
async fn store(clock: &ManualClock, keep: bool) -> common::TestStore {
    common::connect(common::options(clock.clone()).keep_succeeded(keep)).await
}

fn queue_stats<'a>(stats: &'a [QueueStats], queue: &str) -> &'a QueueStats {
    stats
        .iter()
        .find(|q| q.queue == queue)
        .unwrap_or_else(|| panic!("queue {queue} in {stats:?}"))
}

/// Every place in the prefix's key space that still names job `id`: a key of its own (its
/// hash, its dependents' sets), a sorted-set or set member (a `ready` member ends in
/// `:<id>`), a hash value (a unique key's holder, another job's dependency) or a string. The
/// enqueue's reply, kept for a minute under its request id (`req:...`) so that a repeated
/// enqueue answers the same ids, is not a trace of the job.
async fn traces(store: &RedisBackend, id: JobId) -> Vec<String> {
    let id = id.0.to_string();
    let suffix = format!(":{id}");
    let keys = scan(store, &format!("{}:*", store.keys().prefix())).await;
    let mut conn = store.connection();
    let mut found = Vec::new();
    for key in keys {
        if key.ends_with(&format!("job:{id}"))
            || key.ends_with(&format!("deps:{id}"))
            || key.ends_with(&format!("xdeps:{id}"))
        {
            found.push(format!("key {key}"));
            continue;
        }
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let names = |values: Vec<String>| {
            values
                .iter()
                .any(|v| *v == id || v.ends_with(&suffix) || v.ends_with(&format!("\n{id}")))
        };
        let holds = match kind.as_str() {
            "zset" => names(
                redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut conn)
                    .await
                    .unwrap(),
            ),
            "set" => names(
                redis::cmd("SMEMBERS")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .unwrap(),
            ),
            "hash" => {
                let map: HashMap<String, Vec<u8>> = redis::cmd("HGETALL")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                map.values().any(|v| v.as_slice() == id.as_bytes())
            }
            "string" if !key.contains(":req:") => {
                let value: Vec<u8> = redis::cmd("GET")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                value.as_slice() == id.as_bytes()
            }
            _ => false,
        };
        if holds {
            found.push(format!("{kind} {key}"));
        }
    }
    found
}

/// The keys matching `pattern`, by `SCAN`.
async fn scan(store: &RedisBackend, pattern: &str) -> Vec<String> {
    let mut conn = store.connection();
    let mut found = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        found.extend(batch);
        if next == 0 {
            return found;
        }
        cursor = next;
    }
}

/// The keys of the prefix's job hashes.
async fn job_hashes(store: &RedisBackend) -> Vec<String> {
    scan(store, &format!("{}:*job:*", store.keys().prefix())).await
}

/// The same history on any store: a and b succeed after 7 ms; c fails once (a retry) and
/// succeeds on its second attempt after 3 ms, settled on the batched path; d fails for good.
/// a holds a unique key and c a fairness key. Returns the ids a, b, c, d.
async fn history(s: &RedisBackend, clock: &ManualClock) -> Vec<JobId> {
    let ids = s
        .enqueue_many(vec![
            NewJob::new("q", "k", b"a".to_vec())
                .key("a")
                .unique("only-a", OnConflict::Error),
            NewJob::new("q", "k", b"b".to_vec()).key("b"),
            NewJob::new("q", "k", b"c".to_vec()).key("c"),
            NewJob::new("q", "k", b"d".to_vec())
                .key("d")
                .retry(RetryPolicy::new(0)),
        ])
        .await
        .unwrap();
    let jobs = s.claim("q", 4, LEASE).await.unwrap();
    assert_eq!(jobs.len(), 4);
    let by_id = |i: usize| jobs.iter().find(|j| j.claim.id == ids[i]).unwrap();
    clock.advance(Duration::from_millis(7));
    s.complete(by_id(0).claim).await.unwrap();
    s.complete(by_id(1).claim).await.unwrap();
    s.fail(by_id(2), Failure::retryable("try again"))
        .await
        .unwrap();
    s.fail(by_id(3), Failure::retryable("no luck"))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(3_600));
    let again = s.claim("q", 4, LEASE).await.unwrap();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].claim.id, ids[2]);
    clock.advance(Duration::from_millis(3));
    let out = s
        .settle_and_claim(vec![Finished::new(&again[0], Ok(()))], "q", 4, LEASE)
        .await
        .unwrap();
    assert_eq!(out.settled.len(), 1);
    assert_eq!(*out.settled[0].as_ref().unwrap(), Settled::Succeeded);
    assert!(out.claimed.unwrap().is_empty());
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn successes_are_deleted_and_counted_as_a_keeping_store_counts_them() {
    require_redis!();
    let (kc, nc) = (clock(), clock());
    let kept = store(&kc, true).await;
    let not_kept = store(&nc, false).await;
    let kept_ids = history(&kept, &kc).await;
    let ids = history(&not_kept, &nc).await;

    // The successes are gone, from everywhere; the death is kept.
    for (i, id) in ids.iter().take(3).enumerate() {
        assert!(
            not_kept.get(*id).await.unwrap().is_none(),
            "job {i} was kept"
        );
        assert_eq!(
            traces(&not_kept, *id).await,
            Vec::<String>::new(),
            "job {i}"
        );
    }
    let dead = not_kept
        .get(ids[3])
        .await
        .unwrap()
        .expect("the dead job is kept");
    assert_eq!(dead.status(), JobStatus::Dead);
    for id in &kept_ids[..3] {
        let info = kept.get(*id).await.unwrap().expect("kept");
        assert_eq!(info.status(), JobStatus::Succeeded);
    }

    // Statistics: everything a keeping store counts, but the succeeded jobs it holds.
    let k = kept.stats().await.unwrap();
    let n = not_kept.stats().await.unwrap();
    let (k, n) = (queue_stats(&k, "q"), queue_stats(&n, "q"));
    let counted = |q: &QueueStats| {
        (
            q.retries.ok,
            q.retries.retries,
            q.retries.dead,
            q.retries.failures,
            q.counts.dead,
            q.counts.pending(),
            q.processing_ms.count,
            q.processing_ms.max,
        )
    };
    // 3 successes, one after a retry; 1 death; failures: c's first attempt and d's; attempts
    // timed: a, b, c twice and d, the longest 7 ms.
    assert_eq!(counted(n), (3, 1, 1, 2, 1, 0, 5, 7));
    assert_eq!(counted(n), counted(k));
    assert_eq!(n.retries, k.retries);
    assert_eq!(n.processing_ms, k.processing_ms, "the run-time histogram");
    assert_eq!(n.oldest_error_at, k.oldest_error_at);
    assert_eq!((k.counts.succeeded, n.counts.succeeded), (3, 0));

    // The unique key went with the job: a new job may hold it.
    let again = not_kept
        .enqueue(NewJob::new("q", "k", vec![]).unique("only-a", OnConflict::Error))
        .await
        .expect("the deleted job's unique key is free");
    assert_ne!(again, ids[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_with_dependents_is_kept_and_a_deleted_dependency_is_unknown() {
    require_redis!();
    let clock = clock();
    let s = store(&clock, false).await;
    let parent = s.enqueue(NewJob::new("d", "k", vec![])).await.unwrap();
    let child = s
        .enqueue(NewJob::new("d", "k", vec![]).after(parent))
        .await
        .unwrap();
    let lone = s.enqueue(NewJob::new("d", "k", vec![])).await.unwrap();
    // A dependent in another queue (another slot) registers with its dependency's queue.
    let xparent = s.enqueue(NewJob::new("d", "k", vec![])).await.unwrap();
    let xchild = s
        .enqueue(NewJob::new("e", "k", vec![]).after(xparent))
        .await
        .unwrap();
    let first = s.claim("d", 10, LEASE).await.unwrap();
    let claimed: Vec<_> = first.iter().map(|j| j.claim.id).collect();
    assert_eq!(claimed, vec![parent, lone, xparent]);
    for job in &first {
        s.complete(job.claim).await.unwrap();
    }
    // The parents had dependents: kept, and their successes released the children.
    for id in [parent, xparent] {
        let kept = s.get(id).await.unwrap().expect("a parent is kept");
        assert_eq!(kept.status(), JobStatus::Succeeded);
    }
    assert!(s.get(lone).await.unwrap().is_none());
    let next = s.claim("d", 10, LEASE).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].claim.id, child);
    let next = s.claim("e", 10, LEASE).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].claim.id, xchild);
    // A later dependent of a kept parent is ready at once; one of the deleted job is refused,
    // from its queue and from another, as one of a pruned job is.
    for queue in ["d", "e"] {
        let late = s
            .enqueue(NewJob::new(queue, "k", vec![]).after(parent))
            .await
            .unwrap();
        assert_eq!(
            s.get(late).await.unwrap().unwrap().status(),
            JobStatus::Scheduled
        );
        match s.enqueue(NewJob::new(queue, "k", vec![]).after(lone)).await {
            Err(BackendError::UnknownDependency(id)) => assert_eq!(id, lone),
            other => panic!("queue {queue}: expected UnknownDependency, got {other:?}"),
        }
    }
    let stats = s.stats().await.unwrap();
    assert_eq!(queue_stats(&stats, "d").retries.ok, 3);
    assert_eq!(queue_stats(&stats, "d").counts.succeeded, 2);
}

/// Whether job `id` of `queue` carries the mark that jobs wait for it (`hd`).
async fn marked(store: &RedisBackend, queue: &str, id: JobId) -> bool {
    let hd: Option<String> = redis::cmd("HGET")
        .arg(store.keys().job(queue, id.0))
        .arg("hd")
        .query_async(&mut store.connection())
        .await
        .unwrap();
    hd.is_some()
}

/// Dependents deleted before their dependency succeeds (cancelled, purged; in its queue and,
/// registered, in another) leave it marked while one of them still waits, and unmarked once
/// none does: its success is then deleted like any other, leaving nothing behind (no
/// dependents' sets, no registrations).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependency_whose_dependents_were_all_deleted_is_unmarked() {
    require_redis!();
    let clock = clock();
    let s = store(&clock, false).await;
    // One dependent in its queue, one in another: cancelled, then purged.
    let parent = s.enqueue(NewJob::new("d", "k", vec![])).await.unwrap();
    let near = s
        .enqueue(NewJob::new("d", "k", vec![]).after(parent))
        .await
        .unwrap();
    let far = s
        .enqueue(NewJob::new("e", "k", vec![]).after(parent))
        .await
        .unwrap();
    assert!(marked(&s, "d", parent).await);
    s.cancel(near).await.unwrap();
    assert!(
        marked(&s, "d", parent).await,
        "a dependent in another queue still waits"
    );
    let purged = s
        .purge(Purge {
            queue: Some("e".into()),
            status: Some(JobStatus::Blocked),
        })
        .await
        .unwrap();
    assert_eq!(purged, 1);
    assert!(s.get(far).await.unwrap().is_none());
    assert!(!marked(&s, "d", parent).await, "no dependent is left");
    // The other way round, and two dependents in the queue purged at once.
    let second = s.enqueue(NewJob::new("d", "k2", vec![])).await.unwrap();
    let far = s
        .enqueue(NewJob::new("e", "k", vec![]).after(second))
        .await
        .unwrap();
    let mut near = Vec::new();
    for _ in 0..2 {
        near.push(
            s.enqueue(NewJob::new("d", "k", vec![]).after(second))
                .await
                .unwrap(),
        );
    }
    s.cancel(far).await.unwrap();
    assert!(
        marked(&s, "d", second).await,
        "dependents in its queue still wait"
    );
    let purged = s
        .purge(Purge {
            queue: Some("d".into()),
            status: Some(JobStatus::Blocked),
        })
        .await
        .unwrap();
    assert_eq!(purged, 2);
    assert!(!marked(&s, "d", second).await, "no dependent is left");
    let jobs = s.claim("d", 10, LEASE).await.unwrap();
    let claimed: Vec<_> = jobs.iter().map(|j| j.claim.id).collect();
    assert_eq!(claimed, vec![parent, second]);
    for job in &jobs {
        s.complete(job.claim).await.unwrap();
    }
    for id in [parent, second] {
        assert!(s.get(id).await.unwrap().is_none(), "job {id} deleted");
        assert_eq!(traces(&s, id).await, Vec::<String>::new(), "job {id}");
    }
    for id in near {
        assert!(s.get(id).await.unwrap().is_none());
    }
}

/// A dependent in another queue enqueued while its dependency's success is recorded: whichever
/// way the two interleave, the dependent is either enqueued and released (its dependency was
/// kept, having a dependent when it succeeded) or refused with nothing left behind, never
/// left blocked on a job that is gone. The success is delayed by 0 to 3 ms, so that it lands
/// before the dependency check, between the check and the registration (the dependent was
/// enqueued, then deleted again: its id is used up), or after the registration.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dependent_racing_its_dependency_s_deletion_is_released_or_refused() {
    require_redis!();
    let clock = clock();
    let s = store(&clock, false).await;
    // Queue e exists before the race (the enqueue's registry look-up is not part of it).
    s.enqueue(NewJob::new("e", "k", vec![])).await.unwrap();
    let e_seq = || async {
        let seq: Option<u64> = redis::cmd("HGET")
            .arg(format!("{}meta", s.keys().queue_base("e")))
            .arg("seq")
            .query_async(&mut s.connection())
            .await
            .unwrap();
        seq.unwrap_or(0)
    };
    let (mut released, mut refused_early, mut refused_late) = (0, 0, 0);
    for round in 0..120u64 {
        let dep = s.enqueue(NewJob::new("d", "k", vec![])).await.unwrap();
        let job = s.claim("d", 1, LEASE).await.unwrap().remove(0);
        assert_eq!(job.claim.id, dep);
        let seq = e_seq().await;
        let delay = Duration::from_micros((round % 30) * 100);
        let (done, enqueued) = tokio::join!(
            async {
                tokio::time::sleep(delay).await;
                s.complete(job.claim).await
            },
            s.enqueue(NewJob::new("e", "k", vec![]).after(dep))
        );
        done.unwrap();
        match enqueued {
            Ok(id) => {
                released += 1;
                let info = s.get(id).await.unwrap().expect("the dependent");
                assert_eq!(info.status(), JobStatus::Scheduled, "{info:?}");
                let kept = s.get(dep).await.unwrap().expect("its dependency is kept");
                assert_eq!(kept.status(), JobStatus::Succeeded);
            }
            Err(BackendError::UnknownDependency(id)) => {
                assert_eq!(id, dep);
                assert!(s.get(dep).await.unwrap().is_none());
                if e_seq().await == seq {
                    refused_early += 1;
                } else {
                    refused_late += 1;
                }
            }
            Err(err) => panic!("enqueue: {err}"),
        }
        let stats = s.stats().await.unwrap();
        assert_eq!(
            queue_stats(&stats, "e").counts.blocked,
            0,
            "a dependent left blocked"
        );
        // Clear queue e for the next round.
        for job in s.claim("e", 10, LEASE).await.unwrap() {
            s.complete(job.claim).await.unwrap();
        }
    }
    eprintln!(
        "dependents: {released} released, {refused_early} refused at the check, \
         {refused_late} enqueued and deleted again"
    );
    // Which refusal a round gets depends on timing; both ways of the race must have run.
    assert!(
        released > 0 && refused_early + refused_late > 0,
        "the race was not run both ways"
    );
}

/// A proxy in front of the test server, and the URL that reaches the server through it.
fn proxied() -> (Proxy, String) {
    let info = redis::Client::open(common::url().as_str())
        .expect("test server URL")
        .get_connection_info()
        .clone();
    let ConnectionAddr::Tcp(host, port) = info.addr else {
        panic!("the test server must be reached over plain TCP");
    };
    let proxy = Proxy::start(format!("{host}:{port}"));
    let url = format!("redis://127.0.0.1:{}/{}", proxy.port(), info.redis.db);
    (proxy, url)
}

/// A store through `url` whose run times are not flushed behind the test's back (nothing but
/// the test's own calls crosses the proxy).
async fn quiet_store(url: &str, clock: &ManualClock, keep: bool) -> (RedisBackend, common::Guard) {
    let options = RedisOptions {
        timing_flush: Duration::from_secs(3_600),
        ..common::options(clock.clone()).keep_succeeded(keep)
    };
    let guard = common::Guard::new(options.prefix.clone());
    let store = RedisBackend::connect(url, options)
        .await
        .expect("connect through the proxy");
    (store, guard)
}

/// Claims `n` new jobs of queue `q` (the last with no retries left), and settles one
/// success first, so that the scripts are loaded before any reply is cut.
async fn running(store: &RedisBackend, n: usize) -> Vec<Job> {
    let mut jobs = vec![NewJob::new("q", "k", vec![])];
    for i in 0..n {
        let mut job = NewJob::new("q", "k", vec![]).key(format!("t{i}"));
        if i + 1 == n {
            job = job.retry(RetryPolicy::new(0));
        }
        jobs.push(job);
    }
    let ids = store.enqueue_many(jobs).await.unwrap();
    let mut claimed = store.claim("q", n + 1, LEASE).await.unwrap();
    assert_eq!(claimed.len(), n + 1);
    let warm = claimed.iter().position(|j| j.claim.id == ids[0]).unwrap();
    let warm = claimed.remove(warm);
    store.complete(warm.claim).await.unwrap();
    claimed.sort_by_key(|j| ids.iter().position(|id| *id == j.claim.id));
    claimed
}

#[test]
fn a_success_repeated_after_its_reply_was_lost_finds_its_job_gone_and_answers_succeeded() {
    if !common::available() {
        return;
    }
    let (proxy, url) = proxied();
    common::runtime().block_on(async {
        let clock = clock();
        let (s, _guard) = quiet_store(&url, &clock, false).await;
        let jobs = running(&s, 3).await;

        // One completion: it goes through, its reply is cut, the repeat finds the job gone.
        let opened = proxy.accepted();
        proxy.cut_next_reply();
        s.complete(jobs[0].claim)
            .await
            .expect("the repeat answers that the job succeeded");
        assert!(!proxy.cut_pending(), "no reply was cut");
        assert!(
            proxy.accepted() > opened,
            "the repeat went over a new connection"
        );
        assert!(s.get(jobs[0].claim.id).await.unwrap().is_none());
        // A first try on a job that is gone is still refused.
        match s.complete(jobs[0].claim).await {
            Err(BackendError::NotFound(id)) => assert_eq!(id, jobs[0].claim.id),
            other => panic!("expected NotFound, got {other:?}"),
        }

        // A batch on the batched path: a success and a death, the reply cut.
        let opened = proxy.accepted();
        proxy.cut_next_reply();
        let out = s
            .settle_and_claim(
                vec![
                    Finished::new(&jobs[1], Ok(())),
                    Finished::new(&jobs[2], Err(Failure::permanent("no"))),
                ],
                "q",
                1,
                LEASE,
            )
            .await
            .unwrap();
        assert!(!proxy.cut_pending(), "no reply was cut");
        assert!(
            proxy.accepted() > opened,
            "the repeat went over a new connection"
        );
        let answers: Vec<_> = out.settled.into_iter().map(Result::unwrap).collect();
        assert!(matches!(answers[0], Settled::Succeeded), "{answers:?}");
        assert!(matches!(answers[1], Settled::Dead { .. }), "{answers:?}");
        assert!(s.get(jobs[1].claim.id).await.unwrap().is_none());
        assert_eq!(
            s.get(jobs[2].claim.id).await.unwrap().unwrap().status(),
            JobStatus::Dead
        );

        let stats = s.stats().await.unwrap();
        let q = queue_stats(&stats, "q");
        assert_eq!((q.retries.ok, q.retries.dead), (3, 1));
        assert_eq!(
            (q.counts.succeeded, q.counts.running, q.counts.dead),
            (0, 0, 1)
        );
        // The repeats' run times went with their jobs: the warm-up's and the death's remain.
        assert_eq!(q.processing_ms.count, 2);
    });
}

#[test]
fn a_keeping_store_answers_a_repeated_success_from_the_kept_job() {
    if !common::available() {
        return;
    }
    let (proxy, url) = proxied();
    common::runtime().block_on(async {
        let clock = clock();
        let (s, _guard) = quiet_store(&url, &clock, true).await;
        let jobs = running(&s, 1).await;
        proxy.cut_next_reply();
        s.complete(jobs[0].claim)
            .await
            .expect("the repeat recognises its first try");
        assert!(!proxy.cut_pending(), "no reply was cut");
        assert_eq!(
            s.get(jobs[0].claim.id).await.unwrap().unwrap().status(),
            JobStatus::Succeeded
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_drains_a_queue_leaving_no_job_behind() {
    require_redis!();
    const N: usize = 400;
    // The system clock: the worker's leases and polls run in real time.
    let options = RedisOptions::new()
        .prefix(common::prefix())
        .keep_succeeded(false);
    let s = common::connect(options).await;
    let jobs: Vec<NewJob> = (0..N)
        .map(|i| NewJob::new("drain", "n", vec![]).key(format!("t{}", i % 7)))
        .collect();
    let ids = s.enqueue_many(jobs).await.unwrap();
    let reports: Arc<Mutex<Vec<(JobId, JobOutcome)>>> = Arc::default();
    let seen = Arc::clone(&reports);
    let worker = Worker::builder(s.clone())
        .queue(
            "drain",
            QueueConfig::default()
                .concurrency(8)
                .poll_interval(Duration::from_millis(50)),
        )
        .handle("n", |_job: Job| async { Ok::<_, String>(()) })
        .on_finished(move |report| {
            seen.lock()
                .unwrap()
                .push((report.job.claim.id, report.outcome));
        })
        .build()
        .unwrap()
        .start()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), async {
        while reports.lock().unwrap().len() < N {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("every job ran");
    assert!(worker.shutdown(Duration::from_secs(10)).await.is_clean());

    let reports = reports.lock().unwrap().clone();
    assert_eq!(reports.len(), N, "a job ran twice");
    let mut once: HashMap<JobId, usize> = HashMap::new();
    for (id, outcome) in &reports {
        assert_eq!(*outcome, JobOutcome::Succeeded, "job {id}");
        *once.entry(*id).or_default() += 1;
    }
    for id in &ids {
        assert_eq!(once.get(id), Some(&1), "job {id}");
    }
    assert_eq!(job_hashes(&s).await, Vec::<String>::new());
    let all: u64 = redis::cmd("ZCARD")
        .arg(format!("{}all", s.keys().queue_base("drain")))
        .query_async(&mut s.connection())
        .await
        .unwrap();
    assert_eq!(all, 0, "the queue's index of jobs");
    let stats = s.stats().await.unwrap();
    let q = queue_stats(&stats, "drain");
    assert_eq!(q.retries.ok, N as u64);
    assert_eq!((q.counts.succeeded, q.counts.pending()), (0, 0));
    assert_eq!(q.processing_ms.count, N as u64);
}
