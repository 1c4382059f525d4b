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
        /// The URL as given, credentials hidden (only its scheme when it holds blanks or
        /// control characters, which leave a password's end unclear).
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
    /// [`ConnectError::Open`] for the store at `url` (shown as `shown`). A store's error may
    /// quote what it was given (a driver that could not parse the URL quotes the URL), so
    /// when `source`'s `Debug` or any message of its source chain holds a credential of
    /// `url`, in any form, it is replaced by its messages with those credentials masked, of
    /// the same transience. Nothing in the error then shows them, whichever way it is
    /// printed.
    pub(crate) fn open(shown: String, url: &str, source: BackendError) -> ConnectError {
        ConnectError::Open {
            url: shown,
            source: scrub(source, &crate::redact::secret_forms(url)),
        }
    }

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

/// `source`, or a copy of its messages without `secrets` if it shows any of them.
fn scrub(source: BackendError, secrets: &[String]) -> BackendError {
    let shows = |text: &str| secrets.iter().any(|s| text.contains(s.as_str()));
    // From the store's own error on: the replacement is wrapped in a `BackendError` again.
    let mut messages = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> =
        Some(std::error::Error::source(&source).unwrap_or(&source));
    while let Some(err) = next {
        messages.push(err.to_string());
        next = err.source();
    }
    if !shows(&format!("{source:?}")) && !messages.iter().any(|m| shows(m)) {
        return source;
    }
    // The chain's messages in one line, each only once (a message often repeats its
    // source's).
    let mut text = String::new();
    for message in messages {
        if !message.is_empty() && !text.contains(&message) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&message);
        }
    }
    for secret in secrets {
        text = text.replace(secret.as_str(), crate::redact::MASK);
    }
    let scrubbed = Box::new(Scrubbed(text));
    if source.is_transient() {
        BackendError::Unavailable(scrubbed)
    } else {
        BackendError::Store(scrubbed)
    }
}

/// A store's error that showed a credential: its messages, credentials masked.
#[derive(Debug)]
struct Scrubbed(String);

impl std::fmt::Display for Scrubbed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Scrubbed {}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that quotes what it was given, as drivers do.
    #[derive(Debug, thiserror::Error)]
    #[error("cannot parse {0}")]
    struct Quoting(String, #[source] std::io::Error);

    /// Every message and the `Debug` of `err`, in one string.
    fn everything(err: &ConnectError) -> String {
        let mut text = format!("{err:?}");
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(e) = next {
            text.push('\n');
            text.push_str(&e.to_string());
            next = e.source();
        }
        text
    }

    #[test]
    fn a_store_error_that_quotes_a_credential_is_masked_whichever_way_it_is_printed() {
        let url = "postgres://bob:hunter%32@h/db?sslpassword='s\\'ecret'";
        for (quoted, transient) in [
            ("hunter2", false),
            ("hunter%32", true),
            ("s'ecret", false),
            ("s\\'ecret", true),
            ("'s\\'ecret'", true),
        ] {
            let inner = Quoting(
                format!("x{quoted}y"),
                std::io::Error::other(format!("io {quoted}")),
            );
            let source = if transient {
                BackendError::Unavailable(Box::new(inner))
            } else {
                BackendError::Store(Box::new(inner))
            };
            let err = ConnectError::open(crate::redact(url), url, source);
            let text = everything(&err);
            for secret in ["hunter", "ecret"] {
                assert!(!text.contains(secret), "{quoted}: {text}");
            }
            assert_eq!(err.is_transient(), transient);
            assert!(
                err.to_string().contains("cannot parse x***y: io ***"),
                "{err}"
            );
        }
        // An error that quotes nothing secret is kept as it is, typed.
        let err = ConnectError::open(
            "h".into(),
            url,
            BackendError::Store(Box::new(Quoting("x".into(), std::io::Error::other("y")))),
        );
        let ConnectError::Open {
            source: BackendError::Store(source),
            ..
        } = err
        else {
            panic!("{err:?}")
        };
        assert!(source.downcast_ref::<Quoting>().is_some());
    }
}
