//! Changing a conversation after it was created: its confirmation policy and secrets (both
//! take effect at its next run), and reading its final answer.

use std::collections::BTreeMap;

use chrono::Utc;
use uuid::Uuid;

use super::api::ConfirmationPolicy;
use super::{ConversationError, Conversations, StoredConfig, from_json, to_json};
use crate::agent::{ApprovalMode, RunState};

impl Conversations {
    pub async fn set_policy(
        &self,
        id: Uuid,
        policy: ConfirmationPolicy,
    ) -> Result<(), ConversationError> {
        self.edit_config(id, |config| {
            config.policy = policy;
            config.run.approvals = approval_mode(policy);
        })
        .await
    }

    /// Adds secrets to mask (their names are not kept: only values are masked).
    pub async fn add_secrets(
        &self,
        id: Uuid,
        secrets: BTreeMap<String, String>,
    ) -> Result<(), ConversationError> {
        self.edit_config(id, |config| {
            for value in secrets.into_values() {
                if !config.run.secrets.contains(&value) {
                    config.run.secrets.push(value);
                }
            }
        })
        .await
    }

    /// The agent's last answer to the user's last message; empty while there is none. Read
    /// from the state, which keeps what the model wrote: masked as its event was.
    pub async fn final_response(&self, id: Uuid) -> Result<String, ConversationError> {
        let row = self.row(id).await?;
        let config: StoredConfig = from_json(&row.config)?;
        let state: RunState = from_json(&row.state)?;
        let since_user = state
            .messages
            .iter()
            .rposition(|m| m.is_role("user"))
            .map_or(0, |i| i + 1);
        Ok(state.messages[since_user..]
            .iter()
            .rev()
            .find(|m| m.is_role("assistant") && m.tool_calls().is_empty())
            .map(|m| self.masker(&config).masked(m.text()))
            .unwrap_or_default())
    }

    /// A side question answered from the conversation's context; nothing is stored.
    pub async fn ask(&self, id: Uuid, question: &str) -> Result<String, ConversationError> {
        let row = self.row(id).await?;
        let config: StoredConfig = from_json(&row.config)?;
        let state: RunState = from_json(&row.state)?;
        Ok(self.agent().ask(&config.run, &state, question).await?)
    }

    async fn edit_config(
        &self,
        id: Uuid,
        edit: impl FnOnce(&mut StoredConfig),
    ) -> Result<(), ConversationError> {
        let lock = self.row_lock(id);
        let _guard = lock.lock().await;
        let row = self.row(id).await?;
        let mut config: StoredConfig = from_json(&row.config)?;
        edit(&mut config);
        if !self
            .store
            .set_config(id, &to_json(&config)?, Utc::now())
            .await?
        {
            return Err(ConversationError::NotFound(id));
        }
        Ok(())
    }
}

pub(super) fn approval_mode(policy: ConfirmationPolicy) -> ApprovalMode {
    match policy {
        ConfirmationPolicy::NeverConfirm => ApprovalMode::Refuse,
        ConfirmationPolicy::ConfirmRisky => ApprovalMode::Pause,
        ConfirmationPolicy::AlwaysConfirm => ApprovalMode::Always,
    }
}
