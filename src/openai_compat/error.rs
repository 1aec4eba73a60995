//! OpenAI's error object, `{"error": {"message", "type", "param", "code"}}`, and the kinds of
//! refusal this door makes. The HTTP edge picks the status from the kind (`http/`); a run's
//! own errors keep the statuses `/api/chat` answers for them.

use serde::Serialize;

use crate::agent::{RunError, RunErrorKind};

/// Why a request was refused, as the HTTP edge needs to answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The body does not read or breaks a rule of the API (400).
    Invalid,
    /// The model named is not in the model list (404).
    UnknownModel,
    /// The agent refused or failed the run.
    Run(RunErrorKind),
}

#[derive(Debug, Clone)]
pub struct OpenAiError {
    pub refusal: Refusal,
    pub message: String,
    pub param: Option<String>,
    pub code: Option<&'static str>,
}

impl OpenAiError {
    pub fn invalid(message: impl Into<String>, param: Option<&str>) -> OpenAiError {
        OpenAiError {
            refusal: Refusal::Invalid,
            message: message.into(),
            param: param.map(str::to_owned),
            code: None,
        }
    }

    pub fn with_code(mut self, code: &'static str) -> OpenAiError {
        self.code = Some(code);
        self
    }

    pub fn unknown_model(model: &str) -> OpenAiError {
        OpenAiError {
            refusal: Refusal::UnknownModel,
            message: format!(
                "The model `{model}` does not exist: GET /v1/models lists the models this server \
                 offers"
            ),
            param: Some("model".into()),
            code: Some("model_not_found"),
        }
    }

    /// The error object's `type`, as OpenAI words it for the status the edge answers.
    pub fn kind(&self) -> &'static str {
        match self.refusal {
            Refusal::Invalid | Refusal::UnknownModel => "invalid_request_error",
            Refusal::Run(kind) => run_type(kind),
        }
    }

    pub fn body(&self) -> ErrorBody<'_> {
        ErrorBody {
            error: ErrorObject {
                message: &self.message,
                kind: self.kind(),
                param: self.param.as_deref(),
                code: self.code.or(match self.refusal {
                    Refusal::Run(kind) => run_code(kind),
                    _ => None,
                }),
            },
        }
    }
}

impl From<RunError> for OpenAiError {
    fn from(e: RunError) -> OpenAiError {
        OpenAiError {
            refusal: Refusal::Run(e.kind),
            message: e.message,
            param: None,
            code: None,
        }
    }
}

fn run_type(kind: RunErrorKind) -> &'static str {
    match kind {
        RunErrorKind::BadInput | RunErrorKind::TooLarge => "invalid_request_error",
        RunErrorKind::RateLimited => "rate_limit_error",
        _ => "server_error",
    }
}

fn run_code(kind: RunErrorKind) -> Option<&'static str> {
    Some(match kind {
        RunErrorKind::TooLarge => "context_length_exceeded",
        RunErrorKind::RateLimited => "rate_limit_exceeded",
        RunErrorKind::Overloaded | RunErrorKind::NoModel => "service_unavailable",
        RunErrorKind::MaxSteps => "max_steps_exceeded",
        RunErrorKind::InvalidAnswer => "invalid_structured_output",
        _ => return None,
    })
}

/// The error object for an error this door did not make itself (the admission layer's 401,
/// 413, 503, axum's 405): OpenAI's words for the status.
pub fn for_status(status: u16, message: String) -> OpenAiError {
    let (refusal, code) = match status {
        401 => (Refusal::Invalid, Some("invalid_api_key")),
        404 => (Refusal::Invalid, Some("not_found")),
        413 => (
            Refusal::Run(RunErrorKind::TooLarge),
            Some("request_too_large"),
        ),
        429 => (Refusal::Run(RunErrorKind::RateLimited), None),
        s if s >= 500 => (Refusal::Run(RunErrorKind::Internal), None),
        _ => (Refusal::Invalid, None),
    };
    OpenAiError {
        refusal,
        message,
        param: None,
        code,
    }
}

#[derive(Serialize)]
pub struct ErrorBody<'a> {
    error: ErrorObject<'a>,
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    param: Option<&'a str>,
    code: Option<&'static str>,
}
