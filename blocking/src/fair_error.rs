//! The error of a refused push into a [`FairWaitQueue`](crate::FairWaitQueue).

use core::fmt;

/// Why [`FairWaitQueue::push`](crate::FairWaitQueue::push) (or one of the waiting pushes)
/// gave an item back.
///
/// ```
/// use fairq_blocking::{FairPushError, FairWaitQueue};
///
/// let q = FairWaitQueue::with_capacity(1);
/// q.push("alice", 1).unwrap();
/// let err = q.push("bob", 2).unwrap_err();
/// assert!(matches!(err, FairPushError::Full { len: 1, .. }));
/// assert_eq!(err.into_inner(), ("bob", 2));
/// ```
#[derive(thiserror::Error)]
pub enum FairPushError<K, T> {
    /// The fair queue held `len` items, its capacity (for a waiting push: still full at
    /// the deadline).
    #[error("the fair wait-queue is full ({len} items)")]
    Full {
        /// The refused key.
        key: K,
        /// The refused item.
        item: T,
        /// Items held when the push was refused.
        len: usize,
    },
    /// The queue was closed.
    #[error("the fair wait-queue is closed")]
    Closed {
        /// The refused key.
        key: K,
        /// The refused item.
        item: T,
    },
}

impl<K, T> FairPushError<K, T> {
    /// The refused key and item.
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::new();
    /// q.close();
    /// assert_eq!(q.push('k', 1).unwrap_err().into_inner(), ('k', 1));
    /// ```
    pub fn into_inner(self) -> (K, T) {
        match self {
            FairPushError::Full { key, item, .. } | FairPushError::Closed { key, item } => {
                (key, item)
            }
        }
    }
}

impl<K, T> fmt::Debug for FairPushError<K, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FairPushError::Full { len, .. } => f
                .debug_struct("Full")
                .field("len", len)
                .finish_non_exhaustive(),
            FairPushError::Closed { .. } => f.debug_struct("Closed").finish_non_exhaustive(),
        }
    }
}
