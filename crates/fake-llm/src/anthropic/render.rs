//! A scripted step in Anthropic's wire format: the SSE event sequence of a streamed message
//! (`message_start`, content blocks with their deltas, `ping`, `message_delta`,
//! `message_stop`, or an `error` event mid-stream), or one `message` JSON.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use super::cache::CacheUse;
use super::{error, error_kind, sign};
use crate::wire::json_response;
use crate::wire::stream::{pace, split_args, split_words, sse_response};
use crate::{CancelGuard, Inner, Step, ToolCall, Usage};

pub(crate) struct Ctx {
    pub model: String,
    pub prompt_tokens: u64,
    pub cached: CacheUse,
    pub thinking: bool,
    pub calls_allowed: bool,
    pub secret: String,
}

/// What the model says, block by block.
enum Block {
    Thinking(String),
    Text(String),
    ToolUse(ToolCall),
}

/// The answer's blocks, stop reason and output tokens, for the steps that are answers.
fn blocks(ctx: &Ctx, step: &Step) -> Option<(Vec<Block>, &'static str, u64)> {
    let thinking = |reasoning: Option<&String>| {
        ctx.thinking.then(|| {
            Block::Thinking(
                reasoning
                    .cloned()
                    .unwrap_or_else(|| "Considering what the user asked.".into()),
            )
        })
    };
    let words = |s: &str| s.split_whitespace().count() as u64;
    let output = |usage: &Option<Usage>, estimate: u64| {
        usage.map_or(estimate.max(1), |u| u.completion_tokens)
    };
    match step {
        Step::Text {
            content,
            reasoning,
            usage,
        } => {
            let mut out: Vec<Block> = thinking(reasoning.as_ref()).into_iter().collect();
            // Thinking is billed as output, as Anthropic bills it.
            let thought: u64 = out
                .iter()
                .map(|b| match b {
                    Block::Thinking(t) => words(t),
                    _ => 0,
                })
                .sum();
            out.push(Block::Text(content.clone()));
            Some((out, "end_turn", output(usage, words(content) + thought)))
        }
        Step::ToolCalls {
            content,
            calls,
            usage,
        } => {
            let mut out: Vec<Block> = thinking(None).into_iter().collect();
            out.extend(content.iter().map(|c| Block::Text(c.clone())));
            out.extend(calls.iter().cloned().map(Block::ToolUse));
            let args: usize = calls.iter().map(|c| c.arguments.len()).sum();
            Some((out, "tool_use", output(usage, (args / 4) as u64)))
        }
        Step::Slow { content, .. } => Some((
            vec![Block::Text(content.clone())],
            "end_turn",
            words(content),
        )),
        Step::Drip { piece, times, .. } => Some((
            vec![Block::Text(piece.repeat(*times))],
            "end_turn",
            *times as u64,
        )),
        _ => None,
    }
}

impl Ctx {
    fn usage(&self, output_tokens: u64) -> Value {
        let cached = self.cached.read + self.cached.creation;
        json!({
            "input_tokens": self.prompt_tokens.saturating_sub(cached),
            "cache_creation_input_tokens": self.cached.creation,
            "cache_read_input_tokens": self.cached.read,
            "output_tokens": output_tokens,
        })
    }

    fn block_json(&self, block: &Block) -> Value {
        match block {
            Block::Thinking(t) => {
                json!({"type": "thinking", "thinking": t, "signature": sign(&self.secret, t)})
            }
            Block::Text(t) => json!({"type": "text", "text": t}),
            Block::ToolUse(c) => json!({"type": "tool_use", "id": c.id, "name": c.name,
                "input": serde_json::from_str::<Value>(&c.arguments).unwrap_or(json!({}))}),
        }
    }

    fn message(&self, content: Vec<Value>, stop_reason: Option<&str>, output_tokens: u64) -> Value {
        json!({
            "id": format!("msg_{}", uuid::Uuid::new_v4().simple()),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": self.usage(output_tokens),
        })
    }
}

