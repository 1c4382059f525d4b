//! The `--store` value: which job store a command talks to. Parsing and opening are the
//! `fairq` crate's ([`fairq::connect_with`]); this module only says how each command opens.

pub use fairq::{ConnectOptions, Store, StoreUrl};

use crate::error::CliError;

/// The store used when `--store` is not given (except by `demo`, which uses a fresh
/// temporary folder).
pub const DEFAULT_STORE: &str = "file:./fairq-data";

/// How a command opens its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The command may create a new store (`enqueue`, `work`, `bench`, `demo`).
    Create,
    /// The store must exist already: a mistyped `file:` path or PostgreSQL schema is an
    /// error, never a new store (`stats`, `list`, `revive`, `purge`, `prune`).
    Existing,
}

/// Parses `url` and opens the store for a command with `access`.
pub(crate) async fn open(
    url: &StoreUrl,
    options: &ConnectOptions,
    access: Access,
) -> Result<Store, CliError> {
    let create = access == Access::Create;
    let options = options.clone().create(create).migrate(create);
    Store::open(url, &options).await.map_err(|err| {
        if !create && schema_missing(&err) {
            CliError::Usage(format!(
                "{}; `fairq enqueue` or `fairq work` on this store creates it",
                CliError::from(err).one_line()
            ))
        } else {
            err.into()
        }
    })
}

/// True when `err` says a PostgreSQL store's schema does not exist.
fn schema_missing(err: &fairq::ConnectError) -> bool {
    let fairq::ConnectError::Open {
        source: fairq::BackendError::Store(source),
        ..
    } = err
    else {
        return false;
    };
    matches!(
        source.downcast_ref::<fairq::postgres::PgError>(),
        Some(fairq::postgres::PgError::SchemaMissing { .. })
    )
}
