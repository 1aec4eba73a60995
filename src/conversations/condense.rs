//! `POST …/{id}/condense`: the conversation's history summarised now, as a run's compaction
//! would, its events appended to the log and the state saved. Refused while a run owns the
//! state (running) and while calls wait for a confirmation (the summary would drop the message
//! that asked for them, leaving their results without a call).

use std::sync::Arc;

use chrono::Utc;
use uuid::Uuid;

use super::api::Stats;
use super::ownership::Hold;
use super::{ConversationError, Conversations, StoredConfig, events, from_json, stats_of, to_json};
use crate::agent::{AgentEvent, Condensed, RunState};
use crate::conversation_domain::ConversationStatus;
use crate::store::ConversationRow;

impl Conversations {
    /// `Ok(true)` when the history was replaced by its summary, `Ok(false)` when the summary
    /// was not smaller (the history is kept; its cost is counted).
    pub async fn condense(self: &Arc<Self>, id: Uuid) -> Result<bool, ConversationError> {
        let before = self.row(id).await?;
        if self.live_run(id).is_some() || before.status == ConversationStatus::Running {
            return Err(ConversationError::Conflict(
                "the conversation is running: pause or interrupt it first, or wait until it ends"
                    .into(),
            ));
        }
        if before.status == ConversationStatus::WaitingForConfirmation {
            return Err(ConversationError::Conflict(
                "the conversation waits for a confirmation: answer it first (a summary would \
                 drop the calls it waits on)"
                    .into(),
            ));
        }
        let config: StoredConfig = from_json(&before.config)?;
        let state: RunState = from_json(&before.state)?;
        if !state.messages.iter().any(|m| !m.is_role("system")) {
            return Err(ConversationError::Conflict(
                "the conversation has no history to condense yet".into(),
            ));
        }
        // The LLM call happens without the row lock: a run or a message may come meanwhile,
        // and then wins (checked below), rather than waiting for a summary.
        let condensed = self.agent().condense(&config.run, state).await?;
        let lock = self.row_lock(id);
        let _guard = lock.lock().await;
        // The lease, so no replica starts a run on the history being replaced.
        if let Hold::Elsewhere = self.hold(id).await? {
            return Err(changed_meanwhile());
        }
        let saved = self.save_condensed(id, &before, condensed).await;
        self.release(id).await;
        saved
    }

    async fn save_condensed(
        &self,
        id: Uuid,
        before: &ConversationRow,
        condensed: Condensed,
    ) -> Result<bool, ConversationError> {
        let mut row = self.row(id).await?;
        if row.last_event_id != before.last_event_id
            || row.status != before.status
            || self.live_run(id).is_some()
        {
            return Err(changed_meanwhile());
        }
        let context_tokens = condensed
            .events
            .iter()
            .rev()
            .find_map(|e| match e {
                AgentEvent::Usage(u) => Some(u64::from(u.tokens.total_tokens)),
                _ => None,
            })
            .unwrap_or_else(|| {
                from_json::<Stats>(&row.stats)
                    .unwrap_or_default()
                    .context_tokens
            });
        let logged: Vec<_> = condensed
            .events
            .into_iter()
            .filter_map(events::stored)
            .collect();
        let stored = self.store.append(id, logged).await?;
        row.state = to_json(&condensed.state)?;
        if let Some(last) = stored.last() {
            row.state_event_id = last.id;
        }
        row.stats = to_json(&stats_of(&condensed.state, context_tokens))?;
        row.updated_at = Utc::now();
        self.store.update(&row).await?;
        Ok(condensed.compacted)
    }
}

fn changed_meanwhile() -> ConversationError {
    ConversationError::Conflict(
        "the conversation changed while it was being condensed (a message or a run came in): \
         nothing was changed, try again"
            .into(),
    )
}
