//! Keeping the store URL's credentials out of every page and response.
//!
//! A store URL may carry a user name and password (`postgres://app:secret@db/jobs`) or secrets
//! in its query (`?password=...`, `?sslkey=...`). The dashboard shows a *label* made from the
//! URL without them, and passes every message that leaves the server (store errors quote
//! whatever their client library says) through a [`Scrubber`] that blanks each secret.

use std::ops::Range;

/// Query parameters that name a place, not a secret: kept in the label.
const SAFE_PARAMS: [&str; 4] = ["schema", "prefix", "dbname", "sslmode"];

/// Secrets shorter than this are not scrubbed from messages: blanking every `a` of a message
/// because the password is `a` would mangle it and hide nothing an attacker could not guess.
const MIN_SECRET: usize = 3;

/// A store URL without credentials: scheme, host, port, path and the harmless query
/// parameters (`schema`, `prefix`, `dbname`, `sslmode`).
///
/// ```
/// use fairq_web::store_label;
/// assert_eq!(
///     store_label("postgres://app:s3cret@db.internal:5432/jobs?schema=billing&password=x"),
///     "postgres://db.internal:5432/jobs?schema=billing"
/// );
/// assert_eq!(store_label("redis://:pw@127.0.0.1:6379/"), "redis://127.0.0.1:6379/");
/// assert_eq!(store_label("file:./fairq-data"), "file:./fairq-data");
/// ```
pub fn store_label(url: &str) -> String {
    let parts = Parts::of(url);
    let base = match (url.find("://"), parts.user_info.clone()) {
        (Some(scheme), Some(info)) => {
            format!("{}{}", &url[..scheme + 3], &parts.base[info.end + 1..])
        }
        // No `://` (a typo): what came before the user info, and what came after its `@`.
        (None, Some(info)) => format!("{}{}", &url[..info.start], &parts.base[info.end + 1..]),
        _ => parts.base.to_string(),
    };
    let query = parts.query;
    let kept: Vec<&str> = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter(|pair| {
            pair.split_once('=')
                .is_some_and(|(name, _)| SAFE_PARAMS.contains(&name))
        })
        .collect();
    if kept.is_empty() {
        base
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}

/// Blanks the secrets of a store URL (user info and every query value that is not
/// harmless) wherever they appear in a message.
///
/// ```
/// use fairq_web::Scrubber;
/// let scrub = Scrubber::from_url("postgres://app:s3cret@db/jobs?sslpassword=hunter22");
/// assert_eq!(
///     scrub.clean("connect to postgres://app:s3cret@db failed (key hunter22)"),
///     "connect to postgres://***@db failed (key ***)"
/// );
/// ```
///
/// Its `Debug` output counts the secrets and shows none of them:
///
/// ```
/// let scrub = fairq_web::Scrubber::from_url("redis://:topsecret@host/");
/// assert!(!format!("{scrub:?}").contains("topsecret"));
/// ```
#[derive(Clone, Default)]
pub struct Scrubber {
    /// Longest first, so a secret that contains another is blanked whole.
    secrets: Vec<String>,
}

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scrubber")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

impl Scrubber {
    /// The secrets of `url`.
    ///
    /// ```
    /// assert_eq!(fairq_web::Scrubber::from_url("file:./data").clean("file:./data"), "file:./data");
    /// ```
    pub fn from_url(url: &str) -> Self {
        let mut secrets = Vec::new();
        let parts = Parts::of(url);
        if let Some(info) = parts.user_info {
            let userinfo = &url[info];
            secrets.push(userinfo.to_string());
            if let Some((user, password)) = userinfo.split_once(':') {
                secrets.push(password.to_string());
                secrets.push(user.to_string());
            }
        }
        let query = parts.query;
        for pair in query.into_iter().flat_map(|q| q.split('&')) {
            if let Some((name, value)) = pair.split_once('=')
                && !SAFE_PARAMS.contains(&name)
            {
                secrets.push(value.to_string());
            }
        }
        // Percent-encoded secrets may be quoted decoded; blank both spellings.
        let decoded: Vec<String> = secrets
            .iter()
            .map(|s| percent_decode(s))
            .filter(|d| !secrets.contains(d))
            .collect();
        secrets.extend(decoded);
        // A message may quote a secret with `{:?}`, escaping its `"`, `\` and control
        // characters: blank that spelling too.
        let escaped: Vec<String> = secrets
            .iter()
            .map(|s| {
                let quoted = format!("{s:?}");
                quoted[1..quoted.len() - 1].to_string()
            })
            .filter(|e| !secrets.contains(e))
            .collect();
        secrets.extend(escaped);
        secrets.retain(|s| s.len() >= MIN_SECRET);
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Scrubber { secrets }
    }

    /// `message` with every secret replaced by `***`.
    ///
    /// ```
    /// let scrub = fairq_web::Scrubber::from_url("redis://:topsecret@host/");
    /// assert_eq!(scrub.clean("NOAUTH topsecret"), "NOAUTH ***");
    /// ```
    pub fn clean(&self, message: &str) -> String {
        let mut out = message.to_string();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), "***");
            }
        }
        out
    }
}

/// A store URL in the parts that matter for leaving its secrets out.
struct Parts<'a> {
    /// Scheme, user info, host, port and path: all before the query.
    base: &'a str,
    /// The user info's byte range in the URL, without its `@`.
    user_info: Option<Range<usize>>,
    /// The query, without its `?`.
    query: Option<&'a str>,
}

