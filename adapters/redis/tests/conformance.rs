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
