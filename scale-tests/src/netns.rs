//! Network namespaces joined to the host by veth pairs: each namespace behaves as a separate
//! host with its own address, and reaches the host's services at one service address.

use std::net::Ipv4Addr;

use crate::cmd::ip;
use crate::HarnessError;

/// Names of the namespaces this harness makes: `fairq-scale-PID-SLOT-INDEX`, so one left
/// behind by a test process that was killed outright can be recognised and removed.
const PREFIX: &str = "fairq-scale-";

/// At most this many namespaces per network (the /30 subnets of one /24).
pub const MAX_HOSTS: usize = 64;

/// One namespace ("host") of a [`Network`].
#[derive(Debug, Clone)]
pub struct Host {
    /// The namespace's name (for `ip netns exec`).
    pub netns: String,
    /// The namespace's own address.
    pub ip: Ipv4Addr,
    /// The host's end of this namespace's veth pair.
    pub host_ip: Ipv4Addr,
}

/// Namespaces, each joined to the host by a veth pair with a /30 subnet of
/// `10.254.SLOT.0/24`, where SLOT is the first one whose link names are free (so concurrent
/// test processes do not collide). The host's end of the first pair is the **service
/// address**: servers listen there, and every namespace has a route to it through its own
/// pair. Dropping the network deletes the namespaces (and so the pairs), killing any process
/// still inside.
///
/// ```no_run
/// let net = fairq_scale_tests::Network::create(3).unwrap(); // needs root
/// assert_eq!(net.hosts().len(), 3);
/// assert_eq!(net.service_ip(), net.hosts()[0].host_ip);
/// ```
#[derive(Debug)]
pub struct Network {
    slot: u8,
    links: usize,
    namespaces: Vec<String>,
    hosts: Vec<Host>,
}

fn host_link(slot: u8, index: usize) -> String {
    format!("fq{slot}h{index}")
}

fn peer_link(slot: u8, index: usize) -> String {
    format!("fq{slot}p{index}")
}

/// The addresses of pair `index` in `slot`: (host end, namespace end).
fn addresses(slot: u8, index: usize) -> (Ipv4Addr, Ipv4Addr) {
    let base = (index * 4) as u8;
    (
        Ipv4Addr::new(10, 254, slot, base + 1),
        Ipv4Addr::new(10, 254, slot, base + 2),
    )
}

impl Network {
    /// Makes `count` namespaces (1 to [`MAX_HOSTS`]).
    pub fn create(count: usize) -> Result<Network, HarnessError> {
        if count == 0 || count > MAX_HOSTS {
            return Err(HarnessError::Other(format!(
                "a network has 1 to {MAX_HOSTS} hosts, not {count}"
            )));
        }
        sweep_stale();
        let start = std::process::id() as usize;
        let mut slot = None;
        for attempt in 0..256 {
            let candidate = ((start + attempt) % 256) as u8;
            match ip(&[
                "link",
                "add",
                &host_link(candidate, 0),
                "type",
                "veth",
                "peer",
                "name",
                &peer_link(candidate, 0),
            ]) {
                Ok(_) => {
                    slot = Some(candidate);
                    break;
                }
                Err(HarnessError::Command { output, .. }) if output.contains("exists") => continue,
                Err(e) => return Err(e),
            }
        }
        let slot = slot.ok_or_else(|| HarnessError::Other("no free veth slot".into()))?;
        let mut net = Network {
            slot,
            links: 1,
            namespaces: Vec::new(),
            hosts: Vec::new(),
        };
        for index in 0..count {
            net.add_host(index)?;
        }
        Ok(net)
    }

    fn add_host(&mut self, index: usize) -> Result<(), HarnessError> {
        let slot = self.slot;
        let (host, peer) = (host_link(slot, index), peer_link(slot, index));
        if index > 0 {
            ip(&["link", "add", &host, "type", "veth", "peer", "name", &peer])?;
            self.links += 1;
        }
        let netns = format!("{PREFIX}{}-{slot}-{index}", std::process::id());
        ip(&["netns", "add", &netns])?;
        self.namespaces.push(netns.clone());
        let (host_ip, own_ip) = addresses(slot, index);
        ip(&["link", "set", &peer, "netns", &netns])?;
        ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &host])?;
        ip(&["link", "set", &host, "up"])?;
        ip(&[
            "-n",
            &netns,
            "addr",
            "add",
            &format!("{own_ip}/30"),
            "dev",
            &peer,
        ])?;
        ip(&["-n", &netns, "link", "set", &peer, "up"])?;
        ip(&["-n", &netns, "link", "set", "lo", "up"])?;
        if index > 0 {
            let service = addresses(slot, 0).0;
            ip(&[
                "-n",
                &netns,
                "route",
                "add",
                &format!("{service}/32"),
                "via",
                &host_ip.to_string(),
            ])?;
        }
        self.hosts.push(Host {
            netns,
            ip: own_ip,
            host_ip,
        });
        Ok(())
    }

    /// The namespaces, in order.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// The address on the host that every namespace reaches: servers listen here.
    pub fn service_ip(&self) -> Ipv4Addr {
        addresses(self.slot, 0).0
    }
}

/// Kills every process left in `netns` and deletes it.
fn remove_namespace(netns: &str) {
    if let Ok(pids) = ip(&["netns", "pids", netns]) {
        for pid in pids
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
    let _ = ip(&["netns", "del", netns]);
}

/// Removes namespaces of this harness whose test process no longer exists.
fn sweep_stale() {
    let Ok(list) = ip(&["netns", "list"]) else {
        return;
    };
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            remove_namespace(name);
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for netns in &self.namespaces {
            remove_namespace(netns);
        }
        // A pair whose namespace end was never moved (or whose namespace is gone) is
        // deleted from the host's side; deleting either end deletes both.
        for index in 0..self.links {
            let _ = ip(&["link", "del", &host_link(self.slot, index)]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pair_has_its_own_slash_30() {
        assert_eq!(
            addresses(7, 0),
            (Ipv4Addr::new(10, 254, 7, 1), Ipv4Addr::new(10, 254, 7, 2))
        );
        assert_eq!(
            addresses(7, 63),
            (
                Ipv4Addr::new(10, 254, 7, 253),
                Ipv4Addr::new(10, 254, 7, 254)
            )
        );
        // Link names fit the kernel's 15 characters.
        assert!(host_link(255, MAX_HOSTS - 1).len() <= 15);
    }
}
