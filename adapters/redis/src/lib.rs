//! # fairq-redis
//!
//! A [`fairq_worker::Backend`] on Redis: jobs are claimed fairly by key with the
//! snapshot-of-heads rule of [`fairq_core::fair`], under leases with fencing tokens, and every
//! state change is one atomic Lua script. See the crate README for the data layout, the
//! fairness argument, durability settings and benchmark numbers.
//!
//! ```no_run
//! # async fn demo() -> Result<(), fairq_worker::BackendError> {
//! use std::time::Duration;
//! use fairq_redis::{RedisBackend, RedisOptions};
//! use fairq_worker::{Backend, NewJob};
//!
//! let store = RedisBackend::connect("redis://127.0.0.1:6379/", RedisOptions::new().prefix("app"))
//!     .await?;
//! store.enqueue(NewJob::new("mail", "welcome", b"{}".to_vec()).key("tenant-a")).await?;
//! for job in store.claim("mail", 8, Duration::from_secs(30)).await? {
//!     // ... run the handler ...
//!     store.complete(job.claim).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! ## Repeating calls safely
//!
//! When a connection breaks before a reply arrives, the store repeats the call on a fresh
//! connection (up to [`RedisOptions::retries`] times). Every script is written so that a
//! repeat is harmless: enqueue skips ids it already wrote, complete and fail recognise their
//! own earlier success by the lease token (a store that does not keep succeeded jobs, see
//! [`RedisOptions::keep_succeeded`], by the job's absence), heartbeat and rescue are fenced by the token, and
//! purge and prune delete what is still there. A claim whose reply was lost leaves its jobs
//! leased to nobody; they are rescued when the lease expires, as if the worker had died.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod admin;
mod backend;
mod call;
mod cancel;
mod client_certificate;
mod connection;
mod deps;
mod enqueue;
mod error;
mod hold;
mod keys;
mod link;
mod ops;
mod options;
mod pause;
mod persistence;
mod query;
mod queues;
mod record;
mod registry;
mod rescue;
mod scripts;
mod settle;
mod target;
mod timing;
mod timing_flush;
mod tls;
mod wait;

pub use backend::RedisBackend;
pub use client_certificate::ClientCertificate;
pub use connection::Connection;
pub use error::RedisStoreError;
pub use keys::KeySpace;
pub use options::{RedisOptions, ReplicaWait};
pub use persistence::Persistence;
pub use target::Target;
