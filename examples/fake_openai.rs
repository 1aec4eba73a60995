//! A stand-in OpenAI-compatible LLM for tests against a live triage (`.ci/schemathesis.sh`):
//! answers every chat completion at once with a short text, streamed or not, and never asks
//! for a tool. Loopback only.
//!
//! `cargo run --example fake_openai [-- ADDR]` (default `127.0.0.1:0`); prints
//! `FAKE_OPENAI_URL=http://127.0.0.1:PORT/v1` on stdout once it listens.

use std::io::Write;
use std::net::SocketAddr;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

const ANSWER: &str = "The cluster looks healthy: no failing pods were found.";

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let addr: SocketAddr = match std::env::args().nth(1) {
        Some(a) => a.parse().map_err(std::io::Error::other)?,
        None => SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    if !addr.ip().is_loopback() {
        return Err(std::io::Error::other(
            "fake_openai listens on loopback only",
        ));
    }
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/v1/chat/completions", post(complete))
        .route("/chat/completions", post(complete))
        .layer(DefaultBodyLimit::disable());
    let mut out = std::io::stdout();
    writeln!(out, "FAKE_OPENAI_URL=http://{bound}/v1")?;
    out.flush()?;
    axum::serve(listener, app).await
}

async fn complete(body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        let error =
            json!({"error": {"message": "body is not JSON", "type": "invalid_request_error"}});
        return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
    };
    // A structured-output request gets a JSON object: `{}` satisfies `json_object` and any
    // schema without required properties.
    let content = if request.get("response_format").is_some_and(|f| !f.is_null()) {
        "{}"
    } else {
        ANSWER
    };
    let model = request["model"].as_str().unwrap_or("fake").to_owned();
    let prompt_tokens = (body.len() / 4).max(1) as u64;
    let usage = json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 12,
        "total_tokens": prompt_tokens + 12,
    });
    let id = "chatcmpl-fake";
    if !request["stream"].as_bool().unwrap_or(false) {
        return axum::Json(json!({
            "id": id,
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }],
            "usage": usage,
        }))
        .into_response();
    }
    let chunk = |delta: Value, finish: Option<&str>| {
        let c = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        format!("data: {c}\n\n")
    };
    let mut sse = chunk(json!({"role": "assistant", "content": ""}), None);
    for word in content.split_inclusive(' ') {
        sse.push_str(&chunk(json!({"content": word}), None));
    }
    sse.push_str(&chunk(json!({}), Some("stop")));
    if request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        let c = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [],
            "usage": usage,
        });
        sse.push_str(&format!("data: {c}\n\n"));
    }
    sse.push_str("data: [DONE]\n\n");
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from(sse),
    )
        .into_response()
}
