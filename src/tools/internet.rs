//! The `internet` toolset: `fetch_webpage` reads a runbook, documentation or status page.
//!
//! Guarded against server-side request forgery: only http(s), optionally only allowed hosts,
//! and (unless allowed) never an address that is loopback, private, link-local (cloud
//! metadata) or otherwise not public. Redirects are followed by hand so every hop is checked,
//! and names are resolved by a resolver that refuses non-public addresses, so a checked name
//! cannot resolve elsewhere when connecting. Bodies are read up to a cap; HTML is reduced to
//! text.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::{Host, Url};

use super::{
    Tool, ToolContext, ToolOutput, Toolset, describe_http_error, parameters_schema, parse_params,
};
use crate::wire::events::ToolStatus;

const NAME: &str = "internet";
const MAX_REDIRECTS: usize = 5;
/// Text width HTML is rendered at.
const HTML_WIDTH: usize = 100;
/// Bytes of an error page read for its excerpt, and characters shown.
const ERROR_BODY_BYTES: usize = 16 * 1024;
const ERROR_EXCERPT_CHARS: usize = 300;
/// HTML nested deeper than this is not converted: html2text takes quadratic time on it.
const MAX_HTML_DEPTH: usize = 1000;
const ACCEPT_VALUE: &str =
    "text/html,application/xhtml+xml,application/json;q=0.9,text/plain;q=0.9,*/*;q=0.5";

const INSTRUCTIONS: &str = "Use fetch_webpage to read runbooks, documentation and status pages, \
in particular the URLs linked in alerts (e.g. a `runbook_url` annotation) or mentioned by the \
user. HTML is reduced to text and long pages are cut. Cite the URL of every page you relied on \
in your answer.";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InternetConfig {
    pub enabled: bool,
    /// Hosts that may be fetched (every redirect hop included); empty = any host.
    /// `docs.example.com` matches that host only; `.example.com` (or `*.example.com`) matches
    /// example.com and all its subdomains.
    pub allowed_hosts: Vec<String>,
    /// Allow URLs whose host is, or resolves to, a loopback, private, link-local (cloud
    /// metadata), unique-local or other non-public address. Off: prevents SSRF.
    pub allow_private_addresses: bool,
    /// Bytes of a response body read at most; the rest is dropped (and the cut noted).
    pub max_bytes: usize,
    /// Characters of text returned at most, after HTML reduction.
    pub max_output_chars: usize,
    /// Time limit of one fetch, redirects included.
    pub timeout_secs: u64,
    pub user_agent: String,
}

impl Default for InternetConfig {
    fn default() -> Self {
        InternetConfig {
            enabled: true,
            allowed_hosts: Vec::new(),
            allow_private_addresses: false,
            max_bytes: 2 * 1024 * 1024,
            max_output_chars: 100_000,
            timeout_secs: 20,
            user_agent: concat!("triage/", env!("CARGO_PKG_VERSION")).to_owned(),
        }
    }
}

/// Builds the toolset. It uses its own HTTP client rather than the shared `http` one: redirects
/// must not be followed automatically (each hop is checked), and names must be resolved by the
/// address-checking resolver.
pub fn toolset(cfg: &InternetConfig, http: &reqwest::Client) -> Toolset {
    let _ = http;
    if !cfg.enabled {
        return Toolset::disabled(NAME);
    }
    match Fetcher::new(cfg) {
        Ok(fetcher) => {
            let mut instructions = INSTRUCTIONS.to_owned();
            if !cfg.allowed_hosts.is_empty() {
                let _ = write!(
                    instructions,
                    " Only these hosts can be fetched: {}.",
                    cfg.allowed_hosts.join(", ")
                );
            }
            Toolset::enabled(
                NAME,
                &instructions,
                vec![Arc::new(FetchWebpage {
                    fetcher,
                    schema: parameters_schema::<FetchParams>(),
                })],
            )
        }
        Err(reason) => Toolset::unavailable(NAME, reason),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FetchParams {
    /// The http:// or https:// URL of the page.
    url: String,
}

struct FetchWebpage {
    fetcher: Fetcher,
    schema: Value,
}

impl Tool for FetchWebpage {
    fn name(&self) -> &str {
        "fetch_webpage"
    }

    fn toolset(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Fetch a web page (runbook, documentation, status page) over http(s) and return its \
         content: HTML reduced to readable text, JSON and plain text as they are."
    }

    fn parameters(&self) -> &Value {
        &self.schema
    }

    fn one_liner(&self, params: &Value) -> String {
        let url = params.get("url").and_then(Value::as_str).unwrap_or("");
        format!("Fetch {}", url.trim())
    }

    fn timeout(&self) -> Duration {
        self.fetcher.timeout + Duration::from_secs(5)
    }

    fn invoke<'a>(&'a self, params: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let p = match parse_params::<FetchParams>(params) {
                Ok(p) => p,
                Err(e) => return ToolOutput::error(e),
            };
            let limit = self.fetcher.timeout;
            match tokio::time::timeout(limit, self.fetcher.fetch(&p.url)).await {
                Ok(Ok(out)) => out,
                Ok(Err(e)) => ToolOutput::error(e),
                Err(_) => ToolOutput::error(format!(
                    "fetching {} timed out after {} s",
                    p.url.trim(),
                    limit.as_secs()
                )),
            }
        })
    }
}

