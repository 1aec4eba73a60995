//! What a conversation is doing (`execution_status`), and a change of it as its log records
//! it (a `conversation_state_update` event).

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConversationStatus {
    Idle,
    Running,
    /// Stopped after a step (or interrupted): `run` continues it.
    Paused,
    /// The run waits for approvals or frontend tool results.
    WaitingForConfirmation,
    Finished,
    Error,
    /// The stuck detector stopped the run.
    Stuck,
    /// OpenHands' status while a conversation is deleted: triage never sets it, but a
    /// client may filter by it.
    Deleting,
    /// What the last webhook snapshot of a deleted conversation reports; no row has it.
    Deleted,
}

impl ConversationStatus {
    pub const ALL: [ConversationStatus; 9] = [
        ConversationStatus::Idle,
        ConversationStatus::Running,
        ConversationStatus::Paused,
        ConversationStatus::WaitingForConfirmation,
        ConversationStatus::Finished,
        ConversationStatus::Error,
        ConversationStatus::Stuck,
        ConversationStatus::Deleting,
        ConversationStatus::Deleted,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ConversationStatus::Idle => "idle",
            ConversationStatus::Running => "running",
            ConversationStatus::Paused => "paused",
            ConversationStatus::WaitingForConfirmation => "waiting_for_confirmation",
            ConversationStatus::Finished => "finished",
            ConversationStatus::Error => "error",
            ConversationStatus::Stuck => "stuck",
            ConversationStatus::Deleting => "deleting",
            ConversationStatus::Deleted => "deleted",
        }
    }

    /// A run ended here for good: retention may delete it.
    pub const ENDED: [ConversationStatus; 3] = [
        ConversationStatus::Finished,
        ConversationStatus::Error,
        ConversationStatus::Stuck,
    ];

    /// A state that waits for the outside world, whose reply token a webhook may answer.
    pub fn awaits_reply(self) -> bool {
        matches!(
            self,
            ConversationStatus::WaitingForConfirmation | ConversationStatus::Paused
        )
    }
}

impl fmt::Display for ConversationStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is none of the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{name}'")]
pub struct UnknownName {
    pub what: &'static str,
    pub name: String,
}

impl FromStr for ConversationStatus {
    type Err = UnknownName;

    fn from_str(name: &str) -> Result<Self, UnknownName> {
        ConversationStatus::ALL
            .into_iter()
            .find(|s| s.as_str() == name)
            .ok_or_else(|| UnknownName {
                what: "conversation status",
                name: name.to_owned(),
            })
    }
}

/// A status change: the status entered and why. Its event's payload is
/// `{"execution_status": …, "reason": …}` (no `reason` when there is none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusChange {
    pub status: ConversationStatus,
    pub reason: Option<String>,
}

impl StatusChange {
    pub fn new(status: ConversationStatus, reason: Option<&str>) -> StatusChange {
        StatusChange {
            status,
            reason: reason.map(str::to_owned),
        }
    }

    /// The payload of the `conversation_state_update` event that records it.
    pub fn payload(&self) -> Value {
        let mut payload = json!({"execution_status": self.status});
        if let Some(reason) = &self.reason {
            payload["reason"] = Value::String(reason.clone());
        }
        payload
    }

    /// The change a stored `conversation_state_update` payload records (a copied log);
    /// `None` if it names no known status.
    pub fn of_payload(payload: &Value) -> Option<StatusChange> {
        Some(StatusChange {
            status: payload["execution_status"].as_str()?.parse().ok()?,
            reason: payload["reason"].as_str().map(str::to_owned),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The strings rows, the API, webhooks and the CLI have always used.
    const TODAY: [(ConversationStatus, &str); 9] = [
        (ConversationStatus::Idle, "idle"),
        (ConversationStatus::Running, "running"),
        (ConversationStatus::Paused, "paused"),
        (
            ConversationStatus::WaitingForConfirmation,
            "waiting_for_confirmation",
        ),
        (ConversationStatus::Finished, "finished"),
        (ConversationStatus::Error, "error"),
        (ConversationStatus::Stuck, "stuck"),
        (ConversationStatus::Deleting, "deleting"),
        (ConversationStatus::Deleted, "deleted"),
    ];

    #[test]
    fn every_status_keeps_its_string_in_every_form() {
        assert_eq!(TODAY.len(), ConversationStatus::ALL.len());
        for (status, name) in TODAY {
            assert_eq!(status.as_str(), name);
            assert_eq!(status.to_string(), name);
            assert_eq!(name.parse::<ConversationStatus>(), Ok(status));
            assert_eq!(serde_json::to_value(status).unwrap(), json!(name));
            assert_eq!(
                serde_json::from_value::<ConversationStatus>(json!(name)).unwrap(),
                status
            );
        }
    }

    #[test]
    fn an_unknown_status_is_refused_by_name() {
        let e = "Running".parse::<ConversationStatus>().unwrap_err();
        assert_eq!(e.to_string(), "unknown conversation status 'Running'");
        assert!(serde_json::from_value::<ConversationStatus>(json!("done")).is_err());
    }

    #[test]
    fn a_change_round_trips_through_its_payload() {
        let paused = StatusChange::new(ConversationStatus::Paused, Some("interrupted"));
        assert_eq!(
            paused.payload(),
            json!({"execution_status": "paused", "reason": "interrupted"})
        );
        assert_eq!(StatusChange::of_payload(&paused.payload()), Some(paused));
        let running = StatusChange::new(ConversationStatus::Running, None);
        assert_eq!(running.payload(), json!({"execution_status": "running"}));
        assert_eq!(StatusChange::of_payload(&running.payload()), Some(running));
        assert_eq!(
            StatusChange::of_payload(&json!({"execution_status": 1})),
            None
        );
    }
}
