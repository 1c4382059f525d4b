//! [`FairWaitQueue`]: the fair-by-key queue of `fairq-core` with waiting consumers.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::hash::Hash;
use std::time::Duration;

use fairq_core::fair::FairQueue;

use crate::deadline::{ClockDeadline, Timeout};
use crate::fair_error::FairPushError;
use crate::fair_items::FairItems;
use crate::handoff::{Handoff, Store};
use crate::pop::RawPop;
use crate::room::{Attempt, PushState, Refusal};

/// A fair-by-key queue (the snapshot-of-heads schedule of
/// [`fairq_core::fair::FairQueue`], with its bound and weights) whose consumers can wait
/// for items, blocking or asynchronously, exactly like [`WaitQueue`](crate::WaitQueue)'s.
///
/// The fair schedule is a sequential structure, so it sits behind a short critical section:
/// a mutex held for one `FairQueue` operation (O(1)) and never while parking, waking, or
/// waiting for anyone. Waiting consumers use the same lock-free waiter queue and direct
/// hand-off as `WaitQueue`: the oldest live waiter receives the next item in fair order,
/// with one unpark or wake per item, and no producer ever waits for a consumer to act.
///
/// Items given back with [`put_head`](Self::put_head) (or by a dropped
/// [`pop_async`](Self::pop_async) future that had already won one) are served before the
/// fair schedule, in the order they were given back. They count towards
/// [`len`](Self::len) but are held apart from the fair queue: never refused, and not
/// counted against its bound.
///
/// ```
/// use fairq_blocking::FairWaitQueue;
///
/// let q = FairWaitQueue::new();
/// for i in 0..3 {
///     q.push("heavy", i).unwrap();
/// }
/// q.push("light", 100).unwrap();
/// // The light user's single item is served after one heavy item, not after all three.
/// assert_eq!(q.try_pop(), Some(0));
/// assert_eq!(q.try_pop(), Some(100));
/// ```
pub struct FairWaitQueue<K: Eq + Hash + Clone, T> {
    inner: Handoff<FairItems<K, T>>,
}

impl<K: Eq + Hash + Clone, T> fmt::Debug for FairWaitQueue<K, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairWaitQueue")
            .field("waiters", &self.inner.waiter_count())
            .field("closed", &self.inner.is_closed())
            .finish_non_exhaustive()
    }
}

impl<K: Eq + Hash + Clone, T> Default for FairWaitQueue<K, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Eq + Hash + Clone, T> FairWaitQueue<K, T> {
    /// A queue with the default bound of [`FairQueue::new`] (128 items).
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::<&str, u32>::new();
    /// assert_eq!(q.capacity(), Some(128));
    /// ```
    pub fn new() -> Self {
        Self::from_queue(FairQueue::new())
    }

    /// A queue holding at most `capacity` items. With a capacity of 0 every push is refused,
    /// and a waiting push ([`push_timeout`](Self::push_timeout),
    /// [`push_async`](Self::push_async)) fails at once with [`FairPushError::Full`].
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::<&str, u32>::with_capacity(4);
    /// assert_eq!(q.capacity(), Some(4));
    /// ```
    pub fn with_capacity(capacity: usize) -> Self {
        Self::from_queue(FairQueue::with_capacity(capacity))
    }

    /// A queue without a bound.
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::<&str, u32>::unbounded();
    /// assert_eq!(q.capacity(), None);
    /// ```
    pub fn unbounded() -> Self {
        Self::from_queue(FairQueue::unbounded())
    }

    /// Wraps an existing fair queue (its items, weights and bound are kept).
    ///
    /// ```
    /// use fairq_core::fair::FairQueue;
    ///
    /// let mut fair = FairQueue::new();
    /// fair.push("a", 1).unwrap();
    /// let q = fairq_blocking::FairWaitQueue::from_queue(fair);
    /// assert_eq!(q.len(), 1);
    /// ```
    pub fn from_queue(queue: FairQueue<K, T>) -> Self {
        FairWaitQueue {
            inner: Handoff::new(FairItems::new(queue)),
        }
    }

