//! The native Anthropic provider: the Messages API (Anthropic, and Azure AI Foundry's
//! Anthropic endpoint through `api_base`, and Claude on Vertex AI: token auth, the version in
//! the body), streamed. One concept per file: `models.rs` (what
//! an `anthropic/` entry resolves to), `messages.rs` (our history as Messages turns),
//! `request.rs` (the request body), `stream.rs` (the streamed answer as fragments). Retries,
//! timeouts and the bounded event stream are the shared `Transport`'s.

mod messages;
mod models;
mod request;
mod stream;

use std::time::Instant;

use futures::StreamExt;
use futures::stream::BoxStream;

pub use models::{API_VERSION, KEY_VAR, check_entry, endpoint, known_model};

use super::error::LlmError;
use super::gemini::{VERTEX_ANTHROPIC_VERSION, with_google_token};
use super::provider::{CompletionRequest, Fragment, Provider};
use super::registry::Auth;
use super::transport::Transport;
use stream::AnswerStream;

pub struct AnthropicClient {
    transport: Transport,
}

impl AnthropicClient {
    pub fn new(transport: Transport) -> AnthropicClient {
        AnthropicClient { transport }
    }

    fn fragments<'a>(
        &'a self,
        req: &'a CompletionRequest<'a>,
    ) -> BoxStream<'a, Result<Fragment, LlmError>> {
        Box::pin(async_stream::try_stream! {
            let mut body = request::body(req)?;
            let vertex = matches!(req.model.auth, Auth::Google(_));
            if vertex {
                // Claude on Vertex: the model is in the URL, the version in the body.
                if let Some(fields) = body.as_object_mut() {
                    fields.remove("model");
                    fields.insert("anthropic_version".into(), VERTEX_ANTHROPIC_VERSION.into());
                }
            }
            let body = serde_json::to_vec(&body)
                .map(bytes::Bytes::from)
                .map_err(|e| LlmError::Protocol(format!("cannot encode the request: {e}")))?;
            let model = req.model;
            let started = Instant::now();
            let mut attempt = 0;
            // Anthropic may accept a call and then report `overloaded_error` as the stream's
            // first event: while nothing has been passed on, that is retried like a 529.
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
                        any_output |= !matches!(fragment, Fragment::Usage(_));
                        yield fragment;
                    }
                    if answer.is_complete() {
                        break 'call;
                    }
                }
                Err(LlmError::Protocol(if any_output {
                    "the stream ended in the middle of the answer".into()
                } else {
                    "the stream ended before any answer".into()
                }))?;
            }
        })
    }
}

impl Provider for AnthropicClient {
    fn stream<'a>(
        &'a self,
        request: &'a CompletionRequest<'a>,
    ) -> BoxStream<'a, Result<Fragment, LlmError>> {
        self.fragments(request)
    }
}
