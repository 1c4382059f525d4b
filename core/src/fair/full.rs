//! The error of a push into a full queue.

use core::fmt;

/// A push was refused because the queue is full; the key and item are handed back unchanged.
///
/// ```
/// # #[cfg(feature = "alloc")] {
/// use fairq_core::fair::FairQueue;
///
/// let mut q = FairQueue::with_capacity(1);
/// q.push("a", 1).unwrap();
/// let full = q.push("b", 2).unwrap_err();
/// assert_eq!((full.key, full.item, full.len), ("b", 2, 1));
/// assert_eq!(full.to_string(), "fair queue is full (1 items queued)");
/// # }
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Full<K, T> {
    /// The key of the refused push.
    pub key: K,
    /// The refused item.
    pub item: T,
    /// How many items the queue held when the push was refused.
    pub len: usize,
}

impl<K, T> fmt::Debug for Full<K, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Full")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl<K, T> fmt::Display for Full<K, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fair queue is full ({} items queued)", self.len)
    }
}

impl<K, T> core::error::Error for Full<K, T> {}
