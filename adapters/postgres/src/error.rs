//! Errors of the PostgreSQL store, and how driver errors map onto [`BackendError`].

use std::error::Error as StdError;

use fairq_worker::{BackendError, BoxError};

use crate::tls::TlsError;

/// What can go wrong setting up or talking to the PostgreSQL store.
///
/// Every variant converts into a [`BackendError`]: connection trouble and statements the
/// server gave up on that may succeed when sent again ([`PgError::Transient`]) become
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
    /// The server gave up on a statement that may succeed when sent again: it was chosen as
    /// a deadlock's victim (SQLSTATE `40P01`), failed to serialise (`40001`), could not get
    /// a lock in time or at once (`55P03`: `lock_timeout`, `NOWAIT`), or was cancelled
    /// (`57014`: `statement_timeout`, `pg_cancel_backend`). The transaction was rolled back,
    /// so nothing of it was written. The message is the server's.
    #[error("PostgreSQL gave up on the statement, which may succeed when sent again: {0}")]
    Transient(#[source] BoxError),
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
    /// The schema was created by an older version of this library and the store was opened
    /// without [`PgOptions::migrate`](crate::PgOptions::migrate): its statements would fail
    /// on the missing tables or columns, so the store is refused until it is upgraded.
    #[error(
        "the fairq schema {schema:?} is at version {found}, older than the {supported} this \
         library needs: run migrate() (or apply the newer sql/v*.sql files) before using the \
         store"
    )]
    SchemaTooOld {
        /// The schema.
        schema: String,
        /// Its version.
        found: i32,
        /// The version this library needs.
        supported: i32,
    },
    /// A stored value could not be decoded (a corrupt or foreign row).
    #[error("corrupt job row: {0}")]
    Corrupt(String),
    /// Any other database error. The message includes the server's (with its SQLSTATE code).
    #[error("PostgreSQL error: {}", describe(.0))]
    Db(#[source] tokio_postgres::Error),
    /// The connection pool could not be built or used.
    #[error("connection pool: {0}")]
    Pool(String),
    /// The address answered like another service, not like PostgreSQL (for example a
    /// `postgres://` URL with Redis' port).
    #[error(
        "the server at {address} does not speak the PostgreSQL protocol (it answered \
         {answer:?}): check the host and port"
    )]
    NotPostgres {
        /// The host and port.
        address: String,
        /// The first line of its answer, unprintable bytes escaped.
        answer: String,
    },
    /// The TLS settings cannot be used (an unknown `sslmode`, an unreadable root
    /// certificate file).
    #[error("PostgreSQL TLS settings: {0}")]
    Tls(#[from] TlsError),
    /// The server does not offer TLS, and the `sslmode` (`require`, `verify-ca`,
    /// `verify-full`) does not allow a plain connection.
    #[error(
        "the PostgreSQL server does not support TLS, and the sslmode requires it \
         (turn ssl on in the server, or use sslmode=prefer or disable)"
    )]
    TlsUnsupported,
    /// The TLS handshake failed: most often the server's certificate does not chain to a
    /// trusted root (`verify-ca`, `verify-full`) or does not name the host (`verify-full`),
    /// or the server refused the client certificate (`UnknownCA`).
    #[error("TLS handshake with PostgreSQL failed: {0}")]
    TlsHandshake(#[source] BoxError),
    /// The server refused the login (SQLSTATE class 28): a wrong password, no `pg_hba.conf`
    /// line for this user and address, or no valid client certificate where `pg_hba.conf`
    /// says `cert`. The message is the server's (`connection requires a valid client
    /// certificate`, say). Repeating does not help.
    #[error("PostgreSQL refused the login: {}", describe(.0))]
    Auth(#[source] tokio_postgres::Error),
}

impl PgError {
    /// Classifies a driver error: connection trouble, a missing schema, or another error.
    pub(crate) fn from_db(err: tokio_postgres::Error, schema: &str) -> PgError {
        if let Some(tls) = tls_failure(&err) {
            return tls;
        }
        if let Some(code) = err.code() {
            let code = code.code();
            if code == "42P01" || code == "3F000" {
                return PgError::SchemaMissing {
                    schema: schema.to_string(),
                };
            }
            if code.starts_with("28") {
                return PgError::Auth(err);
            }
            return match classify(code) {
                Class::Unavailable => PgError::Unavailable(Box::new(Described(err))),
                Class::Transient => PgError::Transient(Box::new(Described(err))),
                Class::Other => PgError::Db(err),
            };
        }
        if is_connection_error(&err) {
            PgError::Unavailable(Box::new(Described(err)))
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

/// What a SQLSTATE says about sending the statement again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// The connection or the server is unavailable: connection exceptions (class `08`),
    /// shutdowns (`57P01`, `57P02`), "cannot connect now" (`57P03`), too many connections
    /// (`53300`).
    Unavailable,
    /// The server rolled the statement back for a reason of the moment: a deadlock
    /// (`40P01`), a serialisation failure (`40001`), a lock not available (`55P03`), a
    /// cancelled statement (`57014`, a `statement_timeout` among others).
    Transient,
    /// Anything else: repeating the statement would fail the same way.
    Other,
}

fn classify(code: &str) -> Class {
    match code {
        "57P01" | "57P02" | "57P03" | "53300" => Class::Unavailable,
        _ if code.starts_with("08") => Class::Unavailable,
        "40P01" | "40001" | "55P03" | "57014" => Class::Transient,
        _ => Class::Other,
    }
}

/// A TLS failure of a connection attempt, typed: the server refused TLS, or rustls refused
/// the server (its certificate, most often), or the server refused ours. `None` for
/// anything else, including a network error in the middle of a handshake (which is the
/// network's, and transient).
///
/// With TLS 1.3 the client's side of the handshake is done before the server has checked
/// the client certificate, so a server's refusal of it (`UnknownCA`, `CertificateRequired`)
/// arrives as an alert on the first read, after the driver's handshake step: an alert from
/// the server counts wherever it arrives.
fn tls_failure(err: &tokio_postgres::Error) -> Option<PgError> {
    let handshake = err
        .to_string()
        .starts_with("error performing TLS handshake");
    let mut source: Option<&(dyn StdError + 'static)> = err.source();
    while let Some(inner) = source {
        if handshake && inner.to_string() == "server does not support TLS" {
            return Some(PgError::TlsUnsupported);
        }
        // tokio-rustls hands rustls' error over inside an io::Error.
        let rustls = inner.downcast_ref::<rustls::Error>().or_else(|| {
            inner
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|e| e.downcast_ref::<rustls::Error>())
        });
        if let Some(e) = rustls {
            if handshake || matches!(e, rustls::Error::AlertReceived(_)) {
                return Some(PgError::TlsHandshake(Box::new(e.clone())));
            }
        }
        source = inner.source();
    }
    None
}

/// A driver error with everything it knows in its message: the driver's `Display` says only
/// what kind of error it is ("db error", "error connecting to server"), leaving the server's
/// message and the OS error to the source chain, which many logs never print.
pub(crate) fn describe(err: &tokio_postgres::Error) -> String {
    if let Some(db) = err.as_db_error() {
        return format!("{} {}: {}", db.severity(), db.code().code(), db.message());
    }
    let mut text = err.to_string();
    let mut source: Option<&(dyn StdError + 'static)> = err.source();
    while let Some(inner) = source {
        let more = inner.to_string();
        if !more.is_empty() && !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = inner.source();
    }
    text
}

/// A driver error shown with [`describe`]; its source is the driver's error.
#[derive(Debug)]
struct Described(tokio_postgres::Error);

impl std::fmt::Display for Described {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&describe(&self.0))
    }
}

impl StdError for Described {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.0)
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
            PgError::Unavailable(_) | PgError::Transient(_) => {
                BackendError::Unavailable(Box::new(err))
            }
            other => BackendError::Store(Box::new(other)),
        }
    }
}

