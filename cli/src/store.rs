//! The `--store` value: which job store a command talks to, and one [`Backend`] over all of
//! them.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use fairq_core::job::{Millis, Outcome};
use fairq_file::{FileBackend, FileOptions};
use fairq_postgres::{PgBackend, PgOptions};
use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::{
    Backend, BackendError, Claim, Failure, Job, JobId, JobInfo, ListFilter, MemoryBackend, NewJob,
    Purge, QueueStats, RetryTarget,
};

use crate::error::CliError;

/// The store used when `--store` is not given (except by `demo`, which uses a fresh
/// temporary folder).
pub const DEFAULT_STORE: &str = "file:./fairq-data";

/// Where jobs live, as written on the command line.
///
/// * `file:PATH`: the embedded file store in folder `PATH` (created if missing);
/// * `postgres://...` or `postgresql://...`: PostgreSQL; an extra `schema=NAME` query
///   parameter picks the schema (default `fairq`), created on first use;
/// * `redis://...` or `rediss://...`: Redis; an extra `prefix=NAME` query parameter picks the
///   key prefix (default `fairq`);
/// * `memory:`: a store inside this process only, gone when it exits (for `demo` and
///   `bench`).
///
/// ```
/// use fairq_cli::StoreUrl;
/// let url: StoreUrl = "redis://127.0.0.1:6379/?prefix=billing".parse().unwrap();
/// assert_eq!(
///     url,
///     StoreUrl::Redis { url: "redis://127.0.0.1:6379/".into(), prefix: Some("billing".into()) }
/// );
/// assert!("mysql://x".parse::<StoreUrl>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// The file store in a folder.
    File(PathBuf),
    /// PostgreSQL.
    Postgres {
        /// The connection URL, without the `schema` parameter.
        url: String,
        /// The schema, if given.
        schema: Option<String>,
    },
    /// Redis.
    Redis {
        /// The connection URL, without the `prefix` parameter.
        url: String,
        /// The key prefix, if given.
        prefix: Option<String>,
    },
    /// An in-process store.
    Memory,
}

impl FromStr for StoreUrl {
    type Err = CliError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| CliError::BadStoreUrl {
            url: s.to_string(),
            reason: reason.to_string(),
        };
        let Some((scheme, rest)) = s.split_once(':') else {
            return Err(bad(
                "expected file:PATH, postgres://..., redis://... or memory:",
            ));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "file" => {
                // `file:///abs` and `file://rel` name the same folders as `file:/abs` and
                // `file:rel`.
                let path = rest.strip_prefix("//").unwrap_or(rest);
                if path.is_empty() {
                    return Err(bad("file: needs a folder, for example file:./fairq-data"));
                }
                Ok(StoreUrl::File(PathBuf::from(path)))
            }
            "memory" | "mem" => {
                if rest.trim_start_matches('/').is_empty() {
                    Ok(StoreUrl::Memory)
                } else {
                    Err(bad("memory: takes nothing after the colon"))
                }
            }
            "postgres" | "postgresql" => {
                let (url, schema) = take_param(s, "schema").map_err(|r| bad(&r))?;
                Ok(StoreUrl::Postgres { url, schema })
            }
            "redis" | "rediss" => {
                let (url, prefix) = take_param(s, "prefix").map_err(|r| bad(&r))?;
                Ok(StoreUrl::Redis { url, prefix })
            }
            other => Err(bad(&format!(
                "unknown scheme {other:?} (expected file:, postgres://, redis:// or memory:)"
            ))),
        }
    }
}

/// Removes query parameter `name` from `url`, returning the rest and the value.
fn take_param(url: &str, name: &str) -> Result<(String, Option<String>), String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), None));
    };
    let mut value = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((key, v)) if key == name => {
                if v.is_empty() {
                    return Err(format!("{name}= needs a value"));
                }
                value = Some(v.to_string());
            }
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, value))
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::File(path) => write!(f, "file:{}", path.display()),
            StoreUrl::Postgres { url, schema } => {
                write!(f, "{}", redact(url))?;
                match schema {
                    Some(s) => write!(f, " (schema {s})"),
                    None => Ok(()),
                }
            }
            StoreUrl::Redis { url, prefix } => {
                write!(f, "{}", redact(url))?;
                match prefix {
                    Some(p) => write!(f, " (prefix {p})"),
                    None => Ok(()),
                }
            }
            StoreUrl::Memory => f.write_str("memory:"),
        }
    }
}

