//! What the fake answers: one scripted [`Step`] per request.

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

/// Token usage reported in the final usage chunk / non-streaming `usage`.
#[derive(Clone, Copy, Debug)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// One tool call requested by the fake model.
#[derive(Clone, Debug)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One scripted response; each incoming request consumes the next step.
#[derive(Clone, Debug)]
pub enum Step {
    /// Streams `content` (and optional reasoning as `reasoning_content` deltas)
    /// split into several deltas (by word), finish_reason "stop".
    Text {
        content: String,
        reasoning: Option<String>,
        usage: Option<Usage>,
    },
    /// Optional content first, then the tool calls as deltas (header chunk with
    /// index/id/type/name and empty arguments, then >= 2-3 argument pieces).
    /// finish_reason "tool_calls".
    ToolCalls {
        content: Option<String>,
        calls: Vec<ToolCall>,
        usage: Option<Usage>,
    },
    /// A non-streaming HTTP error with body
    /// `{"error":{"message":..,"type":..,"param":null,"code":..}}`.
    Error {
        status: u16,
        message: String,
        retry_after: Option<String>,
    },
    /// Accept the request, never send response headers.
    HangBeforeHeaders,
    /// Send headers and the first content chunk, then stall forever.
    HangAfterFirstChunk { first: String },
    /// Send the content chunks of `content`, then end the body without a
    /// finish_reason chunk and without `data: [DONE]`.
    CutMidStream { content: String },
    /// Send the content chunks of `content`, then an error inside the stream (OpenAI: a chunk
    /// `{"error":{…}}`; Anthropic: an `error` event of type `kind`, e.g. `overloaded_error`).
    /// Non-streaming requests get the error as an HTTP 500.
    FailMidStream {
        content: String,
        kind: String,
        message: String,
    },
    /// `body` verbatim (status 200, text/event-stream): malformed streams, invalid UTF-8, or
    /// replies rendered once and served many times (the load benchmark).
    Raw { body: Bytes },
    /// One content delta every `interval`, `chunks` times, then finish normally.
    Slow {
        content: String,
        chunks: usize,
        interval: Duration,
    },
    /// The same `piece` as a content delta every `interval`, `times` times, then finish
    /// normally: a long-lived stream that holds no more than one piece.
    Drip {
        piece: String,
        times: usize,
        interval: Duration,
    },
    /// `step`, answered after `before` and with `between_chunks` between its streamed chunks
    /// (the browser tests watch text arrive).
    Paced {
        before: Duration,
        between_chunks: Duration,
        step: Box<Step>,
    },
}

impl Step {
    /// Text with no reasoning, default usage.
    pub fn text(s: &str) -> Step {
        Step::Text {
            content: s.to_string(),
            reasoning: None,
            usage: None,
        }
    }

    /// Text preceded by reasoning deltas, default usage.
    pub fn text_with_reasoning(reasoning: &str, s: &str) -> Step {
        Step::Text {
            content: s.to_string(),
            reasoning: Some(reasoning.to_string()),
            usage: None,
        }
    }

    /// One tool call, arguments = `args.to_string()`.
    pub fn tool(id: &str, name: &str, args: Value) -> Step {
        Step::tools(vec![(id, name, args)])
    }

    /// Several tool calls in one assistant turn.
    pub fn tools(calls: Vec<(&str, &str, Value)>) -> Step {
        Step::ToolCalls {
            content: None,
            calls: calls
                .into_iter()
                .map(|(id, name, args)| ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments: args.to_string(),
                })
                .collect(),
            usage: None,
        }
    }

    /// A non-streaming HTTP error without Retry-After.
    pub fn error(status: u16, message: &str) -> Step {
        Step::Error {
            status,
            message: message.to_string(),
            retry_after: None,
        }
    }
}
