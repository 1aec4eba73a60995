//! The seam between the agent and LLM providers: a provider streams one completion as
//! fragments (text, reasoning, tool-call pieces, usage, finish).

use futures::stream::BoxStream;
use serde_json::Value;
use serde_json::value::RawValue;

use super::error::LlmError;
use super::model::ModelConfig;
use crate::wire::response::Usage;
use crate::wire::{Message, ToolCall};

pub struct CompletionRequest<'a> {
    pub model: &'a ModelConfig,
    pub messages: &'a [Message],
    /// OpenAI-format `tools` array. Sent whenever the history may hold tool calls, even when
    /// calls are forbidden: Anthropic and Bedrock refuse tool blocks in a history without tool
    /// definitions (HolmesGPT #1142).
    pub tools: Option<&'a RawValue>,
    /// `false` forbids new calls (`tool_choice: none`): the last step of a turn must answer.
    pub allow_tool_calls: bool,
    pub response_format: Option<&'a Value>,
}

impl CompletionRequest<'_> {
    /// Tools the model may call now: defined and not forbidden.
    pub fn offers_tools(&self) -> bool {
        self.tools.is_some() && self.allow_tool_calls
    }
}

/// One piece of a streamed completion.
#[derive(Debug, Clone, PartialEq)]
pub enum Fragment {
    Text(String),
    Reasoning(String),
    ToolCall(ToolCallFragment),
    /// A whole thinking block (Anthropic's `thinking` with its signature, or
    /// `redacted_thinking`), kept in the history and sent back unchanged. Its text has already
    /// streamed as `Reasoning`.
    ThinkingBlock(Value),
    Usage(Usage),
    Finish(String),
}

/// A piece of a tool call. Calls are told apart by `index`; providers that send no index send
/// one call at a time, and a new `id` starts the next call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCallFragment {
    pub index: Option<usize>,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Completion {
    pub content: Option<String>,
    pub reasoning: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    /// Provider thinking blocks, in order, as `Message::thinking_blocks` carries them.
    pub thinking_blocks: Vec<Value>,
    /// As reported by the provider; `None` when it sent no usage.
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    /// Set when the model asked for was out and one of its fallbacks answered.
    pub fallback: Option<AnsweredByFallback>,
}

impl Completion {
    /// The model that answered: `requested`, or the fallback that stood in for it (what the
    /// call is priced as).
    pub fn answered_by<'a>(&'a self, requested: &'a ModelConfig) -> &'a ModelConfig {
        self.fallback.as_ref().map_or(requested, |f| &f.model)
    }
}

/// Which fallback answered, and why the model asked for did not.
#[derive(Debug, Clone)]
pub struct AnsweredByFallback {
    pub model: std::sync::Arc<ModelConfig>,
    /// The last outage before this model answered.
    pub reason: String,
}

pub trait Provider: Send + Sync {
    /// Streams one completion. Retrying a call that has not produced anything yet is the
    /// provider's business; the stream ends after the last fragment, or with an error.
    fn stream<'a>(
        &'a self,
        request: &'a CompletionRequest<'a>,
    ) -> BoxStream<'a, Result<Fragment, LlmError>>;
}
