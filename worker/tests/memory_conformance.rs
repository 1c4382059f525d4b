//! The conformance suite against the in-memory reference store.

use fairq_worker::conformance::Harness;
use fairq_worker::{ManualClock, MemoryBackend};

/// Fresh in-memory stores on the suite's manual clock.
struct Memory;

impl Harness for Memory {
    type Backend = MemoryBackend;

    async fn create(&self, clock: ManualClock) -> MemoryBackend {
        MemoryBackend::with_clock(clock)
    }

    async fn cleanup(&self, backend: MemoryBackend) {
        assert!(backend.len() < 10_000, "a check left a runaway store");
    }
}

fairq_worker::conformance_tests!(Memory);

/// Handing back claimed jobs: a check for the stores that offer it (not yet in
/// `conformance_tests!`, which every store expands).
#[test]
fn release_hands_back_without_an_attempt() {
    fairq_worker::conformance::run(Memory, |store, clock| {
        Box::pin(
            fairq_worker::conformance::checks::release_hands_back_without_an_attempt(store, clock),
        )
    });
}

/// Holding retries back: a check for the stores that offer it.
#[test]
fn hold_retries_holds_back_due_retries_only() {
    fairq_worker::conformance::run(Memory, |store, clock| {
        Box::pin(
            fairq_worker::conformance::checks::hold_retries_holds_back_due_retries_only(
                store, clock,
            ),
        )
    });
}

/// The retry sweep through a worker: a check for the stores that can hold retries back.
#[test]
fn retry_sweep_stops_at_a_failed_retry() {
    fairq_worker::conformance::run(Memory, |store, clock| {
        Box::pin(
            fairq_worker::conformance::sweep::retry_sweep_stops_at_a_failed_retry(store, clock),
        )
    });
}

/// Cancelling one job (an [`Inspect`](fairq_worker::Inspect) action, outside
/// `conformance_tests!`).
#[test]
fn cancel_deletes_waiting_jobs_only() {
    fairq_worker::conformance::run(Memory, |store, clock| {
        Box::pin(fairq_worker::conformance::cancel::cancel_deletes_waiting_jobs_only(store, clock))
    });
}
