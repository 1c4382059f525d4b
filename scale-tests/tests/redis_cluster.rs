//! The private Redis Cluster the multi-process tests run on: it starts with three masters and
//! three replicas on the address the namespaces reach, says `cluster_state:ok`, answers from
//! inside a namespace, and stops completely. Then the multi-process scenarios of
//! `tests/common/` on it: several `fairq work` processes, each in a namespace of its own,
//! sharing the cluster through a `redis+cluster://` store URL.

mod common;

use std::path::Path;

use fairq_scale_tests::{
    cluster_info, knob, skip_or_fail, Needs, Network, PrivateRedis, RedisCluster,
};

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn query(url: &str, args: &[&str]) -> String {
    let client = redis::Client::open(url).expect("a client");
    let mut conn = client.get_connection().expect("a connection");
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<String>(&mut conn).expect("an answer")
}

#[test]
fn a_private_cluster_of_three_masters_and_three_replicas_starts_and_stops() {
    if !skip_or_fail(&[Needs::Redis]) {
        return;
    }
    let _one = common::one_at_a_time();
    let net = Network::create(2).expect("namespaces");
    let cluster = RedisCluster::start(net.service_ip(), 3, 1).expect("the cluster");
    assert_eq!(cluster.nodes().len(), 6);
    let mut masters = 0;
    for url in cluster.urls() {
        let info = cluster_info(&query(&url, &["CLUSTER", "INFO"]));
        assert_eq!(info["cluster_state"], "ok", "{url}");
        assert_eq!(info["cluster_slots_assigned"], "16384", "{url}");
        assert_eq!(info["cluster_known_nodes"], "6", "{url}");
        let role = cluster_info(&query(&url, &["INFO", "replication"]));
        if role["role"] == "master" {
            masters += 1;
            assert_eq!(role["connected_slaves"], "1", "{url} has its replica");
        }
    }
    assert_eq!(masters, 3);

    // From the second namespace (a separate "host"), through its veth pair.
    let node = cluster.nodes()[0];
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &net.hosts()[1].netns, "redis-cli"])
        .args(["-h", &node.ip().to_string(), "-p", &node.port().to_string()])
        .args(["cluster", "info"])
        .output()
        .expect("redis-cli in the namespace");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(cluster_info(&text)["cluster_state"], "ok", "{text}");

    let pids = cluster.pids();
    let dir = cluster.dir().to_path_buf();
    drop(cluster);
    for pid in pids {
        assert!(!alive(pid), "node {pid} still runs");
    }
    assert!(!dir.exists(), "the cluster's folder is still there");
}

#[test]
fn a_private_redis_answers_from_a_namespace_and_stops() {
    if !skip_or_fail(&[Needs::Redis]) {
        return;
    }
    let _one = common::one_at_a_time();
    let net = Network::create(2).expect("namespaces");
    let redis = PrivateRedis::start(net.service_ip()).expect("redis-server");
    assert_eq!(query(&redis.url(), &["PING"]), "PONG");
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &net.hosts()[1].netns, "redis-cli"])
        .args(["-u", &redis.url(), "ping"])
        .output()
        .expect("redis-cli in the namespace");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "PONG");
    let pid = redis.pid();
    drop(redis);
    assert!(!alive(pid), "redis-server still runs");
}

/// A network of `FAIRQ_SCALE_PROCESSES` hosts (3 by default) and a 3-master, 3-replica
/// cluster on its service address, with the `--store` URL listing every node.
fn setup() -> (Network, RedisCluster, String) {
    let net = Network::create(knob("FAIRQ_SCALE_PROCESSES", 3)).expect("namespaces");
    let cluster = RedisCluster::start(net.service_ip(), 3, 1).expect("a private cluster");
    let url = cluster.store_url("fairq-scale");
    (net, cluster, url)
}

/// See [`common::fair::light_tenants_start_within_the_fair_bound`].
#[test]
fn a_light_tenant_starts_within_the_fair_bound_across_processes_on_a_cluster() {
    if !skip_or_fail(&[Needs::Redis]) {
        return;
    }
    let _one = common::one_at_a_time();
    let (net, _cluster, url) = setup();
    common::fair::light_tenants_start_within_the_fair_bound(&net, &url);
}

/// See [`common::kill::every_job_completes_exactly_once_after_kill_9`].
#[test]
fn every_job_completes_exactly_once_after_kill_9_of_one_process_on_a_cluster() {
    if !skip_or_fail(&[Needs::Redis]) {
        return;
    }
    let _one = common::one_at_a_time();
    let (net, _cluster, url) = setup();
    common::kill::every_job_completes_exactly_once_after_kill_9(&net, &url);
}
