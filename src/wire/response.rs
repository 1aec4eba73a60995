//! Non-streaming `POST /api/chat` response and the `metadata` object shared with SSE events.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Message;
use super::events::{ModelFallback, PendingApproval, ToolCallResult};

/// The answer of a non-streaming `POST /api/chat`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ChatResponse {
    pub analysis: String,
    pub conversation_history: Vec<Message>,
    pub tool_calls: Vec<ToolCallResult>,
    pub follow_up_actions: Vec<FollowUpAction>,
    /// Always null: approvals need streaming.
    pub pending_approvals: Option<Vec<PendingApproval>>,
    pub metadata: Metadata,
}

/// Borrowed text: every first turn answers the same three (`defaults`), which cost twelve
/// allocations a request as `String`s.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct FollowUpAction {
    pub id: Cow<'static, str>,
    pub action_label: Cow<'static, str>,
    pub pre_action_notification_text: Cow<'static, str>,
    pub prompt: Cow<'static, str>,
}

impl FollowUpAction {
    /// The reference server's suggestions on a conversation's first turn.
    pub fn defaults() -> Vec<FollowUpAction> {
        let action = |id, label, note, prompt| FollowUpAction {
            id: Cow::Borrowed(id),
            action_label: Cow::Borrowed(label),
            pre_action_notification_text: Cow::Borrowed(note),
            prompt: Cow::Borrowed(prompt),
        };
        vec![
            action(
                "logs",
                "Logs",
                "Fetching relevant logs...",
                "Show me the relevant logs",
            ),
            action(
                "graphs",
                "Graphs",
                "Drawing some graphs...",
                "Show me the relevant graphs. Use prometheus and make sure you embed the results with `<< >>` to display a graph",
            ),
            action(
                "articles",
                "Articles",
                "Looking up and summarizing runbooks and links...",
                "List the relevant runbooks and links used. Write a short summary for each",
            ),
        ]
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Metadata {
    /// Usage reported by the provider for the last LLM call.
    pub usage: Usage,
    /// triage's own count of the conversation, by role.
    pub tokens: TokenBreakdown,
    /// The model's context window.
    pub max_tokens: u32,
    /// Tokens reserved for the model's answer.
    pub max_output_tokens: u32,
    /// Cumulative cost of the request; present when the model has per-token prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub costs: Option<Costs>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub truncations: Vec<Truncation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormatReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// What triage ignored in the request, e.g. an unknown field or `behavior_controls` key
    /// (HolmesGPT clients send fields triage does not know; they are not refused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Calls of this request that a fallback model answered because the model asked for was
    /// out (triage's addition; HolmesGPT clients ignore it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_fallbacks: Vec<ModelFallback>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Usage {
    /// Every input token, cache reads and writes included.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// Of `prompt_tokens`, those read from the provider's prompt cache (Anthropic's name).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_input_tokens: u64,
    /// Of `prompt_tokens`, those written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_input_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct TokenBreakdown {
    /// Sum of the other fields.
    pub total_tokens: u32,
    /// Tool definitions sent with the request.
    pub tools_tokens: u32,
    pub system_tokens: u32,
    pub user_tokens: u32,
    /// Assistant tool-call requests (names and arguments).
    pub tools_to_call_tokens: u32,
    /// Assistant text.
    pub assistant_tokens: u32,
    /// Tool results and any other message.
    pub other_tokens: u32,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Costs {
    pub total_cost: f64,
    pub total_tokens: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub max_completion_tokens_per_call: u64,
    pub max_prompt_tokens_per_call: u64,
    pub num_compactions: u32,
    /// Of `prompt_tokens`, read from and written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_input_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_input_tokens: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Truncation {
    pub tool_call_id: String,
    pub start_index: usize,
    pub end_index: usize,
    pub tool_name: String,
    pub original_token_count: u32,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ResponseFormatReport {
    pub valid: bool,
    pub repaired: bool,
}
