//! The JSON bodies of the errors and of the routes other than `/api/chat`, typed: the handlers
//! build these, and the OpenAPI document describes them from the same types.

use std::fmt;

use schemars::JsonSchema;
use serde::Serialize;

use crate::sandbox::SandboxInfo;

/// Every error: `detail` is a message, or FastAPI's list of validation errors (422).
#[derive(Debug, Serialize, JsonSchema)]
pub struct ErrorResponse {
    pub detail: ErrorDetail,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ErrorDetail {
    Message(String),
    Validation(Vec<ValidationError>),
}

/// As JSON, the way logs have always shown it.
impl fmt::Display for ErrorDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let json = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&json)
    }
}

/// One invalid field of a request body, named by `loc` (`["body", "field", 0, …]`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct ValidationError {
    #[serde(rename = "type")]
    pub kind: String,
    pub loc: Vec<LocSegment>,
    pub msg: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum LocSegment {
    Key(String),
    Index(u64),
}

/// `GET /api/model`: the configured model keys. With `compat.model_name_as_string` the list
/// is sent JSON-encoded inside a string, as HolmesGPT does.
#[derive(Serialize, JsonSchema)]
pub struct ModelsResponse {
    pub model_name: ModelNames,
}

#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ModelNames {
    List(Vec<String>),
    /// The list, JSON-encoded.
    Encoded(String),
}

#[derive(Serialize, JsonSchema)]
pub struct HealthResponse {
    /// Always `healthy`.
    pub status: String,
}

#[derive(Serialize, JsonSchema)]
pub struct ReadyResponse {
    /// Always `ready`.
    pub status: String,
    pub models: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct InfoResponse {
    pub version: String,
    pub uptime_seconds: u64,
    /// Whether API keys are required.
    pub auth_enabled: bool,
    /// The model keys, the default first.
    pub models: Vec<String>,
    /// The key a request without `model` uses; null when no model is configured.
    pub default_model: Option<String>,
    pub toolsets_summary: ToolsetsSummary,
    pub toolsets: Vec<ToolsetInfo>,
    /// The sandbox tool processes run in.
    pub sandbox: Option<SandboxInfo>,
    /// Each `[mcp_servers]` entry: its session, tools and last error.
    pub mcp_servers: Vec<crate::tools::mcp::McpServerStatus>,
    /// The tool definitions every LLM request carries: their size, the cap
    /// (`agent.max_tool_definitions_bytes`) and the tools it left out.
    pub tool_definitions: crate::tools::DefinitionsReport,
}

#[derive(Serialize, JsonSchema)]
pub struct ToolsetsSummary {
    pub total: u64,
    pub enabled: u64,
    pub failed: u64,
    pub disabled: u64,
}

#[derive(Serialize, JsonSchema)]
pub struct ToolsetInfo {
    pub name: String,
    pub status: ToolsetState,
    /// Why the toolset failed its start-up check.
    pub error: Option<String>,
    pub tool_count: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolsetState {
    Enabled,
    Disabled,
    Failed,
}
