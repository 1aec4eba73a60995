//! The one error response shape: `{"detail": …}` with a precise status, as FastAPI answers.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::responses::{ErrorDetail, ErrorResponse};

use crate::agent::{RunError, RunErrorKind};

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

/// The one map from a run's error kind to an HTTP status.
pub fn status_of(kind: RunErrorKind) -> StatusCode {
    match kind {
        RunErrorKind::BadInput => StatusCode::BAD_REQUEST,
        RunErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        RunErrorKind::NoModel | RunErrorKind::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
        RunErrorKind::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        // The provider refused triage's credentials or misbehaved; a 401 would read as the
        // client's own key.
        RunErrorKind::BadGateway | RunErrorKind::InvalidAnswer => StatusCode::BAD_GATEWAY,
        RunErrorKind::Provider
        | RunErrorKind::ContextOverflow
        | RunErrorKind::MaxSteps
        | RunErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A run's error as the response; a full model says when to come back.
pub fn run_error_response(e: RunError) -> Response {
    let overloaded = e.kind == RunErrorKind::Overloaded;
    let mut response = ApiError::new(status_of(e.kind), e.message).into_response();
    if overloaded {
        response.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("1"),
        );
    }
    response
}

/// Errors axum answers itself (405 with an `Allow` header, …) come with an empty body; they
/// get the same `{"detail": …}` as every other error, headers kept.
pub fn with_json_body(method: &axum::http::Method, response: Response) -> Response {
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
