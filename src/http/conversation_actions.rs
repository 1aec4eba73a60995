//! `/api/conversations/{id}/condense`, `/generate_title` and `/fork`: work on a whole
//! conversation beside its runs (see `conversations/condense.rs`, `titles.rs`, `fork.rs`).

use axum::extract::State;
use axum::http::StatusCode;

use super::conversations::Answer;
use super::extract::{Json, JsonOrEmpty, Path};
use super::{ApiError, AppState};
use crate::conversations::api::{
    ConversationInfo, ForkConversation, GenerateTitle, GeneratedTitle, Success,
};
use crate::conversations::{ConversationId, DEFAULT_TITLE_CHARS, MAX_TITLE_CHARS};

/// Forces a compaction now; `success` is false when the summary was not smaller than the
/// history (kept). OpenHands answers `Success` here too.
pub async fn condense(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
) -> Answer<Success> {
    let compacted = state.conversations.condense(id).await?;
    Ok(Json(Success { success: compacted }))
}

pub async fn generate_title(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
    JsonOrEmpty(request): JsonOrEmpty<GenerateTitle>,
) -> Answer<GeneratedTitle> {
    let max_length = request.max_length.unwrap_or(DEFAULT_TITLE_CHARS);
    if !(1..=MAX_TITLE_CHARS).contains(&max_length) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("max_length {max_length}: from 1 to {MAX_TITLE_CHARS} characters"),
        ));
    }
    let title = state.conversations.generate_title(id, max_length).await?;
    Ok(Json(GeneratedTitle { title }))
}

pub async fn fork(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
    JsonOrEmpty(request): JsonOrEmpty<ForkConversation>,
) -> Result<(StatusCode, Json<ConversationInfo>), ApiError> {
    let info = state.conversations.fork(id, request).await?;
    Ok((StatusCode::CREATED, Json(info)))
}
