//! Redis failures, turned into [`BackendError`]s with a message that says what went wrong.

use fairq_worker::BackendError;
use redis::{ErrorKind, RedisError};

/// What went wrong talking to Redis; carried inside [`BackendError::Unavailable`] or
/// [`BackendError::Store`].
///
/// ```
/// use fairq_redis::RedisStoreError;
/// let err = RedisStoreError::Corrupt { what: "job 3".into(), detail: "no state".into() };
/// assert_eq!(err.to_string(), "corrupt record (job 3): no state");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum RedisStoreError {
    /// The server could not be reached (refused, timed out, unknown host).
    #[error("cannot connect to Redis at {addr}: {source}")]
    Connect {
        /// Host and port (never the password).
        addr: String,
        /// The client's error.
        #[source]
        source: RedisError,
    },
    /// The TLS handshake failed: most often the server's certificate does not chain to a
    /// trusted root (see [`RedisOptions::root_certificate`](crate::RedisOptions)), has
    /// expired, or names another host. Repeating does not help, so it is reported as
    /// [`BackendError::Store`], not as a server that is down.
    #[error("TLS handshake with Redis at {addr} failed: {source}")]
    Tls {
        /// Host and port.
        addr: String,
        /// The client's error (the TLS library's reason inside).
        #[source]
        source: RedisError,
    },
    /// The connection broke or timed out during an operation.
    #[error("Redis connection lost during {op}: {source}")]
    Connection {
        /// The operation.
        op: &'static str,
        /// The client's error.
        #[source]
        source: RedisError,
    },
    /// The server turned the operation away without running any of it, for now: the queue's
    /// Redis Cluster slot is moving between masters or has moved (a redirection or
    /// `TRYAGAIN`), the cluster is down or failing over, the server is loading its data, the
    /// node is a replica, another client's script has run past the busy threshold (`BUSY`),
    /// the server cannot write its snapshot (`MISCONF`) or has too few replicas for
    /// `min-replicas-to-write` (`NOREPLICAS`). Repeating later helps.
    #[error("Redis refused {op} for now, nothing of it ran: {source}")]
    Refused {
        /// The operation.
        op: &'static str,
        /// The server's answer.
        #[source]
        source: RedisError,
    },
    /// A Lua script raised an error.
    #[error("Lua script `{script}` failed: {source}")]
    Script {
        /// The script's name.
        script: &'static str,
        /// The server's error.
        #[source]
        source: RedisError,
    },
    /// Another command failed.
    #[error("Redis refused {op}: {source}")]
    Command {
        /// The operation.
        op: &'static str,
        /// The server's error.
        #[source]
        source: RedisError,
    },
    /// A write was applied on the primary but too few replicas confirmed it in time (see
    /// [`RedisOptions::replicas`](crate::RedisOptions::replicas)). The change is made: every
    /// client sees it, and it stays unless the primary fails before a replica has it.
    ///
    /// For an enqueue that means its jobs are stored and will run. The caller does not learn
    /// their ids, and an enqueue it repeats is a new one, which stores the jobs a second
    /// time (unless a unique key recognises them: under
    /// [`OnConflict::Ignore`](fairq_worker::OnConflict::Ignore) the repeat answers the stored
    /// job). The message says so. A repeated settlement, hand-back or revival does not apply
    /// its change twice: it is refused (the job no longer runs, or is no longer dead).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_redis::RedisStoreError;
    /// let err = RedisStoreError::Unconfirmed {
    ///     op: "enqueue",
    ///     confirmed: 0,
    ///     wanted: 1,
    ///     timeout: Duration::from_secs(1),
    /// };
    /// assert_eq!(
    ///     err.to_string(),
    ///     "Redis applied enqueue but only 0 of 1 replicas confirmed it within 1s: the jobs \
    ///      are stored, and repeating the enqueue stores them again",
    /// );
    /// ```
    #[error(
        "Redis applied {op} but only {confirmed} of {wanted} replicas confirmed it within {timeout:?}{}",
        unconfirmed_consequence(op)
    )]
    Unconfirmed {
        /// The operation.
        op: &'static str,
        /// Replicas that confirmed.
        confirmed: u64,
        /// Replicas asked for.
        wanted: u32,
        /// How long the store waited.
        timeout: std::time::Duration,
    },
    /// Stored data did not have the expected shape.
    #[error("corrupt record ({what}): {detail}")]
    Corrupt {
        /// Which record.
        what: String,
        /// What was wrong.
        detail: String,
    },
}

