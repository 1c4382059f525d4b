//! Hooks for the loom models (only compiled with `--cfg loom`).
//!
//! Time does not exist inside a loom model, so a timeout is modelled as an event that a
//! separate "timer" thread fires at an arbitrary point of the interleaving. [`ModelTimer`]
//! is that event: a consumer waits on it either as a blocking deadline
//! ([`WaitQueue::pop_blocking_until`](crate::WaitQueue::pop_blocking_until)) or as the
//! signal of an asynchronous pop ([`WaitQueue::pop_until`](crate::WaitQueue::pop_until)
//! with [`ModelTimer::signal`]).

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use crate::deadline::Deadline;
use crate::sync::{lock, Arc, AtomicBool, Mutex, Ordering, Thread};

/// A timeout that fires when a model thread calls [`ModelTimer::fire`].
pub struct ModelTimer {
    fired: AtomicBool,
    thread: Mutex<Option<Thread>>,
    waker: loom::future::AtomicWaker,
}

impl core::fmt::Debug for ModelTimer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ModelTimer").finish_non_exhaustive()
    }
}

impl Default for ModelTimer {
    fn default() -> Self {
        Self::new()
    }
}

impl ModelTimer {
    /// A timer that has not fired.
    pub fn new() -> Self {
        ModelTimer {
            fired: AtomicBool::new(false),
            thread: Mutex::new(None),
            waker: loom::future::AtomicWaker::new(),
        }
    }

    /// The deadline passes: wakes the blocked thread or the pending task, if any.
    pub fn fire(&self) {
        self.fired.store(true, Ordering::Release);
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread {
            thread.unpark();
        }
        self.waker.wake();
    }

    /// A future completing once `timer` fired (for `pop_until`).
    pub fn signal(timer: &Arc<Self>) -> ModelSignal {
        ModelSignal(Arc::clone(timer))
    }
}

impl Deadline for ModelTimer {
    fn expired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }

    fn park(&self) {
        *lock(&self.thread) = Some(crate::sync::current());
        if !self.expired() {
            crate::sync::park();
        }
    }
}

/// The future returned by [`ModelTimer::signal`].
#[derive(Debug)]
pub struct ModelSignal(Arc<ModelTimer>);

impl Future for ModelSignal {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.expired() {
            return Poll::Ready(());
        }
        self.0.waker.register_by_ref(cx.waker());
        if self.0.expired() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// A queue's turn-taking flag (the crate's `turns` module), for the model of its step back:
/// at most one thread of a queue steps back at a time, and a step back always ends by
/// letting the next one in.
#[derive(Debug)]
pub struct ModelTurns(crate::turns::Turns);

impl Default for ModelTurns {
    fn default() -> Self {
        Self::new()
    }
}

impl ModelTurns {
    /// A queue's flag nobody holds.
    pub fn new() -> Self {
        ModelTurns(crate::turns::Turns::new())
    }

    /// Runs `pause` as a step back, unless another thread is stepping back right now;
    /// whether it ran.
    pub fn step_back(&self, pause: impl FnOnce()) -> bool {
        self.0.step_back(pause)
    }
}
