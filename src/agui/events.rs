//! The AG-UI events triage sends, as they go on the wire: `type` in SCREAMING_SNAKE_CASE,
//! fields in camelCase, absent values left out (the protocol reads a null as a mistake).

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(
    tag = "type",
    rename_all = "SCREAMING_SNAKE_CASE",
    rename_all_fields = "camelCase"
)]
pub enum AguiEvent {
    RunStarted {
        thread_id: String,
        run_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_run_id: Option<String>,
    },
    StateSnapshot {
        snapshot: Value,
    },
    TextMessageStart {
        message_id: String,
        role: &'static str,
    },
    TextMessageContent {
        message_id: String,
        delta: String,
    },
    TextMessageEnd {
        message_id: String,
    },
    ReasoningStart {
        message_id: String,
    },
    ReasoningMessageStart {
        message_id: String,
        role: &'static str,
    },
    ReasoningMessageContent {
        message_id: String,
        delta: String,
    },
    ReasoningMessageEnd {
        message_id: String,
    },
    ReasoningEnd {
        message_id: String,
    },
    ToolCallStart {
        tool_call_id: String,
        tool_call_name: String,
        parent_message_id: String,
    },
    ToolCallArgs {
        tool_call_id: String,
        delta: String,
    },
    ToolCallEnd {
        tool_call_id: String,
    },
    ToolCallResult {
        message_id: String,
        tool_call_id: String,
        content: String,
        role: &'static str,
    },
    /// triage's own notes (compaction, a fallback model): not conversation content.
    Custom {
        name: &'static str,
        value: Value,
    },
    RunFinished {
        thread_id: String,
        run_id: String,
        outcome: Outcome,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        usage: Vec<TokenUsage>,
    },
    RunError {
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
}

impl AguiEvent {
    /// Nothing follows it in the stream.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            AguiEvent::RunFinished { .. } | AguiEvent::RunError { .. }
        )
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum Outcome {
    Success {
        /// Frontend tool calls the client is to answer.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pending_tool_call_ids: Vec<String>,
    },
    Interrupt {
        interrupts: Vec<Interrupt>,
    },
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Interrupt {
    pub id: String,
    pub reason: &'static str,
    pub message: String,
    pub tool_call_id: String,
    /// When the signed approval expires; absent on a thread, whose conversation keeps it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    pub metadata: Value,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    pub provider: String,
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_wire_shape_is_the_protocol_s() {
        let started = AguiEvent::RunStarted {
            thread_id: "t".into(),
            run_id: "r".into(),
            parent_run_id: None,
        };
        assert_eq!(
            serde_json::to_value(&started).unwrap(),
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
        );
        let finished = AguiEvent::RunFinished {
            thread_id: "t".into(),
            run_id: "r".into(),
            outcome: Outcome::Success {
                pending_tool_call_ids: vec!["c".into()],
            },
            usage: Vec::new(),
        };
        assert_eq!(
            serde_json::to_value(&finished).unwrap(),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
                   "outcome": {"type": "success", "pendingToolCallIds": ["c"]}})
        );
        let start = AguiEvent::ReasoningMessageStart {
            message_id: "m".into(),
            role: "reasoning",
        };
        assert_eq!(
            serde_json::to_value(&start).unwrap()["type"],
            "REASONING_MESSAGE_START"
        );
    }
}
