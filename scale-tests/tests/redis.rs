//! The multi-process scenarios on one private Redis: several `fairq work` processes, each in
//! a network namespace of its own, sharing one `redis-server`. (The same scenarios are meant
//! for a Redis Cluster; see README.md.)

mod common;

use fairq_scale_tests::{knob, skip_or_fail, Needs, Network, PrivateRedis};

/// A network of `FAIRQ_SCALE_PROCESSES` hosts (3 by default) and a redis-server on its
/// service address, with the `--store` URL of a key prefix.
fn setup() -> (Network, PrivateRedis, String) {
    let net = Network::create(knob("FAIRQ_SCALE_PROCESSES", 3)).expect("namespaces");
    let redis = PrivateRedis::start(net.service_ip()).expect("a private redis-server");
    let url = format!("{}?prefix=fairq-scale", redis.url());
    (net, redis, url)
}

/// See [`common::fair::light_tenants_start_within_the_fair_bound`].
#[test]
fn a_light_tenant_starts_within_the_fair_bound_across_processes() {
    if !skip_or_fail(&[Needs::Redis]) {
        return;
    }
    let _one = common::one_at_a_time();
    let (net, _redis, url) = setup();
    common::fair::light_tenants_start_within_the_fair_bound(&net, &url);
}

/// See [`common::kill::every_job_completes_exactly_once_after_kill_9`].
#[test]
fn every_job_completes_exactly_once_after_kill_9_of_one_process() {
    if !skip_or_fail(&[Needs::Redis]) {
        return;
    }
    let _one = common::one_at_a_time();
    let (net, _redis, url) = setup();
    common::kill::every_job_completes_exactly_once_after_kill_9(&net, &url);
}
