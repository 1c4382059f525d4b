//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// A waker that counts how often it was woken.
#[derive(Default)]
pub struct CountingWaker(AtomicUsize);

impl CountingWaker {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls `fut` once with `waker`.
pub fn poll_once<F: Future + Unpin>(fut: &mut F, waker: &Arc<CountingWaker>) -> Poll<F::Output> {
    let waker = Waker::from(Arc::clone(waker));
    let mut cx = Context::from_waker(&waker);
    Pin::new(fut).poll(&mut cx)
}

/// How long [`wait_until`] lets another thread take to reach a state before the test fails.
/// Not a timing assertion: only a hung or lost wake-up ever comes near it.
pub const STUCK: std::time::Duration = std::time::Duration::from_secs(60);

/// Yields until `cond` holds. Used to wait for an observable state change of another thread
/// (e.g. "a consumer is now registered"), never for the passage of time. Panics if the state
/// is not reached within [`STUCK`], so a lost wake-up fails the test instead of hanging it.
#[track_caller]
pub fn wait_until(mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + STUCK;
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "the awaited state was not reached within {STUCK:?}: a lost wake-up or a hang"
        );
        std::thread::yield_now();
    }
}
