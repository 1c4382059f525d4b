//! The shared differential test against the in-memory store: the store the reference state
//! machine is wrapped in must agree with it through every call of the `Backend` trait.

use fairq_worker::conformance::Harness;
use fairq_worker::conformance::differential::{self, Capabilities, Differential};
use fairq_worker::{ManualClock, MemoryBackend};

struct Memory;

impl Harness for Memory {
    type Backend = MemoryBackend;

    async fn create(&self, clock: ManualClock) -> MemoryBackend {
        MemoryBackend::with_clock(clock)
    }

    async fn cleanup(&self, _backend: MemoryBackend) {}
}

impl Differential for Memory {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            release: true,
            reopen: false,
            hold_retries: true,
        }
    }
}

#[test]
fn the_memory_store_matches_the_reference() {
    differential::check(Memory, 256);
}

/// A store that keeps its own clock, one millisecond ahead and never moving: the harness
/// must notice (lease deadlines, due times and ages disagree).
struct OwnClock;

impl Harness for OwnClock {
    type Backend = MemoryBackend;

    async fn create(&self, _clock: ManualClock) -> MemoryBackend {
        MemoryBackend::with_clock(ManualClock::new(fairq_worker::conformance::START + 1))
    }

    async fn cleanup(&self, _backend: MemoryBackend) {}
}

impl Differential for OwnClock {
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
}

#[test]
#[should_panic(expected = "disagrees with the reference store")]
fn a_store_that_disagrees_is_caught() {
    differential::check(OwnClock, 64);
}
