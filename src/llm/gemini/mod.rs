//! The native Gemini provider: `streamGenerateContent?alt=sse`, on Google AI Studio
//! (`gemini/…`, an API key) and on Vertex AI (`vertex_ai/gemini-…`, OAuth tokens from Google
//! credentials, see `llm/auth/google.rs`). Native rather than Gemini's OpenAI-compatible endpoint: only
//! the native API carries thought signatures (Gemini 2.5 refuses a tool loop whose
//! signatures were dropped), function-call ids, and the cached and thinking token counts.
//! One concept per file: `contents.rs` (our history as contents), `schema.rs` (tool schemas in
//! Gemini's subset), `request.rs` (the body), `stream.rs` (the answer as fragments),
//! `models.rs` (what an entry resolves to). `vertex_ai/claude-…`
//! goes to the Anthropic provider.

mod contents;
pub mod models;
mod request;
mod schema;
mod stream;

use super::error::LlmError;
use super::google::stream_json;
use super::provider::{CompletionRequest, Fragment, Provider};
use super::transport::Transport;
use futures::StreamExt;
use futures::stream::BoxStream;
pub use models::resolve;
use stream::AnswerStream;

pub struct GeminiClient {
    transport: Transport,
}

impl GeminiClient {
    pub fn new(transport: Transport) -> GeminiClient {
        GeminiClient { transport }
    }
}

impl Provider for GeminiClient {
    fn stream<'a>(
        &'a self,
        req: &'a CompletionRequest<'a>,
    ) -> BoxStream<'a, Result<Fragment, LlmError>> {
        Box::pin(async_stream::try_stream! {
            let body = crate::llm::transport::json_body(&request::body(req)?)?;
            let model = req.model;
            let mut answer = stream_json::<AnswerStream>(&self.transport, model, body);
            while let Some(fragment) = answer.next().await {
                yield fragment?;
            }
        })
    }
}
