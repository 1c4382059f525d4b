//! Jobs per second through a file store without a worker in between: `CONC` tasks each claim
//! `BATCH` jobs and settle them in one call (`BATCH=1`: claim one, complete it), until `N`
//! enqueued jobs are done.
//!
//! ```text
//! cargo run --release -p fairq-file --example throughput          # N=20000 CONC=32 BATCH=1
//! N=50000 CONC=8 BATCH=16 cargo run --release -p fairq-file --example throughput
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fairq_file::{FileBackend, FileOptions};
use fairq_worker::{Backend, Finished, NewJob};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (n, conc, batch) = (env("N", 20_000), env("CONC", 32), env("BATCH", 1));
    let dir = tempfile::tempdir()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = FileBackend::open(dir.path(), FileOptions::default())?;
        let start = Instant::now();
        for chunk in 0..n.div_ceil(1000) {
            let jobs = (chunk * 1000..n.min((chunk + 1) * 1000))
                .map(|i| NewJob::new("t", "k", vec![b'x'; 128]).key(format!("key-{}", i % 100)))
                .collect();
            store.enqueue_many(jobs).await?;
        }
        let enqueued = start.elapsed();
        let done = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let tasks: Vec<_> = (0..conc)
            .map(|_| {
                let store = store.clone();
                let done = done.clone();
                tokio::spawn(async move {
                    while done.load(Ordering::Relaxed) < n {
                        let jobs = store.claim("t", batch, Duration::from_secs(60)).await?;
                        if jobs.is_empty() {
                            tokio::task::yield_now().await;
                            continue;
                        }
                        let finished = jobs.iter().map(|j| Finished::new(j, Ok(()))).collect();
                        for answer in store.settle(finished).await? {
                            answer?;
                        }
                        done.fetch_add(jobs.len(), Ordering::Relaxed);
                    }
                    Ok::<(), fairq_worker::BackendError>(())
                })
            })
            .collect();
        for task in tasks {
            task.await??;
        }
        let ran = start.elapsed();
        println!(
            "enqueue {:.0} jobs/s, claim+settle {:.0} jobs/s (n={n} conc={conc} batch={batch})",
            n as f64 / enqueued.as_secs_f64(),
            n as f64 / ran.as_secs_f64()
        );
        store.close()?;
        Ok(())
    })
}
