//! Which addresses a destination a client names (a check's notification, an A2A push target)
//! may go to. Its URL comes from whoever holds an API key, not from the model, so private and
//! loopback receivers are allowed (an in-cluster alert router or agent is the usual one). Link-local addresses are not: that is where
//! every cloud's instance metadata service answers (169.254.169.254, fd00:ec2::254, Alibaba's
//! 100.100.100.200), handing out the node's or the pod's cloud credentials to any request
//! from inside; an API key for triage is not meant to be a key to those. The check is on the
//! URL's literal host and again on every address a name resolves to, when connecting, so a
//! name pointed at the metadata service is refused too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Host names of metadata services that do not need DNS to look like one.
const METADATA_NAMES: &[&str] = &[
    "metadata",
    "metadata.google.internal",
    "instance-data",
    "instance-data.ec2.internal",
];

/// Why `ip` may not receive a notification, if it may not.
pub fn refused_ip(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refused_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => refused_v4(v4).or_else(|| refused_v6(v6)),
            None => refused_v6(v6),
        },
    }
}

/// The IPv4 address an IPv6 one reaches, where the network translates or tunnels it: mapped
/// (`::ffff:a.b.c.d`), compatible (`::a.b.c.d`), NAT64's well-known prefix (`64:ff9b::/96`,
/// which an IPv6-only cluster's NAT64 gateway turns into the IPv4 address, the metadata
/// service's included) and 6to4 (`2002:aabb:ccdd::/48`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let o = ip.octets();
    let low = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if let Some(v4) = ip.to_ipv4_mapped() {
        Some(v4)
    } else if (s[..6] == [0; 6] && !(s[6] == 0 && s[7] <= 1))
        || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
    {
        // Compatible (`::` and `::1` are not IPv4 addresses) or NAT64's.
        Some(low)
    } else if s[0] == 0x2002 {
        Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]))
    } else {
        None
    }
}

fn refused_v4(ip: Ipv4Addr) -> Option<&'static str> {
    if ip.is_link_local() {
        Some("a link-local address (169.254.0.0/16), where cloud metadata services answer")
    } else if ip == Ipv4Addr::new(100, 100, 100, 200) {
        Some("Alibaba Cloud's metadata service")
    } else if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
        Some("not a receiver's address")
    } else {
        None
    }
}

fn refused_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let link_local = (ip.segments()[0] & 0xffc0) == 0xfe80;
    if link_local {
        Some("a link-local address (fe80::/10)")
    } else if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        Some("AWS's metadata service (fd00:ec2::254)")
    } else if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23) {
        Some("the EKS Pod Identity Agent (fd00:ec2::23), which hands out AWS credentials")
    } else if ip == Ipv6Addr::new(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254) {
        Some("Google Cloud's metadata service (fd20:ce::254)")
    } else if ip.is_unspecified() || ip.is_multicast() {
        Some("not a receiver's address")
    } else {
        None
    }
}

/// Why a URL's host may not receive a notification, checked before anything is sent.
pub fn refused_host(host: &url::Host<&str>) -> Option<String> {
    let refused = match host {
        url::Host::Ipv4(ip) => refused_ip(IpAddr::V4(*ip)),
        url::Host::Ipv6(ip) => refused_ip(IpAddr::V6(*ip)),
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            METADATA_NAMES
                .contains(&name.as_str())
                .then_some("a cloud metadata service's name")
        }
    };
    refused.map(|why| format!("`{host}` is {why}; notifications are not sent there"))
}

/// DNS for the notification client: a name's refused addresses are dropped, and a name with
/// nothing left is an error naming why.
pub struct GuardedResolver;

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| refused_ip(a.ip()).is_none())
                .collect();
            if allowed.is_empty() {
                let why = found
                    .first()
                    .and_then(|a| refused_ip(a.ip()))
                    .unwrap_or("no address");
                let message =
                    format!("`{host}` resolves to {why}; notifications are not sent there");
                return Err(message.into());
            }
            let addrs: reqwest::dns::Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_and_link_local_are_refused_private_receivers_are_not() {
        for refused in [
            "169.254.169.254",
            "169.254.170.2",
            "100.100.100.200",
            "0.0.0.0",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:169.254.169.254",
            // The metadata service through NAT64, IPv4-compatible and 6to4 addresses.
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::169.254.169.254",
            "::169.254.169.254",
            "2002:a9fe:a9fe::1",
            "64:ff9b::6464:64c8",
            "fd00:ec2::23",
            "fd20:ce::254",
        ] {
            let ip: IpAddr = refused.parse().unwrap();
            assert!(refused_ip(ip).is_some(), "{refused}");
        }
        for allowed in [
            "127.0.0.1",
            "10.0.0.7",
            "192.168.1.1",
            "::1",
            "2001:db8::1",
            "64:ff9b::a00:7",
            "2002:a00:7::1",
        ] {
            let ip: IpAddr = allowed.parse().unwrap();
            assert!(refused_ip(ip).is_none(), "{allowed}");
        }
        assert!(refused_host(&url::Host::Domain("Metadata.Google.Internal.")).is_some());
        assert!(refused_host(&url::Host::Domain("alerts.example.com")).is_none());
    }
}
