//! A2A push notifications: a task's push notification configs are the store's push targets
//! (`store::push`), each a webhook outbox receiver of its own, so a notification is written in
//! the transaction of the status change it reports and survives a crash; the webhooks' push
//! worker (`webhooks/push.rs`) sends it with this module's body: the `StreamResponse` of the
//! change (`statusUpdate`), rendered from the snapshot the outbox kept, masked.
//!
//! A config's URL comes from a client holding an API key: it may name a private or loopback
//! host (an in-cluster agent is the usual receiver), never a link-local or cloud metadata
//! address (checked on the URL here and on every address its name resolves to when sent),
//! and only the hosts of `a2a.push_allowed_hosts` when that is set. Its token and credentials
//! are sealed at rest and never shown again: Get and List answer the config without them.

use std::sync::Arc;

use chrono::Utc;
use serde_json::{Value, json};
use uuid::Uuid;

use super::jsonrpc::{ErrorCode, RpcError};
use super::tasks::{state_of, status_of_snapshot};
use super::types::{
    ListPushConfigsRequest, PushNotificationConfig, StreamResponse, TaskStatusUpdateEvent,
};
use crate::config::a2a::A2aSettings;
use crate::conversations::Conversations;
use crate::store::{PushTarget, Put, Snapshot, Store};
use crate::webhooks::push::RenderPush;

/// The content type of a notification's body (the spec's).
pub const CONTENT_TYPE: &str = "application/a2a+json";
/// Longest URL, token and credentials a config may carry.
const URL_MAX: usize = 2048;
const SECRET_MAX: usize = 4096;
/// Longest `authentication.scheme` (it is stored and shown in clear: no room for a payload).
const SCHEME_MAX: usize = 64;

pub fn not_supported() -> RpcError {
    RpcError::new(
        ErrorCode::PushNotificationNotSupported,
        "push notifications are turned off on this agent (a2a.push_notifications = false; \
         capabilities.pushNotifications is false)",
    )
}

/// A config checked, ready to be stored for a task.
pub struct Checked {
    id: String,
    url: String,
    scheme: Option<String>,
    credentials: Option<String>,
    token: Option<String>,
}

impl Checked {
    pub fn target(self, task: Uuid) -> PushTarget {
        PushTarget {
            conversation_id: task,
            id: self.id,
            url: self.url,
            scheme: self.scheme,
            credentials: self.credentials,
            token: self.token,
            created_at: Utc::now(),
        }
    }
}

/// Checks a config a client sent; `task` is the task it is for when the request names one.
pub fn check(
    settings: &A2aSettings,
    config: PushNotificationConfig,
    task: Option<&str>,
) -> Result<Checked, RpcError> {
    if !settings.push_notifications {
        return Err(not_supported());
    }
    match (config.task_id.as_deref().filter(|t| !t.is_empty()), task) {
        (Some(named), Some(task)) if named != task => {
            return Err(RpcError::invalid_params(format!(
                "the config's taskId {named:?} is not the task {task:?} the request is for"
            )));
        }
        // A message that starts a task: a config naming another would be stored for the new
        // one, not the one it names.
        (Some(named), None) => {
            return Err(RpcError::invalid_params(format!(
                "the config's taskId {named:?}: the message starts a new task (leave taskId out)"
            )));
        }
        _ => {}
    }
    let id = match config.id.filter(|id| !id.is_empty()) {
        None => Uuid::new_v4().to_string(),
        Some(id) if valid_id(&id) => id,
        Some(_) => {
            return Err(RpcError::invalid_params(
                "id: 1 to 64 letters, digits, '_', '-' or '.'",
            ));
        }
    };
    let url = check_url(settings, &config.url)?;
    let (scheme, credentials) = match config.authentication {
        None => (None, None),
        Some(auth) => {
            let scheme = auth.scheme.trim();
            if scheme.is_empty() || scheme.len() > SCHEME_MAX || !scheme.bytes().all(is_token_byte)
            {
                return Err(RpcError::invalid_params(
                    "authentication.scheme must be an HTTP authentication scheme (Bearer, Basic, …), \
                     at most 64 characters",
                ));
            }
            let credentials = auth.credentials.filter(|c| !c.is_empty());
            if let Some(c) = &credentials {
                check_header_value("authentication.credentials", c)?;
            }
            (Some(scheme.to_owned()), credentials)
        }
    };
    let token = config.token.filter(|t| !t.is_empty());
    if let Some(t) = &token {
        check_header_value("token", t)?;
    }
    Ok(Checked {
        id,
        url,
        scheme,
        credentials,
        token,
    })
}

fn valid_id(id: &str) -> bool {
    id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// RFC 9110's `token` characters.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A header value: visible ASCII and spaces, no line breaks (they would start a header of
/// the client's choosing), bounded.
fn check_header_value(key: &str, value: &str) -> Result<(), RpcError> {
    if value.len() > SECRET_MAX || !value.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
        return Err(RpcError::invalid_params(format!(
            "{key}: at most {SECRET_MAX} visible ASCII characters (it is sent as a header)"
        )));
    }
    Ok(())
}

