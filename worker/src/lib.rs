//! # fairq-worker
//!
//! The job runtime of fairq: a [`Backend`] trait that every store implements (in memory, the
//! file journal, PostgreSQL, Redis), the job model they share, and the worker that claims,
//! runs, retries and rescues jobs.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod backend;
mod clock;
mod codec;
mod handler;
mod job;
mod memory;
mod random;
mod testing;
mod worker;

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;

pub use backend::{
    Backend, BackendError, BoxError, ListFilter, Purge, QueueStats, RetryTarget, StatusCounts,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use codec::{Codec, CodecError, JsonCodec};
pub use handler::{Handlers, PermanentExt};
pub use job::{
    Claim, Failure, Job, JobId, JobInfo, JobStatus, NewJob, OnConflict, Schedule, UnknownStatus,
};
pub use memory::MemoryBackend;
pub use random::random_u64;
pub use testing::{RunOutcome, RunResult, TestQueue, TestQueueError};
pub use worker::{
    DeadJob, JobOutcome, JobReport, Operation, QueueConfig, ShutdownReport, SlowJob, Worker,
    WorkerBuilder, WorkerConfigError, WorkerError, WorkerHandle,
};

/// Re-exported so stores and users name one version of the core types.
pub use fairq_core;
