//! A conversation seen as an A2A task: the task's id and its context id are both the
//! conversation's id; its state comes from the conversation's status; its history from the
//! stored messages (user and agent text, no system prompt or tool output); its one artifact,
//! `answer`, is the agent's answer to the last user message.

use chrono::SecondsFormat;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::jsonrpc::{ErrorCode, RpcError};
use super::types::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus};
use crate::agent::{PendingCall, RunState, Waiting};
use crate::conversation_domain::ConversationStatus;
use crate::store::{ConversationRow, Snapshot};

/// The artifact that holds the answer; a later turn's answer replaces it.
pub const ANSWER: &str = "answer";

/// The reason a conversation's status carries after `interrupt` (`conversations/runs.rs`).
const INTERRUPTED: &str = "interrupted";

/// How a task is shown: how many history messages (`None`: all) and whether with artifacts.
#[derive(Debug, Clone, Copy)]
pub struct View {
    pub history: Option<usize>,
    pub artifacts: bool,
}

impl View {
    /// A request's `historyLength`, checked: negative is refused.
    pub fn new(history_length: Option<i32>, artifacts: bool) -> Result<View, RpcError> {
        let history = match history_length {
            None => None,
            Some(n) => Some(usize::try_from(n).map_err(|_| {
                RpcError::invalid_params(format!("historyLength must be 0 or more, not {n}"))
            })?),
        };
        Ok(View { history, artifacts })
    }
}

/// The task state a conversation's status means.
pub fn state_of(status: ConversationStatus, reason: Option<&str>) -> TaskState {
    match status {
        ConversationStatus::Idle => TaskState::Submitted,
        ConversationStatus::Running => TaskState::Working,
        ConversationStatus::Paused if reason == Some(INTERRUPTED) => TaskState::Canceled,
        // Paused between steps (the conversations API's pause) or waiting for approvals:
        // a message moves it on.
        ConversationStatus::Paused | ConversationStatus::WaitingForConfirmation => {
            TaskState::InputRequired
        }
        ConversationStatus::Finished => TaskState::Completed,
        ConversationStatus::Error | ConversationStatus::Stuck => TaskState::Failed,
        ConversationStatus::Deleting | ConversationStatus::Deleted => TaskState::Canceled,
    }
}

/// The conversation statuses a task state filter selects (`ListTasks`).
pub fn statuses_of(state: TaskState) -> &'static [ConversationStatus] {
    match state {
        TaskState::Submitted => &[ConversationStatus::Idle],
        TaskState::Working => &[ConversationStatus::Running],
        TaskState::Completed => &[ConversationStatus::Finished],
        TaskState::Failed => &[ConversationStatus::Error, ConversationStatus::Stuck],
        TaskState::Canceled => &[ConversationStatus::Paused],
        TaskState::InputRequired => &[
            ConversationStatus::WaitingForConfirmation,
            ConversationStatus::Paused,
        ],
        TaskState::Unspecified | TaskState::Rejected | TaskState::AuthRequired => &[],
    }
}

/// The task of a stored conversation (unmasked: the caller masks what it sends).
pub fn task_of(row: &ConversationRow, view: View) -> Result<Task, RpcError> {
    let state = RunState::deserialize(&row.state).map_err(|e| {
        RpcError::new(
            ErrorCode::Internal,
            format!("task {}: unreadable stored conversation: {e}", row.id),
        )
    })?;
    let id = row.id.to_string();
    let task_state = state_of(row.status, row.reason.as_deref());
    let answer = answer_of(&state);
    let artifacts = view.artifacts.then(|| {
        answer
            .map(|text| vec![answer_artifact(text)])
            .unwrap_or_default()
    });
    Ok(Task {
        context_id: id.clone(),
        status: TaskStatus {
            state: task_state,
            message: status_message(row, &state, task_state),
            timestamp: Some(row.updated_at.to_rfc3339_opts(SecondsFormat::Millis, true)),
        },
        artifacts,
        history: history_of(row.id, &state, view.history),
        id,
    })
}

pub fn answer_artifact(text: String) -> Artifact {
    Artifact {
        artifact_id: ANSWER.into(),
        name: Some(ANSWER.into()),
        parts: vec![Part::text(text)],
    }
}

/// An agent message of the task (a status message).
pub fn agent_message(task: Uuid, message_id: String, parts: Vec<Part>) -> Message {
    Message {
        message_id,
        context_id: Some(task.to_string()),
        task_id: Some(task.to_string()),
        role: Role::Agent,
        parts,
        metadata: None,
        extensions: Vec::new(),
        reference_task_ids: Vec::new(),
    }
}