    /// Number of items held (including items given back).
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::new();
    /// q.push("a", 1).unwrap();
    /// assert_eq!(q.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        let state = self.inner.store.lock();
        state.fair.len() + state.returned.len()
    }

    /// Whether [`len`](Self::len) is 0.
    ///
    /// ```
    /// assert!(fairq_blocking::FairWaitQueue::<u8, u8>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound, if any.
    ///
    /// ```
    /// assert_eq!(fairq_blocking::FairWaitQueue::<u8, u8>::new().capacity(), Some(128));
    /// ```
    pub fn capacity(&self) -> Option<usize> {
        self.inner.store.lock().fair.capacity()
    }

    /// Number of producers waiting for room ([`push_timeout`](Self::push_timeout),
    /// [`push_async`](Self::push_async) on a full queue).
    ///
    /// ```
    /// assert_eq!(fairq_blocking::FairWaitQueue::<u8, u8>::new().producer_count(), 0);
    /// ```
    pub fn producer_count(&self) -> usize {
        self.inner.store.room.count()
    }

    /// Number of consumers currently waiting.
    ///
    /// ```
    /// assert_eq!(fairq_blocking::FairWaitQueue::<u8, u8>::new().waiter_count(), 0);
    /// ```
    pub fn waiter_count(&self) -> usize {
        self.inner.waiter_count()
    }

    /// Closes the queue: every waiting consumer resolves to `None`, later pushes are
    /// refused, and the items still queued can be drained.
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::new();
    /// q.push("a", 1).unwrap();
    /// q.close();
    /// assert!(q.push("a", 2).is_err());
    /// assert_eq!(q.try_pop(), Some(1));
    /// ```
    pub fn close(&self) {
        // A waker that panics (its executor's bug) still lets every waiter be woken; the
        // panic is raised afterwards.
        let closed = self.inner.close();
        self.inner.store.room.notify_all();
        crate::sync::raise_any(closed);
    }

    /// Whether [`close`](Self::close) was called.
    ///
    /// ```
    /// assert!(!fairq_blocking::FairWaitQueue::<u8, u8>::new().is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Resolves every consumer waiting now with `None`; the queue stays open.
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::<u8, u8>::new();
    /// q.evict_waiters();
    /// assert_eq!(q.waiter_count(), 0);
    /// ```
    pub fn evict_waiters(&self) {
        self.inner.evict_waiters();
    }

    /// Runs `f` on the fair queue, for monitoring (its snapshot, backlogs, weights). The
    /// queue is locked while `f` runs, so keep it short and don't call back into this
    /// queue from `f` (that would deadlock). Items given back and not yet served are not
    /// in the fair queue.
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::new();
    /// q.push("a", 1).unwrap();
    /// q.push("b", 2).unwrap();
    /// let backlog = q.inspect(|fair| fair.iter().count());
    /// assert_eq!(backlog, 2);
    /// ```
    pub fn inspect<R>(&self, f: impl FnOnce(&FairQueue<K, T>) -> R) -> R {
        f(&self.inner.store.lock().fair)
    }

    /// Queues `item` at the back of `key`'s FIFO, or hands it to the oldest waiting
    /// consumer (in fair order). Gives it back when full or closed.
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::new();
    /// q.push("alice", "report").unwrap();
    /// assert_eq!(q.try_pop_with_key(), Some(("alice", "report")));
    /// ```
    pub fn push(&self, key: K, item: T) -> Result<(), FairPushError<K, T>> {
        match self.attempt((key, item)) {
            Attempt::Pushed => Ok(()),
            Attempt::Full((key, item)) => Err(self.full(key, item)),
            Attempt::Closed((key, item)) => Err(FairPushError::Closed { key, item }),
        }
    }

    fn attempt(&self, (key, item): (K, T)) -> Attempt<(K, T)> {
        if self.inner.is_closed() {
            return Attempt::Closed((key, item));
        }
        match self.inner.store.push(key, item) {
            Ok(()) => {
                self.inner.item_added();
                Attempt::Pushed
            }
            Err(refused) => Attempt::Full(refused.into_inner()),
        }
    }

    fn full(&self, key: K, item: T) -> FairPushError<K, T> {
        // The bound counts the fair queue's items (given-back ones are held apart).
        let len = self.inner.store.lock().fair.len();
        FairPushError::Full { key, item, len }
    }

    fn refused(&self, refusal: Refusal<(K, T)>) -> FairPushError<K, T> {
        match refusal {
            Refusal::Full((key, item)) => self.full(key, item),
            Refusal::Closed((key, item)) => FairPushError::Closed { key, item },
        }
    }

    /// Like [`push`](Self::push), but when a bounded queue is full, waits up to `timeout`
    /// for room (the thread parks; a consumer that takes an item wakes the oldest waiting
    /// producer). Fails with [`FairPushError::Full`] if there is still no room at the
    /// deadline, or [`FairPushError::Closed`] once the queue is closed.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let q = Arc::new(fairq_blocking::FairWaitQueue::with_capacity(1));
    /// q.push("a", 1).unwrap();
    /// let producer = {
    ///     let q = Arc::clone(&q);
    ///     std::thread::spawn(move || q.push_timeout("b", 2, Duration::from_secs(10)))
    /// };
    /// assert_eq!(q.pop_timeout(Duration::from_secs(10)), Some(1)); // makes room
    /// producer.join().unwrap().unwrap();
    /// assert_eq!(q.pop_timeout(Duration::from_secs(10)), Some(2));
    /// ```
    pub fn push_timeout(
        &self,
        key: K,
        item: T,
        timeout: Duration,
    ) -> Result<(), FairPushError<K, T>> {
        self.inner
            .store
            .room
            .push_blocking(
                (key, item),
                || ClockDeadline::after(timeout),
                || self.inner.store.has_room_for_batch(),
                |entry| self.attempt(entry),
            )
            .map_err(|refusal| self.refused(refusal))
    }

    /// Pushes, waiting asynchronously for room in a full bounded queue; with
    /// `Some(timeout)` the future fails with [`FairPushError::Full`] at the deadline. No
    /// async runtime is needed. Dropping the future drops the item.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let q = fairq_blocking::FairWaitQueue::with_capacity(1);
    /// futures::executor::block_on(q.push_async("a", 1, None)).unwrap();
    /// let late = q.push_async("b", 2, Some(Duration::from_millis(1)));
    /// let err = futures::executor::block_on(late).unwrap_err();
    /// assert_eq!(err.into_inner(), ("b", 2));
    /// ```
    pub fn push_async(&self, key: K, item: T, timeout: Option<Duration>) -> FairPush<'_, K, T> {
        self.push_until(key, item, Timeout::after(timeout))
    }

    /// Like [`push_async`](Self::push_async), giving up when `signal` completes.
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::with_capacity(1);
    /// let pushed = q.push_until("a", 1, futures::future::pending::<()>());
    /// futures::executor::block_on(pushed).unwrap();
    /// assert_eq!(q.len(), 1);
    /// ```
    pub fn push_until<S>(&self, key: K, item: T, signal: S) -> FairPush<'_, K, T, S>
    where
        S: Future<Output = ()> + Unpin,
    {
        FairPush {
            queue: self,
            state: PushState::new((key, item)),
            signal,
        }
    }

    /// Pushes, waiting for room until the model timer fires (loom models only).
    #[cfg(loom)]
    pub fn push_blocking_until(
        &self,
        key: K,
        item: T,
        timer: &crate::model::ModelTimer,
    ) -> Result<(), FairPushError<K, T>> {
        self.inner
            .store
            .room
            .push_blocking(
                (key, item),
                || timer,
                || self.inner.store.has_room_for_batch(),
                |entry| self.attempt(entry),
            )
            .map_err(|refusal| self.refused(refusal))
    }

    /// Gives an item back: served before the fair schedule, after the items given back
    /// earlier. Never refused.
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::new();
    /// q.push("a", 1).unwrap();
    /// q.put_head("b", 0);
    /// assert_eq!(q.try_pop(), Some(0));
    /// ```
    pub fn put_head(&self, key: K, item: T) {
        self.inner.put_back((key, item));
    }

    /// Takes the next item without waiting.
    ///
    /// ```
    /// assert_eq!(fairq_blocking::FairWaitQueue::<u8, u8>::new().try_pop(), None);
    /// ```
    pub fn try_pop(&self) -> Option<T> {
        self.try_pop_with_key().map(|(_, item)| item)
    }

    /// Takes the next item and its key without waiting.
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::new();
    /// q.push(7u8, 'x').unwrap();
    /// assert_eq!(q.try_pop_with_key(), Some((7, 'x')));
    /// ```
    pub fn try_pop_with_key(&self) -> Option<(K, T)> {
        self.inner.store.pop()
    }

    /// Takes the next item, waiting up to `timeout` (the thread parks). `None` at the
    /// deadline or when the queue is closed or its waiters evicted with nothing to take.
    ///
    /// ```
    /// use std::time::Duration;
    /// let q = fairq_blocking::FairWaitQueue::<u8, u8>::new();
    /// assert_eq!(q.pop_timeout(Duration::from_millis(1)), None);
    /// ```
    pub fn pop_timeout(&self, timeout: Duration) -> Option<T> {
        self.pop_timeout_with_key(timeout).map(|(_, item)| item)
    }

    /// Like [`pop_timeout`](Self::pop_timeout), also returning the key.
    ///
    /// ```
    /// use std::time::Duration;
    /// let q = fairq_blocking::FairWaitQueue::new();
    /// q.push("k", 1).unwrap();
    /// assert_eq!(q.pop_timeout_with_key(Duration::from_secs(1)), Some(("k", 1)));
    /// ```
    pub fn pop_timeout_with_key(&self, timeout: Duration) -> Option<(K, T)> {
        self.inner.pop_blocking(|| ClockDeadline::after(timeout))
    }

    /// Takes the next item asynchronously; with `Some(timeout)` the future resolves to
    /// `None` at the deadline. No async runtime is needed. Dropping the future never
    /// loses an item.
    ///
    /// ```
    /// use std::time::Duration;
    /// let q = fairq_blocking::FairWaitQueue::new();
    /// q.push("k", 1).unwrap();
    /// assert_eq!(futures::executor::block_on(q.pop_async(Some(Duration::from_secs(1)))), Some(1));
    /// ```
    pub fn pop_async(&self, timeout: Option<Duration>) -> FairPop<'_, K, T> {
        self.pop_until(Timeout::after(timeout))
    }

    /// Like [`pop_async`](Self::pop_async), resolving to the key and the item.
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::new();
    /// q.push("k", 1).unwrap();
    /// assert_eq!(futures::executor::block_on(q.pop_async_with_key(None)), Some(("k", 1)));
    /// ```
    pub fn pop_async_with_key(&self, timeout: Option<Duration>) -> FairPopWithKey<'_, K, T> {
        FairPopWithKey(RawPop::new(&self.inner, Timeout::after(timeout)))
    }

    /// Takes the next item asynchronously, giving up (`None`) when `signal` completes.
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::<u8, u8>::new();
    /// assert_eq!(futures::executor::block_on(q.pop_until(futures::future::ready(()))), None);
    /// ```
    pub fn pop_until<S>(&self, signal: S) -> FairPop<'_, K, T, S>
    where
        S: Future<Output = ()> + Unpin,
    {
        FairPop(RawPop::new(&self.inner, signal))
    }

    /// Sets how many items `key` receives per round while it has a backlog (see
    /// [`FairQueue::set_weight`]).
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::new();
    /// q.set_weight(&"vip", 2);
    /// for i in 0..3 {
    ///     q.push("vip", i).unwrap();
    ///     q.push("std", 10 + i).unwrap();
    /// }
    /// let order: Vec<_> = std::iter::from_fn(|| q.try_pop()).collect();
    /// assert_eq!(&order[..3], &[0, 10, 1]);
    /// ```
    pub fn set_weight(&self, key: &K, weight: u32) {
        self.inner.store.lock().fair.set_weight(key, weight);
    }

    /// Removes `key`'s whole backlog, including its items given back, and returns it in
    /// delivery order (given-back items first). Producers waiting for room are woken; if
    /// one's waker panics, the panic is raised once they all are, and the removed items are
    /// given back to the head of the queue (as with [`put_head`](Self::put_head)) rather
    /// than dropped.
    ///
    /// ```
    /// let q = fairq_blocking::FairWaitQueue::new();
    /// q.push("spam", 1).unwrap();
    /// q.push("ok", 2).unwrap();
    /// q.push("spam", 3).unwrap();
    /// assert_eq!(q.remove_key(&"spam"), vec![1, 3]);
    /// assert_eq!(q.try_pop(), Some(2));
    /// ```
    pub fn remove_key(&self, key: &K) -> Vec<T> {
        let mut state = self.inner.store.lock();
        let mut removed = Vec::new();
        let returned = core::mem::take(&mut state.returned);
        for (k, item) in returned {
            if &k == key {
                removed.push(item);
            } else {
                state.returned.push_back((k, item));
            }
        }
        let before = removed.len();
        removed.extend(state.fair.remove_key(key));
        let freed = removed.len() - before;
        drop(state);
        if freed > 0 {
            if let Err(panic) = self.inner.store.room.room_made_catching(freed) {
                for item in removed {
                    self.inner.store.put_back((key.clone(), item));
                }
                self.inner.item_added();
                crate::sync::raise(panic);
                return Vec::new();
            }
        }
        removed
    }
}

