//! The Prometheus HTTP API client: endpoints under the configured base URL, headers, the
//! response envelope, and errors worded for the model.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::Value;
use url::Url;

use super::PrometheusConfig;
use crate::tools::capped::{Overflow, read_capped};
use crate::tools::{ToolContext, describe_http_error};

const STARTUP_CHECK_TIMEOUT: Duration = Duration::from_secs(3);
/// Largest API answer read; bigger ones mean the query must be narrowed.
const MAX_RESPONSE_BYTES: usize = 32 << 20;

/// The HTTP side: base URL, headers, timeouts.
pub(super) struct Api {
    http: reqwest::Client,
    base: Url,
    /// The base URL as shown in messages (no password, no trailing slash).
    pub(super) display: String,
    headers: HeaderMap,
    /// Lower-case names of request headers to pass on (`forward_headers`).
    forward: Vec<String>,
    pub(super) timeout: Duration,
    pub(super) max_series: usize,
}

/// A successful API answer: its `data` and any warnings.
pub(super) struct Answer {
    pub(super) data: Value,
    pub(super) warnings: Vec<String>,
    pub(super) url: Url,
}

pub(super) enum ApiError {
    /// Network, timeout or size trouble, described.
    Transport(String),
    /// A non-2xx answer that is not an API error envelope.
    Http { status: StatusCode, excerpt: String },
    /// `{"status":"error","errorType":…,"error":…}`.
    Api { kind: String, message: String },
    /// A 2xx answer that is not the Prometheus API.
    NotPrometheus(String),
}

#[derive(Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Value,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
    #[serde(default)]
    infos: Vec<String>,
}

impl Api {
    pub(super) fn new(
        cfg: &PrometheusConfig,
        raw: &str,
        http: reqwest::Client,
    ) -> Result<Api, String> {
        let invalid = |why: String| format!("invalid toolsets.prometheus.url `{raw}`: {why}");
        let mut base = Url::parse(raw).map_err(|e| invalid(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(invalid("expected an http:// or https:// URL".into()));
        }
        base.set_query(None);
        base.set_fragment(None);
        let mut shown = base.clone();
        let _ = shown.set_password(None);
        let display = shown.as_str().trim_end_matches('/').to_owned();
        let mut headers = HeaderMap::new();
        for (k, v) in &cfg.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("invalid header name `{k}` in toolsets.prometheus.headers"))?;
            let mut value = HeaderValue::from_str(v).map_err(|_| {
                format!("invalid value for header `{k}` in toolsets.prometheus.headers")
            })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        Ok(Api {
            http,
            base,
            display,
            headers,
            forward: cfg
                .forward_headers
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .collect(),
            timeout: Duration::from_secs(cfg.timeout_secs.max(1)),
            max_series: cfg.max_series.max(1),
        })
    }

    /// The chat request's headers this toolset is configured to pass on (the HTTP layer has
    /// already removed blocked ones such as Authorization and Cookie).
    pub(super) fn forwarded(&self, ctx: &ToolContext) -> HeaderMap {
        let mut out = HeaderMap::new();
        for (name, value) in ctx.request_headers.iter() {
            if !self.forward.iter().any(|f| name.eq_ignore_ascii_case(f)) {
                continue;
            }
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                out.insert(n, v);
            }
        }
        out
    }

    fn endpoint(&self, segments: &[&str], query: &[(&str, &str)]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    pub(super) async fn get(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
        timeout: Duration,
        forwarded: &HeaderMap,
    ) -> Result<Answer, ApiError> {
        let url = self.endpoint(segments, query);
        let resp = self
            .http
            .get(url.clone())
            .headers(forwarded.clone())
            .headers(self.headers.clone())
            .header(ACCEPT, "application/json")
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| ApiError::Transport(describe_http_error(&e, timeout)))?;
        let status = resp.status();
        let body = read_capped(resp.bytes_stream(), MAX_RESPONSE_BYTES, Overflow::Stop)
            .await
            .map_err(|e| ApiError::Transport(describe_http_error(&e, timeout)))?;
        if body.truncated() {
            return Err(ApiError::Transport(format!(
                "the answer is larger than {} MiB; narrow the query",
                MAX_RESPONSE_BYTES >> 20
            )));
        }
        let body = body.bytes;
        match serde_json::from_slice::<Envelope>(&body) {
            Ok(env) if env.status == "success" => {
                let mut warnings = env.warnings;
                warnings.extend(env.infos);
                Ok(Answer {
                    data: env.data,
                    warnings,
                    url,
                })
            }
            Ok(env) if env.status == "error" => Err(ApiError::Api {
                kind: env.error_type.unwrap_or_else(|| "error".into()),
                message: env.error.unwrap_or_else(|| "(no message)".into()),
            }),
            _ if !status.is_success() => Err(ApiError::Http {
                status,
                excerpt: excerpt(&body),
            }),
            _ => Err(ApiError::NotPrometheus(excerpt(&body))),
        }
    }

    /// Start-up check: the build info, or (for Prometheus-compatible servers without that
    /// endpoint) a trivial query. Returns the version when known.
    pub(super) async fn check(&self) -> Result<Option<String>, String> {
        let t = STARTUP_CHECK_TIMEOUT;
        match self
            .get(
                &["api", "v1", "status", "buildinfo"],
                &[],
                t,
                &HeaderMap::new(),
            )
            .await
        {
            Ok(a) => Ok(a
                .data
                .get("version")
                .and_then(Value::as_str)
                .map(str::to_owned)),
            Err(ApiError::Http { status, .. }) if status == StatusCode::NOT_FOUND => self
                .get(
                    &["api", "v1", "query"],
                    &[("query", "1")],
                    t,
                    &HeaderMap::new(),
                )
                .await
                .map(|_| None)
                .map_err(|e| self.startup_reason(e)),
            Err(e) => Err(self.startup_reason(e)),
        }
    }

    fn startup_reason(&self, e: ApiError) -> String {
        let url = &self.display;
        match e {
            ApiError::Transport(why) => format!("cannot reach Prometheus at {url}: {why}"),
            ApiError::Http { status, .. }
                if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN =>
            {
                format!(
                    "Prometheus at {url} refused access (HTTP {status}); check \
                     toolsets.prometheus.headers"
                )
            }
            ApiError::NotPrometheus(body) => {
                format!("{url} does not look like a Prometheus server; it answered: {body}")
            }
            other => self.message(other),
        }
    }

    /// The error as the LLM reads it.
    pub(super) fn message(&self, e: ApiError) -> String {
        let url = &self.display;
        match e {
            ApiError::Transport(why) => format!("cannot reach Prometheus at {url}: {why}"),
            ApiError::Http { status, excerpt } => {
                format!("Prometheus at {url} answered HTTP {status}: {excerpt}")
            }
            ApiError::Api { kind, message } => format!("Prometheus error ({kind}): {message}"),
            ApiError::NotPrometheus(body) => {
                format!("unexpected answer from {url} (not the Prometheus API): {body}")
            }
        }
    }
}

fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None if one_line.is_empty() => "(empty body)".into(),
        None => one_line,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::sync::Arc;

    pub(crate) fn client() -> reqwest::Client {
        crate::runtime::install_crypto_provider();
        reqwest::Client::new()
    }

    pub(crate) fn api(url: &str) -> Arc<Api> {
        let cfg = PrometheusConfig {
            url: Some(url.into()),
            ..Default::default()
        };
        Arc::new(Api::new(&cfg, url, client()).unwrap())
    }

    #[test]
    fn endpoints_keep_the_path_prefix() {
        let a = api("http://prom:9090");
        assert_eq!(
            a.endpoint(&["api", "v1", "query"], &[("query", "up{job=\"a b\"}")])
                .as_str(),
            "http://prom:9090/api/v1/query?query=up%7Bjob%3D%22a+b%22%7D"
        );
        let a = api("https://u:secret@mimir.example/prometheus/");
        assert_eq!(a.display, "https://u@mimir.example/prometheus");
        assert_eq!(
            a.endpoint(&["api", "v1", "label", "a/b", "values"], &[])
                .as_str(),
            "https://u:secret@mimir.example/prometheus/api/v1/label/a%2Fb/values"
        );
    }

    #[test]
    fn config_is_checked_and_headers_are_redacted() {
        let cfg = PrometheusConfig {
            headers: [("Authorization".to_owned(), "Bearer s3cret".to_owned())].into(),
            ..Default::default()
        };
        assert!(!format!("{cfg:?}").contains("s3cret"));
        let err = Api::new(&cfg, "ftp://x", client()).err().unwrap();
        assert!(err.contains("expected an http"), "{err}");
        let bad = PrometheusConfig {
            headers: [("Bad Header".to_owned(), "x".to_owned())].into(),
            ..Default::default()
        };
        let err = Api::new(&bad, "http://x", client()).err().unwrap();
        assert!(err.contains("invalid header name `Bad Header`"), "{err}");
    }

    #[test]
    fn errors_are_worded_for_the_model() {
        let a = api("http://prom:9090");
        let msg = a.message(ApiError::Api {
            kind: "bad_data".into(),
            message: "1:5: parse error: unexpected end of input".into(),
        });
        assert_eq!(
            msg,
            "Prometheus error (bad_data): 1:5: parse error: unexpected end of input"
        );
        let msg = a.message(ApiError::Http {
            status: StatusCode::BAD_GATEWAY,
            excerpt: excerpt(b"<html>\n  upstream   down</html>"),
        });
        assert_eq!(
            msg,
            "Prometheus at http://prom:9090 answered HTTP 502 Bad Gateway: <html> upstream down</html>"
        );
        let msg = a.startup_reason(ApiError::Transport(
            "Connection refused (os error 111)".into(),
        ));
        assert_eq!(
            msg,
            "cannot reach Prometheus at http://prom:9090: Connection refused (os error 111)"
        );
    }
}
