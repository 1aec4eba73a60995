//! The LLM side: the model registry and an OpenAI chat-completions client that always streams,
//! retries what is worth retrying, and maps failures to precise errors.

mod client;
pub mod entry_keys;
mod error;
mod event_limit;
pub mod probe;
pub mod registry;
mod stream;

pub use client::{Completion, CompletionRequest, LlmClient, LlmTimeouts, RetryPolicy};
pub use error::LlmError;
pub use registry::{ModelConfig, ModelLookupError, ModelRegistry};
