//! The error of a refused waiting push into a [`WaitQueue`](crate::WaitQueue).

use core::fmt;

/// Why [`WaitQueue::push_timeout`](crate::WaitQueue::push_timeout) or
/// [`WaitQueue::push_async`](crate::WaitQueue::push_async) gave an item back.
///
/// ```
/// use std::time::Duration;
/// use fairq_blocking::{FullPolicy, PushError, WaitQueue};
///
/// let q = WaitQueue::bounded(1, FullPolicy::Refuse);
/// q.push(1).unwrap();
/// let err = q.push_timeout(2, Duration::from_millis(1)).unwrap_err();
/// assert_eq!(err, PushError::Full(2));
/// assert_eq!(err.to_string(), "the wait-queue was still full at the deadline");
/// assert_eq!(err.into_inner(), 2);
/// ```
#[derive(thiserror::Error, Clone, PartialEq, Eq)]
pub enum PushError<T> {
    /// No room was made before the deadline.
    #[error("the wait-queue was still full at the deadline")]
    Full(T),
    /// The queue was closed.
    #[error("the wait-queue is closed")]
    Closed(T),
}

impl<T> PushError<T> {
    /// The refused item.
    ///
    /// ```
    /// let q = fairq_blocking::WaitQueue::unbounded();
    /// q.close();
    /// let err = q.push_timeout('x', std::time::Duration::ZERO).unwrap_err();
    /// assert_eq!(err.into_inner(), 'x');
    /// ```
    pub fn into_inner(self) -> T {
        match self {
            PushError::Full(item) | PushError::Closed(item) => item,
        }
    }
}

impl<T> fmt::Debug for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Full(_) => f.write_str("Full(..)"),
            PushError::Closed(_) => f.write_str("Closed(..)"),
        }
    }
}
