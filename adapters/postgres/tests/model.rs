//! The shared differential test (`fairq_worker::conformance::differential`) on PostgreSQL:
//! random request sequences against the reference state machine, every answer, every job
//! record and every queue's statistics compared after each step. Each case runs in a schema
//! of its own, dropped afterwards.

mod common;

use fairq_worker::conformance::differential::{self, Capabilities, Differential};

impl Differential for common::PgHarness {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            release: true,
            // A new store on the same schema does not end the leases of the old one (another
            // process may still hold them): there is no restart to model.
            reopen: false,
            hold_retries: true,
        }
    }
}

#[test]
fn postgres_matches_the_reference_store() {
    if !common::available() {
        return;
    }
    differential::check(common::PgHarness, 64);
}
