//! The HTTP server: routes, the access guard in front of them, and the background sampler.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use fairq_worker::Inspect;
use serde::Deserialize;
use tokio::net::TcpListener;

use crate::api;
use crate::app::App;
use crate::assets;
use crate::auth::{Auth, Caller, Refusal};
use crate::config::Config;
use crate::error::{ApiError, WebError};
use crate::extract::{ApiForm, ApiQuery};
use crate::redact::Scrubber;

/// A dashboard bound to its address, ready to [`run`](Server::run).
///
/// ```
/// use fairq_web::{Config, Server};
/// use fairq_worker::MemoryBackend;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let config = Config::new("memory:").listen("127.0.0.1:0".parse().unwrap());
/// let server = Server::bind(MemoryBackend::new(), config).await?;
/// let url = server.url();
/// assert!(url.starts_with("http://127.0.0.1:"));
/// // Without a configured token, actions use a generated one.
/// assert!(server.generated_token().is_some());
/// let handle = server.handle();
/// let running = tokio::spawn(server.run(async {}));
/// running.await.unwrap()?;
/// # let _ = handle;
/// # Ok::<(), fairq_web::WebError>(())
/// # }).unwrap();
/// ```
pub struct Server<B> {
    listener: TcpListener,
    app: Arc<App<B>>,
    background: bool,
}

/// A way to reach a running server's state from outside (tests, an embedding program).
pub struct Handle<B> {
    app: Arc<App<B>>,
}

impl<B> Clone for Handle<B> {
    fn clone(&self) -> Self {
        Handle {
            app: Arc::clone(&self.app),
        }
    }
}

impl<B: Inspect> Handle<B> {
    /// Samples the store now (what the background sampler does every refresh interval);
    /// returns the number of queues seen.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_web::{Config, Server};
    /// let config = Config::new("memory:").listen("127.0.0.1:0".parse().unwrap());
    /// let server = Server::bind(fairq_worker::MemoryBackend::new(), config).await.unwrap();
    /// assert_eq!(server.handle().sample().await.unwrap(), 0);
    /// # });
    /// ```
    pub async fn sample(&self) -> Result<usize, fairq_worker::BackendError> {
        Ok(self.app.sample().await?.queues.len())
    }
}

impl<B: Inspect> Server<B> {
    /// Checks the configuration and binds the address. Refuses a non-loopback address
    /// without a token, and tokens shorter than 16 characters.
    pub async fn bind(store: B, config: Config) -> Result<Self, WebError> {
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| WebError::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| WebError::Bind {
            addr: config.listen,
            source,
        })?;
        let auth = Auth::new(addr, config.token.clone())?;
        let app = App::new(
            store,
            config.clock.clone(),
            auth,
            Scrubber::from_url(&config.store_url),
            config.store_label(),
            config.refresh,
            config.scan_budget,
        );
        Ok(Server {
            listener,
            app: Arc::new(app),
            background: config.background,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// `http://ADDR/`, the dashboard's address.
    pub fn url(&self) -> String {
        format!("http://{}/", self.local_addr())
    }

    /// The token actions need, when the server generated it (no token was configured):
    /// print it once so the operator can sign in.
    pub fn generated_token(&self) -> Option<&str> {
        self.app.auth.generated_token()
    }

    /// True when reading needs the token too (a token was configured, or the address is
    /// not loopback).
    pub fn reads_need_token(&self) -> bool {
        self.app.auth.reads_need_token()
    }

    /// A handle on the server's state.
    pub fn handle(&self) -> Handle<B> {
        Handle {
            app: Arc::clone(&self.app),
        }
    }

    /// Serves until `shutdown` completes, then lets requests in flight finish (open event
    /// streams end at once).
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), WebError> {
        let app = self.app;
        let sampler = self.background.then(|| {
            let app = Arc::clone(&app);
            tokio::spawn(async move {
                let mut every = tokio::time::interval(app.refresh);
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    every.tick().await;
                    // Failures are reported to the event streams and the log.
                    let _ = app.sample().await;
                }
            })
        });
        let stopping = app.stopping.clone();
        let router = router(Arc::clone(&app));
        let served = axum::serve(self.listener, router)
            .with_graceful_shutdown(async move {
                shutdown.await;
                stopping.send_replace(true);
            })
            .await;
        if let Some(task) = sampler {
            task.abort();
        }
        served.map_err(WebError::Serve)
    }
}

