//! Helpers for the models.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc as StdArc;
use std::task::{Context, Poll, Wake, Waker};

struct Noop;

impl Wake for Noop {
    fn wake(self: StdArc<Self>) {}
}

/// Polls `fut` once with a waker that does nothing (the model re-polls explicitly).
pub fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    let waker = Waker::from(StdArc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    Pin::new(fut).poll(&mut cx)
}

/// Runs a model with the environment's loom settings (`LOOM_MAX_PREEMPTIONS`, ...).
pub fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    loom::model::Builder::new().check(f);
}
