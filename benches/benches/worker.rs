//! fairq-worker against in-process baselines, in one run:
//!
//! * the in-memory store's job cycle (enqueue, claim under a lease, complete) per job, with
//!   1 and 1,000 fairness keys, against a `Mutex<VecDeque>` push + pop (the floor of any
//!   locked FIFO): what leases, fencing, fairness and bookkeeping cost on top;
//! * the worker end to end (20,000 no-op jobs, concurrency 32, on a two-thread tokio runtime)
//!   against a tokio mpsc channel whose consumer spawns one task per message under a
//!   32-permit semaphore (the floor of any async job runner).
//!
//! Criterion's statistics come first, then the ratio table (ours / baseline, lower is better).
//!
//! The store cycle's instruction counts, which a loaded machine does not disturb, come from
//! `benches/examples/worker_ops.rs` under callgrind; its docs keep the table per change.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use fairq_benches::{print_ratio_table, time_per_op, Ratio};
use fairq_worker::{Backend, Job, MemoryBackend, NewJob, QueueConfig, Worker};
use futures::executor::block_on;
use tokio::sync::{mpsc, Notify, Semaphore};

const LEASE: Duration = Duration::from_secs(30);
const WORKER_JOBS: usize = 20_000;
const CONCURRENCY: usize = 32;

/// One enqueue + claim + complete on the in-memory store, keys taken round robin.
struct StoreCycle {
    store: MemoryBackend,
    keys: Vec<String>,
}

impl StoreCycle {
    fn new(keys: usize) -> Self {
        StoreCycle {
            store: MemoryBackend::new(),
            keys: (0..keys).map(|k| format!("tenant-{k}")).collect(),
        }
    }

    fn step(&mut self, i: u64) {
        let key = &self.keys[i as usize % self.keys.len()];
        let job = NewJob::new("bench", "noop", Vec::new()).key(key.clone());
        let store = &self.store;
        block_on(async {
            store.enqueue(job).await.expect("enqueue");
            let jobs = store.claim("bench", 1, LEASE).await.expect("claim");
            for job in jobs {
                store.complete(job.claim).await.expect("complete");
            }
        });
        // Finished jobs are kept until pruned; prune now and then so memory stays flat.
        if i % 4_096 == 4_095 {
            block_on(store.prune(Duration::ZERO.into())).expect("prune");
        }
    }
}

/// The locked-FIFO floor: push + pop on a `Mutex<VecDeque>`.
struct LockedFifo(Mutex<VecDeque<u64>>);