struct Fetcher {
    client: reqwest::Client,
    rules: Rules,
    max_bytes: usize,
    max_output_chars: usize,
    timeout: Duration,
}

/// Which URLs may be fetched.
#[derive(Debug, Clone)]
struct Rules {
    allowed_hosts: Vec<HostRule>,
    allow_private: bool,
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
    fn new(cfg: &InternetConfig) -> Rules {
        Rules {
            allowed_hosts: cfg
                .allowed_hosts
                .iter()
                .filter_map(|e| HostRule::parse(e))
                .collect(),
            allow_private: cfg.allow_private_addresses,
        }
    }

    /// Checks a URL (the requested one or a redirect target) before connecting.
    async fn check(&self, url: &Url) -> Result<(), String> {
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
        if !self.allowed_hosts.is_empty()
            && !self.allowed_hosts.iter().any(|r| r.matches(&host_name))
        {
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
struct PublicOnlyResolver;

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
fn proxy_in_environment() -> bool {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Html,
    Json,
    Text,
}

/// The kind of a `Content-Type`: `Ok(None)` when absent (sniff the body), `Err` when
/// unsupported.
fn classify(content_type: Option<&str>) -> Result<Option<Kind>, String> {
    let Some(ct) = content_type else {
        return Ok(None);
    };
    let mime = ct
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    Ok(Some(match mime.as_str() {
        "" => return Ok(None),
        "text/html" | "application/xhtml+xml" => Kind::Html,
        "application/json" | "application/x-ndjson" => Kind::Json,
        m if m.ends_with("+json") => Kind::Json,
        m if m.starts_with("text/") => Kind::Text,
        "application/xml" | "application/yaml" | "application/x-yaml" | "application/toml" => {
            Kind::Text
        }
        m if m.ends_with("+xml") => Kind::Text,
        _ => return Err(mime),
    }))
}

/// Guesses the kind of a body sent without a content type.
fn sniff(body: &[u8]) -> Option<Kind> {
    let head = &body[..body.len().min(4096)];
    if head.contains(&0) {
        return None;
    }
    let text = String::from_utf8_lossy(head);
    let start = text.trim_start().to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") || start.contains("<body")
    {
        Some(Kind::Html)
    } else if start.starts_with('{') || start.starts_with('[') {
        Some(Kind::Json)
    } else {
        Some(Kind::Text)
    }
}

impl Fetcher {
    fn new(cfg: &InternetConfig) -> Result<Fetcher, String> {
        let timeout = Duration::from_secs(cfg.timeout_secs.max(1));
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(cfg.user_agent.as_str())
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .timeout(timeout);
        if !cfg.allow_private_addresses && !proxy_in_environment() {
            builder = builder.dns_resolver(PublicOnlyResolver);
        }
        let client = builder
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Fetcher {
            client,
            rules: Rules::new(cfg),
            max_bytes: cfg.max_bytes.max(1),
            max_output_chars: cfg.max_output_chars.max(1),
            timeout,
        })
    }

    async fn fetch(&self, raw: &str) -> Result<ToolOutput, String> {
        let raw = raw.trim();
        let mut url = Url::parse(raw).map_err(|e| format!("invalid URL `{raw}`: {e}"))?;
        url.set_fragment(None);
        let requested = url.clone();
        let mut redirects = 0;
        let resp = loop {
            self.rules.check(&url).await?;
            let resp = self
                .client
                .get(url.clone())
                .header(ACCEPT, ACCEPT_VALUE)
                .send()
                .await
                .map_err(|e| {
                    format!(
                        "cannot fetch {url}: {}",
                        describe_http_error(&e, self.timeout)
                    )
                })?;
            let location = resp
                .headers()
                .get(LOCATION)
                .filter(|_| resp.status().is_redirection());
            let Some(location) = location else {
                break resp;
            };
            let location = location
                .to_str()
                .map_err(|_| format!("{url} redirected to an unreadable Location"))?;
            let mut next = url
                .join(location)
                .map_err(|e| format!("{url} redirected to an invalid URL `{location}`: {e}"))?;
            next.set_fragment(None);
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                return Err(format!(
                    "too many redirects (more than {MAX_REDIRECTS}) from {requested}; the last \
                     one pointed to {next}"
                ));
            }
            url = next;
        };
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if !status.is_success() {
            let body = read_capped(resp, ERROR_BODY_BYTES)
                .await
                .map(|(b, _)| b)
                .unwrap_or_default();
            let excerpt = error_excerpt(&body, content_type.as_deref());
            let mut msg = format!("{url} answered HTTP {status}");
            if !excerpt.is_empty() {
                let _ = write!(msg, ": {excerpt}");
            }
            return Err(msg);
        }
        let declared = classify(content_type.as_deref()).map_err(|mime| {
            format!(
                "unsupported content type `{mime}` at {url}: only HTML, JSON and text can be read"
            )
        })?;
        let (body, cut_bytes) = read_capped(resp, self.max_bytes).await.map_err(|e| {
            format!(
                "cannot read {url}: {}",
                describe_http_error(&e, self.timeout)
            )
        })?;
        let kind = declared.or_else(|| sniff(&body)).ok_or_else(|| {
            format!("unsupported content type at {url}: none declared, and the body is not text")
        })?;
        let (text, title) = match kind {
            Kind::Html => {
                if html_nesting_depth(&body) > MAX_HTML_DEPTH {
                    return Err(format!(
                        "cannot convert the HTML page at {url} to text: its elements are nested \
                         more than {MAX_HTML_DEPTH} levels deep"
                    ));
                }
                // Off the async workers: conversion of a large page takes a while.
                let title = html_title(&body);
                let text = tokio::task::spawn_blocking(move || html_to_text(&body))
                    .await
                    .map_err(|_| format!("converting the HTML page at {url} to text failed"))??;
                (text, title)
            }
            Kind::Json | Kind::Text => (String::from_utf8_lossy(&body).into_owned(), None),
        };
        let (text, cut_chars) = clip_chars(text, self.max_output_chars);

        let mut out = format!("URL: {url}");
        if url != requested {
            let _ = write!(out, " (redirected from {requested})");
        }
        let _ = write!(
            out,
            "\nContent-Type: {}",
            content_type.as_deref().unwrap_or("(none)")
        );
        if let Some(title) = title {
            let _ = write!(out, "\nTitle: {title}");
        }
        let empty = text.trim().is_empty();
        if empty {
            out.push_str("\n\nThe page has no readable text.");
        } else {
            let _ = write!(out, "\n\n{}", text.trim_end());
        }
        if cut_bytes {
            let _ = write!(
                out,
                "\n\n[Truncated: the body is larger than {} bytes; only the first {} bytes \
                 were read.]",
                self.max_bytes, self.max_bytes
            );
        }
        if cut_chars {
            let _ = write!(
                out,
                "\n\n[Truncated: the text was cut at {} characters.]",
                self.max_output_chars
            );
        }
        let mut output = ToolOutput::success(out);
        if empty {
            output.status = ToolStatus::NoData;
        }
        output.invocation = Some(format!("GET {url}"));
        Ok(output)
    }
}

/// At most `cap` bytes of the body, and whether more was left unread.
async fn read_capped(
    resp: reqwest::Response,
    cap: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

fn html_to_text(body: &[u8]) -> Result<String, String> {
    let text = html2text::from_read(body, HTML_WIDTH)
        .map_err(|e| format!("cannot convert the HTML page to text: {e}"))?;
    // Trailing spaces off, and no more than one blank line in a row.
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(out.trim().to_owned())
}

/// The deepest nesting of block containers (`div`, `ul`, `blockquote`…), counted from their
/// start and end tags: a cheap guard, not a parse.
fn html_nesting_depth(body: &[u8]) -> usize {
    const CONTAINERS: [&[u8]; 20] = [
        b"div",
        b"ul",
        b"ol",
        b"dl",
        b"blockquote",
        b"section",
        b"article",
        b"aside",
        b"nav",
        b"main",
        b"header",
        b"footer",
        b"form",
        b"fieldset",
        b"details",
        b"figure",
        b"table",
        b"pre",
        b"center",
        b"menu",
    ];
    let (mut depth, mut max) = (0usize, 0usize);
    let mut i = 0;
    while let Some(offset) = body[i..].iter().position(|&b| b == b'<') {
        let mut j = i + offset + 1;
        let closing = body.get(j) == Some(&b'/');
        if closing {
            j += 1;
        }
        let len = body[j..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        let name = body[j..j + len].to_ascii_lowercase();
        if CONTAINERS.contains(&name.as_slice()) {
            if closing {
                depth = depth.saturating_sub(1);
            } else {
                depth += 1;
                max = max.max(depth);
            }
        }
        i = j + len;
    }
    max
}

/// The `<title>` of an HTML page (html2text drops the head).
fn html_title(body: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(64 * 1024)]);
    let lower = head.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let raw = format!("<p>{}</p>", &head[start..end]);
    let title = html2text::from_read(raw.as_bytes(), 10_000).ok()?;
    let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
    (!title.is_empty()).then_some(title)
}

fn error_excerpt(body: &[u8], content_type: Option<&str>) -> String {
    let html = matches!(classify(content_type), Ok(Some(Kind::Html)))
        || (content_type.is_none() && sniff(body) == Some(Kind::Html));
    let text = if html {
        html_to_text(body).unwrap_or_default()
    } else {
        String::from_utf8_lossy(body).into_owned()
    };
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (clipped, cut) = clip_chars(one_line, ERROR_EXCERPT_CHARS);
    if cut {
        format!("{clipped}…")
    } else {
        clipped
    }
}

/// The text cut to `max` characters, and whether it was cut.
fn clip_chars(text: String, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((i, _)) => (text[..i].to_owned(), true),
        None => (text, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn content_types() {
        assert_eq!(
            classify(Some("text/html; charset=utf-8")),
            Ok(Some(Kind::Html))
        );
        assert_eq!(
            classify(Some("application/problem+json")),
            Ok(Some(Kind::Json))
        );
        assert_eq!(classify(Some("text/markdown")), Ok(Some(Kind::Text)));
        assert_eq!(classify(None), Ok(None));
        assert_eq!(classify(Some("image/png")), Err("image/png".into()));
        assert_eq!(sniff(b"  <!DOCTYPE html><p>x"), Some(Kind::Html));
        assert_eq!(sniff(b"{\"a\":1}"), Some(Kind::Json));
        assert_eq!(sniff(b"\x89PNG\0\0"), None);
    }

    #[test]
    fn html_is_reduced() {
        let html = b"<html><head><title>Run &amp; book</title><style>p{color:red}</style>\
            </head><body><script>var secret=1;</script><h1>Restart</h1>\n\n\n<p>Do   it.</p></body></html>";
        let text = html_to_text(html).unwrap();
        assert!(text.contains("Restart"), "{text}");
        assert!(text.contains("Do it."), "{text}");
        assert!(
            !text.contains("secret") && !text.contains("color"),
            "{text}"
        );
        assert_eq!(html_title(html).as_deref(), Some("Run & book"));
        assert_eq!(clip_chars("héllo".into(), 2), ("hé".into(), true));
        assert_eq!(html_nesting_depth(html), 0);
        assert_eq!(html_nesting_depth(b"<div><DIV>x</div></div><div></div>"), 2);
        assert_eq!(html_nesting_depth("<ul><li>".repeat(5).as_bytes()), 5);
        assert_eq!(
            html_nesting_depth("<div>x</div>".repeat(5000).as_bytes()),
            1
        );
        assert_eq!(html_nesting_depth(b"<"), 0);
        assert_eq!(clip_chars("hé".into(), 2), ("hé".into(), false));
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
        let rules = Rules::new(&InternetConfig::default());
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
        let only = Rules::new(&InternetConfig {
            allowed_hosts: vec![".example.com".into()],
            ..Default::default()
        });
        let err = only
            .check(&Url::parse("https://evil.net/x").unwrap())
            .await
            .unwrap_err();
        assert!(
            err.contains("`evil.net` is not in toolsets.internet.allowed_hosts"),
            "{err}"
        );
    }
}
