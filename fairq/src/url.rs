//! Store URLs: which store a string names, parsed once and shown without credentials.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::error::ConnectError;
use crate::redact::{redact_url as redact, MASK};

/// A store named by URL:
///
/// * `file:PATH` (also `file://PATH`): the embedded file store in folder `PATH`; a trailing
///   `?keep_succeeded=true` or `?keep_succeeded=false` (see
///   `fairq_file::FileOptions::keep_succeeded`) is taken out, and anything else after a `?`
///   stays part of the folder's name, as it always did;
/// * `postgres://...` or `postgresql://...`: PostgreSQL; the `schema` query parameter
///   (default `fairq`) and `keep_succeeded` (`true`, the default, or `false`: see
///   `fairq_postgres::PgOptions::keep_succeeded`) are taken out, every other parameter goes
///   to the driver (TLS by libpq's `sslmode` and `sslrootcert`, see [`fairq_postgres`]'s
///   docs);
/// * `redis://...` or `rediss://...` (TLS): Redis; the `prefix` query parameter (default
///   `fairq`) and `keep_succeeded` (`true`, the default, or `false`: see
///   `fairq_redis::RedisOptions::keep_succeeded`) are taken out; a Redis Cluster is `redis+cluster://host1:port1,host2:port2/`
///   (`rediss+cluster://` with TLS) or `redis://host:port/?cluster=true` (discovered from one
///   node), see `fairq_redis::Target`;
/// * `memory:`: a store inside this process, gone when it exits (tests, demos).
///
/// The names and values of the parameters taken out of a server URL are percent-decoded,
/// as the drivers decode the others: `?prefix=app%3Ajobs` is the prefix `app:jobs`.
///
/// A URL other than `file:` cannot hold blanks or control characters (percent-encode
/// them): the error does not show it, as a blank may be inside its password.
///
/// Schemes may be in any case: the URL kept for the driver has its scheme in lower case
/// (`POSTGRES://h/db` becomes `postgres://h/db`).
///
/// Every scheme parses whichever features are on, so a URL for a store that was not
/// compiled in gets a clear error from [`connect`](crate::connect), not a parse error.
/// `Display` hides passwords (see [`redact`](crate::redact())), and in a URL missing the
/// `//` after its scheme (`postgres:/app:pw@db/x`) everything between its first `:` and its
/// last `@`, as is done in every error.
///
/// ```
/// use fairq::StoreUrl;
/// let url: StoreUrl = "redis://:pw@127.0.0.1:6379/?prefix=billing".parse().unwrap();
/// assert_eq!(
///     url,
///     StoreUrl::Redis {
///         url: "redis://:pw@127.0.0.1:6379/".into(),
///         prefix: Some("billing".into()),
///         keep_succeeded: None,
///     }
/// );
/// assert_eq!(url.to_string(), "redis://:***@127.0.0.1:6379/ (prefix billing)");
/// assert!("mysql://x".parse::<StoreUrl>().is_err());
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreUrl {
    /// The file store in a folder.
    File {
        /// The folder.
        path: PathBuf,
        /// Whether succeeded jobs are kept, if given (`?keep_succeeded=true|false`).
        keep_succeeded: Option<bool>,
    },
    /// PostgreSQL.
    Postgres {
        /// The connection URL, without the `schema` parameter.
        url: String,
        /// The schema, if given.
        schema: Option<String>,
        /// Whether succeeded jobs are kept, if given (`keep_succeeded=true|false`).
        keep_succeeded: Option<bool>,
    },
    /// Redis.
    Redis {
        /// The connection URL, without the `prefix` and `keep_succeeded` parameters.
        url: String,
        /// The key prefix, if given.
        prefix: Option<String>,
        /// Whether succeeded jobs are kept, if given (`keep_succeeded=true|false`).
        keep_succeeded: Option<bool>,
    },
    /// An in-process store.
    Memory,
}

/// Shows the URL without its password, so a `{:?}` in a log line leaks nothing either.
impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::File {
                path,
                keep_succeeded,
            } => f
                .debug_struct("File")
                .field("path", path)
                .field("keep_succeeded", keep_succeeded)
                .finish(),
            StoreUrl::Postgres {
                url,
                schema,
                keep_succeeded,
            } => f
                .debug_struct("Postgres")
                .field("url", &redact(url))
                .field("schema", schema)
                .field("keep_succeeded", keep_succeeded)
                .finish(),
            StoreUrl::Redis {
                url,
                prefix,
                keep_succeeded,
            } => f
                .debug_struct("Redis")
                .field("url", &redact(url))
                .field("prefix", prefix)
                .field("keep_succeeded", keep_succeeded)
                .finish(),
            StoreUrl::Memory => f.write_str("Memory"),
        }
    }
}

