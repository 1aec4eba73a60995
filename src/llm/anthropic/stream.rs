//! Anthropic's streamed answer read into fragments: `message_start` (input usage),
//! `content_block_start/delta/stop` (text, tool use, thinking and its signature),
//! `message_delta` (stop reason, output usage), `message_stop`, `ping`, and `error`, which
//! ends the answer with the provider's message. Unknown events are skipped, as the API's
//! versioning policy asks of clients.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::llm::Transport;
use crate::llm::answer::AnswerReader;
use crate::llm::error::LlmError;
use crate::llm::provider::{Fragment, ToolCallFragment};
use crate::wire::response::Usage;

const MAX_SIGNATURE_BYTES: usize = 64 * 1024;

enum Block {
    Text,
    ToolUse { call: usize, got_input: bool },
    Thinking { text: String, signature: String },
    Redacted { data: String },
}

/// The state of one streamed answer.
#[derive(Default)]
pub struct AnswerStream {
    blocks: HashMap<u64, Block>,
    calls: usize,
    input_tokens: u64,
    cache_read: u64,
    cache_creation: u64,
    output_tokens: u64,
    stop_reason: Option<String>,
    stopped: bool,
}

impl AnswerStream {
    /// `message_stop` was received: the answer is whole.
    pub fn is_complete(&self) -> bool {
        self.stopped
    }

    /// One event (its `data`, which names its type) as fragments.
    pub fn push(&mut self, data: &str) -> Result<Vec<Fragment>, LlmError> {
        let event: Value = serde_json::from_str(data).map_err(|e| {
            LlmError::Protocol(format!(
                "malformed event ({e}): {}",
                data.chars().take(200).collect::<String>()
            ))
        })?;
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let mut out = Vec::new();
        match kind {
            "message_start" => {
                if let Some(usage) = event.pointer("/message/usage") {
                    self.read_usage(usage);
                }
            }
            "content_block_start" => {
                let block = event.get("content_block").unwrap_or(&Value::Null);
                let text = |k: &str| {
                    block
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                let started = match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let t = text("text");
                        if !t.is_empty() {
                            out.push(Fragment::Text(t));
                        }
                        Block::Text
                    }
                    Some("tool_use") => {
                        let call = self.calls;
                        self.calls += 1;
                        out.push(Fragment::ToolCall(ToolCallFragment {
                            index: Some(call),
                            id: Some(text("id")),
                            name: Some(text("name")),
                            arguments: None,
                        }));
                        Block::ToolUse {
                            call,
                            got_input: false,
                        }
                    }
                    Some("thinking") => {
                        let t = text("thinking");
                        if !t.is_empty() {
                            out.push(Fragment::Reasoning(t.clone()));
                        }
                        Block::Thinking {
                            text: t,
                            signature: text("signature"),
                        }
                    }
                    Some("redacted_thinking") => Block::Redacted { data: text("data") },
                    // Server tools and future block types: nothing triage acts on.
                    _ => return Ok(out),
                };
                self.blocks.insert(index, started);
            }
            "content_block_delta" => {
                let delta = event.get("delta").unwrap_or(&Value::Null);
                let field = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or("");
                match (self.blocks.get_mut(&index), field("type")) {
                    (Some(Block::Text), "text_delta") => {
                        let t = field("text");
                        if !t.is_empty() {
                            out.push(Fragment::Text(t.to_owned()));
                        }
                    }
                    (Some(Block::ToolUse { call, got_input }), "input_json_delta") => {
                        *got_input = true;
                        out.push(Fragment::ToolCall(ToolCallFragment {
                            index: Some(*call),
                            arguments: Some(field("partial_json").to_owned()),
                            ..ToolCallFragment::default()
                        }));
                    }
                    (Some(Block::Thinking { text, .. }), "thinking_delta") => {
                        let t = field("thinking");
                        text.push_str(t);
                        out.push(Fragment::Reasoning(t.to_owned()));
                    }
                    (Some(Block::Thinking { signature, .. }), "signature_delta") => {
                        signature.push_str(field("signature"));
                        // Signatures are a few hundred bytes; a server that never stops one
                        // must not grow it without bound (the text is capped as reasoning).
                        if signature.len() > MAX_SIGNATURE_BYTES {
                            return Err(LlmError::Oversized(format!(
                                "a thinking signature exceeded {MAX_SIGNATURE_BYTES} bytes"
                            )));
                        }
                    }
                    (None, _) => {
                        return Err(LlmError::Protocol(format!(
                            "a delta for content block {index}, which was never started"
                        )));
                    }
                    _ => {}
                }
            }
            "content_block_stop" => match self.blocks.remove(&index) {
                Some(Block::ToolUse {
                    call,
                    got_input: false,
                }) => out.push(Fragment::ToolCall(ToolCallFragment {
                    index: Some(call),
                    arguments: Some("{}".into()),
                    ..ToolCallFragment::default()
                })),
                Some(Block::Thinking { text, signature }) => {
                    out.push(Fragment::ThinkingBlock(json!({
                        "type": "thinking", "thinking": text, "signature": signature,
                    })));
                }
                Some(Block::Redacted { data }) => out.push(Fragment::ThinkingBlock(
                    json!({"type": "redacted_thinking", "data": data}),
                )),
                _ => {}
            },
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = event.get("usage") {
                    self.read_usage(usage);
                }
            }
            "message_stop" => {
                self.stopped = true;
                out.push(Fragment::Usage(self.usage()));
                out.push(Fragment::Finish(finish_reason(
                    self.stop_reason.as_deref().unwrap_or("end_turn"),
                )));
            }
            "error" => return Err(stream_error(&event)),
            _ => {}
        }
        Ok(out)
    }

    /// Usage figures as they arrive: `message_start` has the input, `message_delta` the
    /// output so far (and, on newer API versions, the input again).
    fn read_usage(&mut self, usage: &Value) {
        let get = |k: &str| usage.get(k).and_then(Value::as_u64);
        if let Some(n) = get("input_tokens") {
            self.input_tokens = n;
        }
        if let Some(n) = get("cache_read_input_tokens") {
            self.cache_read = n;
        }
        if let Some(n) = get("cache_creation_input_tokens") {
            self.cache_creation = n;
        }
        if let Some(n) = get("output_tokens") {
            self.output_tokens = n;
        }
    }

    /// Anthropic's `input_tokens` excludes cached tokens; our prompt counts all of them.
    fn usage(&self) -> Usage {
        let prompt = self.input_tokens + self.cache_read + self.cache_creation;
        Usage {
            prompt_tokens: prompt,
            completion_tokens: self.output_tokens,
            total_tokens: prompt + self.output_tokens,
            cache_read_input_tokens: self.cache_read,
            cache_creation_input_tokens: self.cache_creation,
        }
    }
}

