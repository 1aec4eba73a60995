//! The A2A methods over `conversations::Conversations`: a task is a conversation, a message
//! on a task is a message to the conversation (or its approvals), cancel is its interrupt.
//! Everything a method answers is masked with the conversation's masker.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

use super::input::{decisions_of, text_of};
use super::jsonrpc::{ErrorCode, RpcError};
use super::tasks::{View, state_of, statuses_of, task_of};
use super::types::{
    ListTasksRequest, ListTasksResponse, Role, SendMessageRequest, Task, TaskState,
};
use crate::agent::{RunErrorKind, Waiting};
use crate::config::a2a::A2aSettings;
use crate::conversation_domain::ConversationStatus;
use crate::conversations::api::{CreateConversation, SendMessage};
use crate::conversations::{ConversationError, Conversations};
use crate::store::{ConversationQuery, ConversationRow, SortOrder};

/// `ListTasks`' page size when the request names none, and the most it may ask for.
const DEFAULT_PAGE: i32 = 50;
const MAX_PAGE: i32 = 100;

/// How often a wait for a task to settle looks at it even without news of its log.
const RECHECK: Duration = Duration::from_millis(500);

/// The A2A methods, over the server's conversations.
#[derive(Clone)]
pub struct Tasks {
    conversations: Arc<Conversations>,
    push: Arc<A2aSettings>,
}

/// A message accepted: the task it went to and how the client wants the answer.
pub struct Sent {
    pub task: Uuid,
    pub view: View,
    pub return_immediately: bool,
}

impl Tasks {
    pub fn new(conversations: Arc<Conversations>, push: Arc<A2aSettings>) -> Tasks {
        Tasks {
            conversations,
            push,
        }
    }

    pub fn push_settings(&self) -> &A2aSettings {
        &self.push
    }

    /// Stores a checked push notification config for `task`.
    pub async fn add_push(
        &self,
        task: Uuid,
        checked: super::push::Checked,
    ) -> Result<Value, RpcError> {
        super::push::add(self.conversations.store(), &self.push, task, checked).await
    }

    /// `SendMessage` / `SendStreamingMessage`: a new task, the next message of one, or its
    /// approvals. Returns once the conversation has the message (its run started).
    pub async fn send(&self, request: SendMessageRequest) -> Result<Sent, RpcError> {
        let message = &request.message;
        if message.role != Role::User {
            return Err(RpcError::invalid_params("message.role must be ROLE_USER"));
        }
        if message.message_id.trim().is_empty() {
            return Err(RpcError::invalid_params("message.messageId is required"));
        }
        if message.parts.is_empty() {
            return Err(RpcError::invalid_params(
                "message.parts: at least one part is required",
            ));
        }
        let configuration = request.configuration.unwrap_or_default();
        // Checked before anything is created; stored before the task runs, so that it hears
        // of every change.
        let push = configuration
            .task_push_notification_config
            .map(|config| {
                // The task the message goes to: its taskId, or its contextId (a task's id).
                let task = message.task_id.as_deref().or(message.context_id.as_deref());
                super::push::check(&self.push, config, task)
            })
            .transpose()?;
        if !accepts_text(&configuration.accepted_output_modes) {
            return Err(RpcError::new(
                ErrorCode::ContentTypeNotSupported,
                format!(
                    "acceptedOutputModes {:?}: this agent answers in text/plain",
                    configuration.accepted_output_modes
                ),
            ));
        }
        let view = View::new(configuration.history_length, true)?;
        let task = match (message.task_id.as_deref(), message.context_id.as_deref()) {
            (Some(task), Some(context)) if task != context => {
                return Err(RpcError::invalid_params(format!(
                    "message.contextId {context} is not the context of task {task} (a task's \
                     contextId is its id)"
                )));
            }
            (Some(task), _) => {
                let (id, row) = self.existing(task).await?;
                let state = state_of(row.status, row.reason.as_deref());
                if state.is_terminal() {
                    return Err(RpcError::new(
                        ErrorCode::UnsupportedOperation,
                        format!(
                            "task {task} is {state:?} and takes no more messages: to go on with \
                             the conversation, send the message with contextId {task} and no \
                             taskId"
                        ),
                    )
                    .with("taskId", task));
                }
                if let Some(push) = push {
                    self.add_push(id, push).await?;
                }
                self.continue_with(id, &row, message).await?;
                id
            }
            (None, Some(context)) => {
                let id = Uuid::parse_str(context).map_err(|_| {
                    RpcError::invalid_params(format!(
                        "message.contextId {context:?} is not a context of this agent (a UUID)"
                    ))
                })?;
                match self.row(id).await? {
                    Some(row) => {
                        if let Some(push) = push {
                            self.add_push(id, push).await?;
                        }
                        self.continue_with(id, &row, message).await?
                    }
                    None => {
                        self.create(Some(id), message, push).await?;
                    }
                }
                id
            }
            (None, None) => self.create(None, message, push).await?,
        };
        Ok(Sent {
            task,
            view,
            return_immediately: configuration.return_immediately,
        })
    }

