//! A task's updates as A2A stream responses, read from the conversation's stored log (so a
//! slow client never holds the run back, and every replica serves the same stream): status
//! changes as `statusUpdate`s (tool calls and the agent's notes as working updates with a
//! message), the answer as the `answer` artifact; the stream ends at a settled status.

use std::time::Duration;

use futures::Stream;
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

use super::methods::Tasks;
use super::tasks::{View, agent_message, answer_artifact, state_of, task_of};
use super::types::{
    Part, StreamResponse, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use crate::conversation_domain::{ConversationStatus, EventKind};
use crate::store::{EventQuery, StoredEvent};

/// Events read from the store per query.
const PAGE: u32 = 100;

/// What a follower hands the edge: a response to send (masked JSON), or nothing new for a
/// while (the edge writes a keep-alive).
pub enum Update {
    Response(Value),
    Idle,
    /// The log cannot be read any more (the task was deleted, the store failed): the stream
    /// ends with this message.
    Gone(String),
}

/// The updates of task `id` after event `after`, until it settles.
pub fn follow(tasks: Tasks, id: Uuid, after: u64, idle: Duration) -> impl Stream<Item = Update> {
    async_stream::stream! {
        let store = tasks.conversations().store().clone();
        let mut news = store.subscribe();
        let mut after = after;
        loop {
            let query = EventQuery { after: Some(after), limit: PAGE, ..EventQuery::default() };
            let page = match store.events(id, &query).await {
                Ok(page) => page,
                Err(e) => {
                    yield Update::Gone(format!("cannot read task {id}'s updates: {e}"));
                    return;
                }
            };
            let full = page.items.len() as u32 == PAGE;
            for event in page.items {
                after = event.id;
                let Some(response) = response_of(&tasks, id, &event).await else { continue };
                let last = response.is_last();
                match tasks.masked(id, &response).await {
                    Ok(value) => yield Update::Response(value),
                    Err(e) => {
                        yield Update::Gone(e.message);
                        return;
                    }
                }
                if last {
                    return;
                }
            }
            if full {
                continue;
            }
            loop {
                tokio::select! {
                    note = news.recv() => match note {
                        Ok((conversation, seq)) if conversation == id && seq > after => break,
                        Ok(_) => {}
                        Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => return,
                    },
                    () = tokio::time::sleep(idle) => {
                        if !matches!(store.get(id).await, Ok(Some(_))) {
                            yield Update::Gone(format!("task {id} was deleted"));
                            return;
                        }
                        yield Update::Idle;
                    }
                }
            }
        }
    }
}

/// What a stored event tells an A2A client, if anything.
async fn response_of(tasks: &Tasks, id: Uuid, event: &StoredEvent) -> Option<StreamResponse> {
    let p = &event.payload;
    let text = |key: &str| p.get(key).and_then(Value::as_str).unwrap_or_default();
    let note = |message: String| {
        status_update(
            id,
            TaskStatus {
                state: TaskState::Working,
                message: Some(agent_message(
                    id,
                    format!("{id}-event-{}", event.id),
                    vec![Part::text(message)],
                )),
                timestamp: Some(timestamp(event)),
            },
        )
    };
    match event.kind {
        EventKind::ConversationStateUpdate => {
            let status: ConversationStatus = text("execution_status").parse().ok()?;
            let reason = p.get("reason").and_then(Value::as_str);
            Some(status_update(
                id,
                status_now(tasks, id, status, reason, event).await,
            ))
        }
        EventKind::AiAnswerEnd => {
            let answer = text("analysis");
            (!answer.is_empty()).then(|| {
                StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                    task_id: id.to_string(),
                    context_id: id.to_string(),
                    artifact: answer_artifact(answer.to_owned()),
                    append: false,
                    last_chunk: true,
                })
            })
        }
        EventKind::StartToolCalling => Some(note(format!("Running {}", text("tool_name")))),
        EventKind::ToolCallingResult => {
            let outcome = p
                .pointer("/result/status")
                .and_then(Value::as_str)
                .unwrap_or("done");
            Some(note(format!(
                "{} ({outcome}): {}",
                text("tool_name"),
                text("description")
            )))
        }
        EventKind::AiMessage if !text("content").trim().is_empty() => {
            Some(note(text("content").to_owned()))
        }
        _ => None,
    }
}

/// The status a state change entered: with the stored task's message (what it waits for, why
/// it failed) when the task still stands there, else the state alone.
async fn status_now(
    tasks: &Tasks,
    id: Uuid,
    status: ConversationStatus,
    reason: Option<&str>,
    event: &StoredEvent,
) -> TaskStatus {
    let state = state_of(status, reason);
    if let Ok((_, row)) = tasks.existing(&id.to_string()).await
        && row.status == status
        && let Ok(task) = task_of(
            &row,
            View {
                history: Some(0),
                artifacts: false,
            },
        )
    {
        return TaskStatus {
            timestamp: Some(timestamp(event)),
            ..task.status
        };
    }
    TaskStatus {
        state,
        message: None,
        timestamp: Some(timestamp(event)),
    }
}

fn status_update(id: Uuid, status: TaskStatus) -> StreamResponse {
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: id.to_string(),
        context_id: id.to_string(),
        status,
    })
}

fn timestamp(event: &StoredEvent) -> String {
    event
        .timestamp
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
