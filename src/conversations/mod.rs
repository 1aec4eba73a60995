//! Conversations that live on the server: a stored `RunConfig`, an append-only log of the
//! runs' events and the `RunState` they fold into (`store/`). A run goes on in the background
//! while clients come and go; it can be paused, interrupted, approved, replayed, and it is
//! still there after a restart. `/api/chat` is untouched: this is a second front door onto the
//! same agent core.

pub mod api;
mod condense;
mod deltas;
pub(crate) mod events;
pub mod fields;
mod fork;
mod ownership;
mod runs;
mod settings;
mod titles;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::Utc;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::agent::{
    Agent, CurrentAgent, PendingCall, RunConfig, RunError, RunErrorKind, RunMasker, RunState,
    SecretMasker, Waiting,
};
use crate::conversation_domain::ConversationStatus;
use crate::store::{ConversationQuery, ConversationRow, Snapshot, Store, StoreError};
use api::{
    ConfirmationPolicy, ConversationInfo, ConversationPage, CreateConversation, PendingAction,
    Stats, UpdateConversation,
};

pub use deltas::DeltaFeed;
pub use fields::{ConversationId, Tags, Title};
pub use runs::LiveRun;
pub use titles::{DEFAULT_TITLE_CHARS, MAX_TITLE_CHARS};

#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    #[error("conversation {0} not found")]
    NotFound(Uuid),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    TooLarge(String),
    /// `max_running` conversations are running: retry shortly.
    #[error("{0}")]
    Busy(String),
    #[error("{0}")]
    Unavailable(String),
    /// The agent refused or failed the work (a run, a side question, a title, a summary):
    /// its kind reaches the front door, which answers it as `/api/chat` does.
    #[error("{0}")]
    Run(#[from] RunError),
    #[error("conversation store: {0}")]
    Store(#[from] StoreError),
}

impl ConversationError {
    /// There was no room for the work now (too many conversations running, the model's call
    /// slots full): the same request may succeed shortly.
    pub fn is_retry_later(&self) -> bool {
        matches!(self, ConversationError::Busy(_))
            || matches!(self, ConversationError::Run(e) if e.kind == RunErrorKind::Overloaded)
    }

    /// The same error, its message saying more.
    fn explained(self, more: impl std::fmt::Display) -> ConversationError {
        match self {
            ConversationError::Busy(why) => ConversationError::Busy(format!("{why}; {more}")),
            ConversationError::Run(e) => {
                ConversationError::Run(RunError::new(e.kind, format!("{}; {more}", e.message)))
            }
            other => other,
        }
    }
}

/// What a conversation was created with, stored beside its state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StoredConfig {
    pub run: RunConfig,
    pub policy: ConfirmationPolicy,
    pub stuck_detection: bool,
}

pub struct Conversations {
    /// The agent serving new work: each run, title and summary takes it once (`agent()`).
    serving: Arc<CurrentAgent>,
    /// `agent.max_steps`, shown when a conversation sets no `max_iterations`.
    default_steps: u32,
    store: Store,
    max_running: usize,
    /// This process, as the owner of the conversations it runs.
    replica: Uuid,
    /// How long a lease lasts unless renewed.
    lease: Duration,
    /// Runs in progress on this replica.
    live: Mutex<HashMap<Uuid, Arc<LiveRun>>>,
    /// Conversations whose lease this replica holds for a change, not a run.
    brief: Mutex<std::collections::HashSet<Uuid>>,
    /// Leases just given up, whose queued commands the maintenance task takes.
    to_settle: tokio::sync::mpsc::UnboundedSender<Uuid>,
    released: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<Uuid>>>,
    /// One writer of a conversation's row at a time.
    row_locks: Mutex<HashMap<Uuid, Arc<tokio::sync::Mutex<()>>>>,
    /// The text deltas of this replica's runs, for the streams that asked for them.
    deltas: deltas::Deltas,
    /// Title a conversation created without one after its first answer.
    auto_title: bool,
}

