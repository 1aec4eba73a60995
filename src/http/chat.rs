//! `POST /api/chat`: parse, let the agent prepare the conversation (refusals become HTTP
//! errors), then stream its events as SSE or collect them into one JSON body.

use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::{Stream, StreamExt};

use super::body::{parse_json, read_body};
use super::{ApiError, AppState, sse};
use crate::wire::events::ToolCallResult;
use crate::wire::{ChatRequest, ChatResponse, StreamEvent};

pub async fn chat(State(state): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    match handle(state, body).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn handle(
    state: AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let bytes = read_body(body, state.body_limit)?;
    let request: ChatRequest = parse_json(&bytes)?;
    drop(bytes);
    let stream = request.stream;
    let prepared = state.agent.prepare(request)?;
    let events = state.agent.clone().run(prepared);
    if stream {
        Ok(sse::response(events, state.keepalive))
    } else {
        collect(events).await.map(|r| axum::Json(r).into_response())
    }
}

/// Drains the event stream into the non-streaming response.
async fn collect(events: impl Stream<Item = StreamEvent>) -> Result<ChatResponse, ApiError> {
    let mut events = std::pin::pin!(events);
    let mut tool_calls: Vec<ToolCallResult> = Vec::new();
    while let Some(event) = events.next().await {
        match event {
            StreamEvent::ToolCallingResult(result) => {
                // One entry per call id, the latest winning (a resumed call reports again).
                tool_calls.retain(|t| t.tool_call_id != result.tool_call_id);
                tool_calls.push(*result);
            }
            StreamEvent::AnswerEnd(end) => {
                return Ok(ChatResponse {
                    analysis: end.analysis,
                    conversation_history: end.conversation_history,
                    tool_calls,
                    follow_up_actions: end.follow_up_actions,
                    pending_approvals: None,
                    metadata: end.metadata,
                });
            }
            StreamEvent::Error(e) => {
                let status = StatusCode::from_u16(e.http_status)
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                return Err(ApiError::new(status, e.description));
            }
            StreamEvent::ApprovalRequired(_) => {
                return Err(ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the agent paused for approval, which needs `stream: true`",
                ));
            }
            _ => {}
        }
    }
    Err(ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "the agent stopped without an answer",
    ))
}