impl LockedFifo {
    fn step(&self, i: u64) {
        self.0.lock().expect("lock").push_back(i);
        black_box(self.0.lock().expect("lock").pop_front());
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Seconds for a worker to run `n` no-op jobs already in the store.
fn worker_run(rt: &tokio::runtime::Runtime, n: usize) -> Duration {
    rt.block_on(async {
        let store = Arc::new(MemoryBackend::new());
        let jobs = (0..n)
            .map(|i| NewJob::new("bench", "noop", Vec::new()).key(format!("t{}", i % 16)))
            .collect();
        store.enqueue_many(jobs).await.expect("enqueue");
        let done = Arc::new(AtomicUsize::new(0));
        let all_done = Arc::new(Notify::new());
        let (d, a) = (Arc::clone(&done), Arc::clone(&all_done));
        let start = Instant::now();
        let worker = Worker::builder(Arc::clone(&store))
            .queue("bench", QueueConfig::default().concurrency(CONCURRENCY))
            .handle("noop", |_job: Job| async { Ok::<_, String>(()) })
            .on_finished(move |_| {
                if d.fetch_add(1, Ordering::SeqCst) + 1 == n {
                    a.notify_one();
                }
            })
            .build()
            .expect("worker")
            .start()
            .expect("runtime");
        all_done.notified().await;
        let elapsed = start.elapsed();
        worker.shutdown(Duration::from_secs(10)).await;
        elapsed
    })
}

/// Seconds for a channel + spawn-per-message runner to run `n` no-op jobs already queued.
fn channel_run(rt: &tokio::runtime::Runtime, n: usize) -> Duration {
    rt.block_on(async {
        let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
        for i in 0..n as u64 {
            tx.send(i).expect("send");
        }
        let slots = Arc::new(Semaphore::new(CONCURRENCY));
        let done = Arc::new(AtomicUsize::new(0));
        let all_done = Arc::new(Notify::new());
        let start = Instant::now();
        let consumer = {
            let (done, all_done) = (Arc::clone(&done), Arc::clone(&all_done));
            tokio::spawn(async move {
                while let Some(i) = rx.recv().await {
                    let permit = Arc::clone(&slots).acquire_owned().await.expect("open");
                    let (done, all_done) = (Arc::clone(&done), Arc::clone(&all_done));
                    tokio::spawn(async move {
                        black_box(i);
                        drop(permit);
                        if done.fetch_add(1, Ordering::SeqCst) + 1 == n {
                            all_done.notify_one();
                        }
                    });
                }
            })
        };
        all_done.notified().await;
        let elapsed = start.elapsed();
        drop(tx);
        consumer.await.expect("consumer");
        elapsed
    })
}

fn median_ns_per_job(samples: usize, n: usize, mut run: impl FnMut() -> Duration) -> f64 {
    let mut times: Vec<f64> = (0..samples)
        .map(|_| run().as_nanos() as f64 / n as f64)
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn criterion_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("memory store job cycle");
    group.throughput(Throughput::Elements(1));
    for keys in [1usize, 1_000] {
        let mut cycle = StoreCycle::new(keys);
        let mut i = 0;
        group.bench_function(format!("{keys} keys"), |b| {
            b.iter(|| {
                cycle.step(i);
                i += 1;
            })
        });
    }
    let fifo = LockedFifo(Mutex::new(VecDeque::new()));
    let mut i = 0;
    group.bench_function("Mutex<VecDeque> push+pop", |b| {
        b.iter(|| {
            fifo.step(i);
            i += 1;
        })
    });
    group.finish();

    let rt = runtime();
    let mut group = c.benchmark_group("worker end to end");
    group.sample_size(10);
    group.throughput(Throughput::Elements(2_000));
    group.bench_function("fairq Worker, 2,000 jobs", |b| {
        b.iter(|| worker_run(&rt, 2_000))
    });
    group.bench_function("mpsc + spawn, 2,000 jobs", |b| {
        b.iter(|| channel_run(&rt, 2_000))
    });
    group.finish();
}

fn ratio_table() {
    let fifo = LockedFifo(Mutex::new(VecDeque::new()));
    let baseline = time_per_op(5, 200_000, |i| fifo.step(i));
    let mut rows = Vec::new();
    for keys in [1usize, 1_000] {
        let mut cycle = StoreCycle::new(keys);
        let ours = time_per_op(5, 50_000, |i| cycle.step(i));
        rows.push(Ratio {
            label: format!("MemoryBackend enqueue+claim+complete, {keys} keys"),
            ours,
            baseline,
            target: None,
        });
    }
    print_ratio_table(
        "in-memory job cycle per job vs Mutex<VecDeque> push+pop",
        "Mutex<VecDeque>",
        &rows,
    );

    let rt = runtime();
    let ours = median_ns_per_job(5, WORKER_JOBS, || worker_run(&rt, WORKER_JOBS));
    let baseline = median_ns_per_job(5, WORKER_JOBS, || channel_run(&rt, WORKER_JOBS));
    print_ratio_table(
        "worker end to end per job (20,000 no-op jobs, concurrency 32)",
        "mpsc + spawn",
        &[Ratio {
            label: "fairq Worker on MemoryBackend".into(),
            ours,
            baseline,
            target: None,
        }],
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = criterion_benches
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    ratio_table();
}
