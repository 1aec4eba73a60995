//! `POST /api/chat` request body. Unknown fields are ignored, as the reference server does.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Message;

/// `POST /api/chat`: a question, a follow-up (with `conversation_history`), or the resume of a
/// paused run (`ask: ""` with `tool_decisions` and/or `frontend_tool_results`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct ChatRequest {
    /// The user's question; `""` on a resume-only request.
    pub ask: String,
    #[serde(default)]
    pub conversation_history: Option<Vec<Message>>,
    /// A key of the configured model list (see `GET /api/model`).
    #[serde(default)]
    pub model: Option<String>,
    /// OpenAI structured-output object (`json_schema` or `json_object`).
    #[serde(default)]
    pub response_format: Option<Value>,
    #[serde(default)]
    pub images: Option<Vec<ImageInput>>,
    /// Answer with server-sent events instead of one JSON body.
    #[serde(default)]
    pub stream: bool,
    /// With `stream`: calls that need approval pause the run (`approval_required`) instead of
    /// failing.
    #[serde(default)]
    pub enable_tool_approval: bool,
    /// The user's answers to `pending_approvals`, on a resume.
    #[serde(default)]
    pub tool_decisions: Option<Vec<ToolDecision>>,
    /// Tools the client runs itself (`pause`) or acknowledges at once (`noop`).
    #[serde(default)]
    pub frontend_tools: Option<Vec<FrontendToolDefinition>>,
    /// The client's results for `pending_frontend_tool_calls`, on a resume.
    #[serde(default)]
    pub frontend_tool_results: Option<Vec<FrontendToolResult>>,
    #[serde(default)]
    pub additional_system_prompt: Option<String>,
    /// Prompt section key → enabled.
    #[serde(default)]
    pub behavior_controls: Option<HashMap<String, bool>>,
    /// A triage extension, with `stream`: also send the assistant's text while the LLM writes
    /// it, in `ai_answer_delta` events. The `ai_message` or `ai_answer_end` that follows still
    /// carries the whole text (or an `error` ends the stream), so clients that ignore unknown
    /// events lose nothing.
    #[serde(default)]
    pub stream_deltas: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ImageInput {
    /// An image URL or a `data:` URI.
    Url(String),
    Detailed(ImageSpec),
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ImageSpec {
    #[serde(default)]
    pub url: Option<String>,
    /// `low`, `high` or `auto`.
    #[serde(default)]
    pub detail: Option<String>,
    /// MIME type, e.g. `image/png`.
    #[serde(default)]
    pub format: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ToolDecision {
    pub tool_call_id: String,
    pub approved: bool,
    #[serde(default)]
    pub feedback: Option<String>,
    #[serde(default)]
    pub save_prefixes: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FrontendToolDefinition {
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub parameters: Option<Value>,
    #[serde(default)]
    pub mode: FrontendToolMode,
    #[serde(default)]
    pub noop_response: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FrontendToolMode {
    #[default]
    Pause,
    Noop,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FrontendToolResult {
    pub tool_call_id: String,
    pub tool_name: String,
    /// Must be a string: JSON-encode objects before sending.
    pub result: String,
}
