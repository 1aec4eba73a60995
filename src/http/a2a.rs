//! A2A's HTTP edge (see `a2a/`): the agent card at `/.well-known/agent-card.json` and the
//! JSON-RPC endpoint `POST /a2a`. Every JSON-RPC answer is HTTP 200 with the error, if any, in
//! the body (A2A clients raise on any other status); streams are SSE of JSON-RPC responses.
//! API keys, limits and metrics are the router's, as for every route.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;

use super::body::read_body;
use super::conversations::query_pairs;
use super::sse::KEEPALIVE_FRAME;
use super::{AppState, ShutdownWatch};
use crate::a2a::jsonrpc::{self, ErrorCode, RpcError};
use crate::a2a::{Reply, Tasks, Update, Waits};

/// The card's path (the router names it too), which needs no API key.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// The header (and query parameter) naming the protocol version a client speaks.
const VERSION: &str = "a2a-version";

/// The card names the URL it was reached at, so a shared cache must key it on what that URL
/// is read from: else one client's spoofed `X-Forwarded-Proto: http` is served to the next,
/// who then sends its key in the clear.
pub async fn card(State(state): State<AppState>, headers: HeaderMap) -> impl IntoResponse {
    (
        [(header::VARY, "host, x-forwarded-proto")],
        Json(crate::a2a::card(
            &base_url(&headers),
            state.api_keys.enabled(),
            state.a2a.push_notifications,
        )),
    )
}

pub async fn rpc(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let bytes = match read_body(body) {
        Ok(bytes) => bytes,
        Err(refusal) => return refusal.into_response(),
    };
    let request = match jsonrpc::parse_request(&bytes) {
        Ok(request) => request,
        Err((id, error)) => return answer(jsonrpc::failure(&id, &error)),
    };
    drop(bytes);
    let version = match headers.get(VERSION) {
        Some(value) => match value.to_str() {
            Ok(v) => Some(v.to_owned()),
            Err(_) => {
                let e = RpcError::new(ErrorCode::VersionNotSupported, "A2A-Version is not text");
                return answer(jsonrpc::failure(&request.id, &e));
            }
        },
        None => query_pairs(query.as_deref())
            .into_iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(VERSION))
            .map(|(_, v)| v),
    };
    if let Err(e) = crate::a2a::check_version(version.as_deref()) {
        return answer(jsonrpc::failure(&request.id, &e));
    }
    let tasks = Tasks::new(state.conversations.clone(), state.a2a.clone());
    let waits = Waits {
        blocking: state.deadline,
        idle: state.keepalive.unwrap_or(Duration::from_secs(15)),
    };
    match crate::a2a::call(&tasks, &request.method, request.params, waits).await {
        Ok(Reply::Result(result)) => answer(jsonrpc::success(&request.id, &result)),
        Ok(Reply::Stream(updates)) => stream(request.id, updates, state.shutdown.clone()),
        Err(e) => answer(jsonrpc::failure(&request.id, &e)),
    }
}

fn answer(body: Value) -> Response {
    Json(body).into_response()
}

/// Each update as an SSE event holding a JSON-RPC response under the request's id.
fn stream(
    id: Value,
    updates: std::pin::Pin<Box<dyn futures::Stream<Item = Update> + Send>>,
    shutdown: ShutdownWatch,
) -> Response {
    let frames = updates
        .map(move |update| {
            let frame = match update {
                Update::Response(result) => event(&jsonrpc::success(&id, &result)),
                Update::Idle => Bytes::from_static(KEEPALIVE_FRAME),
                Update::Gone(why) => event(&jsonrpc::failure(
                    &id,
                    &RpcError::new(ErrorCode::Internal, why),
                )),
            };
            Ok::<Bytes, Infallible>(frame)
        })
        .take_until(shutdown.closing());
    super::sse::event_stream(frames)
}

fn event(value: &Value) -> Bytes {
    let data = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
    Bytes::from(format!("data: {data}\n\n"))
}

/// Where the client reached this server: `X-Forwarded-Proto` (http or https) and `Host`, as a
/// proxy in front would set them; a Host that is not a plain authority reads as localhost.
fn base_url(headers: &HeaderMap) -> String {
    let scheme = match headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
    {
        Some(p) if p.eq_ignore_ascii_case("https") => "https",
        _ => "http",
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|h| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-.:[]_".contains(c))
        })
        .unwrap_or("localhost");
    format!("{scheme}://{host}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_url_takes_only_a_plain_host() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "triage.example:8080".parse().unwrap());
        h.insert("x-forwarded-proto", "HTTPS".parse().unwrap());
        assert_eq!(base_url(&h), "https://triage.example:8080");
        h.insert(header::HOST, "evil.example/\"><x".parse().unwrap());
        assert_eq!(base_url(&h), "https://localhost");
    }
}
