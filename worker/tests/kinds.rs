//! Typed jobs and defaults: a kind's defaults reach the store, its handler gets the decoded
//! payload under the kind's time limit, invalid payloads never reach the store, handlers share
//! state, and per-queue/per-kind policies apply unless a job brings its own. Tests run on
//! tokio's paused clock, so time limits and waits are exact and instant.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use fairq_core::job::{DeadReason, State};
use fairq_core::retry::RetryPolicy;
use fairq_worker::{
    Backend, BackendError, Defaults, Handlers, Job, JobId, JobKind, JobReport, JobStatus,
    MemoryBackend, NewJob, OnConflict, QueueConfig, Worker,
};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Invoice {
    customer: String,
    number: u64,
    #[serde(default)]
    after: Option<u64>,
}

impl JobKind for Invoice {
    const KIND: &'static str = "invoice";
    const QUEUE: &'static str = "billing";

    fn retry() -> Option<RetryPolicy> {
        Some(RetryPolicy::new(2))
    }

    fn key(&self) -> Option<String> {
        Some(self.customer.clone())
    }

    fn unique(&self) -> Option<(String, OnConflict)> {
        Some((format!("invoice-{}", self.number), OnConflict::Ignore))
    }

    fn depends_on(&self) -> Option<JobId> {
        self.after.map(JobId)
    }

    fn validate(&self) -> Result<(), String> {
        if self.customer.is_empty() {
            return Err("an invoice needs a customer".into());
        }
        Ok(())
    }
}

/// A kind whose attempts may run for 50 ms at most.
#[derive(Debug, Serialize, Deserialize)]
struct Slow;

impl JobKind for Slow {
    const KIND: &'static str = "slow";

    fn retry() -> Option<RetryPolicy> {
        Some(RetryPolicy::new(0))
    }

    fn timeout() -> Option<Duration> {
        Some(Duration::from_millis(50))
    }
}

fn invoice(customer: &str, number: u64) -> Invoice {
    Invoice {
        customer: customer.into(),
        number,
        after: None,
    }
}

/// Starts a worker on `store` for `queue` with `handlers`, reporting each finished attempt.
fn worker<B: Backend>(
    store: &Arc<B>,
    queue: &str,
    handlers: Handlers,
) -> (
    fairq_worker::WorkerHandle<Arc<B>>,
    mpsc::UnboundedReceiver<JobReport>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let handle = Worker::builder(Arc::clone(store))
        .queue(queue, QueueConfig::default().concurrency(2))
        .handlers(handlers)
        .on_finished(move |report| {
            tx.send(report.clone()).ok();
        })
        .build()
        .expect("valid worker")
        .start()
        .expect("inside a runtime");
    (handle, rx)
}

#[test]
fn a_kind_sets_queue_key_policy_unique_key_and_dependency() {
    let mut payload = invoice("acme", 7);
    payload.after = Some(3);
    let job = NewJob::of(&payload).expect("valid");
    assert_eq!(job.queue, "billing");
    assert_eq!(job.kind, "invoice");
    assert_eq!(job.key.as_deref(), Some("acme"));
    assert_eq!(job.retry, Some(RetryPolicy::new(2)));
    assert_eq!(job.unique_key.as_deref(), Some("invoice-7"));
    assert_eq!(job.on_conflict, OnConflict::Ignore);
    assert_eq!(job.depends_on, Some(JobId(3)));
    assert_eq!(
        serde_json::from_slice::<Invoice>(&job.payload).unwrap(),
        payload
    );
    // Each default can be overridden.
    let job = job.queue("urgent").retry(RetryPolicy::new(9)).key("vip");
    assert_eq!(
        (job.queue.as_str(), job.key.as_deref(), job.retry),
        ("urgent", Some("vip"), Some(RetryPolicy::new(9)))
    );
}

#[tokio::test(start_paused = true)]
async fn an_invalid_payload_is_refused_before_it_is_stored() {
    let store = MemoryBackend::new();
    let err = NewJob::of(&invoice("", 1)).expect_err("no customer");
    assert!(matches!(err, BackendError::Invalid(_)));
    assert_eq!(
        err.to_string(),
        "invalid request: invoice payload: an invoice needs a customer"
    );
    assert!(store.is_empty(), "nothing reached the store");
}

