//! What can go wrong talking to a store: [`BackendError`], which every `Backend` method
//! returns, and whether a failure is worth retrying.

use std::error::Error as StdError;

use fairq_core::job::TransitionError;

use crate::job::JobId;

/// A boxed source error from a store's client library.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// What can go wrong talking to a store.
///
/// ```
/// use fairq_worker::{BackendError, JobId};
/// let err = BackendError::NotFound(JobId(9));
/// assert_eq!(err.to_string(), "job 9 not found");
/// assert!(!err.is_transient());
/// ```
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// No such job.
    #[error("job {0} not found")]
    NotFound(JobId),
    /// The job's lifecycle refused the change (for example a stale lease after a rescue).
    #[error("job {id}: {source}")]
    Transition {
        /// The job.
        id: JobId,
        /// What the lifecycle said.
        #[source]
        source: TransitionError,
    },
    /// A unique key is already taken by an unfinished job.
    #[error("queue {queue:?} already has job {existing} with unique key {key:?}")]
    Duplicate {
        /// The queue.
        queue: String,
        /// The unique key.
        key: String,
        /// The job holding it.
        existing: JobId,
    },
    /// The job depends on a job that does not exist.
    #[error("dependency {0} does not exist")]
    UnknownDependency(JobId),
    /// The request is malformed (bad queue name, oversize payload, ...).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The store refuses more jobs.
    #[error("store is full: {0}")]
    Full(String),
    /// The store cannot be reached right now (connection refused or lost); retrying later may
    /// work.
    #[error("store unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// The store failed in another way (corrupt data, schema missing, script error, ...).
    #[error("store error: {0}")]
    Store(#[source] BoxError),
    /// The store does not offer this operation.
    #[error("this store does not support {0}")]
    Unsupported(&'static str),
    /// The queue still has live jobs (blocked, scheduled, running or retrying), so it cannot
    /// be removed ([`Backend::remove_queue`](crate::Backend::remove_queue)).
    #[error("queue {queue:?} still has {live} live job(s); finish, purge or cancel them first")]
    QueueNotEmpty {
        /// The queue.
        queue: String,
        /// How many live jobs it has.
        live: u64,
    },
    /// The store knows no queue of this name: no job, finished job or counter mentions it.
    #[error("no queue named {0:?}")]
    UnknownQueue(String),
}

impl BackendError {
    /// True when the same call may succeed later without any change (connection trouble).
    ///
    /// ```
    /// use fairq_worker::BackendError;
    /// let err = BackendError::Unavailable("connection refused".into());
    /// assert!(err.is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        matches!(self, BackendError::Unavailable(_))
    }

    /// True when the caller's lease was superseded (the job was rescued and re-claimed).
    ///
    /// ```
    /// use fairq_core::job::{LeaseToken, TransitionError};
    /// use fairq_worker::{BackendError, JobId};
    /// let err = BackendError::Transition {
    ///     id: JobId(1),
    ///     source: TransitionError::StaleLease { presented: LeaseToken(1), current: Some(LeaseToken(2)) },
    /// };
    /// assert!(err.is_stale_lease());
    /// ```
    pub fn is_stale_lease(&self) -> bool {
        matches!(
            self,
            BackendError::Transition {
                source: TransitionError::StaleLease { .. },
                ..
            }
        )
    }

    /// True when the store refused a change because the job is no longer held under the
    /// caller's lease: it is not running, or runs under another lease. (The caller's own
    /// earlier call may have been what moved it on.)
    pub(crate) fn is_not_held(&self) -> bool {
        matches!(
            self,
            BackendError::Transition {
                source: TransitionError::NotRunning { .. } | TransitionError::StaleLease { .. },
                ..
            }
        )
    }
}
