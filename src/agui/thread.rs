//! AG-UI on a server-side conversation: a `threadId` that is the id of a stored conversation
//! makes the run that conversation's next turn, as `a2a/` makes a task's message. The input's
//! last user message is sent to the conversation (or, with `resume`, the decisions on the
//! calls it waits for; or a frontend tool's result message), and the run's events are read
//! back from the conversation's log (`thread_stream.rs`). The conversation's own settings
//! apply; the input's `tools`, `context` and `forwardedProps` do not. Approvals, runs and
//! masking are all `conversations/`'s: nothing here decides a call.
//!
//! Interrupt ids on a thread are `<conversation id>:<tool call id>` (`interrupts.rs`).

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use uuid::Uuid;

use super::events::AguiEvent;
use super::input::{InputMessage, ResumeEntry, RunAgentInput};
use super::interrupts::thread_call;
use super::request::{body_text, content_value, decision, question};
use crate::agent::{RunState, Waiting};
use crate::conversation_domain::ConversationStatus;
use crate::conversations::api::{ConfirmationResponse, SendMessage};
use crate::conversations::{ConversationError, Conversations};
use crate::store::ConversationRow;
use crate::wire::request::FrontendToolResult;

/// The events of a run on a thread.
pub type ThreadRun = Pin<Box<dyn Stream<Item = AguiEvent> + Send>>;

/// Where a run goes: a conversation's thread, or (the thread names none) the stateless chat,
/// given its input back.
pub enum Door {
    Stateless(Box<RunAgentInput>),
    Thread(ThreadRun),
}

/// Starts the run on the conversation `input.threadId` names; a refusal (the conversation is
/// running, a resume names no call it waits for) comes back before any event.
pub async fn start(
    conversations: &Arc<Conversations>,
    input: RunAgentInput,
    idle: std::time::Duration,
) -> Result<Door, ConversationError> {
    // Headlamp and most clients make up their thread ids: only a stored conversation's id
    // is a thread here, anything else stays stateless.
    let Ok(id) = Uuid::parse_str(&input.thread_id) else {
        return Ok(Door::Stateless(Box::new(input)));
    };
    let Some(row) = conversations.store().get(id).await? else {
        return Ok(Door::Stateless(Box::new(input)));
    };
    if row.status == ConversationStatus::Running {
        return Err(ConversationError::Conflict(format!(
            "Conversation already running. Wait for completion or pause first (thread {id} \
             is conversation {id}, which is running a turn)."
        )));
    }
    // Everything the log holds now is earlier turns': the stream starts after it.
    let after = row.last_event_id;
    let resume = input.resume.as_deref().unwrap_or_default();
    if !resume.is_empty() {
        let response = resume_response(id, &row, resume)?;
        conversations.respond(id, response).await?;
    } else if let Some(results) = frontend_results(&row, &input.messages) {
        conversations
            .respond(
                id,
                ConfirmationResponse {
                    accept: None,
                    reason: None,
                    tool_decisions: None,
                    frontend_tool_results: Some(results),
                },
            )
            .await?;
    } else {
        if row.status == ConversationStatus::WaitingForConfirmation {
            return Err(ConversationError::Conflict(format!(
                "thread {id} waits for approval: answer the interrupts of its last run with \
                 `resume` (or a frontend tool's result message) before a new message"
            )));
        }
        conversations
            .send_message(id, last_user(id, &input)?)
            .await?;
    }
    let head = super::thread_stream::Head {
        thread_id: input.thread_id,
        run_id: input.run_id,
        parent_run_id: input.parent_run_id,
        state: input.state,
    };
    Ok(Door::Thread(Box::pin(super::thread_stream::follow(
        conversations.clone(),
        id,
        after,
        head,
        idle,
    ))))
}

/// The input's last message, which must be the user's, as the conversation's next message.
fn last_user(id: Uuid, input: &RunAgentInput) -> Result<SendMessage, ConversationError> {
    let Some(InputMessage::User(user)) = input.messages.last() else {
        return Err(ConversationError::BadInput(format!(
            "nothing to send to conversation {id}: the last message must be the user's \
             (role user), or `resume` must answer the interrupts of the last run"
        )));
    };
    let (content, images) = question(&content_value(&user.content));
    if content.trim().is_empty() {
        return Err(ConversationError::BadInput(
            "the last user message has no text".into(),
        ));
    }
    Ok(SendMessage {
        content,
        images: (!images.is_empty()).then_some(images),
        run: Some(true),
    })
}

/// The decisions the resume entries make on the calls conversation `id` waits for. Each must
/// name one of them, once: the core would deny a call no decision names, so an id that names
/// none (a typo, another thread's) is refused rather than read as a denial of the real one.
fn resume_response(
    id: Uuid,
    row: &ConversationRow,
    resume: &[ResumeEntry],
) -> Result<ConfirmationResponse, ConversationError> {
    let state = pending_state(row);
    let waiting = row.status == ConversationStatus::WaitingForConfirmation;
    let mut decisions = Vec::with_capacity(resume.len());
    for (k, entry) in resume.iter().enumerate() {
        let call = thread_call(id, &entry.interrupt_id).filter(|call| {
            waiting
                && state.as_ref().is_some_and(|s| {
                    s.pending
                        .iter()
                        .any(|p| p.is_approval() && p.call.id == *call)
                })
        });
        let Some(call) = call else {
            return Err(ConversationError::BadInput(format!(
                "resume[{k}].interruptId {:?} names no tool call conversation {id} waits for \
                 (a thread's interrupt ids are `<conversation id>:<tool call id>`, as its last \
                 run's RUN_FINISHED gave them)",
                entry.interrupt_id
            )));
        };
        if decisions
            .iter()
            .any(|d: &crate::wire::request::ToolDecision| d.tool_call_id == call)
        {
            return Err(ConversationError::BadInput(format!(
                "resume[{k}]: tool call '{call}' is answered twice"
            )));
        }
        decisions.push(decision(k, entry, call.to_owned()).map_err(ConversationError::Run)?);
    }
    Ok(ConfirmationResponse {
        accept: None,
        reason: None,
        tool_decisions: Some(decisions),
        frontend_tool_results: None,
    })
}

/// The client's results for the frontend calls the conversation waits for: the tool messages
/// after the input's last assistant message that answer one of them.
fn frontend_results(
    row: &ConversationRow,
    messages: &[InputMessage],
) -> Option<Vec<FrontendToolResult>> {
    if row.status != ConversationStatus::WaitingForConfirmation {
        return None;
    }
    let state = pending_state(row)?;
    let results: Vec<FrontendToolResult> = messages
        .iter()
        .rev()
        .take_while(|m| matches!(m, InputMessage::Tool(_)))
        .filter_map(|m| match m {
            InputMessage::Tool(t) => Some(t),
            _ => None,
        })
        .filter_map(|t| {
            let pending = state.pending.iter().find(|p| {
                p.call.id == t.tool_call_id && matches!(p.waits_for, Waiting::Frontend { .. })
            })?;
            let result = body_text(&t.content);
            Some(FrontendToolResult {
                tool_call_id: t.tool_call_id.clone(),
                tool_name: pending.call.function.name.clone(),
                result,
            })
        })
        .collect();
    (!results.is_empty()).then_some(results)
}

fn pending_state(row: &ConversationRow) -> Option<RunState> {
    <RunState as serde::Deserialize>::deserialize(&row.state).ok()
}
