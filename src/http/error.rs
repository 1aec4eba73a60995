//! The one error response shape: `{"detail": …}` with a precise status, as FastAPI answers.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::agent::ChatError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub detail: Value,
}

impl ApiError {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            detail: Value::String(detail.into()),
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
        (self.status, axum::Json(json!({ "detail": self.detail }))).into_response()
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
