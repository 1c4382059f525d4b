//! The doorbell that wakes readers waiting in `get_timeout` when an item is published.
//!
//! Puts are hot and waiters are rare, so a put must not take a lock just in case someone
//! waits. The protocol:
//!
//! - a waiter first registers ([`Doorbell::enter`], an atomic count), then reads the bell's
//!   generation, then looks for an item, and only then sleeps until the generation moves;
//! - a producer first publishes its item (under the segment index's mutex), then reads the
//!   count ([`Doorbell::ring`]) and, only if someone is registered, bumps the generation
//!   under the bell's mutex and notifies the condition variable.
//!
//! If a waiter's look misses an item, the producer published it after the look (both hold
//! the index mutex), so after the waiter registered: the producer's read of the count sees
//! the registration and rings. The generation read before the look makes a ring that lands
//! between the look and the sleep end the sleep at once. The loom models in
//! `fairq-loom-tests` (`journal_wake.rs`) check this under every interleaving; they do not
//! model timeouts (loom's condition variable never times out).

use crate::sync::proto::{lock, AtomicUsize, Condvar, Mutex, Ordering};

/// Wakes waiting readers when items are published or the queue closes.
pub struct Doorbell {
    /// Threads between `enter` and the end of their wait.
    waiters: AtomicUsize,
    /// Bumped by every ring that found a waiter.
    generation: Mutex<u64>,
    cv: Condvar,
}

/// Keeps a thread counted as a waiter while it lives.
pub struct Registration<'a>(&'a Doorbell);

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Doorbell {
    /// A bell nobody waits on.
    pub fn new() -> Self {
        Doorbell {
            waiters: AtomicUsize::new(0),
            generation: Mutex::new(0),
            cv: Condvar::new(),
        }
    }

    /// Registers the calling thread as a waiter; do this before looking for an item.
    pub fn enter(&self) -> Registration<'_> {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        Registration(self)
    }

    /// The current generation; read it after `enter` and before looking for an item.
    pub fn generation(&self) -> u64 {
        *lock(&self.generation)
    }

    /// Sleeps until the generation differs from `seen`, `stop` returns true, or `timeout`
    /// passes (spurious returns are allowed: the caller looks again and comes back).
    pub fn wait(&self, seen: u64, timeout: std::time::Duration, stop: impl Fn() -> bool) {
        let g = lock(&self.generation);
        if *g != seen || stop() {
            return;
        }
        drop(self.cv.wait_timeout(g, timeout));
    }

    /// Wakes the waiters after an item was published, if there are any.
    pub fn ring(&self) {
        if self.waiters.load(Ordering::SeqCst) == 0 {
            return;
        }
        self.ring_always();
    }

    /// Wakes the waiters whether or not any is registered (for closing the queue).
    pub fn ring_always(&self) {
        let mut g = lock(&self.generation);
        *g = g.wrapping_add(1);
        self.cv.notify_all();
    }
}

impl Default for Doorbell {
    fn default() -> Self {
        Doorbell::new()
    }
}

impl std::fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Doorbell")
            .field("waiters", &self.waiters.load(Ordering::Relaxed))
            .finish()
    }
}
