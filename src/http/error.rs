//! The one error response shape: `{"detail": …}` with a precise status, as FastAPI answers.

use axum::http::header::{HeaderName, RETRY_AFTER};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::responses::{ErrorDetail, ErrorResponse, ValidationError};

use crate::agent::{RunError, RunErrorKind};
use crate::conversations::ConversationError;
use crate::store::StoreError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub detail: ErrorDetail,
    /// A list, not a `HeaderMap`: an error travels in every handler's `Result`, kept small.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl ApiError {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            detail: ErrorDetail::Message(detail.into()),
            headers: Vec::new(),
        }
    }

    /// 422 with FastAPI's list of the invalid fields.
    pub fn invalid(errors: Vec<ValidationError>) -> Self {
        ApiError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            detail: ErrorDetail::Validation(errors),
            headers: Vec::new(),
        }
    }

    /// An error of `kind`, answered as the table says.
    pub fn of(kind: ErrorKind, detail: impl Into<String>) -> Self {
        let answer = answer_for(kind);
        let error = ApiError::new(answer.status, detail);
        if answer.retry_soon {
            error.with_header(RETRY_AFTER, HeaderValue::from_static("1"))
        } else {
            error
        }
    }

    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
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
        let mut response = (self.status, axum::Json(body)).into_response();
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

/// Every kind of error a front door answers, whatever part of triage raised it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A run's, a side question's, a title's or a summary's, as the agent reports it.
    Run(RunErrorKind),
    NotFound,
    /// The request contradicts the conversation's state (or an id is taken).
    Conflict,
    /// `conversations.max_running` conversations are running.
    Busy,
    /// Another replica holds the conversation, or its stored form cannot be read.
    Unavailable,
    /// A `page_id` the store did not hand out.
    InvalidPageId,
    /// The database failed.
    Store,
}

/// What the edge answers for a kind of error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub status: StatusCode,
    /// `Retry-After: 1`: there is no room now, the same request may succeed in a moment.
    pub retry_soon: bool,
}

/// The one table from an error's kind to its status, for every front door. A run's kinds keep
/// the statuses `/api/chat` has always answered (HolmesGPT clients read them); conversations
/// answer the same.
pub fn answer_for(kind: ErrorKind) -> Answer {
    use RunErrorKind as Run;
    let (status, retry_soon) = match kind {
        ErrorKind::Run(Run::BadInput) => (StatusCode::BAD_REQUEST, false),
        ErrorKind::Run(Run::TooLarge) => (StatusCode::PAYLOAD_TOO_LARGE, false),
        ErrorKind::Run(Run::NoModel) => (StatusCode::SERVICE_UNAVAILABLE, false),
        // The model's concurrent-call slots are full.
        ErrorKind::Run(Run::Overloaded) => (StatusCode::SERVICE_UNAVAILABLE, true),
        ErrorKind::Run(Run::RateLimited) => (StatusCode::TOO_MANY_REQUESTS, false),
        // The provider refused triage's credentials or misbehaved; a 401 would read as the
        // client's own key.
        ErrorKind::Run(Run::BadGateway | Run::InvalidAnswer) => (StatusCode::BAD_GATEWAY, false),
        ErrorKind::Run(Run::Provider | Run::ContextOverflow | Run::MaxSteps | Run::Internal) => {
            (StatusCode::INTERNAL_SERVER_ERROR, false)
        }
        ErrorKind::NotFound => (StatusCode::NOT_FOUND, false),
        ErrorKind::Conflict => (StatusCode::CONFLICT, false),
        ErrorKind::Busy => (StatusCode::TOO_MANY_REQUESTS, true),
        ErrorKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, false),
        ErrorKind::InvalidPageId => (StatusCode::UNPROCESSABLE_ENTITY, false),
        ErrorKind::Store => (StatusCode::INTERNAL_SERVER_ERROR, false),
    };
    Answer { status, retry_soon }
}

pub fn kind_of(e: &ConversationError) -> ErrorKind {
    match e {
        ConversationError::Run(e) => ErrorKind::Run(e.kind),
        ConversationError::BadInput(_) => ErrorKind::Run(RunErrorKind::BadInput),
        ConversationError::TooLarge(_) => ErrorKind::Run(RunErrorKind::TooLarge),
        ConversationError::NotFound(_) => ErrorKind::NotFound,
        ConversationError::Conflict(_) => ErrorKind::Conflict,
        ConversationError::Busy(_) => ErrorKind::Busy,
        ConversationError::Unavailable(_) => ErrorKind::Unavailable,
        ConversationError::Store(e) => store_kind(e),
    }
}

