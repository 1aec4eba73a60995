//! The OpenAI chat-completions provider (OpenAI, Azure OpenAI and every compatible server).
//! Every call streams (`stream:true` with usage), so an abandoned request stops at once and a
//! stalled provider is noticed between chunks.

use std::collections::BTreeSet;
use std::sync::Mutex;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde::Serialize;
use serde_json::Value;

use super::body::{Parts, SharedParts};
use super::error::LlmError;
use super::model::ModelConfig;
use super::openai_chunk::Chunk;
use super::provider::{CompletionRequest, Fragment, Provider};
use super::transport::Transport;
use crate::wire::Message;
use crate::wire::content::Content;
use crate::wire::message::ForLlm;

pub struct OpenAiClient {
    transport: Transport,
}

/// The body's fields but `model`, `messages` and `tools`, which `encode` writes around
/// shared parts.
#[derive(Serialize)]
struct Settings<'a> {
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

/// Endpoints that answered a body in parts with a redirect (configured models only).
static MOVED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// The system prompts and tool definitions calls share (`body.rs`).
static SHARED: SharedParts = SharedParts::new();

/// The encoding of a system message holding the server's shared prompt, made once.
fn shared_prompt(message: &Message) -> Result<Option<Bytes>, serde_json::Error> {
    let Content::Shared(prompt) = &message.content else {
        return Ok(None);
    };
    let only_a_prompt =
        message.role == "system" && message.tool_calls.is_none() && message.tool_call_id.is_none();
    if !only_a_prompt {
        return Ok(None);
    }
    SHARED
        .prompt(prompt, || serde_json::to_vec(&ForLlm(message)))
        .map(Some)
}

impl OpenAiClient {
    pub fn new(transport: Transport) -> OpenAiClient {
        OpenAiClient { transport }
    }

