//! # fairq-web
//!
//! The operator dashboard and HTTP API of fairq, for any store that implements
//! [`Inspect`](fairq_worker::Inspect) (every fairq store does): queues with counts by state,
//! throughput, waits and run times over recent windows, a **tenants view** that shows how
//! fairly each fairness key is served, jobs with filters and their full records, and the
//! operator actions (revive, purge, cancel, pause and resume where the store can).
//!
//! The server is [axum](https://docs.rs/axum) on tokio. The front-end is one small page,
//! script and style sheet compiled into the crate. See the crate README for the routes, the
//! JSON shapes and the security model.
//!
//! ```
//! use std::time::Duration;
//! use fairq_web::{Config, Server};
//! use fairq_worker::{Backend, MemoryBackend, NewJob};
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let store = MemoryBackend::new();
//! store.enqueue(NewJob::new("mail", "welcome", b"{}".to_vec()).key("tenant-1")).await?;
//!
//! let config = Config::new("memory:")
//!     .listen("127.0.0.1:0".parse()?)
//!     .token("0123456789abcdef-example");
//! let server = Server::bind(store, config).await?;
//! let url = server.url();
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let running = tokio::spawn(server.run(async move { stopped.await.ok(); }));
//!
//! // ... open `url` in a browser, or call the API with the token:
//! // curl -H 'Authorization: Bearer 0123456789abcdef-example' {url}api/overview
//! # let _ = url;
//! stop.send(()).ok();
//! running.await??;
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! # }).unwrap();
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod api;
mod app;
mod assets;
mod auth;
mod config;
mod error;
mod extract;
mod history;
mod model;
mod redact;
mod server;

pub use config::{Config, DEFAULT_PORT, MAX_REFRESH, MIN_REFRESH};
pub use error::WebError;
pub use redact::{store_label, Scrubber};
pub use server::{Handle, Server};

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
