//! Enqueue-to-start latency with an idle consumer, measured the same way for every store.

use std::time::{Duration, Instant};

use fairq_core::stats::Histogram;
use fairq_worker::{Backend, NewJob};

/// How long a claimed job's lease lasts in the measurement (far longer than it runs).
const LEASE: Duration = Duration::from_secs(30);

/// Measures `samples` enqueue-to-start delays in `queue` of `store`, in microseconds.
///
/// A consumer task loops on `claim` (one job) and, when the queue is empty, blocks in
/// `wait_for_jobs`, as the worker does when idle. Before each sample the producer pauses for
/// `pause`, long enough for the consumer to finish the previous job and block again, then
/// enqueues one job; the delay is from just before the enqueue call to the moment the claim
/// returned it.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
/// let store = fairq_worker::MemoryBackend::new();
/// let h = fairq_benches::idle_latency(&store, "lat", 5, Duration::from_millis(1)).await;
/// assert_eq!(h.count(), 5);
/// # });
/// ```
pub async fn idle_latency<B>(store: &B, queue: &str, samples: usize, pause: Duration) -> Histogram
where
    B: Backend + Clone + 'static,
{
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let consumer = {
        let store = store.clone();
        let queue = queue.to_string();
        tokio::spawn(async move {
            let mut seen = 0;
            while seen < samples {
                let jobs = store.claim(&queue, 1, LEASE).await.expect("claim");
                if jobs.is_empty() {
                    store.wait_for_jobs(&queue, Duration::from_secs(5)).await;
                    continue;
                }
                let started = Instant::now();
                for job in jobs {
                    store.complete(job.claim).await.expect("complete");
                    seen += 1;
                }
                if tx.send(started).is_err() {
                    break;
                }
            }
        })
    };
    let mut histogram = Histogram::new();
    for _ in 0..samples {
        tokio::time::sleep(pause).await;
        let sent = Instant::now();
        store
            .enqueue(NewJob::new(queue, "noop", Vec::new()))
            .await
            .expect("enqueue");
        let started = rx.recv().await.expect("the consumer reports every job");
        let micros = started.saturating_duration_since(sent).as_micros();
        histogram.record(u64::try_from(micros).unwrap_or(u64::MAX));
    }
    consumer.await.expect("consumer");
    histogram
}

/// One line: p50, p90, p99 and max in milliseconds, and the number of samples.
///
/// ```
/// let mut h = fairq_core::stats::Histogram::new();
/// h.record(1_500);
/// assert!(fairq_benches::latency_line(&h).starts_with("p50 1."));
/// ```
pub fn latency_line(h: &Histogram) -> String {
    let ms = |micros: u64| micros as f64 / 1_000.0;
    format!(
        "p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} samples)",
        ms(h.p50()),
        ms(h.p90()),
        ms(h.p99()),
        ms(h.max()),
        h.count()
    )
}
