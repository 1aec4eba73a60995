//! The guard against server-side request forgery: which URLs may be fetched (scheme, allowed
//! hosts), which addresses are not public, and a resolver that refuses names resolving to them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use url::{Host, Url};

use super::InternetConfig;

/// Which URLs may be fetched.
#[derive(Debug, Clone)]
pub(super) struct Rules {
    allowed_hosts: Vec<HostRule>,
    allow_private: bool,
    /// triage's listening ports: the fetcher runs in triage, outside the tools' network wall,
    /// so a URL on one of them could reach triage's own API.
    own_ports: Vec<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostRule {
    Exact(String),
    /// The domain and its subdomains.
    Domain(String),
}

impl HostRule {
    fn parse(entry: &str) -> Option<HostRule> {
        let e = entry
            .trim()
            .trim_end_matches('.')
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if let Some(domain) = e.strip_prefix("*.").or_else(|| e.strip_prefix('.')) {
            return (!domain.is_empty()).then(|| HostRule::Domain(domain.to_owned()));
        }
        (!e.is_empty()).then_some(HostRule::Exact(e))
    }

    fn matches(&self, host: &str) -> bool {
        match self {
            HostRule::Exact(h) => host == h,
            HostRule::Domain(d) => {
                host == d
                    || host
                        .strip_suffix(d.as_str())
                        .is_some_and(|prefix| prefix.ends_with('.'))
            }
        }
    }
}

impl Rules {
    pub(super) fn new(cfg: &InternetConfig, own_ports: &[u16]) -> Rules {
        Rules {
            allowed_hosts: cfg
                .allowed_hosts
                .iter()
                .filter_map(|e| HostRule::parse(e))
                .collect(),
            allow_private: cfg.allow_private_addresses,
            own_ports: own_ports.to_vec(),
        }
    }

    /// Checks a URL (the requested one or a redirect target) before connecting.
    pub(super) async fn check(&self, url: &Url) -> Result<(), String> {
        match url.scheme() {
            "http" | "https" => {}
            other => {
                return Err(format!(
                    "refused to fetch {url}: only http:// and https:// URLs can be fetched, \
                     not `{other}:`"
                ));
            }
        }
        let host = url
            .host()
            .ok_or_else(|| format!("refused to fetch {url}: the URL has no host"))?;
        let host_name = match &host {
            Host::Domain(d) => d.trim_end_matches('.').to_ascii_lowercase(),
            Host::Ipv4(a) => a.to_string(),
            Host::Ipv6(a) => a.to_string(),
        };
        let listed = self.allowed_hosts.iter().any(|r| r.matches(&host_name));
        // Whatever the address (a proxy, a name, the host's own public address): only a host
        // the operator listed may be fetched on triage's own port.
        if let Some(port) = url.port_or_known_default()
            && self.own_ports.contains(&port)
            && !listed
        {
            return Err(format!(
                "refused to fetch {url}: port {port} is the port triage itself listens on, and a \
                 page there could be triage's own API; list the host in \
                 toolsets.internet.allowed_hosts to fetch it"
            ));
        }
        if !self.allowed_hosts.is_empty() && !listed {
            return Err(format!(
                "refused to fetch {url}: host `{host_name}` is not in \
                 toolsets.internet.allowed_hosts"
            ));
        }
        if self.allow_private {
            return Ok(());
        }
        let (ips, resolved) = match host {
            Host::Ipv4(a) => (vec![IpAddr::V4(a)], false),
            Host::Ipv6(a) => (vec![IpAddr::V6(a)], false),
            Host::Domain(d) => {
                let port = url.port_or_known_default().unwrap_or(80);
                let addrs = tokio::net::lookup_host((d, port))
                    .await
                    .map_err(|e| format!("cannot fetch {url}: cannot resolve `{d}`: {e}"))?;
                (addrs.map(|a| a.ip()).collect(), true)
            }
        };
        for ip in ips {
            if let Some(kind) = non_public(ip) {
                let what = if resolved {
                    format!("`{host_name}` resolves to {ip}, {kind}")
                } else {
                    format!("{ip} is {kind}")
                };
                return Err(format!(
                    "refused to fetch {url}: {what}. {SSRF_EXPLANATION}"
                ));
            }
        }
        Ok(())
    }
}

const SSRF_EXPLANATION: &str = "Loopback, private, link-local (such as the cloud metadata \
service 169.254.169.254) and other non-public addresses are blocked to prevent server-side \
request forgery (SSRF) against internal services; an operator can allow them with \
toolsets.internet.allow_private_addresses = true.";

/// The IPv4 address in an IPv4-mapped (`::ffff:a.b.c.d`, RFC 4291), IPv4-translated
/// (`::ffff:0:a.b.c.d`, RFC 2765), well-known NAT64 (`64:ff9b::a.b.c.d`, RFC 6052) or 6to4
/// (`2002:AABB:CCDD::`, RFC 3056) address.
fn embedded_v4(s: [u16; 8]) -> Option<Ipv4Addr> {
    let v4 = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    const MAPPED: [u16; 6] = [0, 0, 0, 0, 0, 0xffff];
    const TRANSLATED: [u16; 6] = [0, 0, 0, 0, 0xffff, 0];
    const NAT64: [u16; 6] = [0x64, 0xff9b, 0, 0, 0, 0];
    if [MAPPED, TRANSLATED, NAT64].contains(&[s[0], s[1], s[2], s[3], s[4], s[5]]) {
        Some(v4(s[6], s[7]))
    } else if s[0] == 0x2002 {
        Some(v4(s[1], s[2]))
    } else {
        None
    }
}

/// What kind of non-public address `ip` is, or `None` for a public one.
fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(a) => non_public_v4(a),
        IpAddr::V6(a) => non_public_v6(a),
    }
}