impl AnswerReader for AnswerStream {
    type Event = String;

    fn events(
        transport: &Transport,
        response: reqwest::Response,
    ) -> futures::stream::BoxStream<'static, Result<String, LlmError>> {
        transport.sse_data(response)
    }

    fn push(&mut self, data: String) -> Result<Vec<Fragment>, LlmError> {
        if data.is_empty() {
            return Ok(Vec::new());
        }
        AnswerStream::push(self, &data)
    }

    /// `message_stop` ends the answer; nothing after it is read.
    fn is_done(&self) -> bool {
        self.is_complete()
    }

    fn finish(self) -> Option<Vec<Fragment>> {
        self.stopped.then(Vec::new)
    }
}

/// Anthropic's stop reasons under the OpenAI names the rest of triage reads.
fn finish_reason(stop_reason: &str) -> String {
    match stop_reason {
        "tool_use" => "tool_calls",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "refusal" => "content_filter",
        // end_turn, stop_sequence, pause_turn
        _ => "stop",
    }
    .to_owned()
}

/// An `error` event: the call failed after it started; the provider's message is kept.
fn stream_error(event: &Value) -> LlmError {
    let kind = event
        .pointer("/error/type")
        .and_then(Value::as_str)
        .unwrap_or("error");
    let message = event
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("the provider reported an error");
    let message = format!("{kind}: {message}");
    match kind {
        "rate_limit_error" => LlmError::RateLimited {
            message,
            retry_after: None,
        },
        _ => LlmError::Upstream {
            status: match kind {
                "overloaded_error" => 529,
                "invalid_request_error" => 400,
                _ => 500,
            },
            message,
            retry_after: None,
        },
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
