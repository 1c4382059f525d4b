//! The one error type of opening a store, whichever store it is.

use std::path::PathBuf;

use fairq_worker::BackendError;

/// Why a store could not be opened or reached. Messages never show a password (URLs go
/// through [`redact`](crate::redact())).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let err = fairq::connect("mysql://u:hunter2@db/jobs").await.unwrap_err();
/// assert!(matches!(err, fairq::ConnectError::BadUrl { .. }));
/// assert_eq!(
///     err.to_string(),
///     "invalid store \"mysql://u:***@db/jobs\": unknown scheme \"mysql\" (expected file:, \
///      postgres://, redis:// or memory:)"
/// );
/// # });
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL does not name a store this crate knows.
    #[error("invalid store {url:?}: {reason}")]
    BadUrl {
        /// The URL as given, credentials hidden.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The URL names a store whose feature is not compiled in.
    #[error("{url} needs the `{feature}` feature of the fairq crate")]
    NotCompiled {
        /// The URL, credentials hidden.
        url: String,
        /// The feature to turn on.
        feature: &'static str,
    },
    /// [`ConnectOptions::create`](crate::ConnectOptions::create) is off and the folder holds
    /// no file store (it does not exist, or it has none of a store's files).
    #[error("no file store at {}: {reason}", path.display())]
    NoStore {
        /// The folder named.
        path: PathBuf,
        /// What was found instead.
        reason: &'static str,
    },
    /// The store refused to open or could not be reached.
    #[error("cannot open store {url}: {source}")]
    Open {
        /// The store, credentials hidden.
        url: String,
        /// The store's own error.
        #[source]
        source: BackendError,
    },
}

impl ConnectError {
    /// True when trying again later may work without any change (a server that is down).
    ///
    /// ```
    /// use fairq::{BackendError, ConnectError};
    /// let err = ConnectError::Open {
    ///     url: "redis://h/".into(),
    ///     source: BackendError::Unavailable("connection refused".into()),
    /// };
    /// assert!(err.is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        matches!(self, ConnectError::Open { source, .. } if source.is_transient())
    }
}

/// A connect error as a store error, for code that handles both alike.
///
/// ```
/// let err = fairq::ConnectError::NotCompiled { url: "redis://h/".into(), feature: "redis" };
/// let store_error: fairq::BackendError = err.into();
/// assert!(store_error.to_string().contains("`redis` feature"));
/// ```
impl From<ConnectError> for BackendError {
    fn from(err: ConnectError) -> Self {
        if err.is_transient() {
            BackendError::Unavailable(Box::new(err))
        } else {
            BackendError::Store(Box::new(err))
        }
    }
}
