//! A run as a `chat.completion`, or as `chat.completion.chunk` SSE frames: the answer's text as
//! the model writes it, tool activity as `reasoning_content`, a pause on the client's tools as
//! `tool_calls` with `finish_reason: "tool_calls"`, usage at the end, then `data: [DONE]`. An
//! error after the first frame is an `{"error": …}` frame that ends the stream.

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde::Serialize;

use super::activity;
use super::error::OpenAiError;
use super::sse::{DONE, data_frame};
use super::usage::ChatUsage;
use crate::agent::{AgentEvent, PendingCall, Run, RunError, RunErrorKind, StopReason};
use crate::wire::response::Costs;

pub struct ChatAnswer {
    run: Run,
    id: String,
    created: i64,
    model: String,
}

#[derive(Serialize)]
pub struct ChatCompletion {
    id: String,
    object: &'static str,
    created: i64,
    model: String,
    choices: [Choice; 1],
    usage: ChatUsage,
}

#[derive(Serialize)]
struct Choice {
    index: u32,
    message: AssistantMessage,
    logprobs: Option<()>,
    finish_reason: &'static str,
}

#[derive(Serialize)]
struct AssistantMessage {
    role: &'static str,
    content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<CallOut>,
    refusal: Option<()>,
}

#[derive(Serialize)]
struct CallOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<usize>,
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionOut,
}

#[derive(Serialize)]
struct FunctionOut {
    name: String,
    arguments: String,
}

#[derive(Serialize)]
struct Chunk<'a> {
    id: &'a str,
    object: &'static str,
    created: i64,
    model: &'a str,
    choices: Vec<ChunkChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<ChatUsage>,
}

#[derive(Serialize)]
struct ChunkChoice {
    index: u32,
    delta: Delta,
    logprobs: Option<()>,
    finish_reason: Option<&'static str>,
}

#[derive(Serialize, Default)]
struct Delta {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<CallOut>>,
}

/// What ended a run, for either rendering.
enum End {
    Answer {
        text: String,
        finish_reason: &'static str,
    },
    ClientTools(Vec<PendingCall>),
    Failed(OpenAiError),
}

impl ChatAnswer {
    pub fn new(run: Run, model: String) -> ChatAnswer {
        ChatAnswer {
            run,
            id: format!("chatcmpl-{}", uuid::Uuid::new_v4().simple()),
            created: chrono::Utc::now().timestamp(),
            model,
        }
    }

    /// The whole answer, or the error that ended the run.
    pub async fn collect(mut self) -> Result<ChatCompletion, OpenAiError> {
        let mut reasoning = String::new();
        let mut totals = Costs::default();
        let mut thought = None;
        while let Some(event) = self.run.next().await {
            if let Some(usage) = activity::usage(&event) {
                totals = usage.totals;
            }
            if let Some(text) = activity::describe(&event) {
                reasoning.push_str(&text);
            }
            if let AgentEvent::Thought { content, .. } = &event {
                thought.clone_from(content);
            }
            let Some(end) = end_of(event) else {
                continue;
            };
            let (content, finish_reason, calls) = match end {
                End::Answer {
                    text,
                    finish_reason,
                } => (Some(text), finish_reason, Vec::new()),
                End::ClientTools(calls) => (thought.take(), "tool_calls", calls_out(&calls, false)),
                End::Failed(e) => return Err(e),
            };
            return Ok(ChatCompletion {
                id: self.id,
                object: "chat.completion",
                created: self.created,
                model: self.model,
                choices: [Choice {
                    index: 0,
                    message: AssistantMessage {
                        role: "assistant",
                        content,
                        reasoning_content: (!reasoning.is_empty()).then_some(reasoning),
                        tool_calls: calls,
                        refusal: None,
                    },
                    logprobs: None,
                    finish_reason,
                }],
                usage: ChatUsage::of(&totals),
            });
        }
        Err(stopped_without_answer())
    }

