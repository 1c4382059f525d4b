//! The Redis store: everything of [`fairq_redis`], and [`connect`] in the same shape as the
//! other stores' constructors (async, [`ConnectError`]).

pub use fairq_redis::*;

use crate::error::ConnectError;
use crate::redact::redact_url;
use crate::url::lowercase_scheme;

/// Connects to Redis at `url` with `options` (see [`RedisBackend::connect`]). The URL's
/// scheme may be in any case (`REDIS://`); the error shows no password, however it is
/// printed.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use fairq::redis::{self, RedisOptions};
/// let err = redis::connect("redis://:hunter2@127.0.0.1:1/", RedisOptions::new()).await.unwrap_err();
/// assert!(err.to_string().starts_with("cannot open store redis://:***@127.0.0.1:1/"), "{err}");
/// assert!(err.is_transient());
/// # });
/// ```
pub async fn connect(url: &str, options: RedisOptions) -> Result<RedisBackend, ConnectError> {
    RedisBackend::connect(&lowercase_scheme(url), options)
        .await
        .map_err(|source| ConnectError::open(redact_url(url), url, source))
}
