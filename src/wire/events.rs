//! SSE event payloads, in HolmesGPT's vocabulary. One enum so the agent loop can yield typed
//! events and the HTTP layer alone decides how they travel (SSE frames or one JSON body).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{FollowUpAction, Message, Metadata};

#[derive(Debug, Clone)]
pub enum StreamEvent {
    StartToolCalling(StartToolCalling),
    ToolCallingResult(Box<ToolCallResult>),
    AiMessage(AiMessage),
    AnswerDelta(AnswerDelta),
    TokenCount(TokenCount),
    ApprovalRequired(Box<ApprovalRequired>),
    CompactionStart(CompactionStart),
    Compacted(Box<Compacted>),
    AnswerEnd(Box<AnswerEnd>),
    Error(ErrorEvent),
    ModelFallback(ModelFallback),
}

impl StreamEvent {
    pub fn name(&self) -> &'static str {
        match self {
            StreamEvent::StartToolCalling(_) => "start_tool_calling",
            StreamEvent::ToolCallingResult(_) => "tool_calling_result",
            StreamEvent::AiMessage(_) => "ai_message",
            StreamEvent::AnswerDelta(_) => "ai_answer_delta",
            StreamEvent::TokenCount(_) => "token_count",
            StreamEvent::ApprovalRequired(_) => "approval_required",
            StreamEvent::CompactionStart(_) => "conversation_history_compaction_start",
            StreamEvent::Compacted(_) => "conversation_history_compacted",
            StreamEvent::AnswerEnd(_) => "ai_answer_end",
            StreamEvent::Error(_) => "error",
            StreamEvent::ModelFallback(_) => "model_fallback",
        }
    }

    /// The inverse of `name` + `write_data`: an event read back from an SSE frame (the CLI's
    /// `--server` mode); `None` for an unknown name or unreadable data.
    pub fn parse(name: &str, data: &str) -> Option<StreamEvent> {
        fn json<T: serde::de::DeserializeOwned>(data: &str) -> Option<T> {
            serde_json::from_str(data).ok()
        }
        Some(match name {
            "start_tool_calling" => StreamEvent::StartToolCalling(json(data)?),
            "tool_calling_result" => StreamEvent::ToolCallingResult(json(data)?),
            "ai_message" => StreamEvent::AiMessage(json(data)?),
            "ai_answer_delta" => StreamEvent::AnswerDelta(json(data)?),
            "token_count" => StreamEvent::TokenCount(json(data)?),
            "approval_required" => StreamEvent::ApprovalRequired(json(data)?),
            "conversation_history_compaction_start" => StreamEvent::CompactionStart(json(data)?),
            "conversation_history_compacted" => StreamEvent::Compacted(json(data)?),
            "ai_answer_end" => StreamEvent::AnswerEnd(json(data)?),
            "error" => StreamEvent::Error(json(data)?),
            "model_fallback" => StreamEvent::ModelFallback(json(data)?),
            _ => return None,
        })
    }

    /// Writes the event's `data` JSON (one line: serde_json never emits raw newlines).
    pub fn write_data(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        match self {
            StreamEvent::StartToolCalling(p) => serde_json::to_writer(out, p),
            StreamEvent::ToolCallingResult(p) => serde_json::to_writer(out, p),
            StreamEvent::AiMessage(p) => serde_json::to_writer(out, p),
            StreamEvent::AnswerDelta(p) => serde_json::to_writer(out, p),
            StreamEvent::TokenCount(p) => serde_json::to_writer(out, p),
            StreamEvent::ApprovalRequired(p) => serde_json::to_writer(out, p),
            StreamEvent::CompactionStart(p) => serde_json::to_writer(out, p),
            StreamEvent::Compacted(p) => serde_json::to_writer(out, p),
            StreamEvent::AnswerEnd(p) => serde_json::to_writer(out, p),
            StreamEvent::Error(p) => serde_json::to_writer(out, p),
            StreamEvent::ModelFallback(p) => serde_json::to_writer(out, p),
        }
    }

    /// The event's `data` as a JSON value (what `write_data` writes, without the text).
    pub fn data_value(&self) -> serde_json::Result<Value> {
        match self {
            StreamEvent::StartToolCalling(p) => serde_json::to_value(p),
            StreamEvent::ToolCallingResult(p) => serde_json::to_value(p),
            StreamEvent::AiMessage(p) => serde_json::to_value(p),
            StreamEvent::AnswerDelta(p) => serde_json::to_value(p),
            StreamEvent::TokenCount(p) => serde_json::to_value(p),
            StreamEvent::ApprovalRequired(p) => serde_json::to_value(p),
            StreamEvent::CompactionStart(p) => serde_json::to_value(p),
            StreamEvent::Compacted(p) => serde_json::to_value(p),
            StreamEvent::AnswerEnd(p) => serde_json::to_value(p),
            StreamEvent::Error(p) => serde_json::to_value(p),
            StreamEvent::ModelFallback(p) => serde_json::to_value(p),
        }
    }

    /// Whether the stream ends after this event.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            StreamEvent::AnswerEnd(_) | StreamEvent::ApprovalRequired(_) | StreamEvent::Error(_)
        )
    }
}

