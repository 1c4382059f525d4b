//! Iterators over queued items.

use super::engine::RoundsIter;

/// Iterator over `(key, item)` pairs in delivery order.
///
/// Returned by [`FairQueue::iter`](crate::fair::FairQueue::iter),
/// [`FairQueue::snapshot`](crate::fair::FairQueue::snapshot) and their fixed-capacity twins.
///
/// ```
/// # #[cfg(feature = "alloc")] {
/// use fairq_core::fair::FairQueue;
///
/// let mut q = FairQueue::new();
/// q.push('a', 1).unwrap();
/// q.push('a', 2).unwrap();
/// q.push('b', 3).unwrap();
/// let order: Vec<_> = q.iter().map(|(_, item)| *item).collect();
/// assert_eq!(order, [1, 3, 2]);
/// # }
/// ```
pub struct Iter<'a, K, T>(pub(crate) RoundsIter<'a, K, T>);

impl<'a, K, T> Iterator for Iter<'a, K, T> {
    type Item = (&'a K, &'a T);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<K, T> ExactSizeIterator for Iter<'_, K, T> {}
