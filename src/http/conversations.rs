//! `/api/conversations`: server-side conversations (see `conversations/`). Bodies and errors
//! as everywhere else: `{"detail"}` with a precise status.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};

use super::extract::{Json, Path};
use super::{ApiError, AppState};
use crate::conversations::api::{
    AskAgent, ConfirmationResponse, ConversationInfo, ConversationPage, CreateConversation,
    EventPage, FinalResponse, PolicyUpdate, SecretsUpdate, SendMessage, StoredEventView, Success,
    UpdateConversation,
};
use crate::conversations::{ConversationError, ConversationId};
use crate::store::{ConversationQuery, EventQuery, SortOrder};

/// What a handler answers: the value as JSON, or the error as the table in `error.rs` says.
pub(super) type Answer<T> = Result<Json<T>, ApiError>;

pub(super) fn answer<T>(result: Result<T, ConversationError>) -> Answer<T> {
    Ok(Json(result?))
}

fn done(result: Result<(), ConversationError>) -> Answer<Success> {
    answer(result.map(|()| Success { success: true }))
}

pub async fn create(
    State(state): State<AppState>,
    Json(request): Json<CreateConversation>,
) -> Result<(StatusCode, Json<ConversationInfo>), ApiError> {
    let info = state.conversations.create(request).await?;
    Ok((StatusCode::CREATED, Json(info)))
}

pub async fn get(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
) -> Answer<ConversationInfo> {
    answer(state.conversations.info(id).await)
}

pub async fn update(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
    Json(request): Json<UpdateConversation>,
) -> Answer<ConversationInfo> {
    answer(state.conversations.update(id, request).await)
}

pub async fn delete(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
) -> Answer<Success> {
    done(state.conversations.delete(id).await)
}

pub async fn send(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
    Json(message): Json<SendMessage>,
) -> Answer<Success> {
    done(state.conversations.send_message(id, message).await)
}

pub async fn run(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
) -> Answer<Success> {
    done(state.conversations.run(id).await)
}

pub async fn pause(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
) -> Answer<Success> {
    done(state.conversations.pause(id).await)
}

pub async fn interrupt(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
) -> Answer<Success> {
    done(state.conversations.interrupt(id).await)
}

pub async fn respond(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
    Json(response): Json<ConfirmationResponse>,
) -> Answer<Success> {
    done(state.conversations.respond(id, response).await)
}

pub async fn set_policy(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
    Json(update): Json<PolicyUpdate>,
) -> Answer<Success> {
    done(state.conversations.set_policy(id, update.policy).await)
}

pub async fn add_secrets(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
    Json(update): Json<SecretsUpdate>,
) -> Answer<Success> {
    done(state.conversations.add_secrets(id, update.secrets).await)
}

pub async fn ask(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
    Json(ask): Json<AskAgent>,
) -> Answer<FinalResponse> {
    let response = state.conversations.ask(id, &ask.question).await?;
    Ok(Json(FinalResponse { response }))
}

pub async fn final_response(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
) -> Answer<FinalResponse> {
    let response = state.conversations.final_response(id).await?;
    Ok(Json(FinalResponse { response }))
}

/// `?a=1&b=2&b=3` as pairs, percent-decoded.
pub(super) fn query_pairs(raw: Option<&str>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

fn bad_query(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)
}

fn limit_of(value: &str) -> Result<u32, ApiError> {
    match value.parse::<u32>() {
        Ok(n) if (1..=100).contains(&n) => Ok(n),
        _ => Err(bad_query(format!(
            "limit '{value}': a number from 1 to 100"
        ))),
    }
}

fn time_of(key: &str, value: &str) -> Result<DateTime<Utc>, ApiError> {
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| bad_query(format!("{key} '{value}': an RFC 3339 time")))
}

fn conversation_query(raw: Option<&str>) -> Result<ConversationQuery, ApiError> {
    let mut q = ConversationQuery {
        page_id: None,
        limit: 100,
        status: None,
        sort: SortOrder::CreatedAtDesc,
    };
    for (key, value) in query_pairs(raw) {
        match key.as_str() {
            "page_id" => q.page_id = Some(value),
            "limit" => q.limit = limit_of(&value)?,
            "status" => q.status = Some(value),
            "sort_order" => {
                q.sort = match value.as_str() {
                    "CREATED_AT" => SortOrder::CreatedAt,
                    "CREATED_AT_DESC" => SortOrder::CreatedAtDesc,
                    "UPDATED_AT" => SortOrder::UpdatedAt,
                    "UPDATED_AT_DESC" => SortOrder::UpdatedAtDesc,
                    other => {
                        return Err(bad_query(format!(
                            "sort_order '{other}': CREATED_AT, CREATED_AT_DESC, UPDATED_AT or UPDATED_AT_DESC"
                        )));
                    }
                }
            }
            other => return Err(bad_query(format!("unknown query parameter '{other}'"))),
        }
    }
    Ok(q)
}

