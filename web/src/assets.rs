//! The front-end: one HTML page, one script and one style sheet, compiled into the binary
//! (nothing is fetched from elsewhere at run time).

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};

use crate::error::ApiError;

const INDEX: &str = include_str!("../assets/index.html");
const LOGIN: &str = include_str!("../assets/login.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

/// `GET /`: the dashboard page (its data comes from the API).
pub(crate) async fn index() -> Html<&'static str> {
    Html(INDEX)
}

/// `GET /assets/{file}`.
pub(crate) async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "app.js" => (APP_JS, "text/javascript; charset=utf-8"),
        "app.css" => (APP_CSS, "text/css; charset=utf-8"),
        _ => return ApiError::new(StatusCode::NOT_FOUND, "no such file").into_response(),
    };
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

/// `GET /favicon.ico`: none.
pub(crate) async fn favicon() -> StatusCode {
    StatusCode::NO_CONTENT
}

/// The sign-in page; `failed` adds the wrong-token notice (no request data is echoed).
pub(crate) fn login_html(failed: bool) -> String {
    let notice = if failed {
        r#"<p class="notice bad" role="alert">That token is not right.</p>"#
    } else {
        ""
    };
    LOGIN.replace("<!--notice-->", notice)
}
