//! A scripted step as ConverseStream's eventstream frames: `messageStart`, content blocks
//! (reasoning with its signature when thinking is on, text, tool uses with their input in
//! pieces), `messageStop` with the stop reason and `metadata` with usage (cache reads and
//! writes); an exception frame mid-stream; HTTP errors as Bedrock sends them.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use aws_smithy_types::event_stream::{Header, HeaderValue as FrameHeader, Message};
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use super::{error, exception_kind, sign};
use crate::wire::stream::{pace, split_args, split_words};
use crate::{CancelGuard, Inner, Step};

pub(crate) struct Ctx {
    pub prompt_tokens: u64,
    /// (read, written) cached tokens.
    pub cached: (u64, u64),
    pub thinking: bool,
    pub secret: String,
}

fn frame(message_type: &str, kind_header: &str, kind: &str, payload: &Value) -> Bytes {
    let message = Message::new(payload.to_string().into_bytes())
        .add_header(Header::new(
            kind_header.to_owned(),
            FrameHeader::String(kind.to_owned().into()),
        ))
        .add_header(Header::new(
            ":content-type",
            FrameHeader::String("application/json".into()),
        ))
        .add_header(Header::new(
            ":message-type",
            FrameHeader::String(message_type.to_owned().into()),
        ));
    let mut out = Vec::new();
    // Encoding a message built here cannot fail (names and sizes are small).
    let _ = aws_smithy_eventstream::frame::write_message_to(&message, &mut out);
    Bytes::from(out)
}

fn event(kind: &str, payload: Value) -> Bytes {
    frame("event", ":event-type", kind, &payload)
}

/// An exception frame, e.g. `throttlingException` or `modelStreamErrorException`.
fn exception(kind: &str, message: &str) -> Bytes {
    frame(
        "exception",
        ":exception-type",
        kind,
        &json!({"message": message}),
    )
}

struct Frames {
    out: Vec<Bytes>,
    index: u64,
}

impl Frames {
    fn text(&mut self, text: &str) {
        for piece in split_words(text) {
            self.out.push(event(
                "contentBlockDelta",
                json!({"contentBlockIndex": self.index, "delta": {"text": piece}}),
            ));
        }
        self.stop();
    }

    fn reasoning(&mut self, text: &str, secret: &str) {
        for piece in split_words(text) {
            self.out.push(event(
                "contentBlockDelta",
                json!({"contentBlockIndex": self.index,
                "delta": {"reasoningContent": {"text": piece}}}),
            ));
        }
        self.out.push(event(
            "contentBlockDelta",
            json!({"contentBlockIndex": self.index,
            "delta": {"reasoningContent": {"signature": sign(secret, text)}}}),
        ));
        self.stop();
    }

    fn stop(&mut self) {
        self.out.push(event(
            "contentBlockStop",
            json!({"contentBlockIndex": self.index}),
        ));
        self.index += 1;
    }
}

pub(crate) async fn answer(inner: Arc<Inner>, ctx: Ctx, step: Step) -> Response {
    let mut frames = Frames {
        out: vec![event("messageStart", json!({"role": "assistant"}))],
        index: 0,
    };
    let words = |s: &str| s.split_whitespace().count() as u64;
    let mut pause = Duration::ZERO;
    let mut step = step;
    if let Step::Paced {
        before,
        between_chunks,
        step: inner_step,
    } = step
    {
        tokio::time::sleep(before).await;
        pause = between_chunks;
        step = *inner_step;
    }
    let (stop, output) = match &step {
        Step::Text {
            content,
            reasoning,
            usage,
        } => {
            let mut thought = 0;
            if ctx.thinking {
                let r = reasoning
                    .clone()
                    .unwrap_or_else(|| "Considering what the user asked.".into());
                thought = words(&r);
                frames.reasoning(&r, &ctx.secret);
            }
            frames.text(content);
            (
                "end_turn",
                usage.map_or(words(content) + thought, |u| u.completion_tokens),
            )
        }
        Step::ToolCalls {
            content,
            calls,
            usage,
        } => {
            if ctx.thinking {
                frames.reasoning("Deciding which tool to call.", &ctx.secret);
            }
            if let Some(c) = content.as_deref().filter(|c| !c.trim().is_empty()) {
                frames.text(c);
            }
            for call in calls {
                frames.out.push(event(
                    "contentBlockStart",
                    json!({"contentBlockIndex": frames.index,
                    "start": {"toolUse": {"toolUseId": call.id, "name": call.name}}}),
                ));
                for piece in split_args(&call.arguments) {
                    frames.out.push(event(
                        "contentBlockDelta",
                        json!({"contentBlockIndex": frames.index,
                        "delta": {"toolUse": {"input": piece}}}),
                    ));
                }
                frames.stop();
            }
            let args: usize = calls.iter().map(|c| c.arguments.len()).sum();
            (
                "tool_use",
                usage.map_or((args / 4).max(1) as u64, |u| u.completion_tokens),
            )
        }
        Step::Slow { content, .. } => {
            frames.text(content);
            ("end_turn", words(content))
        }
        Step::Drip { piece, times, .. } => {
            frames.text(&piece.repeat(*times));
            ("end_turn", *times as u64)
        }
        Step::Error {
            status,
            message,
            retry_after,
        } => {
            let mut response = error(*status, exception_kind(*status), message);
            if let Some(v) = retry_after
                .as_deref()
                .and_then(|r| HeaderValue::from_str(r).ok())
            {
                response.headers_mut().insert("retry-after", v);
            }
            return response;
        }
        Step::FailMidStream {
            content,
            kind,
            message,
        } => {
            frames.text(content);
            frames.out.push(exception(kind, message));
            return stream(inner, frames.out, pause, false);
        }
        Step::CutMidStream { content } => {
            frames.text(content);
            return stream(inner, frames.out, pause, false);
        }
        Step::HangBeforeHeaders => {
            let _guard = CancelGuard::new(&inner);
            std::future::pending::<()>().await;
            unreachable!("pending never resolves")
        }
        Step::HangAfterFirstChunk { first } => {
            frames.out.push(event(
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"text": first}}),
            ));
            return stream(inner, frames.out, pause, true);
        }
        Step::Raw { body } => {
            return stream(inner, vec![body.clone()], pause, false);
        }
        Step::Paced { .. } => {
            return error(
                500,
                "InternalServerException",
                "fake llm: nested Paced step",
            );
        }
    };
    let (read, written) = ctx.cached;
    let input = ctx.prompt_tokens.saturating_sub(read + written);
    frames
        .out
        .push(event("messageStop", json!({"stopReason": stop})));
    frames.out.push(event(
        "metadata",
        json!({
            "usage": {"inputTokens": input, "outputTokens": output,
                      "totalTokens": input + output + read + written,
                      "cacheReadInputTokens": read, "cacheWriteInputTokens": written},
            "metrics": {"latencyMs": 1},
        }),
    ));
    stream(inner, frames.out, pause, false)
}

/// The frames one body chunk each, a scheduler turn (or the paced pause) apart; `hang` keeps
/// the body open after the last one.
fn stream(inner: Arc<Inner>, frames: Vec<Bytes>, pause: Duration, hang: bool) -> Response {
    let body = async_stream::stream! {
        let mut guard = CancelGuard::new(&inner);
        for frame in frames {
            yield Ok::<_, Infallible>(frame);
            pace(pause).await;
        }
        if hang {
            std::future::pending::<()>().await;
        }
        guard.finish();
    };
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/vnd.amazon.eventstream"),
    );
    response
}
