//! What the worker records through the `metrics` facade, read back by a small recorder
//! installed for this test binary (the process-wide recorder is its own; each test serves
//! queues of its own, so their series do not mix).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairq_core::retry::RetryPolicy;
use fairq_worker::metrics as names;
use fairq_worker::{
    Backend, Handlers, Job, JobReport, ManualClock, MemoryBackend, Metered, NewJob, QueueConfig,
    Worker,
};
use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use tokio::sync::mpsc;

const START: u64 = 1_700_000_000_000;

/// Every value recorded in a histogram.
#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

/// Counters, gauges and histograms by `name{label=value,...}` (labels sorted).
#[derive(Default)]
struct Local {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    gauges: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    histograms: Mutex<BTreeMap<String, Arc<Samples>>>,
}

fn series(key: &Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl Recorder for Local {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut all = self.counters.lock().unwrap();
        Counter::from_arc(Arc::clone(all.entry(series(key)).or_default()))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let mut all = self.gauges.lock().unwrap();
        Gauge::from_arc(Arc::clone(all.entry(series(key)).or_default()))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut all = self.histograms.lock().unwrap();
        Histogram::from_arc(Arc::clone(all.entry(series(key)).or_default()))
    }
}

impl Local {
    fn counter(&self, series: &str) -> u64 {
        let all = self.counters.lock().unwrap();
        all.get(series).map_or(0, |c| c.load(Ordering::SeqCst))
    }

    fn gauge(&self, series: &str) -> Option<f64> {
        let all = self.gauges.lock().unwrap();
        all.get(series)
            .map(|g| f64::from_bits(g.load(Ordering::SeqCst)))
    }

    fn samples(&self, series: &str) -> Vec<f64> {
        let all = self.histograms.lock().unwrap();
        all.get(series)
            .map(|h| h.0.lock().unwrap().clone())
            .unwrap_or_default()
    }
}

/// The recorder of this test binary, installed by the first test that asks.
fn recorder() -> &'static Local {
    static RECORDER: std::sync::OnceLock<&'static Local> = std::sync::OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder: &'static Local = Box::leak(Box::default());
        metrics::set_global_recorder(recorder).expect("the only recorder of this test binary");
        recorder
    })
}

#[tokio::test(start_paused = true)]
async fn a_run_shows_in_the_metrics() {
    let recorder = recorder();

    let clock = ManualClock::new(START);
    let store = Arc::new(Metered::new(MemoryBackend::with_clock(clock.clone())));
    let fast = RetryPolicy::new(1).with_delays([Duration::ZERO]);
    // A job a dead worker held: its lease is over when the worker starts.
    store
        .enqueue(NewJob::new("m", "ok", vec![]).retry(fast.clone()))
        .await
        .unwrap();
    let lost = store.claim("m", 1, Duration::from_secs(1)).await.unwrap();
    assert_eq!(lost.len(), 1);
    store
        .enqueue_many(vec![
            NewJob::new("m", "ok", vec![]).key("tenant-a"),
            NewJob::new("m", "ok", vec![]).key("tenant-b"),
            NewJob::new("m", "bad", vec![]).retry(fast),
        ])
        .await
        .unwrap();
    // Every job has been due for 2 s when the worker starts.
    clock.advance(Duration::from_secs(2));

    let (tx, mut rx) = mpsc::unbounded_channel();
    let worker = Worker::builder(Arc::clone(&store))
        .queue("m", QueueConfig::default().concurrency(2))
        .handlers(
            Handlers::new()
                .on("ok", |_job: Job| async { Ok::<_, String>(()) })
                .on("bad", |_job: Job| async { Err::<(), _>("no") }),
        )
        .clock(clock.clone())
        .metrics_key_label(true)
        .on_finished(move |r: &JobReport| drop(tx.send(r.clone())))
        .build()
        .unwrap()
        .start()
        .unwrap();
    // 3 jobs of kind ok (one of them rescued first), 2 attempts of bad.
    for _ in 0..5 {
        tokio::time::timeout(Duration::from_secs(600), rx.recv())
            .await
            .expect("five attempts")
            .unwrap();
    }
    assert!(worker.shutdown(Duration::from_secs(5)).await.is_clean());

    let r = recorder;
    assert_eq!(
        r.counter(&format!("{}{{kind=ok,queue=m}}", names::ENQUEUED)),
        3
    );
    assert_eq!(
        r.counter(&format!("{}{{kind=bad,queue=m}}", names::ENQUEUED)),
        1
    );
    let per_key = |name: &str, kind: &str, key: &str| {
        r.counter(&format!("{name}{{key={key},kind={kind},queue=m}}"))
    };
    assert_eq!(per_key(names::STARTED, "ok", "tenant-a"), 1);
    assert_eq!(
        per_key(names::STARTED, "ok", ""),
        1,
        "the rescued keyless job"
    );
    assert_eq!(per_key(names::STARTED, "bad", ""), 2);
    assert_eq!(per_key(names::SUCCEEDED, "ok", "tenant-b"), 1);
    assert_eq!(per_key(names::SUCCEEDED, "ok", ""), 1);
    assert_eq!(per_key(names::SUCCEEDED, "bad", ""), 0);
    assert_eq!(per_key(names::FAILED, "bad", ""), 2);
    assert_eq!(per_key(names::DEAD, "bad", ""), 1);
    assert_eq!(r.counter(&format!("{}{{queue=m}}", names::RESCUED)), 1);
    // Waits come from the worker's clock: the first jobs had waited exactly 2 s.
    let waits = r.samples(&format!(
        "{}{{key=tenant-a,kind=ok,queue=m}}",
        names::WAIT_SECONDS
    ));
    assert_eq!(waits, [2.0]);
    let runs = r.samples(&format!("{}{{key=,kind=bad,queue=m}}", names::RUN_SECONDS));
    assert_eq!(runs.len(), 2);
    assert_eq!(
        r.gauge(&format!("{}{{queue=m}}", names::RUNNING)),
        Some(0.0)
    );
    // The depth gauges exist (read at the rescuer's first pass, while jobs were waiting).
    assert!(
        r.gauge(&format!(
            "{}{{queue=m,state=scheduled}}",
            names::QUEUE_DEPTH
        ))
        .is_some()
    );
}

