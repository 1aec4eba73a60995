//! The check's run on the agent core: the question as the user's message, an answer the
//! core holds to a JSON schema (`{rationale, passed}`, repaired once if it strays, as for any
//! `response_format`), tools calls needing approval refused (nobody is there to approve; the
//! model reads the refusal), and the whole run cut at the check's timeout by dropping it,
//! which cancels the LLM call and the tools in flight.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::request::Check;
use crate::agent::{
    Agent, AgentEvent, ApprovalMode, Input, Run, RunConfig, RunError, RunState, UserMessage,
};

/// What the model is told a check is; the question follows as the user's message.
const CHECK_INSTRUCTIONS: &str = "\
You are running an automated health check: nobody reads your answer but a monitoring system. \
Investigate with your tools until you can tell whether the condition the question asks about \
holds right now. The check passes only if it does. If you cannot evaluate it (a resource, \
metric or tool is missing, or an error stops you), the check fails: say what stopped you. \
Answer with JSON only: `rationale` (what you found and why it decides the check), then \
`passed` (true or false).";

/// The verdict's shape, given to the core as the run's `response_format`.
fn verdict_format() -> Value {
    json!({
        "type": "json_schema",
        "json_schema": {
            "name": "check_response",
            "strict": true,
            "schema": {
                "type": "object",
                "properties": {
                    "rationale": {"type": "string", "description": "What you found, and why it decides the check"},
                    "passed": {"type": "boolean", "description": "Whether the check passes"},
                },
                "required": ["rationale", "passed"],
                "additionalProperties": false,
            },
        },
    })
}

#[derive(Deserialize)]
struct VerdictAnswer {
    rationale: String,
    passed: bool,
}

pub struct Verdict {
    pub passed: bool,
    pub rationale: String,
}

/// What a started check came to: a verdict, or why there is none; and the model that
/// answered (a fallback's key when one did).
pub struct Finished {
    pub verdict: Result<Verdict, String>,
    pub model_used: Option<String>,
}

/// Starts the check's run; a refusal (unknown model, no model, the model's call slots full)
/// comes back here, before anything ran.
pub fn start(agent: &Arc<Agent>, check: &Check) -> Result<Run, RunError> {
    let config = RunConfig {
        model: check.model.clone(),
        additional_system_prompt: Some(CHECK_INSTRUCTIONS.to_owned()),
        response_format: Some(verdict_format()),
        approvals: ApprovalMode::Refuse,
        ..RunConfig::default()
    };
    let input = Input {
        message: Some(UserMessage {
            text: check.query.clone(),
            images: Vec::new(),
        }),
        ..Input::default()
    };
    Ok(agent
        .start(&config, RunState::default(), input)?
        .without_history_events())
}

/// Drives `run` to its end, or drops it at `timeout`.
pub async fn finish(run: Run, timeout: Duration, model_key: Option<String>) -> Finished {
    match tokio::time::timeout(timeout, outcome(run)).await {
        Ok((verdict, fallback)) => Finished {
            verdict,
            model_used: fallback.or(model_key),
        },
        Err(_) => Finished {
            verdict: Err(format!(
                "the check did not finish within its timeout of {} s; it was stopped",
                timeout.as_secs()
            )),
            model_used: model_key,
        },
    }
}

/// The run's verdict and the fallback model that gave it, if one did.
async fn outcome(mut run: Run) -> (Result<Verdict, String>, Option<String>) {
    while let Some(event) = run.next().await {
        match event {
            AgentEvent::Finished(answer) => {
                let fallback = answer.fallbacks.last().map(|f| f.model.clone());
                return (read(&answer.text), fallback);
            }
            AgentEvent::Failed(e) => return (Err(e.message), None),
            AgentEvent::Paused { .. } => {
                return (
                    Err("the run waited for a decision, which a check cannot give".into()),
                    None,
                );
            }
            AgentEvent::Stopped(reason) => {
                return (Err(format!("the run stopped: {reason:?}")), None);
            }
            _ => {}
        }
    }
    (Err("the run ended without an answer".into()), None)
}

/// The verdict in the answer the core checked against the schema.
fn read(text: &str) -> Result<Verdict, String> {
    let answer: VerdictAnswer = serde_json::from_str(text)
        .map_err(|e| format!("the model's verdict could not be read: {e}"))?;
    Ok(Verdict {
        passed: answer.passed,
        rationale: answer.rationale,
    })
}
