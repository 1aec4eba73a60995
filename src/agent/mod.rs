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
pub use prepare::{ChatError, PreparedChat, RequestMeta};
pub use secrets::SecretMasker;

pub struct AgentOptions {
    pub max_steps: u32,
    pub tool_budget_pct: f64,
    pub tool_budget_tokens: u32,
    pub duplicate_call_guard: bool,
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
