//! `/api/conversations/{id}/condense`, `/generate_title` and `/fork`: work on a whole
//! conversation beside its runs (see `conversations/condense.rs`, `titles.rs`, `fork.rs`).

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use super::conversations::{answer, conversation_id, refused};
use super::{ApiError, AppState};
use crate::conversations::api::{ForkConversation, GenerateTitle, GeneratedTitle, Success};
use crate::conversations::{DEFAULT_TITLE_CHARS, MAX_TITLE_CHARS};

/// A conversation id and a body whose fields are all optional: an empty body reads as `{}`.
fn id_and_optional_body<T: serde::de::DeserializeOwned + Default>(
    id: &str,
    body: Result<Bytes, BytesRejection>,
) -> Result<(uuid::Uuid, T), ApiError> {
    let id = conversation_id(id)?;
    let bytes = super::body::read_body(body)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok((id, T::default()));
    }
    Ok((id, super::body::parse_json(&bytes)?))
}

/// Forces a compaction now; `success` is false when the summary was not smaller than the
/// history (kept). OpenHands answers `Success` here too.
pub async fn condense(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match conversation_id(&id) {
        Ok(id) => answer(
            state
                .conversations
                .condense(id)
                .await
                .map(|compacted| Success { success: compacted }),
        ),
        Err(e) => e.into_response(),
    }
}

pub async fn generate_title(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (id, req) = match id_and_optional_body::<GenerateTitle>(&id, body) {
        Ok(parsed) => parsed,
        Err(e) => return e.into_response(),
    };
    let max_length = req.max_length.unwrap_or(DEFAULT_TITLE_CHARS);
    if !(1..=MAX_TITLE_CHARS).contains(&max_length) {
        return ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("max_length {max_length}: from 1 to {MAX_TITLE_CHARS} characters"),
        )
        .into_response();
    }
    answer(
        state
            .conversations
            .generate_title(id, max_length)
            .await
            .map(|title| GeneratedTitle { title }),
    )
}

pub async fn fork(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (id, req) = match id_and_optional_body::<ForkConversation>(&id, body) {
        Ok(parsed) => parsed,
        Err(e) => return e.into_response(),
    };
    match state.conversations.fork(id, req).await {
        Ok(info) => (StatusCode::CREATED, Json(info)).into_response(),
        Err(e) => refused(e),
    }
}