fn event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// The events that stream one block at `index`.
fn block_events(ctx: &Ctx, index: usize, block: &Block) -> Vec<Bytes> {
    let delta = |d: Value| {
        event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": d}),
        )
    };
    let (start, deltas) = match block {
        Block::Thinking(t) => {
            let mut d: Vec<Bytes> = split_words(t)
                .into_iter()
                .map(|w| delta(json!({"type": "thinking_delta", "thinking": w})))
                .collect();
            d.push(delta(
                json!({"type": "signature_delta", "signature": sign(&ctx.secret, t)}),
            ));
            (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                d,
            )
        }
        Block::Text(t) => (
            json!({"type": "text", "text": ""}),
            split_words(t)
                .into_iter()
                .map(|w| delta(json!({"type": "text_delta", "text": w})))
                .collect(),
        ),
        Block::ToolUse(c) => (
            json!({"type": "tool_use", "id": c.id, "name": c.name, "input": {}}),
            std::iter::once(String::new())
                .chain(split_args(&c.arguments))
                .map(|p| delta(json!({"type": "input_json_delta", "partial_json": p})))
                .collect(),
        ),
    };
    let mut out = vec![event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": start}),
    )];
    out.extend(deltas);
    out.push(event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
    ));
    out
}

pub(crate) async fn answer(inner: Arc<Inner>, ctx: Ctx, mut step: Step, stream: bool) -> Response {
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
    if matches!(step, Step::ToolCalls { .. }) && !ctx.calls_allowed {
        return error(
            500,
            "api_error",
            "fake llm: the script has tool calls but the request's tool_choice is none",
        );
    }
    match step {
        Step::Error {
            status,
            message,
            retry_after,
        } => {
            let mut resp = error(status, error_kind(status), &message);
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
        Step::FailMidStream { kind, message, .. } if !stream => error(500, &kind, &message),
        step if !stream => match blocks(&ctx, &step) {
            Some((content, stop_reason, output)) => {
                let content = content.iter().map(|b| ctx.block_json(b)).collect();
                json_response(
                    StatusCode::OK,
                    &ctx.message(content, Some(stop_reason), output),
                )
            }
            None => error(
                500,
                "api_error",
                "fake llm: this step is only scripted for streaming",
            ),
        },
        step => streaming(inner, ctx, step, pause),
    }
}

fn streaming(inner: Arc<Inner>, ctx: Ctx, step: Step, pause: Duration) -> Response {
    let stream = async_stream::stream! {
        let mut guard = CancelGuard::new(&inner);
        let start = ctx.message(Vec::new(), None, 1);
        yield Ok::<_, Infallible>(event("message_start", &json!({"type": "message_start", "message": start})));
        yield Ok(event("ping", &json!({"type": "ping"})));
        match &step {
            Step::HangAfterFirstChunk { first } => {
                for b in block_events(&ctx, 0, &Block::Text(first.clone())).into_iter().take(2) {
                    yield Ok(b);
                }
                futures::future::pending::<()>().await;
            }
            Step::CutMidStream { content } | Step::FailMidStream { content, .. } => {
                let events = block_events(&ctx, 0, &Block::Text(content.clone()));
                // Started, never stopped.
                for b in events.iter().take(events.len() - 1) {
                    pace(pause).await;
                    yield Ok(b.clone());
                }
                if let Step::FailMidStream { kind, message, .. } = &step {
                    yield Ok(event("error", &json!({"type": "error", "error": {"type": kind, "message": message}})));
                }
                guard.finish();
            }
            step => {
                if let Some((content, stop_reason, output)) = blocks(&ctx, step) {
                    for (index, block) in content.iter().enumerate() {
                        for b in block_events(&ctx, index, block) {
                            pace(pause).await;
                            yield Ok(b);
                        }
                    }
                    yield Ok(event("message_delta", &json!({"type": "message_delta",
                        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                        "usage": {"output_tokens": output}})));
                    guard.finish();
                    yield Ok(event("message_stop", &json!({"type": "message_stop"})));
                }
            }
        }
    };
    sse_response(stream)
}