pub async fn search(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Answer<ConversationPage> {
    let q = conversation_query(raw.as_deref())?;
    answer(state.conversations.search(&q).await)
}

pub async fn count(State(state): State<AppState>, RawQuery(raw): RawQuery) -> Answer<u64> {
    let mut status = None;
    for (key, value) in query_pairs(raw.as_deref()) {
        match key.as_str() {
            "status" => status = Some(value),
            other => return Err(bad_query(format!("unknown query parameter '{other}'"))),
        }
    }
    let counted = state.conversations.store().count(status.as_deref()).await?;
    Ok(Json(counted))
}

/// `GET /api/conversations?ids=a&ids=b`: one entry per id, `null` for unknown ones.
pub async fn batch(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Answer<Vec<Option<ConversationInfo>>> {
    let mut ids = Vec::new();
    for (key, value) in query_pairs(raw.as_deref()) {
        if key != "ids" {
            return Err(bad_query(format!("unknown query parameter '{key}'")));
        }
        ids.push(ConversationId::parse(&value).map_err(bad_query)?.0);
    }
    if ids.len() > 100 {
        return Err(bad_query("at most 100 ids".into()));
    }
    answer(state.conversations.infos(&ids).await)
}

pub(super) fn event_query(raw: Option<&str>) -> Result<EventQuery, ApiError> {
    let mut q = EventQuery {
        limit: 100,
        ..EventQuery::default()
    };
    for (key, value) in query_pairs(raw) {
        match key.as_str() {
            "page_id" => q.page_id = Some(value),
            "limit" => q.limit = limit_of(&value)?,
            "kind" => q.kind = Some(value),
            "source" => q.source = Some(value),
            "body" => q.body = Some(value),
            "sort_order" => {
                q.descending = match value.as_str() {
                    "TIMESTAMP" => false,
                    "TIMESTAMP_DESC" => true,
                    other => {
                        return Err(bad_query(format!(
                            "sort_order '{other}': TIMESTAMP or TIMESTAMP_DESC"
                        )));
                    }
                }
            }
            "timestamp__gte" => q.timestamp_gte = Some(time_of(&key, &value)?),
            "timestamp__lt" => q.timestamp_lt = Some(time_of(&key, &value)?),
            other => return Err(bad_query(format!("unknown query parameter '{other}'"))),
        }
    }
    Ok(q)
}

pub async fn events(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
    RawQuery(raw): RawQuery,
) -> Answer<EventPage> {
    let q = event_query(raw.as_deref())?;
    let convs = &state.conversations;
    convs.info(id).await?;
    let page = convs.store().events(id, &q).await?;
    Ok(Json(EventPage {
        items: page.items.into_iter().map(view).collect(),
        next_page_id: page.next_page_id,
    }))
}

pub async fn count_events(
    State(state): State<AppState>,
    Path(ConversationId(id)): Path<ConversationId>,
    RawQuery(raw): RawQuery,
) -> Answer<u64> {
    let q = event_query(raw.as_deref())?;
    let convs = &state.conversations;
    convs.info(id).await?;
    Ok(Json(convs.store().count_events(id, &q).await?))
}

pub async fn event(
    State(state): State<AppState>,
    Path((ConversationId(id), event_id)): Path<(ConversationId, String)>,
) -> Answer<StoredEventView> {
    let Ok(seq) = event_id.parse::<u64>() else {
        return Err(bad_query(format!(
            "'{event_id}' is not an event id (a number)"
        )));
    };
    match state.conversations.store().event(id, seq).await? {
        Some(e) => Ok(Json(view(e))),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("event {seq} of conversation {id} not found"),
        )),
    }
}

pub(super) fn view(e: crate::store::StoredEvent) -> StoredEventView {
    StoredEventView {
        id: e.id,
        kind: e.kind,
        source: e.source,
        timestamp: e.timestamp,
        payload: e.payload,
    }
}
