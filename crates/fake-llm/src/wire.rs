//! The OpenAI chat-completions wire format: how a [`Step`] becomes SSE chunks or a JSON
//! completion.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::Stream;
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
                streaming(inner, ctx, step, pause)
            } else {
                non_streaming(inner, ctx, step).await
            }
        }
    }
}

/// Between two streamed chunks: a scheduler turn (so chunks reach the client separately), or
/// the paced step's pause.
async fn pace(pause: Duration) {
    if pause.is_zero() {
        tokio::task::yield_now().await;
    } else {
        tokio::time::sleep(pause).await;
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

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Bytes {
        let v = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": [{
                "index": 0,
                "delta": delta,
                "logprobs": null,
                "finish_reason": finish_reason,
            }],
        });
        sse(&v)
    }

    fn usage_chunk(&self, usage: Usage) -> Bytes {
        let v = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": [],
            "usage": usage_json(usage),
        });
        sse(&v)
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

fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

fn done_line() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// Splits text into word deltas, keeping the whitespace attached so that the
/// concatenation of the pieces equals the input.
fn split_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_ws = false;
    for c in s.chars() {
        let ws = c.is_whitespace();
        if !ws && prev_ws && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(c);
        prev_ws = ws;
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Splits `s` into exactly `n` contiguous pieces of roughly equal char count
/// (some may be empty if `s` is shorter than `n`).
fn split_n(s: &str, n: usize) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    let chars: Vec<char> = s.chars().collect();
    let total = chars.len();
    (0..n)
        .map(|i| {
            let start = i * total / n;
            let end = (i + 1) * total / n;
            chars[start..end].iter().collect()
        })
        .collect()
}

/// Splits tool-call arguments into at least 3 pieces (fewer only when the
/// string has fewer chars), more for long arguments.
fn split_args(s: &str) -> Vec<String> {
    let len = s.chars().count();
    if len == 0 {
        return Vec::new();
    }
    let n = len.div_ceil(12).max(3).min(len);
    split_n(s, n)
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

fn sse_response<S>(stream: S) -> Response
where
    S: Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

fn streaming(inner: Arc<Inner>, ctx: Ctx, step: Step, pause: Duration) -> Response {
    let stream = async_stream::stream! {
        let mut guard = CancelGuard::new(&inner);
        yield Ok::<_, Infallible>(ctx.chunk(json!({"role": "assistant", "content": ""}), None));
        match step {
            Step::Text { content, reasoning, usage } => {
                if let Some(r) = &reasoning {
                    for piece in split_words(r) {
                        pace(pause).await;
                        yield Ok(ctx.chunk(json!({"reasoning_content": piece}), None));
                    }
                }
                for piece in split_words(&content) {
                    pace(pause).await;
                    yield Ok(ctx.chunk(json!({"content": piece}), None));
                }
                let usage = ctx.usage_or_default(usage, word_count(&content));
                for b in finish(&ctx, "stop", usage) {
                    pace(pause).await;
                    yield Ok(b);
                }
                guard.finish();
                yield Ok(done_line());
            }
            Step::ToolCalls { content, calls, usage } => {
                if let Some(c) = &content {
                    for piece in split_words(c) {
                        pace(pause).await;
                        yield Ok(ctx.chunk(json!({"content": piece}), None));
                    }
                }
                for (i, call) in calls.iter().enumerate() {
                    pace(pause).await;
                    yield Ok(ctx.chunk(json!({"tool_calls": [{
                        "index": i,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }]}), None));
                    for piece in split_args(&call.arguments) {
                        pace(pause).await;
                        yield Ok(ctx.chunk(json!({"tool_calls": [{
                            "index": i,
                            "function": {"arguments": piece},
                        }]}), None));
                    }
                }
                let usage = ctx.usage_or_default(
                    usage,
                    tool_calls_completion_estimate(content.as_deref(), &calls),
                );
                for b in finish(&ctx, "tool_calls", usage) {
                    pace(pause).await;
                    yield Ok(b);
                }
                guard.finish();
                yield Ok(done_line());
            }
            Step::HangAfterFirstChunk { first } => {
                yield Ok(ctx.chunk(json!({"content": first}), None));
                futures::future::pending::<()>().await;
            }
            Step::CutMidStream { content } => {
                for piece in split_words(&content) {
                    pace(pause).await;
                    yield Ok(ctx.chunk(json!({"content": piece}), None));
                }
                guard.finish();
            }
            Step::Slow { content, chunks, interval } => {
                for piece in split_n(&content, chunks) {
                    tokio::time::sleep(interval).await;
                    yield Ok(ctx.chunk(json!({"content": piece}), None));
                }
                let usage = ctx.usage_or_default(None, word_count(&content));
                for b in finish(&ctx, "stop", usage) {
                    yield Ok(b);
                }
                guard.finish();
                yield Ok(done_line());
            }
            Step::Drip { piece, times, interval } => {
                for _ in 0..times {
                    tokio::time::sleep(interval).await;
                    yield Ok(ctx.chunk(json!({"content": piece}), None));
                }
                let usage = ctx.usage_or_default(None, (times as u64).max(1));
                for b in finish(&ctx, "stop", usage) {
                    yield Ok(b);
                }
                guard.finish();
                yield Ok(done_line());
            }
            // Answered in `answer`.
            Step::Error { .. } | Step::HangBeforeHeaders | Step::Raw { .. } | Step::Paced { .. } => {
                guard.finish();
            }
        }
    };
    sse_response(stream)
}

/// The finish_reason chunk, then the usage chunk if the request asked for it.
fn finish(ctx: &Ctx, reason: &str, usage: Usage) -> Vec<Bytes> {
    let mut out = vec![ctx.chunk(json!({}), Some(reason))];
    if ctx.include_usage {
        out.push(ctx.usage_chunk(usage));
    }
    out
}

fn completion(ctx: &Ctx, message: Value, finish_reason: &str, usage: Usage) -> Value {
    json!({
        "id": ctx.id,
        "object": "chat.completion",
        "created": ctx.created,
        "model": ctx.model,
        "system_fingerprint": "fp_fake",
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason,
        }],
        "usage": usage_json(usage),
    })
}