/// Jobs dropped at the shutdown deadline no longer count as running.
#[tokio::test(start_paused = true)]
async fn abandoned_jobs_leave_the_running_gauge() {
    let recorder = recorder();
    let store = Arc::new(MemoryBackend::new());
    let worker = Worker::builder(Arc::clone(&store))
        .queue("abandon", QueueConfig::default().concurrency(2))
        .handle("stuck", |_job: Job| async {
            std::future::pending::<Result<(), String>>().await
        })
        .build()
        .unwrap()
        .start()
        .unwrap();
    for _ in 0..2 {
        store
            .enqueue(NewJob::new("abandon", "stuck", vec![]))
            .await
            .unwrap();
    }
    let running = format!("{}{{queue=abandon}}", names::RUNNING);
    // Both start without any time passing.
    for _ in 0..10_000 {
        if recorder.gauge(&running) == Some(2.0) {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(recorder.gauge(&running), Some(2.0));
    let report = worker.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report.abandoned.len(), 2, "{report:?}");
    assert_eq!(recorder.gauge(&running), Some(0.0));
}

/// As documented on `Metered`: a job the store answered with the existing job's id (a unique
/// key under `OnConflict::Ignore`, nothing enqueued) counts all the same, since the answer
/// does not say which ids are new; a refused call counts nothing.
#[tokio::test]
async fn ignored_duplicates_count_and_refused_calls_do_not() {
    let recorder = recorder();
    let store = Metered::new(MemoryBackend::new());
    let once = || NewJob::new("dup", "once", vec![]).unique("u", fairq_worker::OnConflict::Ignore);
    for _ in 0..3 {
        store.enqueue(once()).await.unwrap();
    }
    store.enqueue_many(vec![once(), once()]).await.unwrap();
    assert_eq!(store.inner().len(), 1, "one job stored");
    store
        .enqueue_many(vec![
            NewJob::new("dup", "once", vec![]),
            NewJob::new("dup", "", vec![]),
        ])
        .await
        .unwrap_err();
    assert_eq!(store.inner().len(), 1, "a refused batch stores nothing");
    assert_eq!(
        recorder.counter(&format!("{}{{kind=once,queue=dup}}", names::ENQUEUED)),
        5,
        "every job of an accepted call counts"
    );
}
