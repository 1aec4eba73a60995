//! A run as a Responses object, or as Responses events: `response.created`, then output items
//! as they happen — tool activity as a reasoning item with its summary text, the answer as a
//! message item with `response.output_text.delta` events — then `response.completed` with the
//! whole response and usage. A failure after the first event is an `error` event that ends
//! the stream.

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use super::activity;
use super::chat_render::{stopped, stopped_without_answer};
use super::error::OpenAiError;
use super::sse::event_frame;
use super::usage::ResponsesUsage;
use crate::agent::{AgentEvent, PendingCall, Run, RunError, RunErrorKind};
use crate::wire::response::Costs;

pub struct ResponsesAnswer {
    run: Run,
    id: String,
    created_at: i64,
    model: String,
    instructions: Option<String>,
}

/// One output item being written.
enum Open {
    None,
    Reasoning { id: String, text: String },
    Message { id: String, text: String },
}

impl ResponsesAnswer {
    pub fn new(run: Run, model: String, instructions: Option<String>) -> ResponsesAnswer {
        ResponsesAnswer {
            run,
            id: format!("resp_{}", uuid::Uuid::new_v4().simple()),
            created_at: chrono::Utc::now().timestamp(),
            model,
            instructions,
        }
    }

    /// The response object at a point of the run.
    fn response(&self, status: &str, output: &[Value], usage: Option<&Costs>) -> Value {
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": self.model,
            "output": output,
            "usage": usage.map(ResponsesUsage::of),
            "error": null,
            "incomplete_details": null,
            "instructions": self.instructions,
            "metadata": {},
            "parallel_tool_calls": true,
            "temperature": null,
            "top_p": null,
            "tool_choice": "auto",
            "tools": [],
            "text": {"format": {"type": "text"}},
            "store": false,
            "previous_response_id": null,
        })
    }

    pub async fn collect(mut self) -> Result<Value, OpenAiError> {
        let mut reasoning = String::new();
        let mut totals = Costs::default();
        while let Some(event) = self.run.next().await {
            if let Some(usage) = activity::usage(&event) {
                totals = usage.totals;
            }
            if let Some(text) = activity::describe(&event) {
                reasoning.push_str(&text);
            }
            let mut output = Vec::new();
            if !reasoning.is_empty() {
                output.push(reasoning_item(&item_id("rs"), &reasoning));
            }
            match event {
                AgentEvent::Finished(answer) => {
                    output.push(message_item(&item_id("msg"), &answer.text, "completed"));
                }
                AgentEvent::Paused { pending } => output.extend(calls(&pending)?),
                AgentEvent::Failed(e) => return Err(e.into()),
                AgentEvent::Stopped(reason) => return Err(stopped(reason)),
                _ => continue,
            }
            return Ok(self.response("completed", &output, Some(&totals)));
        }
        Err(stopped_without_answer())
    }

    pub fn stream(mut self) -> impl Stream<Item = Bytes> + Send + 'static {
        async_stream::stream! {
            let mut seq = 0u64;
            let mut frame = move |name: &str, mut body: Value| {
                body["type"] = json!(name);
                body["sequence_number"] = json!(seq);
                seq += 1;
                event_frame(name, &body)
            };
            let started = self.response("in_progress", &[], None);
            yield frame("response.created", json!({"response": started}));
            yield frame("response.in_progress", json!({"response": started}));
            let mut output: Vec<Value> = Vec::new();
            let mut open = Open::None;
            let mut totals = Costs::default();
            while let Some(event) = self.run.next().await {
                if let Some(usage) = activity::usage(&event) {
                    totals = usage.totals;
                }
                if let Some(text) = activity::describe(&event) {
                    if !matches!(open, Open::Reasoning { .. }) {
                        for f in close(&mut open, &mut output, &mut frame) { yield f; }
                        let id = item_id("rs");
                        let index = output.len();
                        yield frame("response.output_item.added", json!({"output_index": index, "item": {"type": "reasoning", "id": id, "summary": []}}));
                        yield frame("response.reasoning_summary_part.added", json!({"item_id": id, "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}));
                        open = Open::Reasoning { id, text: String::new() };
                    }
                    if let Open::Reasoning { id, text: all } = &mut open {
                        all.push_str(&text);
                        let id = id.clone();
                        yield frame("response.reasoning_summary_text.delta", json!({"item_id": id, "output_index": output.len(), "summary_index": 0, "delta": text}));
                    }
                }
                let answer = match event {
                    AgentEvent::TextDelta(piece) if !piece.is_empty() => {
                        for f in open_message(&mut open, &mut output, &mut frame) { yield f; }
                        if let Open::Message { id, text } = &mut open {
                            text.push_str(&piece);
                            let id = id.clone();
                            yield frame("response.output_text.delta", json!({"item_id": id, "output_index": output.len(), "content_index": 0, "delta": piece, "logprobs": []}));
                        }
                        continue;
                    }
                    AgentEvent::Finished(answer) => answer,
                    AgentEvent::Paused { pending } => {
                        for f in close(&mut open, &mut output, &mut frame) { yield f; }
                        match calls(&pending) {
                            Ok(items) => for item in items {
                                let index = output.len();
                                yield frame("response.output_item.added", json!({"output_index": index, "item": item}));
                                yield frame("response.function_call_arguments.done", json!({"item_id": item["id"], "output_index": index, "arguments": item["arguments"]}));
                                yield frame("response.output_item.done", json!({"output_index": index, "item": item}));
                                output.push(item);
                            },
                            Err(e) => {
                                yield frame("error", error_event(&e));
                                return;
                            }
                        }
                        let done = self.response("completed", &output, Some(&totals));
                        yield frame("response.completed", json!({"response": done}));
                        return;
                    }
                    AgentEvent::Failed(e) => {
                        yield frame("error", error_event(&e.into()));
                        return;
                    }
                    AgentEvent::Stopped(reason) => {
                        yield frame("error", error_event(&stopped(reason)));
                        return;
                    }
                    _ => continue,
                };
                // The answer went out as deltas, or (structured output) goes out whole now.
                let streamed = matches!(&open, Open::Message { .. });
                if !streamed && !answer.text.is_empty() {
                    for f in open_message(&mut open, &mut output, &mut frame) { yield f; }
                    if let Open::Message { id, text } = &mut open {
                        text.push_str(&answer.text);
                        let id = id.clone();
                        yield frame("response.output_text.delta", json!({"item_id": id, "output_index": output.len(), "content_index": 0, "delta": answer.text, "logprobs": []}));
                    }
                }
                for f in close(&mut open, &mut output, &mut frame) { yield f; }
                let done = self.response("completed", &output, Some(&totals));
                yield frame("response.completed", json!({"response": done}));
                return;
            }
            yield frame("error", error_event(&stopped_without_answer()));
        }
    }
}

/// Opens a message item unless one is open (a reasoning item is closed first).
fn open_message(
    open: &mut Open,
    output: &mut Vec<Value>,
    frame: &mut impl FnMut(&str, Value) -> Bytes,
) -> Vec<Bytes> {
    if matches!(open, Open::Message { .. }) {
        return Vec::new();
    }
    let mut frames = close(open, output, frame);
    let id = item_id("msg");
    let index = output.len();
    frames.push(frame(
        "response.output_item.added",
        json!({"output_index": index, "item": {"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []}}),
    ));
    frames.push(frame(
        "response.content_part.added",
        json!({"item_id": id, "output_index": index, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
    ));
    *open = Open::Message {
        id,
        text: String::new(),
    };
    frames
}

/// Closes the open item: its `.done` events, and the item joins the output.
fn close(
    open: &mut Open,
    output: &mut Vec<Value>,
    frame: &mut impl FnMut(&str, Value) -> Bytes,
) -> Vec<Bytes> {
    let index = output.len();
    match std::mem::replace(open, Open::None) {
        Open::None => Vec::new(),
        Open::Reasoning { id, text } => {
            let item = reasoning_item(&id, &text);
            let frames = vec![
                frame(
                    "response.reasoning_summary_text.done",
                    json!({"item_id": id, "output_index": index, "summary_index": 0, "text": text}),
                ),
                frame(
                    "response.reasoning_summary_part.done",
                    json!({"item_id": id, "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": text}}),
                ),
                frame(
                    "response.output_item.done",
                    json!({"output_index": index, "item": item}),
                ),
            ];
            output.push(item);
            frames
        }
        Open::Message { id, text } => {
            let item = message_item(&id, &text, "completed");
            let frames = vec![
                frame(
                    "response.output_text.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
                ),
                frame(
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "part": {"type": "output_text", "text": text, "annotations": []}}),
                ),
                frame(
                    "response.output_item.done",
                    json!({"output_index": index, "item": item}),
                ),
            ];
            output.push(item);
            frames
        }
    }
}

fn item_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

fn reasoning_item(id: &str, text: &str) -> Value {
    json!({"type": "reasoning", "id": id, "summary": [{"type": "summary_text", "text": text}]})
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({
        "type": "message",
        "id": id,
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    })
}

/// The client's tool calls the run ended on, as `function_call` items.
fn calls(pending: &[PendingCall]) -> Result<Vec<Value>, OpenAiError> {
    if pending.iter().any(PendingCall::is_approval) {
        return Err(RunError::new(RunErrorKind::Internal, "the run paused for an approval").into());
    }
    Ok(pending
        .iter()
        .map(|p| {
            json!({
                "type": "function_call",
                "id": item_id("fc"),
                "call_id": p.call.id,
                "name": p.call.function.name,
                "arguments": p.call.function.arguments,
                "status": "completed",
            })
        })
        .collect())
}

fn error_event(e: &OpenAiError) -> Value {
    let body = serde_json::to_value(e.body()).unwrap_or(Value::Null);
    let error = &body["error"];
    json!({"code": error["code"], "message": error["message"], "param": error["param"]})
}
