//! What the server keeps across a restart: Redis acknowledges writes from memory, so without
//! the append-only file a restart loses jobs. [`RedisBackend::connect`] logs a warning when it
//! finds so, and operators can ask with [`RedisBackend::persistence`].

use std::collections::HashMap;
use std::fmt;

use fairq_worker::BackendError;

use crate::backend::RedisBackend;

/// How the server persists its data, as far as it tells (`INFO persistence`, and
/// `CONFIG GET` where the server allows it).
///
/// ```
/// use fairq_redis::Persistence;
/// assert!(Persistence::Nothing.to_string().contains("every job"));
/// assert!(!Persistence::AppendOnly { fsync: Some("always".into()) }.loses_jobs());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Persistence {
    /// The append-only file is on; `fsync` is its `appendfsync` policy (`always`,
    /// `everysec`, `no`) when the server lets clients read its configuration.
    AppendOnly {
        /// The `appendfsync` setting, if readable.
        fsync: Option<String>,
    },
    /// No append-only file, but RDB snapshots (`save` rules): a restart loses every change
    /// since the last snapshot.
    SnapshotsOnly,
    /// No append-only file, and the `save` rules could not be read (`CONFIG` is disabled, as
    /// on many managed services): a restart loses at least the changes since the last
    /// snapshot, and every job if the server takes none.
    NoAppendOnly,
    /// Neither the append-only file nor snapshots: a restart loses every job.
    Nothing,
}

impl Persistence {
    /// True unless the append-only file is on: a restart of the server then loses jobs.
    ///
    /// ```
    /// assert!(fairq_redis::Persistence::SnapshotsOnly.loses_jobs());
    /// ```
    pub fn loses_jobs(&self) -> bool {
        !matches!(self, Persistence::AppendOnly { .. })
    }
}

impl fmt::Display for Persistence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Persistence::AppendOnly { fsync: Some(fsync) } => {
                write!(f, "append-only file on (appendfsync {fsync})")
            }
            Persistence::AppendOnly { fsync: None } => f.write_str("append-only file on"),
            Persistence::SnapshotsOnly => f.write_str(
                "no append-only file, RDB snapshots only: a restart loses every change since the \
                 last snapshot (set appendonly yes)",
            ),
            Persistence::NoAppendOnly => f.write_str(
                "no append-only file: a restart loses the changes since the last snapshot, or \
                 every job if the server takes none (set appendonly yes)",
            ),
            Persistence::Nothing => f.write_str(
                "the server persists nothing (no append-only file, no snapshots): a restart \
                 loses every job (set appendonly yes)",
            ),
        }
    }
}

impl RedisBackend {
    /// Asks the server how it persists data (see [`Persistence`]).
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_redis::RedisBackend) -> Result<(), fairq_worker::BackendError> {
    /// let persistence = store.persistence().await?;
    /// if persistence.loses_jobs() {
    ///     eprintln!("warning: {persistence}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn persistence(&self) -> Result<Persistence, BackendError> {
        let info: String = self
            .cmd_query("reading persistence", redis::cmd("INFO").arg("persistence"))
            .await?;
        let fields: HashMap<&str, &str> = info
            .lines()
            .filter_map(|line| line.trim().split_once(':'))
            .collect();
        let config = |name: &'static str| async move {
            let pair: Result<Vec<String>, _> = self
                .cmd_query(
                    "reading configuration",
                    redis::cmd("CONFIG").arg("GET").arg(name),
                )
                .await;
            pair.ok().and_then(|p| p.into_iter().nth(1))
        };
        if fields.get("aof_enabled").is_some_and(|v| *v == "1") {
            return Ok(Persistence::AppendOnly {
                fsync: config("appendfsync").await,
            });
        }
        Ok(match config("save").await {
            Some(save) if save.trim().is_empty() => Persistence::Nothing,
            Some(_) => Persistence::SnapshotsOnly,
            None => Persistence::NoAppendOnly,
        })
    }

    /// Logs a warning when the server would lose jobs on a restart (done by `connect`; a
    /// server that will not say is not warned about).
    pub(crate) async fn warn_about_persistence(&self) {
        match self.persistence().await {
            Ok(p) if p.loses_jobs() => {
                tracing::warn!(addr = %self.inner.addr, "Redis {p}");
            }
            Ok(_) => {}
            Err(err) => tracing::debug!(error = %err, "cannot tell how Redis persists data"),
        }
    }
}