/// The agent's answer to the last user message, when it has written one.
fn answer_of(state: &RunState) -> Option<String> {
    let since_user = state
        .messages
        .iter()
        .rposition(|m| m.is_role("user"))
        .map_or(0, |i| i + 1);
    state.messages[since_user..]
        .iter()
        .rev()
        .find(|m| m.is_role("assistant") && m.tool_calls().is_empty())
        .map(crate::wire::Message::text)
        .filter(|text| !text.is_empty())
}

/// The user's and the agent's text messages, the last `limit` of them.
fn history_of(task: Uuid, state: &RunState, limit: Option<usize>) -> Vec<Message> {
    let mut history: Vec<Message> = state
        .messages
        .iter()
        .enumerate()
        .filter_map(|(index, m)| {
            let role = match m.role.as_str() {
                "user" => Role::User,
                "assistant" => Role::Agent,
                _ => return None,
            };
            let text = m.text();
            (!text.is_empty()).then(|| Message {
                role,
                ..agent_message(task, format!("{task}-{index}"), vec![Part::text(text)])
            })
        })
        .collect();
    if let Some(limit) = limit {
        history.drain(..history.len().saturating_sub(limit));
    }
    history
}

/// What the task waits for, or why it ended, as an agent message; `None` while it works
/// or once it completed (the answer is the artifact).
fn status_message(
    row: &ConversationRow,
    state: &RunState,
    task_state: TaskState,
) -> Option<Message> {
    let id = format!("{}-status-{}", row.id, row.last_event_id);
    let parts = status_parts(task_state, &state.pending, row.reason.as_deref())?;
    Some(agent_message(row.id, id, parts))
}

/// What a status says beside its state: the calls waited for, why it failed, …
fn status_parts(
    task_state: TaskState,
    pending: &[PendingCall],
    reason: Option<&str>,
) -> Option<Vec<Part>> {
    Some(match task_state {
        TaskState::InputRequired if !pending.is_empty() => pending_parts(pending),
        TaskState::InputRequired => vec![Part::text(
            "The investigation is paused: send a message on this task to continue it.",
        )],
        TaskState::Failed => vec![Part::text(
            reason.unwrap_or("The investigation failed.").to_owned(),
        )],
        TaskState::Canceled => vec![Part::text("The investigation was canceled.")],
        _ => return None,
    })
}

/// The status a webhook outbox snapshot reports (a push notification's): its state, what it
/// waits for or why it ended, when the change was written.
pub fn status_of_snapshot(snapshot: &Snapshot, task_state: TaskState) -> TaskStatus {
    // The snapshot keeps the state's pending calls as stored; unreadable ones are not shown.
    let pending: Vec<PendingCall> =
        serde_json::from_value(snapshot.pending.clone()).unwrap_or_default();
    let id = format!("{}-status-{}", snapshot.id, snapshot.change.last_event_id);
    TaskStatus {
        state: task_state,
        message: status_parts(task_state, &pending, snapshot.change.reason.as_deref())
            .map(|parts| agent_message(snapshot.id, id, parts)),
        timestamp: Some(
            snapshot
                .updated_at
                .to_rfc3339_opts(SecondsFormat::Millis, true),
        ),
    }
}

/// The calls waiting for a decision: a sentence saying how to answer, and the calls as data.
fn pending_parts(pending: &[PendingCall]) -> Vec<Part> {
    let mut lines = Vec::new();
    let mut calls = Vec::new();
    for pending in pending {
        let (kind, description, arguments) = match &pending.waits_for {
            Waiting::Approval {
                description,
                params,
            } => ("approval", description.as_str(), params),
            Waiting::Frontend { arguments } => ("frontend_tool", "", arguments),
        };
        lines.push(format!(
            "- {} ({}){}",
            pending.call.function.name,
            pending.call.id,
            if description.is_empty() {
                String::new()
            } else {
                format!(": {description}")
            }
        ));
        calls.push(json!({
            "toolCallId": pending.call.id,
            "toolName": pending.call.function.name,
            "waitsFor": kind,
            "description": description,
            "arguments": arguments,
        }));
    }
    let text = format!(
        "Waiting for approval of:\n{}\nReply on this task with the text \"approve\" or \"deny\" \
         (every call), or data parts {{\"approve\": true|false, \"toolCallId\": \"…\", \
         \"reason\": \"…\"}} (one call each; toolCallId left out means every call).",
        lines.join("\n")
    );
    vec![
        Part::text(text),
        Part::data(json!({"pendingActions": Value::Array(calls)})),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_a_state_and_filters_round_trip() {
        for status in ConversationStatus::ALL {
            let state = state_of(status, None);
            if status != ConversationStatus::Deleting && status != ConversationStatus::Deleted {
                assert!(statuses_of(state).contains(&status), "{status}");
            }
        }
        assert_eq!(
            state_of(ConversationStatus::Paused, Some("interrupted")),
            TaskState::Canceled
        );
        assert!(View::new(Some(-1), true).is_err());
    }
}
