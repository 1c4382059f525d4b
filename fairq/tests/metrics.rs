//! `fairq_jobs_enqueued_total` counted by the store `fairq::connect` opens, with no
//! `Metered` wrapper: read back by a small recorder installed for this test binary (its only
//! test, so the process-wide recorder is its own).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use fairq::metrics::ENQUEUED;
use fairq::{Backend, ConnectOptions, NewJob};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// Counters by `name{label=value,...}` (labels sorted).
#[derive(Default)]
struct Counters(Mutex<BTreeMap<String, Arc<AtomicU64>>>);

impl Recorder for Counters {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        let series = format!("{}{{{}}}", key.name(), labels.join(","));
        let mut all = self.0.lock().unwrap();
        Counter::from_arc(Arc::clone(all.entry(series).or_default()))
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

impl Counters {
    fn enqueued(&self, queue: &str, kind: &str) -> u64 {
        let series = format!("{ENQUEUED}{{kind={kind},queue={queue}}}");
        let all = self.0.lock().unwrap();
        all.get(&series).map_or(0, |c| c.load(Ordering::SeqCst))
    }
}

#[tokio::test]
async fn the_store_fairq_connect_opens_counts_what_it_accepted() {
    let recorder: &'static Counters = Box::leak(Box::default());
    metrics::set_global_recorder(recorder).expect("the only recorder of this test binary");
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file:{}", dir.path().join("jobs").display());

    for url in [url.as_str(), "memory:"] {
        let queue = if url == "memory:" { "mem" } else { "file" };
        let store = fairq::connect(url).await.unwrap();
        store
            .enqueue(NewJob::new(queue, "welcome", vec![]))
            .await
            .unwrap();
        store
            .enqueue_many(vec![
                NewJob::new(queue, "welcome", vec![]),
                NewJob::new(queue, "bye", vec![]),
                NewJob::new(queue, "bye", vec![]),
            ])
            .await
            .unwrap();
        assert_eq!(recorder.enqueued(queue, "welcome"), 2, "{url}");
        assert_eq!(recorder.enqueued(queue, "bye"), 2, "{url}");
        // Other queues and kinds saw nothing.
        assert_eq!(recorder.enqueued(queue, "other"), 0, "{url}");
    }

    // A job the store refused is not counted: the file store opened read-only refuses
    // every change.
    let read_only = fairq::connect_with(&url, &ConnectOptions::default().read_only(true))
        .await
        .unwrap();
    read_only
        .enqueue(NewJob::new("file", "welcome", vec![]))
        .await
        .unwrap_err();
    read_only
        .enqueue_many(vec![NewJob::new("file", "bye", vec![])])
        .await
        .unwrap_err();
    assert_eq!(recorder.enqueued("file", "welcome"), 2);
    assert_eq!(recorder.enqueued("file", "bye"), 2);
}