/// The future of [`FairWaitQueue::pop_async`] and [`FairWaitQueue::pop_until`].
///
/// ```
/// let q = fairq_blocking::FairWaitQueue::new();
/// let pop = q.pop_async(None);
/// q.push("k", 'x').unwrap();
/// assert_eq!(futures::executor::block_on(pop), Some('x'));
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct FairPop<'a, K: Eq + Hash + Clone, T, S = Timeout>(RawPop<'a, FairItems<K, T>, S>);

/// The future of [`FairWaitQueue::pop_async_with_key`].
///
/// ```
/// let q = fairq_blocking::FairWaitQueue::new();
/// let pop = q.pop_async_with_key(None);
/// q.push("k", 'x').unwrap();
/// assert_eq!(futures::executor::block_on(pop), Some(("k", 'x')));
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct FairPopWithKey<'a, K: Eq + Hash + Clone, T, S = Timeout>(RawPop<'a, FairItems<K, T>, S>);

impl<K: Eq + Hash + Clone, T, S> fmt::Debug for FairPop<'_, K, T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairPop").finish_non_exhaustive()
    }
}

impl<K: Eq + Hash + Clone, T, S> fmt::Debug for FairPopWithKey<'_, K, T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairPopWithKey").finish_non_exhaustive()
    }
}

