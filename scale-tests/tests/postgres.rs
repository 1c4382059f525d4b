//! Several `fairq work` processes, each in a network namespace of its own (a separate
//! "host"), sharing one private PostgreSQL. The scenarios are in `common/` (they run on any
//! store); README.md describes the harness.

mod common;

use fairq_scale_tests::{knob, skip_or_fail, Needs, Network, PrivatePostgres};

/// A network of `FAIRQ_SCALE_PROCESSES` hosts (3 by default) and a PostgreSQL on its service
/// address, with the `--store` URL of a fresh schema.
fn setup() -> (Network, PrivatePostgres, String) {
    let net = Network::create(knob("FAIRQ_SCALE_PROCESSES", 3)).expect("namespaces");
    let pg = PrivatePostgres::start(net.service_ip()).expect("a private PostgreSQL");
    let url = pg.store_url("fairq_scale");
    (net, pg, url)
}

/// See [`common::fair::light_tenants_start_within_the_fair_bound`].
#[test]
fn a_light_tenant_starts_within_the_fair_bound_across_processes() {
    if !skip_or_fail(&[Needs::Postgres]) {
        return;
    }
    let _one = common::one_at_a_time();
    let (net, _pg, url) = setup();
    common::fair::light_tenants_start_within_the_fair_bound(&net, &url);
}

/// See [`common::kill::every_job_completes_exactly_once_after_kill_9`].
#[test]
fn every_job_completes_exactly_once_after_kill_9_of_one_process() {
    if !skip_or_fail(&[Needs::Postgres]) {
        return;
    }
    let _one = common::one_at_a_time();
    let (net, _pg, url) = setup();
    common::kill::every_job_completes_exactly_once_after_kill_9(&net, &url);
}