fn non_public_v4(a: Ipv4Addr) -> Option<&'static str> {
    let [o1, o2, o3, _] = a.octets();
    if a.is_loopback() {
        Some("a loopback address")
    } else if a.is_private() {
        Some("a private address")
    } else if a.is_link_local() {
        Some("a link-local address (the range of cloud metadata services)")
    } else if o1 == 0 {
        Some("an unspecified (\"this network\") address")
    } else if o1 == 100 && (64..128).contains(&o2) {
        Some("a shared (carrier-grade NAT) address")
    } else if a.is_multicast() {
        Some("a multicast address")
    } else if o1 >= 240 {
        Some("a reserved or broadcast address")
    } else if a.is_documentation() || (o1 == 198 && (o2 == 18 || o2 == 19)) {
        Some("a documentation or benchmarking address")
    } else if o1 == 192 && o2 == 0 && o3 == 0 {
        Some("a special-purpose (IETF protocol) address")
    } else {
        None
    }
}

fn non_public_v6(a: Ipv6Addr) -> Option<&'static str> {
    let s = a.segments();
    if a.is_loopback() {
        return Some("a loopback address");
    }
    if a.is_unspecified() {
        return Some("an unspecified address");
    }
    // These forms reach an IPv4 host (through the host's stack, a NAT64 gateway or a 6to4
    // relay): judge that host.
    if let Some(v4) = embedded_v4(s) {
        return non_public_v4(v4);
    }
    // ::a.b.c.d, deprecated since RFC 4291: no public use, whatever it embeds.
    if s[..6] == [0; 6] {
        return Some("a deprecated IPv4-compatible address");
    }
    // The local-use NAT64 prefix (RFC 8215) reaches IPv4 hosts of the operator's own network,
    // at a position that depends on the prefix length: refuse it whole.
    if s[..2] == [0x64, 0xff9b] && s[2] == 1 {
        return Some("a local-use NAT64 address (it reaches this network's IPv4 hosts)");
    }
    // Teredo (2001::/32) tunnels to an IPv4 host through a relay.
    if s[..2] == [0x2001, 0] {
        return Some("a Teredo address (it tunnels to an IPv4 host)");
    }
    if (s[0] & 0xfe00) == 0xfc00 {
        Some("a unique-local address")
    } else if (s[0] & 0xffc0) == 0xfe80 {
        Some("a link-local address")
    } else if (s[0] & 0xffc0) == 0xfec0 {
        Some("a site-local address")
    } else if (s[0] & 0xff00) == 0xff00 {
        Some("a multicast address")
    } else if s[0] == 0x2001 && s[1] == 0x0db8 {
        Some("a documentation address")
    } else if (s[0] == 0x2001 && s[1] < 0x0200) || s[..4] == [0x100, 0, 0, 0] || s[0] == 0x64 {
        // IETF protocol assignments (2001::/23), discard-only (100::/64), local-use NAT64.
        Some("a special-purpose address")
    } else {
        None
    }
}

/// Resolves names, refusing any that resolve to a non-public address: the connection uses the
/// very addresses that were checked.
pub(super) struct PublicOnlyResolver;

