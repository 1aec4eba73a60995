//! A conversation's log: each domain event of its runs as a stored event (the `/api/chat`
//! frame names, without the history those frames carry there), and the fold that rebuilds the
//! run state's messages from the log after a crash.

use chrono::Utc;
use serde_json::{Value, json};

use crate::agent::{AgentEvent, RunMasker, RunState, StopReason};
use crate::holmes::frames;
use crate::store::NewEvent;
use crate::wire::{Message, StreamEvent};

pub const USER: &str = "user";
pub const AGENT: &str = "agent";
pub const ENVIRONMENT: &str = "environment";

pub fn new_event(kind: &str, source: &str, payload: Value) -> NewEvent {
    NewEvent {
        kind: kind.to_owned(),
        source: source.to_owned(),
        timestamp: Utc::now(),
        payload,
    }
}

pub fn state_update(status: &str, reason: Option<&str>) -> NewEvent {
    let mut payload = json!({"execution_status": status});
    if let Some(reason) = reason {
        payload["reason"] = Value::String(reason.to_owned());
    }
    new_event("conversation_state_update", ENVIRONMENT, payload)
}

/// The stored form of a run's event; `None` for what is not kept (text deltas).
pub fn stored(event: AgentEvent) -> Option<NewEvent> {
    let event = match event {
        AgentEvent::MessageAdded { index, message } => {
            let source = source_of(&message);
            return Some(new_event(
                "message",
                source,
                json!({"index": index, "message": *message}),
            ));
        }
        AgentEvent::MessageReplaced { index, message } => {
            let source = source_of(&message);
            return Some(new_event(
                "message_replaced",
                source,
                json!({"index": index, "message": *message}),
            ));
        }
        AgentEvent::TextDelta(_) => return None,
        other => other,
    };
    let event = match frames::frame(event) {
        Ok(Some(frame)) => return Some(from_frame(&frame)),
        Ok(None) => return None,
        Err(event) => event,
    };
    Some(match event {
        AgentEvent::Paused { pending } => new_event(
            "approval_required",
            AGENT,
            json!({
                "requires_approval": true,
                "pending_approvals": frames::pending_approvals(&pending),
                "pending_frontend_tool_calls": frames::pending_frontend(&pending),
            }),
        ),
        AgentEvent::Finished(answer) => {
            let mut metadata = frames::metadata(&answer.usage);
            metadata.finish_reason = answer.finish_reason;
            metadata.response_format = answer.format;
            metadata.model_fallbacks = answer.fallbacks;
            new_event(
                "ai_answer_end",
                AGENT,
                json!({"analysis": answer.text, "metadata": metadata}),
            )
        }
        AgentEvent::Failed(error) => new_event(
            "error",
            ENVIRONMENT,
            serde_json::to_value(crate::wire::events::ErrorEvent::new(
                error.message,
                error.kind == crate::agent::RunErrorKind::RateLimited,
            ))
            .unwrap_or(Value::Null),
        ),
        AgentEvent::Stopped(StopReason::Interrupted { cut }) => {
            new_event("interrupted", ENVIRONMENT, json!({"cut_tool_calls": cut}))
        }
        AgentEvent::Stopped(StopReason::Paused) => new_event("paused", ENVIRONMENT, json!({})),
        AgentEvent::Stopped(StopReason::Stuck { pattern }) => {
            new_event("stuck", ENVIRONMENT, json!({"pattern": pattern}))
        }
        _ => return None,
    })
}

fn from_frame(frame: &StreamEvent) -> NewEvent {
    let source = match frame {
        StreamEvent::ToolCallingResult(_)
        | StreamEvent::TokenCount(_)
        | StreamEvent::CompactionStart(_)
        | StreamEvent::Compacted(_)
        | StreamEvent::ModelFallback(_)
        | StreamEvent::Error(_) => ENVIRONMENT,
        _ => AGENT,
    };
    let mut data = Vec::new();
    let payload = match frame.write_data(&mut data) {
        Ok(()) => serde_json::from_slice(&data).unwrap_or(Value::Null),
        Err(_) => Value::Null,
    };
    new_event(frame.name(), source, payload)
}

fn source_of(message: &Message) -> &'static str {
    match message.role.as_str() {
        "user" => USER,
        "tool" => ENVIRONMENT,
        _ => AGENT,
    }
}

/// A `message` event for a message added at the end of the history outside a run (a user
/// message sent while idle): no index, folded as a push. Masked as a run's events are.
pub fn message_pushed(message: Option<&Message>, masker: &RunMasker) -> Option<NewEvent> {
    let message = message?;
    let mut payload = json!({"message": message});
    masker.mask(&mut payload);
    Some(new_event("message", source_of(message), payload))
}

/// Applies a stored event to a state's messages (what a crash may have left unsaved, or the
/// history up to an event, for a fork).
pub fn fold(state: &mut RunState, kind: &str, payload: &Value) {
    let message = || serde_json::from_value::<Message>(payload["message"].clone()).ok();
    let index = payload["index"].as_u64().map(|i| i as usize);
    match kind {
        "message" => {
            if let Some(message) = message() {
                let at = index.map_or(state.messages.len(), |i| i.min(state.messages.len()));
                state.messages.insert(at, message);
            }
        }
        "message_replaced" => {
            if let (Some(index), Some(message)) = (index, message())
                && let Some(slot) = state.messages.get_mut(index)
            {
                *slot = message;
            }
        }
        "conversation_history_compacted" => {
            if let Ok(messages) = serde_json::from_value(payload["messages"].clone()) {
                state.messages = messages;
            }
        }
        _ => {}
    }
}
