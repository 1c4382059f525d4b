//! The backend conformance suite against a real PostgreSQL server, each check in its own
//! schema.

mod common;

fairq_worker::conformance_tests!({
    if !common::available() {
        return;
    }
    common::PgHarness
});
