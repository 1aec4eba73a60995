//! The native Gemini provider: `streamGenerateContent?alt=sse`, on Google AI Studio
//! (`gemini/…`, an API key) and on Vertex AI (`vertex_ai/gemini-…`, OAuth tokens from Google
//! credentials, see `auth.rs`). Native rather than Gemini's OpenAI-compatible endpoint: only
//! the native API carries thought signatures (Gemini 2.5 refuses a tool loop whose
//! signatures were dropped), function-call ids, and the cached and thinking token counts.
//! One concept per file: `contents.rs` (our history as contents), `schema.rs` (tool schemas in
//! Gemini's subset), `request.rs` (the body), `stream.rs` (the answer as fragments),
//! `auth.rs` (Vertex tokens), `models.rs` (what an entry resolves to). `vertex_ai/claude-…`
//! goes to the Anthropic provider.

pub mod auth;
mod contents;
pub mod models;
mod request;
mod schema;
mod stream;

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::Value;

use super::answer::AnswerReader;
use super::error::LlmError;
use super::provider::{CompletionRequest, Fragment, Provider};
use super::registry::{Auth, ModelConfig};
use super::transport::Transport;
pub use models::resolve;
use stream::AnswerStream;

/// What Claude on Vertex takes in place of the `anthropic-version` header.
pub const VERTEX_ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// The wait a Google error asks for (`details[].retryDelay` of a `RetryInfo`, e.g. "30s").
pub fn retry_info(error: &Value) -> Option<Duration> {
    error
        .get("details")?
        .as_array()?
        .iter()
        .filter(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| {
            d.get("retryDelay")?
                .as_str()?
                .strip_suffix('s')?
                .parse::<f64>()
                .ok()
        })
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s.min(3600.0)))
}

/// The model's Google OAuth token, when it has Google credentials.
pub async fn with_google_token(
    transport: &Transport,
    model: &ModelConfig,
) -> Result<Option<String>, LlmError> {
    match &model.auth {
        Auth::Google(auth) => auth.token(transport.http(), &model.key).await.map(Some),
        _ => Ok(None),
    }
}

/// Streams the answer to a JSON `body` posted to the model's endpoint, authorized by the
/// entry's key or, on Vertex, a Google token fetched afresh for each attempt.
pub fn stream_json<'a, R: AnswerReader + 'a>(
    transport: &'a Transport,
    model: &'a ModelConfig,
    body: bytes::Bytes,
) -> BoxStream<'a, Result<Fragment, LlmError>> {
    transport.stream_answer::<R, _, _, _>(model, move || {
        let body = body.clone();
        async move {
            let token = with_google_token(transport, model).await?;
            Ok(move || {
                let builder = model.authorize(transport.post(model, body.clone()));
                match &token {
                    Some(t) => builder.bearer_auth(t),
                    None => builder,
                }
            })
        }
    })
}

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
