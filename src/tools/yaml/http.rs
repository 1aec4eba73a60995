//! Tools of a `type: http` toolset: one request each, to a URL rendered from a template with
//! the model's values percent-encoded. Only http(s); headers come from the toolset's file
//! (`${VAR}` read from triage's environment at start-up) and never from the model; redirects
//! are not followed (a header's credentials go only where the file says); the body is read up
//! to a cap.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::template::{expand_env, render_url};
use super::tool::{Param, template_values};
use crate::tools::capped::{Overflow, read_capped};
use crate::tools::{Tool, ToolContext, ToolOutput, ToolStatus};

pub struct HttpSpec<'a> {
    pub name: String,
    pub toolset: String,
    pub description: String,
    pub schema: Value,
    pub params: BTreeMap<String, Param>,
    pub url: String,
    pub method: &'a str,
    pub headers: &'a BTreeMap<String, String>,
    pub requires_approval: bool,
    pub timeout: Duration,
    pub max_output: usize,
    /// triage's listening ports: a URL whose host or port the model fills in may not end there.
    pub own_ports: &'a [u16],
    /// Trusted besides the system's roots (`CERTIFICATE`).
    pub roots: &'a crate::runtime::trust::ExtraRoots,
}

pub struct HttpTool {
    name: String,
    toolset: String,
    description: String,
    schema: Value,
    params: BTreeMap<String, Param>,
    url: String,
    /// What the rendered URL's host and port must match: the template's, with each
    /// placeholder one DNS label (a value cannot add `.evil.com` after a fixed host).
    authority: regex::Regex,
    /// triage's listening ports, when a placeholder sits in the URL's host or port (this tool
    /// runs in triage, outside the tools' network wall).
    refused_ports: Vec<u16>,
    method: reqwest::Method,
    headers: HeaderMap,
    requires_approval: bool,
    timeout: Duration,
    max_output: usize,
    client: reqwest::Client,
}

impl HttpTool {
    pub fn new(
        spec: HttpSpec<'_>,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<HttpTool, String> {
        let method = match spec.method.to_ascii_uppercase().as_str() {
            "GET" => reqwest::Method::GET,
            "POST" => reqwest::Method::POST,
            "PUT" => reqwest::Method::PUT,
            "PATCH" => reqwest::Method::PATCH,
            "DELETE" => reqwest::Method::DELETE,
            "HEAD" => reqwest::Method::HEAD,
            other => {
                return Err(format!(
                    "`method` {other} is not GET, POST, PUT, PATCH, DELETE or HEAD"
                ));
            }
        };
        let url = expand_env(&spec.url, lookup);
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!("`url` {url} must start with http:// or https://"));
        }
        let authority = authority_pattern(&url)?;
        let refused_ports = if authority_has_placeholder(&url) {
            spec.own_ports.to_vec()
        } else {
            Vec::new()
        };
        let mut headers = HeaderMap::new();
        for (key, value) in spec.headers {
            let name = HeaderName::from_bytes(key.as_bytes())
                .map_err(|_| format!("`headers`: `{key}` is not a header name"))?;
            let mut value = HeaderValue::from_str(&expand_env(value, lookup))
                .map_err(|_| format!("`headers.{key}` is not a valid header value"))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        // Its own client: no redirects, whatever the shared one does.
        let client = spec
            .roots
            .client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
        Ok(HttpTool {
            name: spec.name,
            toolset: spec.toolset,
            description: spec.description,
            schema: spec.schema,
            params: spec.params,
            url,
            authority,
            refused_ports,
            method,
            headers,
            requires_approval: spec.requires_approval,
            timeout: spec.timeout,
            max_output: spec.max_output,
            client,
        })
    }

    fn render(&self, args: &Value) -> Result<reqwest::Url, String> {
        let values = template_values(&self.params, args)?;
        let rendered = render_url(&self.url, &values)?;
        let url =
            reqwest::Url::parse(&rendered).map_err(|e| format!("invalid URL {rendered}: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("{rendered} is not an http(s) URL"));
        }
        let host = url.host_str().unwrap_or_default();
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        if !self.authority.is_match(&authority) {
            return Err(format!(
                "{rendered}: the values change the host the tool's URL names"
            ));
        }
        if let Some(port) = url.port_or_known_default()
            && self.refused_ports.contains(&port)
        {
            return Err(format!(
                "{rendered}: port {port} is the port triage itself listens on; the values may \
                 not point this tool at triage's own API"
            ));
        }
        Ok(url)
    }

    async fn call(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let url = match self.render(args) {
            Ok(u) => u,
            Err(e) => return ToolOutput::error(e),
        };
        let invocation = format!("{} {url}", self.method);
        if self.requires_approval && !ctx.user_approved {
            return ToolOutput {
                status: ToolStatus::ApprovalRequired,
                data: String::new(),
                error: Some(format!("{} requires the user's approval", self.name)),
                return_code: None,
                invocation: Some(invocation),
            };
        }
        let sent = self
            .client
            .request(self.method.clone(), url)
            .headers(self.headers.clone())
            .timeout(self.timeout)
            .send()
            .await;
        let mut out = match sent {
            Err(e) => ToolOutput::error(format!(
                "request failed: {}",
                crate::tools::describe_http_error(&e, self.timeout)
            )),
            Ok(resp) => {
                let status = resp.status();
                match read_capped(resp.bytes_stream(), self.max_output, Overflow::Stop).await {
                    Err(e) => ToolOutput::error(format!("reading the response failed: {e}")),
                    Ok(body) => {
                        let mut data = String::from_utf8_lossy(&body.bytes).into_owned();
                        if body.truncated() {
                            data.push_str(&format!(
                                "\n[response cut at {} bytes]",
                                self.max_output
                            ));
                        }
                        if status.is_success() {
                            let mut ok = ToolOutput::success(data);
                            if ok.data.is_empty() {
                                ok.status = ToolStatus::NoData;
                            }
                            ok
                        } else {
                            let mut failed = ToolOutput::error(format!("HTTP {status}"));
                            failed.data = data;
                            failed
                        }
                    }
                }
            }
        };
        out.invocation = Some(invocation);
        out
    }
}

