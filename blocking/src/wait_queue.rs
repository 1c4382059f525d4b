//! [`WaitQueue`]: a lock-free FIFO whose consumers can wait for items.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::time::Duration;

use crate::deadline::{ClockDeadline, Timeout};
use crate::handoff::Handoff;
use crate::items::{FullPolicy, Items};
use crate::op::Op;
use crate::pop::RawPop;
use crate::push_error::PushError;
use crate::room::{Attempt, PushState, Refusal};
use crate::turns::Turns;

/// A multi-producer multi-consumer FIFO queue whose consumers can wait for items, blocking
/// ([`pop_timeout`](Self::pop_timeout)) or asynchronously ([`pop_async`](Self::pop_async)).
///
/// Items sit in a lock-free queue and waiting consumers in a second one. A push that finds
/// consumers waiting hands its item straight to the oldest of them (one unpark or one
/// `Waker::wake` per item); no producer ever blocks or spins waiting for a consumer.
///
/// Ordering:
/// * items are served FIFO, except that items given back with [`put_head`](Self::put_head)
///   (or by a cancelled [`pop_async`](Self::pop_async) future that had already won one)
///   are served before all others, in the order they were given back;
/// * waiting consumers are served FIFO. A consumer that arrives while others wait queues
///   behind them; only [`try_pop`](Self::try_pop) takes an item without queueing.
///
/// Share it between threads by reference or `Arc`.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use fairq_blocking::WaitQueue;
///
/// let q = Arc::new(WaitQueue::unbounded());
/// let consumer = {
///     let q = Arc::clone(&q);
///     std::thread::spawn(move || q.pop_timeout(Duration::from_secs(10)))
/// };
/// q.push(42).unwrap();
/// assert_eq!(consumer.join().unwrap(), Some(42));
/// ```
pub struct WaitQueue<T> {
    inner: Handoff<Items<T>>,
    turns: Turns,
}

impl<T> Default for WaitQueue<T> {
    fn default() -> Self {
        Self::unbounded()
    }
}