#[tokio::test(start_paused = true)]
async fn a_typed_handler_gets_the_decoded_payload() {
    let store = Arc::new(MemoryBackend::new());
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let handlers = Handlers::new().on_kind(move |inv: Invoice, job: Job| {
        let seen = seen_tx.clone();
        async move {
            seen.send((inv, job.key.clone())).ok();
            Ok::<_, String>(())
        }
    });
    let (handle, mut reports) = worker(&store, "billing", handlers);
    let id = store
        .enqueue(NewJob::of(&invoice("acme", 1)).unwrap())
        .await
        .unwrap();
    let (got, key) = seen.recv().await.expect("handled");
    assert_eq!(got, invoice("acme", 1));
    assert_eq!(key.as_deref(), Some("acme"));
    reports.recv().await.expect("reported");
    assert!(handle.shutdown(Duration::from_secs(5)).await.is_clean());
    assert_eq!(
        store.get(id).await.unwrap().unwrap().status(),
        JobStatus::Succeeded
    );
}

#[tokio::test(start_paused = true)]
async fn a_dependency_from_the_payload_holds_the_job() {
    let store = MemoryBackend::new();
    let first = store
        .enqueue(NewJob::of(&invoice("acme", 1)).unwrap())
        .await
        .unwrap();
    let mut second = invoice("acme", 2);
    second.after = Some(first.0);
    let second = store.enqueue(NewJob::of(&second).unwrap()).await.unwrap();
    assert_eq!(
        store.get(second).await.unwrap().unwrap().state,
        State::Blocked
    );
}

#[tokio::test(start_paused = true)]
async fn a_payload_that_does_not_decode_kills_the_job_with_the_kind_named() {
    let store = Arc::new(MemoryBackend::new());
    let handlers =
        Handlers::new().on_kind(|_inv: Invoice, _job: Job| async { Ok::<_, String>(()) });
    let (handle, mut reports) = worker(&store, "billing", handlers);
    let id = store
        .enqueue(NewJob::new(
            "billing",
            "invoice",
            b"{\"number\": \"x\"}".to_vec(),
        ))
        .await
        .unwrap();
    let report = reports.recv().await.expect("reported");
    let failure = report.result.expect_err("undecodable");
    assert!(failure.permanent);
    assert!(
        failure.message.contains("invoice payload"),
        "{}",
        failure.message
    );
    assert!(handle.shutdown(Duration::from_secs(5)).await.is_clean());
    let info = store.get(id).await.unwrap().unwrap();
    assert!(matches!(
        info.state,
        State::Dead {
            reason: DeadReason::Discarded,
            ..
        }
    ));
}

#[tokio::test(start_paused = true)]
async fn an_attempt_past_the_kind_time_limit_fails_with_a_clear_reason() {
    let store = Arc::new(MemoryBackend::new());
    let handlers = Handlers::new().on_kind(|_slow: Slow, _job: Job| async {
        std::future::pending::<()>().await;
        Ok::<_, String>(())
    });
    let (handle, mut reports) = worker(&store, "default", handlers);
    let id = store.enqueue(NewJob::of(&Slow).unwrap()).await.unwrap();
    let started = tokio::time::Instant::now();
    let report = reports.recv().await.expect("reported");
    assert_eq!(started.elapsed(), Duration::from_millis(50));
    let failure = report.result.expect_err("timed out");
    assert!(!failure.permanent, "a timeout may succeed next time");
    assert_eq!(
        failure.message,
        "timed out: a slow job may run for at most 50ms"
    );
    assert!(handle.shutdown(Duration::from_secs(5)).await.is_clean());
    let info = store.get(id).await.unwrap().unwrap();
    assert_eq!(info.status(), JobStatus::Dead, "its policy allows no retry");
    assert_eq!(info.last_error.as_deref(), Some(failure.message.as_str()));
}

