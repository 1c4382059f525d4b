//! # fairq-worker
//!
//! The job runtime of fairq: the job model every store shares, the [`Backend`] trait that
//! every store implements (in memory here; the file journal, PostgreSQL and Redis in their
//! own crates), the [`Worker`] that claims, runs, retries and rescues jobs, step-by-step
//! test helpers ([`TestQueue`]) and a conformance suite for stores.
//!
//! ## Jobs
//!
//! A job ([`NewJob`]) goes to a **queue** (which workers take it) and has a **kind** (which
//! handler runs it), an optional **fairness key** (the tenant it is fair between: a key with
//! one job waits for at most `2 (K - 1)` claims of other keys' jobs, however deep their
//! backlogs, except behind places its own purged, cancelled or held-back jobs still hold:
//! see [`Backend`]), a payload (bytes; JSON through [`NewJob::json`] or any [`Codec`]), a schedule
//! (now, after a delay, at a time), a [retry policy](fairq_core::retry::RetryPolicy), an
//! optional unique key and dependency, and metadata captured at enqueue (a trace id, say)
//! that the handler sees.
//!
//! Every store moves jobs through the same [state machine](fairq_core::job::Lifecycle):
//! scheduled or blocked, running under a lease, then succeeded, retrying or dead. A worker
//! that stops renewing its lease loses the job to a rescue, and its late completion is
//! refused (fencing), so delivery is *at least once*: write handlers that tolerate running
//! twice.
//!
//! ## A worker
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use fairq_core::retry::RetryPolicy;
//! use fairq_worker::{
//!     Backend, Failure, Job, JobOutcome, JobStatus, MemoryBackend, NewJob, QueueConfig, Worker,
//! };
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Thumbnail {
//!     image: String,
//!     width: u32,
//! }
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let store = Arc::new(MemoryBackend::new());
//! let (finished_tx, mut finished) = tokio::sync::mpsc::unbounded_channel();
//!
//! let worker = Worker::builder(Arc::clone(&store))
//!     .queue("images", QueueConfig::default().concurrency(4).lease(Duration::from_secs(60)))
//!     .handle_json("thumbnail", |t: Thumbnail, job: Job| async move {
//!         if t.width == 0 {
//!             // Retrying cannot fix this: the job dies at once.
//!             return Err(Failure::permanent("width must be positive"));
//!         }
//!         let _trace = job.metadata.get("trace_id"); // captured at enqueue
//!         // ... resize t.image; any Display error is a retryable failure ...
//!         Ok(())
//!     })
//!     .on_dead(|dead| eprintln!("job {} died: {}", dead.job.claim.id, dead.failure.message))
//!     .on_finished(move |report| {
//!         finished_tx.send((report.job.claim.id, report.outcome)).ok();
//!     })
//!     .build()?
//!     .start()?;
//!
//! // A heavy tenant's backlog does not hold back a light tenant.
//! let mut jobs = Vec::new();
//! for i in 0..20 {
//!     let t = Thumbnail { image: format!("big-{i}.png"), width: 128 };
//!     jobs.push(NewJob::json("images", "thumbnail", &t)?.key("tenant-heavy"));
//! }
//! let bad = Thumbnail { image: "x.png".into(), width: 0 };
//! jobs.push(
//!     NewJob::json("images", "thumbnail", &bad)?
//!         .key("tenant-light")
//!         .retry(RetryPolicy::new(3).with_delays([Duration::from_secs(10)]))
//!         .meta("trace_id", "4bf92f3577b34da6"),
//! );
//! let ids = store.enqueue_many(jobs).await?;
//!
//! let mut outcomes = std::collections::HashMap::new();
//! while outcomes.len() < ids.len() {
//!     let (id, outcome) = finished.recv().await.expect("worker running");
//!     outcomes.insert(id, outcome);
//! }
//! assert_eq!(outcomes[&ids[20]], JobOutcome::Dead);
//! assert_eq!(outcomes.values().filter(|o| **o == JobOutcome::Succeeded).count(), 20);
//!
//! let stats = store.stats().await?;
//! assert_eq!(stats[0].counts.succeeded, 20);
//! assert_eq!(stats[0].counts.dead, 1);
//! assert!(worker.is_healthy());
//!
//! // Stop claiming, let running jobs finish for up to 10 s, leave the rest to be rescued.
//! let report = worker.shutdown(Duration::from_secs(10)).await;
//! assert!(report.is_clean());
//! assert_eq!(store.get(ids[0]).await?.unwrap().status(), JobStatus::Succeeded);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! ## The pipeline
//!
//! Per queue, the worker runs a pipeline so that neither claiming nor recording outcomes
//! holds a slot:
//!
//! * a **claimer** keeps a prefetch buffer filled: when the buffer is at or below half its
//!   depth it claims what the queue has room for (concurrency plus
//!   [prefetch](QueueConfig::prefetch), minus what it holds), one claim at a time, so jobs
//!   are buffered, and start, in the store's fair order;
//! * **slots** (up to the concurrency) take the oldest buffered job, run its handler and
//!   take the next one as soon as the handler returns;
//! * an **acker** records finished attempts with [`Backend::settle`] in batches, several in
//!   flight, sending again a batch whose call failed as a whole; when the buffer runs low
//!   it claims the next jobs in the same call ([`Backend::settle_and_claim`]); claims pause
//!   while too many attempts wait to be recorded;
//! * a **heartbeater** renews the leases of running and buffered jobs with one
//!   [`Backend::heartbeat_many`] call per interval, and hands back buffered jobs that
//!   waited too long ([`Backend::release`]).
//!
//! `on_finished` and `on_dead` are called once the store has answered for the job. A
//! graceful [shutdown](WorkerHandle::shutdown) hands buffered jobs back without counting an
//! attempt, lets running jobs finish and the acker record them. The worker's README lists
//! what a crash costs at each stage.
//!
//! ## Testing handlers
//!
//! [`TestQueue`] runs jobs one at a time on a [`ManualClock`], with no background tasks:
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use std::time::Duration;
//! use fairq_core::retry::RetryPolicy;
//! use fairq_worker::{Handlers, Job, NewJob, RunOutcome, TestQueue};
//!
//! let tq = TestQueue::new(Handlers::new().on("sync", |job: Job| async move {
//!     if job.attempt == 1 { Err("upstream timeout") } else { Ok(()) }
//! }));
//! let policy = RetryPolicy::new(3).with_delays([Duration::from_secs(30)]);
//! let id = tq.enqueue(NewJob::new("crm", "sync", vec![]).retry(policy)).await.unwrap();
//!
//! assert!(matches!(tq.run_one("crm").await.unwrap().unwrap().outcome, RunOutcome::Retry { .. }));
//! tq.advance(Duration::from_secs(30));
//! assert_eq!(tq.run_one("crm").await.unwrap().unwrap().outcome, RunOutcome::Succeeded);
//! // Run the finished job again to check the handler is idempotent.
//! assert!(tq.force_retry(id).await.unwrap().result.is_ok());
//! # });
//! ```
//!
//! ## Writing a store
//!
//! Implement [`Backend`], then turn on the `conformance` feature in your dev-dependencies
//! and run the shared suite with one line: `fairq_worker::conformance_tests!(MyHarness)`
//! (see the `conformance` module). [`MemoryBackend`] is the reference it is written against.
//!
//! ## Features
//!
//! * `conformance`: the `conformance` module and the `conformance_tests!` macro.
//! * `metrics`: the worker records the [`metrics`] (counters, histograms, gauges) through the
//!   `metrics` facade.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backend;
mod clock;
mod codec;
mod defaults;
mod error;
mod forward;
mod handler;
pub mod inspect;
mod job;
mod kind;
mod live_counts;
pub mod memory;
mod metered;
pub mod metrics;
mod random;
mod retention;
pub mod services;
mod settle;
mod status_counts;
mod testing;
pub mod url_parts;
mod worker;

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;

pub use backend::{Backend, ListFilter, Purge, QueueStats, ReviveTarget};
pub use clock::{Clock, ManualClock, SystemClock};
pub use codec::{Codec, CodecError, JsonCodec};
pub use defaults::{Defaults, WithDefaults};
pub use error::{BackendError, BoxError};
pub use handler::{Handlers, PermanentExt};
pub use inspect::{Capabilities, Inspect, KeyBacklog, Scan, Started, Waiting};
pub use job::{
    Claim, Failure, Job, JobId, JobInfo, JobStatus, MAX_CALL_BYTES, MAX_ERROR_LEN, MAX_KEY_LEN,
    MAX_NAME_LEN, NewJob, OnConflict, Schedule, UnknownStatus, check_call_size, check_hold_until,
    check_queue_name, unix_millis,
};
pub use kind::{JobKind, WithState};
pub use live_counts::LiveCounts;
pub use memory::MemoryBackend;
pub use metered::Metered;
pub use random::{FixedRandom, Random, SystemRandom, random_u64};
pub use retention::Retention;
pub use settle::{Each, Ending, Finished, Settled, SettledAndClaimed};
pub use status_counts::StatusCounts;
pub use testing::{RunOutcome, RunResult, TestQueue, TestQueueError};
pub use worker::{
    DeadJob, HealthChange, JobOutcome, JobReport, Operation, QueueConfig, QueueHealth,
    ShutdownReport, SlowJob, StopSignal, SweepStatus, TaskFailure, Worker, WorkerBuilder,
    WorkerConfigError, WorkerError, WorkerHandle, WorkerTask,
};

/// Re-exported so stores and users name one version of the core types.
pub use fairq_core;

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
