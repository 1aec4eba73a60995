//! A conversation's log: each domain event of its runs as a stored event (the `/api/chat`
//! frame names, without the history those frames carry there), and the fold that rebuilds the
//! run state's messages from the log after a crash.

use chrono::Utc;
use serde_json::{Value, json};

use crate::agent::{AgentEvent, RunMasker, RunState, StopReason};
use crate::conversation_domain::{ConversationStatus, EventKind, StatusChange};
use crate::holmes::frames;
use crate::store::NewEvent;
use crate::wire::{Message, StreamEvent};

pub const USER: &str = "user";
pub const AGENT: &str = "agent";
pub const ENVIRONMENT: &str = "environment";

pub fn new_event(kind: EventKind, source: &str, payload: Value) -> NewEvent {
    NewEvent {
        kind,
        source: source.to_owned(),
        timestamp: Utc::now(),
        payload,
        status: None,
    }
}

/// A status change's event; the store is handed the change typed beside its payload.
pub fn state_update(status: ConversationStatus, reason: Option<&str>) -> NewEvent {
    let change = StatusChange::new(status, reason);
    NewEvent {
        status: Some(change.clone()),
        ..new_event(
            EventKind::ConversationStateUpdate,
            ENVIRONMENT,
            change.payload(),
        )
    }
}

/// The stored form of a run's event; `None` for what is not kept (text deltas).
pub fn stored(event: AgentEvent) -> Option<NewEvent> {
    let event = match event {
        AgentEvent::MessageAdded { index, message } => {
            let source = source_of(&message);
            return Some(new_event(
                EventKind::Message,
                source,
                json!({"index": index, "message": *message}),
            ));
        }
        AgentEvent::MessageReplaced { index, message } => {
            let source = source_of(&message);
            return Some(new_event(
                EventKind::MessageReplaced,
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
            EventKind::ApprovalRequired,
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
                EventKind::AiAnswerEnd,
                AGENT,
                json!({"analysis": answer.text, "metadata": metadata}),
            )
        }
        AgentEvent::Failed(error) => new_event(
            EventKind::Error,
            ENVIRONMENT,
            serde_json::to_value(crate::wire::events::ErrorEvent::new(
                error.message,
                error.kind == crate::agent::RunErrorKind::RateLimited,
            ))
            .unwrap_or(Value::Null),
        ),
        AgentEvent::Stopped(StopReason::Interrupted { cut }) => new_event(
            EventKind::Interrupted,
            ENVIRONMENT,
            json!({"cut_tool_calls": cut}),
        ),
        AgentEvent::Stopped(StopReason::Paused) => {
            new_event(EventKind::Paused, ENVIRONMENT, json!({}))
        }
        AgentEvent::Stopped(StopReason::Stuck { pattern }) => {
            new_event(EventKind::Stuck, ENVIRONMENT, json!({"pattern": pattern}))
        }
        _ => return None,
    })
}

/// A frame's stored form: its name and its data as a JSON value, built straight from the
/// frame (never written out as text and read back).
fn from_frame(frame: &StreamEvent) -> NewEvent {
    let (kind, source) = match frame {
        StreamEvent::StartToolCalling(_) => (EventKind::StartToolCalling, AGENT),
        StreamEvent::ToolCallingResult(_) => (EventKind::ToolCallingResult, ENVIRONMENT),
        StreamEvent::AiMessage(_) => (EventKind::AiMessage, AGENT),
        StreamEvent::AnswerDelta(_) => (EventKind::AiAnswerDelta, AGENT),
        StreamEvent::TokenCount(_) => (EventKind::TokenCount, ENVIRONMENT),
        StreamEvent::ApprovalRequired(_) => (EventKind::ApprovalRequired, AGENT),
        StreamEvent::CompactionStart(_) => {
            (EventKind::ConversationHistoryCompactionStart, ENVIRONMENT)
        }
        StreamEvent::Compacted(_) => (EventKind::ConversationHistoryCompacted, ENVIRONMENT),
        StreamEvent::AnswerEnd(_) => (EventKind::AiAnswerEnd, AGENT),
        StreamEvent::Error(_) => (EventKind::Error, ENVIRONMENT),
        StreamEvent::ModelFallback(_) => (EventKind::ModelFallback, ENVIRONMENT),
    };
    new_event(kind, source, frame.data_value().unwrap_or(Value::Null))
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
    Some(new_event(EventKind::Message, source_of(message), payload))
}

/// Applies a stored event to a state's messages (what a crash may have left unsaved, or the
/// history up to an event, for a fork).
pub fn fold(state: &mut RunState, kind: EventKind, payload: &Value) {
    let message = || serde_json::from_value::<Message>(payload["message"].clone()).ok();
    let index = payload["index"].as_u64().map(|i| i as usize);
    match kind {
        EventKind::Message => {
            if let Some(message) = message() {
                let at = index.map_or(state.messages.len(), |i| i.min(state.messages.len()));
                state.messages.insert(at, message);
            }
        }
        EventKind::MessageReplaced => {
            if let (Some(index), Some(message)) = (index, message())
                && let Some(slot) = state.messages.get_mut(index)
            {
                *slot = message;
            }
        }
        EventKind::ConversationHistoryCompacted => {
            if let Ok(messages) = serde_json::from_value(payload["messages"].clone()) {
                state.messages = messages;
            }
        }
        _ => {}
    }
}
