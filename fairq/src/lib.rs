//! # fairq
//!
//! Job queues that are **fair by key**: a tenant with a hundred thousand queued jobs cannot
//! make a tenant with one job wait behind them. This crate is the place to start: it brings
//! the job model, the [`Worker`], the [`Backend`] trait and the stores together, and
//! [`connect`] opens whichever store a URL names, so configuration picks the store and the
//! application has no `match` of its own.
//!
//! ```
//! use std::time::Duration;
//! use fairq::{Backend, Job, NewJob, QueueConfig, Worker};
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! # let dir = tempfile::tempdir().unwrap();
//! # let store_url = format!("file:{}", dir.path().display());
//! // For example "file:./fairq-data", "postgres://app@db/app" or "redis://cache:6379/0".
//! let store = fairq::connect(&store_url).await?;
//! let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel();
//!
//! let worker = Worker::builder(store.clone())
//!     .queue("mail", QueueConfig::default().concurrency(4))
//!     .handle_json("welcome", move |to: String, _job: Job| {
//!         let done = done_tx.clone();
//!         async move {
//!             // ... send the mail; an Err is a failed attempt, retried by the job's policy ...
//!             done.send(to).ok();
//!             Ok::<(), String>(())
//!         }
//!     })
//!     .build()?
//!     .start()?;
//!
//! store.enqueue(NewJob::json("mail", "welcome", &"ada@example.com")?.key("tenant-1")).await?;
//! assert_eq!(done.recv().await.as_deref(), Some("ada@example.com"));
//! assert!(worker.shutdown(Duration::from_secs(10)).await.is_clean());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! ## What is here
//!
//! * Everything of [`fairq_worker`] at the top level: [`NewJob`], [`Job`], [`Worker`],
//!   [`QueueConfig`], [`Backend`], [`BackendError`], [`MemoryBackend`], [`TestQueue`], ...
//!   and the sans-IO core as [`fairq_core`] (retry policies in [`fairq_core::retry`]).
//! * [`connect`] / [`connect_with`] and [`Store`], the one store type they return;
//!   [`StoreUrl`] for the URL forms; [`redact`](redact()) to show a URL without its password.
//! * The stores, each in its module with a constructor of the same shape (async, returning
//!   [`ConnectError`]): [`file::open`], [`postgres::connect`], [`redis::connect`]. The
//!   adapters' own constructors differ because the stores do: opening a file store replays
//!   a journal on the calling thread and returns the file store's error, PostgreSQL reports
//!   its own error type, Redis the common [`BackendError`]. The facade's wrappers make them
//!   uniform without hiding the adapters' richer APIs, which stay one module away.
//!
//! ## Features
//!
//! | feature | default | store | URLs |
//! |---|---|---|---|
//! | `file` | yes | [`file::FileBackend`], a durable store in a local folder | `file:PATH` |
//! | `postgres` | no | [`postgres::PgBackend`]: `SKIP LOCKED` claims, enqueue inside your transaction, LISTEN/NOTIFY | `postgres://`, `postgresql://` |
//! | `redis` | no | [`redis::RedisBackend`]: one Lua script per change | `redis://`, `rediss://`, `redis+cluster://` |
//! | `metrics` | no | records the worker's counters, histograms and gauges through the `metrics` facade (names in [`metrics`]); the [`Store`] of [`connect`] counts enqueued jobs too (a store built otherwise is wrapped in [`Metered`] for that) | |
//!
//! A URL for a store whose feature is off is refused with [`ConnectError::NotCompiled`],
//! which names the feature. `memory:` is always there.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod error;
#[cfg(feature = "file")]
pub mod file;
mod per_key;
#[cfg(feature = "postgres")]
pub mod postgres;
mod redact;
#[cfg(feature = "redis")]
pub mod redis;
mod store;
mod url;

pub use error::ConnectError;
pub use fairq_worker::*;
pub use redact::{redact, secrets, MASK};
pub use store::{connect, connect_with, ConnectOptions, Store};
pub use url::StoreUrl;

#[cfg(feature = "file")]
pub use file::{FileBackend, FileOptions};
#[cfg(feature = "postgres")]
pub use postgres::{PgBackend, PgOptions};
#[cfg(feature = "redis")]
pub use redis::{RedisBackend, RedisOptions};

/// The crate README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
