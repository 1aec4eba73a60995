//! `POST /api/webhook/{conversation_id}/{state_name}`: an event from elsewhere for a
//! conversation that waits (see `crate::inbound`). No API key: the reply token, as
//! `Authorization: Bearer <token>` or `?token=`, is the credential.

use std::net::SocketAddr;

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use uuid::Uuid;

use super::body::{parse_json, read_body};
use super::conversations::query_pairs;
use super::{ApiError, AppState};
use crate::inbound::{Refused, Request, WebhookEvent};

/// The path prefix the API keys do not guard.
pub const PREFIX: &str = "/api/webhook/";
/// An inbound event is a decision and a few fields; anything larger is refused (413).
const BODY_MAX: usize = 64 * 1024;

pub async fn receive(
    State(state): State<AppState>,
    Path((id, state_name)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
    peer: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let not_found =
        || ApiError::new(StatusCode::NOT_FOUND, "conversation not found").into_response();
    let Ok(conversation_id) = Uuid::parse_str(&id) else {
        return ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("'{id}' is not a conversation id (a UUID)"),
        )
        .into_response();
    };
    let mut token = bearer(&headers);
    for (key, value) in query_pairs(raw.as_deref()) {
        match key.as_str() {
            "token" => token = token.or(Some(value)),
            other => {
                return ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!("unknown query parameter '{other}'"),
                )
                .into_response();
            }
        }
    }
    let body = match read_body(body) {
        Ok(b) if b.len() > BODY_MAX => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("an inbound webhook event is at most {BODY_MAX} bytes"),
            )
            .into_response();
        }
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let event: WebhookEvent = match parse_json(&body) {
        Ok(event) => event,
        Err(e) => return e.into_response(),
    };
    // Kept and looked up as text: PostgreSQL refuses a NUL there (a 500 otherwise).
    if event.event_key.chars().any(char::is_control) {
        return ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "event_key: control characters are not allowed",
        )
        .into_response();
    }
    let request = Request {
        conversation_id,
        state_name,
        token,
        event,
        source: sender(peer.map(|p| p.0.0), &headers),
    };
    match state.inbound.receive(request).await {
        Ok((code, answer)) => (
            StatusCode::from_u16(code).unwrap_or(StatusCode::OK),
            Json(answer),
        )
            .into_response(),
        Err(Refused::NotFound) => not_found(),
        Err(e @ Refused::BadToken) => {
            let mut response =
                ApiError::new(StatusCode::UNAUTHORIZED, e.to_string()).into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
        Err(e @ Refused::NotInState { .. }) => {
            ApiError::new(StatusCode::CONFLICT, e.to_string()).into_response()
        }
        Err(Refused::Throttled(wait)) => {
            let mut response = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                Refused::Throttled(wait).to_string(),
            )
            .into_response();
            let secs = wait.as_secs().max(1).to_string();
            if let Ok(value) = HeaderValue::from_str(&secs) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        Err(Refused::Failed(e)) => ApiError::from(e).into_response(),
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
