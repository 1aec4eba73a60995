//! A2A 1.0 (the Agent2Agent protocol), JSON-RPC binding: a front door over the server's
//! conversations. A task is a conversation (its id is also its context id); `SendMessage`
//! starts one or sends it the next message, or the approvals it waits for
//! (`TASK_STATE_INPUT_REQUIRED`); `CancelTask` is its interrupt; streams follow its stored
//! log. No second agent loop and no approval logic of its own: `conversations/` does it all.
//! Push notification configs are push targets of the webhook outbox (`push.rs`). The HTTP
//! edge is `http/a2a.rs`.

mod card;
mod follow;
mod input;
pub mod jsonrpc;
mod methods;
pub mod push;
mod tasks;
pub mod types;

use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::{Value, json};

pub use card::{PROTOCOL_VERSION, card};
pub use follow::Update;
use jsonrpc::{ErrorCode, RpcError, params};
pub use methods::Tasks;
use tasks::{View, state_of};
use types::{
    GetTaskRequest, ListPushConfigsRequest, ListTasksRequest, PushConfigRequest,
    PushNotificationConfig, SendMessageRequest, TaskIdRequest,
};

/// A method's answer: one JSON result, or a stream of results (its first the task).
pub enum Reply {
    Result(Value),
    Stream(Pin<Box<dyn Stream<Item = Update> + Send>>),
}

/// How long a blocking `SendMessage` waits for its task, and how often a quiet stream says
/// it is still there.
#[derive(Debug, Clone, Copy)]
pub struct Waits {
    pub blocking: Duration,
    pub idle: Duration,
}

/// The `A2A-Version` a request names (header or query parameter): 1.0 (any patch) is
/// spoken; none or an empty one means 0.3, which is not.
pub fn check_version(version: Option<&str>) -> Result<(), RpcError> {
    let version = version.map(str::trim).unwrap_or_default();
    let mut numbers = version.split('.');
    let (major, minor) = (numbers.next(), numbers.next());
    if major == Some("1") && minor == Some("0") && numbers.all(|n| n.parse::<u32>().is_ok()) {
        return Ok(());
    }
    let named = if version.is_empty() {
        "no A2A-Version header, which means 0.3,".to_owned()
    } else {
        format!("A2A-Version {version:?}")
    };
    Err(RpcError::new(
        ErrorCode::VersionNotSupported,
        format!("{named} is not supported: this agent speaks A2A {PROTOCOL_VERSION} (send the header A2A-Version: {PROTOCOL_VERSION})"),
    )
    .with("requestedVersion", version)
    .with("supportedVersions", PROTOCOL_VERSION))
}

