//! Extractors whose rejections are JSON errors like every other answer of the API (axum's
//! own extractors answer a malformed id, query string, form or an oversize body in plain
//! text).

use axum::body::Bytes;
use axum::extract::{Form, FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// axum's [`Path`], refusing a segment that does not parse (`/api/jobs/abc`) with
/// `{"error": ...}` and status 400.
#[derive(Debug)]
pub(crate) struct ApiPath<T>(pub(crate) T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => Err(ApiError::new(rejection.status(), rejection.body_text())),
        }
    }
}

/// axum's [`Query`], refusing a query string that does not parse (`?window=abc`) with
/// `{"error": ...}` and status 400.
#[derive(Debug)]
pub(crate) struct ApiQuery<T>(pub(crate) T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(ApiError::new(rejection.status(), rejection.body_text())),
        }
    }
}

/// The request body as bytes, refusing one past the body limit (2 MiB) with
/// `{"error": ...}` and status 413.
#[derive(Debug)]
pub(crate) struct ApiBody(pub(crate) Bytes);

impl<S> FromRequest<S> for ApiBody
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        match Bytes::from_request(request, state).await {
            Ok(bytes) => Ok(ApiBody(bytes)),
            Err(rejection) => Err(ApiError::new(rejection.status(), rejection.body_text())),
        }
    }
}

/// axum's [`Form`], refusing a body that is not a form or lacks a field with
/// `{"error": ...}` and the rejection's status (415, 422 or 400).
#[derive(Debug)]
pub(crate) struct ApiForm<T>(pub(crate) T);

impl<S, T> FromRequest<S> for ApiForm<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        match Form::<T>::from_request(request, state).await {
            Ok(Form(value)) => Ok(ApiForm(value)),
            Err(rejection) => Err(ApiError::new(rejection.status(), rejection.body_text())),
        }
    }
}
