//! HolmesGPT's `sse` mode: MCP's legacy HTTP+SSE transport (protocol 2024-11-05), which rmcp
//! no longer ships (it keeps stdio and streamable HTTP only). Small enough to implement on
//! rmcp's `Transport` trait: a `GET` opens an event stream whose first `endpoint` event names
//! the URL to `POST` messages to; the server's messages arrive as `message` events.

use std::borrow::Cow;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;

use crate::sse_reader::sse_events;

/// How long the server has to name its message endpoint.
const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(10);
/// An event larger than this ends the session (a server gone wrong must not fill memory).
const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SseError(String);

pub struct SseTransport {
    client: reqwest::Client,
    endpoint: url::Url,
    headers: HeaderMap,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

pub fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("header name '{k}' is not valid"))?;
        let value = HeaderValue::from_str(v)
            .map_err(|_| format!("header '{k}' has a value that is not valid in HTTP"))?;
        map.insert(name, value);
    }
    Ok(map)
}

impl SseTransport {
    /// Opens the event stream and waits for the endpoint event.
    pub async fn connect(
        client: reqwest::Client,
        url: &str,
        headers: HeaderMap,
    ) -> Result<SseTransport, String> {
        let base = url::Url::parse(url).map_err(|e| format!("bad URL {url}: {e}"))?;
        let response = client
            .get(base.clone())
            .headers(headers.clone())
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| {
                format!(
                    "GET {url}: {}",
                    crate::tools::describe_http_error(&e, ENDPOINT_TIMEOUT)
                )
            })?;
        if !response.status().is_success() {
            return Err(format!("GET {url}: HTTP {}", response.status()));
        }
        let mut events = sse_events(response.bytes_stream(), MAX_EVENT_BYTES);
        let endpoint = tokio::time::timeout(ENDPOINT_TIMEOUT, async {
            while let Some(event) = events.next().await {
                let event = event.map_err(|e| format!("event stream: {e}"))?;
                if event.name() == "endpoint" {
                    let data = event
                        .text()
                        .ok_or("the endpoint event is not UTF-8")?
                        .trim();
                    return base
                        .join(data)
                        .map_err(|e| format!("endpoint '{data}': {e}"));
                }
            }
            Err("the event stream ended before naming its endpoint".to_owned())
        })
        .await
        .map_err(|_| {
            format!(
                "no endpoint event within {} s: is this an SSE MCP server?",
                ENDPOINT_TIMEOUT.as_secs()
            )
        })??;
        if endpoint.origin() != base.origin() {
            return Err(format!(
                "the server named an endpoint on another origin ({endpoint})"
            ));
        }
        let (tx, incoming) = mpsc::channel(64);
        let reader = tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    // An event over the bound or a broken body: the error says which.
                    Err(e) => {
                        tracing::warn!(error = %e, "MCP SSE stream unreadable: session ended");
                        return;
                    }
                };
                if event.name() != "message" {
                    continue;
                }
                match serde_json::from_slice::<ServerJsonRpcMessage>(event.data()) {
                    Ok(message) => {
                        if tx.send(message).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "MCP SSE: a message that is not JSON-RPC, skipped")
                    }
                }
            }
        });
        Ok(SseTransport {
            client,
            endpoint,
            headers,
            incoming,
            reader,
        })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn name() -> Cow<'static, str> {
        "legacy-sse".into()
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .json(&item);
        async move {
            let response = request
                .send()
                .await
                .map_err(|e| SseError(format!("POST: {e}")))?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(SseError(format!("POST: HTTP {}", response.status())))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), SseError> {
        self.reader.abort();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server whose event stream is `body`, at its root.
    async fn serving(body: &'static [u8]) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("address"));
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(
                move || async move { ([("content-type", "text/event-stream")], body) },
            ),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    #[tokio::test]
    async fn an_endpoint_that_is_not_utf8_is_refused_by_name() {
        let url = serving(b"event: endpoint\ndata: /messages\xFF\n\n").await;
        crate::runtime::install_crypto_provider();
        let Err(e) = SseTransport::connect(reqwest::Client::new(), &url, HeaderMap::new()).await
        else {
            panic!("connected to an endpoint that is not text");
        };
        assert!(e.contains("not UTF-8"), "{e}");
        let url = serving(b"event: endpoint\ndata: /messages\n\n").await;
        assert!(
            SseTransport::connect(reqwest::Client::new(), &url, HeaderMap::new())
                .await
                .is_ok()
        );
    }
}