/// Hides a password in `scheme://user:password@host`.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// Settings that apply when a store is opened.
///
/// ```
/// let options = fairq_cli::OpenOptions::default();
/// assert_eq!(options.pool_size, 16);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenOptions {
    /// Connections to keep to a PostgreSQL server.
    pub pool_size: usize,
    /// How long to wait for a server to accept a connection.
    pub connect_timeout: Duration,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            pool_size: 16,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// One open store of any kind; implements [`Backend`] by handing each call to the store
/// inside.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use fairq_cli::{OpenOptions, Store, StoreUrl};
/// use fairq_worker::{Backend, NewJob};
/// let store = Store::open(&StoreUrl::Memory, &OpenOptions::default()).await.unwrap();
/// let id = store.enqueue(NewJob::new("q", "k", b"1".to_vec())).await.unwrap();
/// assert!(store.get(id).await.unwrap().is_some());
/// # });
/// ```
#[derive(Clone)]
pub enum Store {
    /// The file store in a folder.
    File(FileBackend),
    /// In this process.
    Memory(MemoryBackend),
    /// PostgreSQL.
    Postgres(PgBackend),
    /// Redis.
    Redis(RedisBackend),
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Store::File(_) => "Store::File",
            Store::Memory(_) => "Store::Memory",
            Store::Postgres(_) => "Store::Postgres",
            Store::Redis(_) => "Store::Redis",
        })
    }
}

impl Store {
    /// Opens (or connects to) the store `url` names. PostgreSQL schemas are created or
    /// upgraded on the way.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_cli::{OpenOptions, Store, StoreUrl};
    /// let url: StoreUrl = "redis://127.0.0.1:1/".parse().unwrap();
    /// let err = Store::open(&url, &OpenOptions::default()).await.unwrap_err();
    /// assert!(err.to_string().starts_with("cannot open store redis://127.0.0.1:1/"));
    /// # });
    /// ```
    pub async fn open(url: &StoreUrl, options: &OpenOptions) -> Result<Store, CliError> {
        let opened = match url {
            StoreUrl::Memory => Ok(Store::Memory(MemoryBackend::new())),
            StoreUrl::Postgres { url, schema } => {
                let mut pg = PgOptions::default()
                    .migrate(true)
                    .pool_size(options.pool_size.max(1))
                    .connect_timeout(options.connect_timeout);
                if let Some(schema) = schema {
                    pg = pg.schema(schema.clone());
                }
                PgBackend::connect(url, pg)
                    .await
                    .map(Store::Postgres)
                    .map_err(BackendError::from)
            }
            StoreUrl::Redis { url, prefix } => {
                let mut redis = RedisOptions::new().connect_timeout(options.connect_timeout);
                if let Some(prefix) = prefix {
                    redis = redis.prefix(prefix.clone());
                }
                RedisBackend::connect(url, redis).await.map(Store::Redis)
            }
            StoreUrl::File(path) => {
                // Opening replays the folder's journal: blocking file I/O.
                let path = path.clone();
                tokio::task::spawn_blocking(move || FileBackend::open(path, FileOptions::default()))
                    .await
                    .map_err(|e| BackendError::Store(Box::new(e)))
                    .and_then(|opened| opened.map(Store::File).map_err(BackendError::from))
            }
        };
        opened.map_err(|source| CliError::Open {
            url: url.to_string(),
            source,
        })
    }

    /// True for a store that lives only as long as this process.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_cli::{OpenOptions, Store, StoreUrl};
    /// let store = Store::open(&StoreUrl::Memory, &OpenOptions::default()).await.unwrap();
    /// assert!(store.is_ephemeral());
    /// # });
    /// ```
    pub fn is_ephemeral(&self) -> bool {
        matches!(self, Store::Memory(_))
    }
}

