//! # fairq-scale-tests
//!
//! A harness that runs several `fairq work` processes as if on separate hosts: each in a
//! network namespace of its own, joined to the host by a veth pair, all sharing one private
//! PostgreSQL (or Redis, or a Redis Cluster) that listens on the host's end of the veth
//! pairs. Everything it starts is stopped and removed by drop guards, so a failing or
//! panicking test leaves no namespace, link, server or process behind.
//!
//! The pieces:
//! - [`Network`]: namespaces and veth pairs, with a service address every namespace reaches.
//! - [`PrivatePostgres`], [`PrivateRedis`], [`RedisCluster`]: servers made for one test.
//! - [`WorkerProcess`]: one `fairq work --exec fairq-scale-record` process in a namespace.
//! - [`record`]: the lines the `fairq-scale-record` command writes per job (start, done),
//!   read back as one order of events across every process.
//! - [`fairness`]: the bound a light tenant's wait is held to, and how it is measured.
//!
//! The tests themselves are in `tests/`; `README.md` says what each one proves.
//!
//! ```
//! use fairq_scale_tests::fairness::FairBound;
//! let bound = FairBound { processes: 3, keys: 4, concurrency: 4, prefetch: 4, slower: 4 };
//! assert_eq!(bound.claims_ahead(), 6);
//! ```
#![deny(missing_docs)]
// One function (`process::isolate`) registers a pre-exec hook, which Rust marks unsafe.
#![deny(unsafe_code)]

mod cmd;
mod error;
pub mod fairness;
mod netns;
mod postgres;
mod process;
pub mod record;
mod redis_server;
mod services;
mod wait;
mod workers;

pub use error::HarnessError;
pub use netns::{Host, Network, MAX_HOSTS};
pub use postgres::PrivatePostgres;
pub use process::Guarded;
pub use redis_server::{cluster_info, PrivateRedis, RedisCluster};
pub use services::{knob, skip_or_fail, Needs};
pub use wait::wait_for;
pub use workers::{Binaries, Outcome, WorkerConfig, WorkerProcess};

/// The paths of the two programs the harness runs, as Cargo built them for this package:
/// the `fairq` command line (the CLI's own `main`, compiled here as `fairq-under-test`) and
/// the `fairq-scale-record` job command. Only integration tests of this package can expand
/// it (Cargo sets the variables for them).
#[macro_export]
macro_rules! binaries {
    () => {
        $crate::Binaries {
            fairq: ::std::path::PathBuf::from(env!("CARGO_BIN_EXE_fairq-under-test")),
            record: ::std::path::PathBuf::from(env!("CARGO_BIN_EXE_fairq-scale-record")),
        }
    };
}
