//! Scenario: every job completes exactly once after `kill -9` of one process.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fairq::{Backend, JobStatus, NewJob};
use fairq_scale_tests::fairness::first_start;
use fairq_scale_tests::record::{read_logs, Event, Step};
use fairq_scale_tests::{knob, wait_for, Network, WorkerConfig, WorkerProcess};

use super::{enqueue_all, id_set, ids_in, logs, queue_stats, runtime, start_worker};

/// **Every job completes exactly once after `kill -9` of one process.** One worker process
/// per host of `net` runs a few thousand jobs (`FAIRQ_SCALE_JOBS`, 2,000 by default) of the
/// store at `url`. At evenly spaced points of the run (`FAIRQ_SCALE_KILLS` of them, 2 by
/// default) a job that will not finish until released is enqueued; the process that starts
/// it (so one with a job in flight, whichever claimed it) is killed with SIGKILL, the job
/// is released, and a new worker process starts in the killed one's namespace. The others
/// rescue what a killed process held once its leases expire, and carry on.
///
/// A worker *instance* is one process; a *killed* instance is one that got SIGKILL. Asserted,
/// once the store counts every job succeeded:
/// - the store: exactly one success per enqueued job (`succeeded` equals the number of
///   jobs, and nothing is running, waiting, retrying, blocked or dead), and the list of
///   succeeded jobs is exactly the set of enqueued ids;
/// - the job records: every job's command ran to success at least once; no instance ran a
///   job twice; and every run of a job but its last was in a killed instance (a job runs
///   again only if an attempt of it was claimed, running, or finished but not yet settled
///   in a process that was killed);
/// - the workers' reports of finished attempts: a job whose last run was in an instance
///   that lived on was reported `succeeded` exactly once, by that instance, and by no one
///   else; a job whose last run was in a killed instance was reported at most once (the
///   process may have died between the store's commit and the report); the instances that
///   lived on reported nothing but successes;
/// - each held job ran first in the instance killed for it and then again elsewhere, and
///   the store counts at least two attempts for it (the rescue counted the lost one).
pub fn every_job_completes_exactly_once_after_kill_9(net: &Network, url: &str) {
    let jobs = knob("FAIRQ_SCALE_JOBS", 2_000);
    let kills = knob("FAIRQ_SCALE_KILLS", 2);
    let keys = 8;
    let queue = "exact";

    let rt = runtime();
    let store = rt.block_on(fairq::connect(url)).expect("the store");
    let batch: Vec<NewJob> = (0..jobs)
        .map(|i| NewJob::new(queue, "work", vec![]).key(format!("tenant{}", i % keys)))
        .collect();
    let mut ids = rt.block_on(enqueue_all(&store, batch));

    let dir = tempfile::tempdir().expect("a folder");
    let holds = dir.path().join("holds");
    std::fs::create_dir(&holds).expect("the release folder");
    let mut config = WorkerConfig::new(queue);
    config.concurrency = 4;
    config.work_ms = 2;
    config.lease = Duration::from_secs(4);
    config.hold_dir = Some(holds.clone());
    // Every instance ever started, in order; `host_of[i]` is the host instance `i` runs on.
    let mut instances: Vec<WorkerProcess> = Vec::new();
    let mut host_of: Vec<usize> = Vec::new();
    for (h, host) in net.hosts().iter().enumerate() {
        instances.push(start_worker(
            host,
            url,
            &config,
            dir.path(),
            &format!("worker{h}"),
        ));
        host_of.push(h);
    }
    let done = |events: &[Event]| events.iter().filter(|e| e.step == Step::Done).count();
    let mut killed: BTreeSet<usize> = BTreeSet::new();
    let mut held = Vec::new();

    for round in 0..kills {
        let progress = jobs * (round + 1) / (kills + 1);
        let files = logs(&instances);
        wait_for("the run to progress", Duration::from_secs(600), || {
            (done(&read_logs(&files).expect("logs")) >= progress).then_some(())
        })
        .expect("the run goes on");
        let key = format!("hold{round}");
        let job = rt
            .block_on(store.enqueue(NewJob::new(queue, "work", vec![]).key(key.clone())))
            .expect("enqueue a held job");
        ids.push(job);
        let victim = wait_for("the held job to start", Duration::from_secs(600), || {
            first_start(&read_logs(&files).expect("logs"), job.0).map(|e| e.worker)
        })
        .expect("the held job starts");
        instances[victim].kill9().expect("kill -9");
        killed.insert(victim);
        held.push((job, victim));
        std::fs::write(holds.join(&key), b"go").expect("release the held job");
        let h = host_of[victim];
        eprintln!(
            "round {round}: killed {} while it ran held job {job}",
            instances[victim].name()
        );
        let name = format!("worker{h}-{}", round + 1);
        instances.push(start_worker(
            &net.hosts()[h],
            url,
            &config,
            dir.path(),
            &name,
        ));
        host_of.push(h);
    }

    let total = ids.len() as u64;
    wait_for(
        "the store to count every job succeeded",
        Duration::from_secs(900),
        || {
            let stats = rt.block_on(queue_stats(&store, queue));
            (stats.counts.succeeded == total && stats.counts.running == 0).then_some(())
        },
    )
    .unwrap_or_else(|e| {
        let stats = rt.block_on(queue_stats(&store, queue));
        panic!("{e}: {:?}", stats.counts)
    });
    for (i, worker) in instances.iter_mut().enumerate() {
        if !killed.contains(&i) {
            worker
                .stop(Duration::from_secs(30))
                .expect("a graceful stop");
        }
    }

    // The store: one success per job, nothing else.
    let stats = rt.block_on(queue_stats(&store, queue));
    let c = &stats.counts;
    assert_eq!(
        (
            c.succeeded,
            c.running,
            c.scheduled,
            c.retrying,
            c.blocked,
            c.dead
        ),
        (total, 0, 0, 0, 0, 0),
        "the store's counts (succeeded, running, scheduled, retrying, blocked, dead)"
    );
    let enqueued = id_set(&ids);
    let succeeded = rt.block_on(ids_in(&store, queue, JobStatus::Succeeded));
    assert_eq!(succeeded.len() as u64, total, "succeeded jobs listed");
    assert_eq!(
        succeeded.iter().copied().collect::<BTreeSet<u64>>(),
        enqueued,
        "the succeeded jobs are the enqueued ones"
    );

    // The job records: per job, the instances that started it in time order, and its
    // successful runs.
    let events = read_logs(&logs(&instances)).expect("the job logs");
    let mut starts: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    let mut dones: BTreeMap<u64, usize> = BTreeMap::new();
    for e in &events {
        match e.step {
            Step::Start => starts.entry(e.job).or_default().push(e.worker),
            Step::Done => *dones.entry(e.job).or_default() += 1,
        }
    }
    let never_done: Vec<u64> = enqueued
        .iter()
        .filter(|id| !dones.contains_key(id))
        .copied()
        .collect();
    assert!(
        never_done.is_empty(),
        "jobs that never ran to success: {never_done:?}"
    );
    for (job, by) in &starts {
        let distinct: BTreeSet<usize> = by.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            by.len(),
            "job {job} ran twice in one instance: {by:?}"
        );
        let (_, earlier) = by.split_last().expect("a start");
        assert!(
            earlier.iter().all(|i| killed.contains(i)),
            "job {job} ran again after a run in an instance that was not killed: {by:?} \
             (killed: {killed:?})"
        );
    }
    let again: Vec<u64> = starts
        .iter()
        .filter(|(_, by)| by.len() > 1)
        .map(|(job, _)| *job)
        .collect();
    eprintln!(
        "{total} jobs; {} ran more than once, each after a kill: {again:?}",
        again.len()
    );

    // The workers' reports of finished attempts: (instance, job) per success.
    let mut reports: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, worker) in instances.iter().enumerate() {
        for outcome in worker.outcomes().expect("the worker's output") {
            if !killed.contains(&i) {
                assert_eq!(
                    outcome.outcome,
                    "succeeded",
                    "{} reported {outcome:?}",
                    worker.name()
                );
            }
            if outcome.outcome == "succeeded" {
                reports.entry(outcome.job).or_default().push(i);
            }
        }
    }
    for id in &enqueued {
        let last = *starts[id].last().expect("a start");
        let by = reports.get(id).cloned().unwrap_or_default();
        if killed.contains(&last) {
            assert!(
                by.len() <= 1 && by.iter().all(|&i| i == last),
                "job {id}, last run in killed instance {last}, was reported succeeded by \
                 instances {by:?}"
            );
        } else {
            assert_eq!(
                by,
                [last],
                "job {id} (runs in instances {:?}) was reported succeeded by instances {by:?}",
                starts[id]
            );
        }
    }

    // The held jobs: lost with their killed instance, rescued, run again.
    for (job, victim) in held {
        let by = &starts[&job.0];
        assert!(
            by.len() >= 2 && by[0] == victim,
            "held job {job}, killed in instance {victim}, ran in instances {by:?}"
        );
        let info = rt
            .block_on(store.get(job))
            .expect("get")
            .expect("the held job");
        assert!(
            info.attempts >= 2,
            "the rescue of held job {job} counted no attempt: {info:?}"
        );
    }
}
