//! Lock helpers shared by every module of the queue, and the primitives of its wake-up
//! protocols.
//!
//! A panic while a lock is held cannot leave the journal's in-memory state half-updated in a
//! way that matters for durability (the files are the truth, and a failed write poisons the
//! queue), so poisoned locks are recovered instead of propagating the panic.
//!
//! The wake-up protocols take their primitives from [`proto`], which resolves to `loom`'s
//! instrumented types under `--cfg loom` so the model checker permutes every access: the
//! reader doorbell in `wake.rs` (an atomic waiter count decides whether a condition variable
//! is notified) and the writer mutex with its condition variable, on which concurrent puts
//! elect a leader, queue behind it and wait (`append.rs`; under `Never` and `Periodic` a
//! follower first spins on the leader's atomic `stepped_down` mark, and a put that meets no
//! other put writes under the lock), and the shared chunk cache's mutex
//! with its condition variable, on which a reader waits for another reader's read of the
//! same bytes (`chunks.rs`). The rest of the queue (state under plain locks that no thread
//! holds across a wait) always uses `std`.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks a mutex, recovering the data if another thread panicked while holding it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Takes a read lock, recovering from poisoning.
pub(crate) fn read_lock<T>(m: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}

/// Takes a write lock, recovering from poisoning.
pub(crate) fn write_lock<T>(m: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|p| p.into_inner())
}

/// The synchronisation primitives of the wake-up protocols: `std` normally, `loom` in models.
pub(crate) mod proto {
    #[cfg(not(loom))]
    pub(crate) use std::hint::spin_loop;
    #[cfg(not(loom))]
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    #[cfg(not(loom))]
    pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};
    #[cfg(not(loom))]
    pub(crate) use std::thread::yield_now;

    #[cfg(loom)]
    pub(crate) use loom::hint::spin_loop;
    #[cfg(loom)]
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    #[cfg(loom)]
    pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
    #[cfg(loom)]
    pub(crate) use loom::thread::yield_now;

    /// Locks a mutex, recovering the data if another thread panicked while holding it.
    #[inline]
    pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks a mutex if no other thread holds it (`None` if one does), recovering the data
    /// if another thread panicked while holding it.
    #[inline]
    pub(crate) fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
        // loom's mutex reports with std's error type too.
        use std::sync::TryLockError;
        match m.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}
