//! The agent: turns a chat request into a conversation and runs the agentic loop over it,
//! yielding typed events. It knows nothing of HTTP; dropping its stream cancels everything.

mod approvals;
mod chat_loop;
mod compaction;
mod frontend;
mod images;
mod metadata;
mod prepare;
mod resume;
mod secrets;
mod structured;

use crate::llm::{LlmClient, ModelRegistry};
use crate::prompt::Prompts;
use crate::tools::ToolRegistry;

pub use approvals::{ApprovalSigner, TokenError};
pub use compaction::CompactionOptions;
pub use images::ImageLimits;
pub use prepare::{ChatError, PreparedChat, RequestMeta};
pub use secrets::SecretMasker;

pub struct AgentOptions {
    pub max_steps: u32,
    pub tool_budget_pct: f64,
    pub tool_budget_tokens: u32,
    pub duplicate_call_guard: bool,
    pub max_tool_calls_per_answer: usize,
    pub images: images::ImageLimits,
}

pub struct Agent {
    pub models: ModelRegistry,
    pub llm: LlmClient,
    pub prompts: Prompts,
    pub tools: ToolRegistry,
    pub signer: ApprovalSigner,
    pub options: AgentOptions,
    pub compaction: CompactionOptions,
    pub masker: SecretMasker,
}

/// Drains an event stream into the non-streaming response (the HTTP JSON answer, `triage ask
/// --json`); the `error` event that ended the stream otherwise.
pub async fn collect_response(
    events: impl futures::Stream<Item = crate::wire::StreamEvent>,
) -> Result<crate::wire::ChatResponse, crate::wire::events::ErrorEvent> {
    use crate::wire::events::ErrorEvent;
    use crate::wire::{ChatResponse, StreamEvent};
    use futures::StreamExt;
    let mut events = std::pin::pin!(events);
    let mut tool_calls: Vec<crate::wire::events::ToolCallResult> = Vec::new();
    while let Some(event) = events.next().await {
        match event {
            StreamEvent::ToolCallingResult(result) => {
                // One entry per call id, the latest winning (a resumed call reports again).
                tool_calls.retain(|t| t.tool_call_id != result.tool_call_id);
                tool_calls.push(*result);
            }
            StreamEvent::AnswerEnd(end) => {
                return Ok(ChatResponse {
                    analysis: end.analysis,
                    conversation_history: end.conversation_history,
                    tool_calls,
                    follow_up_actions: end.follow_up_actions,
                    pending_approvals: None,
                    metadata: end.metadata,
                });
            }
            StreamEvent::Error(e) => return Err(e),
            StreamEvent::ApprovalRequired(_) => {
                return Err(ErrorEvent::new(
                    "the agent paused for approval, which needs `stream: true`".into(),
                    false,
                ));
            }
            _ => {}
        }
    }
    Err(ErrorEvent::new(
        "the agent stopped without an answer".into(),
        false,
    ))
}