impl Tool for HttpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn toolset(&self) -> &str {
        &self.toolset
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.schema
    }

    fn one_liner(&self, params: &Value) -> String {
        match self.render(params) {
            Ok(url) => format!("{} {url}", self.method),
            Err(_) => crate::tools::invalid_parameters_line(&self.name),
        }
    }

    fn timeout(&self) -> Duration {
        self.timeout + Duration::from_secs(15)
    }

    fn invoke<'a>(&'a self, params: &'a Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(self.call(params, ctx))
    }
}

/// The template's host (and port) as an anchored pattern: literal text as written (lowercase,
/// as URL parsing normalises hosts), each `{{ … }}` one DNS label.
/// A URL template's host and port, as written (placeholders included).
fn authority_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    &rest[..end]
}

/// Whether the model's values fill in part of the URL's host or port.
fn authority_has_placeholder(url: &str) -> bool {
    authority_of(url).contains("{{")
}

fn authority_pattern(url: &str) -> Result<regex::Regex, String> {
    let authority = authority_of(url);
    if authority.contains('@') {
        return Err(format!(
            "`url` {url}: credentials in the URL are not allowed"
        ));
    }
    let mut pattern = String::from("^");
    let mut text = authority;
    while let Some(start) = text.find("{{") {
        pattern.push_str(&regex::escape(&text[..start].to_ascii_lowercase()));
        let close = text[start..]
            .find("}}")
            .ok_or_else(|| format!("`url` {url}: an unclosed `{{{{` in the host"))?;
        pattern.push_str("[a-z0-9-]+");
        text = &text[start + close + 2..];
    }
    pattern.push_str(&regex::escape(&text.to_ascii_lowercase()));
    // A default port is dropped by URL parsing: the template's `:443` may be absent.
    let pattern = match pattern.strip_suffix(":443").or(pattern.strip_suffix(":80")) {
        Some(without) => format!("{without}(:(443|80))?$"),
        None => format!("{pattern}$"),
    };
    regex::Regex::new(&pattern).map_err(|e| format!("`url` {url}: {e}"))
}

#[cfg(test)]
mod host_tests {
    use super::authority_pattern;

    #[test]
    fn a_value_cannot_move_the_host() {
        let fixed = authority_pattern("https://api.example.com{{ p }}/v1").unwrap();
        assert!(fixed.is_match("api.example.comx"));
        assert!(!fixed.is_match("api.example.com.evil.com"));
        let label = authority_pattern("https://{{ cluster }}.grafana.net/api?q={{ q }}").unwrap();
        assert!(label.is_match("prod-1.grafana.net"));
        assert!(!label.is_match("evil.com.grafana.net"));
        let plain = authority_pattern("http://127.0.0.1:8080/x/{{ a }}").unwrap();
        assert!(plain.is_match("127.0.0.1:8080"));
        assert!(!plain.is_match("127.0.0.1:8081"));
        assert!(authority_pattern("https://u:{{ p }}@h/").is_err());
    }
}
