//! The OpenAI chat-completions wire format: how a [`Step`] becomes SSE chunks (`stream`) or
//! a JSON completion (`completion`), and the error bodies of both.

mod completion;
pub(crate) mod stream;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use crate::{CancelGuard, Inner, Step, ToolCall, Usage};

/// The response to `step`; `body` gives the parsed request when the step needs it.
pub(crate) async fn answer(
    inner: Arc<Inner>,
    mut step: Step,
    body: impl FnOnce() -> Value,
    raw_len: usize,
) -> Response {
    let mut pause = Duration::ZERO;
    while let Step::Paced {
        before,
        between_chunks,
        step: paced,
    } = step
    {
        tokio::time::sleep(before).await;
        pause = between_chunks;
        step = *paced;
    }
    match step {
        Step::Error {
            status,
            message,
            retry_after,
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let (kind, code) = error_kind(status.as_u16());
            let mut resp = json_response(
                status,
                &json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
            );
            if let Some(v) = retry_after.and_then(|ra| HeaderValue::from_str(&ra).ok()) {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
            resp
        }
        Step::HangBeforeHeaders => {
            let _guard = CancelGuard::new(&inner);
            futures::future::pending::<Response>().await
        }
        Step::Raw { body } => {
            let mut resp = Response::new(Body::from(body));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            resp
        }
        step => {
            let ctx = Ctx::from_request(&body(), raw_len);
            if ctx.stream {
                stream::streaming(inner, ctx, step, pause)
            } else {
                completion::non_streaming(inner, ctx, step).await
            }
        }
    }
}

/// Per-request facts needed to render chunks.
struct Ctx {
    id: String,
    created: u64,
    model: String,
    stream: bool,
    include_usage: bool,
    prompt_tokens: u64,
}

impl Ctx {
    fn from_request(body: &Value, raw_len: usize) -> Ctx {
        Ctx {
            id: format!("chatcmpl-{}", uuid::Uuid::new_v4().simple()),
            created: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("fake-model")
                .to_string(),
            stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
            include_usage: body
                .pointer("/stream_options/include_usage")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            prompt_tokens: ((raw_len / 4) as u64).max(1),
        }
    }

    fn usage_or_default(&self, usage: Option<Usage>, completion_estimate: u64) -> Usage {
        usage.unwrap_or(Usage {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: completion_estimate.max(1),
        })
    }
}

fn usage_json(u: Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    })
}

fn word_count(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

fn tool_calls_completion_estimate(content: Option<&str>, calls: &[ToolCall]) -> u64 {
    let args: usize = calls.iter().map(|c| c.arguments.len()).sum();
    content.map(word_count).unwrap_or(0) + (args / 4) as u64
}

fn error_kind(status: u16) -> (&'static str, Value) {
    match status {
        400 => ("invalid_request_error", Value::Null),
        401 => ("invalid_request_error", json!("invalid_api_key")),
        403 => ("permission_error", Value::Null),
        404 => ("invalid_request_error", json!("model_not_found")),
        408 => ("timeout", Value::Null),
        413 => ("invalid_request_error", json!("context_length_exceeded")),
        429 => ("requests", json!("rate_limit_exceeded")),
        s if s >= 500 => ("server_error", Value::Null),
        _ => ("invalid_request_error", Value::Null),
    }
}

pub(crate) fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}
