//! ConverseStream's answer: `application/vnd.amazon.eventstream` frames (decoded, CRCs
//! checked, by aws-smithy-eventstream), each an event named by its `:event-type` header with a
//! JSON payload — `messageStart`, `contentBlockStart` (a tool use's id and name),
//! `contentBlockDelta` (text, tool input JSON, reasoning text, its signature or redacted
//! content), `contentBlockStop`, `messageStop` (the stop reason) and `metadata` (usage with
//! cache reads and writes) — or an exception (`:message-type: exception`) that ends the answer.

use std::collections::HashMap;

use aws_smithy_types::event_stream::{HeaderValue, Message};
use bytes::{Buf, BytesMut};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};

use crate::llm::Transport;
use crate::llm::answer::AnswerReader;
use crate::llm::error::LlmError;
use crate::llm::provider::{Fragment, ToolCallFragment};
use crate::llm::transport::MAX_EVENT_BYTES;
use crate::wire::response::Usage;

/// Prelude (total length, headers length, prelude CRC) before a frame's headers.
const PRELUDE_BYTES: usize = 12;
const MAX_SIGNATURE_BYTES: usize = 64 * 1024;
/// Most tool uses plus open content blocks in one answer (a few, or dozens of parallel
/// calls): each holds memory that an empty name or no text hides from the answer cap.
const MAX_BLOCKS: usize = 1024;
/// Most of an exception's message kept: one sentence or a few, never megabytes.
const MAX_MESSAGE_CHARS: usize = 2000;

enum Block {
    Text,
    ToolUse { call: usize, got_input: bool },
    Reasoning { text: String, signature: String },
    Redacted { data: String },
}

#[derive(Default)]
pub struct AnswerStream {
    blocks: HashMap<u64, Block>,
    calls: usize,
    stop_reason: Option<String>,
    usage: Option<Usage>,
}

/// The body as eventstream messages, each bounded in size, failing when it stalls longer than
/// the idle timeout.
fn frames(
    transport: &Transport,
    response: reqwest::Response,
) -> BoxStream<'static, Result<Message, LlmError>> {
    let idle = transport.timeouts().idle;
    let body = response.bytes_stream();
    Box::pin(async_stream::try_stream! {
        let mut body = std::pin::pin!(body);
        let mut buffer = BytesMut::new();
        loop {
            // Whole frames first: a frame says its length in its first four bytes.
            while buffer.len() >= PRELUDE_BYTES {
                let total = (&buffer[..4]).get_u32() as usize;
                if !(PRELUDE_BYTES + 4..=MAX_EVENT_BYTES).contains(&total) {
                    Err(LlmError::Oversized(format!(
                        "an eventstream frame of {total} bytes (frames of {} to {MAX_EVENT_BYTES} bytes are read)",
                        PRELUDE_BYTES + 4
                    )))?;
                }
                if buffer.len() < total {
                    break;
                }
                let frame = buffer.split_to(total).freeze();
                let message = aws_smithy_eventstream::frame::read_message_from(frame)
                    .map_err(|e| LlmError::Protocol(format!("unreadable eventstream frame: {e}")))?;
                yield message;
            }
            let next = tokio::time::timeout(idle, body.next()).await.map_err(|_| {
                LlmError::Timeout(format!(
                    "the stream stalled for {} s (llm.idle_timeout_secs)",
                    idle.as_secs_f64()
                ))
            })?;
            match next {
                Some(chunk) => {
                    let chunk = chunk.map_err(|e| {
                        LlmError::Protocol(format!("unreadable stream: {}", crate::llm::error::error_chain(&e)))
                    })?;
                    buffer.extend_from_slice(&chunk);
                }
                None if buffer.is_empty() => break,
                None => Err(LlmError::Protocol("the stream ended inside a frame".into()))?,
            }
        }
    })
}

fn header<'m>(message: &'m Message, name: &str) -> Option<&'m str> {
    message
        .headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| match h.value() {
            HeaderValue::String(s) => Some(s.as_str()),
            _ => None,
        })
}

impl AnswerReader for AnswerStream {
    type Event = Message;

