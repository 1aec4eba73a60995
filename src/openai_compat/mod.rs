//! The OpenAI-compatible front door: the agent as a "model" behind `GET /v1/models`,
//! `POST /v1/chat/completions` and `POST /v1/responses`. A request's conversation becomes a
//! run of the agent core (`turns.rs`), exactly as `/api/chat`'s does — same tools, compaction
//! and structured output, approvals refused (nothing on this API can approve: the model is
//! told) — and the run's events become each API's answer (`chat_render.rs`,
//! `responses_render.rs`), tool activity as reasoning text (`activity.rs`). Stateless: the
//! client carries the conversation; its own function tools end the run with their calls, and
//! its tool results in the next request continue it.

mod activity;
mod chat_render;
mod chat_request;
mod error;
mod parse;
mod responses_render;
mod responses_request;
mod sse;
mod turns;
mod usage;

use std::sync::Arc;

use serde::Serialize;

use crate::agent::{Agent, Run};
use crate::llm::ModelLookupError;

pub use chat_render::{ChatAnswer, ChatCompletion};
pub use chat_request::ChatCompletionRequest;
pub use error::{OpenAiError, Refusal, for_status};
pub use parse::parse;
pub use responses_render::ResponsesAnswer;
pub use responses_request::ResponsesRequest;
pub use turns::Prepared;

/// `GET /v1/models`: the model list's keys, each an OpenAI model object.
#[derive(Serialize)]
pub struct ModelList {
    object: &'static str,
    data: Vec<ModelObject>,
}

#[derive(Serialize)]
struct ModelObject {
    id: String,
    object: &'static str,
    created: i64,
    owned_by: &'static str,
}

/// The models as OpenAI lists them; `created` is when the serving agent was built (the list
/// has no dates of its own).
pub fn models(agent: &Agent, created: i64) -> ModelList {
    ModelList {
        object: "list",
        data: agent
            .models
            .keys()
            .into_iter()
            .map(|id| ModelObject {
                id,
                object: "model",
                created,
                owned_by: "triage",
            })
            .collect(),
    }
}

/// Starts a prepared request's run on `agent`: an unknown model is OpenAI's 404, every other
/// refusal the agent's own.
pub fn start(agent: &Arc<Agent>, prepared: Prepared) -> Result<Run, OpenAiError> {
    let model = prepared.config.model.as_deref().unwrap_or_default();
    match agent.models.resolve(Some(model)) {
        Err(ModelLookupError::Unknown { key, .. }) => {
            return Err(OpenAiError::unknown_model(&key));
        }
        Err(e @ ModelLookupError::NoneConfigured) => {
            return Err(crate::agent::RunError::new(
                crate::agent::RunErrorKind::NoModel,
                e.to_string(),
            )
            .into());
        }
        Ok(_) => {}
    }
    // The answer is built from the events: no copy of each message is wanted.
    Ok(agent
        .start(&prepared.config, prepared.state, prepared.input)?
        .without_history_events())
}