fn check_url(settings: &A2aSettings, raw: &str) -> Result<String, RpcError> {
    let bad = |why: String| RpcError::invalid_params(format!("url: {why}"));
    if raw.len() > URL_MAX {
        return Err(bad(format!("longer than {URL_MAX} characters")));
    }
    let url = url::Url::parse(raw).map_err(|e| bad(format!("not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("must be http or https".into()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad(
            "must not carry credentials: send them in `authentication`".into(),
        ));
    }
    let Some(host) = url.host() else {
        return Err(bad("has no host".into()));
    };
    if let Some(why) = crate::runtime::destinations::refused_host(&host) {
        return Err(bad(why));
    }
    let name = url.host_str().unwrap_or_default();
    if !settings.allows_host(name.trim_start_matches('[').trim_end_matches(']')) {
        return Err(bad(format!(
            "host `{name}` is not one of a2a.push_allowed_hosts"
        )));
    }
    Ok(url.into())
}

/// A stored config as the API shows it: its token and credentials left out.
fn shown(target: &PushTarget) -> Value {
    let mut config = json!({
        "id": target.id,
        "taskId": target.conversation_id.to_string(),
        "url": target.url,
    });
    if let Some(scheme) = &target.scheme {
        config["authentication"] = json!({"scheme": scheme});
    }
    config
}

fn store_error(e: crate::store::StoreError) -> RpcError {
    RpcError::new(
        ErrorCode::Internal,
        format!("push notification configs: {e}"),
    )
}

/// Stores a checked config for `task`.
pub async fn add(
    store: &Store,
    settings: &A2aSettings,
    task: Uuid,
    checked: Checked,
) -> Result<Value, RpcError> {
    let target = checked.target(task);
    match store
        .put_push_target(&target, settings.push_max_per_task)
        .await
        .map_err(store_error)?
    {
        Put::Stored => Ok(shown(&target)),
        Put::NoConversation => Err(RpcError::task_not_found(&task.to_string())),
        Put::Full { max } => Err(RpcError::invalid_params(format!(
            "task {task} has {max} push notification configs already, the most it may have: \
             delete one first"
        ))),
    }
}

/// `GetTaskPushNotificationConfig`.
pub async fn get(store: &Store, task: Uuid, id: &str) -> Result<Value, RpcError> {
    match store.push_target(task, id).await.map_err(store_error)? {
        Some(target) => Ok(shown(&target)),
        None => Err(RpcError::new(
            ErrorCode::TaskNotFound,
            format!("task {task} has no push notification config {id:?}"),
        )),
    }
}

/// `ListTaskPushNotificationConfigs`: all of them in one page (a task has few).
pub async fn list(store: &Store, task: Uuid) -> Result<Value, RpcError> {
    let targets = store.push_targets(task).await.map_err(store_error)?;
    Ok(json!({
        "configs": targets.iter().map(shown).collect::<Vec<_>>(),
        "nextPageToken": "",
    }))
}

/// A list request's paging, checked before the task is looked up.
pub fn check_list(request: &ListPushConfigsRequest) -> Result<(), RpcError> {
    if request.page_size.is_some_and(|n| n < 0) {
        return Err(RpcError::invalid_params("pageSize must be 0 or more"));
    }
    if request.page_token.as_deref().is_some_and(|t| !t.is_empty()) {
        return Err(RpcError::invalid_params(
            "pageToken: this agent lists every config in one page and hands out none",
        ));
    }
    Ok(())
}

/// `DeleteTaskPushNotificationConfig`: idempotent; what was queued for it is not sent.
pub async fn delete(store: &Store, task: Uuid, id: &str) -> Result<Value, RpcError> {
    store
        .delete_push_target(task, id)
        .await
        .map_err(store_error)?;
    Ok(json!({}))
}

/// Refuses every push method when the feature is off.
pub fn enabled(settings: &A2aSettings) -> Result<(), RpcError> {
    if settings.push_notifications {
        Ok(())
    } else {
        Err(not_supported())
    }
}

/// The body of a notification: the `statusUpdate` of the change the snapshot reports, masked
/// as the task's other answers are.
pub fn renderer(conversations: Arc<Conversations>) -> RenderPush {
    Arc::new(move |id: Uuid, snapshot: String| {
        let conversations = conversations.clone();
        Box::pin(async move {
            let snapshot: Snapshot = serde_json::from_str(&snapshot)
                .map_err(|e| format!("unreadable stored snapshot: {e}"))?;
            let state = state_of(snapshot.change.status, snapshot.change.reason.as_deref());
            let status = status_of_snapshot(&snapshot, state);
            let response = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: id.to_string(),
                context_id: id.to_string(),
                status,
            });
            let mut value = serde_json::to_value(&response)
                .map_err(|e| format!("cannot encode the notification: {e}"))?;
            conversations.log_masker(id).await.mask(&mut value);
            Ok(value.to_string())
        })
    })
}
