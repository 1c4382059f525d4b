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
