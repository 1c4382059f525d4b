//! The asynchronous pop shared by both queues' public futures.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use crate::handoff::{Handoff, PopState, Store};

/// A pending asynchronous pop on `queue`, giving up when `signal` completes.
pub(crate) struct RawPop<'a, St: Store, S> {
    queue: &'a Handoff<St>,
    state: PopState<St::Item>,
    signal: S,
}

impl<'a, St: Store, S> RawPop<'a, St, S> {
    pub(crate) fn new(queue: &'a Handoff<St>, signal: S) -> Self {
        RawPop {
            queue,
            state: PopState::new(),
            signal,
        }
    }
}

impl<St: Store, S> Future for RawPop<'_, St, S>
where
    S: Future<Output = ()> + Unpin,
{
    type Output = Option<St::Item>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.queue.poll_pop(&mut this.state, &mut this.signal, cx)
    }
}

impl<St: Store, S> Drop for RawPop<'_, St, S> {
    fn drop(&mut self) {
        self.queue.drop_pop(&mut self.state);
    }
}
