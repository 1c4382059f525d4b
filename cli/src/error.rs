//! What can go wrong running a command, and how it is shown: one line on stderr.

use std::error::Error as StdError;

use fairq::ConnectError;
use fairq_worker::{BackendError, WorkerConfigError};

/// A command that failed. Each variant renders as one line that says what to fix.
///
/// ```
/// use fairq_cli::CliError;
/// let err = CliError::UnknownQueue { queue: "mial".into(), known: vec!["mail".into()] };
/// assert_eq!(err.to_string(), "unknown queue \"mial\" (queues with jobs: mail)");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The `--store` value does not name a store this program knows, or the store could
    /// not be opened or reached.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// A store call failed.
    #[error(transparent)]
    Store(#[from] BackendError),
    /// The payload is not valid JSON.
    #[error("invalid JSON payload: {0}")]
    BadPayload(#[source] serde_json::Error),
    /// No job of the named queue exists in the store.
    #[error("unknown queue {queue:?} ({})", known_queues(.known))]
    UnknownQueue {
        /// The queue asked for.
        queue: String,
        /// The queues that have jobs.
        known: Vec<String>,
    },
    /// `fairq queue resume` of a queue that is not paused.
    #[error("queue {queue:?} is not paused ({})", paused_queues(.paused))]
    NotPaused {
        /// The queue asked for.
        queue: String,
        /// The queues that are paused.
        paused: Vec<String>,
    },
    /// `fairq queue pause` of a queue that is paused already.
    #[error("queue {0:?} is already paused")]
    AlreadyPaused(String),
    /// A job id that the store does not hold.
    #[error("no job with id {0}")]
    UnknownJob(u64),
    /// The arguments contradict each other or miss something.
    #[error("{0}")]
    Usage(String),
    /// Reading or writing a local file or stream failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The worker's settings cannot work.
    #[error("worker settings: {0}")]
    Worker(#[from] WorkerConfigError),
    /// The fairness demo measured something other than what it exists to show, or a
    /// measured run could not finish.
    #[error("{0}")]
    Verdict(String),
    /// A signal (SIGTERM or Ctrl-C) stopped a demo or a bench.
    #[error("stopped by {0}")]
    Stopped(&'static str),
    /// A second signal ended `work` before its running jobs finished.
    #[error("interrupted during shutdown; running jobs will be rescued when their leases expire")]
    Interrupted,
}

fn known_queues(known: &[String]) -> String {
    if known.is_empty() {
        "the store has no jobs".to_string()
    } else {
        format!("queues with jobs: {}", known.join(", "))
    }
}

fn paused_queues(paused: &[String]) -> String {
    if paused.is_empty() {
        "no queue is paused".to_string()
    } else {
        format!("paused queues: {}", paused.join(", "))
    }
}

impl CliError {
    /// Wraps an I/O error with what was being done.
    ///
    /// ```
    /// let err = fairq_cli::CliError::io("reading payload.json", std::io::ErrorKind::NotFound.into());
    /// assert!(err.to_string().starts_with("reading payload.json: "));
    /// ```
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        CliError::Io {
            context: context.into(),
            source,
        }
    }

    /// The whole error on one line: the message, then each cause that adds something new,
    /// separated by `": "`, with line breaks flattened.
    ///
    /// ```
    /// use fairq_cli::CliError;
    /// use fairq_worker::BackendError;
    /// let err = CliError::Connect(fairq::ConnectError::Open {
    ///     url: "redis://127.0.0.1:1/".into(),
    ///     source: BackendError::Unavailable("connection refused".into()),
    /// });
    /// assert_eq!(
    ///     err.one_line(),
    ///     "cannot open store redis://127.0.0.1:1/: store unavailable: connection refused"
    /// );
    /// ```
    pub fn one_line(&self) -> String {
        let mut line = self.to_string();
        let mut source = self.source();
        while let Some(cause) = source {
            let text = cause.to_string();
            if !text.is_empty() && !line.contains(&text) {
                line.push_str(": ");
                line.push_str(&text);
            }
            source = cause.source();
        }
        line.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// What to do next, for the errors that have a known way out: a file store that refuses
    /// to open because of damage can be rebuilt with `fairq salvage`.
    ///
    /// ```
    /// use fairq_cli::CliError;
    /// let corrupt = fairq::file::FileError::CorruptRecord {
    ///     path: "/data/q".into(),
    ///     item: 7,
    ///     reason: "bad frame".into(),
    /// };
    /// let err = CliError::Store(fairq::BackendError::from(corrupt));
    /// assert!(err.hint().unwrap().contains("fairq salvage --to"));
    /// assert!(CliError::Usage("x".into()).hint().is_none());
    /// ```
    pub fn hint(&self) -> Option<&'static str> {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(cause) = source {
            if cause
                .downcast_ref::<fairq::file::FileError>()
                .is_some_and(|e| e.is_corrupt())
            {
                return Some(
                    "`fairq salvage --to NEW_FOLDER` rebuilds the store from every intact \
                     record into a new folder and lists what was lost (this folder is not \
                     changed)",
                );
            }
            source = cause.source();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_already_in_the_message_are_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let err = CliError::io("opening /x", io);
        assert_eq!(err.one_line(), "opening /x: denied");
    }

    #[test]
    fn multi_line_messages_become_one_line() {
        let err = CliError::Usage("first\nsecond   third".into());
        assert_eq!(err.one_line(), "first second third");
    }

    #[test]
    fn an_empty_store_is_named_as_such() {
        let err = CliError::UnknownQueue {
            queue: "q".into(),
            known: vec![],
        };
        assert_eq!(
            err.to_string(),
            "unknown queue \"q\" (the store has no jobs)"
        );
    }
}