    /// A new task with `message`; with a push config, the config is stored between creating
    /// the conversation and starting its run.
    async fn create(
        &self,
        id: Option<Uuid>,
        message: &super::types::Message,
        push: Option<super::push::Checked>,
    ) -> Result<Uuid, RpcError> {
        let content = text_of(message)?;
        if let Some(push) = push {
            let info = self
                .conversations
                .create(CreateConversation {
                    id,
                    ..CreateConversation::default()
                })
                .await
                .map_err(rpc_error)?;
            self.add_push(info.id, push).await?;
            self.conversations
                .send_message(
                    info.id,
                    SendMessage {
                        content,
                        images: None,
                        run: Some(true),
                    },
                )
                .await
                .map_err(rpc_error)?;
            return Ok(info.id);
        }
        let info = self
            .conversations
            .create(CreateConversation {
                id,
                initial_message: Some(SendMessage {
                    content,
                    images: None,
                    run: Some(true),
                }),
                ..CreateConversation::default()
            })
            .await
            .map_err(rpc_error)?;
        Ok(info.id)
    }

    /// A message for an existing task: the approvals it waits for, or its next message.
    async fn continue_with(
        &self,
        id: Uuid,
        row: &ConversationRow,
        message: &super::types::Message,
    ) -> Result<(), RpcError> {
        if row.status == ConversationStatus::WaitingForConfirmation {
            if waits_for_frontend(row) {
                return Err(RpcError::new(
                    ErrorCode::UnsupportedOperation,
                    format!(
                        "task {id} waits for a frontend tool's result, which A2A cannot carry: \
                         answer it with POST /api/conversations/{id}/events/respond_to_confirmation"
                    ),
                ));
            }
            // A toolCallId that is not this task's is refused by the conversation (it would
            // deny the real call in its place).
            let decisions = decisions_of(message)?;
            return self
                .conversations
                .respond(id, decisions)
                .await
                .map_err(rpc_error);
        }
        let content = text_of(message)?;
        self.conversations
            .send_message(
                id,
                SendMessage {
                    content,
                    images: None,
                    run: Some(true),
                },
            )
            .await
            .map_err(rpc_error)
    }

    /// Waits until task `id` is settled (ended, or waiting for the client), at most `limit`;
    /// returns it as it then stands.
    pub async fn settled(&self, id: Uuid, limit: Duration) -> Result<ConversationRow, RpcError> {
        let store = self.conversations.store();
        // Subscribed before the first look, so a change in between is not missed.
        let mut news = store.subscribe();
        let until = tokio::time::Instant::now() + limit;
        loop {
            let row = self
                .row(id)
                .await?
                .ok_or_else(|| RpcError::task_not_found(&id.to_string()))?;
            if state_of(row.status, row.reason.as_deref()).is_settled()
                || tokio::time::Instant::now() >= until
            {
                return Ok(row);
            }
            // Until news of this task (other tasks' news is skipped here, not read again),
            // the next look, or the limit.
            let look = tokio::time::Instant::now() + RECHECK;
            loop {
                tokio::select! {
                    note = news.recv() => match note {
                        Ok((conversation, _)) if conversation != id => continue,
                        Ok(_) | Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => tokio::time::sleep_until(look.min(until)).await,
                    },
                    () = tokio::time::sleep_until(look.min(until)) => {}
                }
                break;
            }
        }
    }