impl<T> fmt::Debug for WaitQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitQueue")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("waiters", &self.waiter_count())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl<T> WaitQueue<T> {
    /// A queue without a bound.
    ///
    /// ```
    /// let q = fairq_blocking::WaitQueue::unbounded();
    /// q.push(1).unwrap();
    /// assert_eq!(q.len(), 1);
    /// ```
    pub fn unbounded() -> Self {
        WaitQueue {
            inner: Handoff::new(Items::new(None)),
            turns: Turns::new(),
        }
    }

    /// A queue holding at most `capacity` pushed items; `policy` says what a push does
    /// when it is full. The bound is exact under any concurrency: the items live in a
    /// fixed-capacity lock-free ring that refuses (or, for `DropOldest`, atomically
    /// replaces its oldest item) exactly when full. Items given back with
    /// [`put_head`](Self::put_head) are held apart, never refused, and not counted
    /// against the bound. With a capacity of 0 nothing is ever held: `Refuse` refuses
    /// every push (a waiting push, [`push_timeout`](Self::push_timeout) or
    /// [`push_async`](Self::push_async), fails at once with [`PushError::Full`]: room never
    /// comes) and `DropOldest` drops every item.
    ///
    /// ```
    /// use fairq_blocking::{FullPolicy, WaitQueue};
    ///
    /// let q = WaitQueue::bounded(2, FullPolicy::Refuse);
    /// q.push('a').unwrap();
    /// q.push('b').unwrap();
    /// assert_eq!(q.push('c'), Err('c'));
    /// ```
    pub fn bounded(capacity: usize, policy: FullPolicy) -> Self {
        WaitQueue {
            inner: Handoff::new(Items::new(Some((capacity, policy)))),
            turns: Turns::new(),
        }
    }

    /// Whether threads that both push to and pop from this queue with the blocking calls
    /// ([`push_timeout`](Self::push_timeout), [`pop_timeout`](Self::pop_timeout)) take turns
    /// when their calls slow each other down (on by default). A thread whose recent calls
    /// on this queue mixed pushes and pops, were slow because another thread's calls kept
    /// taking the queue's cache lines, and were most of its time, sleeps about 0.1 ms at its
    /// next blocking call (only when that call may wait at least 1 ms), while the other
    /// thread runs alone at the single-thread rate; at most one thread of a queue sleeps
    /// at a time, and a thread alone on a queue never does. Turn it off where that latency
    /// matters more than throughput; the crate's README (*Taking turns*) has the rule and
    /// the measurements.
    ///
    /// ```
    /// use fairq_blocking::{FullPolicy, WaitQueue};
    ///
    /// let q = WaitQueue::<u64>::bounded(64, FullPolicy::Refuse).taking_turns(false);
    /// assert!(!q.takes_turns());
    /// assert!(WaitQueue::<u8>::unbounded().takes_turns());
    /// ```
    #[must_use]
    pub fn taking_turns(mut self, on: bool) -> Self {
        self.turns.set_enabled(on);
        self
    }

    /// Whether this queue's threads take turns (see [`taking_turns`](Self::taking_turns)).
    ///
    /// ```
    /// assert!(fairq_blocking::WaitQueue::<u8>::unbounded().takes_turns());
    /// ```
    pub fn takes_turns(&self) -> bool {
        self.turns.enabled()
    }

    /// Adds an item at the tail, or hands it to the oldest waiting consumer.
    ///
    /// Gives the item back if the queue is closed, or full under [`FullPolicy::Refuse`].
    ///
    /// ```
    /// let q = fairq_blocking::WaitQueue::unbounded();
    /// q.push("job").unwrap();
    /// q.close();
    /// assert_eq!(q.push("late"), Err("late"));
    /// ```
    pub fn push(&self, item: T) -> Result<(), T> {
        match self.attempt(item) {
            Attempt::Pushed => Ok(()),
            Attempt::Full(item) | Attempt::Closed(item) => Err(item),
        }
    }

    // Inlined into every push: out of line, its call and saved registers cost about a fifth
    // of a push's instructions.
    #[inline]
    fn attempt(&self, item: T) -> Attempt<T> {
        if self.inner.is_closed() {
            return Attempt::Closed(item);
        }
        if let Err(item) = self.inner.store.push(item) {
            return Attempt::Full(item);
        }
        // `Items::push` took effect through a `SeqCst` write (see `handoff`'s module docs).
        self.inner.item_added_seqcst();
        Attempt::Pushed
    }

    /// Like [`push`](Self::push), but when a bounded `Refuse` queue is full, waits up to
    /// `timeout` for room (the thread parks; a consumer that takes an item wakes the oldest
    /// waiting producer). Fails with [`PushError::Full`] if there is still no room at the
    /// deadline, or [`PushError::Closed`] once the queue is closed (waiting producers are
    /// woken by [`close`](Self::close)). On other queues it is `push`. A thread that also
    /// pops this queue may first sleep about 0.1 ms to take turns with another such thread
    /// (see [`taking_turns`](Self::taking_turns)), within its `timeout`; a `timeout` under
    /// 1 ms rules that out.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use fairq_blocking::{FullPolicy, WaitQueue};
    ///
    /// let q = Arc::new(WaitQueue::bounded(1, FullPolicy::Refuse));
    /// q.push(1).unwrap();
    /// let producer = {
    ///     let q = Arc::clone(&q);
    ///     std::thread::spawn(move || q.push_timeout(2, Duration::from_secs(10)))
    /// };
    /// assert_eq!(q.pop_timeout(Duration::from_secs(10)), Some(1)); // makes room
    /// producer.join().unwrap().unwrap();
    /// assert_eq!(q.pop_timeout(Duration::from_secs(10)), Some(2));
    /// ```
    pub fn push_timeout(&self, item: T, timeout: Duration) -> Result<(), PushError<T>> {
        let mut timeout = timeout;
        let timing = self.turns.enter(Op::Push, &mut timeout);
        let outcome = self
            .inner
            .store
            .room
            .push_blocking(
                item,
                || ClockDeadline::after(timeout),
                || self.inner.store.has_room_for_batch(),
                |item| self.attempt(item),
            )
            .map_err(push_error);
        self.turns.leave(timing);
        outcome
    }

    /// Pushes, waiting asynchronously for room in a full bounded `Refuse` queue; with
    /// `Some(timeout)` the future fails with [`PushError::Full`] at the deadline. No async
    /// runtime is needed (see [`Timeout`]). Dropping the future drops the item.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_blocking::{FullPolicy, PushError, WaitQueue};
    ///
    /// let q = WaitQueue::bounded(1, FullPolicy::Refuse);
    /// futures::executor::block_on(q.push_async('a', None)).unwrap();
    /// let late = q.push_async('b', Some(Duration::from_millis(1)));
    /// assert_eq!(futures::executor::block_on(late), Err(PushError::Full('b')));
    /// ```
    pub fn push_async(&self, item: T, timeout: Option<Duration>) -> Push<'_, T> {
        self.push_until(item, Timeout::after(timeout))
    }

    /// Like [`push_async`](Self::push_async), giving up (with [`PushError::Full`]) when
    /// `signal` completes.
    ///
    /// ```
    /// use fairq_blocking::{FullPolicy, WaitQueue};
    ///
    /// let q = WaitQueue::bounded(4, FullPolicy::Refuse);
    /// let pushed = q.push_until(1, futures::future::pending::<()>());
    /// futures::executor::block_on(pushed).unwrap();
    /// assert_eq!(q.len(), 1);
    /// ```
    pub fn push_until<S>(&self, item: T, signal: S) -> Push<'_, T, S>
    where
        S: Future<Output = ()> + Unpin,
    {
        Push {
            queue: self,
            state: PushState::new(item),
            signal,
        }
    }

    /// Pushes, waiting for room until the model timer fires (loom models only).
    #[cfg(loom)]
    pub fn push_blocking_until(
        &self,
        item: T,
        timer: &crate::model::ModelTimer,
    ) -> Result<(), PushError<T>> {
        self.inner
            .store
            .room
            .push_blocking(
                item,
                || timer,
                || self.inner.store.has_room_for_batch(),
                |item| self.attempt(item),
            )
            .map_err(push_error)
    }

    /// Gives an item back: it is served before every normal item, after the items given
    /// back earlier. Never refused, not even when closed or full, so nothing is lost;
    /// given-back items don't count against the bound.
    ///
    /// ```
    /// let q = fairq_blocking::WaitQueue::unbounded();
    /// q.push(3).unwrap();
    /// q.put_head(1);
    /// q.put_head(2);
    /// assert_eq!(q.try_pop(), Some(1));
    /// assert_eq!(q.try_pop(), Some(2));
    /// assert_eq!(q.try_pop(), Some(3));
    /// ```
    pub fn put_head(&self, item: T) {
        self.inner.put_back(item);
    }

    /// Takes the next item without waiting.
    ///
    /// ```
    /// let q = fairq_blocking::WaitQueue::<u8>::unbounded();
    /// assert_eq!(q.try_pop(), None);
    /// ```
    pub fn try_pop(&self) -> Option<T> {
        use crate::handoff::Store;
        self.inner.store.pop()
    }

    /// Takes the next item, waiting up to `timeout` for one (the thread parks). Returns
    /// `None` at the deadline, or as soon as the queue is closed or its waiters evicted
    /// with nothing to take. A consumer that times out never consumes an item. A thread
    /// that also pushes to this queue may first sleep about 0.1 ms to take turns with
    /// another such thread (see [`taking_turns`](Self::taking_turns)), within its
    /// `timeout`; a `timeout` under 1 ms rules that out.
    ///
    /// ```
    /// use std::time::Duration;
    /// let q = fairq_blocking::WaitQueue::<u8>::unbounded();
    /// assert_eq!(q.pop_timeout(Duration::from_millis(1)), None);
    /// q.push(7).unwrap();
    /// assert_eq!(q.pop_timeout(Duration::from_millis(1)), Some(7));
    /// ```
    pub fn pop_timeout(&self, timeout: Duration) -> Option<T> {
        let mut timeout = timeout;
        let timing = self.turns.enter(Op::Pop, &mut timeout);
        let outcome = self.inner.pop_blocking(|| ClockDeadline::after(timeout));
        self.turns.leave(timing);
        outcome
    }

    /// Takes the next item, waiting asynchronously; with `Some(timeout)` the future
    /// resolves to `None` at the deadline. Works under any executor: no runtime timer
    /// is needed (see [`Timeout`]).
    ///
    /// Dropping the future is always safe: if an item had already been handed to it, the
    /// item goes back to the head of the queue.
    ///
    /// ```
    /// use std::time::Duration;
    /// let q = fairq_blocking::WaitQueue::unbounded();
    /// q.push(5).unwrap();
    /// let got = futures::executor::block_on(q.pop_async(Some(Duration::from_secs(1))));
    /// assert_eq!(got, Some(5));
    /// let none = futures::executor::block_on(q.pop_async(Some(Duration::from_millis(1))));
    /// assert_eq!(none, None);
    /// ```
    pub fn pop_async(&self, timeout: Option<Duration>) -> Pop<'_, T> {
        self.pop_until(Timeout::after(timeout))
    }

    /// Takes the next item, waiting asynchronously until `signal` completes (then `None`).
    /// Useful to tie a wait to a shutdown signal or a runtime's own timer.
    ///
    /// ```
    /// let q = fairq_blocking::WaitQueue::<u8>::unbounded();
    /// let got = futures::executor::block_on(q.pop_until(futures::future::ready(())));
    /// assert_eq!(got, None);
    /// ```
    pub fn pop_until<S>(&self, signal: S) -> Pop<'_, T, S>
    where
        S: Future<Output = ()> + Unpin,
    {
        Pop(RawPop::new(&self.inner, signal))
    }

    /// Blocks until an item arrives or the model timer fires (loom models only).
    #[cfg(loom)]
    pub fn pop_blocking_until(&self, timer: &crate::model::ModelTimer) -> Option<T> {
        self.inner.pop_blocking(|| timer)
    }

    /// Number of items held (given-back items included).
    ///
    /// ```
    /// let q = fairq_blocking::WaitQueue::unbounded();
    /// q.push(()).unwrap();
    /// assert_eq!(q.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.inner.store.len()
    }

    /// Whether [`len`](Self::len) is 0.
    ///
    /// ```
    /// assert!(fairq_blocking::WaitQueue::<u8>::unbounded().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound, if any.
    ///
    /// ```
    /// use fairq_blocking::{FullPolicy, WaitQueue};
    /// assert_eq!(WaitQueue::<u8>::bounded(4, FullPolicy::Refuse).capacity(), Some(4));
    /// assert_eq!(WaitQueue::<u8>::unbounded().capacity(), None);
    /// ```
    pub fn capacity(&self) -> Option<usize> {
        self.inner.store.capacity()
    }

    /// The policy of a bounded queue.
    ///
    /// ```
    /// use fairq_blocking::{FullPolicy, WaitQueue};
    /// let q = WaitQueue::<u8>::bounded(4, FullPolicy::DropOldest);
    /// assert_eq!(q.full_policy(), Some(FullPolicy::DropOldest));
    /// ```
    pub fn full_policy(&self) -> Option<FullPolicy> {
        self.inner.store.policy()
    }

    /// How many items [`FullPolicy::DropOldest`] has dropped so far.
    ///
    /// ```
    /// use fairq_blocking::{FullPolicy, WaitQueue};
    /// let q = WaitQueue::bounded(1, FullPolicy::DropOldest);
    /// q.push(1).unwrap();
    /// q.push(2).unwrap();
    /// assert_eq!(q.dropped(), 1);
    /// ```
    pub fn dropped(&self) -> u64 {
        self.inner.store.dropped()
    }

    /// Number of producers waiting for room ([`push_timeout`](Self::push_timeout),
    /// [`push_async`](Self::push_async) on a full queue).
    ///
    /// ```
    /// assert_eq!(fairq_blocking::WaitQueue::<u8>::unbounded().producer_count(), 0);
    /// ```
    pub fn producer_count(&self) -> usize {
        self.inner.store.room.count()
    }

    /// Number of consumers currently waiting.
    ///
    /// ```
    /// assert_eq!(fairq_blocking::WaitQueue::<u8>::unbounded().waiter_count(), 0);
    /// ```
    pub fn waiter_count(&self) -> usize {
        self.inner.waiter_count()
    }

    /// Closes the queue: every waiting consumer resolves to `None`, later pushes are
    /// refused, and items still queued can be drained (`try_pop`, and pops that find an
    /// item return it at once).
    ///
    /// ```
    /// let q = fairq_blocking::WaitQueue::unbounded();
    /// q.push(1).unwrap();
    /// q.close();
    /// assert!(q.push(2).is_err());
    /// assert_eq!(q.try_pop(), Some(1));
    /// assert!(q.is_closed());
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
    /// assert!(!fairq_blocking::WaitQueue::<u8>::unbounded().is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Resolves every consumer waiting now with `None`; the queue stays open.
    ///
    /// The eviction is carried out by the serialized hand-off pass: by the caller itself,
    /// or, if another thread is inside that pass at this moment, by that thread before it
    /// leaves it. The caller never waits.
    ///
    /// ```
    /// let q = fairq_blocking::WaitQueue::<u8>::unbounded();
    /// q.evict_waiters();
    /// assert_eq!(q.waiter_count(), 0);
    /// ```
    pub fn evict_waiters(&self) {
        self.inner.evict_waiters();
    }
}

