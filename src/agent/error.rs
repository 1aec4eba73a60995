//! Why a run failed, as a kind a front door maps to its own terms (HTTP statuses live in
//! `http/`), with a message for people.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunErrorKind {
    /// The input is wrong (unknown model, bad schema, decisions for nothing…).
    BadInput,
    /// The input is within limits of size but over a cap of what it may hold, or the
    /// conversation does not fit the model before any LLM call.
    TooLarge,
    /// No model is configured.
    NoModel,
    /// The model's concurrent-call slots are full: retry shortly.
    Overloaded,
    /// The provider rate-limited the call.
    RateLimited,
    /// The provider refused triage's credentials, or misbehaved (oversized events).
    BadGateway,
    /// The answer does not match `response_format` after the repair round.
    InvalidAnswer,
    /// Any other provider failure (unreachable, timeout, broken stream, 5xx).
    Provider,
    /// The conversation outgrew the context window during the run.
    ContextOverflow,
    /// The step budget of the turn was spent.
    MaxSteps,
    Internal,
}

#[derive(Debug, Clone, thiserror::Error, Serialize, Deserialize)]
#[error("{message}")]
pub struct RunError {
    pub kind: RunErrorKind,
    pub message: String,
}

impl RunError {
    pub fn new(kind: RunErrorKind, message: impl Into<String>) -> RunError {
        RunError {
            kind,
            message: message.into(),
        }
    }

    pub fn bad_input(message: impl Into<String>) -> RunError {
        RunError::new(RunErrorKind::BadInput, message)
    }
}