impl Conversations {
    pub fn new(
        serving: Arc<CurrentAgent>,
        store: Store,
        max_running: usize,
        lease: Duration,
        auto_title: bool,
    ) -> Arc<Conversations> {
        let (to_settle, released) = tokio::sync::mpsc::unbounded_channel();
        Arc::new(Conversations {
            to_settle,
            released: Mutex::new(Some(released)),
            default_steps: serving.current().options.max_steps,
            serving,
            store,
            max_running,
            replica: Uuid::new_v4(),
            lease,
            live: Mutex::default(),
            row_locks: Mutex::default(),
            brief: Mutex::default(),
            deltas: deltas::Deltas::default(),
            auto_title,
        })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The agent serving now; a run keeps the one it started with.
    fn agent(&self) -> Arc<Agent> {
        self.serving.current()
    }

    /// What the conversation's runs mask their events with (the server's secrets and the
    /// conversation's), for what it logs outside a run: the messages sent to it.
    /// The masker of conversation `id`'s log: its live run's, else one from its stored config;
    /// the server's alone when the conversation cannot be read (its secrets are then unknown).
    pub(crate) async fn log_masker(&self, id: Uuid) -> RunMasker {
        if let Some(live) = self.live_run(id) {
            return live.masker.clone();
        }
        match self
            .row(id)
            .await
            .and_then(|row| from_json::<StoredConfig>(&row.config))
        {
            Ok(config) => self.masker(&config),
            Err(_) => RunMasker::new(
                self.agent().masker.clone(),
                SecretMasker::new(Vec::<String>::new()),
            ),
        }
    }

    fn masker(&self, config: &StoredConfig) -> RunMasker {
        RunMasker::new(
            self.agent().masker.clone(),
            SecretMasker::new(config.run.secrets.iter().cloned()),
        )
    }

    pub async fn create(
        self: &Arc<Self>,
        req: CreateConversation,
    ) -> Result<ConversationInfo, ConversationError> {
        let tags = req.tags.map(Tags::into_inner).unwrap_or_default();
        let policy = req.confirmation_policy.unwrap_or_default();
        let run = RunConfig {
            model: req.model,
            additional_system_prompt: req.additional_system_prompt,
            behavior_controls: req.behavior_controls,
            response_format: req.response_format,
            frontend_tools: req.frontend_tools.unwrap_or_default(),
            approvals: settings::approval_mode(policy),
            can_pause: true,
            // Sent live to the streams that ask for them (never stored).
            text_deltas: true,
            max_steps: req.max_iterations,
            secrets: req.secrets.unwrap_or_default().into_values().collect(),
            stuck_detection: req.stuck_detection.unwrap_or(true),
        };
        // Refuse a config no run could use now, not at the first run.
        self.agent().compile(&run)?;
        let config = StoredConfig {
            stuck_detection: run.stuck_detection,
            run,
            policy,
        };
        let now = Utc::now();
        let row = ConversationRow {
            id: req.id.unwrap_or_else(Uuid::new_v4),
            title: req.title.map(Title::into_inner),
            tags,
            status: ConversationStatus::Idle,
            reason: None,
            config: to_json(&config)?,
            state: to_json(&RunState::default())?,
            state_event_id: 0,
            stats: to_json(&Stats::default())?,
            last_event_id: 0,
            created_at: now,
            updated_at: now,
        };
        self.store.create(&row).await.map_err(|e| match e {
            StoreError::Conflict(_) => {
                ConversationError::Conflict(format!("conversation {} already exists", row.id))
            }
            e => e.into(),
        })?;
        let id = row.id;
        if let Some(mut message) = req.initial_message {
            message.run = Some(message.run.unwrap_or(true));
            match self.send_message(id, message).await {
                Ok(()) => {}
                // Stored, but no room to run it now: the client needs the id to retry.
                Err(e) if e.is_retry_later() => {
                    return Err(e.explained(format_args!(
                        "conversation {id} was created with its message: \
                         POST /api/conversations/{id}/run to start it"
                    )));
                }
                // A message no run could take: nothing is left behind.
                Err(e) => {
                    let _ = self.store.delete(id).await;
                    return Err(e);
                }
            }
        }
        self.info(id).await
    }

    pub async fn info(&self, id: Uuid) -> Result<ConversationInfo, ConversationError> {
        let row = self.row(id).await?;
        self.info_of(&row)
    }

    /// Deletes conversations that ended (finished, error, stuck) more than `days` ago.
    pub async fn expire(&self, days: u32) -> Result<u64, ConversationError> {
        let cutoff = Utc::now() - chrono::Duration::days(i64::from(days));
        let gone = self
            .store
            .delete_older_than(&ConversationStatus::ENDED, cutoff)
            .await?;
        Ok(gone)
    }

    pub async fn infos(
        &self,
        ids: &[Uuid],
    ) -> Result<Vec<Option<ConversationInfo>>, ConversationError> {
        let rows = self.store.get_many(ids).await?;
        rows.iter()
            .map(|r| r.as_ref().map(|r| self.info_of(r)).transpose())
            .collect()
    }

    pub async fn search(
        &self,
        q: &ConversationQuery,
    ) -> Result<ConversationPage, ConversationError> {
        let page = self.store.search(q).await?;
        Ok(ConversationPage {
            items: page
                .items
                .iter()
                .map(|r| self.info_of(r))
                .collect::<Result<_, _>>()?,
            next_page_id: page.next_page_id,
        })
    }

    pub async fn update(
        &self,
        id: Uuid,
        req: UpdateConversation,
    ) -> Result<ConversationInfo, ConversationError> {
        // Title and tags have a statement of their own: a run's end, on any replica, never
        // writes them back.
        let updated = self
            .store
            .set_meta(id, req.title.as_deref(), req.tags.as_deref(), Utc::now())
            .await?;
        if !updated {
            return Err(ConversationError::NotFound(id));
        }
        self.info(id).await
    }

    /// Stops a run first (on whichever replica runs it); the conversation and its events
    /// are gone afterwards.
    pub async fn delete(self: &Arc<Self>, id: Uuid) -> Result<(), ConversationError> {
        self.interrupt(id).await?;
        if !self.store.delete(id).await? {
            return Err(ConversationError::NotFound(id));
        }
        Ok(())
    }

    async fn row(&self, id: Uuid) -> Result<ConversationRow, ConversationError> {
        self.store
            .get(id)
            .await?
            .ok_or(ConversationError::NotFound(id))
    }

    fn row_lock(&self, id: Uuid) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .row_locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        locks.retain(|_, l| Arc::strong_count(l) > 1);
        locks.entry(id).or_default().clone()
    }

