//! Streaming answers: a step as `chat.completion.chunk` SSE events, word by word, ending with
//! the finish reason, the usage chunk when asked for, and `data: [DONE]`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures::Stream;
use serde_json::{Value, json};

use super::{Ctx, tool_calls_completion_estimate, usage_json, word_count};
use crate::{CancelGuard, Inner, Step, Usage};

/// Between two streamed chunks: a scheduler turn (so chunks reach the client separately), or
/// the paced step's pause.
pub(crate) async fn pace(pause: Duration) {
    if pause.is_zero() {
        tokio::task::yield_now().await;
    } else {
        tokio::time::sleep(pause).await;
    }
}

impl Ctx {
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
}

fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

fn done_line() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// Splits text into word deltas, keeping the whitespace attached so that the
/// concatenation of the pieces equals the input.
pub(crate) fn split_words(s: &str) -> Vec<String> {
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
pub(crate) fn split_args(s: &str) -> Vec<String> {
    let len = s.chars().count();
    if len == 0 {
        return Vec::new();
    }
    let n = len.div_ceil(12).max(3).min(len);
    split_n(s, n)
}

pub(crate) fn sse_response<S>(stream: S) -> Response
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

pub(super) fn streaming(inner: Arc<Inner>, ctx: Ctx, step: Step, pause: Duration) -> Response {
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
            Step::FailMidStream { content, kind, message } => {
                for piece in split_words(&content) {
                    pace(pause).await;
                    yield Ok(ctx.chunk(json!({"content": piece}), None));
                }
                guard.finish();
                yield Ok(sse(&json!({"error": {"message": message, "type": kind}})));
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
