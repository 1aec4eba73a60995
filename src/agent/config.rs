//! What is fixed when a conversation starts: the model, the prompt's behaviour controls, the
//! answer's format, the frontend tools, how approvals are handled. Serialisable, so a store
//! keeps it beside the state; `Agent::compile` turns it into a `RunSetup`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::wire::request::FrontendToolDefinition;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunConfig {
    /// A key of the model list; `None` for the default model.
    pub model: Option<String>,
    #[serde(default)]
    pub additional_system_prompt: Option<String>,
    /// Prompt section key → enabled.
    #[serde(default)]
    pub behavior_controls: Option<HashMap<String, bool>>,
    /// OpenAI structured-output object the final answer must match.
    #[serde(default)]
    pub response_format: Option<Value>,
    #[serde(default)]
    pub frontend_tools: Vec<FrontendToolDefinition>,
    #[serde(default)]
    pub approvals: ApprovalMode,
    /// Whether the front door can deliver a pause (frontend tools in `pause` mode need one).
    #[serde(default)]
    pub can_pause: bool,
    /// Send the LLM's text as it arrives (`TextDelta` events).
    #[serde(default)]
    pub text_deltas: bool,
    /// LLM calls per user turn; `None` for the server's `agent.max_steps`.
    #[serde(default)]
    pub max_steps: Option<u32>,
    /// Values masked as `<secret-hidden>` in everything this run reports (beside the server's).
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Stop a run that repeats itself (`agent/stuck.rs`), after one nudge.
    #[serde(default)]
    pub stuck_detection: bool,
}

/// What happens to a call whose tool asks for approval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// The call becomes an error the model reads (automation: nobody to ask).
    #[default]
    Refuse,
    /// The run pauses until the user decides.
    Pause,
    /// Every backend tool call waits for the user's decision before it runs.
    Always,
}