    /// The answer as SSE frames; usage in a last chunk of its own when `include_usage`.
    pub fn stream(mut self, include_usage: bool) -> impl Stream<Item = Bytes> + Send + 'static {
        async_stream::stream! {
            yield self.chunk(Delta { role: Some("assistant"), content: Some(String::new()), ..Delta::default() }, None);
            let mut totals = Costs::default();
            // Whether the model's text of this step went out as deltas; a step that called
            // tools is set apart from the text that follows it.
            let mut streamed = false;
            let mut separate = false;
            while let Some(event) = self.run.next().await {
                if let Some(usage) = activity::usage(&event) {
                    totals = usage.totals;
                }
                if let Some(text) = activity::describe(&event) {
                    yield self.chunk(Delta { reasoning_content: Some(text), ..Delta::default() }, None);
                }
                let end = match event {
                    AgentEvent::TextDelta(piece) if !piece.is_empty() => {
                        let piece = if std::mem::take(&mut separate) { format!("\n\n{piece}") } else { piece };
                        streamed = true;
                        yield self.chunk(Delta { content: Some(piece), ..Delta::default() }, None);
                        continue;
                    }
                    AgentEvent::Thought { .. } => {
                        separate |= std::mem::take(&mut streamed);
                        continue;
                    }
                    other => match end_of(other) {
                        Some(end) => end,
                        None => continue,
                    },
                };
                let finish_reason = match end {
                    End::Answer { text, finish_reason } => {
                        if !streamed && !text.is_empty() {
                            let text = if separate { format!("\n\n{text}") } else { text };
                            yield self.chunk(Delta { content: Some(text), ..Delta::default() }, None);
                        }
                        finish_reason
                    }
                    End::ClientTools(calls) => {
                        yield self.chunk(Delta { tool_calls: Some(calls_out(&calls, true)), ..Delta::default() }, None);
                        "tool_calls"
                    }
                    End::Failed(e) => {
                        yield data_frame(&e.body());
                        return;
                    }
                };
                yield self.chunk(Delta::default(), Some(finish_reason));
                if include_usage {
                    yield data_frame(&Chunk {
                        id: &self.id,
                        object: "chat.completion.chunk",
                        created: self.created,
                        model: &self.model,
                        choices: Vec::new(),
                        usage: Some(ChatUsage::of(&totals)),
                    });
                }
                yield Bytes::from_static(DONE);
                return;
            }
            yield data_frame(&stopped_without_answer().body());
        }
    }

    fn chunk(&self, delta: Delta, finish_reason: Option<&'static str>) -> Bytes {
        data_frame(&Chunk {
            id: &self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: &self.model,
            choices: vec![ChunkChoice {
                index: 0,
                delta,
                logprobs: None,
                finish_reason,
            }],
            usage: None,
        })
    }
}

/// The end a terminal event makes, `None` for the others.
fn end_of(event: AgentEvent) -> Option<End> {
    Some(match event {
        AgentEvent::Finished(answer) => End::Answer {
            text: answer.text,
            finish_reason: match answer.finish_reason.as_deref() {
                Some("length") => "length",
                _ => "stop",
            },
        },
        AgentEvent::Paused { pending } => {
            if pending.iter().any(PendingCall::is_approval) {
                // Approvals are refused on this door: a pause on one is a bug of ours.
                return Some(End::Failed(
                    RunError::new(RunErrorKind::Internal, "the run paused for an approval").into(),
                ));
            }
            End::ClientTools(pending)
        }
        AgentEvent::Failed(error) => End::Failed(error.into()),
        AgentEvent::Stopped(reason) => End::Failed(stopped(reason)),
        _ => return None,
    })
}

fn calls_out(pending: &[PendingCall], indexed: bool) -> Vec<CallOut> {
    pending
        .iter()
        .enumerate()
        .map(|(i, p)| CallOut {
            index: indexed.then_some(i),
            id: p.call.id.clone(),
            kind: "function",
            function: FunctionOut {
                name: p.call.function.name.clone(),
                arguments: p.call.function.arguments.clone(),
            },
        })
        .collect()
}

pub(super) fn stopped(reason: StopReason) -> OpenAiError {
    RunError::new(
        RunErrorKind::Internal,
        format!("the run was stopped: {reason:?}"),
    )
    .into()
}

pub(super) fn stopped_without_answer() -> OpenAiError {
    RunError::new(
        RunErrorKind::Internal,
        "the agent stopped without an answer",
    )
    .into()
}
