//! The generic webhook: a JSON POST of `{check_name, status, analysis, source_type, url}`,
//! or of the destination's `payload_template` filled in, with the destination's headers.

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

use super::{Alert, answer_text, excerpt, template, transport_error};
use crate::runtime::destinations::refused_host;

/// What HolmesGPT's webhook says a failed check's source is.
const SOURCE_TYPE: &str = "HealthCheck";
/// Headers a destination may not set: the client sets them from the body.
const FIXED_HEADERS: &[&str] = &["content-length", "host", "transfer-encoding", "connection"];

#[derive(Debug)]
pub struct WebhookTarget {
    url: url::Url,
    headers: HeaderMap,
    payload_template: Option<Value>,
}

impl WebhookTarget {
    pub fn parse(config: &Map<String, Value>) -> Result<WebhookTarget, String> {
        let raw = match config.get("url") {
            Some(Value::String(url)) if !url.trim().is_empty() => url.trim(),
            _ => return Err("webhook needs `config.url`, an http(s) URL".into()),
        };
        let url = url::Url::parse(raw).map_err(|e| format!("`config.url` is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "`config.url` must be http or https, not `{}`",
                url.scheme()
            ));
        }
        let host = url.host().ok_or("`config.url` has no host")?;
        if let Some(why) = refused_host(&host) {
            return Err(format!("`config.url`: {why}"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(
                "`config.url` may not carry credentials; put them in `config.headers`".into(),
            );
        }
        let mut headers = HeaderMap::new();
        match config.get("headers") {
            None | Some(Value::Null) => {}
            Some(Value::Object(given)) => {
                for (name, value) in given {
                    let header = HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| format!("`config.headers`: `{name}` is not a header name"))?;
                    if FIXED_HEADERS.contains(&header.as_str()) {
                        return Err(format!("`config.headers` may not set `{name}`"));
                    }
                    // The value is never quoted back: it is often a credential.
                    let value = value
                        .as_str()
                        .and_then(|v| HeaderValue::from_str(v).ok())
                        .ok_or_else(|| {
                            format!("`config.headers.{name}` must be a string valid in a header")
                        })?;
                    headers.insert(header, value);
                }
            }
            Some(_) => return Err("`config.headers` must be an object of strings".into()),
        }
        let payload_template = match config.get("payload_template") {
            None | Some(Value::Null) => None,
            Some(template) => Some(template.clone()),
        };
        Ok(WebhookTarget {
            url,
            headers,
            payload_template,
        })
    }

    /// The receiver as reports name it: scheme and host, never the path or query.
    pub fn origin(&self) -> String {
        self.url.origin().ascii_serialization()
    }

    /// What the request carries that may be a credential, longest first: the header values,
    /// the URL's path and query, and the query's values (as sent and decoded).
    fn credentials(&self) -> Vec<String> {
        let mut found: Vec<String> = self
            .headers
            .values()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect();
        if self.url.path() != "/" {
            found.push(self.url.path().to_owned());
            let decoded = percent_encoding::percent_decode_str(self.url.path()).decode_utf8_lossy();
            found.push(decoded.into_owned());
        }
        if let Some(query) = self.url.query() {
            found.push(query.to_owned());
            found.extend(
                query
                    .split('&')
                    .filter_map(|pair| pair.split_once('=').map(|(_, v)| v.to_owned())),
            );
            found.extend(self.url.query_pairs().map(|(_, v)| v.into_owned()));
        }
        found.sort_by_key(|v| std::cmp::Reverse(v.len()));
        found
    }

    pub async fn post(&self, client: &reqwest::Client, alert: &Alert<'_>) -> Result<(), String> {
        let fields = [
            ("check_name", alert.check_name),
            ("status", "fail"),
            ("analysis", alert.analysis),
            ("source_type", SOURCE_TYPE),
            ("url", ""),
        ];
        let body = match &self.payload_template {
            Some(t) => template::render(t, &fields).ok_or_else(|| {
                format!(
                    "`payload_template` filled in would be over {} bytes; not sent",
                    template::MAX_FILLED_BYTES
                )
            })?,
            None => json!({
                "check_name": alert.check_name,
                "status": "fail",
                "analysis": alert.analysis,
                "source_type": SOURCE_TYPE,
                "url": "",
            }),
        };
        let mut headers = self.headers.clone();
        headers
            .entry(CONTENT_TYPE)
            .or_insert(HeaderValue::from_static("application/json"));
        let response = client
            .post(self.url.clone())
            .headers(headers)
            .body(body.to_string())
            .send()
            .await
            .map_err(transport_error)?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        // A receiver that echoes the request back (its headers, or its URL as many error pages
        // do) must not echo its credentials into ours.
        let said = self
            .credentials()
            .iter()
            .filter(|v| v.len() >= 4)
            .fold(answer_text(response).await, |text, secret| {
                text.replace(secret.as_str(), crate::agent::MASK)
            });
        let said = excerpt(&said);
        Err(format!(
            "the receiver answered HTTP {}: {said}",
            status.as_u16()
        ))
    }
}
