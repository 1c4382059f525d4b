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

/// Cancelling one job (an [`Inspect`](fairq_worker::Inspect) action, outside
/// `conformance_tests!`).
#[test]
fn cancel_deletes_waiting_jobs_only() {
    fairq_worker::conformance::run(Memory, |store, clock| {
        Box::pin(fairq_worker::conformance::cancel::cancel_deletes_waiting_jobs_only(store, clock))
    });
}

/// Pausing a queue (an [`Inspect`](fairq_worker::Inspect) action, outside
/// `conformance_tests!`).
#[test]
fn pause_holds_claims_until_resumed() {
    fairq_worker::conformance::run(Memory, |store, clock| {
        Box::pin(fairq_worker::conformance::pause::pause_holds_claims_until_resumed(store, clock))
    });
}

/// Fresh in-memory stores that delete succeeded jobs (`keep_succeeded(false)`).
struct MemoryNotKeeping;

impl Harness for MemoryNotKeeping {
    type Backend = MemoryBackend;

    async fn create(&self, clock: ManualClock) -> MemoryBackend {
        MemoryBackend::with_clock(clock).keep_succeeded(false)
    }

    async fn cleanup(&self, _backend: MemoryBackend) {}
}

/// Succeeded jobs deleted at once, still counted (outside `conformance_tests!`, which
/// expects them kept).
#[test]
fn succeeded_jobs_are_deleted_and_still_counted() {
    fairq_worker::conformance::run(MemoryNotKeeping, |store, clock| {
        Box::pin(
            fairq_worker::conformance::keep::succeeded_jobs_are_deleted_and_still_counted(
                store, clock,
            ),
        )
    });
}

/// A success whose only dependent was purged is deleted like any other (on a store
/// that deletes successes).
#[test]
fn a_success_whose_dependents_were_purged_is_deleted() {
    fairq_worker::conformance::run(MemoryNotKeeping, |store, clock| {
        Box::pin(
            fairq_worker::conformance::keep::a_success_whose_dependents_were_purged_is_deleted(
                store, clock,
            ),
        )
    });
}

/// A success whose only dependent was cancelled is deleted like any other (on a store
/// that deletes successes).
#[test]
fn a_success_whose_dependents_were_cancelled_is_deleted() {
    fairq_worker::conformance::run(MemoryNotKeeping, |store, clock| {
        Box::pin(
            fairq_worker::conformance::keep::a_success_whose_dependents_were_cancelled_is_deleted(
                store, clock,
            ),
        )
    });
}

/// An enqueue answered with the job holding its unique key (`OnConflict::Ignore`) gives the
/// dependency it names no dependent: its success is deleted like any other (outside
/// `conformance_tests!`, which runs the check on a store keeping successes, where a dependent
/// recorded by mistake does not show).
#[test]
fn an_ignored_duplicate_leaves_its_dependency_alone() {
    fairq_worker::conformance::run(MemoryNotKeeping, |store, clock| {
        Box::pin(
            fairq_worker::conformance::keep::an_ignored_duplicate_leaves_its_dependency_alone(
                store, clock,
            ),
        )
    });
}
