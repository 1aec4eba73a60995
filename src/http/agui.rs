//! `POST /api/agui/chat`: AG-UI's `RunAgentInput` in, its events out as SSE `data:` frames.
//! A body that is not a `RunAgentInput`, or a request the agent refuses, is answered with the
//! usual `{"detail": …}` error before the stream starts (the protocol has no error event
//! before RUN_STARTED); what fails during the run ends the stream with RUN_ERROR. A `threadId`
//! naming a stored conversation continues it (`agui::on_thread`), refusals likewise before
//! the stream (409 while it runs, 400 for a resume naming no call it waits for).

use axum::Extension;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use super::body::{parse_json, read_body};
use super::chat::{in_span, passthrough_headers};
use super::sse::{Frame, StreamLimits};
use super::{ApiError, AppState, RequestId, sse};
use crate::agui::{AguiEvent, Door, RunAgentInput};
use crate::context::tokens::count_off_workers;
use crate::holmes::RequestMeta;

pub async fn chat(
    State(state): State<AppState>,
    request_id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let id = request_id.map_or_else(|| uuid::Uuid::new_v4().to_string(), |Extension(r)| r.0);
    let meta = RequestMeta {
        request_id: id,
        headers: passthrough_headers(&headers, &state.blocked_headers),
    };
    match handle(state, meta, body).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn handle(
    state: AppState,
    meta: RequestMeta,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let bytes = read_body(body)?;
    let input: RunAgentInput = parse_json(&bytes)?;
    let size = bytes.len();
    drop(bytes);
    // A thread that is a stored conversation continues it; any other runs stateless.
    let idle = state
        .keepalive
        .unwrap_or(std::time::Duration::from_secs(15));
    let input = match crate::agui::on_thread(&state.conversations, input, idle).await? {
        Door::Stateless(input) => *input,
        Door::Thread(events) => {
            return Ok(sse::response(
                in_span(events, tracing::Span::current()),
                StreamLimits::of(&state),
            ));
        }
    };
    let chat = state.chat.clone();
    // Starting counts the tokens of the whole history: a large one goes to the blocking pool.
    let started = count_off_workers(size, move || crate::agui::start(&chat, input, meta))
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("preparing the request failed: {e}"),
            )
        })?;
    let run = started?;
    Ok(sse::response(
        in_span(run, tracing::Span::current()),
        StreamLimits::of(&state),
    ))
}

impl Frame for AguiEvent {
    fn frame(&self) -> Bytes {
        let mut buf = Vec::with_capacity(128);
        buf.extend_from_slice(b"data: ");
        if let Err(e) = serde_json::to_writer(&mut buf, self) {
            // Not reachable with these types; never send half a frame.
            tracing::error!(error = %e, "cannot encode an AG-UI event");
            buf.truncate(6);
            let fallback = AguiEvent::RunError {
                message: "cannot encode an event".into(),
                code: Some("internal".into()),
            };
            let _ = serde_json::to_writer(&mut buf, &fallback);
        }
        buf.extend_from_slice(b"\n\n");
        Bytes::from(buf)
    }

    fn is_terminal(&self) -> bool {
        AguiEvent::is_terminal(self)
    }

    fn cut_short(message: String) -> Self {
        AguiEvent::RunError {
            message,
            code: Some("cut_short".into()),
        }
    }
}
