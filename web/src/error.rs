//! What can go wrong starting the server, and how store errors become HTTP answers.

use std::net::SocketAddr;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use fairq_worker::BackendError;
use serde_json::json;

/// Why the server could not start or stopped.
///
/// ```
/// use fairq_web::WebError;
/// let err = WebError::TokenRequired("0.0.0.0:8080".parse().unwrap());
/// assert!(err.to_string().contains("--token"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// Listening on a non-loopback address needs a token.
    #[error(
        "listening on {0} exposes the dashboard beyond this machine: set a token (--token or FAIRQ_TOKEN)"
    )]
    TokenRequired(SocketAddr),
    /// A token too short to resist guessing.
    #[error("the token must be at least {0} characters long")]
    WeakToken(usize),
    /// A token holding characters an `Authorization` header cannot carry (anything but
    /// printable ASCII, once spaces around it are trimmed).
    #[error("the token may hold only printable ASCII characters without spaces, which a request header can carry")]
    UnsendableToken,
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The operating system gave no random bytes for a token.
    #[error("no random bytes for a token: {0}")]
    Random(String),
    /// Serving failed.
    #[error("serving HTTP failed: {0}")]
    Serve(#[source] std::io::Error),
}

/// An error answer of the API: a status and a message already scrubbed of secrets.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// A store error, with its secrets blanked by `scrub`.
    pub(crate) fn store(err: &BackendError, scrub: &crate::Scrubber) -> Self {
        let status = match err {
            BackendError::NotFound(_) => StatusCode::NOT_FOUND,
            BackendError::Transition { .. }
            | BackendError::Duplicate { .. }
            | BackendError::QueueNotEmpty { .. } => StatusCode::CONFLICT,
            BackendError::UnknownQueue(_) => StatusCode::NOT_FOUND,
            BackendError::Invalid(_) | BackendError::UnknownDependency(_) => {
                StatusCode::BAD_REQUEST
            }
            BackendError::Full(_) => StatusCode::INSUFFICIENT_STORAGE,
            BackendError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            BackendError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
            BackendError::Unsupported(_) => StatusCode::NOT_IMPLEMENTED,
        };
        ApiError::new(status, scrub.clean(&err.to_string()))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "error": self.message }))).into_response()
    }
}
