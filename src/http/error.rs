//! The one error response shape: `{"detail": …}` with a precise status, as FastAPI answers.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::responses::{ErrorDetail, ErrorResponse};

use crate::agent::ChatError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub detail: ErrorDetail,
}

impl ApiError {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            detail: ErrorDetail::Message(detail.into()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(status = self.status.as_u16(), detail = %self.detail, "request failed");
        } else {
            tracing::info!(status = self.status.as_u16(), detail = %self.detail, "request refused");
        }
        let body = ErrorResponse {
            detail: self.detail,
        };
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<ChatError> for ApiError {
    fn from(e: ChatError) -> Self {
        let status = match &e {
            ChatError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ChatError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ChatError::NoModel(_) => StatusCode::SERVICE_UNAVAILABLE,
            ChatError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

/// Errors axum answers itself (405 with an `Allow` header, …) come with an empty body; they
/// get the same `{"detail": …}` as every other error, headers kept.
pub async fn json_error_bodies(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let method = request.method().clone();
    let response = next.run(request).await;
    let status = response.status();
    let bodyless = !response
        .headers()
        .contains_key(axum::http::header::CONTENT_TYPE);
    if !(status.is_client_error() || status.is_server_error()) || !bodyless {
        return response;
    }
    let (mut parts, _) = response.into_parts();
    let reason = status.canonical_reason().unwrap_or("Error");
    // axum adds the `Allow` header after this layer; the detail names the method refused.
    let detail = if status == StatusCode::METHOD_NOT_ALLOWED {
        format!("{reason}: {method} is not accepted here (the Allow header lists the methods)")
    } else {
        reason.to_owned()
    };
    let json = axum::Json(ErrorResponse {
        detail: ErrorDetail::Message(detail),
    })
    .into_response();
    let (json_parts, body) = json.into_parts();
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    parts.headers.extend(json_parts.headers);
    Response::from_parts(parts, body)
}
