//! The kinds of event a conversation's log holds: HolmesGPT's `/api/chat` frame names for
//! what a run reports, plus the conversation's own (messages, status changes, stops, inbound
//! webhook events).

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::status::UnknownName;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A message a user sent, as they sent it.
    UserMessage,
    /// A message joining the history (as the LLM reads it), at `index` or at the end.
    Message,
    /// A message of the history rewritten in place.
    MessageReplaced,
    /// A status change (`StatusChange`).
    ConversationStateUpdate,
    StartToolCalling,
    ToolCallingResult,
    AiMessage,
    /// Live text of the answer being written: streamed, never stored.
    AiAnswerDelta,
    TokenCount,
    ApprovalRequired,
    ConversationHistoryCompactionStart,
    ConversationHistoryCompacted,
    AiAnswerEnd,
    Error,
    ModelFallback,
    /// A run cut short by `interrupt`.
    Interrupted,
    /// A run stopped after its step by `pause`.
    Paused,
    /// A run the stuck detector stopped.
    Stuck,
    /// An authenticated inbound webhook event, for the audit.
    Webhook,
}

impl EventKind {
    pub const ALL: [EventKind; 19] = [
        EventKind::UserMessage,
        EventKind::Message,
        EventKind::MessageReplaced,
        EventKind::ConversationStateUpdate,
        EventKind::StartToolCalling,
        EventKind::ToolCallingResult,
        EventKind::AiMessage,
        EventKind::AiAnswerDelta,
        EventKind::TokenCount,
        EventKind::ApprovalRequired,
        EventKind::ConversationHistoryCompactionStart,
        EventKind::ConversationHistoryCompacted,
        EventKind::AiAnswerEnd,
        EventKind::Error,
        EventKind::ModelFallback,
        EventKind::Interrupted,
        EventKind::Paused,
        EventKind::Stuck,
        EventKind::Webhook,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::UserMessage => "user_message",
            EventKind::Message => "message",
            EventKind::MessageReplaced => "message_replaced",
            EventKind::ConversationStateUpdate => "conversation_state_update",
            EventKind::StartToolCalling => "start_tool_calling",
            EventKind::ToolCallingResult => "tool_calling_result",
            EventKind::AiMessage => "ai_message",
            EventKind::AiAnswerDelta => "ai_answer_delta",
            EventKind::TokenCount => "token_count",
            EventKind::ApprovalRequired => "approval_required",
            EventKind::ConversationHistoryCompactionStart => {
                "conversation_history_compaction_start"
            }
            EventKind::ConversationHistoryCompacted => "conversation_history_compacted",
            EventKind::AiAnswerEnd => "ai_answer_end",
            EventKind::Error => "error",
            EventKind::ModelFallback => "model_fallback",
            EventKind::Interrupted => "interrupted",
            EventKind::Paused => "paused",
            EventKind::Stuck => "stuck",
            EventKind::Webhook => "webhook",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EventKind {
    type Err = UnknownName;

    fn from_str(name: &str) -> Result<Self, UnknownName> {
        EventKind::ALL
            .into_iter()
            .find(|k| k.as_str() == name)
            .ok_or_else(|| UnknownName {
                what: "event kind",
                name: name.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The names the log, the API, webhooks and the CLI have always used.
    const TODAY: [(EventKind, &str); 19] = [
        (EventKind::UserMessage, "user_message"),
        (EventKind::Message, "message"),
        (EventKind::MessageReplaced, "message_replaced"),
        (
            EventKind::ConversationStateUpdate,
            "conversation_state_update",
        ),
        (EventKind::StartToolCalling, "start_tool_calling"),
        (EventKind::ToolCallingResult, "tool_calling_result"),
        (EventKind::AiMessage, "ai_message"),
        (EventKind::AiAnswerDelta, "ai_answer_delta"),
        (EventKind::TokenCount, "token_count"),
        (EventKind::ApprovalRequired, "approval_required"),
        (
            EventKind::ConversationHistoryCompactionStart,
            "conversation_history_compaction_start",
        ),
        (
            EventKind::ConversationHistoryCompacted,
            "conversation_history_compacted",
        ),
        (EventKind::AiAnswerEnd, "ai_answer_end"),
        (EventKind::Error, "error"),
        (EventKind::ModelFallback, "model_fallback"),
        (EventKind::Interrupted, "interrupted"),
        (EventKind::Paused, "paused"),
        (EventKind::Stuck, "stuck"),
        (EventKind::Webhook, "webhook"),
    ];

    #[test]
    fn every_kind_keeps_its_name_in_every_form() {
        assert_eq!(TODAY.len(), EventKind::ALL.len());
        for (kind, name) in TODAY {
            assert_eq!(kind.as_str(), name);
            assert_eq!(kind.to_string(), name);
            assert_eq!(name.parse::<EventKind>(), Ok(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), json!(name));
            assert_eq!(
                serde_json::from_value::<EventKind>(json!(name)).unwrap(),
                kind
            );
        }
    }

    #[test]
    fn an_unknown_kind_is_refused_by_name() {
        let e = "tick".parse::<EventKind>().unwrap_err();
        assert_eq!(e.to_string(), "unknown event kind 'tick'");
    }
}