    /// A task as JSON, masked.
    pub async fn task_json(&self, row: &ConversationRow, view: View) -> Result<Value, RpcError> {
        let task = task_of(row, view)?;
        self.masked(row.id, &task).await
    }

    /// `GetTask`.
    pub async fn get(&self, id: &str, history_length: Option<i32>) -> Result<Value, RpcError> {
        let view = View::new(history_length, true)?;
        let (_, row) = self.existing(id).await?;
        self.task_json(&row, view).await
    }

    /// `CancelTask`: the conversation's interrupt; its task then reads canceled.
    pub async fn cancel(&self, id: &str) -> Result<Value, RpcError> {
        let (uuid, row) = self.existing(id).await?;
        let state = state_of(row.status, row.reason.as_deref());
        // Only a run can be cut: a task waiting for approvals ends when they are denied.
        if state != TaskState::Working {
            let why = match state {
                TaskState::InputRequired => "waits for the client: deny its calls to end it",
                _ => "is not running: there is nothing to cancel",
            };
            return Err(RpcError::new(
                ErrorCode::TaskNotCancelable,
                format!("task {id} ({state:?}) {why}"),
            )
            .with("taskId", id));
        }
        self.conversations
            .interrupt(uuid)
            .await
            .map_err(rpc_error)?;
        let (_, row) = self.existing(id).await?;
        self.task_json(&row, View::new(None, true)?).await
    }

    /// `ListTasks`: the conversations, most recently updated first.
    pub async fn list(&self, request: ListTasksRequest) -> Result<Value, RpcError> {
        let page_size = request.page_size.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_PAGE).contains(&page_size) {
            return Err(RpcError::invalid_params(format!(
                "pageSize must be 1 to {MAX_PAGE}, not {page_size}"
            )));
        }
        if request.status_timestamp_after.is_some() {
            return Err(RpcError::invalid_params(
                "statusTimestampAfter is not supported: page through the tasks instead",
            ));
        }
        let view = View::new(
            request.history_length,
            request.include_artifacts.unwrap_or(false),
        )?;
        let statuses = request
            .status
            .filter(|s| *s != TaskState::Unspecified)
            .map(statuses_of);
        let wanted = |row: &ConversationRow| match request.status {
            Some(state) if state != TaskState::Unspecified => {
                state_of(row.status, row.reason.as_deref()) == state
            }
            _ => true,
        };
        // A context is one task: its own id.
        if let Some(context) = request.context_id.as_deref().filter(|c| !c.is_empty()) {
            let rows: Vec<ConversationRow> = match Uuid::parse_str(context) {
                Ok(id) => self.row(id).await?.into_iter().filter(wanted).collect(),
                Err(_) => Vec::new(),
            };
            let mut tasks = Vec::with_capacity(rows.len());
            for row in &rows {
                tasks.push(self.task_json(row, view).await?);
            }
            return list_response(tasks, String::new(), page_size, rows.len());
        }
        // One conversation status is one store query; canceled and input-required read
        // several statuses, or one status with a reason, so they are filtered here.
        let status = match statuses {
            Some([one]) => Some(one.as_str().to_owned()),
            Some(_) | None => None,
        };
        let query = ConversationQuery {
            page_id: request.page_token.filter(|t| !t.is_empty()),
            limit: u32::try_from(page_size).unwrap_or(1),
            status: status.clone(),
            sort: SortOrder::UpdatedAtDesc,
        };
        let store = self.conversations.store();
        let page = store.search(&query).await.map_err(|e| match e {
            crate::store::StoreError::InvalidPageId => {
                RpcError::invalid_params("pageToken is not one this agent handed out")
            }
            e => store_error(e),
        })?;
        let total = match statuses {
            None => store.count(None).await.map_err(store_error)?,
            Some(statuses) => {
                let mut total = 0;
                for s in statuses {
                    total += store.count(Some(s.as_str())).await.map_err(store_error)?;
                }
                total
            }
        };
        let mut tasks = Vec::with_capacity(page.items.len());
        for row in page.items.iter().filter(|r| wanted(r)) {
            tasks.push(self.task_json(row, view).await?);
        }
        list_response(
            tasks,
            page.next_page_id.unwrap_or_default(),
            page_size,
            usize::try_from(total).unwrap_or(usize::MAX),
        )
    }

    /// The task named `id`: its id and row; TaskNotFound when there is none.
    pub async fn existing(&self, id: &str) -> Result<(Uuid, ConversationRow), RpcError> {
        let uuid = Uuid::parse_str(id).map_err(|_| RpcError::task_not_found(id))?;
        let row = self
            .row(uuid)
            .await?
            .ok_or_else(|| RpcError::task_not_found(id))?;
        Ok((uuid, row))
    }

    async fn row(&self, id: Uuid) -> Result<Option<ConversationRow>, RpcError> {
        self.conversations
            .store()
            .get(id)
            .await
            .map_err(store_error)
    }

    /// `value` as JSON with the secrets of conversation `id` hidden.
    pub async fn masked(&self, id: Uuid, value: &impl serde::Serialize) -> Result<Value, RpcError> {
        let mut value = serde_json::to_value(value).map_err(|e| {
            RpcError::new(
                ErrorCode::Internal,
                format!("cannot encode the answer: {e}"),
            )
        })?;
        self.conversations.log_masker(id).await.mask(&mut value);
        Ok(value)
    }

    pub fn conversations(&self) -> &Arc<Conversations> {
        &self.conversations
    }
}