/// `start_tool_calling`: a tool call begins.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StartToolCalling {
    pub tool_name: String,
    pub id: String,
}

/// `tool_calling_result` (and an entry of a JSON answer's `tool_calls`): one tool call's outcome.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ToolCallResult {
    pub tool_call_id: String,
    pub tool_name: String,
    pub name: String,
    /// The tool's parameterised one-liner, e.g. the command it ran.
    pub description: String,
    pub role: String,
    pub result: ToolResultBody,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolset_name: Option<String>,
}

/// How a tool call went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Success,
    Error,
    NoData,
    /// The tool's policy wants the user's approval before it runs.
    ApprovalRequired,
}

/// `model_fallback` (an SSE event of its own, and an entry of `metadata.model_fallbacks`): the
/// model asked for was out, so the call went to one of its `fallbacks`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ModelFallback {
    /// The model key the call was for.
    pub requested_model: String,
    /// The model key that answered.
    pub model: String,
    /// Why the model asked for did not answer (its last error).
    pub reason: String,
}

/// HolmesGPT's structured tool result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ToolResultBody {
    pub schema_version: String,
    pub status: ToolStatus,
    pub error: Option<String>,
    pub return_code: Option<i32>,
    /// The tool's output, always a string.
    pub data: String,
    pub images: Option<Value>,
    pub url: Option<String>,
    pub invocation: Option<String>,
    pub params: Value,
    pub icon_url: Option<String>,
    pub elapsed_seconds: Option<f64>,
}

/// `ai_answer_delta` (opt-in with `stream_deltas`): the next piece of the assistant's text, as
/// the LLM writes it. The pieces of one LLM call, joined, are the text of the `ai_message` or
/// `ai_answer_end` that follows (before `response_format` clean-up), unless the call fails and
/// an `error` follows instead.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AnswerDelta {
    pub content: String,
}

/// `ai_message`: assistant text or reasoning beside tool calls, or a server notice.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AiMessage {
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `token_count`: the conversation's token usage, after each LLM call, after tool results and
/// after a compaction.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct TokenCount {
    pub metadata: Metadata,
}

/// `ai_answer_end`: the final answer (terminal).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AnswerEnd {
    pub analysis: String,
    pub conversation_history: Vec<Message>,
    pub follow_up_actions: Vec<FollowUpAction>,
    pub metadata: Metadata,
}

/// `approval_required`: the run paused for tool approvals and/or frontend tool results
/// (terminal). Resume by sending `conversation_history` back with the answers.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalRequired {
    /// Always null; the docs name it `content`, the reference sends `analysis`: both are sent.
    pub content: Option<String>,
    pub analysis: Option<String>,
    pub conversation_history: Vec<Message>,
    pub follow_up_actions: Vec<FollowUpAction>,
    pub requires_approval: bool,
    pub pending_approvals: Vec<PendingApproval>,
    pub pending_frontend_tool_calls: Vec<PendingFrontendToolCall>,
}

/// A tool call that runs only if the user approves it (`tool_decisions`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PendingApproval {
    pub tool_call_id: String,
    pub tool_name: String,
    pub description: String,
    pub params: Value,
}

/// A frontend tool call the client must run (`frontend_tool_results`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PendingFrontendToolCall {
    pub tool_call_id: String,
    pub tool_name: String,
    pub arguments: Value,
}

/// `conversation_history_compaction_start`: the history is about to be summarised.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CompactionStart {
    pub content: String,
    pub metadata: CompactionStartMetadata,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CompactionStartMetadata {
    pub initial_tokens: u32,
    pub num_messages: usize,
    pub max_context_size: u32,
    pub threshold_pct: u32,
}

