//! A resolved model: what the registry makes of a model-list entry and every provider reads.
//! Below the providers and the registry, so providers never import the registry.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

pub use super::auth::Auth;
use crate::context::tokens::Tokenizer;

/// The wire protocol a model is spoken to in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI chat completions (OpenAI, Azure, every compatible server and proxy).
    OpenAiChat,
    /// Anthropic's Messages API (Anthropic, Azure AI Foundry's Anthropic endpoint).
    AnthropicMessages,
    /// Gemini's `streamGenerateContent` (Google AI Studio, Vertex AI).
    GeminiGenerate,
    /// Bedrock's ConverseStream.
    BedrockConverse,
}

#[derive(Debug)]
pub struct ModelConfig {
    pub key: String,
    pub api: Api,
    /// As configured, e.g. `openai/gpt-4.1`.
    pub model_id: String,
    /// The `model` field sent to the provider.
    pub wire_model: String,
    /// Full chat-completions URL.
    pub endpoint: String,
    /// `endpoint` parsed once rather than on every call; `None` when it does not parse, and
    /// the call then fails with reqwest's own error, naming the URL.
    pub endpoint_url: Option<reqwest::Url>,
    pub auth: Auth,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// Sent only when configured: a default could exceed a small server's limit.
    pub max_tokens: Option<u32>,
    /// OpenAI's o-series and gpt-5 (`openai/`, `azure/` or bare ids): `max_tokens` goes out as
    /// `max_completion_tokens`, the only name they accept.
    pub uses_max_completion_tokens: bool,
    /// The entry's `reasoning_effort`, else REASONING_EFFORT.
    pub reasoning_effort: Option<String>,
    /// The entry's `thinking`, else THINKING; `None` where the provider refuses the parameter
    /// (OpenAI and Azure OpenAI themselves).
    pub thinking: Option<Value>,
    pub context_window: u32,
    pub max_output_tokens: u32,
    pub vision: bool,
    /// (input, output) dollars per token.
    pub prices: Option<(f64, f64)>,
    pub extra_params: Map<String, Value>,
    /// The entry's `extra_headers` over EXTRA_HEADERS, sent with every call.
    pub extra_headers: BTreeMap<String, String>,
    pub tokenizer: Tokenizer,
    /// Calls in flight to this model, bounded when llm.max_concurrent_calls_per_model is set.
    pub call_slots: Arc<tokio::sync::Semaphore>,
    /// Every credential of this model (its key, credential-like fields of its entry), for the
    /// secret masker.
    pub credentials: Vec<String>,
    /// Models tried in order when this one's provider is out (`fallbacks`).
    pub fallbacks: Vec<Arc<ModelConfig>>,
}

impl ModelConfig {
    /// One of the model's call slots, if one is free now.
    pub fn try_reserve_slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.call_slots.clone().try_acquire_owned().ok()
    }

    /// One of the model's call slots, waiting at most `wait`: never an unbounded queue.
    pub async fn reserve_slot_within(
        &self,
        wait: std::time::Duration,
    ) -> Option<tokio::sync::OwnedSemaphorePermit> {
        tokio::time::timeout(wait, self.call_slots.clone().acquire_owned())
            .await
            .ok()?
            .ok()
    }
}

impl ModelConfig {
    /// The model's credentials and `extra_headers` on a request to its provider.
    pub(crate) fn authorize(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let mut builder = self.auth.apply(builder);
        for (name, value) in &self.extra_headers {
            builder = builder.header(name, value);
        }
        builder
    }
}
