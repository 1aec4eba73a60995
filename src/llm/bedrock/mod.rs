//! The native Bedrock provider: the ConverseStream API, one request shape for every model
//! Bedrock serves (Claude, Nova, Llama, Mistral…), answers as eventstream frames. One concept
//! per file: `models.rs` (what a `bedrock/` entry resolves to), `llm/auth/aws.rs`
//! (SigV4 or a bearer token), `request.rs` (the body), `stream.rs` (the answer as fragments).
//!
//! Crates: aws-config (the credential chain), aws-sigv4 (signing) and aws-smithy-eventstream
//! (the frame codec), with calls on our own `Transport`, rather than aws-sdk-bedrockruntime:
//! the SDK would bring its own HTTP stack, connection pool and retries, which would stack on
//! ours and bypass our timeouts, fallbacks and cancel-on-drop, at a measured cost of more
//! build time and binary (BENCHMARKS.md, "Session 7 — Bedrock").

pub mod models;
mod request;
mod stream;

use futures::StreamExt;
use futures::stream::BoxStream;

pub use models::{BEARER_VAR, resolve, runtime_base};

use super::error::LlmError;
use super::model::{Auth, ModelConfig};
use super::provider::{CompletionRequest, Fragment, Provider};
use super::transport::Transport;
use stream::AnswerStream;

pub struct BedrockClient {
    transport: Transport,
}

impl BedrockClient {
    pub fn new(transport: Transport) -> BedrockClient {
        BedrockClient { transport }
    }
}

/// Builds one attempt's request.
type BuildRequest<'a> = Box<dyn Fn() -> reqwest::RequestBuilder + Send + Sync + 'a>;

/// The request `body` to `model`, signed afresh for each attempt (a signature is good for
/// minutes; a retry may come later).
pub fn signed_post<'a>(
    transport: &'a Transport,
    model: &'a ModelConfig,
    body: bytes::Bytes,
) -> impl Fn() -> futures::future::BoxFuture<'a, Result<BuildRequest<'a>, LlmError>> + Send + 'a {
    move || {
        let body = body.clone();
        Box::pin(async move {
            let Auth::Aws(auth) = &model.auth else {
                return Err(LlmError::Protocol(format!(
                    "model '{}' has no AWS credentials",
                    model.key
                )));
            };
            let headers = auth
                .signer(&model.key)
                .await?
                .headers(&model.endpoint, &body)?;
            let build = move || {
                let post = transport
                    .http()
                    .post(&model.endpoint)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .header(
                        reqwest::header::ACCEPT,
                        "application/vnd.amazon.eventstream",
                    )
                    .body(body.clone());
                let mut builder = model.authorize(post);
                for (name, value) in &headers {
                    builder = builder.header(name.as_str(), value.as_str());
                }
                builder
            };
            Ok(Box::new(build)
                as Box<
                    dyn Fn() -> reqwest::RequestBuilder + Send + Sync + 'a,
                >)
        })
    }
}

impl Provider for BedrockClient {
    fn stream<'a>(
        &'a self,
        req: &'a CompletionRequest<'a>,
    ) -> BoxStream<'a, Result<Fragment, LlmError>> {
        Box::pin(async_stream::try_stream! {
            let body = crate::llm::transport::json_body(&request::body(req)?)?;
            let model = req.model;
            let mut answer = self
                .transport
                .stream_answer::<AnswerStream, _, _, _>(model, signed_post(&self.transport, model, body));
            // On a step that may not call tools the definitions are still sent (see
            // request.rs): a call the model makes anyway is dropped, and the answer is its text.
            let forbid_calls = !req.allow_tool_calls;
            while let Some(fragment) = answer.next().await {
                match fragment? {
                    Fragment::ToolCall(_) if forbid_calls => {}
                    Fragment::Finish(reason) if forbid_calls && reason == "tool_calls" => {
                        yield Fragment::Finish("stop".into());
                    }
                    fragment => yield fragment,
                }
            }
        })
    }
}
