//! The HTTP side of `triage conversations`: one running triage, its API key, and every refusal
//! turned into a message a person can act on (`{"detail"}` shown, nothing answering named).

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::super::terminal::{clean_text, truncate};
use super::super::{Failure, server_base_url};
use crate::config::Settings;
use crate::runtime::install_crypto_provider;

/// A server's `{"detail"}` is shown up to this many characters.
const DETAIL_MAX: usize = 2000;
/// The largest JSON answer read (a page of 100 conversations is far smaller): a server that
/// sends without end fails the command instead of filling memory.
const BODY_MAX: usize = 64 * 1024 * 1024;

pub(super) struct Client {
    /// The server's base URL, no trailing slash.
    pub base: String,
    key: Option<String>,
    http: reqwest::Client,
}

impl Client {
    /// `--server` when given; otherwise the address `triage serve` listens on with these
    /// settings, with the first API key they configure (the CLI reads the same config file the
    /// server does, so nothing has to be repeated). A key from the config is never sent to a
    /// server named by `--server`: that one gets `--api-key` or nothing.
    pub fn new(
        server: Option<&str>,
        api_key: Option<String>,
        settings: &Settings,
    ) -> Result<Client, Failure> {
        let (base, key) = match server {
            Some(given) => (server_base_url(given).map_err(Failure::Usage)?, api_key),
            None => (
                listen_url(settings),
                api_key.or_else(|| settings.server.all_api_keys().into_iter().next()),
            ),
        };
        install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // A redirect would carry X-API-Key to wherever the server points.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| Failure::Runtime(e.to_string()))?;
        Ok(Client { base, key, http })
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(key) = &self.key {
            request = request.header("x-api-key", key.as_str());
        }
        request
    }

    /// Sends a request; a refusal (non-2xx) is returned as the response, for the caller to read.
    pub async fn send_raw(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        last_event_id: Option<u64>,
    ) -> Result<reqwest::Response, Failure> {
        let mut request = self.request(method, path);
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id.to_string());
        }
        request.send().await.map_err(|e| self.unreachable(&e))
    }

    /// Sends a request and parses the JSON answer; a refusal is a `Failure` with its detail.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, Failure> {
        let response = self.send_raw(method, path, body, None).await?;
        if !response.status().is_success() {
            return Err(refusal(response).await);
        }
        let bytes = read_capped(response, BODY_MAX)
            .await
            .map_err(|e| Failure::Runtime(format!("reading the answer of {path}: {e}")))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            Failure::Runtime(format!(
                "the server's answer to {path} is not what triage expects ({e}); is {} a triage \
                 server of the same version?",
                self.base
            ))
        })
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, Failure> {
        self.call(Method::GET, path, None).await
    }

    pub async fn post<T: DeserializeOwned>(&self, path: &str, body: &Value) -> Result<T, Failure> {
        self.call(Method::POST, path, Some(body)).await
    }

    pub fn unreachable(&self, e: &reqwest::Error) -> Failure {
        let why = if e.is_connect() {
            "nothing answered; is `triage serve` running there? Give its address with --server"
                .to_owned()
        } else if e.is_timeout() {
            "it did not answer in time".to_owned()
        } else {
            e.to_string()
        };
        Failure::Runtime(format!("cannot reach triage at {}: {why}", self.base))
    }
}

/// The URL `triage serve` listens on with these settings, as a client on this host reaches it.
pub(super) fn listen_url(settings: &Settings) -> String {
    let host = settings.server.host.trim();
    let host = match host {
        "" | "0.0.0.0" => "127.0.0.1".to_owned(),
        "::" | "[::]" => "[::1]".to_owned(),
        h if h.contains(':') && !h.starts_with('[') => format!("[{h}]"),
        h => h.to_owned(),
    };
    let scheme = if settings.server.tls_cert_file.is_some() {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{host}:{}", settings.server.port)
}

/// The body, or an error once it exceeds `cap` bytes.
async fn read_capped(mut response: reqwest::Response, cap: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > cap {
            return Err(format!("the answer is larger than {} MiB", cap >> 20));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A non-2xx answer as a `Failure`: 400 and 422 mean the command asked for something the
/// server refuses (a usage error, exit 2); anything else is a runtime failure (exit 1).
pub(super) async fn refusal(response: reqwest::Response) -> Failure {
    let status = response.status();
    let text = read_capped(response, DETAIL_MAX * 64)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|e| e);
    let detail = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            v.get("detail")
                .map(|d| d.as_str().map_or_else(|| d.to_string(), str::to_owned))
        })
        .unwrap_or(text);
    let message = format!(
        "HTTP {status}: {}",
        truncate(&clean_text(detail.trim()), DETAIL_MAX)
    );
    if matches!(
        status,
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY
    ) {
        Failure::Usage(message)
    } else {
        Failure::Runtime(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(extra: &str) -> Settings {
        Settings::from_toml(extra).unwrap()
    }

    #[test]
    fn the_default_server_is_where_serve_listens() {
        let s = settings("[server]\nhost = \"0.0.0.0\"\nport = 6001\n");
        assert_eq!(listen_url(&s), "http://127.0.0.1:6001");
        let s = settings("[server]\nhost = \"::\"\nport = 6001\n");
        assert_eq!(listen_url(&s), "http://[::1]:6001");
        let s = settings("[server]\nhost = \"fd00::1\"\nport = 7\n");
        assert_eq!(listen_url(&s), "http://[fd00::1]:7");
    }

    #[test]
    fn a_config_key_goes_only_to_the_configured_server() {
        let s = settings("[server]\nport = 6001\napi_keys = [\"local-key\"]\n");
        let local = Client::new(None, None, &s).unwrap();
        assert_eq!(local.key.as_deref(), Some("local-key"));
        let remote = Client::new(Some("http://elsewhere:5050"), None, &s).unwrap();
        assert_eq!(remote.key, None);
        assert_eq!(remote.base, "http://elsewhere:5050");
        let given = Client::new(None, Some("flag".into()), &s).unwrap();
        assert_eq!(given.key.as_deref(), Some("flag"));
    }
}
