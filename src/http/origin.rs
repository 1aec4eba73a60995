//! Drive-by protection for browsers. A web page can POST `text/plain` to triage without a CORS
//! preflight, and with DNS rebinding it can even read the answer. Two checks close this:
//! - a request with an `Origin` that is neither triage's own nor in `cors_allowed_origins` may
//!   only read (GET/HEAD/OPTIONS);
//! - without API keys, the `Host` must be a name a rebinding page cannot use: `localhost`,
//!   `*.localhost`, an IP address, or a name in `allowed_hosts`.
//!
//! Clients that send no `Origin` (curl, SDKs, HolmesGPT clients) are not browsers and pass.
//! With API keys the `Host` is not checked: a rebinding page cannot know the key.

use axum::http::uri::Authority;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};

use super::ApiError;

/// What the two checks compare against, built once from the settings.
#[derive(Clone, Debug, Default)]
pub struct BrowserGuard {
    /// `cors_allowed_origins`, lower-case; `*` allows every origin.
    pub cors_origins: Vec<String>,
    /// `allowed_hosts`, lower-case; `*` allows every host.
    pub allowed_hosts: Vec<String>,
    /// Whether API keys are required (then the `Host` is not checked).
    pub keyed: bool,
}

impl BrowserGuard {
    pub fn new(cors_origins: &[String], allowed_hosts: &[String], keyed: bool) -> BrowserGuard {
        let lower = |list: &[String]| {
            list.iter()
                .map(|s| s.trim().trim_end_matches('/').to_ascii_lowercase())
                .filter(|s| !s.is_empty())
                .collect()
        };
        BrowserGuard {
            cors_origins: lower(cors_origins),
            allowed_hosts: lower(allowed_hosts),
            keyed,
        }
    }

    /// `Err` with the `{"detail"}` to answer when the request must be refused.
    pub fn check(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Result<(), ApiError> {
        let host = request_host(uri, headers);
        if !self.keyed
            && let Some(host) = &host
            && !self.host_allowed(host)
        {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "Host '{host}' is not allowed: without API keys triage answers only \
                     localhost, *.localhost and IP addresses (a guard against DNS rebinding). \
                     Add the name to server.allowed_hosts, or configure an API key"
                ),
            ));
        }
        if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
            return Ok(());
        }
        let Some(origin) = headers.get(header::ORIGIN) else {
            return Ok(());
        };
        let origin = origin.to_str().unwrap_or("").trim();
        if self.origin_allowed(origin, host.as_ref()) {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "Cross-origin request refused: Origin '{origin}' is neither this server's own \
                 origin nor listed in server.cors_allowed_origins"
            ),
        ))
    }

    fn host_allowed(&self, host: &Authority) -> bool {
        let name = host.host().to_ascii_lowercase();
        // Browsers resolve *.localhost to loopback themselves (RFC 6761), and a page can reach
        // an IP address only by being served from it: neither can be rebound.
        if name == "localhost" || name.ends_with(".localhost") || is_ip_literal(&name) {
            return true;
        }
        let full = host.as_str().to_ascii_lowercase();
        self.allowed_hosts
            .iter()
            .any(|h| h == "*" || *h == name || *h == full)
    }

    fn origin_allowed(&self, origin: &str, host: Option<&Authority>) -> bool {
        let lower = origin.to_ascii_lowercase();
        if self.cors_origins.iter().any(|o| o == "*" || *o == lower) {
            return true;
        }
        host.is_some_and(|host| same_authority(&lower, host))
    }
}

/// The `Host` header, or the URI's authority (HTTP/2 sends `:authority` instead). None for
/// clients that send neither, which no browser does.
fn request_host(uri: &Uri, headers: &HeaderMap) -> Option<Authority> {
    match headers.get(header::HOST) {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.parse::<Authority>().ok())
                // An unparsable Host is never one of ours; keep it so the check names it.
                .unwrap_or_else(|| Authority::from_static("invalid-host")),
        ),
        None => uri.authority().cloned(),
    }
}

fn is_ip_literal(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<std::net::IpAddr>().is_ok()
}

/// Whether `origin` names the host and port the request was sent to. The scheme is not
/// compared: behind a TLS-terminating proxy the page is `https` and triage sees plain HTTP.
fn same_authority(origin: &str, host: &Authority) -> bool {
    let Ok(url) = url::Url::parse(origin) else {
        return false;
    };
    let (Some(origin_host), Some(origin_port)) = (url.host_str(), url.port_or_known_default())
    else {
        return false;
    };
    // A Host without a port means the default port of the scheme the browser used (`Url`
    // reports no port when the origin's is its scheme's default).
    let ports_match = match host.port_u16() {
        Some(port) => port == origin_port,
        None => url.port().is_none(),
    };
    origin_host.eq_ignore_ascii_case(host.host()) && ports_match
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(guard: &BrowserGuard, method: Method, host: &str, origin: Option<&str>) -> bool {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, host.parse().unwrap());
        if let Some(o) = origin {
            headers.insert(header::ORIGIN, o.parse().unwrap());
        }
        guard
            .check(&method, &Uri::from_static("/api/chat"), &headers)
            .is_ok()
    }

    #[test]
    fn keyless_servers_answer_only_unrebindable_hosts() {
        let g = BrowserGuard::new(&[], &["triage.internal".into()], false);
        for host in [
            "localhost:5050",
            "LOCALHOST",
            "app.localhost:1",
            "127.0.0.1:5050",
            "[::1]:5050",
            "10.1.2.3:5050",
            "triage.internal:8080",
        ] {
            assert!(check(&g, Method::GET, host, None), "{host}");
        }
        for host in [
            "evil.example:5050",
            "localhost.evil.example",
            "triage.internal.x",
        ] {
            assert!(!check(&g, Method::GET, host, None), "{host}");
        }
        let keyed = BrowserGuard::new(&[], &[], true);
        assert!(check(&keyed, Method::POST, "evil.example:5050", None));
        let any = BrowserGuard::new(&[], &["*".into()], false);
        assert!(check(&any, Method::GET, "evil.example", None));
    }

    #[test]
    fn foreign_origins_may_only_read() {
        let g = BrowserGuard::new(&["https://console.example/".into()], &[], false);
        let host = "127.0.0.1:5050";
        assert!(check(&g, Method::POST, host, None));
        assert!(check(&g, Method::POST, host, Some("http://127.0.0.1:5050")));
        assert!(check(
            &g,
            Method::POST,
            host,
            Some("https://console.example")
        ));
        assert!(check(&g, Method::GET, host, Some("http://evil.example")));
        for origin in [
            "http://evil.example",
            "http://127.0.0.1:5051",
            "http://127.0.0.1",
            "null",
            "",
        ] {
            assert!(!check(&g, Method::POST, host, Some(origin)), "{origin}");
        }
        // A default port is the same whether written or not.
        let proxied = BrowserGuard::new(&[], &["triage.example".into()], false);
        assert!(check(
            &proxied,
            Method::POST,
            "triage.example",
            Some("https://triage.example")
        ));
        assert!(check(
            &proxied,
            Method::POST,
            "triage.example:443",
            Some("https://triage.example")
        ));
        let any = BrowserGuard::new(&["*".into()], &[], false);
        assert!(check(&any, Method::POST, host, Some("http://evil.example")));
    }
}
