//! The backend conformance suite against a real Redis server.

mod common;

fairq_worker::conformance_tests!({
    if !common::available() {
        return;
    }
    common::RedisHarness
});

/// Handing back claimed jobs (not yet in `conformance_tests!`, which every store expands).
#[test]
fn release_hands_back_without_an_attempt() {
    if !common::available() {
        return;
    }
    fairq_worker::conformance::run(common::RedisHarness, |store, clock| {
        Box::pin(
            fairq_worker::conformance::checks::release_hands_back_without_an_attempt(store, clock),
        )
    });
}

/// Holding a queue's retries back (optional in the suite; Redis offers it).
#[test]
fn hold_retries_holds_back_due_retries_only() {
    if !common::available() {
        return;
    }
    fairq_worker::conformance::run(common::RedisHarness, |store, clock| {
        Box::pin(
            fairq_worker::conformance::checks::hold_retries_holds_back_due_retries_only(
                store, clock,
            ),
        )
    });
}

/// The retry sweep through a worker: a failed retry holds the queue's other retries back in
/// Redis until the next sweep.
#[test]
fn retry_sweep_stops_at_a_failed_retry() {
    if !common::available() {
        return;
    }
    fairq_worker::conformance::run(common::RedisHarness, |store, clock| {
        Box::pin(
            fairq_worker::conformance::sweep::retry_sweep_stops_at_a_failed_retry(store, clock),
        )
    });
}

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