    fn live_run(&self, id: Uuid) -> Option<Arc<LiveRun>> {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
    }
}

/// A conversation's meters: its usage ledger, and its size as of the last LLM call.
fn stats_of(state: &RunState, context_tokens: u64) -> Stats {
    let (calls, costs) = state.usage.totals();
    Stats {
        llm_calls: calls,
        prompt_tokens: costs.prompt_tokens,
        completion_tokens: costs.completion_tokens,
        cost: costs.total_cost,
        context_tokens,
    }
}

fn to_json<T: Serialize>(value: &T) -> Result<serde_json::Value, ConversationError> {
    serde_json::to_value(value)
        .map_err(|e| ConversationError::Unavailable(format!("cannot encode: {e}")))
}

/// Read in place: `from_value` would take a copy of the whole tree first (a conversation's
/// state holds its history).
pub(crate) fn from_json<T: serde::de::DeserializeOwned>(
    value: &serde_json::Value,
) -> Result<T, ConversationError> {
    T::deserialize(value)
        .map_err(|e| ConversationError::Unavailable(format!("unreadable stored conversation: {e}")))
}

impl Conversations {
    fn info_of(&self, row: &ConversationRow) -> Result<ConversationInfo, ConversationError> {
        info_from_row(row, self.default_steps)
    }
}

/// What `GET /api/conversations/{id}` shows of a stored row (webhook snapshots render it
/// too); `default_steps` is shown when the conversation sets no `max_iterations`.
pub fn info_from_row(
    row: &ConversationRow,
    default_steps: u32,
) -> Result<ConversationInfo, ConversationError> {
    let config: StoredConfig = from_json(&row.config)?;
    let state: RunState = from_json(&row.state)?;
    Ok(ConversationInfo {
        id: row.id,
        title: row.title.clone(),
        tags: row.tags.clone(),
        execution_status: row.status,
        reason: row.reason.clone(),
        model: config.run.model.clone(),
        confirmation_policy: config.policy,
        max_iterations: config.run.max_steps.unwrap_or(default_steps),
        stuck_detection: config.stuck_detection,
        pending_actions: pending_actions(&state.pending),
        stats: from_json(&row.stats).unwrap_or_default(),
        last_event_id: row.last_event_id,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

/// What a webhook snapshot shows: the conversation as the outbox kept it when the change
/// was written, with that change's status, reason and last event.
pub fn info_from_snapshot(
    snapshot: &Snapshot,
    default_steps: u32,
) -> Result<ConversationInfo, ConversationError> {
    let config: StoredConfig = from_json(&snapshot.config)?;
    let pending: Option<Vec<PendingCall>> = from_json(&snapshot.pending)?;
    let change = &snapshot.change;
    Ok(ConversationInfo {
        id: snapshot.id,
        title: snapshot.title.clone(),
        tags: snapshot.tags.clone(),
        execution_status: change.status,
        reason: change.reason.clone(),
        model: config.run.model.clone(),
        confirmation_policy: config.policy,
        max_iterations: config.run.max_steps.unwrap_or(default_steps),
        stuck_detection: config.stuck_detection,
        pending_actions: pending_actions(&pending.unwrap_or_default()),
        stats: from_json(&snapshot.stats).unwrap_or_default(),
        last_event_id: change.last_event_id,
        created_at: snapshot.created_at,
        updated_at: snapshot.updated_at,
    })
}

fn pending_actions(pending: &[PendingCall]) -> Vec<PendingAction> {
    pending
        .iter()
        .map(|p| match &p.waits_for {
            Waiting::Approval {
                description,
                params,
            } => PendingAction {
                tool_call_id: p.call.id.clone(),
                tool_name: p.call.function.name.clone(),
                arguments: params.clone(),
                waits_for: "approval".into(),
                description: Some(description.clone()),
            },
            Waiting::Frontend { arguments } => PendingAction {
                tool_call_id: p.call.id.clone(),
                tool_name: p.call.function.name.clone(),
                arguments: arguments.clone(),
                waits_for: "frontend_tool".into(),
                description: None,
            },
        })
        .collect()
}