/// Shorthand used throughout the crate: a driver error as a [`BackendError`].
///
/// A text parameter holding a NUL character, which no PostgreSQL text can (SQLSTATE 22021,
/// "invalid byte sequence"), is the caller's mistake, so it is
/// [`BackendError::Invalid`] with the message every store gives an enqueue with one: a
/// queue filter or name with a NUL (`list`, `purge`, `claim`, ...) is no store failure.
pub(crate) fn db(err: tokio_postgres::Error, schema: &str) -> BackendError {
    if err.code().is_some_and(|c| c.code() == "22021") {
        return BackendError::Invalid(
            "text fields (queue, kind, key, unique key, metadata) cannot contain NUL characters"
                .into(),
        );
    }
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

    #[test]
    fn statements_the_server_gave_up_on_for_the_moment_are_transient() {
        for code in ["40P01", "40001", "55P03", "57014"] {
            assert_eq!(classify(code), Class::Transient, "{code}");
        }
        for code in ["08006", "08001", "57P01", "57P02", "57P03", "53300"] {
            assert_eq!(classify(code), Class::Unavailable, "{code}");
        }
        // A unique violation, a syntax error, a check violation, out of memory, a
        // program limit (a jsonb too large) fail again when repeated.
        for code in ["23505", "42601", "23514", "53200", "54000"] {
            assert_eq!(classify(code), Class::Other, "{code}");
        }
        let deadlock: BackendError = PgError::Transient("deadlock detected".into()).into();
        assert!(deadlock.is_transient());
        assert!(
            deadlock.to_string().contains("deadlock detected"),
            "{deadlock}"
        );
    }
}
