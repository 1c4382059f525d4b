//! Scenario: fairness holds across processes.

use std::collections::BTreeSet;
use std::time::Duration;

use fairq::{Backend, JobId, NewJob};
use fairq_scale_tests::fairness::{first_start, overtaken, FairBound};
use fairq_scale_tests::record::{now_ns, read_logs, Step};
use fairq_scale_tests::{knob, wait_for, Network, WorkerConfig, WorkerProcess};

use super::{enqueue_all, logs, runtime, start_worker};

/// **Fairness holds across processes.** One worker process per host of `net` (3 by
/// default, 4 jobs at a time each) shares one queue of the store at `url` in which a heavy
/// tenant has a deep backlog. Three light tenants each enqueue a job, wait until it has
/// started, and enqueue the next. For every light job the scenario counts the jobs of other
/// tenants that *started, in any process*, between the moment its enqueue returned and its
/// own start (on the order of starts across all processes, from the job command's records
/// on the host's clock), and asserts the count is at most [`FairBound::limit`]:
/// `2 (K - 1)` claims the fair order may put first, plus what the processes hold claimed
/// but not started (`N (c + p)`), plus what the other processes start while the light job
/// waits in its own process's pipeline (`(N - 1) (S p + c)`, its process up to `S = 4`
/// times slower than the others). With N = 3, c = 4, p = 4 (the prefetch depth the workers
/// are given) and K = 4 that is 70, while a store that hands out jobs first come, first served
/// makes the light job wait behind the heavy backlog (about 3,000).
///
/// It also checks the run means something: the heavy backlog still held more than the
/// bound when the last light job started, every process started jobs, and light jobs ran
/// in more than one process.
pub fn light_tenants_start_within_the_fair_bound(net: &Network, url: &str) {
    let processes = net.hosts().len();
    let heavy_jobs = knob("FAIRQ_SCALE_HEAVY_JOBS", 3_000);
    let light_jobs = knob("FAIRQ_SCALE_LIGHT_JOBS", 8);
    let light_tenants = 3;
    let concurrency = 4;
    let prefetch = 4;
    let bound = FairBound {
        processes,
        keys: 1 + light_tenants,
        concurrency,
        // The prefetch depth the workers are given (fixed: by default the depth adapts, up to
        // 32 times the concurrency, and the bound would be that much looser); on a store
        // that cannot take jobs back they prefetch nothing, and the bound is looser than
        // needed.
        prefetch,
        // See fairq_scale_tests::fairness for why the light job's process is allowed to run
        // up to four times slower than the others.
        slower: 4,
    };
    let queue = "fair";

    let rt = runtime();
    let store = rt.block_on(fairq::connect(url)).expect("the store");
    let heavy: Vec<NewJob> = (0..heavy_jobs)
        .map(|i| NewJob::new(queue, "heavy", i.to_string().into_bytes()).key("heavy"))
        .collect();
    rt.block_on(enqueue_all(&store, heavy));

    let dir = tempfile::tempdir().expect("a folder");
    let mut config = WorkerConfig::new(queue);
    config.concurrency = concurrency;
    config.prefetch = Some(prefetch);
    config.work_ms = 5;
    config.lease = Duration::from_secs(60);
    let mut workers: Vec<WorkerProcess> = net
        .hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| start_worker(host, url, &config, dir.path(), &format!("worker{i}")))
        .collect();
    let logs = logs(&workers);

    // Each light tenant: enqueue, wait for that job's start, enqueue the next.
    let tenants: Vec<String> = (0..light_tenants).map(|t| format!("light{t}")).collect();
    let mut sent = vec![0usize; light_tenants];
    let mut waiting: Vec<Option<JobId>> = vec![None; light_tenants];
    let mut light: Vec<(String, u64, u128)> = Vec::new(); // (tenant, job, enqueued by)
    wait_for("every light job to start", Duration::from_secs(600), || {
        let events = read_logs(&logs).expect("the job logs");
        for t in 0..light_tenants {
            if let Some(job) = waiting[t] {
                if first_start(&events, job.0).is_none() {
                    continue;
                }
                waiting[t] = None;
            }
            if sent[t] < light_jobs {
                let job = NewJob::new(queue, "light", vec![]).key(tenants[t].clone());
                let id = rt.block_on(store.enqueue(job)).expect("enqueue");
                light.push((tenants[t].clone(), id.0, now_ns()));
                sent[t] += 1;
                waiting[t] = Some(id);
            }
        }
        waiting.iter().all(Option::is_none).then_some(())
    })
    .expect("the light jobs start");
    for worker in &mut workers {
        worker
            .stop(Duration::from_secs(30))
            .expect("a graceful stop");
    }

    let events = read_logs(&logs).expect("the job logs");
    let limit = bound.limit();
    let waits: Vec<usize> = light
        .iter()
        .map(|(tenant, job, enqueued)| {
            overtaken(&events, *job, tenant, *enqueued).expect("the light job started")
        })
        .collect();
    eprintln!(
        "overtaken per light job (bound {limit} = {} + {} + {}): {waits:?}",
        bound.claims_ahead(),
        bound.held_before(),
        bound.started_meanwhile()
    );
    let start_of = |job: u64| first_start(&events, job).expect("started");
    // Where the longest wait's overtakers started: in the light job's own process (claimed
    // before it) or in the others (started while it waited in its process's pipeline).
    if let Some((i, _)) = waits.iter().enumerate().max_by_key(|(_, n)| **n) {
        let (tenant, job, enqueued) = &light[i];
        let start = start_of(*job);
        let by_worker: Vec<usize> = (0..processes)
            .map(|w| {
                events
                    .iter()
                    .filter(|e| e.step == Step::Start && e.worker == w && &e.key != tenant)
                    .filter(|e| e.at_ns > *enqueued && e.at_ns < start.at_ns)
                    .count()
            })
            .collect();
        eprintln!(
            "longest wait: light job {job} started in process {} after {:.1} ms, overtaken \
             per process {by_worker:?}",
            start.worker,
            (start.at_ns - enqueued) as f64 / 1e6
        );
    }
    let last_light_start = light
        .iter()
        .map(|(_, job, _)| start_of(*job).at_ns)
        .max()
        .expect("light jobs");
    let heavy_started = events
        .iter()
        .filter(|e| e.step == Step::Start && e.key == "heavy" && e.at_ns < last_light_start)
        .count();
    let per_worker: Vec<usize> = (0..processes)
        .map(|w| {
            events
                .iter()
                .filter(|e| e.worker == w && e.step == Step::Start)
                .count()
        })
        .collect();
    let light_workers: BTreeSet<usize> = light
        .iter()
        .map(|(_, job, _)| start_of(*job).worker)
        .collect();
    eprintln!(
        "heavy jobs started before the last light one: {heavy_started} of {heavy_jobs}; \
         starts per process: {per_worker:?}; light jobs ran in processes {light_workers:?}"
    );

    for ((tenant, job, _), n) in light.iter().zip(&waits) {
        assert!(
            *n <= limit,
            "light job {job} of {tenant} started after {n} jobs of other tenants started in \
             the worker processes, more than the bound {limit}: {waits:?}"
        );
    }
    assert!(
        heavy_jobs - heavy_started > limit,
        "the heavy backlog ran low ({heavy_started} of {heavy_jobs} started) before the last \
         light job started, so the bound was not put to the test"
    );
    assert!(
        per_worker.iter().all(|&n| n > 0),
        "a process started no job: {per_worker:?}"
    );
    assert!(
        light_workers.len() > 1,
        "every light job ran in one process ({light_workers:?}): fairness across processes \
         was not exercised"
    );
}
