//! `POST /api/webhook/{conversation_id}/{state_name}`: an event from elsewhere for a
//! conversation that waits (see `crate::inbound`). No API key: the reply token, as
//! `Authorization: Bearer <token>` or `?token=`, is the credential.

use std::net::SocketAddr;

use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use super::body::{parse_json, read_body};
use super::conversations::query_pairs;
use super::error::ErrorKind;
use super::extract::{Json, Path};
use super::{ApiError, AppState};
use crate::conversations::ConversationId;
use crate::inbound::{Refused, Request, WebhookEvent};

/// The path prefix the API keys do not guard.
pub const PREFIX: &str = "/api/webhook/";
/// An inbound event is a decision and a few fields; anything larger is refused (413).
const BODY_MAX: usize = 64 * 1024;

pub async fn receive(
    State(state): State<AppState>,
    Path((ConversationId(conversation_id), state_name)): Path<(ConversationId, String)>,
    RawQuery(raw): RawQuery,
    peer: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let mut token = bearer(&headers);
    for (key, value) in query_pairs(raw.as_deref()) {
        match key.as_str() {
            "token" => token = token.or(Some(value)),
            other => {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!("unknown query parameter '{other}'"),
                ));
            }
        }
    }
    // Smaller than every other body: checked here, before it is parsed.
    let body = read_body(body)?;
    if body.len() > BODY_MAX {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("an inbound webhook event is at most {BODY_MAX} bytes"),
        ));
    }
    let event: WebhookEvent = parse_json(&body)?;
    // Kept and looked up as text: PostgreSQL refuses a NUL there (a 500 otherwise).
    if event.event_key.chars().any(char::is_control) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "event_key: control characters are not allowed",
        ));
    }
    let request = Request {
        conversation_id,
        state_name,
        token,
        event,
        source: sender(peer.map(|p| p.0.0), &headers),
    };
    let (code, answer) = state.inbound.receive(request).await.map_err(refusal)?;
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    Ok((status, Json(answer)).into_response())
}

fn refusal(refused: Refused) -> ApiError {
    match refused {
        Refused::NotFound => ApiError::of(ErrorKind::NotFound, "conversation not found"),
        e @ Refused::BadToken => ApiError::new(StatusCode::UNAUTHORIZED, e.to_string())
            .with_header(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")),
        e @ Refused::NotInState { .. } => ApiError::of(ErrorKind::Conflict, e.to_string()),
        Refused::Throttled(wait) => {
            let refused = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                Refused::Throttled(wait).to_string(),
            );
            match HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
                Ok(secs) => refused.with_header(header::RETRY_AFTER, secs),
                Err(_) => refused,
            }
        }
        Refused::Failed(e) => e.into(),
    }
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let auth = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = auth.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_owned())
}

/// The peer's address, and what `X-Forwarded-For` claims (as given: a proxy may add it, a
/// client may forge it), for the audit.
fn sender(peer: Option<SocketAddr>, headers: &HeaderMap) -> String {
    let peer = peer.map_or_else(|| "unknown".to_owned(), |p| p.ip().to_string());
    match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        Some(forwarded) => {
            let forwarded: String = forwarded.chars().take(200).collect();
            format!("{peer} (x-forwarded-for: {forwarded})")
        }
        None => peer,
    }
}
