//! Errors of the PostgreSQL store, and how driver errors map onto [`BackendError`].

use std::error::Error as StdError;

use fairq_worker::{BackendError, BoxError};

/// What can go wrong setting up or talking to the PostgreSQL store.
///
/// Every variant converts into a [`BackendError`]: connection trouble becomes
/// [`BackendError::Unavailable`] (transient, a worker retries), everything else
/// [`BackendError::Store`].
///
/// ```
/// use fairq_postgres::PgError;
/// let err = PgError::SchemaMissing { schema: "jobs".into() };
/// assert!(err.to_string().contains("run migrate()"));
/// let backend: fairq_worker::BackendError = err.into();
/// assert!(!backend.is_transient());
/// ```
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// The connection URL or key-value string does not parse.
    #[error("invalid PostgreSQL connection string: {0}")]
    BadUrl(#[source] tokio_postgres::Error),
    /// The schema name is not a plain identifier.
    #[error(
        "invalid schema name {0:?}: use 1 to 48 ASCII letters, digits or underscores, \
         not starting with a digit"
    )]
    BadSchemaName(String),
    /// The server cannot be reached, refused the connection, or dropped it.
    #[error("PostgreSQL is unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// The schema or its tables do not exist.
    #[error(
        "the fairq schema {schema:?} does not exist or is incomplete: run migrate() \
         (or apply sql/v1.sql) before using the store"
    )]
    SchemaMissing {
        /// The schema looked for.
        schema: String,
    },
    /// The schema was created by a newer version of this library.
    #[error(
        "the fairq schema {schema:?} is at version {found}, newer than the {supported} this \
         library knows: upgrade fairq-postgres"
    )]
    SchemaTooNew {
        /// The schema.
        schema: String,
        /// Its version.
        found: i32,
        /// The newest version this library knows.
        supported: i32,
    },
    /// A stored value could not be decoded (a corrupt or foreign row).
    #[error("corrupt job row: {0}")]
    Corrupt(String),
    /// Any other database error.
    #[error("PostgreSQL error: {0}")]
    Db(#[source] tokio_postgres::Error),
    /// The connection pool could not be built or used.
    #[error("connection pool: {0}")]
    Pool(String),
}

impl PgError {
    /// Classifies a driver error: connection trouble, a missing schema, or another error.
    pub(crate) fn from_db(err: tokio_postgres::Error, schema: &str) -> PgError {
        if let Some(code) = err.code() {
            let code = code.code();
            if code == "42P01" || code == "3F000" {
                return PgError::SchemaMissing {
                    schema: schema.to_string(),
                };
            }
            // Connection exceptions, shutdowns, "cannot connect now", too many connections.
            if code.starts_with("08")
                || code == "57P01"
                || code == "57P02"
                || code == "57P03"
                || code == "53300"
            {
                return PgError::Unavailable(Box::new(err));
            }
            return PgError::Db(err);
        }
        if is_connection_error(&err) {
            PgError::Unavailable(Box::new(err))
        } else {
            PgError::Db(err)
        }
    }

    /// Classifies a pool error.
    pub(crate) fn from_pool(err: deadpool_postgres::PoolError, schema: &str) -> PgError {
        use deadpool_postgres::PoolError;
        match err {
            PoolError::Backend(e) => PgError::from_db(e, schema),
            PoolError::Timeout(kind) => PgError::Unavailable(
                format!("timed out waiting for a pooled connection ({kind:?})").into(),
            ),
            PoolError::Closed => PgError::Unavailable("the connection pool is closed".into()),
            other => PgError::Pool(other.to_string()),
        }
    }
}

/// True for errors of the connection itself (closed, I/O, connect, timeout), not of a query.
fn is_connection_error(err: &tokio_postgres::Error) -> bool {
    if err.is_closed() {
        return true;
    }
    let mut source: Option<&(dyn StdError + 'static)> = err.source();
    while let Some(inner) = source {
        if inner.downcast_ref::<std::io::Error>().is_some() {
            return true;
        }
        source = inner.source();
    }
    let text = err.to_string();
    text.starts_with("error connecting")
        || text.starts_with("timeout")
        || text.starts_with("error communicating")
}

impl From<PgError> for BackendError {
    fn from(err: PgError) -> Self {
        match err {
            PgError::Unavailable(_) => BackendError::Unavailable(Box::new(err)),
            other => BackendError::Store(Box::new(other)),
        }
    }
}

/// Shorthand used throughout the crate: a driver error as a [`BackendError`].
pub(crate) fn db(err: tokio_postgres::Error, schema: &str) -> BackendError {
    PgError::from_db(err, schema).into()
}

/// A pool error as a [`BackendError`].
pub(crate) fn pool(err: deadpool_postgres::PoolError, schema: &str) -> BackendError {
    PgError::from_pool(err, schema).into()
}

/// A row that does not decode.
pub(crate) fn corrupt(what: impl Into<String>) -> BackendError {
    PgError::Corrupt(what.into()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_is_transient_and_others_are_not() {
        let down: BackendError = PgError::Unavailable("refused".into()).into();
        assert!(down.is_transient());
        let missing: BackendError = PgError::SchemaMissing { schema: "s".into() }.into();
        assert!(!missing.is_transient());
        assert!(missing.to_string().contains("migrate"));
    }
}
