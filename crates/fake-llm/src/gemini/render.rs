//! A scripted step in Gemini's stream format (`alt=sse`): each event a whole
//! `GenerateContentResponse` holding the next parts; thoughts first (with thinking on), then
//! text word by word, then function calls as whole parts (Gemini never splits one); the last
//! event has `finishReason` and `usageMetadata`. Errors are Google's error bodies, with a
//! `RetryInfo` detail for a step's `retry_after`, or an `error` object inside the stream.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use serde_json::{Value, json};

use super::{error, sign};
use crate::wire::stream::{pace, split_words, sse_response};
use crate::{CancelGuard, Inner, Step, Usage};

pub(crate) struct Ctx {
    pub prompt_tokens: u64,
    pub thinking: bool,
    pub calls_allowed: bool,
    pub secret: String,
}

fn chunk(parts: Vec<Value>) -> Bytes {
    let body = json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
                      "modelVersion": "fake-gemini"});
    Bytes::from(format!("data: {body}\r\n\r\n"))
}

fn data(body: &Value) -> Bytes {
    Bytes::from(format!("data: {body}\r\n\r\n"))
}

impl Ctx {
    fn last(&self, output: u64, thoughts: u64) -> Bytes {
        let mut usage = json!({
            "promptTokenCount": self.prompt_tokens,
            "candidatesTokenCount": output,
            "totalTokenCount": self.prompt_tokens + output + thoughts,
        });
        if thoughts > 0 {
            usage["thoughtsTokenCount"] = json!(thoughts);
        }
        data(
            &json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]},
            "finishReason": "STOP", "index": 0}], "usageMetadata": usage, "modelVersion": "fake-gemini"}),
        )
    }
}

/// The events of an answer, for the steps that are answers.
fn events(ctx: &Ctx, step: &Step) -> Option<Vec<Bytes>> {
    let words = |s: &str| s.split_whitespace().count() as u64;
    let output = |usage: &Option<Usage>, estimate: u64| {
        usage.map_or(estimate.max(1), |u| u.completion_tokens)
    };
    let mut out = Vec::new();
    let mut thoughts = 0;
    let mut think = |reasoning: Option<&String>, out: &mut Vec<Bytes>| {
        if ctx.thinking {
            let text = reasoning
                .cloned()
                .unwrap_or_else(|| "Considering what the user asked.".into());
            thoughts = words(&text) * 3;
            out.push(chunk(vec![json!({"text": text, "thought": true})]));
        }
    };
    let text = |content: &str, out: &mut Vec<Bytes>| {
        for (i, w) in split_words(content).into_iter().enumerate() {
            let mut part = json!({"text": w});
            if i == 0 && ctx.thinking {
                part["thoughtSignature"] = json!(sign(&ctx.secret, &json!(super::TEXT_SIGNED)));
            }
            out.push(chunk(vec![part]));
        }
    };
    let completion = match step {
        Step::Text {
            content,
            reasoning,
            usage,
        } => {
            think(reasoning.as_ref(), &mut out);
            text(content, &mut out);
            output(usage, words(content))
        }
        Step::ToolCalls {
            content,
            calls,
            usage,
        } => {
            think(None, &mut out);
            if let Some(c) = content {
                text(c, &mut out);
            }
            let parts: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let call = json!({"name": c.name,
                        "args": serde_json::from_str::<Value>(&c.arguments).unwrap_or(json!({}))});
                    let mut part = json!({"functionCall": call});
                    if i == 0 && ctx.thinking {
                        part["thoughtSignature"] = json!(sign(&ctx.secret, &call));
                    }
                    part
                })
                .collect();
            out.push(chunk(parts));
            let args: usize = calls.iter().map(|c| c.arguments.len()).sum();
            output(usage, (args / 4) as u64)
        }
        Step::Slow { content, .. } => {
            text(content, &mut out);
            words(content)
        }
        Step::Drip { piece, times, .. } => {
            text(&piece.repeat(*times), &mut out);
            *times as u64
        }
        _ => return None,
    };
    out.push(ctx.last(completion, thoughts));
    Some(out)
}

/// Google's status name of an HTTP status.
pub(crate) fn status_name(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

pub(crate) async fn answer(inner: Arc<Inner>, ctx: Ctx, mut step: Step) -> Response {
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
            "fake llm: the script has tool calls but the request's functionCallingConfig mode is NONE",
            None,
        );
    }
    match step {
        Step::Error {
            status,
            message,
            retry_after,
        } => {
            // Google says how long to wait in the body; a header is sent too when scripted as one.
            let delay = retry_after.as_deref().and_then(|s| s.parse::<f64>().ok());
            let mut resp = error(status, &message, delay);
            if let Some(v) = retry_after
                .filter(|_| delay.is_none())
                .and_then(|ra| HeaderValue::from_str(&ra).ok())
            {
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
            let stream = async_stream::stream! {
                let mut guard = CancelGuard::new(&inner);
                match &step {
                    Step::HangAfterFirstChunk { first } => {
                        yield Ok::<_, Infallible>(chunk(vec![json!({"text": first})]));
                        futures::future::pending::<()>().await;
                    }
                    Step::CutMidStream { content } | Step::FailMidStream { content, .. } => {
                        for w in split_words(content) {
                            pace(pause).await;
                            yield Ok(chunk(vec![json!({"text": w})]));
                        }
                        if let Step::FailMidStream { message, .. } = &step {
                            yield Ok(data(&json!({"error": {"code": 500, "message": message, "status": "INTERNAL"}})));
                        }
                        guard.finish();
                    }
                    step => {
                        for event in events(&ctx, step).unwrap_or_default() {
                            pace(pause).await;
                            yield Ok(event);
                        }
                        guard.finish();
                    }
                }
            };
            sse_response(stream)
        }
    }
}
