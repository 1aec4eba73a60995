//! The extractors handlers take: a JSON body and path parameters whose rejection is our
//! `{"detail": …}` error with a precise status, so a handler holds only what parsed. The body
//! was read whole (size and time limits) by the admission layer before any handler runs.

use axum::body::Bytes;
use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::ApiError;
use super::body::{parse_json, read_body};

/// A JSON body (whatever its `Content-Type`): malformed is 400, the wrong shape a 422 naming
/// the field (see `body::parse_json`). As a response, `value` as JSON.
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = read_body(Bytes::from_request(request, state).await)?;
        parse_json(&bytes).map(Json)
    }
}

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// A JSON body whose fields are all optional: an empty body reads as `{}`.
pub struct JsonOrEmpty<T>(pub T);

impl<T: DeserializeOwned + Default, S: Send + Sync> FromRequest<S> for JsonOrEmpty<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = read_body(Bytes::from_request(request, state).await)?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(JsonOrEmpty(T::default()));
        }
        parse_json(&bytes).map(JsonOrEmpty)
    }
}

/// Path parameters read into types (`ConversationId`, …): one that does not read is a 422
/// with the type's own words.
pub struct Path<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Path(value)),
            Err(PathRejection::FailedToDeserializePathParams(e)) => {
                let detail = match e.kind() {
                    ErrorKind::Message(message) => message.clone(),
                    other => other.to_string(),
                };
                Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, detail))
            }
            // A route without the parameters its handler reads: a bug of ours.
            Err(other) => Err(ApiError::new(other.status(), other.body_text())),
        }
    }
}
