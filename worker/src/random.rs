//! A source of random numbers for retry jitter.

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
