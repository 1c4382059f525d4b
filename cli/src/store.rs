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
    /// error, never a new store (`revive`, `purge`, `prune`, `serve`).
    Existing,
    /// As `Existing`, and the command only looks: a file store is opened read-only, so it
    /// can be inspected on a full disk or a read-only mount (`stats`, `list`).
    ReadOnly,
}

/// Parses `url` and opens the store for a command with `access`.
pub(crate) async fn open(
    url: &StoreUrl,
    options: &ConnectOptions,
    access: Access,
) -> Result<Store, CliError> {
    let create = access == Access::Create;
    let options = options
        .clone()
        .create(create)
        .migrate(create)
        .read_only(access == Access::ReadOnly);
    let store = Store::open(url, &options).await.map_err(|err| {
        if !create && schema_missing(&err) {
            CliError::Usage(format!(
                "{}; `fairq enqueue` or `fairq work` on this store creates it",
                CliError::from(err).one_line()
            ))
        } else {
            err.into()
        }
    })?;
    warn_about_repairs(&store);
    Ok(store)
}

/// Prints to stderr what opening a file store found and repaired (a torn tail cut off, a
/// damaged last record dropped...), one `warning:` line each: never silent.
fn warn_about_repairs(store: &Store) {
    if let Store::File(file) = store {
        for warning in file.recovery_warnings() {
            crate::output_error_line(&format!("warning: {warning}"));
        }
    }
}

/// Prints a `warning:` line when the store's server is set up to lose jobs or speed: a Redis
/// server without the append-only file loses jobs on a restart, a PostgreSQL server that
/// never vacuums the job tables slows down with every job run. Says nothing when the server
/// will not tell.
pub(crate) async fn warn_about_server(store: &Store) {
    match store {
        Store::Redis(redis) => {
            if let Ok(persistence) = redis.persistence().await
                && persistence.loses_jobs()
            {
                crate::output_error_line(&format!("warning: Redis: {persistence}"));
            }
        }
        Store::Postgres(pg) => {
            if let Ok(vacuuming) = pg.vacuuming().await
                && vacuuming.needs_vacuum()
            {
                crate::output_error_line(&format!("warning: PostgreSQL: {vacuuming}"));
            }
        }
        _ => {}
    }
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