impl reqwest::dns::Resolve for PublicOnlyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if let Some((ip, kind)) = addrs
                .iter()
                .find_map(|a| non_public(a.ip()).map(|k| (a.ip(), k)))
            {
                let msg = format!("`{host}` resolves to {ip}, {kind}. {SSRF_EXPLANATION}");
                return Err(msg.into());
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Whether reqwest will send requests through a proxy from the environment (which then
/// resolves the target names itself).
pub(super) fn proxy_in_environment() -> bool {
    [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .iter()
    .any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()))
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::internet::InternetConfig;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn classifies_addresses() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "ff02::1",
        ] {
            assert!(non_public(ip(private)).is_some(), "{private} passed");
        }
        for public in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert_eq!(non_public(ip(public)), None, "{public} refused");
        }
        assert_eq!(
            non_public(ip("169.254.169.254")),
            Some("a link-local address (the range of cloud metadata services)")
        );
    }

    #[test]
    fn ipv6_forms_that_embed_ipv4_are_judged_by_the_ipv4_address() {
        // (form, carrying a private IPv4 address, carrying a public one)
        let judged = [
            ("mapped", "::ffff:10.0.0.1", "::ffff:8.8.8.8"),
            ("mapped, hex", "::ffff:7f00:1", "::ffff:808:808"),
            ("translated", "::ffff:0:127.0.0.1", "::ffff:0:8.8.8.8"),
            ("translated", "::ffff:0:169.254.169.254", "::ffff:0:1.1.1.1"),
            ("NAT64", "64:ff9b::192.168.0.1", "64:ff9b::8.8.8.8"),
            ("6to4", "2002:a00:1::1", "2002:808:808::1"),
            ("6to4", "2002:a9fe:a9fe::", "2002:101:101::"),
        ];
        for (form, private, public) in judged {
            assert!(
                non_public(ip(private)).is_some(),
                "{form}: {private} passed"
            );
            assert_eq!(non_public(ip(public)), None, "{form}: {public} refused");
        }
        assert_eq!(
            non_public(ip("::ffff:0:169.254.169.254")),
            Some("a link-local address (the range of cloud metadata services)")
        );
        // Forms refused whatever they carry.
        for always in [
            "::10.0.0.1",
            "::8.8.8.8",
            "64:ff9b:1::a00:1",
            "64:ff9b:1::808:808",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001::f5f5:f7f7",
        ] {
            assert!(non_public(ip(always)).is_some(), "{always} passed");
        }
    }

    #[test]
    fn host_rules() {
        let exact = HostRule::parse("Docs.Example.com").unwrap();
        assert!(exact.matches("docs.example.com"));
        assert!(!exact.matches("x.docs.example.com"));
        let domain = HostRule::parse(".example.com").unwrap();
        assert_eq!(HostRule::parse("*.example.com"), Some(domain.clone()));
        assert!(domain.matches("example.com"));
        assert!(domain.matches("a.b.example.com"));
        assert!(!domain.matches("badexample.com"));
        assert!(!domain.matches("example.com.evil.net"));
        assert_eq!(HostRule::parse(" "), None);
        assert_eq!(
            HostRule::parse("[::1]"),
            Some(HostRule::Exact("::1".into()))
        );
    }
    #[tokio::test]
    async fn the_resolver_refuses_private_names() {
        use reqwest::dns::{Name, Resolve};
        let name: Name = "localhost".parse().unwrap();
        let err = PublicOnlyResolver.resolve(name).await.err().unwrap();
        assert!(err.to_string().contains("`localhost` resolves to"), "{err}");
        assert!(err.to_string().contains("SSRF"), "{err}");
    }

    #[tokio::test]
    async fn urls_are_checked() {
        let rules = Rules::new(&InternetConfig::default(), &[]);
        let check = |u: &str| {
            let rules = rules.clone();
            let url = Url::parse(u).unwrap();
            async move { rules.check(&url).await }
        };
        let err = check("file:///etc/passwd").await.unwrap_err();
        assert!(err.contains("only http:// and https://"), "{err}");
        let err = check("http://169.254.169.254/latest/meta-data/")
            .await
            .unwrap_err();
        assert!(
            err.contains("169.254.169.254 is a link-local address"),
            "{err}"
        );
        assert!(err.contains("SSRF"), "{err}");
        let err = check("http://[::1]:8080/").await.unwrap_err();
        assert!(err.contains("loopback"), "{err}");
        let err = check("http://localhost/").await.unwrap_err();
        assert!(err.contains("`localhost` resolves to"), "{err}");
        // Decimal IPv4 is normalised by the URL parser.
        let err = check("http://2130706433/").await.unwrap_err();
        assert!(err.contains("127.0.0.1 is a loopback"), "{err}");
        let only = Rules::new(
            &InternetConfig {
                allowed_hosts: vec![".example.com".into()],
                ..Default::default()
            },
            &[],
        );
        let err = only
            .check(&Url::parse("https://evil.net/x").unwrap())
            .await
            .unwrap_err();
        assert!(
            err.contains("`evil.net` is not in toolsets.internet.allowed_hosts"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn triage_s_own_port_is_never_fetched_unless_its_host_is_listed() {
        let open = Rules::new(
            &InternetConfig {
                allow_private_addresses: true,
                ..Default::default()
            },
            &[5050],
        );
        for url in [
            "http://127.0.0.1:5050/api/conversations",
            "http://[::1]:5050/api/info",
            "http://triage.example.com:5050/",
        ] {
            let err = open.check(&Url::parse(url).unwrap()).await.unwrap_err();
            assert!(
                err.contains("port 5050 is the port triage itself listens on"),
                "{err}"
            );
        }
        assert!(
            open.check(&Url::parse("http://127.0.0.1:8080/").unwrap())
                .await
                .is_ok()
        );
        let listed = Rules::new(
            &InternetConfig {
                allowed_hosts: vec!["docs.example.com".into()],
                allow_private_addresses: true,
                ..Default::default()
            },
            &[443],
        );
        assert!(
            listed
                .check(&Url::parse("https://docs.example.com/").unwrap())
                .await
                .is_ok()
        );
    }
}