fn list_response(
    tasks: Vec<Value>,
    next_page_token: String,
    page_size: i32,
    total: usize,
) -> Result<Value, RpcError> {
    let response = ListTasksResponse {
        tasks: Vec::<Task>::new(),
        next_page_token,
        page_size,
        total_size: i32::try_from(total).unwrap_or(i32::MAX),
    };
    let mut value = serde_json::to_value(response)
        .map_err(|e| RpcError::new(ErrorCode::Internal, format!("cannot encode: {e}")))?;
    value["tasks"] = Value::Array(tasks);
    Ok(value)
}

/// Whether `modes` (media types; empty means anything) admit text/plain.
fn accepts_text(modes: &[String]) -> bool {
    modes.is_empty()
        || modes.iter().any(|m| {
            let m = m.trim().to_ascii_lowercase();
            matches!(m.as_str(), "text/plain" | "text/*" | "*/*" | "text")
        })
}

fn waits_for_frontend(row: &ConversationRow) -> bool {
    <crate::agent::RunState as serde::Deserialize>::deserialize(&row.state).is_ok_and(|s| {
        s.pending
            .iter()
            .any(|p| matches!(p.waits_for, Waiting::Frontend { .. }))
    })
}

fn store_error(e: crate::store::StoreError) -> RpcError {
    rpc_error(ConversationError::Store(e))
}

/// A conversation's refusal as the A2A error that means the same.
pub fn rpc_error(e: ConversationError) -> RpcError {
    let code = match &e {
        ConversationError::NotFound(id) => return RpcError::task_not_found(&id.to_string()),
        ConversationError::Conflict(_) => ErrorCode::UnsupportedOperation,
        ConversationError::BadInput(_) | ConversationError::TooLarge(_) => ErrorCode::InvalidParams,
        ConversationError::Run(run)
            if matches!(run.kind, RunErrorKind::BadInput | RunErrorKind::TooLarge) =>
        {
            ErrorCode::InvalidParams
        }
        ConversationError::Busy(_)
        | ConversationError::Unavailable(_)
        | ConversationError::Run(_)
        | ConversationError::Store(_) => ErrorCode::Internal,
    };
    let retry = if e.is_retry_later() {
        " (retry shortly)"
    } else {
        ""
    };
    RpcError::new(code, format!("{e}{retry}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_modes() {
        assert!(accepts_text(&[]));
        assert!(accepts_text(&[
            "application/json".into(),
            "text/plain".into()
        ]));
        assert!(!accepts_text(&["image/png".into()]));
    }
}
