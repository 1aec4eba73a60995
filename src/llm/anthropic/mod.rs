//! The native Anthropic provider: the Messages API (Anthropic, and Azure AI Foundry's
//! Anthropic endpoint through `api_base`, and Claude on Vertex AI: token auth, the version in
//! the body), streamed. One concept per file: `models.rs` (what
//! an `anthropic/` entry resolves to), `messages.rs` (our history as Messages turns),
//! `request.rs` (the request body), `stream.rs` (the streamed answer as fragments). Retries,
//! timeouts and the bounded event stream are the shared `Transport`'s.

pub(crate) mod messages;
mod models;
pub(crate) mod request;
mod stream;

use futures::StreamExt;
use futures::stream::BoxStream;

pub use models::{KEY_VAR, check_entry, endpoint, known_model};

use super::error::LlmError;
use super::google::{VERTEX_ANTHROPIC_VERSION, stream_json};
use super::model::Auth;
use super::provider::{CompletionRequest, Fragment, Provider};
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
            let body = crate::llm::transport::json_body(&body)?;
            let model = req.model;
            let mut answer = stream_json::<AnswerStream>(&self.transport, model, body);
            while let Some(fragment) = answer.next().await {
                yield fragment?;
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
