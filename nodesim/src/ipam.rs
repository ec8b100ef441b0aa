//! Pod IPs from each node's /24, handed out as CNI's host-local IPAM does: the next free
//! address after the last one given, so a freed address is not reused at once.

use std::collections::{BTreeSet, HashMap};

/// The host numbers pods get: .1 is the node's gateway, .255 the broadcast address.
const FIRST: u8 = 2;
const LAST: u8 = 254;

#[derive(Default)]
struct NodeIps {
    used: BTreeSet<u8>,
    last: u8,
}

#[derive(Default)]
pub(crate) struct Ipam {
    nodes: HashMap<String, NodeIps>,
}

fn host_number(ip: &str) -> Option<u8> {
    ip.rsplit_once('.')?.1.parse().ok()
}

impl Ipam {
    /// A free address of `node`'s subnet (`subnet` its first three octets); None when all
    /// are taken (the kubelet could not make the pod's sandbox).
    pub fn take(&mut self, node: &str, subnet: &str) -> Option<String> {
        let ips = self.nodes.entry(node.to_string()).or_default();
        let after = ips.last.clamp(FIRST - 1, LAST);
        let free = (after + 1..=LAST)
            .chain(FIRST..=after)
            .find(|host| !ips.used.contains(host))?;
        ips.used.insert(free);
        ips.last = free;
        Some(format!("{subnet}.{free}"))
    }

    /// Marks `ip`, found in a pod's status, as taken on `node`.
    pub fn claim(&mut self, node: &str, ip: &str) {
        if let Some(host) = host_number(ip) {
            self.nodes
                .entry(node.to_string())
                .or_default()
                .used
                .insert(host);
        }
    }

    /// Frees `ip` of `node`: its pod is gone or its containers have exited.
    pub fn release(&mut self, node: &str, ip: &str) {
        if let (Some(ips), Some(host)) = (self.nodes.get_mut(node), host_number(ip)) {
            ips.used.remove(&host);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_go_round_the_subnet_skipping_the_taken_ones() {
        let mut ipam = Ipam::default();
        assert_eq!(ipam.take("n", "10.128.0").as_deref(), Some("10.128.0.2"));
        ipam.claim("n", "10.128.0.3");
        assert_eq!(ipam.take("n", "10.128.0").as_deref(), Some("10.128.0.4"));
        ipam.release("n", "10.128.0.2");
        assert_eq!(
            ipam.take("n", "10.128.0").as_deref(),
            Some("10.128.0.5"),
            "a freed address waits its turn"
        );
        for _ in 5..LAST {
            ipam.take("n", "10.128.0").expect("room left");
        }
        assert_eq!(ipam.take("n", "10.128.0").as_deref(), Some("10.128.0.2"));
        assert_eq!(ipam.take("n", "10.128.0"), None, "the /24 is full");
        assert_eq!(ipam.take("m", "10.128.1").as_deref(), Some("10.128.1.2"));
    }
}
