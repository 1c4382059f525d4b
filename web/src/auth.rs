//! Who may read and who may act: the token, browser sessions, CSRF and Host checks.
//!
//! * A request proves it holds the token with `Authorization: Bearer TOKEN`, or with the
//!   session cookie a browser gets by posting the token to `/login`.
//! * Reads (`GET`) need it when a token was configured or the server listens beyond
//!   loopback; a loopback server without a configured token lets local readers in and
//!   generates a token for actions.
//! * Actions (any other method) always need it. Through a session cookie they also need the
//!   session's CSRF token in the `X-CSRF-Token` header, which only the dashboard's own pages
//!   can read (`GET /api/session`); a cross-site `Origin` is refused outright.
//! * On loopback the `Host` header must name loopback too, so a web page whose DNS name is
//!   rebound to 127.0.0.1 cannot read the dashboard.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};

use axum::http::{header, HeaderMap, Method};
use fairq_core::job::Millis;
use subtle::ConstantTimeEq;

use crate::error::WebError;

/// The shortest token accepted from the operator.
pub(crate) const MIN_TOKEN: usize = 16;
/// How long a browser session lasts.
const SESSION_MS: Millis = 12 * 60 * 60 * 1_000;
/// Sessions kept at most; the oldest goes first.
const MAX_SESSIONS: usize = 1_000;

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Caller {
    /// No credentials.
    Anonymous,
    /// The token in an `Authorization` header.
    Bearer,
    /// A signed-in browser, with its session's CSRF token.
    Session { id: String, csrf: String },
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No or wrong credentials (401).
    Unauthenticated(&'static str),
    /// Credentials, but the request is not allowed as made (403).
    Forbidden(&'static str),
}

#[derive(Debug)]
struct Session {
    csrf: String,
    expires: Millis,
}

/// The server's access rules and live sessions (its `Debug` output shows neither the token
/// nor any session).
pub(crate) struct Auth {
    token: String,
    generated: bool,
    reads_need_token: bool,
    loopback: bool,
    cookie: String,
    sessions: Mutex<HashMap<String, Session>>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sessions = self
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("Auth")
            .field("token", &"***")
            .field("generated", &self.generated)
            .field("reads_need_token", &self.reads_need_token)
            .field("loopback", &self.loopback)
            .field("cookie", &self.cookie)
            .field("sessions", &sessions)
            .finish()
    }
}

/// `n` random bytes as lower-case hex.
pub(crate) fn random_hex(n: usize) -> Result<String, WebError> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).map_err(|e| WebError::Random(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn equal(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

impl Auth {
    /// The rules for a server on `addr` with the configured `token`, if any.
    pub(crate) fn new(addr: SocketAddr, token: Option<String>) -> Result<Auth, WebError> {
        let loopback = addr.ip().is_loopback();
        // Trimmed as a presented token is (a token read from a file often ends in a line
        // break), and refused when a header could not carry it: such a token would start
        // a server nobody can sign in to.
        let token = token.map(|t| t.trim().to_string());
        let (token, generated) = match token {
            Some(t) if !t.bytes().all(|b| b.is_ascii_graphic()) => {
                return Err(WebError::UnsendableToken)
            }
            Some(t) if t.len() < MIN_TOKEN => return Err(WebError::WeakToken(MIN_TOKEN)),
            Some(t) => (t, false),
            None if loopback => (random_hex(16)?, true),
            None => return Err(WebError::TokenRequired(addr)),
        };
        Ok(Auth {
            token,
            generated,
            reads_need_token: !generated || !loopback,
            loopback,
            // Cookies are not scoped by port: two dashboards on one host keep apart.
            cookie: format!("fairq_session_{}", addr.port()),
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// The token, when the server made it up (to print once at start).
    pub(crate) fn generated_token(&self) -> Option<&str> {
        self.generated.then_some(self.token.as_str())
    }

    pub(crate) fn reads_need_token(&self) -> bool {
        self.reads_need_token
    }

    pub(crate) fn cookie_name(&self) -> &str {
        &self.cookie
    }

    /// True when `candidate` is the token.
    pub(crate) fn check_token(&self, candidate: &str) -> bool {
        equal(candidate.trim(), &self.token)
    }

    /// Opens a browser session; returns its id.
    pub(crate) fn open_session(&self, now: Millis) -> Result<String, WebError> {
        let id = random_hex(32)?;
        let csrf = random_hex(32)?;
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|_, s| s.expires > now);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(id, _)| id.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            id.clone(),
            Session {
                csrf,
                expires: now.saturating_add(SESSION_MS),
            },
        );
        Ok(id)
    }

    /// Whether the session `id` is still open at `now` (not closed, not expired): a live
    /// stream opened with it ends once it is not.
    pub(crate) fn session_open(&self, id: &str, now: Millis) -> bool {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .is_some_and(|s| s.expires > now)
    }

    pub(crate) fn close_session(&self, id: &str) {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// Who sent `headers`, or why they are refused (a wrong bearer token).
    pub(crate) fn caller(&self, headers: &HeaderMap, now: Millis) -> Result<Caller, Refusal> {
        if let Some(value) = headers.get(header::AUTHORIZATION) {
            let value = value.to_str().unwrap_or("");
            // The scheme is case-insensitive (RFC 9110 section 11.1).
            let token = value
                .split_once(' ')
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .map(|(_, token)| token);
            return match token {
                Some(t) if self.check_token(t) => Ok(Caller::Bearer),
                _ => Err(Refusal::Unauthenticated("wrong token")),
            };
        }
        let Some(id) = self.session_cookie(headers) else {
            return Ok(Caller::Anonymous);
        };
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        match sessions.get(&id) {
            Some(s) if s.expires > now => Ok(Caller::Session {
                csrf: s.csrf.clone(),
                id,
            }),
            // An expired or unknown cookie is no credential; reads may still be open.
            _ => Ok(Caller::Anonymous),
        }
    }

    fn session_cookie(&self, headers: &HeaderMap) -> Option<String> {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(cookie::Cookie::split_parse)
            .filter_map(Result::ok)
            .find(|c| c.name() == self.cookie)
            .map(|c| c.value().to_string())
    }

    /// Whether a request by `caller` with `method` and `headers` may go on.
    pub(crate) fn allow(
        &self,
        caller: &Caller,
        method: &Method,
        headers: &HeaderMap,
    ) -> Result<(), Refusal> {
        if self.loopback && !host_is_loopback(headers) {
            return Err(Refusal::Forbidden(
                "the Host header does not name this machine",
            ));
        }
        let reading = matches!(*method, Method::GET | Method::HEAD);
        if !reading && !same_origin(headers) {
            return Err(Refusal::Forbidden("cross-site request"));
        }
        match caller {
            Caller::Anonymous if !reading => Err(Refusal::Unauthenticated(
                "actions need the token: sign in, or send Authorization: Bearer",
            )),
            Caller::Anonymous if self.reads_need_token => Err(Refusal::Unauthenticated(
                "this dashboard needs the token: sign in, or send Authorization: Bearer",
            )),
            Caller::Session { csrf, .. } if !reading => {
                let sent = headers
                    .get("x-csrf-token")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                if equal(sent, csrf) {
                    Ok(())
                } else {
                    Err(Refusal::Forbidden("missing or wrong X-CSRF-Token"))
                }
            }
            _ => Ok(()),
        }
    }

    /// Whether a sign-in form may be posted with `headers` (Host and Origin checks only).
    pub(crate) fn allow_login(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        if self.loopback && !host_is_loopback(headers) {
            return Err(Refusal::Forbidden(
                "the Host header does not name this machine",
            ));
        }
        if !same_origin(headers) {
            return Err(Refusal::Forbidden("cross-site request"));
        }
        Ok(())
    }
}

/// The host part of a `Host` or `Origin` authority (`[::1]:80` → `[::1]`).
fn host_of(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority
            .find(']')
            .map_or(authority, |end| &authority[..=end]);
    }
    authority.split(':').next().unwrap_or(authority)
}

/// True when the `Host` header names loopback (`localhost`, `127.x.y.z`, `[::1]`).
fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = host_of(host).to_ascii_lowercase();
    name == "localhost"
        || name == "[::1]"
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// False when an `Origin` header names another site than `Host`.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) else {
        return true; // not a browser's cross-origin request
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let authority = origin.split_once("://").map_or("", |(_, rest)| rest);
    !host.is_empty() && authority.eq_ignore_ascii_case(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn loopback_auth(token: Option<&str>) -> Auth {
        Auth::new("127.0.0.1:7171".parse().unwrap(), token.map(str::to_string)).unwrap()
    }

    #[test]
    fn debug_output_shows_neither_the_token_nor_sessions() {
        let auth = loopback_auth(Some("0123456789abcdef-secret"));
        let id = auth.open_session(0).unwrap();
        let h = headers(&[
            ("host", "127.0.0.1"),
            ("cookie", &format!("fairq_session_7171={id}")),
        ]);
        let Ok(Caller::Session { csrf, .. }) = auth.caller(&h, 1) else {
            panic!("no session")
        };
        let debug = format!("{auth:?} {auth:#?}");
        for secret in ["0123456789abcdef-secret", id.as_str(), csrf.as_str()] {
            assert!(!debug.contains(secret), "{debug}");
        }
    }

    #[test]
    fn beyond_loopback_a_token_is_required() {
        let err = Auth::new("0.0.0.0:80".parse().unwrap(), None).unwrap_err();
        assert!(matches!(err, WebError::TokenRequired(_)));
        assert!(matches!(
            Auth::new("127.0.0.1:80".parse().unwrap(), Some("short".into())),
            Err(WebError::WeakToken(_))
        ));
    }

    #[test]
    fn loopback_without_a_token_reads_freely_but_acts_with_the_generated_one() {
        let auth = loopback_auth(None);
        let h = headers(&[("host", "127.0.0.1:7171")]);
        assert_eq!(auth.allow(&Caller::Anonymous, &Method::GET, &h), Ok(()));
        assert!(matches!(
            auth.allow(&Caller::Anonymous, &Method::POST, &h),
            Err(Refusal::Unauthenticated(_))
        ));
        let token = auth.generated_token().unwrap().to_string();
        let bearer = headers(&[
            ("host", "localhost:7171"),
            ("authorization", &format!("Bearer {token}")),
        ]);
        assert_eq!(auth.caller(&bearer, 0), Ok(Caller::Bearer));
        assert_eq!(auth.allow(&Caller::Bearer, &Method::POST, &bearer), Ok(()));
    }

    #[test]
    fn the_bearer_scheme_is_matched_without_regard_to_case() {
        // RFC 9110: the authentication scheme is case-insensitive.
        let auth = loopback_auth(Some("0123456789abcdef"));
        for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
            let h = headers(&[
                ("host", "127.0.0.1"),
                ("authorization", &format!("{scheme} 0123456789abcdef")),
            ]);
            assert_eq!(auth.caller(&h, 0), Ok(Caller::Bearer), "{scheme}");
        }
        for value in [
            "Basic 0123456789abcdef",
            "Bearer0123456789abcdef",
            "0123456789abcdef",
        ] {
            let h = headers(&[("host", "127.0.0.1"), ("authorization", value)]);
            assert!(auth.caller(&h, 0).is_err(), "{value}");
        }
    }

    #[test]
    fn a_configured_token_closes_reads_too() {
        let auth = loopback_auth(Some("0123456789abcdef"));
        let h = headers(&[("host", "127.0.0.1")]);
        assert!(auth.allow(&Caller::Anonymous, &Method::GET, &h).is_err());
        let wrong = headers(&[("host", "127.0.0.1"), ("authorization", "Bearer nope")]);
        assert!(auth.caller(&wrong, 0).is_err());
    }

    #[test]
    fn sessions_need_the_csrf_token_for_actions() {
        let auth = loopback_auth(None);
        let id = auth.open_session(0).unwrap();
        let cookie = format!("other=1; fairq_session_7171={id}");
        let h = headers(&[("host", "127.0.0.1"), ("cookie", &cookie)]);
        let caller = auth.caller(&h, 1).unwrap();
        let Caller::Session { csrf, .. } = caller.clone() else {
            panic!("no session: {caller:?}")
        };
        assert_eq!(
            auth.allow(&caller, &Method::POST, &h),
            Err(Refusal::Forbidden("missing or wrong X-CSRF-Token"))
        );
        let with = headers(&[
            ("host", "127.0.0.1"),
            ("cookie", &cookie),
            ("x-csrf-token", &csrf),
        ]);
        assert_eq!(auth.allow(&caller, &Method::POST, &with), Ok(()));
        // Expired sessions are no credential.
        assert_eq!(auth.caller(&h, SESSION_MS + 1), Ok(Caller::Anonymous));
        auth.close_session(&id);
        assert_eq!(auth.caller(&h, 1), Ok(Caller::Anonymous));
    }

    #[test]
    fn rebound_hosts_and_cross_site_posts_are_refused() {
        let auth = loopback_auth(None);
        let evil = headers(&[("host", "evil.example:7171")]);
        assert!(matches!(
            auth.allow(&Caller::Anonymous, &Method::GET, &evil),
            Err(Refusal::Forbidden(_))
        ));
        let cross = headers(&[
            ("host", "127.0.0.1:7171"),
            ("origin", "http://evil.example"),
        ]);
        assert!(matches!(
            auth.allow(&Caller::Bearer, &Method::POST, &cross),
            Err(Refusal::Forbidden(_))
        ));
        for host in ["[::1]:7171", "localhost", "127.0.0.2:1"] {
            let h = headers(&[("host", host), ("origin", &format!("http://{host}"))]);
            assert_eq!(
                auth.allow(&Caller::Bearer, &Method::POST, &h),
                Ok(()),
                "{host}"
            );
        }
    }
}