    fn events(
        transport: &Transport,
        response: reqwest::Response,
    ) -> BoxStream<'static, Result<Message, LlmError>> {
        frames(transport, response)
    }

    fn push(&mut self, message: Message) -> Result<Vec<Fragment>, LlmError> {
        let payload = || -> Result<Value, LlmError> {
            serde_json::from_slice(message.payload()).map_err(|e| {
                LlmError::Protocol(format!(
                    "malformed event payload ({e}): {}",
                    String::from_utf8_lossy(message.payload())
                        .chars()
                        .take(200)
                        .collect::<String>()
                ))
            })
        };
        match header(&message, ":message-type") {
            Some("event") => {
                let out = self.event(header(&message, ":event-type").unwrap_or(""), &payload()?)?;
                if self.calls + self.blocks.len() > MAX_BLOCKS {
                    return Err(LlmError::Oversized(format!(
                        "more than {MAX_BLOCKS} content blocks in one answer"
                    )));
                }
                Ok(out)
            }
            Some("exception") => Err(exception(
                header(&message, ":exception-type").unwrap_or("exception"),
                &payload()?,
            )),
            // Its code and message are headers; the payload is empty.
            Some("error") => Err(exception(
                header(&message, ":error-code").unwrap_or("error"),
                &json!({"message": header(&message, ":error-message").unwrap_or("")}),
            )),
            other => Err(LlmError::Protocol(format!(
                "an eventstream message of type {other:?}"
            ))),
        }
    }

    /// `metadata` (usage) follows `messageStop`: the answer is whole once both came.
    fn is_done(&self) -> bool {
        self.stop_reason.is_some() && self.usage.is_some()
    }

    fn finish(self) -> Option<Vec<Fragment>> {
        let reason = self.stop_reason?;
        let mut out: Vec<Fragment> = self.usage.map(Fragment::Usage).into_iter().collect();
        out.push(Fragment::Finish(finish_reason(&reason)));
        Some(out)
    }
}

