#![doc = include_str!("../README.md")]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod admin;
mod backend;
mod cancel;
mod claim;
mod core;
mod due;
mod enqueue;
mod enqueue_one;
mod error;
mod exec;
mod found;
mod leases;
mod listen;
mod options;
mod pause;
mod payload;
mod pipeline;
mod probe;
mod promotion;
mod rows;
mod schema;
mod self_settled;
mod settle;
mod settler;
mod sql;
mod store;
mod tls;
mod transactional;
mod vacuum;
mod wait;
mod warm;

pub use enqueue::Producer;
pub use error::PgError;
pub use options::PgOptions;

pub use schema::{migration_sql, DEFAULT_SCHEMA, MIGRATIONS, SCHEMA_VERSION};
pub use store::PgBackend;
pub use tls::{ClientCert, PemKind, RootCerts, SslMode, TlsError};
pub use vacuum::Vacuuming;

/// The boxed future a transactional job's work returns (see
/// [`PgBackend::run_in_transaction`]).
pub use futures::future::BoxFuture;

/// Re-exported so users build pools and configs with the same versions.
pub use deadpool_postgres;
/// Re-exported so users pass clients and transactions of the same version.
pub use tokio_postgres;
