//! Deadlines for waiting consumers: a blocking one (thread parking) and an asynchronous
//! one ([`Timeout`], a future that needs no async runtime).

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::time::{Duration, Instant};

/// What a blocked consumer needs from its deadline.
pub(crate) trait Deadline {
    /// Whether the deadline has passed.
    fn expired(&self) -> bool;
    /// Parks the thread until unparked or (approximately) the deadline; may return early.
    fn park(&self);
}

impl<D: Deadline + ?Sized> Deadline for &D {
    fn expired(&self) -> bool {
        (**self).expired()
    }

    fn park(&self) {
        (**self).park()
    }
}

/// A deadline on the monotonic clock; `None` never expires.
pub(crate) struct ClockDeadline(#[cfg_attr(loom, allow(dead_code))] Option<Instant>);

impl ClockDeadline {
    pub(crate) fn after(timeout: Duration) -> Self {
        ClockDeadline(Instant::now().checked_add(timeout))
    }
}

#[cfg(not(loom))]
impl Deadline for ClockDeadline {
    fn expired(&self) -> bool {
        self.0.is_some_and(|at| Instant::now() >= at)
    }

    fn park(&self) {
        match self.0 {
            Some(at) => {
                crate::sync::park_timeout(at.saturating_duration_since(Instant::now()));
            }
            None => crate::sync::park(),
        }
    }
}

/// Under the model checker time does not pass: clock deadlines never expire and
/// expiry is driven by [`crate::model::ModelTimer`] instead.
#[cfg(loom)]
impl Deadline for ClockDeadline {
    fn expired(&self) -> bool {
        false
    }

    fn park(&self) {
        crate::sync::park();
    }
}

/// The deadline of [`WaitQueue::pop_async`](crate::WaitQueue::pop_async): a future that
/// completes once the timeout has elapsed, counted from its first poll, or never for
/// `None`.
///
/// It works under any executor (tokio, `futures::executor::block_on`, ...): the waiting is
/// done by one process-wide timer thread shared by all timeouts (from `futures-timer`),
/// created lazily, and only when a pop actually has to wait. A pop whose item is ready on
/// the first poll never touches the timer.
///
/// ```
/// use std::time::Duration;
/// use fairq_blocking::Timeout;
///
/// futures::executor::block_on(Timeout::after(Some(Duration::from_millis(1))));
/// ```
#[derive(Debug)]
pub struct Timeout {
    #[cfg_attr(loom, allow(dead_code))]
    timeout: Option<Duration>,
    /// Computed at the first poll (`Some(None)`: too far away to represent, never).
    #[cfg_attr(loom, allow(dead_code))]
    at: Option<Option<Instant>>,
    #[cfg(not(loom))]
    delay: Option<futures_timer::Delay>,
}

impl Timeout {
    /// A deadline `timeout` after the first poll; `None` never completes.
    pub fn after(timeout: Option<Duration>) -> Self {
        Timeout {
            timeout,
            at: None,
            #[cfg(not(loom))]
            delay: None,
        }
    }
}

#[cfg(not(loom))]
impl Future for Timeout {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let Some(timeout) = this.timeout else {
            return Poll::Pending;
        };
        let Some(at) = *this
            .at
            .get_or_insert_with(|| Instant::now().checked_add(timeout))
        else {
            return Poll::Pending; // too far in the future to represent: never
        };
        loop {
            let now = Instant::now();
            if now >= at {
                this.delay = None;
                return Poll::Ready(());
            }
            let delay = this
                .delay
                .get_or_insert_with(|| futures_timer::Delay::new(at - now));
            match Pin::new(delay).poll(cx) {
                Poll::Pending => return Poll::Pending,
                // The timer thread fired; re-check the clock (it never fires early, but a
                // fresh delay is armed if it somehow did).
                Poll::Ready(()) => this.delay = None,
            }
        }
    }
}

/// Under the model checker time does not pass: a timeout never completes. Models use
/// [`crate::model::ModelTimer`] as the signal instead.
#[cfg(loom)]
impl Future for Timeout {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}