impl StoreUrl {
    /// The scheme's store, for messages: `file`, `postgres`, `redis` or `memory`.
    ///
    /// ```
    /// let url: fairq::StoreUrl = "postgresql://h/db".parse().unwrap();
    /// assert_eq!(url.kind(), "postgres");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            StoreUrl::File { .. } => "file",
            StoreUrl::Postgres { .. } => "postgres",
            StoreUrl::Redis { .. } => "redis",
            StoreUrl::Memory => "memory",
        }
    }

    /// True for a store that lives only as long as this process.
    ///
    /// ```
    /// assert!(fairq::StoreUrl::Memory.is_ephemeral());
    /// ```
    pub fn is_ephemeral(&self) -> bool {
        matches!(self, StoreUrl::Memory)
    }
}

impl FromStr for StoreUrl {
    type Err = ConnectError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| ConnectError::BadUrl {
            url: redact(s),
            reason: reason.to_string(),
        };
        let Some((scheme, rest)) = s.split_once(':') else {
            return Err(bad(
                "expected file:PATH, postgres://..., redis://... or memory:",
            ));
        };
        let kind = scheme.to_ascii_lowercase();
        if kind != "file" && s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            // Not even redacted: where a blank cuts a URL, nothing tells its password from
            // the rest for sure.
            let is_scheme = kind
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
            return Err(ConnectError::BadUrl {
                url: if is_scheme {
                    format!("{kind}:{MASK}")
                } else {
                    MASK.to_string()
                },
                reason: "a store URL cannot hold blanks or control characters (not shown, as \
                         it may hold a password); percent-encode them, a blank as %20"
                    .to_string(),
            });
        }
        match kind.as_str() {
            "file" => {
                // `file:///abs` and `file://rel` name the same folders as `file:/abs` and
                // `file:rel`.
                let path = rest.strip_prefix("//").unwrap_or(rest);
                if path.is_empty() {
                    return Err(bad("file: needs a folder, for example file:./fairq-data"));
                }
                let (path, keep_succeeded) = match path.rsplit_once("?keep_succeeded=") {
                    Some((folder, "true")) => (folder, Some(true)),
                    Some((folder, "false")) => (folder, Some(false)),
                    _ => (path, None),
                };
                if path.is_empty() {
                    return Err(bad("file: needs a folder, for example file:./fairq-data"));
                }
                Ok(StoreUrl::File {
                    path: PathBuf::from(path),
                    keep_succeeded,
                })
            }
            "memory" | "mem" => {
                if rest.trim_start_matches('/').is_empty() {
                    Ok(StoreUrl::Memory)
                } else {
                    Err(bad("memory: takes nothing after the colon"))
                }
            }
            "postgres" | "postgresql" => {
                // Schemes are case-insensitive, the drivers are not: `POSTGRES://` would be
                // read as a key-value string.
                let (url, schema) =
                    take_param(&lowercase_scheme(s), "schema").map_err(|r| bad(&r))?;
                let (url, keep_succeeded) = take_keep_succeeded(&url).map_err(|r| bad(&r))?;
                Ok(StoreUrl::Postgres {
                    url,
                    schema,
                    keep_succeeded,
                })
            }
            "redis" | "rediss" | "redis+cluster" | "rediss+cluster" => {
                let (url, prefix) =
                    take_param(&lowercase_scheme(s), "prefix").map_err(|r| bad(&r))?;
                let (url, keep_succeeded) = take_keep_succeeded(&url).map_err(|r| bad(&r))?;
                Ok(StoreUrl::Redis {
                    url,
                    prefix,
                    keep_succeeded,
                })
            }
            other => Err(bad(&format!(
                "unknown scheme {other:?} (expected file:, postgres://, redis:// or memory:)"
            ))),
        }
    }
}

