//! The OpenAI-compatible door's HTTP edge: `GET /v1/models`, `POST /v1/chat/completions`,
//! `POST /v1/responses`. The admission layer (origin, API key — `Authorization: Bearer`, what
//! the SDK sends — limits) runs as for `/api/chat`; every error under `/v1/`, theirs included,
//! is answered in OpenAI's shape (`reshape`).

use axum::body::Body;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::BodyExt;
use serde::Serialize;

use super::AppState;
use super::chat::{in_span, passthrough_headers};
use super::error::{ErrorKind, answer_for};
use super::sse::{StreamLimits, frames_response};
use crate::context::tokens::count_off_workers;
use crate::openai_compat::{
    self, ChatAnswer, ChatCompletionRequest, OpenAiError, Prepared, Refusal, ResponsesAnswer,
    ResponsesRequest,
};

/// Where this door's routes live: errors under it get OpenAI's shape.
pub const PREFIX: &str = "/v1/";

pub async fn models(State(state): State<AppState>) -> Response {
    let created = (chrono::Utc::now()
        - chrono::Duration::from_std(state.started.elapsed()).unwrap_or_default())
    .timestamp();
    json(
        StatusCode::OK,
        &openai_compat::models(&state.agent(), created),
    )
}

pub async fn chat_completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let bytes = match body {
        Ok(bytes) => bytes,
        Err(rejection) => return rejected(&rejection),
    };
    let request: ChatCompletionRequest = match openai_compat::parse(&bytes) {
        Ok(request) => request,
        Err(e) => return error_response(&e),
    };
    let (streaming, include_usage) = (request.streaming(), request.usage_in_stream());
    let model = request.model.clone();
    let size = bytes.len();
    drop(bytes);
    let tool_headers = passthrough_headers(&headers, &state.blocked_headers);
    let prepared = match request.prepare(tool_headers) {
        Ok(prepared) => prepared,
        Err(e) => return error_response(&e),
    };
    let run = match start(&state, prepared, size).await {
        Ok(run) => run,
        Err(e) => return error_response(&e),
    };
    let answer = ChatAnswer::new(run, model);
    if streaming {
        let frames = in_span(answer.stream(include_usage), tracing::Span::current());
        return frames_response(frames, StreamLimits::of(&state), chat_error_frame);
    }
    let collected = tracing::Instrument::in_current_span(answer.collect());
    match tokio::time::timeout(state.deadline, collected).await {
        Ok(Ok(completion)) => json(StatusCode::OK, &completion),
        Ok(Err(e)) => error_response(&e),
        Err(_) => error_response(&deadline_error(&state)),
    }
}

pub async fn responses(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let bytes = match body {
        Ok(bytes) => bytes,
        Err(rejection) => return rejected(&rejection),
    };
    let request: ResponsesRequest = match openai_compat::parse(&bytes) {
        Ok(request) => request,
        Err(e) => return error_response(&e),
    };
    let streaming = request.streaming();
    let model = request.model.clone();
    let instructions = request.instructions.clone();
    let size = bytes.len();
    drop(bytes);
    let tool_headers = passthrough_headers(&headers, &state.blocked_headers);
    let prepared = match request.prepare(tool_headers) {
        Ok(prepared) => prepared,
        Err(e) => return error_response(&e),
    };
    let run = match start(&state, prepared, size).await {
        Ok(run) => run,
        Err(e) => return error_response(&e),
    };
    let answer = ResponsesAnswer::new(run, model, instructions);
    if streaming {
        let frames = in_span(answer.stream(), tracing::Span::current());
        return frames_response(frames, StreamLimits::of(&state), responses_error_frame);
    }
    let collected = tracing::Instrument::in_current_span(answer.collect());
    match tokio::time::timeout(state.deadline, collected).await {
        Ok(Ok(response)) => json(StatusCode::OK, &response),
        Ok(Err(e)) => error_response(&e),
        Err(_) => error_response(&deadline_error(&state)),
    }
}

/// Starts the run on the agent serving now; a long history's tokens are counted off the
/// serving threads, as `/api/chat` does.
async fn start(
    state: &AppState,
    prepared: Prepared,
    size: usize,
) -> Result<crate::agent::Run, OpenAiError> {
    let agent = state.agent();
    count_off_workers(size, move || openai_compat::start(&agent, prepared))
        .await
        .map_err(|e| openai_compat::for_status(500, format!("preparing the request failed: {e}")))?
}

fn deadline_error(state: &AppState) -> OpenAiError {
    openai_compat::for_status(
        504,
        format!(
            "The request exceeded its deadline of {} s (server.request_deadline_secs)",
            state.deadline.as_secs_f64()
        ),
    )
}

fn chat_error_frame(message: String) -> Bytes {
    let e = openai_compat::for_status(500, message);
    let mut frame = b"data: ".to_vec();
    frame.extend(serde_json::to_vec(&e.body()).unwrap_or_default());
    frame.extend_from_slice(b"\n\n");
    Bytes::from(frame)
}

fn responses_error_frame(message: String) -> Bytes {
    let body = serde_json::json!({
        "type": "error", "code": "server_error", "message": message, "param": null,
    });
    Bytes::from(format!("event: error\ndata: {body}\n\n"))
}

fn rejected(rejection: &BytesRejection) -> Response {
    error_response(&openai_compat::for_status(
        rejection.status().as_u16(),
        rejection.body_text(),
    ))
}

fn status_of(e: &OpenAiError) -> (StatusCode, bool) {
    match e.refusal {
        Refusal::Invalid => (StatusCode::BAD_REQUEST, false),
        Refusal::UnknownModel => (StatusCode::NOT_FOUND, false),
        Refusal::Run(kind) => {
            let answer = answer_for(ErrorKind::Run(kind));
            (answer.status, answer.retry_soon)
        }
    }
}

pub fn error_response(e: &OpenAiError) -> Response {
    let (status, retry_soon) = status_of(e);
    if status.is_server_error() {
        tracing::error!(status = status.as_u16(), message = %e.message, "request failed");
    } else {
        tracing::info!(status = status.as_u16(), message = %e.message, "request refused");
    }
    let mut response = json(status, &e.body());
    if retry_soon {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

fn json(status: StatusCode, value: &impl Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Err(e) => error_response(&openai_compat::for_status(
            500,
            format!("the answer could not be written as JSON: {e}"),
        )),
    }
}

/// An error answered under `/v1/` by a layer that speaks `{"detail": …}` (the API key, body
/// and load limits, the origin guard, axum's 404 and 405): the same status and headers, in
/// OpenAI's shape. These bodies are small and already whole.
pub async fn reshape(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(collected) = http_body_util::Limited::new(body, 64 * 1024)
        .collect()
        .await
    else {
        return error_response(&openai_compat::for_status(
            status.as_u16(),
            status.canonical_reason().unwrap_or("Error").to_owned(),
        ));
    };
    let bytes = collected.to_bytes();
    #[derive(serde::Deserialize)]
    struct Detail {
        detail: serde_json::Value,
    }
    let Ok(Detail { detail }) = serde_json::from_slice::<Detail>(&bytes) else {
        // Already OpenAI's shape (this door's own errors), or no JSON at all.
        return Response::from_parts(parts, Body::from(bytes));
    };
    let message = match detail {
        serde_json::Value::String(text) => text,
        other => other.to_string(),
    };
    let e = openai_compat::for_status(status.as_u16(), message);
    let body = serde_json::to_vec(&e.body()).unwrap_or_default();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, Body::from(body))
}
