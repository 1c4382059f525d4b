//! The backend conformance suite against a real Redis server.

mod common;

fairq_worker::conformance_tests!({
    if !common::available() {
        return;
    }
    common::RedisHarness
});

/// Cancelling one job (an `Inspect` action, outside `conformance_tests!`).
#[test]
fn cancel_deletes_waiting_jobs_only() {
    if !common::available() {
        return;
    }
    fairq_worker::conformance::run(common::RedisHarness, |store, clock| {
        Box::pin(fairq_worker::conformance::cancel::cancel_deletes_waiting_jobs_only(store, clock))
    });
}

/// Pausing a queue (an `Inspect` action, outside `conformance_tests!`).
#[test]
fn pause_holds_claims_until_resumed() {
    if !common::available() {
        return;
    }
    fairq_worker::conformance::run(common::RedisHarness, |store, clock| {
        Box::pin(fairq_worker::conformance::pause::pause_holds_claims_until_resumed(store, clock))
    });
}

/// A store that deletes succeeded jobs (`keep_succeeded(false)`): deleted at once, still
/// counted (outside `conformance_tests!`, which expects them kept; `tests/keep.rs` checks
/// more).
#[test]
fn succeeded_jobs_are_deleted_and_still_counted() {
    if !common::available() {
        return;
    }
    fairq_worker::conformance::run(common::RedisHarnessNotKeeping, |store, clock| {
        Box::pin(
            fairq_worker::conformance::keep::succeeded_jobs_are_deleted_and_still_counted(
                store, clock,
            ),
        )
    });
}

/// An enqueue answered with the job holding its unique key (`OnConflict::Ignore`) gives the
/// dependency it names no dependent: its success is deleted like any other.
#[test]
fn an_ignored_duplicate_leaves_its_dependency_alone() {
    if !common::available() {
        return;
    }
    fairq_worker::conformance::run(common::RedisHarnessNotKeeping, |store, clock| {
        Box::pin(
            fairq_worker::conformance::keep::an_ignored_duplicate_leaves_its_dependency_alone(
                store, clock,
            ),
        )
    });
}

/// A success whose only dependent was purged is deleted like any other (on a store
/// that deletes successes).
#[test]
fn a_success_whose_dependents_were_purged_is_deleted() {
    if !common::available() {
        return;
    }
    fairq_worker::conformance::run(common::RedisHarnessNotKeeping, |store, clock| {
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
    if !common::available() {
        return;
    }
    fairq_worker::conformance::run(common::RedisHarnessNotKeeping, |store, clock| {
        Box::pin(
            fairq_worker::conformance::keep::a_success_whose_dependents_were_cancelled_is_deleted(
                store, clock,
            ),
        )
    });
}
