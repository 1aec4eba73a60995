//! The `internet` toolset: `fetch_webpage` reads a runbook, documentation or status page.
//!
//! Guarded against server-side request forgery: only http(s), optionally only allowed hosts,
//! and (unless allowed) never an address that is loopback, private, link-local (cloud
//! metadata) or otherwise not public. Redirects are followed by hand so every hop is checked,
//! and names are resolved by a resolver that refuses non-public addresses, so a checked name
//! cannot resolve elsewhere when connecting. Bodies are read up to a cap; HTML is reduced to
//! text.
//!
//! [`ssrf`] is the guard, [`fetch`] one fetch, [`content`] tells HTML, JSON and text apart,
//! [`html`] reduces HTML to text.

mod content;
mod fetch;
mod html;
mod ssrf;

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ToolContext, ToolOutput, Toolset, Typed, TypedTool};
use fetch::Fetcher;

const NAME: &str = "internet";

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

/// Builds the toolset. It uses its own HTTP client rather than a shared one: redirects must not
/// be followed automatically (each hop is checked), and names must be resolved by the
/// address-checking resolver. It trusts `roots` as every outbound client does. `own_ports`
/// are triage's listening ports, never fetched.
pub fn toolset(
    cfg: &InternetConfig,
    roots: &crate::runtime::trust::ExtraRoots,
    own_ports: &[u16],
) -> Toolset {
    if !cfg.enabled {
        return Toolset::disabled(NAME);
    }
    match Fetcher::new(cfg, roots, own_ports) {
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
                vec![Arc::new(Typed::new(FetchWebpage { fetcher }))],
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
}

impl TypedTool for FetchWebpage {
    type Params = FetchParams;

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

    fn one_liner(&self, params: &FetchParams) -> String {
        format!("Fetch {}", params.url.trim())
    }

    fn timeout(&self) -> Duration {
        self.fetcher.timeout + Duration::from_secs(5)
    }

    fn invoke<'a>(&'a self, p: FetchParams, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
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
