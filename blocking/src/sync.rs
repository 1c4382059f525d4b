//! Every synchronisation primitive the crate uses, in one place.
//!
//! Normal builds use `std` atomics, `std::sync::{Arc, Mutex}`, `std` thread parking and
//! `crossbeam_queue::SegQueue`. Under `--cfg loom` the same names resolve to `loom`'s
//! instrumented types so that the model checker sees (and permutes) every access.
//!
//! `crossbeam-queue` is not instrumented for `loom`, so under `cfg(loom)` `SegQueue` and
//! `ArrayQueue` are stand-ins with the same small interface: a `loom` mutex around a
//! `VecDeque` (plus, for `SegQueue`, an atomic length that `len` reads without the lock). The stand-in is
//! linearizable like the real queue, so the models check the protocol built *on top of*
//! the queues (hand-off, claiming, cancellation, wake-ups, the bound, waiting pushes, waiter
//! reuse); they do not check crossbeam's own memory orderings, which crossbeam verifies with
//! its own loom suite. Because a stand-in's mutex also orders the threads that use it, the
//! `SeqCst` ordering between a queue operation and a counter (a producer checking for
//! waiters, a consumer checking for blocked producers: a fence, or for `WaitQueue` the
//! crossbeam queue's own `SeqCst` compare-and-swap) is not exercised by the models either:
//! it is argued in the modules that rely on it (`handoff`, `room`).
//!
//! `lock_taking_turns` (the `FairWaitQueue` store's lock) steps back for a few microseconds
//! when the lock is taken; under the model it is a plain `lock`, because the stepping back
//! is about time and changes nothing a model could observe: the thread gets the same lock
//! later. The count that the store publishes after each critical section, read without the
//! lock, is a plain atomic and is modelled (`fair_items`).

#[cfg(not(loom))]
mod imp {
    pub(crate) use crossbeam_queue::{ArrayQueue, SegQueue};
    pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use std::sync::{Arc, Mutex, MutexGuard};
    pub(crate) use std::thread::{current, park, Thread};

    /// Parks the current thread for at most `dur` (spurious returns are allowed).
    pub(crate) fn park_timeout(dur: std::time::Duration) {
        std::thread::park_timeout(dur);
    }

    /// Locks a mutex that the protocol guarantees nobody else holds at this moment.
    ///
    /// A poisoned lock is still usable: the data behind these locks is a plain slot that a
    /// panicking thread cannot leave half-written.
    pub(crate) fn lock_uncontended<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Locks a mutex that may be contended for a short critical section.
    pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Locks a mutex that two threads on two cores may each take many times in a row,
    /// letting the holder keep it for a while when it is taken.
    ///
    /// `Mutex::lock` spins watching the lock word and takes it the moment it is released,
    /// so two threads that each lock it over and over alternate on every critical section,
    /// and each section then starts with cache misses on the lock and on the data it
    /// guards, both last written by the other core. Here a thread that finds the lock
    /// taken steps back for `back_off_ns` ([`crate::spin::back_off`]) without reading it, and
    /// the holder runs several sections with its cache warm before the other gets in.
    /// After a few such rounds it waits in `Mutex::lock` after all, so nobody is shut out
    /// for long.
    ///
    /// The first try is inlined; the stepping back is not.
    #[inline]
    pub(crate) fn lock_taking_turns<T>(m: &Mutex<T>, back_off_ns: u64) -> MutexGuard<'_, T> {
        match m.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => lock_after_backing_off(m, back_off_ns),
        }
    }

    #[inline(never)]
    fn lock_after_backing_off<T>(m: &Mutex<T>, back_off_ns: u64) -> MutexGuard<'_, T> {
        for _ in 0..crate::spin::BACK_OFFS {
            if !crate::spin::back_off(back_off_ns) {
                break;
            }
            match m.try_lock() {
                Ok(guard) => return guard,
                Err(std::sync::TryLockError::Poisoned(p)) => return p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
        }
        lock(m)
    }
}