/// What an unconfirmed `op` leaves behind, when the caller could not guess it: an enqueue's
/// jobs are stored, and a repeat of the enqueue is a new one.
fn unconfirmed_consequence(op: &str) -> &'static str {
    match op {
        "enqueue" => ": the jobs are stored, and repeating the enqueue stores them again",
        _ => "",
    }
}

/// The codes of server refusals, for now, that the `redis` crate has no kind for (they come
/// as [`ErrorKind::ExtensionError`]): `BUSY` (another client's script has run past the busy
/// threshold, and the server runs nothing else until it ends), `MISCONF` (the server cannot
/// write its snapshot and refuses writes) and `NOREPLICAS` (fewer replicas than
/// `min-replicas-to-write`). A script is refused these before it runs, or at its first write
/// command (a script without flags is checked there), which it then does not make: either
/// way nothing of it is applied.
const REFUSED_FOR_NOW: [&str; 3] = ["BUSY", "MISCONF", "NOREPLICAS"];

/// True for a refusal in [`REFUSED_FOR_NOW`].
fn refused_for_now(err: &RedisError) -> bool {
    err.kind() == ErrorKind::ExtensionError
        && err
            .code()
            .is_some_and(|code| REFUSED_FOR_NOW.contains(&code))
}

/// True for errors that a retry on a fresh connection may cure.
pub(crate) fn is_transient(err: &RedisError) -> bool {
    // A refused certificate arrives as an I/O error, but no retry cures it.
    if crate::tls::tls_failure(err).is_some() {
        return false;
    }
    refused_for_now(err)
        || err.is_io_error()
        || err.is_connection_refusal()
        || err.is_connection_dropped()
        || err.is_timeout()
        || matches!(
            err.kind(),
            ErrorKind::BusyLoadingError
                | ErrorKind::TryAgain
                | ErrorKind::ClusterDown
                // Cluster topology changes: a slot moved or is moving, a master is down or
                // was demoted in a failover, a node's connection is not there yet. The
                // cluster connection updates its slot map on these; a repeat goes to the
                // new owner.
                | ErrorKind::Moved
                | ErrorKind::Ask
                | ErrorKind::MasterDown
                | ErrorKind::ReadOnly
                | ErrorKind::ClusterConnectionNotFound
        )
}

/// True for failures in which the server, or the client before sending, refused the call
/// as a whole: nothing of it ran. A redirection (`MOVED`, `ASK`: the slot is elsewhere or
/// moving), `TRYAGAIN` (the slot is half-moved), `CLUSTERDOWN`, `MASTERDOWN`, `LOADING`,
/// `READONLY` (a replica runs no write), a refused connection or a node the cluster client
/// has no connection to, and the refusals of [`REFUSED_FOR_NOW`] (`BUSY`, `MISCONF`,
/// `NOREPLICAS`). A repeat after one of these is a first try, not a repeat of a call that may
/// have gone through.
pub(crate) fn not_run(err: &RedisError) -> bool {
    refused_for_now(err)
        || err.is_connection_refusal()
        || matches!(
            err.kind(),
            ErrorKind::Moved
                | ErrorKind::Ask
                | ErrorKind::TryAgain
                | ErrorKind::ClusterDown
                | ErrorKind::MasterDown
                | ErrorKind::BusyLoadingError
                | ErrorKind::ReadOnly
                | ErrorKind::ClusterConnectionNotFound
        )
}

/// A transient failure of `op`: turned away by the server, or a connection that failed.
fn unavailable(op: &'static str, err: RedisError) -> BackendError {
    let err = if not_run(&err) && !err.is_connection_refusal() {
        RedisStoreError::Refused { op, source: err }
    } else {
        RedisStoreError::Connection { op, source: err }
    };
    BackendError::Unavailable(Box::new(err))
}

/// Wraps a failed command of `op`.
pub(crate) fn command(op: &'static str, err: RedisError) -> BackendError {
    if is_transient(&err) {
        unavailable(op, err)
    } else {
        BackendError::Store(Box::new(RedisStoreError::Command { op, source: err }))
    }
}