impl AnswerStream {
    fn event(&mut self, kind: &str, event: &Value) -> Result<Vec<Fragment>, LlmError> {
        let index = event
            .get("contentBlockIndex")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
        let mut out = Vec::new();
        match kind {
            "contentBlockStart" => {
                if let Some(tool_use) = event.pointer("/start/toolUse") {
                    let call = self.calls;
                    self.calls += 1;
                    out.push(Fragment::ToolCall(ToolCallFragment {
                        index: Some(call),
                        id: Some(text(tool_use.get("toolUseId"))),
                        name: Some(text(tool_use.get("name"))),
                        arguments: None,
                    }));
                    self.blocks.insert(
                        index,
                        Block::ToolUse {
                            call,
                            got_input: false,
                        },
                    );
                }
            }
            "contentBlockDelta" => {
                let delta = event.get("delta").unwrap_or(&Value::Null);
                // Text and reasoning blocks start with their first delta.
                if let Some(t) = delta.get("text").and_then(Value::as_str) {
                    self.blocks.entry(index).or_insert(Block::Text);
                    if !t.is_empty() {
                        out.push(Fragment::Text(t.to_owned()));
                    }
                } else if let Some(input) = delta.pointer("/toolUse/input") {
                    let Some(Block::ToolUse { call, got_input }) = self.blocks.get_mut(&index)
                    else {
                        return Err(LlmError::Protocol(format!(
                            "tool input for content block {index}, which started no tool use"
                        )));
                    };
                    *got_input = true;
                    out.push(Fragment::ToolCall(ToolCallFragment {
                        index: Some(*call),
                        arguments: Some(text(Some(input))),
                        ..ToolCallFragment::default()
                    }));
                } else if let Some(reasoning) = delta.get("reasoningContent") {
                    if let Some(data) = reasoning.get("redactedContent").and_then(Value::as_str) {
                        let block = self.blocks.entry(index).or_insert(Block::Redacted {
                            data: String::new(),
                        });
                        if let Block::Redacted { data: all } = block {
                            all.push_str(data);
                            // Held until the block stops, where the answer cap cannot see it;
                            // Anthropic's API sends it in one event, as large at most.
                            if all.len() > MAX_EVENT_BYTES {
                                return Err(LlmError::Oversized(format!(
                                    "redacted reasoning exceeded {MAX_EVENT_BYTES} bytes"
                                )));
                            }
                        }
                        return Ok(out);
                    }
                    let block = self.blocks.entry(index).or_insert(Block::Reasoning {
                        text: String::new(),
                        signature: String::new(),
                    });
                    let Block::Reasoning {
                        text: all,
                        signature,
                    } = block
                    else {
                        return Ok(out);
                    };
                    if let Some(t) = reasoning.get("text").and_then(Value::as_str) {
                        all.push_str(t);
                        out.push(Fragment::Reasoning(t.to_owned()));
                    }
                    if let Some(s) = reasoning.get("signature").and_then(Value::as_str) {
                        signature.push_str(s);
                        if signature.len() > MAX_SIGNATURE_BYTES {
                            return Err(LlmError::Oversized(format!(
                                "a reasoning signature exceeded {MAX_SIGNATURE_BYTES} bytes"
                            )));
                        }
                    }
                }
            }
            "contentBlockStop" => match self.blocks.remove(&index) {
                Some(Block::ToolUse {
                    call,
                    got_input: false,
                }) => {
                    out.push(Fragment::ToolCall(ToolCallFragment {
                        index: Some(call),
                        arguments: Some("{}".into()),
                        ..ToolCallFragment::default()
                    }));
                }
                // Kept in Anthropic's shape, which the history carries for Claude everywhere.
                Some(Block::Reasoning { text, signature }) => out.push(Fragment::ThinkingBlock(
                    json!({"type": "thinking", "thinking": text, "signature": signature}),
                )),
                Some(Block::Redacted { data }) => out.push(Fragment::ThinkingBlock(
                    json!({"type": "redacted_thinking", "data": data}),
                )),
                _ => {}
            },
            "messageStop" => {
                self.stop_reason = Some(text(event.get("stopReason")));
            }
            "metadata" => {
                let usage = event.get("usage").unwrap_or(&Value::Null);
                let get = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
                let (cache_read, cache_write) =
                    (get("cacheReadInputTokens"), get("cacheWriteInputTokens"));
                // Like Anthropic's, Bedrock's inputTokens leaves out the cached tokens.
                let prompt = get("inputTokens") + cache_read + cache_write;
                let completion = get("outputTokens");
                self.usage = Some(Usage {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    total_tokens: prompt + completion,
                    cache_read_input_tokens: cache_read,
                    cache_creation_input_tokens: cache_write,
                });
            }
            // messageStart and anything newer.
            _ => {}
        }
        Ok(out)
    }
}

/// Converse's stop reasons under the OpenAI names the rest of triage reads.
fn finish_reason(stop_reason: &str) -> String {
    match stop_reason {
        "tool_use" => "tool_calls",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "guardrail_intervened" | "content_filtered" => "content_filter",
        _ => "stop",
    }
    .to_owned()
}

/// An exception frame (or an error response's type): the provider's message kept, throttling
/// and unavailability retryable.
pub fn exception(kind: &str, payload: &Value) -> LlmError {
    let message = payload
        .get("message")
        .or_else(|| payload.get("Message"))
        .and_then(Value::as_str)
        .unwrap_or("the provider reported an error");
    let kind = kind.trim_end_matches("Exception").to_ascii_lowercase();
    // Cut as an HTTP error body's message is (`error::error_message`).
    let message = match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((end, _)) => format!("{kind}: {}…", &message[..end]),
        None => format!("{kind}: {message}"),
    };
    let status = match kind.as_str() {
        "throttling" => {
            return LlmError::RateLimited {
                message,
                retry_after: None,
            };
        }
        "serviceunavailable" => 503,
        "internalserver" | "modelstreamerror" => 500,
        "modeltimeout" => 408,
        "validation" => 400,
        "accessdenied" => 403,
        "resourcenotfound" => 404,
        _ => 500,
    };
    LlmError::Upstream {
        status,
        message,
        retry_after: None,
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