/// Calls the same method on whichever store is inside.
macro_rules! each {
    ($self:expr, $store:ident => $call:expr) => {
        match $self {
            Store::File($store) => $call.await,
            Store::Memory($store) => $call.await,
            Store::Postgres($store) => $call.await,
            Store::Redis($store) => $call.await,
        }
    };
}

impl Backend for Store {
    async fn enqueue(&self, job: NewJob) -> Result<JobId, BackendError> {
        each!(self, s => s.enqueue(job))
    }

    async fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        each!(self, s => s.enqueue_many(jobs))
    }

    async fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        each!(self, s => s.claim(queue, max, lease))
    }

    async fn complete(&self, claim: Claim) -> Result<(), BackendError> {
        each!(self, s => s.complete(claim))
    }

    async fn fail(&self, claim: Claim, failure: Failure) -> Result<Outcome, BackendError> {
        each!(self, s => s.fail(claim, failure))
    }

    async fn heartbeat(&self, claim: Claim, lease: Duration) -> Result<Millis, BackendError> {
        each!(self, s => s.heartbeat(claim, lease))
    }

    async fn rescue(&self, queue: &str) -> Result<u64, BackendError> {
        each!(self, s => s.rescue(queue))
    }

    async fn wait_for_jobs(&self, queue: &str, timeout: Duration) {
        each!(self, s => s.wait_for_jobs(queue, timeout))
    }

    async fn stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        each!(self, s => s.stats())
    }

    async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        each!(self, s => s.list(filter))
    }

    async fn get(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        each!(self, s => s.get(id))
    }

    async fn retry(&self, target: RetryTarget) -> Result<u64, BackendError> {
        each!(self, s => s.retry(target))
    }

    async fn purge(&self, purge: Purge) -> Result<u64, BackendError> {
        each!(self, s => s.purge(purge))
    }

    async fn prune(&self, older_than: Duration) -> Result<u64, BackendError> {
        each!(self, s => s.prune(older_than))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<StoreUrl, String> {
        s.parse::<StoreUrl>().map_err(|e| e.to_string())
    }

    #[test]
    fn file_urls_name_folders() {
        assert_eq!(parse("file:./data"), Ok(StoreUrl::File("./data".into())));
        assert_eq!(parse("file:///tmp/q"), Ok(StoreUrl::File("/tmp/q".into())));
        assert_eq!(parse("FILE:rel"), Ok(StoreUrl::File("rel".into())));
        assert!(parse("file:").unwrap_err().contains("needs a folder"));
    }

    #[test]
    fn unknown_schemes_and_bare_paths_are_refused() {
        assert!(parse("mysql://localhost/db")
            .unwrap_err()
            .contains("unknown scheme \"mysql\""));
        assert!(parse("./fairq-data")
            .unwrap_err()
            .contains("expected file:PATH"));
        assert!(parse("memory:x").is_err());
    }

    #[test]
    fn schema_and_prefix_are_taken_out_of_the_query() {
        assert_eq!(
            parse("postgres://u@h/db?sslmode=disable&schema=jobs"),
            Ok(StoreUrl::Postgres {
                url: "postgres://u@h/db?sslmode=disable".into(),
                schema: Some("jobs".into())
            })
        );
        assert_eq!(
            parse("postgresql://h/db"),
            Ok(StoreUrl::Postgres {
                url: "postgresql://h/db".into(),
                schema: None
            })
        );
        assert_eq!(
            parse("redis://h:1/2?prefix=p"),
            Ok(StoreUrl::Redis {
                url: "redis://h:1/2".into(),
                prefix: Some("p".into())
            })
        );
        assert!(parse("redis://h/?prefix=").is_err());
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

    #[test]
    fn passwords_are_not_displayed() {
        let url = parse("postgres://bob:secret@db:5432/x?schema=s").unwrap();
        assert_eq!(url.to_string(), "postgres://bob:***@db:5432/x (schema s)");
        let url = parse("redis://:pw@h/").unwrap();
        assert_eq!(url.to_string(), "redis://:***@h/");
        assert_eq!(parse("memory:").unwrap().to_string(), "memory:");
    }
}