async fn non_streaming(inner: Arc<Inner>, ctx: Ctx, step: Step) -> Response {
    match step {
        Step::Text {
            content,
            reasoning,
            usage,
        } => {
            let mut message = json!({"role": "assistant", "content": content});
            if let Some(r) = reasoning {
                message["reasoning_content"] = json!(r);
            }
            let usage = ctx.usage_or_default(usage, word_count(&content));
            json_response(StatusCode::OK, &completion(&ctx, message, "stop", usage))
        }
        Step::ToolCalls {
            content,
            calls,
            usage,
        } => {
            let tool_calls: Vec<Value> = calls
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    })
                })
                .collect();
            let usage = ctx.usage_or_default(
                usage,
                tool_calls_completion_estimate(content.as_deref(), &calls),
            );
            let message =
                json!({"role": "assistant", "content": content, "tool_calls": tool_calls});
            json_response(
                StatusCode::OK,
                &completion(&ctx, message, "tool_calls", usage),
            )
        }
        Step::Slow {
            content,
            chunks,
            interval,
        } => {
            {
                let mut guard = CancelGuard::new(&inner);
                for _ in 0..chunks {
                    tokio::time::sleep(interval).await;
                }
                guard.finish();
            }
            let usage = ctx.usage_or_default(None, word_count(&content));
            let message = json!({"role": "assistant", "content": content});
            json_response(StatusCode::OK, &completion(&ctx, message, "stop", usage))
        }
        Step::HangAfterFirstChunk { first } => {
            // Headers plus the beginning of a JSON object, then stall.
            let prefix = format!(
                "{{\"id\":\"{}\",\"object\":\"chat.completion\",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":{}",
                ctx.id,
                json!(first)
            );
            let stream = async_stream::stream! {
                let _guard = CancelGuard::new(&inner);
                yield Ok::<_, Infallible>(Bytes::from(prefix));
                futures::future::pending::<()>().await;
            };
            let mut resp = Response::new(Body::from_stream(stream));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            resp
        }
        Step::CutMidStream { content } => {
            // A truncated JSON body.
            let full = completion(
                &ctx,
                json!({"role": "assistant", "content": content}),
                "stop",
                ctx.usage_or_default(None, word_count(&content)),
            )
            .to_string();
            let cut = full.len() / 2;
            let cut = (0..=cut)
                .rev()
                .find(|&i| full.is_char_boundary(i))
                .unwrap_or(0);
            let mut resp = Response::new(Body::from(full[..cut].to_string()));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            resp
        }
        Step::Drip {
            piece,
            times,
            interval,
        } => {
            {
                let mut guard = CancelGuard::new(&inner);
                for _ in 0..times {
                    tokio::time::sleep(interval).await;
                }
                guard.finish();
            }
            let usage = ctx.usage_or_default(None, (times as u64).max(1));
            let message = json!({"role": "assistant", "content": piece.repeat(times)});
            json_response(StatusCode::OK, &completion(&ctx, message, "stop", usage))
        }
        // Answered in `answer`.
        Step::Error { .. } | Step::HangBeforeHeaders | Step::Raw { .. } | Step::Paced { .. } => {
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
