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

use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::Value;

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
            let body = serde_json::to_vec(&request::body(req)?)
                .map(bytes::Bytes::from)
                .map_err(|e| LlmError::Protocol(format!("cannot encode the request: {e}")))?;
            let model = req.model;
            let started = Instant::now();
            let mut attempt = 0;
            'call: loop {
                attempt += 1;
                let token = with_google_token(&self.transport, model).await?;
                let response = self
                    .transport
                    .open_with_retries(model, || {
                        let builder = model.authorize(self.transport.post(model, body.clone()));
                        match &token {
                            Some(t) => builder.bearer_auth(t),
                            None => builder,
                        }
                    })
                    .await?;
                let mut events = std::pin::pin!(self.transport.events(response));
                let mut answer = AnswerStream::default();
                let mut any_output = false;
                while let Some(event) = events.next().await {
                    let fragments = event.and_then(|e| {
                        let data = e.data.trim();
                        if data.is_empty() { Ok(Vec::new()) } else { answer.push(data) }
                    });
                    let fragments = match fragments {
                        Ok(f) => f,
                        Err(e) if !any_output => {
                            let Some(delay) = self.transport.retry_delay(attempt, &e, started) else {
                                Err(e)?
                            };
                            tracing::warn!(
                                model = %model.key, attempt, delay_ms = delay.as_millis() as u64,
                                error = %e, "retrying LLM call"
                            );
                            tokio::time::sleep(delay).await;
                            continue 'call;
                        }
                        Err(e) => Err(e)?,
                    };
                    for fragment in fragments {
                        any_output = true;
                        yield fragment;
                    }
                }
                if !answer.is_complete() {
                    Err(LlmError::Protocol(if any_output {
                        "the stream ended in the middle of the answer".into()
                    } else {
                        "the stream ended before any answer".into()
                    }))?;
                }
                for fragment in answer.finish() {
                    yield fragment;
                }
                break 'call;
            }
        })
    }
}
