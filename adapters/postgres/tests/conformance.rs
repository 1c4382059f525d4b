//! The backend conformance suite against a real PostgreSQL server, each check in its own
//! schema.

mod common;

fairq_worker::conformance_tests!({
    if !common::available() {
        return;
    }
    common::PgHarness
});

/// Handing back claimed jobs and holding retries back: checks for the stores that offer them
/// (not in `conformance_tests!`, which every store expands).
#[test]
fn release_hands_back_without_an_attempt() {
    if !common::available() {
        return;
    }
    fairq_worker::conformance::run(common::PgHarness, |store, clock| {
        Box::pin(
            fairq_worker::conformance::checks::release_hands_back_without_an_attempt(store, clock),
        )
    });
}

#[test]
fn hold_retries_holds_back_due_retries_only() {
    if !common::available() {
        return;
    }
    fairq_worker::conformance::run(common::PgHarness, |store, clock| {
        Box::pin(
            fairq_worker::conformance::checks::hold_retries_holds_back_due_retries_only(
                store, clock,
            ),
        )
    });
}

/// Cancelling one job (an `Inspect` action, outside `conformance_tests!`).
#[test]
fn cancel_deletes_waiting_jobs_only() {
    if !common::available() {
        return;
    }
    fairq_worker::conformance::run(common::PgHarness, |store, clock| {
        Box::pin(fairq_worker::conformance::cancel::cancel_deletes_waiting_jobs_only(store, clock))
    });
}