    /// Sends `body`, retried under one budget. reqwest follows a 307 or 308 only with a body
    /// in one piece, so an endpoint that answers one gets its calls in one piece from then on.
    async fn open(&self, model: &ModelConfig, body: &Parts) -> Result<reqwest::Response, LlmError> {
        let send = |body: reqwest::Body| model.authorize(self.transport.post(model, body));
        let (mut attempt, started) = (0, std::time::Instant::now());
        let moved = MOVED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&model.endpoint);
        if !moved {
            let build = || send(body.to_reqwest());
            match self
                .transport
                .open_counting(model, build, &mut attempt, started)
                .await
            {
                Err(LlmError::Upstream {
                    status: status @ (307 | 308),
                    ..
                }) => {
                    tracing::warn!(
                        model = %model.key, status,
                        "the LLM endpoint redirects: set api_base to where it points"
                    );
                    MOVED
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(model.endpoint.clone());
                }
                opened => return opened,
            }
        }
        let whole = body.whole();
        let build = || send(whole.clone().into());
        self.transport
            .open_counting(model, build, &mut attempt, started)
            .await
    }

    fn fragments<'a>(
        &'a self,
        req: &'a CompletionRequest<'a>,
    ) -> BoxStream<'a, Result<Fragment, LlmError>> {
        Box::pin(async_stream::try_stream! {
            // The request body (the whole history) is freed once the answer starts.
            let body = encode(req)?;
            let response = self.open(req.model, &body).await?;
            // Only opening is retried: from here on nothing sends the body again.
            drop(body);
            let mut events = std::pin::pin!(self.transport.events(response));
            let (mut done, mut finished, mut any_output) = (false, false, false);
            let mut fragments = Vec::new();
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
                // One UTF-8 check of the whole chunk costs less than serde_json's check of each
                // of its dozen short strings (keys included); a chunk that is not UTF-8
                // throughout is read as before, where only the strings it keeps must be.
                let chunk: Chunk = match std::str::from_utf8(data) {
                    Ok(text) => serde_json::from_str(text),
                    Err(_) => serde_json::from_slice(data),
                }
                .map_err(|e| malformed(data, &e))?;
                chunk.into_fragments(&mut fragments).map_err(|message| LlmError::Upstream {
                    status: 200,
                    message,
                    retry_after: None,
                })?;
                for fragment in fragments.drain(..) {
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

/// `{"model":…,"messages":[…],"tools":…,` then the settings: the shared prompt and tools are parts
/// of their own, the rest one buffer.
fn encode(req: &CompletionRequest<'_>) -> Result<Parts, LlmError> {
    static OWN: crate::runtime::size_hint::SizeHint =
        crate::runtime::size_hint::SizeHint::new(1024);
    let m = req.model;
    let explicit_completion_tokens = m.extra_params.contains_key("max_completion_tokens");
    let settings = Settings {
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
    let cannot =
        |e: serde_json::Error| LlmError::Protocol(format!("cannot encode the request: {e}"));
    let prompt = match req.messages.first() {
        Some(first) => shared_prompt(first).map_err(cannot)?,
        None => None,
    };
    let messages = &req.messages[usize::from(prompt.is_some())..];
    let mut own = OWN.buffer();
    // The model first, as before: proxies and fakes that route by it look at the start.
    own.extend_from_slice(b"{\"model\":");
    serde_json::to_writer(&mut own, &m.wire_model).map_err(cannot)?;
    own.extend_from_slice(b",\"messages\":[");
    let before_prompt = own.len();
    for (i, message) in messages.iter().enumerate() {
        if i > 0 || prompt.is_some() {
            own.push(b',');
        }
        serde_json::to_writer(&mut own, &ForLlm(message)).map_err(cannot)?;
    }
    own.push(b']');
    if req.tools.is_some() {
        own.extend_from_slice(b",\"tools\":");
    }
    let before_tools = own.len();
    serde_json::to_writer(&mut own, &settings).map_err(cannot)?;
    // The settings' `{` becomes the `,` that continues the object: never `{}`, as `stream`
    // and `stream_options` are always written.
    debug_assert!(own.len() > before_tools + 2 && own[before_tools] == b'{');
    own[before_tools] = b',';
    let own = Bytes::from(OWN.finish(own));
    // Split only around what is shared: a body with nothing shared stays in one piece.
    let mut parts = Parts::default();
    let mut start = 0;
    if let Some(prompt) = prompt {
        parts.push(own.slice(..before_prompt));
        parts.push(prompt);
        start = before_prompt;
    }
    if let Some(tools) = req.tools {
        parts.push(own.slice(start..before_tools));
        parts.push(SHARED.text(tools.get()));
        start = before_tools;
    }
    parts.push(own.slice(start..));
    Ok(parts)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn model(entry: &str) -> std::sync::Arc<crate::llm::ModelConfig> {
        let toml = format!("[models.c]\nmodel = \"openai/gpt-4.1\"\napi_key = \"k\"\n{entry}");
        let settings = crate::config::Settings::from_toml(&toml).unwrap();
        let registry = crate::llm::ModelRegistry::from_settings(&settings).unwrap();
        registry.resolve(Some("c")).unwrap()
    }

    #[test]
    fn a_body_shares_the_prompt_and_tools_and_reads_as_one_object_model_first() {
        let m = model("temperature = 0.2\n");
        let prompt: std::sync::Arc<str> = std::sync::Arc::from("You are \"triage\".\n");
        let tools =
            serde_json::value::RawValue::from_string(json!([{"type": "function"}]).to_string())
                .unwrap();
        let history = [
            Message::shared_system(prompt.clone()),
            Message::user(json!("why?")),
        ];
        let request = |messages| CompletionRequest {
            model: &m,
            messages,
            tools: Some(&tools),
            allow_tool_calls: true,
            response_format: None,
        };
        let first = encode(&request(&history)).unwrap();
        let whole = first.whole();
        assert!(whole.starts_with(br#"{"model":"gpt-4.1","messages":[{"role":"system""#));
        let body: Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "gpt-4.1",
                "messages": [
                    {"role": "system", "content": "You are \"triage\".\n"},
                    {"role": "user", "content": "why?"},
                ],
                "tools": [{"type": "function"}],
                "tool_choice": "auto",
                "stream": true,
                "stream_options": {"include_usage": true},
                "temperature": 0.2,
            })
        );
        // A second call shares the first one's prompt and tools rather than copying them.
        let second = encode(&request(&history)).unwrap();
        assert!(second.shares_with(&first), "{second:?}");

        // A system prompt the client wrote into the history, and no tools: one piece, the call's own.
        let own = [Message::system("mine"), Message::user(json!("q"))];
        let parts = encode(&CompletionRequest {
            tools: None,
            ..request(&own)
        })
        .unwrap();
        let body: Value = serde_json::from_slice(&parts.whole()).unwrap();
        assert_eq!(body["messages"][0]["content"], "mine");
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
        assert!(!parts.shares_with(&first));
        assert_eq!(parts.count(), 1, "nothing shared, nothing split");
    }
}
