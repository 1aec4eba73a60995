//! Titles: `POST …/{id}/generate_title` (one LLM call over the first user messages, stored),
//! and the same in the background after the first answer of a conversation created without a
//! title. The background one never delays or fails a run: a failure leaves the title empty and
//! logs a warning, and a title set meanwhile by the client is kept.

use std::sync::Arc;

use chrono::Utc;
use uuid::Uuid;

use super::{ConversationError, Conversations, StoredConfig, from_json};
use crate::conversation_domain::{ConversationStatus, EventKind};
use crate::store::EventQuery;

/// `max_length` when the request has none (OpenHands' default).
pub const DEFAULT_TITLE_CHARS: u32 = 50;
/// The longest title one may ask for (OpenHands' bound).
pub const MAX_TITLE_CHARS: u32 = 200;
/// Opening user messages the title is drawn from.
const OPENING_MESSAGES: u32 = 3;

impl Conversations {
    /// Generates a title of at most `max_chars` characters and stores it.
    pub async fn generate_title(
        &self,
        id: Uuid,
        max_chars: u32,
    ) -> Result<String, ConversationError> {
        let title = self.draft_title(id, max_chars).await?;
        self.store_title(id, &title, true).await?;
        Ok(title)
    }

    /// After a run: titles the conversation in the background when this was its first answer
    /// and it has no title.
    pub(super) fn title_after_first_answer(self: &Arc<Self>, id: Uuid) {
        if !self.auto_title {
            return;
        }
        let this = self.clone();
        crate::runtime::shards::spawn_background(async move {
            match this.first_answer_untitled(id).await {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => {
                    tracing::warn!(conversation = %id, error = %e, "cannot tell whether to title the conversation");
                    return;
                }
            }
            let titled = match this.draft_title(id, DEFAULT_TITLE_CHARS).await {
                Ok(title) => this.store_title(id, &title, false).await,
                Err(e) => Err(e),
            };
            if let Err(e) = titled {
                tracing::warn!(conversation = %id, error = %e, "the conversation could not be titled");
            }
        });
    }

    async fn first_answer_untitled(&self, id: Uuid) -> Result<bool, ConversationError> {
        let Some(row) = self.store.get(id).await? else {
            return Ok(false);
        };
        if row.title.is_some() || row.status != ConversationStatus::Finished {
            return Ok(false);
        }
        let answers = self
            .store
            .count_events(
                id,
                &EventQuery {
                    kind: Some(EventKind::AiAnswerEnd.to_string()),
                    ..EventQuery::default()
                },
            )
            .await?;
        Ok(answers == 1)
    }

    async fn draft_title(&self, id: Uuid, max_chars: u32) -> Result<String, ConversationError> {
        let row = self.row(id).await?;
        let config: StoredConfig = from_json(&row.config)?;
        // From the log, not the state: a compaction replaces the opening messages there.
        let opening = self
            .store
            .events(
                id,
                &EventQuery {
                    kind: Some(EventKind::UserMessage.to_string()),
                    limit: OPENING_MESSAGES,
                    ..EventQuery::default()
                },
            )
            .await?;
        let texts: Vec<String> = opening
            .items
            .iter()
            .filter_map(|e| e.payload["content"].as_str())
            .filter(|t| !t.trim().is_empty())
            .map(str::to_owned)
            .collect();
        if texts.is_empty() {
            return Err(ConversationError::Conflict(
                "the conversation has no user message to draw a title from yet".into(),
            ));
        }
        Ok(self
            .agent()
            .title(&config.run, &texts, max_chars as usize)
            .await?)
    }

    /// Stores `title`; unless `replace`, only where the conversation still has none.
    async fn store_title(
        &self,
        id: Uuid,
        title: &str,
        replace: bool,
    ) -> Result<(), ConversationError> {
        let now = Utc::now();
        let written = if replace {
            self.store.set_meta(id, Some(title), None, now).await?
        } else {
            self.store.set_title_if_unset(id, title, now).await?
        };
        if replace && !written {
            return Err(ConversationError::NotFound(id));
        }
        Ok(())
    }
}
