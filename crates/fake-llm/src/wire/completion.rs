//! Non-streaming answers: a step as one `chat.completion` JSON body (or, for the fault steps,
//! a body that stalls or breaks off).

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{Ctx, json_response, tool_calls_completion_estimate, usage_json, word_count};
use crate::{CancelGuard, Inner, Step, Usage};

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

pub(super) async fn non_streaming(inner: Arc<Inner>, ctx: Ctx, step: Step) -> Response {
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
        Step::FailMidStream { kind, message, .. } => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"error": {"message": message, "type": kind}}),
        ),
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
