#![doc = include_str!("../README.md")]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod admin;
mod backend;
mod enqueue;
mod error;
mod exec;
mod listen;
mod options;
mod rows;
mod schema;
mod sql;

pub use backend::PgBackend;
pub use enqueue::Producer;
pub use error::PgError;
pub use options::PgOptions;
pub use schema::{migration_sql, DEFAULT_SCHEMA, MIGRATIONS, SCHEMA_VERSION};

/// Re-exported so users build pools and configs with the same versions.
pub use deadpool_postgres;
/// Re-exported so users pass clients and transactions of the same version.
pub use tokio_postgres;
