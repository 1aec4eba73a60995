//! The OpenAI chat-completions provider (OpenAI, Azure OpenAI and every compatible server).
//! Every call streams (`stream:true` with usage), so an abandoned request stops at once and a
//! stalled provider is noticed between chunks.

use futures::StreamExt;
use futures::stream::BoxStream;
use serde::Serialize;
use serde::ser::SerializeSeq;
use serde_json::Value;
use serde_json::value::RawValue;

use super::error::LlmError;
use super::openai_chunk::Chunk;
use super::provider::{CompletionRequest, Fragment, Provider};
use super::transport::Transport;
use crate::wire::Message;
use crate::wire::message::ForLlm;

pub struct OpenAiClient {
    transport: Transport,
}

#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    messages: LlmMessages<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<&'a Value>,
    #[serde(flatten)]
    extra: &'a serde_json::Map<String, Value>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

struct LlmMessages<'a>(&'a [Message]);

impl Serialize for LlmMessages<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for m in self.0 {
            seq.serialize_element(&ForLlm(m))?;
        }
        seq.end()
    }
}

impl OpenAiClient {
    pub fn new(transport: Transport) -> OpenAiClient {
        OpenAiClient { transport }
    }

    fn encode(&self, req: &CompletionRequest<'_>) -> Result<bytes::Bytes, LlmError> {
        let m = req.model;
        let explicit_completion_tokens = m.extra_params.contains_key("max_completion_tokens");
        let body = RequestBody {
            model: &m.wire_model,
            messages: LlmMessages(req.messages),
            tools: req.tools,
            tool_choice: req
                .tools
                .map(|_| if req.allow_tool_calls { "auto" } else { "none" }),
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            temperature: m.temperature,
            top_p: m.top_p,
            // An entry's own `max_completion_tokens` is sent as written instead.
            max_tokens: m
                .max_tokens
                .filter(|_| !m.uses_max_completion_tokens && !explicit_completion_tokens),
            max_completion_tokens: m
                .max_tokens
                .filter(|_| m.uses_max_completion_tokens && !explicit_completion_tokens),
            reasoning_effort: m.reasoning_effort.as_deref(),
            thinking: m.thinking.as_ref(),
            response_format: req.response_format,
            extra: &m.extra_params,
        };
        crate::llm::transport::json_body(&body)
    }

    fn fragments<'a>(
        &'a self,
        req: &'a CompletionRequest<'a>,
    ) -> BoxStream<'a, Result<Fragment, LlmError>> {
        Box::pin(async_stream::try_stream! {
            // The request body (the whole history) is freed once the answer starts.
            let body = self.encode(req)?;
            let model = req.model;
            let response = self
                .transport
                .open_with_retries(model, || model.authorize(self.transport.post(model, body.clone())))
                .await?;
            // Only opening is retried: from here on nothing sends the body again.
            drop(body);
            let mut events = std::pin::pin!(self.transport.events(response));
            let (mut done, mut finished, mut any_output) = (false, false, false);
            while let Some(event) = events.next().await {
                let event = event?;
                let data = event.data().trim_ascii();
                if data.is_empty() {
                    continue;
                }
                if data == b"[DONE]" {
                    done = true;
                    break;
                }
                // From the bytes as received: serde_json checks the UTF-8 of what it reads.
                let chunk: Chunk = serde_json::from_slice(data).map_err(|e| malformed(data, &e))?;
                let fragments = chunk.into_fragments().map_err(|message| LlmError::Upstream {
                    status: 200,
                    message,
                    retry_after: None,
                })?;
                for fragment in fragments {
                    match &fragment {
                        Fragment::Finish(_) => finished = true,
                        Fragment::Usage(_) => {}
                        _ => any_output = true,
                    }
                    yield fragment;
                }
            }
            // A server may omit [DONE], but an answer with no finish_reason was cut off.
            if !done && !finished {
                Err(LlmError::Protocol(if any_output {
                    "the stream ended in the middle of the answer".into()
                } else {
                    "the stream ended before any answer".into()
                }))?;
            }
        })
    }
}

/// Why a chunk did not parse: bytes that are not UTF-8, or JSON that is not a chunk.
fn malformed(data: &[u8], e: &serde_json::Error) -> LlmError {
    LlmError::Protocol(match std::str::from_utf8(data) {
        Err(utf8) => format!("unreadable stream: {utf8}"),
        Ok(text) => format!(
            "malformed chunk ({e}): {}",
            text.chars().take(200).collect::<String>()
        ),
    })
}

impl Provider for OpenAiClient {
    fn stream<'a>(
        &'a self,
        request: &'a CompletionRequest<'a>,
    ) -> BoxStream<'a, Result<Fragment, LlmError>> {
        self.fragments(request)
    }
}