/// `url` with its scheme (the text before the first `:`, when it is one) in lower case.
/// Schemes are case-insensitive; the stores' drivers compare them as they are. Anything
/// that is no scheme (a key-value string such as `host=db password=a:b`) is left alone.
pub(crate) fn lowercase_scheme(url: &str) -> String {
    match url.split_once(':') {
        Some((scheme, rest))
            if scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')) =>
        {
            format!("{}:{rest}", scheme.to_ascii_lowercase())
        }
        _ => url.to_string(),
    }
}

/// Removes the `keep_succeeded` query parameter (`true` or `false`) from `url`, returning
/// the rest and the value.
fn take_keep_succeeded(url: &str) -> Result<(String, Option<bool>), String> {
    let (url, keep) = take_param(url, "keep_succeeded")?;
    let keep = match keep.as_deref() {
        None => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(other) => return Err(format!("keep_succeeded={other} is neither true nor false")),
    };
    Ok((url, keep))
}

/// Removes query parameter `name` from `url`, returning the rest and the value (the last
/// one given wins).
pub(crate) fn take_param(url: &str, name: &str) -> Result<(String, Option<String>), String> {
    // The query and the fragment start only after the user info (the last `@` before the
    // first `/` after `://`): a password may hold `?` or `#` as they are.
    let (head, tail) = url.split_at(fairq_worker::url_parts::after_user_info(url));
    // A fragment (Redis' `#insecure`) follows the query and stays with the URL.
    let (body, fragment) = match tail.split_once('#') {
        Some((body, fragment)) => (body, Some(fragment)),
        None => (tail, None),
    };
    let Some((base, query)) = body.split_once('?') else {
        return Ok((url.to_string(), None));
    };
    let base = format!("{head}{base}");
    let mut value = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        // Names and values are percent-decoded, as the drivers decode the parameters they
        // take (`prefix=app%3Ajobs` is `app:jobs`).
        match pair.split_once('=') {
            Some((key, v)) if percent_decode(key).as_deref() == Some(name) => {
                let Some(v) = percent_decode(v) else {
                    return Err(format!("{name}= is not UTF-8 once percent-decoded"));
                };
                if v.is_empty() {
                    return Err(format!("{name}= needs a value"));
                }
                value = Some(v);
            }
            _ => kept.push(pair),
        }
    }
    let mut url = if kept.is_empty() {
        base
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    if let Some(fragment) = fragment {
        url.push('#');
        url.push_str(fragment);
    }
    Ok((url, value))
}