impl<K: Eq + Hash + Clone, T, S> Future for FairPop<'_, K, T, S>
where
    S: Future<Output = ()> + Unpin,
{
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        Pin::new(&mut self.get_mut().0)
            .poll(cx)
            .map(|popped| popped.map(|(_, item)| item))
    }
}

impl<K: Eq + Hash + Clone, T, S> Future for FairPopWithKey<'_, K, T, S>
where
    S: Future<Output = ()> + Unpin,
{
    type Output = Option<(K, T)>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<(K, T)>> {
        Pin::new(&mut self.get_mut().0).poll(cx)
    }
}

/// The future of [`FairWaitQueue::push_async`] and [`FairWaitQueue::push_until`]: resolves
/// to `Ok(())` once the item is queued (or handed to a consumer), or gives it back in a
/// [`FairPushError`]. Dropping it drops the item.
///
/// ```
/// let q = fairq_blocking::FairWaitQueue::new();
/// futures::executor::block_on(q.push_async("k", 7, None)).unwrap();
/// assert_eq!(q.try_pop(), Some(7));
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct FairPush<'a, K: Eq + Hash + Clone, T, S = Timeout> {
    queue: &'a FairWaitQueue<K, T>,
    state: PushState<(K, T)>,
    signal: S,
}

impl<K: Eq + Hash + Clone, T, S> fmt::Debug for FairPush<'_, K, T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairPush").finish_non_exhaustive()
    }
}

impl<K: Eq + Hash + Clone, T, S> Future for FairPush<'_, K, T, S>
where
    S: Future<Output = ()> + Unpin,
{
    type Output = Result<(), FairPushError<K, T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let FairPush {
            queue,
            state,
            signal,
        } = self.get_mut();
        let queue: &FairWaitQueue<K, T> = queue;
        match state.poll(
            &queue.inner.store.room,
            cx.waker(),
            || Pin::new(&mut *signal).poll(cx).is_ready(),
            |entry| queue.attempt(entry),
        ) {
            Some(done) => Poll::Ready(done.map_err(|refusal| queue.refused(refusal))),
            None => Poll::Pending,
        }
    }
}

// The key and item are never pinned: moving a `FairPush` is fine whatever they are.
impl<K: Eq + Hash + Clone, T, S: Unpin> Unpin for FairPush<'_, K, T, S> {}

impl<K: Eq + Hash + Clone, T, S> Drop for FairPush<'_, K, T, S> {
    fn drop(&mut self) {
        self.state.cancel(&self.queue.inner.store.room);
    }
}