#[cfg(loom)]
mod imp {
    pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};
    pub(crate) use loom::thread::{current, park, Thread};

    /// Under the model, a contended "uncontended" lock is a protocol bug: fail loudly so
    /// that the model checker reports the interleaving.
    pub(crate) fn lock_uncontended<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        match m.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                panic!("protocol violation: a lock that must be uncontended was held")
            }
        }
    }

    /// Locks a mutex that may be contended for a short critical section.
    pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A plain lock under the model: stepping back is about time, which a model has not.
    pub(crate) fn lock_taking_turns<T>(m: &Mutex<T>, _back_off_ns: u64) -> MutexGuard<'_, T> {
        lock(m)
    }

    /// Model stand-in for `crossbeam_queue::SegQueue` (see the module docs).
    pub(crate) struct SegQueue<T> {
        items: Mutex<std::collections::VecDeque<T>>,
        len: AtomicUsize,
    }

    impl<T> SegQueue<T> {
        pub(crate) fn new() -> Self {
            SegQueue {
                items: Mutex::new(std::collections::VecDeque::new()),
                len: AtomicUsize::new(0),
            }
        }

        pub(crate) fn push(&self, value: T) {
            let mut items = lock(&self.items);
            items.push_back(value);
            self.len.fetch_add(1, Ordering::Release);
        }

        pub(crate) fn pop(&self) -> Option<T> {
            let mut items = lock(&self.items);
            let value = items.pop_front();
            if value.is_some() {
                self.len.fetch_sub(1, Ordering::Release);
            }
            value
        }

        pub(crate) fn len(&self) -> usize {
            self.len.load(Ordering::Acquire)
        }
    }

    /// Model stand-in for `crossbeam_queue::ArrayQueue` (see the module docs).
    pub(crate) struct ArrayQueue<T> {
        items: Mutex<std::collections::VecDeque<T>>,
        capacity: usize,
    }

    impl<T> ArrayQueue<T> {
        pub(crate) fn new(capacity: usize) -> Self {
            ArrayQueue {
                items: Mutex::new(std::collections::VecDeque::new()),
                capacity,
            }
        }

        pub(crate) fn push(&self, value: T) -> Result<(), T> {
            let mut items = lock(&self.items);
            if items.len() >= self.capacity {
                return Err(value);
            }
            items.push_back(value);
            Ok(())
        }

        pub(crate) fn force_push(&self, value: T) -> Option<T> {
            let mut items = lock(&self.items);
            let oldest = if items.len() >= self.capacity {
                items.pop_front()
            } else {
                None
            };
            items.push_back(value);
            oldest
        }

        pub(crate) fn pop(&self) -> Option<T> {
            lock(&self.items).pop_front()
        }

        pub(crate) fn len(&self) -> usize {
            lock(&self.items).len()
        }
    }
}

pub(crate) use imp::*;

/// A panic caught while running user code (a `Waker`), to be raised again once the queue is
/// consistent.
pub(crate) type Panic = Box<dyn std::any::Any + Send>;

/// Runs `f`, which may call user code that panics (a `Waker`), catching the panic so that
/// the caller can first put the queue back in order and then [`raise`] it. The models
/// catch nothing: their failures are panics that must reach loom.
#[inline]
pub(crate) fn catch<R>(f: impl FnOnce() -> R) -> Result<R, Panic> {
    #[cfg(not(loom))]
    return std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    #[cfg(loom)]
    return Ok(f());
}

/// Raises a panic caught by [`catch`] again, unless this thread is already unwinding (a
/// drop during a panic: a second panic would abort the process).
#[cold]
pub(crate) fn raise(panic: Panic) {
    if !std::thread::panicking() {
        std::panic::resume_unwind(panic);
    }
}

/// [`raise`]s the panic of `result`, if any.
#[inline]
pub(crate) fn raise_any(result: Result<(), Panic>) {
    if let Err(panic) = result {
        raise(panic);
    }
}