/// Runs one method.
pub async fn call(
    tasks: &Tasks,
    method: &str,
    raw: Value,
    waits: Waits,
) -> Result<Reply, RpcError> {
    match method {
        "SendMessage" => {
            let sent = tasks.send(params::<SendMessageRequest>(raw)?).await?;
            let row = if sent.return_immediately {
                tasks.existing(&sent.task.to_string()).await?.1
            } else {
                tasks.settled(sent.task, waits.blocking).await?
            };
            let task = tasks.task_json(&row, sent.view).await?;
            Ok(Reply::Result(json!({"task": task})))
        }
        "SendStreamingMessage" => {
            let sent = tasks.send(params::<SendMessageRequest>(raw)?).await?;
            stream_task(tasks, &sent.task.to_string(), sent.view, waits).await
        }
        "SubscribeToTask" => {
            let request = params::<TaskIdRequest>(raw)?;
            let (_, row) = tasks.existing(&request.id).await?;
            let state = state_of(row.status, row.reason.as_deref());
            if state.is_terminal() {
                return Err(RpcError::new(
                    ErrorCode::UnsupportedOperation,
                    format!(
                        "task {} is {state:?}: it has no more updates (GetTask reads it)",
                        request.id
                    ),
                )
                .with("taskId", request.id));
            }
            stream_task(tasks, &request.id, View::new(None, true)?, waits).await
        }
        "GetTask" => {
            let request = params::<GetTaskRequest>(raw)?;
            Ok(Reply::Result(
                tasks.get(&request.id, request.history_length).await?,
            ))
        }
        "ListTasks" => Ok(Reply::Result(
            tasks.list(params::<ListTasksRequest>(raw)?).await?,
        )),
        "CancelTask" => {
            let request = params::<TaskIdRequest>(raw)?;
            Ok(Reply::Result(tasks.cancel(&request.id).await?))
        }
        "CreateTaskPushNotificationConfig" => {
            let config = params::<PushNotificationConfig>(raw)?;
            let Some(task) = config.task_id.clone() else {
                return Err(RpcError::invalid_params("taskId is required"));
            };
            let checked = push::check(tasks.push_settings(), config, Some(&task))?;
            let (id, _) = tasks.existing(&task).await?;
            Ok(Reply::Result(tasks.add_push(id, checked).await?))
        }
        "GetTaskPushNotificationConfig" => {
            let request = params::<PushConfigRequest>(raw)?;
            push::enabled(tasks.push_settings())?;
            let (id, _) = tasks.existing(&request.task_id).await?;
            let store = tasks.conversations().store();
            Ok(Reply::Result(push::get(store, id, &request.id).await?))
        }
        "ListTaskPushNotificationConfigs" => {
            let request = params::<ListPushConfigsRequest>(raw)?;
            push::enabled(tasks.push_settings())?;
            push::check_list(&request)?;
            let (id, _) = tasks.existing(&request.task_id).await?;
            let store = tasks.conversations().store();
            Ok(Reply::Result(push::list(store, id).await?))
        }
        "DeleteTaskPushNotificationConfig" => {
            let request = params::<PushConfigRequest>(raw)?;
            push::enabled(tasks.push_settings())?;
            let (id, _) = tasks.existing(&request.task_id).await?;
            let store = tasks.conversations().store();
            Ok(Reply::Result(push::delete(store, id, &request.id).await?))
        }
        "GetExtendedAgentCard" => Err(RpcError::new(
            ErrorCode::ExtendedAgentCardNotConfigured,
            "this agent has no extended card: /.well-known/agent-card.json is the whole card",
        )),
        other => {
            let hint = if other.contains('/') {
                " (that is an A2A 0.3 name: 1.0 names methods like SendMessage and GetTask)"
            } else {
                ""
            };
            Err(RpcError::new(
                ErrorCode::MethodNotFound,
                format!("Method not found: {other:?}{hint}"),
            ))
        }
    }
}

/// A task's stream: the task as it stands, then its updates until it settles.
async fn stream_task(tasks: &Tasks, id: &str, view: View, waits: Waits) -> Result<Reply, RpcError> {
    let (uuid, row) = tasks.existing(id).await?;
    let task = tasks.task_json(&row, view).await?;
    let first = futures::stream::once(std::future::ready(Update::Response(json!({"task": task}))));
    if state_of(row.status, row.reason.as_deref()).is_settled() {
        return Ok(Reply::Stream(Box::pin(first)));
    }
    let rest = follow::follow(tasks.clone(), uuid, row.last_event_id, waits.idle);
    Ok(Reply::Stream(Box::pin(first.chain(rest))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert!(check_version(Some("1.0")).is_ok());
        assert!(check_version(Some(" 1.0.1 ")).is_ok());
        for refused in [
            None,
            Some(""),
            Some("0.3"),
            Some("1.1"),
            Some("1"),
            Some("1.0.x"),
        ] {
            let e = check_version(refused).unwrap_err();
            assert_eq!(e.code, ErrorCode::VersionNotSupported, "{refused:?}");
        }
        assert!(check_version(None).unwrap_err().message.contains("0.3"));
    }
}
