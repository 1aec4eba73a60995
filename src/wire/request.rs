//! `POST /api/chat` request body. Unknown fields are ignored, as the reference server does.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Message;

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
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub enable_tool_approval: bool,
    #[serde(default)]
    pub tool_decisions: Option<Vec<ToolDecision>>,
    #[serde(default)]
    pub frontend_tools: Option<Vec<FrontendToolDefinition>>,
    #[serde(default)]
    pub frontend_tool_results: Option<Vec<FrontendToolResult>>,
    #[serde(default)]
    pub additional_system_prompt: Option<String>,
    /// Prompt section key → enabled.
    #[serde(default)]
    pub behavior_controls: Option<HashMap<String, bool>>,
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
