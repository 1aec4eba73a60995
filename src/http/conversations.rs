//! `/api/conversations`: server-side conversations (see `conversations/`). Bodies and errors
//! as everywhere else: `{"detail"}` with a precise status.

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::body::{parse_json, read_body};
use super::{ApiError, AppState};
use crate::conversations::ConversationError;
use crate::conversations::api::{
    AskAgent, ConfirmationResponse, CreateConversation, EventPage, FinalResponse, PolicyUpdate,
    SecretsUpdate, SendMessage, StoredEventView, Success, UpdateConversation,
};
use crate::store::{ConversationQuery, EventQuery, SortOrder, StoreError};

impl From<ConversationError> for ApiError {
    fn from(e: ConversationError) -> Self {
        let status = match &e {
            ConversationError::NotFound(_) | ConversationError::Store(StoreError::NotFound) => {
                StatusCode::NOT_FOUND
            }
            ConversationError::Conflict(_) | ConversationError::Store(StoreError::Conflict(_)) => {
                StatusCode::CONFLICT
            }
            ConversationError::BadInput(_) => StatusCode::BAD_REQUEST,
            ConversationError::Store(StoreError::InvalidPageId) => StatusCode::UNPROCESSABLE_ENTITY,
            ConversationError::TooLarge(_)
            | ConversationError::Store(StoreError::TooManyEvents { .. }) => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            ConversationError::Busy(_) => StatusCode::TOO_MANY_REQUESTS,
            ConversationError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ConversationError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

/// A conversation error as a response; a full server says when to come back.
pub(super) fn refused(e: ConversationError) -> Response {
    let busy = matches!(e, ConversationError::Busy(_));
    let mut response = ApiError::from(e).into_response();
    if busy {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

pub(super) fn answer<T: serde::Serialize>(result: Result<T, ConversationError>) -> Response {
    match result {
        Ok(value) => Json(value).into_response(),
        Err(e) => refused(e),
    }
}

fn done(result: Result<(), ConversationError>) -> Response {
    answer(result.map(|()| Success { success: true }))
}

pub(super) fn conversation_id(raw: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(raw).map_err(|_| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("'{raw}' is not a conversation id (a UUID)"),
        )
    })
}

/// A conversation id from the path and a JSON body, or the error that refuses them.
pub(super) fn id_and_body<T: serde::de::DeserializeOwned>(
    id: &str,
    body: Result<Bytes, BytesRejection>,
) -> Result<(Uuid, T), ApiError> {
    let id = conversation_id(id)?;
    Ok((id, read_body(body).and_then(|b| parse_json(&b))?))
}

pub async fn create(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let request: CreateConversation = match read_body(body).and_then(|b| parse_json(&b)) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    match state.conversations.create(request).await {
        Ok(info) => (StatusCode::CREATED, Json(info)).into_response(),
        Err(e) => refused(e),
    }
}

pub async fn get(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match conversation_id(&id) {
        Ok(id) => answer(state.conversations.info(id).await),
        Err(e) => e.into_response(),
    }
}

pub async fn update(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match id_and_body::<UpdateConversation>(&id, body) {
        Ok((id, req)) => answer(state.conversations.update(id, req).await),
        Err(e) => e.into_response(),
    }
}

pub async fn delete(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match conversation_id(&id) {
        Ok(id) => done(state.conversations.delete(id).await),
        Err(e) => e.into_response(),
    }
}

pub async fn send(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match id_and_body::<SendMessage>(&id, body) {
        Ok((id, req)) => done(state.conversations.send_message(id, req).await),
        Err(e) => e.into_response(),
    }
}

pub async fn run(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match conversation_id(&id) {
        Ok(id) => done(state.conversations.run(id).await),
        Err(e) => e.into_response(),
    }
}

pub async fn pause(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match conversation_id(&id) {
        Ok(id) => done(state.conversations.pause(id).await),
        Err(e) => e.into_response(),
    }
}

pub async fn interrupt(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match conversation_id(&id) {
        Ok(id) => done(state.conversations.interrupt(id).await),
        Err(e) => e.into_response(),
    }
}

pub async fn respond(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match id_and_body::<ConfirmationResponse>(&id, body) {
        Ok((id, req)) => done(state.conversations.respond(id, req).await),
        Err(e) => e.into_response(),
    }
}

pub async fn set_policy(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match id_and_body::<PolicyUpdate>(&id, body) {
        Ok((id, req)) => done(state.conversations.set_policy(id, req.policy).await),
        Err(e) => e.into_response(),
    }
}

pub async fn add_secrets(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match id_and_body::<SecretsUpdate>(&id, body) {
        Ok((id, req)) => done(state.conversations.add_secrets(id, req.secrets).await),
        Err(e) => e.into_response(),
    }
}

pub async fn ask(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match id_and_body::<AskAgent>(&id, body) {
        Ok((id, req)) => answer(
            state
                .conversations
                .ask(id, &req.question)
                .await
                .map(|response| FinalResponse { response }),
        ),
        Err(e) => e.into_response(),
    }
}

pub async fn final_response(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match conversation_id(&id) {
        Ok(id) => answer(
            state
                .conversations
                .final_response(id)
                .await
                .map(|response| FinalResponse { response }),
        ),
        Err(e) => e.into_response(),
    }
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

pub async fn search(State(state): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    match conversation_query(raw.as_deref()) {
        Ok(q) => answer(state.conversations.search(&q).await),
        Err(e) => e.into_response(),
    }
}

pub async fn count(State(state): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    let mut status = None;
    for (key, value) in query_pairs(raw.as_deref()) {
        match key.as_str() {
            "status" => status = Some(value),
            other => {
                return bad_query(format!("unknown query parameter '{other}'")).into_response();
            }
        }
    }
    let counted = state.conversations.store().count(status.as_deref()).await;
    answer(counted.map_err(ConversationError::from))
}

/// `GET /api/conversations?ids=a&ids=b`: one entry per id, `null` for unknown ones.
pub async fn batch(State(state): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    let mut ids = Vec::new();
    for (key, value) in query_pairs(raw.as_deref()) {
        if key != "ids" {
            return bad_query(format!("unknown query parameter '{key}'")).into_response();
        }
        match conversation_id(&value) {
            Ok(id) => ids.push(id),
            Err(e) => return e.into_response(),
        }
    }
    if ids.len() > 100 {
        return bad_query("at most 100 ids".into()).into_response();
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
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let (id, q) = match conversation_id(&id).and_then(|id| Ok((id, event_query(raw.as_deref())?))) {
        Ok(parsed) => parsed,
        Err(e) => return e.into_response(),
    };
    let convs = &state.conversations;
    if let Err(e) = convs.info(id).await {
        return refused(e);
    }
    answer(
        convs
            .store()
            .events(id, &q)
            .await
            .map(|page| EventPage {
                items: page.items.into_iter().map(view).collect(),
                next_page_id: page.next_page_id,
            })
            .map_err(ConversationError::from),
    )
}

pub async fn count_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let (id, q) = match conversation_id(&id).and_then(|id| Ok((id, event_query(raw.as_deref())?))) {
        Ok(parsed) => parsed,
        Err(e) => return e.into_response(),
    };
    let convs = &state.conversations;
    if let Err(e) = convs.info(id).await {
        return refused(e);
    }
    answer(
        convs
            .store()
            .count_events(id, &q)
            .await
            .map_err(ConversationError::from),
    )
}

pub async fn event(
    State(state): State<AppState>,
    Path((id, event_id)): Path<(String, String)>,
) -> Response {
    let id = match conversation_id(&id) {
        Ok(id) => id,
        Err(e) => return e.into_response(),
    };
    let Ok(seq) = event_id.parse::<u64>() else {
        return bad_query(format!("'{event_id}' is not an event id (a number)")).into_response();
    };
    match state.conversations.store().event(id, seq).await {
        Ok(Some(e)) => Json(view(e)).into_response(),
        Ok(None) => ApiError::new(
            StatusCode::NOT_FOUND,
            format!("event {seq} of conversation {id} not found"),
        )
        .into_response(),
        Err(e) => refused(e.into()),
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
