//! Anthropic's Messages API, faked: `POST /v1/messages` checks the headers and the request as
//! the real API does ([`validate`]), then answers the next scripted [`Step`] in Anthropic's
//! wire format ([`render`]): SSE events when `stream` is true, a `message` JSON otherwise.
//! With `thinking` on, every answer starts with a thinking block whose signature the fake
//! checks when the block comes back; prompt caching is simulated ([`cache`]).

mod cache;
mod render;
mod validate;

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use crate::wire::json_response;
use crate::{EXHAUSTED_MESSAGE, Inner, Rule, parse};

/// The fake's Anthropic state: its prompt cache and the key its thinking signatures use.
pub(crate) struct AnthropicState {
    cache: Mutex<cache::PromptCache>,
    secret: String,
}

impl Default for AnthropicState {
    fn default() -> Self {
        AnthropicState {
            cache: Mutex::default(),
            secret: uuid::Uuid::new_v4().to_string(),
        }
    }
}

/// The signature of a thinking text: a thinking block changed in any way fails the check.
pub(crate) fn sign(secret: &str, thinking: &str) -> String {
    let mut h = DefaultHasher::new();
    (secret, thinking).hash(&mut h);
    format!("sig_{:016x}", h.finish())
}

/// Anthropic's error body.
pub(crate) fn error(status: u16, kind: &str, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(
        status,
        &json!({"type": "error", "error": {"type": kind, "message": message}}),
    )
}

/// Anthropic's error type for an HTTP status.
pub(crate) fn error_kind(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

pub(crate) async fn messages(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let rule = inner.receive(None, &raw, None);
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    if header("x-api-key").is_empty() {
        return error(401, "authentication_error", "x-api-key header is required");
    }
    if header("anthropic-version").is_empty() {
        return error(
            400,
            "invalid_request_error",
            "anthropic-version: header is required",
        );
    }
    answer_body(inner, rule, &raw, parse(&raw)).await
}

/// A Messages request whose headers passed: validated, then answered. Claude on Vertex comes
/// here too, its model (named in the URL) put back in the body.
pub(crate) async fn answer_body(
    inner: Arc<Inner>,
    rule: Option<Rule>,
    raw: &Bytes,
    body: Value,
) -> Response {
    if let Err(message) = validate::request(&body, &inner.anthropic.secret) {
        return error(400, "invalid_request_error", &message);
    }
    let Some(step) = inner.step(rule.as_ref(), &body, raw) else {
        return error(500, "api_error", EXHAUSTED_MESSAGE);
    };
    let cached = inner
        .anthropic
        .cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .apply(&body);
    let ctx = render::Ctx {
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("claude")
            .to_owned(),
        prompt_tokens: ((raw.len() / 4) as u64).max(1),
        cached,
        thinking: validate::thinking_on(&body),
        calls_allowed: body.pointer("/tool_choice/type").and_then(Value::as_str) != Some("none"),
        secret: inner.anthropic.secret.clone(),
    };
    let mut response = render::answer(
        inner.clone(),
        ctx,
        step,
        body.get("stream") == Some(&Value::Bool(true)),
    )
    .await;
    response
        .headers_mut()
        .insert("request-id", HeaderValue::from_static("req_fake"));
    response
}