impl<'a> Parts<'a> {
    /// Reads the user info the widest way a store's client may: past
    /// [`fairq_worker::url_parts::after_user_info`] (a password may hold `?` or `#`), and on to the
    /// last `@` before the query, since the PostgreSQL client reads the credentials up to the
    /// first `@` of the whole URL and so takes a password holding `/` as it is. An `@` in the
    /// path then hides the path's start from the label, which shows less, never a secret.
    ///
    /// A URL without `://` (a typo such as `postgres:/app:pw@db/x` or `app:pw@db/x`) may hold
    /// user info all the same: everything between its first `:` and the last `@` before its
    /// query is taken as such (not in a `file:` URL, whose path is no secret).
    fn of(url: &'a str) -> Self {
        if !url.contains("://")
            && !url
                .get(..5)
                .is_some_and(|s| s.eq_ignore_ascii_case("file:"))
            && let (Some(colon), Some(at)) = (url.find(':'), url.rfind('@'))
            && colon + 1 < at
        {
            // The password may hold a `?`: the query starts after the user info.
            let query_at = url[at..].find('?').map(|q| at + q);
            return Parts {
                base: query_at.map_or(url, |q| &url[..q]),
                user_info: Some(colon + 1..at),
                query: query_at.map(|q| &url[q + 1..]),
            };
        }
        let (base, query) = fairq_worker::url_parts::split_query(url);
        let user_info = match url.find("://") {
            Some(scheme) => {
                let start = scheme + 3;
                let after = fairq_worker::url_parts::after_user_info(url).max(start);
                match base[after..].rfind('@') {
                    Some(at) => Some(start..after + at),
                    None if after > start => Some(start..after - 1),
                    None => None,
                }
            }
            None => None,
        };
        Parts {
            base,
            user_info,
            query,
        }
    }
}

/// Decodes the `%XX` escapes of a URL part; anything else is kept as is.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_never_hold_user_info_or_secret_parameters() {
        for url in [
            "postgres://u:p%40ss@h:1/db?password=zzz&schema=s",
            "postgresql://user@h/db",
            "rediss://default:xyz@h:6380/0?prefix=p",
        ] {
            let label = store_label(url);
            assert!(!label.contains('@'), "{label}");
            assert!(!label.contains("zzz") && !label.contains("xyz"), "{label}");
        }
    }

    #[test]
    fn a_question_mark_in_a_password_starts_no_query() {
        let url = "redis://:ab?S3cret@h:6379/0?prefix=p";
        assert_eq!(store_label(url), "redis://h:6379/0?prefix=p");
        let scrub = Scrubber::from_url(url);
        assert_eq!(scrub.clean("AUTH ab?S3cret refused"), "AUTH *** refused");
    }

    #[test]
    fn a_slash_in_a_password_stays_a_password() {
        let url = "postgres://app:pa/ss@db:5432/jobs?schema=s";
        assert_eq!(store_label(url), "postgres://db:5432/jobs?schema=s");
        let scrub = Scrubber::from_url(url);
        assert_eq!(scrub.clean("auth pa/ss failed"), "auth *** failed");
    }

    #[test]
    fn decoded_passwords_are_scrubbed_too() {
        let scrub = Scrubber::from_url("postgres://u:p%40ssword@h/db");
        assert_eq!(scrub.clean("bad p@ssword"), "bad ***");
        assert_eq!(scrub.clean("bad p%40ssword"), "bad ***");
    }

    #[test]
    fn a_user_name_alone_is_scrubbed() {
        let scrub = Scrubber::from_url("postgres://alice@h/db");
        assert_eq!(
            scrub.clean("role alice does not exist"),
            "role *** does not exist"
        );
    }

    #[test]
    fn a_password_in_a_url_without_slashes_is_hidden_too() {
        // A typo before the user info (`postgres:/app:pw@db`) left no `://` to find it by:
        // the label showed the URL whole and the scrubber knew no secret of it.
        for url in [
            "app:hunter22@db/jobs",
            "postgres//app:hunter22@db/jobs",
            "postgres:/app:hunter22@127.0.0.1:1/jobs",
            "postgres:app:hunter22@127.0.0.1:1/jobs?schema=s",
            "redis:hunter22@127.0.0.1:1/",
            "redis:/:hunter22@127.0.0.1:1/?prefix=p",
            "postgres:/app:hun?ter22@db/x?schema=s",
        ] {
            let password = url.split_once("app:").map_or("hunter22", |(_, rest)| {
                rest.split_once('@').map_or(rest, |(p, _)| p)
            });
            let password = password.trim_start_matches(':');
            let label = store_label(url);
            assert!(!label.contains("hun"), "{url}: {label}");
            let scrub = Scrubber::from_url(url);
            assert_eq!(
                scrub.clean(&format!("auth {password} failed")),
                "auth *** failed",
                "{url}"
            );
        }
        // A file store's path is no secret, `@` or not.
        assert_eq!(store_label("file:./data@2024"), "file:./data@2024");
    }

    #[test]
    fn secrets_quoted_with_escapes_are_scrubbed_too() {
        // A client library that quotes a password with `{:?}` escapes its `"` and `\`.
        let scrub = Scrubber::from_url("postgres://app:pa%22ss%5Cword@h/db");
        let quoted = format!("{:?}", "pa\"ss\\word");
        assert_eq!(quoted, r#""pa\"ss\\word""#);
        let cleaned = scrub.clean(&format!("password {quoted} refused"));
        assert_eq!(cleaned, r#"password "***" refused"#);
    }

    #[test]
    fn debug_output_shows_no_secret() {
        let scrub = Scrubber::from_url("postgres://alice:hunter22@h/db?sslpassword=topsecret");
        let debug = format!("{scrub:?} {scrub:#?}");
        for secret in ["alice", "hunter22", "topsecret"] {
            assert!(!debug.contains(secret), "{debug}");
        }
    }
}