fn store_kind(e: &StoreError) -> ErrorKind {
    match e {
        StoreError::NotFound => ErrorKind::NotFound,
        StoreError::Conflict(_) => ErrorKind::Conflict,
        StoreError::TooManyEvents { .. } => ErrorKind::Run(RunErrorKind::TooLarge),
        StoreError::InvalidPageId => ErrorKind::InvalidPageId,
        StoreError::Database(_) | StoreError::Config(_) | StoreError::Sealed { .. } => {
            ErrorKind::Store
        }
    }
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        ApiError::of(ErrorKind::Run(e.kind), e.message)
    }
}

impl From<ConversationError> for ApiError {
    fn from(e: ConversationError) -> Self {
        ApiError::of(kind_of(&e), e.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::from(ConversationError::Store(e))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const RUN_KINDS: [RunErrorKind; 11] = [
        RunErrorKind::BadInput,
        RunErrorKind::TooLarge,
        RunErrorKind::NoModel,
        RunErrorKind::Overloaded,
        RunErrorKind::RateLimited,
        RunErrorKind::BadGateway,
        RunErrorKind::InvalidAnswer,
        RunErrorKind::Provider,
        RunErrorKind::ContextOverflow,
        RunErrorKind::MaxSteps,
        RunErrorKind::Internal,
    ];

    fn status(e: ApiError) -> (u16, Option<String>) {
        let retry = e
            .headers
            .iter()
            .find(|(name, _)| *name == RETRY_AFTER)
            .map(|(_, v)| v.to_str().unwrap_or_default().to_owned());
        (e.status.as_u16(), retry)
    }

    #[test]
    fn every_kind_is_an_error_status() {
        let others = [
            ErrorKind::NotFound,
            ErrorKind::Conflict,
            ErrorKind::Busy,
            ErrorKind::Unavailable,
            ErrorKind::InvalidPageId,
            ErrorKind::Store,
        ];
        for kind in RUN_KINDS.map(ErrorKind::Run).into_iter().chain(others) {
            let status = answer_for(kind).status;
            assert!(
                status.is_client_error() || status.is_server_error(),
                "{kind:?}: {status}"
            );
        }
    }

    /// HolmesGPT clients read these from `/api/chat`.
    #[test]
    fn a_runs_kinds_keep_the_statuses_of_api_chat() {
        let expected = [400, 413, 503, 503, 429, 502, 502, 500, 500, 500, 500];
        for (kind, want) in RUN_KINDS.into_iter().zip(expected) {
            assert_eq!(answer_for(ErrorKind::Run(kind)).status, want, "{kind:?}");
        }
        assert_eq!(
            status(RunError::new(RunErrorKind::Overloaded, "slots full").into()),
            (503, Some("1".into()))
        );
        assert_eq!(
            status(RunError::new(RunErrorKind::RateLimited, "quota").into()),
            (429, None)
        );
    }

    /// A conversation whose work the agent refused answers what `/api/chat` answers.
    #[test]
    fn conversations_answer_a_runs_error_as_api_chat_does() {
        for kind in RUN_KINDS {
            let chat = status(RunError::new(kind, "why").into());
            let conversation = status(ConversationError::Run(RunError::new(kind, "why")).into());
            assert_eq!(chat, conversation, "{kind:?}");
        }
        let bad = status(ConversationError::BadInput("why".into()).into());
        assert_eq!(bad, status(RunError::bad_input("why").into()));
        let large = status(ConversationError::TooLarge("why".into()).into());
        assert_eq!(large, (413, None));
        let full = status(ConversationError::Store(StoreError::TooManyEvents { max: 1 }).into());
        assert_eq!(full, large);
    }

    #[test]
    fn the_conversation_only_kinds() {
        let id = uuid::Uuid::nil();
        let cases: [(ConversationError, (u16, Option<String>)); 7] = [
            (ConversationError::NotFound(id), (404, None)),
            (ConversationError::Store(StoreError::NotFound), (404, None)),
            (ConversationError::Conflict("taken".into()), (409, None)),
            (
                ConversationError::Busy("max_running".into()),
                (429, Some("1".into())),
            ),
            (
                ConversationError::Unavailable("elsewhere".into()),
                (503, None),
            ),
            (
                ConversationError::Store(StoreError::InvalidPageId),
                (422, None),
            ),
            (
                ConversationError::Store(StoreError::Database("gone".into())),
                (500, None),
            ),
        ];
        for (e, want) in cases {
            let shown = e.to_string();
            assert_eq!(status(e.into()), want, "{shown}");
        }
    }
}