/// Wraps a failed script call.
pub(crate) fn script(name: &'static str, err: RedisError) -> BackendError {
    if is_transient(&err) {
        unavailable(name, err)
    } else {
        BackendError::Store(Box::new(RedisStoreError::Script {
            script: name,
            source: err,
        }))
    }
}

/// The same failure again, for another entry of a batch that one failed call answered: of
/// the same kind (a transient failure stays transient, a permanent one permanent), with the
/// same message. The calls of a store fail as [`BackendError::Unavailable`] or
/// [`BackendError::Store`]; anything else is copied as a store error saying what it was.
pub(crate) fn copy_of(err: &BackendError) -> BackendError {
    match err {
        BackendError::Unavailable(inner) => BackendError::Unavailable(inner.to_string().into()),
        BackendError::Store(inner) => BackendError::Store(inner.to_string().into()),
        other => BackendError::Store(other.to_string().into()),
    }
}

/// A record that does not parse.
pub(crate) fn corrupt(what: impl Into<String>, detail: impl Into<String>) -> BackendError {
    BackendError::Store(Box::new(RedisStoreError::Corrupt {
        what: what.into(),
        detail: detail.into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_ran_nowhere_lost_replies_may_have_run() {
        for kind in [
            ErrorKind::TryAgain,
            ErrorKind::Ask,
            ErrorKind::Moved,
            ErrorKind::ClusterDown,
        ] {
            let err = RedisError::from((kind, "refused"));
            assert!(not_run(&err) && is_transient(&err), "{err}");
        }
        let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(not_run(&refused));
        for io in [
            std::io::ErrorKind::TimedOut,
            std::io::ErrorKind::ConnectionReset,
        ] {
            let err = RedisError::from(std::io::Error::from(io));
            assert!(is_transient(&err) && !not_run(&err), "{err}");
        }
        let script = RedisError::from((ErrorKind::ResponseError, "ERR in script"));
        assert!(!not_run(&script) && !is_transient(&script));
    }

    /// `BUSY`, `MISCONF` and `NOREPLICAS` ran nothing and may pass: they were taken for
    /// script failures (permanent store errors, never repeated) before.
    #[test]
    fn refusals_the_client_library_has_no_kind_for_are_transient() {
        for code in ["BUSY", "MISCONF", "NOREPLICAS"] {
            let err = redis::make_extension_error(code.to_string(), Some("for now".to_string()));
            assert!(not_run(&err) && is_transient(&err), "{err}");
            let wrapped = script("enqueue", err);
            assert!(matches!(wrapped, BackendError::Unavailable(_)), "{wrapped}");
            let text = wrapped.to_string();
            assert!(text.contains("nothing of it ran"), "{text}");
            assert!(text.contains(code), "{text}");
        }
        for code in ["BUSYKEY", "BUSYGROUP", "OOM", "NOPERM"] {
            let err = redis::make_extension_error(code.to_string(), None);
            assert!(!not_run(&err) && !is_transient(&err), "{err}");
        }
    }

    #[test]
    fn a_copy_of_a_failure_keeps_its_kind_and_message() {
        let lost = BackendError::Unavailable("connection lost".into());
        let copy = copy_of(&lost);
        assert!(copy.is_transient());
        assert_eq!(copy.to_string(), lost.to_string());
        let broken = BackendError::Store("WRONGTYPE".into());
        let copy = copy_of(&broken);
        assert!(matches!(copy, BackendError::Store(_)));
        assert_eq!(copy.to_string(), broken.to_string());
    }

    #[test]
    fn a_refusal_says_nothing_ran_and_a_broken_connection_says_so() {
        let moving = command(
            "claim",
            RedisError::from((ErrorKind::TryAgain, "slot moving")),
        );
        assert!(matches!(moving, BackendError::Unavailable(_)));
        let text = moving.to_string();
        assert!(
            text.contains("refused claim for now, nothing of it ran"),
            "{text}"
        );
        let lost = script(
            "settle",
            RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
        );
        assert!(matches!(lost, BackendError::Unavailable(_)));
        assert!(
            lost.to_string().contains("connection lost during settle"),
            "{lost}"
        );
        let down = command(
            "stats",
            RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
        );
        assert!(
            down.to_string().contains("connection lost during stats"),
            "{down}"
        );
    }
}
