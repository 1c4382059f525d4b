//! Random numbers for retry jitter: a [`Random`] source injected into stores, and the
//! process-wide generator behind the default one.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// A random `u64` for retry jitter: SipHash of a counter under a per-process random key.
/// Not for cryptography.
///
/// ```
/// assert_ne!(fairq_worker::random_u64(), fairq_worker::random_u64());
/// ```
pub fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static STATE: RandomState = RandomState::new();
    }
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    STATE.with(|state| {
        let mut hasher = state.build_hasher();
        hasher.write_u64(n);
        hasher.finish()
    })
}

/// A source of random numbers for retry jitter, injected into stores like their
/// [`Clock`](crate::Clock), so tests can fix the jitter and stores never reach for a global.
///
/// ```
/// use fairq_worker::{FixedRandom, Random, SystemRandom};
/// assert_eq!(FixedRandom(7).next_u64(), 7);
/// assert_ne!(SystemRandom.next_u64(), SystemRandom.next_u64());
/// ```
pub trait Random: Send + Sync + 'static {
    /// The next random number (uniform over `u64`).
    fn next_u64(&self) -> u64;
}

/// Random numbers from [`random_u64`]: the default of every store.
///
/// ```
/// use fairq_worker::{Random, SystemRandom};
/// let _ = SystemRandom.next_u64();
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemRandom;

impl Random for SystemRandom {
    fn next_u64(&self) -> u64 {
        random_u64()
    }
}

/// The same number every time: fixes retry jitter in tests (`FixedRandom(u64::MAX)` is the
/// full delay, `FixedRandom(0)` the shortest).
///
/// ```
/// use fairq_worker::{FixedRandom, Random};
/// assert_eq!(FixedRandom(u64::MAX).next_u64(), u64::MAX);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FixedRandom(pub u64);

impl Random for FixedRandom {
    fn next_u64(&self) -> u64 {
        self.0
    }
}