/// The future of [`WaitQueue::pop_async`] and [`WaitQueue::pop_until`]: resolves to
/// `Some(item)`, or `None` when its signal (by default a [`Timeout`]) completes first or
/// the queue is closed. Dropping it never loses an item.
///
/// ```
/// let q = fairq_blocking::WaitQueue::unbounded();
/// let pop = q.pop_async(None);
/// q.push('x').unwrap();
/// assert_eq!(futures::executor::block_on(pop), Some('x'));
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct Pop<'a, T, S = Timeout>(RawPop<'a, Items<T>, S>);

impl<T, S> fmt::Debug for Pop<'_, T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pop").finish_non_exhaustive()
    }
}

impl<T, S> Future for Pop<'_, T, S>
where
    S: Future<Output = ()> + Unpin,
{
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        Pin::new(&mut self.get_mut().0).poll(cx)
    }
}

fn push_error<T>(refusal: Refusal<T>) -> PushError<T> {
    match refusal {
        Refusal::Full(item) => PushError::Full(item),
        Refusal::Closed(item) => PushError::Closed(item),
    }
}

/// The future of [`WaitQueue::push_async`] and [`WaitQueue::push_until`]: resolves to
/// `Ok(())` once the item is queued (or handed to a consumer), or gives it back in a
/// [`PushError`]. Dropping it drops the item.
///
/// ```
/// let q = fairq_blocking::WaitQueue::unbounded();
/// futures::executor::block_on(q.push_async(7, None)).unwrap();
/// assert_eq!(q.try_pop(), Some(7));
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct Push<'a, T, S = Timeout> {
    queue: &'a WaitQueue<T>,
    state: PushState<T>,
    signal: S,
}

impl<T, S> fmt::Debug for Push<'_, T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Push").finish_non_exhaustive()
    }
}

impl<T, S> Future for Push<'_, T, S>
where
    S: Future<Output = ()> + Unpin,
{
    type Output = Result<(), PushError<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Push {
            queue,
            state,
            signal,
        } = self.get_mut();
        let queue: &WaitQueue<T> = queue;
        match state.poll(
            &queue.inner.store.room,
            cx.waker(),
            || Pin::new(&mut *signal).poll(cx).is_ready(),
            |item| queue.attempt(item),
        ) {
            Some(done) => Poll::Ready(done.map_err(push_error)),
            None => Poll::Pending,
        }
    }
}

// The item is never pinned: moving a `Push` is fine whatever `T` is.
impl<T, S: Unpin> Unpin for Push<'_, T, S> {}

impl<T, S> Drop for Push<'_, T, S> {
    fn drop(&mut self) {
        self.state.cancel(&self.queue.inner.store.room);
    }
}
