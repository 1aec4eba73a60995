//! The agent core: a `RunState` plus an `Input` becomes a `Run`, a stream of small domain
//! events. It knows nothing of HTTP, storage or wire formats; dropping a run cancels its LLM
//! call and its tools. Front doors (`holmes/` for `/api/chat`, `conversations/`, the CLI)
//! build the state and render the events.
//!
//! `Agent`'s methods, by step: `setup.rs` (`compile`), `turn.rs` (`start`, the loop,
//! `call_llm`, `finish_answer`, repair), `calls.rs` (`act`, `plan_call`, `run_calls`,
//! `finish_result`), `resume.rs` (`answer_pending`), `compaction.rs` (`compact_if_needed`).

mod ask;
mod calls;
pub mod canonical;
mod compaction;
mod condense;
mod config;
mod control;
mod current;
mod error;
mod event;
mod frontend;
mod images;
mod input;
pub mod mask;
mod message;
mod repeats;
mod resume;
mod run;
mod secrets;
mod settle;
mod setup;
mod state;
mod structured;
mod stuck;
mod title;
mod turn;
mod usage;

use std::sync::Arc;

use crate::llm::{Llm, ModelRegistry};
use crate::prompt::Prompts;
use crate::tools::ToolRegistry;

pub use compaction::CompactionOptions;
pub use condense::Condensed;
pub use config::{ApprovalMode, RunConfig};
pub use control::RunControl;
pub use current::CurrentAgent;
pub use error::{RunError, RunErrorKind};
pub use event::{AgentEvent, Answer, CompactionReport, CompactionStarted, StopReason};
pub use images::ImageLimits;
pub use input::{Decision, FrontendResult, Input, Verdict};
pub use mask::{MASK, Mask, Secrets};
pub use message::UserMessage;
pub use run::Run;
pub use secrets::{RunMasker, SecretMasker};
pub use settle::missing_results;
pub use setup::RunSetup;
pub use state::{PendingCall, RunState, Waiting};
pub use usage::{UsageLedger, UsageReport};

pub struct AgentOptions {
    /// LLM calls per user turn.
    pub max_steps: u32,
    pub tool_budget_pct: f64,
    pub tool_budget_tokens: u32,
    pub duplicate_call_guard: bool,
    pub max_tool_calls_per_answer: usize,
    pub images: images::ImageLimits,
}

/// The models, the prompts and the tools are shared: a reload of one part builds a new agent
/// around the others (`startup/reload.rs`).
pub struct Agent {
    pub models: Arc<ModelRegistry>,
    pub llm: Llm,
    pub prompts: Arc<Prompts>,
    pub tools: Arc<ToolRegistry>,
    pub options: AgentOptions,
    pub compaction: CompactionOptions,
    /// Shared with the log writer, which masks every line with it.
    pub masker: Arc<SecretMasker>,
}
#[cfg(test)]
mod control_tests;
#[cfg(test)]
mod events_tests;
#[cfg(test)]
mod tests;
