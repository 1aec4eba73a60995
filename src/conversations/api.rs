//! The shapes of `/api/conversations`: what clients send and what they get back. Route and
//! field names follow the OpenHands agent server where the concept is the same.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::fields::{Tags, Title};
use crate::conversation_domain::{ConversationStatus, EventKind};
use crate::wire::request::{FrontendToolDefinition, FrontendToolResult, ImageInput, ToolDecision};

/// `POST /api/conversations`. Every field is optional.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateConversation {
    /// Client-chosen id; 409 if taken.
    #[serde(default)]
    pub id: Option<Uuid>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub behavior_controls: Option<HashMap<String, bool>>,
    #[serde(default)]
    pub additional_system_prompt: Option<String>,
    #[serde(default)]
    pub response_format: Option<Value>,
    #[serde(default)]
    pub frontend_tools: Option<Vec<FrontendToolDefinition>>,
    #[serde(default)]
    pub confirmation_policy: Option<ConfirmationPolicy>,
    /// LLM calls per user turn (default: the server's `agent.max_steps`).
    #[serde(default)]
    pub max_iterations: Option<u32>,
    #[serde(default)]
    pub stuck_detection: Option<bool>,
    /// At most 500 characters, without NUL.
    #[serde(default)]
    pub title: Option<Title>,
    #[serde(default)]
    pub tags: Option<Tags>,
    /// Masked as `<secret-hidden>` in everything the conversation reports; never returned.
    #[serde(default)]
    pub secrets: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub initial_message: Option<SendMessage>,
}

/// `{"kind": "NeverConfirm" | "AlwaysConfirm" | "ConfirmRisky"}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind")]
pub enum ConfirmationPolicy {
    /// Nothing waits for the user: a call the policy would ask about is refused instead.
    NeverConfirm,
    /// Every tool call waits for the user.
    AlwaysConfirm,
    /// Only calls triage's policy finds risky wait for the user.
    #[default]
    ConfirmRisky,
}

/// `POST /api/conversations/{id}/events` (and `initial_message`).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessage {
    pub content: String,
    #[serde(default)]
    pub images: Option<Vec<ImageInput>>,
    /// Start a run after storing the message (`initial_message` defaults to true, a message
    /// sent later to false, as OpenHands does).
    #[serde(default)]
    pub run: Option<bool>,
}

/// `PATCH /api/conversations/{id}`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateConversation {
    /// At most 500 characters, without NUL.
    #[serde(default)]
    pub title: Option<Title>,
    #[serde(default)]
    pub tags: Option<Tags>,
}

/// `POST …/events/respond_to_confirmation`: OpenHands' shape (`accept` for every pending
/// approval) or `/api/chat`'s (`tool_decisions`, `frontend_tool_results`).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfirmationResponse {
    #[serde(default)]
    pub accept: Option<bool>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub tool_decisions: Option<Vec<ToolDecision>>,
    #[serde(default)]
    pub frontend_tool_results: Option<Vec<FrontendToolResult>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ConversationInfo {
    pub id: Uuid,
    pub title: Option<String>,
    pub tags: BTreeMap<String, String>,
    pub execution_status: ConversationStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub model: Option<String>,
    pub confirmation_policy: ConfirmationPolicy,
    pub max_iterations: u32,
    pub stuck_detection: bool,
    pub pending_actions: Vec<PendingAction>,
    pub stats: Stats,
    pub last_event_id: u64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A call the conversation waits on.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PendingAction {
    pub tool_call_id: String,
    pub tool_name: String,
    pub arguments: Value,
    /// `approval` or `frontend_tool`.
    pub waits_for: String,
    /// What the call does, in the tool's words (approvals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Stats {
    pub llm_calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cost: f64,
    /// The conversation's size as of its last run.
    pub context_tokens: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ConversationPage {
    pub items: Vec<ConversationInfo>,
    pub next_page_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EventPage {
    pub items: Vec<StoredEventView>,
    pub next_page_id: Option<String>,
}

/// A stored event: `id` is its place in the conversation (1, 2, 3 …, no gaps).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StoredEventView {
    pub id: u64,
    pub kind: EventKind,
    /// user, agent or environment
    pub source: String,
    pub timestamp: DateTime<Utc>,
    pub payload: Value,
}

/// `POST …/{id}/confirmation_policy`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyUpdate {
    pub policy: ConfirmationPolicy,
}

/// `POST …/{id}/secrets`: values masked from now on (never returned).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretsUpdate {
    pub secrets: BTreeMap<String, String>,
}

/// `POST …/{id}/ask_agent`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskAgent {
    pub question: String,
}

/// `GET …/{id}/agent_final_response`, `POST …/{id}/ask_agent`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FinalResponse {
    pub response: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Success {
    pub success: bool,
}

/// `POST …/{id}/generate_title`. Every field is optional (an empty body too).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GenerateTitle {
    /// The longest title wanted, in characters (1 to 200, default 50).
    #[serde(default)]
    #[schemars(range(min = 1, max = 200))]
    pub max_length: Option<u32>,
}

/// `POST …/{id}/generate_title`: the title, also stored as the conversation's.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GeneratedTitle {
    pub title: String,
}

/// `POST …/{id}/fork`. Every field is optional (an empty body too).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkConversation {
    /// The fork's id (client-chosen UUID; 409 if taken); a new one by default.
    #[serde(default)]
    pub id: Option<Uuid>,
    /// Default: the source's title. At most 500 characters, without NUL.
    #[serde(default)]
    pub title: Option<Title>,
    /// Default: the source's tags.
    #[serde(default)]
    pub tags: Option<Tags>,
    /// The last event copied (default: the last committed one); the fork's history is the
    /// source's as of that event. 400 beyond the source's last event.
    #[serde(default)]
    pub from_event_id: Option<u64>,
    /// Start the fork's stats and usage from zero (default true, as OpenHands); false copies
    /// the source's.
    #[serde(default)]
    pub reset_metrics: Option<bool>,
}
