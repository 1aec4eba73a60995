//! `POST …/{id}/fork`: an idle copy of a conversation (its config and secrets) with its events
//! up to one of them copied under the same ids, and the state they fold into. The source may
//! be running: only committed events are read, and the log is the truth of what happened, so
//! a fork of a running investigation is as valid as a fork of a finished one (a call cut at
//! the fork point gets an error result, as after a crash).

use chrono::Utc;
use uuid::Uuid;

use super::api::{ConversationInfo, ForkConversation, Stats};
use super::{ConversationError, Conversations, Tags, Title, events, from_json, stats_of, to_json};
use crate::agent::{RunState, missing_results};
use crate::conversation_domain::{ConversationStatus, EventKind, StatusChange};
use crate::store::{ConversationRow, EventQuery, NewEvent, StoreError};
use crate::wire::Message;

/// Events copied per read and append.
const COPY_PAGE: u32 = 1000;

impl Conversations {
    pub async fn fork(
        &self,
        source: Uuid,
        req: ForkConversation,
    ) -> Result<ConversationInfo, ConversationError> {
        let src = self.row(source).await?;
        let upto = req.from_event_id.unwrap_or(src.last_event_id);
        if upto > src.last_event_id {
            return Err(ConversationError::BadInput(format!(
                "from_event_id {upto}: conversation {source} has {} events",
                src.last_event_id
            )));
        }
        let snapshot: RunState = from_json(&src.state)?;
        // The snapshot is the state as of `state_event_id`: from there the log's events are
        // folded on; a fork from an earlier event folds the log from the start.
        let fold_after = (upto >= src.state_event_id).then_some(src.state_event_id);
        let mut state = match fold_after {
            Some(_) => snapshot.clone(),
            None => RunState {
                // The runs' message indices count the system prompt, regenerated at index 0.
                messages: snapshot
                    .messages
                    .first()
                    .filter(|m| m.is_role("system"))
                    .map(|_| Message::system(String::new()))
                    .into_iter()
                    .collect(),
                ..RunState::default()
            },
        };
        let now = Utc::now();
        let mut row = ConversationRow {
            id: req.id.unwrap_or_else(Uuid::new_v4),
            title: req
                .title
                .map(Title::into_inner)
                .or_else(|| src.title.clone()),
            tags: req.tags.map_or_else(|| src.tags.clone(), Tags::into_inner),
            status: ConversationStatus::Idle,
            reason: Some(format!("forked from {source} at event {upto}")),
            config: src.config.clone(),
            state: to_json(&RunState::default())?,
            state_event_id: 0,
            stats: to_json(&Stats::default())?,
            last_event_id: 0,
            created_at: now,
            updated_at: now,
        };
        let id = row.id;
        // Nothing runs on or is sent to the fork (on this replica) before it is complete.
        let lock = self.row_lock(id);
        let _guard = lock.lock().await;
        self.store.create(&row).await.map_err(|e| match e {
            StoreError::Conflict(_) => {
                ConversationError::Conflict(format!("conversation {id} already exists"))
            }
            e => e.into(),
        })?;
        let copied = match self
            .copy_log(source, id, upto, fold_after, &mut state)
            .await
        {
            Ok(()) => self
                .store
                .append(
                    id,
                    vec![events::state_update(
                        ConversationStatus::Idle,
                        row.reason.as_deref(),
                    )],
                )
                .await
                .map_err(ConversationError::from),
            Err(e) => Err(e),
        };
        let boundary = match copied {
            Ok(stored) => stored,
            Err(e) => {
                // A fork is whole or absent.
                let _ = self.store.delete(id).await;
                return Err(e);
            }
        };
        state.pending.clear();
        state.steps = 0;
        let why = "the conversation was forked before this call had a result";
        for (at, message) in missing_results(&state.messages, &[], why) {
            state.messages.insert(at, message);
        }
        let stats = if req.reset_metrics.unwrap_or(true) {
            state.usage = RunState::default().usage;
            Stats::default()
        } else {
            state.usage = snapshot.usage;
            let source_stats: Stats = from_json(&src.stats).unwrap_or_default();
            stats_of(&state, source_stats.context_tokens)
        };
        row.state = to_json(&state)?;
        row.state_event_id = boundary.last().map_or(upto, |e| e.id);
        row.stats = to_json(&stats)?;
        row.updated_at = Utc::now();
        self.store.update(&row).await?;
        self.info(id).await
    }

    /// Appends the source's events 1..=`upto` to `fork` (same ids: both logs are gap-free from
    /// 1), folding those after `fold_after` (all without it) into `state`.
    async fn copy_log(
        &self,
        source: Uuid,
        fork: Uuid,
        upto: u64,
        fold_after: Option<u64>,
        state: &mut RunState,
    ) -> Result<(), ConversationError> {
        let mut copied = 0;
        while copied < upto {
            let query = EventQuery {
                after: Some(copied),
                limit: COPY_PAGE,
                ..EventQuery::default()
            };
            let page = self.store.events(source, &query).await?;
            let mut batch = Vec::with_capacity(page.items.len());
            for e in page.items.into_iter().take_while(|e| e.id <= upto) {
                if e.id != copied + 1 {
                    break; // not gap-free: the source is going away
                }
                if fold_after.is_none_or(|after| e.id > after) {
                    events::fold(state, e.kind, &e.payload);
                }
                copied = e.id;
                // A copied status change owes its snapshot, as the original did.
                let status = (e.kind == EventKind::ConversationStateUpdate)
                    .then(|| StatusChange::of_payload(&e.payload))
                    .flatten();
                batch.push(NewEvent {
                    kind: e.kind,
                    source: e.source,
                    timestamp: e.timestamp,
                    payload: e.payload,
                    status,
                });
            }
            if batch.is_empty() {
                break;
            }
            let stored = self.store.append(fork, batch).await?;
            if stored.last().map(|e| e.id) != Some(copied) {
                return Err(ConversationError::Conflict(format!(
                    "events were added to {fork} while it was being copied"
                )));
            }
        }
        if copied != upto {
            return Err(ConversationError::NotFound(source));
        }
        Ok(())
    }
}