/// `s` with its `%XX` escapes decoded, or `None` when that is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(|decoded| decoded.into_owned())
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::File {
                path,
                keep_succeeded,
            } => {
                write!(f, "file:{}", path.display())?;
                match keep_succeeded {
                    Some(false) => f.write_str(" (succeeded jobs not kept)"),
                    _ => Ok(()),
                }
            }
            StoreUrl::Postgres {
                url,
                schema,
                keep_succeeded,
            } => {
                f.write_str(&redact(url))?;
                if let Some(s) = schema {
                    write!(f, " (schema {s})")?;
                }
                match keep_succeeded {
                    Some(false) => f.write_str(" (succeeded jobs not kept)"),
                    _ => Ok(()),
                }
            }
            StoreUrl::Redis {
                url,
                prefix,
                keep_succeeded,
            } => {
                f.write_str(&redact(url))?;
                if let Some(p) = prefix {
                    write!(f, " (prefix {p})")?;
                }
                match keep_succeeded {
                    Some(false) => f.write_str(" (succeeded jobs not kept)"),
                    _ => Ok(()),
                }
            }
            StoreUrl::Memory => f.write_str("memory:"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<StoreUrl, String> {
        s.parse::<StoreUrl>().map_err(|e| e.to_string())
    }

    fn file(path: &str, keep_succeeded: Option<bool>) -> StoreUrl {
        StoreUrl::File {
            path: path.into(),
            keep_succeeded,
        }
    }

    #[test]
    fn a_password_holding_a_question_mark_or_hash_is_not_taken_for_a_query() {
        assert_eq!(
            take_param("redis://:x?prefix=S3cret@h/0?prefix=p", "prefix"),
            Ok((
                "redis://:x?prefix=S3cret@h/0".to_string(),
                Some("p".to_string())
            ))
        );
        assert_eq!(
            take_param("redis://:a#b@h/0?prefix=p#insecure", "prefix"),
            Ok((
                "redis://:a#b@h/0#insecure".to_string(),
                Some("p".to_string())
            ))
        );
    }

    #[test]
    fn server_urls_are_handed_on_with_their_scheme_in_lower_case() {
        assert_eq!(
            parse("POSTGRES://bob:hunter2@127.0.0.1:5432/app?application_name=x&schema=S"),
            Ok(StoreUrl::Postgres {
                url: "postgres://bob:hunter2@127.0.0.1:5432/app?application_name=x".into(),
                schema: Some("S".into()),
                keep_succeeded: None,
            })
        );
        assert_eq!(
            parse("PostgreSQL://h/DB"),
            Ok(StoreUrl::Postgres {
                url: "postgresql://h/DB".into(),
                schema: None,
                keep_succeeded: None,
            })
        );
        for (given, handed_on) in [
            ("REDIS://:PW@H/", "redis://:PW@H/"),
            ("Rediss://h/?cacert=/CA.pem", "rediss://h/?cacert=/CA.pem"),
            ("REDIS+Cluster://a:1,b:2/", "redis+cluster://a:1,b:2/"),
        ] {
            let Ok(StoreUrl::Redis { url, .. }) = parse(given) else {
                panic!("{given}")
            };
            assert_eq!(url, handed_on);
        }
        assert_eq!(
            lowercase_scheme("host=DB password=a:B"),
            "host=DB password=a:B"
        );
        assert_eq!(lowercase_scheme("no scheme"), "no scheme");
    }

    #[test]
    fn blanks_and_control_characters_are_refused_without_showing_the_url() {
        for (url, shown) in [
            ("redis://:hunter 2@h/?prefix=", "redis:***"),
            ("redis://:hunter 2@h/?prefix=p", "redis:***"),
            ("POSTGRES://bob:hunter\t2@h/db", "postgres:***"),
            ("postgres://bob:hunter2@h/db\n", "postgres:***"),
            ("rediss://:hunter\u{0}2@h/", "rediss:***"),
            ("mysql://u:hunter 2@h/db", "mysql:***"),
            ("my sql://u:hunter2@h/db", "***"),
            ("memory: hunter2", "memory:***"),
        ] {
            let err = url.parse::<StoreUrl>().unwrap_err();
            let ConnectError::BadUrl { url: given, .. } = &err else {
                panic!("{err:?}")
            };
            assert_eq!(given, shown);
            for text in [err.to_string(), format!("{err:?}")] {
                assert!(text.contains("cannot hold blanks"), "{text}");
                assert!(!text.contains("hunter"), "{text}");
            }
        }
        // A folder's name may hold blanks.
        assert_eq!(parse("file:./my data"), Ok(file("./my data", None)));
    }

    #[test]
    fn the_parameters_taken_out_are_percent_decoded() {
        assert_eq!(
            parse("redis://h/?prefix=app%3Ajobs&db=%31"),
            Ok(StoreUrl::Redis {
                url: "redis://h/?db=%31".into(),
                prefix: Some("app:jobs".into()),
                keep_succeeded: None,
            })
        );
        assert_eq!(
            parse("postgres://h/db?sch%65ma=my%5Fjobs&keep%5Fsucceeded=fals%65&sslmode=%72equire"),
            Ok(StoreUrl::Postgres {
                url: "postgres://h/db?sslmode=%72equire".into(),
                schema: Some("my_jobs".into()),
                keep_succeeded: Some(false),
            })
        );
        let err = parse("redis://:hunter2@h/?prefix=%FF").unwrap_err();
        assert!(err.contains("prefix= is not UTF-8"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        // A name that does not decode to UTF-8 is no parameter of the facade's.
        assert_eq!(
            take_param("redis://h/?pre%FFfix=x", "prefix"),
            Ok(("redis://h/?pre%FFfix=x".to_string(), None))
        );
    }

    #[test]
    fn file_urls_name_folders() {
        assert_eq!(parse("file:./data"), Ok(file("./data", None)));
        assert_eq!(parse("file:///tmp/q"), Ok(file("/tmp/q", None)));
        assert_eq!(parse("FILE:rel"), Ok(file("rel", None)));
        assert!(parse("file:").unwrap_err().contains("needs a folder"));
    }

    #[test]
    fn file_urls_take_keep_succeeded_and_leave_other_question_marks_in_the_folder() {
        let url = parse("file:./data?keep_succeeded=false").unwrap();
        assert_eq!(url, file("./data", Some(false)));
        assert_eq!(url.to_string(), "file:./data (succeeded jobs not kept)");
        assert_eq!(
            parse("file:///tmp/q?keep_succeeded=true"),
            Ok(file("/tmp/q", Some(true)))
        );
        // A folder whose name holds a `?` is still that folder.
        assert_eq!(parse("file:./what?now"), Ok(file("./what?now", None)));
        assert_eq!(
            parse("file:./q?keep_succeeded=maybe"),
            Ok(file("./q?keep_succeeded=maybe", None))
        );
        assert!(parse("file:?keep_succeeded=false")
            .unwrap_err()
            .contains("needs a folder"));
    }

    #[test]
    fn cluster_urls_are_redis_urls_with_their_prefix_taken_out_and_passwords_hidden() {
        let url = parse("redis+cluster://:hunter2@a:1,b:2/?prefix=p").unwrap();
        assert_eq!(
            url,
            StoreUrl::Redis {
                url: "redis+cluster://:hunter2@a:1,b:2/".into(),
                prefix: Some("p".into()),
                keep_succeeded: None,
            }
        );
        assert_eq!(url.to_string(), "redis+cluster://:***@a:1,b:2/ (prefix p)");
        assert_eq!(url.kind(), "redis");
        let url = parse("redis://h:1/?cluster=true").unwrap();
        assert_eq!(
            url,
            StoreUrl::Redis {
                url: "redis://h:1/?cluster=true".into(),
                prefix: None,
                keep_succeeded: None,
            }
        );
        assert!(parse("rediss+cluster://h:1/").is_ok());
    }

    #[test]
    fn unknown_schemes_and_bare_paths_are_refused_without_their_passwords() {
        let err = parse("mysql://u:hunter2@localhost/db").unwrap_err();
        assert!(err.contains("unknown scheme \"mysql\""), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        assert!(err.contains("mysql://u:***@localhost/db"), "{err}");
        assert!(parse("./fairq-data")
            .unwrap_err()
            .contains("expected file:PATH"));
        assert!(parse("memory:x").is_err());
        let err = parse("redis://h/?password=hunter2&prefix=").unwrap_err();
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn schema_and_prefix_are_taken_out_of_the_query() {
        assert_eq!(
            parse("postgres://u@h/db?sslmode=disable&schema=jobs"),
            Ok(StoreUrl::Postgres {
                url: "postgres://u@h/db?sslmode=disable".into(),
                schema: Some("jobs".into()),
                keep_succeeded: None,
            })
        );
        assert_eq!(
            parse("postgresql://h/db"),
            Ok(StoreUrl::Postgres {
                url: "postgresql://h/db".into(),
                schema: None,
                keep_succeeded: None,
            })
        );
        assert_eq!(
            parse("postgres://h/db?keep_succeeded=false&sslmode=disable"),
            Ok(StoreUrl::Postgres {
                url: "postgres://h/db?sslmode=disable".into(),
                schema: None,
                keep_succeeded: Some(false),
            })
        );
        assert_eq!(
            parse("postgres://h/db?keep_succeeded=false")
                .unwrap()
                .to_string(),
            "postgres://h/db (succeeded jobs not kept)"
        );
        let err = parse("postgres://h/db?keep_succeeded=no").unwrap_err();
        assert!(err.contains("neither true nor false"), "{err}");
        assert_eq!(
            parse("redis://:pw@h:6379/?prefix=x&keep_succeeded=false&cluster=true"),
            Ok(StoreUrl::Redis {
                url: "redis://:pw@h:6379/?cluster=true".into(),
                prefix: Some("x".into()),
                keep_succeeded: Some(false),
            })
        );
        assert_eq!(
            parse("rediss://h/?keep_succeeded=true&cacert=/ca.pem#insecure"),
            Ok(StoreUrl::Redis {
                url: "rediss://h/?cacert=/ca.pem#insecure".into(),
                prefix: None,
                keep_succeeded: Some(true),
            })
        );
        assert_eq!(
            parse("redis+cluster://a:1,b:2/?keep_succeeded=false&prefix=p"),
            Ok(StoreUrl::Redis {
                url: "redis+cluster://a:1,b:2/".into(),
                prefix: Some("p".into()),
                keep_succeeded: Some(false),
            })
        );
        assert_eq!(
            parse("redis://:pw@h/?prefix=p&keep_succeeded=false")
                .unwrap()
                .to_string(),
            "redis://:***@h/ (prefix p) (succeeded jobs not kept)"
        );
        let err = parse("redis://:hunter2@h/?keep_succeeded=0").unwrap_err();
        assert!(
            err.contains("keep_succeeded=0 is neither true nor false"),
            "{err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
        assert!(parse("rediss+cluster://h:1/?keep_succeeded=")
            .unwrap_err()
            .contains("keep_succeeded= needs a value"));
        assert_eq!(
            parse("rediss://h:1/2?prefix=p"),
            Ok(StoreUrl::Redis {
                url: "rediss://h:1/2".into(),
                prefix: Some("p".into()),
                keep_succeeded: None,
            })
        );
        assert!(parse("redis://h/?prefix=").is_err());
        assert_eq!(
            parse("rediss://h/?prefix=p&cacert=/ca.pem#insecure"),
            Ok(StoreUrl::Redis {
                url: "rediss://h/?cacert=/ca.pem#insecure".into(),
                prefix: Some("p".into()),
                keep_succeeded: None,
            })
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

        /// Against a literal model: the last `prefix=` wins and every other parameter stays,
        /// in order.
        #[test]
        fn taking_a_parameter_keeps_the_others(
            params in proptest::collection::vec(("(prefix|db|x|y)", "[a-z0-9]{1,4}"), 0..6)
        ) {
            let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let url = if query.is_empty() {
                "redis://h/0".to_string()
            } else {
                format!("redis://h/0?{}", query.join("&"))
            };
            let (rest, value) = take_param(&url, "prefix").unwrap();
            let expected_value = params.iter().rev().find(|(k, _)| k == "prefix").map(|(_, v)| v.clone());
            let kept: Vec<&String> = query.iter().filter(|p| !p.starts_with("prefix=")).collect();
            let expected_rest = if kept.is_empty() {
                "redis://h/0".to_string()
            } else {
                format!("redis://h/0?{}", kept.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("&"))
            };
            proptest::prop_assert_eq!(value, expected_value);
            proptest::prop_assert_eq!(rest, expected_rest);
        }
    }

    /// A URL missing the `//` after its scheme (or its scheme) still has user info before
    /// its `@`: no error, `Display` or `Debug` shows the password, and an attempt to
    /// connect with it says nothing of it either.
    #[tokio::test]
    async fn a_password_in_a_url_without_slashes_is_hidden_too() {
        for url in [
            "app:hunter2@db/jobs",
            "postgres//app:hunter2@db/jobs",
            "postgres:/app:hunter2@127.0.0.1:1/jobs",
            "postgres:app:hunter2@127.0.0.1:1/jobs",
            "redis:hunter2@127.0.0.1:1/",
            "redis:/:hunter2@127.0.0.1:1/?prefix=p",
        ] {
            let mut shown = Vec::new();
            match url.parse::<StoreUrl>() {
                Ok(parsed) => {
                    shown.push(parsed.to_string());
                    shown.push(format!("{parsed:?}"));
                    let options = crate::ConnectOptions::default()
                        .connect_timeout(std::time::Duration::from_secs(2));
                    if let Err(err) = crate::Store::open(&parsed, &options).await {
                        shown.push(format!("{err} {err:?}"));
                        let mut source = std::error::Error::source(&err);
                        while let Some(cause) = source {
                            shown.push(cause.to_string());
                            source = cause.source();
                        }
                    }
                }
                Err(err) => shown.push(format!("{err} {err:?}")),
            }
            for text in shown {
                assert!(!text.contains("hunter2"), "{url}: {text}");
            }
        }
    }

    #[test]
    fn passwords_are_not_displayed_nor_debugged() {
        let url = parse("postgres://bob:secret@db:5432/x?schema=s&password=other").unwrap();
        assert_eq!(
            url.to_string(),
            "postgres://bob:***@db:5432/x?password=*** (schema s)"
        );
        let debug = format!("{url:?}");
        assert!(
            !debug.contains("secret") && !debug.contains("other"),
            "{debug}"
        );
        let url = parse("redis://:pw@h/").unwrap();
        assert_eq!(url.to_string(), "redis://:***@h/");
        assert_eq!(parse("memory:").unwrap().to_string(), "memory:");
    }
}
