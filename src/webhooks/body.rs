//! The body of `POST {base_url}/conversations`: OpenHands' conversation-update shape, with the
//! keys triage has a meaning for under their names there, plus triage's own. The credential
//! fields of that shape are always null: nothing secret is ever in a body.
//!
//! The outbox keeps what a snapshot shows (`store::Snapshot`, taken in the transaction of the
//! change it reports); the body is rendered from it when it is sent, the same bytes at every
//! attempt.

use serde_json::{Value, json};

use crate::conversations::api::ConversationInfo;
use crate::conversations::info_from_snapshot;
use crate::store::{Change, Snapshot};

/// The body to send for a snapshot delivery as the outbox keeps it. A body rendered when its
/// row was written (by a version that rendered then) is sent as it is.
pub fn snapshot_body(kept: String, default_steps: u32) -> String {
    match serde_json::from_str::<Snapshot>(&kept) {
        Ok(snapshot) => conversation(&snapshot, default_steps).to_string(),
        Err(_) => kept,
    }
}

/// The snapshot for its change: the conversation as it stood then, with the status, reason
/// and last event of the change it reports.
pub fn conversation(snapshot: &Snapshot, default_steps: u32) -> Value {
    let change = &snapshot.change;
    match info_from_snapshot(snapshot, default_steps) {
        Ok(info) => from_info(&info, change),
        // An unreadable stored config or state: the snapshot still says what changed.
        Err(e) => {
            tracing::warn!(conversation = %snapshot.id, error = %e, "webhook snapshot without the conversation's settings");
            json!({
                "id": snapshot.id,
                "execution_status": change.status,
                "reason": change.reason,
                "title": snapshot.title,
                "tags": snapshot.tags,
                "created_at": snapshot.created_at,
                "updated_at": snapshot.updated_at,
                "last_event_id": change.last_event_id,
                "reply_token": change.reply_token,
            })
        }
    }
}

fn from_info(info: &ConversationInfo, change: &Change) -> Value {
    let model = info.model.clone();
    json!({
        "id": info.id,
        "execution_status": change.status,
        "reason": change.reason,
        "title": info.title,
        "tags": info.tags,
        "max_iterations": info.max_iterations,
        "stuck_detection": info.stuck_detection,
        "confirmation_policy": info.confirmation_policy,
        "agent": {
            "llm": {
                "model": model,
                "api_key": null,
                "aws_access_key_id": null,
                "aws_secret_access_key": null,
                "aws_session_token": null,
            },
        },
        "metrics": {
            "model_name": model,
            "accumulated_cost": info.stats.cost,
            "accumulated_token_usage": {
                "model": model,
                "prompt_tokens": info.stats.prompt_tokens,
                "completion_tokens": info.stats.completion_tokens,
            },
        },
        "created_at": info.created_at,
        "updated_at": info.updated_at,
        "model": model,
        "pending_actions": info.pending_actions,
        "stats": info.stats,
        "last_event_id": change.last_event_id,
        "reply_token": change.reply_token,
    })
}
