//! Where a run stands, serialisable so a store can persist it and load it back: the messages,
//! the calls it waits on, the steps and usage of the user's turn, the duplicate guard.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::repeats::RepeatGuard;
use super::usage::UsageLedger;
use crate::wire::response::Truncation;
use crate::wire::{Message, ToolCall};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunState {
    /// The conversation, each message with its cached `token_count`.
    pub messages: Vec<Message>,
    /// Calls of the last assistant reply that wait for the user or the client.
    #[serde(default)]
    pub pending: Vec<PendingCall>,
    /// LLM calls since the user's last message: the step budget belongs to the turn.
    #[serde(default)]
    pub steps: u32,
    #[serde(default)]
    pub usage: UsageLedger,
    /// The duplicate-call guard: what the turn's calls returned.
    #[serde(default)]
    pub repeats: RepeatGuard,
    /// Compaction failed or did not shrink the history: not tried again (each try costs a call).
    #[serde(default)]
    pub compaction_gave_up: bool,
    /// Tool results cut to the per-tool budget.
    #[serde(default)]
    pub truncations: Vec<Truncation>,
}

impl RunState {
    /// The turn has its answer: the last message is the model's, asking for no tool, and
    /// nothing waits.
    pub fn answered(&self) -> bool {
        self.pending.is_empty()
            && self
                .messages
                .last()
                .is_some_and(|m| m.is_role("assistant") && m.tool_calls().is_empty())
    }
}

/// A call the run paused on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingCall {
    /// The assistant message that asked for it.
    pub message_index: usize,
    pub call: ToolCall,
    pub waits_for: Waiting,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Waiting {
    /// The user's decision: the tool's policy asked for approval.
    Approval { description: String, params: Value },
    /// The client's result for a frontend tool.
    Frontend { arguments: Value },
}

impl PendingCall {
    pub fn is_approval(&self) -> bool {
        matches!(self.waits_for, Waiting::Approval { .. })
    }
}