/// Every route, behind the guard.
fn router<B: Inspect>(app: Arc<App<B>>) -> Router {
    Router::new()
        .route("/", get(assets::index))
        .route("/login", get(login_page).post(login::<B>))
        .route("/logout", post(logout::<B>))
        .route("/assets/{file}", get(assets::asset))
        .route("/favicon.ico", get(assets::favicon))
        .route("/api/session", get(api::session::<B>))
        .route("/api/overview", get(api::overview::<B>))
        .route("/api/health", get(api::health::<B>))
        .route("/api/events", get(api::events::<B>))
        .route("/api/queues/{queue}", get(api::queue::<B>))
        .route("/api/queues/{queue}/tenants", get(api::tenants::<B>))
        .route("/api/queues/{queue}/revive", post(api::revive_queue::<B>))
        .route("/api/queues/{queue}/purge", post(api::purge_queue::<B>))
        .route("/api/queues/{queue}/pause", post(api::pause_queue::<B>))
        .route("/api/queues/{queue}/resume", post(api::resume_queue::<B>))
        .route("/api/queues/{queue}/remove", post(api::remove_queue::<B>))
        .route("/api/jobs", get(api::jobs::<B>))
        .route("/api/jobs/{id}", get(api::job::<B>))
        .route("/api/jobs/{id}/revive", post(api::revive_job::<B>))
        .route("/api/jobs/{id}/cancel", post(api::cancel_job::<B>))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(Arc::clone(&app), guard::<B>))
        .layer(middleware::from_fn(security_headers))
        .with_state(app)
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such page")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "this method is not allowed here (reads are GET, actions POST)",
    )
}

/// Paths anyone may fetch: the sign-in page and the static files (they hold no data).
fn is_public(path: &str) -> bool {
    path == "/login" || path.starts_with("/assets/") || path == "/favicon.ico"
}

/// Checks every request against the access rules (see [`crate::auth`]).
async fn guard<B: Inspect>(
    State(app): State<Arc<App<B>>>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_string();
    if is_public(&path) {
        request.extensions_mut().insert(Caller::Anonymous);
        return next.run(request).await;
    }
    let headers = request.headers();
    let checked = app.auth.caller(headers, app.now()).and_then(|caller| {
        app.auth
            .allow(&caller, request.method(), headers)
            .map(|()| caller)
    });
    match checked {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(Refusal::Unauthenticated(why))
            if !path.starts_with("/api/") && request.method() == Method::GET =>
        {
            tracing::debug!(%path, why, "sign-in needed");
            Redirect::to("/login").into_response()
        }
        Err(Refusal::Unauthenticated(why)) => {
            let mut response = ApiError::new(StatusCode::UNAUTHORIZED, why).into_response();
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"fairq\""),
            );
            response
        }
        Err(Refusal::Forbidden(why)) => ApiError::new(StatusCode::FORBIDDEN, why).into_response(),
    }
}

/// Headers on every answer: no framing, no sniffing, no referrer to other sites, scripts and styles from
/// this server only, nothing cached.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name: HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    // Same-origin, not no-referrer: with no-referrer Chromium sends `Origin: null` on form
    // posts, which the Origin check must refuse.
    set(headers, header::REFERRER_POLICY, "same-origin");
    set(headers, header::CACHE_CONTROL, "no-store");
    set(
        headers,
        HeaderName::from_static("cross-origin-opener-policy"),
        "same-origin",
    );
    set(
        headers,
        HeaderName::from_static("cross-origin-resource-policy"),
        "same-origin",
    );
    response
}

/// Query of `GET /login`.
#[derive(Debug, Deserialize)]
struct LoginQuery {
    failed: Option<String>,
}

async fn login_page(ApiQuery(q): ApiQuery<LoginQuery>) -> Html<String> {
    Html(assets::login_html(q.failed.is_some()))
}

/// The sign-in form.
#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

/// `POST /login`: a correct token opens a browser session (an `HttpOnly`, `SameSite=Strict`
/// cookie).
async fn login<B: Inspect>(
    State(app): State<Arc<App<B>>>,
    headers: HeaderMap,
    ApiForm(form): ApiForm<LoginForm>,
) -> Response {
    if let Err(Refusal::Forbidden(why) | Refusal::Unauthenticated(why)) =
        app.auth.allow_login(&headers)
    {
        return ApiError::new(StatusCode::FORBIDDEN, why).into_response();
    }
    if !app.auth.check_token(&form.token) {
        tracing::warn!("a sign-in with a wrong token");
        return Redirect::to("/login?failed=1").into_response();
    }
    let id = match app.auth.open_session(app.now()) {
        Ok(id) => id,
        Err(e) => {
            return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response();
        }
    };
    let cookie = cookie::Cookie::build((app.auth.cookie_name().to_string(), id))
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .path("/")
        .build();
    let mut response = Redirect::to("/").into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie.to_string()) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `POST /logout`: ends the browser session (an action: it needs the CSRF token).
async fn logout<B: Inspect>(
    State(app): State<Arc<App<B>>>,
    axum::extract::Extension(caller): axum::extract::Extension<Caller>,
) -> Response {
    if let Caller::Session { id, .. } = caller {
        app.auth.close_session(&id);
    }
    let expired = cookie::Cookie::build((app.auth.cookie_name().to_string(), ""))
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .path("/")
        .max_age(cookie::time::Duration::ZERO)
        .build();
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Ok(value) = HeaderValue::from_str(&expired.to_string()) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}
