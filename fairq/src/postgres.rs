//! The PostgreSQL store: everything of [`fairq_postgres`] (including its `tokio_postgres`
//! and `deadpool_postgres`), and [`connect`] in the same shape as the other stores'
//! constructors (async, [`ConnectError`]).

pub use fairq_postgres::*;

use crate::error::ConnectError;
use crate::redact::redact_url;
use crate::url::lowercase_scheme;

/// Connects to PostgreSQL at `url` with `options` (see [`PgBackend::connect`]). The URL's
/// scheme may be in any case (`POSTGRES://`); the error shows no password, however it is
/// printed.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use fairq::postgres::{self, PgOptions};
/// let options = PgOptions::default().connect_timeout(Duration::from_millis(200));
/// let err = postgres::connect("postgres://bob:hunter2@127.0.0.1:1/db", options).await.unwrap_err();
/// assert!(err.to_string().starts_with("cannot open store postgres://bob:***@127.0.0.1:1/db"));
/// # });
/// ```
pub async fn connect(url: &str, options: PgOptions) -> Result<PgBackend, ConnectError> {
    PgBackend::connect(&lowercase_scheme(url), options)
        .await
        .map_err(|e| ConnectError::open(redact_url(url), url, e.into()))
}