/// A kind's time limit reached during a shutdown is a failed attempt, as any timeout: the
/// handler did not give up when asked, it was stopped. So the attempt counts (here the job
/// dies, its policy allowing no retry) instead of being handed back uncounted; through
/// `Handlers::on_kind` and `WorkerBuilder::handle_kind` alike.
#[tokio::test(start_paused = true)]
async fn a_kind_time_limit_reached_during_shutdown_fails_the_attempt() {
    for through_builder in [false, true] {
        let store = Arc::new(MemoryBackend::new());
        let ignore_stop = |_slow: Slow, _job: Job| async {
            std::future::pending::<()>().await;
            Ok::<_, String>(())
        };
        let builder = Worker::builder(Arc::clone(&store)).queue("default", QueueConfig::default());
        let builder = if through_builder {
            builder.handle_kind(ignore_stop)
        } else {
            builder.handlers(Handlers::new().on_kind(ignore_stop))
        };
        let handle = builder.build().unwrap().start().unwrap();
        let id = store.enqueue(NewJob::of(&Slow).unwrap()).await.unwrap();
        // Started without any time passing.
        for _ in 0..10_000 {
            if handle.running() == 1 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(handle.running(), 1, "started");
        let report = handle.shutdown(Duration::from_secs(10)).await;
        assert!(report.released.is_empty(), "not handed back: {report:?}");
        assert!(report.is_clean(), "{report:?}");
        let info = store.get(id).await.unwrap().unwrap();
        assert_eq!((info.status(), info.attempts), (JobStatus::Dead, 1));
        assert_eq!(
            info.last_error.as_deref(),
            Some("timed out: a slow job may run for at most 50ms")
        );
    }
}

#[tokio::test(start_paused = true)]
async fn handlers_share_state_given_once() {
    struct App {
        invoices: AtomicU32,
        slow: AtomicU32,
    }
    let store = Arc::new(MemoryBackend::new());
    let handlers: Handlers = Handlers::with_state(App {
        invoices: AtomicU32::new(0),
        slow: AtomicU32::new(0),
    })
    .on_kind(|_inv: Invoice, _job: Job, app: Arc<App>| async move {
        app.invoices.fetch_add(1, Ordering::SeqCst);
        Ok::<_, String>(())
    })
    .on("audit", |_job: Job, app: Arc<App>| async move {
        // Sees what the other handler did: one shared value.
        assert_eq!(app.invoices.load(Ordering::SeqCst), 2);
        app.slow.fetch_add(1, Ordering::SeqCst);
        Ok::<_, String>(())
    })
    .into();
    let (handle, mut reports) = worker(&store, "billing", handlers);
    for n in 0..2 {
        store
            .enqueue(NewJob::of(&invoice("acme", n)).unwrap())
            .await
            .unwrap();
    }
    for _ in 0..2 {
        reports.recv().await.expect("reported");
    }
    store
        .enqueue(NewJob::new("billing", "audit", vec![]))
        .await
        .unwrap();
    let audit = reports.recv().await.expect("reported");
    assert!(audit.result.is_ok(), "{:?}", audit.result);
    assert!(handle.shutdown(Duration::from_secs(5)).await.is_clean());
}

#[tokio::test(start_paused = true)]
async fn defaults_apply_by_kind_then_queue_and_a_job_keeps_its_own() {
    let store = Defaults::new()
        .queue("mail", RetryPolicy::new(3))
        .kind("receipt", RetryPolicy::new(10))
        .wrap(MemoryBackend::new());
    let plain = store
        .enqueue(NewJob::new("mail", "welcome", vec![]))
        .await
        .unwrap();
    let by_kind = store
        .enqueue_many(vec![NewJob::new("mail", "receipt", vec![])])
        .await
        .unwrap()[0];
    let own = store
        .enqueue(NewJob::new("mail", "receipt", vec![]).retry(RetryPolicy::new(0)))
        .await
        .unwrap();
    let elsewhere = store
        .enqueue(NewJob::new("other", "welcome", vec![]))
        .await
        .unwrap();
    let retries = |id| {
        let store = store.inner().clone();
        async move {
            let job = store.peek(id).expect("stored");
            job.retry.max_retries()
        }
    };
    assert_eq!(retries(plain).await, Some(3));
    assert_eq!(retries(by_kind).await, Some(10));
    assert_eq!(retries(own).await, Some(0));
    assert_eq!(
        retries(elsewhere).await,
        RetryPolicy::default().max_retries()
    );

    // The wrapped store works for a worker like any other.
    let store = Arc::new(store);
    let handlers = Handlers::new().on("welcome", |_job: Job| async { Ok::<_, String>(()) });
    let (handle, mut reports) = worker(&store, "mail", handlers);
    assert!(reports.recv().await.expect("reported").result.is_ok());
    assert!(handle.shutdown(Duration::from_secs(5)).await.is_clean());
}
