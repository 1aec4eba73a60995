//! What a run reports, as small domain events: none carries the whole history, so a log of
//! them grows with the conversation, not with its square. Front doors render them (`wire/`
//! as HolmesGPT frames); a store can append them.

use super::error::RunError;
use super::state::PendingCall;
use super::usage::UsageReport;
use crate::tools::ToolOutcome;
use crate::wire::Message;
use crate::wire::events::ModelFallback;
use crate::wire::response::{ResponseFormatReport, Usage};

#[derive(Debug, Clone)]
pub enum AgentEvent {
    /// A piece of the assistant's text as the LLM writes it (transient).
    TextDelta(String),
    /// A message joined the history at `index` (usually its end).
    MessageAdded {
        index: usize,
        message: Box<Message>,
    },
    /// The message at `index` was replaced (the repaired structured answer).
    MessageReplaced {
        index: usize,
        message: Box<Message>,
    },
    /// The assistant's text or reasoning beside the tool calls it asked for.
    Thought {
        content: Option<String>,
        reasoning: Option<String>,
        usage: Box<UsageReport>,
    },
    /// triage's own note to the user (the history was compacted, the context is full).
    Notice(String),
    /// The model asked for was out; one of its fallbacks answered this call.
    ModelFallback(ModelFallback),
    ToolStarted {
        call_id: String,
        tool_name: String,
    },
    ToolFinished(Box<ToolOutcome>),
    /// The conversation's token usage after an LLM call, after tool results, after compaction.
    Usage(Box<UsageReport>),
    CompactionStarted(CompactionStarted),
    Compacted(Box<CompactionReport>),
    /// The run waits for decisions or frontend results (terminal).
    Paused {
        pending: Vec<PendingCall>,
    },
    /// The final answer (terminal).
    Finished(Box<Answer>),
    /// The run failed (terminal).
    Failed(RunError),
    /// The run stopped because it was told to (terminal).
    Stopped(StopReason),
}

#[derive(Debug, Clone, PartialEq)]
pub enum StopReason {
    /// Paused after a step, as asked.
    Paused,
    /// Interrupted mid-step; these calls were cut and got an error result.
    Interrupted { cut: Vec<String> },
    /// The run repeated itself: which pattern (a new user message continues).
    Stuck { pattern: String },
}

impl AgentEvent {
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            AgentEvent::Paused { .. }
                | AgentEvent::Finished(_)
                | AgentEvent::Failed(_)
                | AgentEvent::Stopped(_)
        )
    }
}

#[derive(Debug, Clone)]
pub struct CompactionStarted {
    pub initial_tokens: u32,
    pub num_messages: usize,
    pub context_window: u32,
    pub threshold_pct: u32,
}

#[derive(Debug, Clone)]
pub struct Answer {
    pub text: String,
    pub finish_reason: Option<String>,
    /// Set when a `response_format` was enforced.
    pub format: Option<ResponseFormatReport>,
    pub usage: UsageReport,
    /// The calls of this run a fallback model answered.
    pub fallbacks: Vec<ModelFallback>,
}

/// What a compaction did.
#[derive(Debug, Clone)]
pub struct CompactionReport {
    pub summary: String,
    /// The new history: system prompt, summary, last user message.
    pub messages: Vec<Message>,
    pub initial_tokens: u32,
    pub compacted_tokens: u32,
    pub num_messages_before: usize,
    pub context_window: u32,
    pub threshold_pct: u32,
    /// Summary requests made (chunks and retries).
    pub summarization_requests: u32,
    pub usage: Usage,
    pub cost: f64,
}
