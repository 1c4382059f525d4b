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
mod job;
mod random;

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;

pub use backend::{
    Backend, BackendError, BoxError, ListFilter, Purge, QueueStats, RetryTarget, StatusCounts,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use codec::{Codec, CodecError, JsonCodec};
pub use job::{
    Claim, Failure, Job, JobId, JobInfo, JobStatus, NewJob, OnConflict, Schedule, UnknownStatus,
};
pub use random::random_u64;

/// Re-exported so stores and users name one version of the core types.
pub use fairq_core;
