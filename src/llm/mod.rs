//! The LLM side: the model registry, the provider seam (`Provider`, `Llm`), the
//! OpenAI-compatible provider and an in-process scripted one for tests of the agent.

mod answer;
pub mod anthropic;
mod assemble;
mod auth;
pub mod bedrock;
mod body;
pub mod catalog;
mod complete;
mod error;
pub mod fallbacks;
pub mod gemini;
mod google;
pub mod model;
mod openai;
mod openai_chunk;
mod params;
pub mod prefixes;
pub mod probe;
mod provider;
pub mod registry;
pub mod scripted;
mod transport;

pub use anthropic::AnthropicClient;
pub use bedrock::BedrockClient;
pub use complete::{Llm, SCRIPTED_PREFIX};
pub use error::LlmError;
pub use gemini::GeminiClient;
pub use model::ModelConfig;
pub use openai::OpenAiClient;
pub use provider::{
    AnsweredByFallback, Completion, CompletionRequest, Fragment, Provider, ToolCallFragment,
};
pub use registry::{ModelLookupError, ModelRegistry};
pub use transport::{LlmTimeouts, RetryPolicy, Transport};