/// `conversation_history_compacted`: the summarised history, which replaces the old one.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Compacted {
    pub content: String,
    pub compaction_summary: Option<String>,
    pub messages: Vec<Message>,
    pub metadata: CompactedMetadata,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CompactedMetadata {
    pub initial_tokens: u32,
    pub compacted_tokens: u32,
    pub compression_ratio_pct: f64,
    pub num_messages_before: usize,
    pub num_messages_after: usize,
    pub max_context_size: u32,
    pub threshold_pct: u32,
    /// Always false: triage summarises or gives up, it has no fallback (HolmesGPT always
    /// sends the key).
    #[serde(default)]
    pub fallback_used: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<String>,
    /// Summary requests made (chunks and retries).
    #[serde(default)]
    pub summarization_requests: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_cost: Option<CompactionCost>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CompactionCost {
    pub total_cost: f64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// Not reported by the providers triage speaks to: null, as HolmesGPT sends when unknown.
    pub cached_tokens: Option<u64>,
    pub cache_creation_tokens: Option<u64>,
}

/// `error`: the request failed after the stream started (terminal).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ErrorEvent {
    pub description: String,
    /// 5204 when the LLM provider rate-limited the request, else 1.
    pub error_code: i32,
    pub msg: String,
    pub success: bool,
}

pub const RATE_LIMIT_ERROR_CODE: i32 = 5204;
pub const GENERIC_ERROR_CODE: i32 = 1;

impl ErrorEvent {
    pub fn new(description: String, rate_limited: bool) -> Self {
        if rate_limited {
            ErrorEvent {
                description,
                error_code: RATE_LIMIT_ERROR_CODE,
                msg: "Rate limit exceeded".into(),
                success: false,
            }
        } else {
            ErrorEvent {
                msg: description.clone(),
                description,
                error_code: GENERIC_ERROR_CODE,
                success: false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reads_back_what_write_data_wrote() {
        let event = StreamEvent::Error(ErrorEvent::new("slow down".into(), true));
        let mut data = Vec::new();
        event.write_data(&mut data).unwrap();
        let back = StreamEvent::parse(event.name(), std::str::from_utf8(&data).unwrap()).unwrap();
        let StreamEvent::Error(e) = back else {
            panic!("not an error event")
        };
        assert_eq!(
            (e.error_code, e.description.as_str()),
            (RATE_LIMIT_ERROR_CODE, "slow down")
        );
        assert!(StreamEvent::parse("no_such_event", "{}").is_none());
        assert!(StreamEvent::parse("ai_answer_end", "{").is_none());
    }

    /// The stored form of a frame is its data as a value, taken without writing it out: the
    /// same JSON, message contents written from their escaped or known form included.
    #[test]
    fn data_value_is_what_write_data_writes() {
        let known = format!("You are triage. \"quoted\" é\n{}", "x".repeat(1100));
        crate::wire::known_json::remember(&known);
        let long = format!(
            "line\twith \u{1} control, \"quotes\" and ünïcode {}",
            "y".repeat(80)
        );
        let messages = vec![
            Message::system(known.clone()),
            Message::user(Value::String(long.clone())),
            Message::tool("call_1", "bash", "short".into()),
        ];
        let events = [
            StreamEvent::Compacted(Box::new(Compacted {
                content: long.clone(),
                compaction_summary: Some(known),
                messages,
                metadata: CompactedMetadata {
                    initial_tokens: 10,
                    compacted_tokens: 5,
                    compression_ratio_pct: 50.5,
                    num_messages_before: 4,
                    num_messages_after: 3,
                    max_context_size: 100,
                    threshold_pct: 80,
                    fallback_used: false,
                    fallback_reason: None,
                    summarization_requests: 1,
                    compaction_cost: None,
                },
            })),
            StreamEvent::AiMessage(AiMessage {
                content: Some(long),
                reasoning: None,
                metadata: None,
            }),
            StreamEvent::Error(ErrorEvent::new("slow down".into(), true)),
        ];
        for event in events {
            let mut data = Vec::new();
            event.write_data(&mut data).unwrap();
            let written: Value = serde_json::from_slice(&data).unwrap();
            assert_eq!(event.data_value().unwrap(), written, "{}", event.name());
        }
    }
}
