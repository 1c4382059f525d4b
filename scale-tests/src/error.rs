//! What can go wrong while setting up or tearing down a scale test.

use std::time::Duration;

/// A harness failure: a tool that could not run or refused, or an event that did not come.
///
/// ```
/// let err = fairq_scale_tests::HarnessError::Timeout { what: "the cluster".into(), after: std::time::Duration::from_secs(3) };
/// assert_eq!(err.to_string(), "timed out after 3s waiting for the cluster");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A system call or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A command ran but failed.
    #[error("{what} failed ({status}): {output}")]
    Command {
        /// The command line.
        what: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The tail of its output.
        output: String,
    },
    /// An awaited event did not happen in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long the wait was.
        after: Duration,
    },
    /// A program the harness needs is not installed.
    #[error("{0} is not installed")]
    Missing(String),
    /// Anything else, said in words.
    #[error("{0}")]
    Other(String),
}

impl HarnessError {
    /// An [`HarnessError::Io`] for `what`.
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        HarnessError::Io {
            what: what.into(),
            source,
        }
    }
}
