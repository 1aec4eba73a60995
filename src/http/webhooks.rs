//! `/api/webhooks/deliveries`: the webhook deliveries not delivered yet — pending ones and
//! dead letters (`status=failed`) — and queuing a dead letter again. Behind the API keys.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use uuid::Uuid;

use super::conversations::{Answer, query_pairs};
use super::extract::{Json, Path};
use super::{ApiError, AppState};
use crate::store::{Delivery, DeliveryQuery, RetryError};

/// A delivery a receiver is owed.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DeliveryView {
    /// `X-Triage-Delivery`: the same on every attempt (the receiver's idempotency key).
    pub id: Uuid,
    pub receiver: String,
    pub conversation_id: Uuid,
    /// `conversations` (a snapshot) or `events`.
    pub kind: String,
    /// `pending` (queued or being retried) or `failed` (dead-lettered).
    pub status: String,
    pub attempts: u32,
    /// `X-Triage-Sequence`: the last event id it accounts for.
    pub sequence: u64,
    /// Events in it (0 for a snapshot).
    pub event_count: u64,
    pub created_at: DateTime<Utc>,
    pub next_attempt_at: DateTime<Utc>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// The receiver's HTTP status at the last attempt, if it answered.
    pub last_status: Option<u16>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DeliveryPage {
    pub items: Vec<DeliveryView>,
    pub next_page_id: Option<String>,
}

/// A delivery as the API shows it; the receiver's answer in `last_error` may echo what it was
/// sent (a header, a body), so it passes the masker.
fn view(d: Delivery, masker: &crate::agent::SecretMasker) -> DeliveryView {
    let last_error = d.last_error.map(|mut e| {
        masker.mask(&mut e);
        e
    });
    DeliveryView {
        id: d.id,
        receiver: d.receiver,
        conversation_id: d.conversation_id,
        kind: d.kind,
        status: d.status,
        attempts: d.attempts,
        sequence: d.sequence,
        event_count: d.event_count,
        created_at: d.created_at,
        next_attempt_at: d.next_attempt_at,
        last_error,
        last_status: d.last_status,
    }
}

/// A delivery's id as the path names it: a UUID.
pub struct DeliveryId(Uuid);

impl<'de> Deserialize<'de> for DeliveryId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = std::borrow::Cow::<str>::deserialize(deserializer)?;
        Uuid::parse_str(&raw)
            .map(DeliveryId)
            .map_err(|_| serde::de::Error::custom(format!("'{raw}' is not a delivery id (a UUID)")))
    }
}

fn bad_query(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)
}

/// `GET /api/webhooks/deliveries?status=&receiver=&conversation_id=&limit=&page_id=`.
pub async fn list(State(state): State<AppState>, RawQuery(raw): RawQuery) -> Answer<DeliveryPage> {
    let mut q = DeliveryQuery {
        limit: 100,
        ..DeliveryQuery::default()
    };
    for (key, value) in query_pairs(raw.as_deref()) {
        match key.as_str() {
            "status" if matches!(value.as_str(), "pending" | "failed") => q.status = Some(value),
            "status" => {
                return Err(bad_query(format!(
                    "status '{value}': `pending` or `failed`"
                )));
            }
            "receiver" => q.receiver = Some(value),
            "conversation_id" => match Uuid::parse_str(&value) {
                Ok(id) => q.conversation_id = Some(id),
                Err(_) => return Err(bad_query(format!("conversation_id '{value}': a UUID"))),
            },
            "limit" => match value.parse::<u32>() {
                Ok(n) if (1..=100).contains(&n) => q.limit = n,
                _ => {
                    return Err(bad_query(format!(
                        "limit '{value}': a number from 1 to 100"
                    )));
                }
            },
            "page_id" => q.page_id = Some(value),
            other => return Err(bad_query(format!("unknown query parameter '{other}'"))),
        }
    }
    let page = state.conversations.store().deliveries(&q).await?;
    Ok(Json(DeliveryPage {
        items: page
            .items
            .into_iter()
            .map(|d| view(d, &state.agent().masker))
            .collect(),
        next_page_id: page.next_page_id,
    }))
}

/// `POST /api/webhooks/deliveries/{id}/retry`: a dead letter queued again.
pub async fn retry(
    State(state): State<AppState>,
    Path(DeliveryId(id)): Path<DeliveryId>,
) -> Answer<DeliveryView> {
    match state.conversations.store().retry_delivery(id).await {
        Ok(delivery) => Ok(Json(view(delivery, &state.agent().masker))),
        Err(RetryError::NotFound) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no undelivered webhook delivery has id {id}"),
        )),
        Err(RetryError::NotFailed) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "the delivery is not dead-lettered: it is still being sent",
        )),
        Err(RetryError::Store(e)) => Err(e.into()),
    }
}
