//! The backend conformance suite against a real Redis server.

mod common;

fairq_worker::conformance_tests!({
    if !common::available() {
        return;
    }
    common::RedisHarness
});
