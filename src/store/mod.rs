//! The conversation store (issue 14): conversation rows and their append-only event logs, on
//! SQLite (the default, one file) or PostgreSQL (several replicas), through sqlx with runtime
//! queries. docs/architecture.md describes what it keeps and for whom.
//!
//! [`db`] holds the two pools and opens them, [`conversations`] and [`events`] the queries,
//! [`appender`] the group-commit task every append goes through, [`listener`] PostgreSQL's
//! LISTEN/NOTIFY, [`leases`] which replica runs a conversation and the commands queued for
//! it, [`paging`] the opaque page ids, [`statement`] a write as SQL and its values,
//! [`outbox`] and [`deliveries`] the webhook deliveries written with the changes they report
//! and their sending, [`push`] the push targets clients add as receivers of their own,
//! [`replies`] the reply tokens of webhooks in, [`sealing`] the conversation
//! secrets sealed at rest and [`reseal`] sealing rows written before that or under an older
//! key.

mod appender;
mod conversations;
mod db;
mod deliveries;
mod events;
mod leases;
mod listener;
pub mod outbox;
mod paging;
pub mod push;
mod replies;
mod reseal;
pub mod sealing;
mod statement;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::conversation_domain::{ConversationStatus, EventKind, StatusChange};
use db::Db;
pub use db::{create_private_dir, sqlite_companions, sqlite_file};
pub use deliveries::{Delivery, DeliveryQuery, Failure, QueueStats, RetryError};
pub use leases::{Lease, QueuedCommand};
pub use outbox::{Change, OutboxPlan, OutboxReceiver, Snapshot};
pub use push::{PushTarget, Put};
pub use replies::{Inbound, ReplyState, ReplyToken, token_hash};
pub use reseal::Resealed;
pub use sealing::{SealError, SecretKeys};

/// The PostgreSQL channel of "conversation X has events up to N" (payload `uuid:seq`).
pub const NOTIFY_CHANNEL: &str = "triage_events";
/// The PostgreSQL channel of "a command is queued for conversation X" (payload `uuid`).
pub const COMMANDS_CHANNEL: &str = "triage_commands";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("conversation {0} already exists")]
    Conflict(String),
    #[error("conversation not found")]
    NotFound,
    #[error("the conversation has reached its limit of {max} events")]
    TooManyEvents { max: u64 },
    #[error("database error: {0}")]
    Database(String),
    #[error("invalid store configuration: {0}")]
    Config(String),
    /// A `page_id` this store did not hand out (or one for another sort order).
    #[error("invalid page_id")]
    InvalidPageId,
    /// The conversation's secrets do not open with the configured keys: the row is refused
    /// whole rather than read without them.
    #[error("conversation {id}: its secrets cannot be read: {reason}")]
    Sealed { id: Uuid, reason: SealError },
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        StoreError::Database(e.to_string())
    }
}

#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// An append beyond it fails with `TooManyEvents`.
    pub max_events_per_conversation: u64,
    /// How long the appender waits after the first queued append to gather more into one
    /// transaction. Zero commits at once: appends arriving during a commit still share the
    /// next one, which is what batches them under load without adding latency when idle.
    pub commit_interval: Duration,
    /// The webhook receivers every change owes deliveries to (`outbox`); none: no outbox rows.
    pub outbox: Option<Arc<OutboxPlan>>,
    /// What conversation secrets are sealed with (`sealing`); the default is a key of this
    /// process alone, which is enough for tests and in-memory databases only.
    pub keys: Arc<SecretKeys>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            max_events_per_conversation: 100_000,
            commit_interval: Duration::ZERO,
            outbox: None,
            keys: Arc::new(SecretKeys::ephemeral()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConversationRow {
    pub id: Uuid,
    pub title: Option<String>,
    pub tags: BTreeMap<String, String>,
    pub status: ConversationStatus,
    pub reason: Option<String>,
    /// The RunConfig (+ service settings); may hold secrets: never logged.
    pub config: serde_json::Value,
    /// The RunState snapshot as of `state_event_id`.
    pub state: serde_json::Value,
    pub state_event_id: u64,
    pub stats: serde_json::Value,
    /// Maintained by `append`; `create` stores 0 whatever the row says.
    pub last_event_id: u64,
    /// Stored to the microsecond.
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub kind: EventKind,
    pub source: String,
    pub timestamp: DateTime<Utc>,
    pub payload: serde_json::Value,
    /// The status change a `conversation_state_update` records, as its writer knew it: the
    /// store never reads it back out of the payload. Not stored apart from the payload.
    pub status: Option<StatusChange>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredEvent {
    pub id: u64,
    pub kind: EventKind,
    pub source: String,
    /// Stored to the microsecond (`append` returns it truncated, as reads will).
    pub timestamp: DateTime<Utc>,
    pub payload: serde_json::Value,
}

#[derive(Debug, Clone, Default)]
pub struct EventQuery {
    pub page_id: Option<String>,
    /// 1 ..= 10,000 (0 counts as 1).
    pub limit: u32,
    pub kind: Option<String>,
    pub source: Option<String>,
    /// A substring of the payload's JSON text, ASCII case-insensitive.
    pub body: Option<String>,
    pub descending: bool,
    pub timestamp_gte: Option<DateTime<Utc>>,
    pub timestamp_lt: Option<DateTime<Utc>>,
    /// Only events with a greater id (SSE replay from `Last-Event-ID`).
    pub after: Option<u64>,
}

#[derive(Debug, Clone, Default)]
pub struct ConversationQuery {
    pub page_id: Option<String>,
    /// 1 ..= 10,000 (0 counts as 1).
    pub limit: u32,
    pub status: Option<String>,
    pub sort: SortOrder,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SortOrder {
    CreatedAt,
    #[default]
    CreatedAtDesc,
    UpdatedAt,
    UpdatedAtDesc,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Opaque to clients; `None` on the last page.
    pub next_page_id: Option<String>,
}

/// The store: one per process; clones share it.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

/// A store that background tasks hold without keeping it open.
#[derive(Clone)]
pub struct WeakStore(std::sync::Weak<Inner>);

impl WeakStore {
    pub fn upgrade(&self) -> Option<Store> {
        self.0.upgrade().map(|inner| Store { inner })
    }
}

struct Inner {
    db: Db,
    options: StoreOptions,
    appends: mpsc::Sender<appender::Command>,
    announcements: broadcast::Sender<(Uuid, u64)>,
    commands: broadcast::Sender<Uuid>,
    /// Bumped when this replica writes outbox rows: wakes its webhook workers.
    outbox_written: watch::Sender<u64>,
    /// The database's clock minus this machine's, in µs (`Store::now`).
    clock_offset_us: std::sync::atomic::AtomicI64,
    appender: Mutex<Option<JoinHandle<()>>>,
    listener: Option<JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The appender ends by itself once its channel closes; the listener would not.
        if let Some(listener) = &self.listener {
            listener.abort();
        }
    }
}

/// Announcements a subscriber may fall behind by before it is told it lagged.
const ANNOUNCEMENT_BUFFER: usize = 4096;

impl Store {
    /// `sqlite://PATH` (file and parent directories created, WAL) or `postgres://…`; runs the
    /// backend's embedded migrations.
    pub async fn open(database_url: &str, options: StoreOptions) -> Result<Store, StoreError> {
        if options.max_events_per_conversation == 0 {
            return Err(StoreError::Config(
                "max_events_per_conversation must be at least 1".into(),
            ));
        }
        let db = Db::open(database_url).await?;
        let (announcements, _) = broadcast::channel(ANNOUNCEMENT_BUFFER);
        let (outbox_written, _) = watch::channel(0);
        let (appends, appender) = appender::spawn(
            db.clone(),
            options.clone(),
            announcements.clone(),
            outbox_written.clone(),
        );
        let (commands, _) = broadcast::channel(ANNOUNCEMENT_BUFFER);
        let listener = match &db {
            Db::Postgres(pool) => Some(listener::spawn(
                pool.clone(),
                announcements.clone(),
                commands.clone(),
            )),
            Db::Sqlite(_) => None,
        };
        Ok(Store {
            inner: Arc::new(Inner {
                db,
                options,
                appends,
                announcements,
                commands,
                outbox_written,
                clock_offset_us: std::sync::atomic::AtomicI64::new(0),
                appender: Mutex::new(Some(appender)),
                listener,
            }),
        })
    }

    pub fn downgrade(&self) -> WeakStore {
        WeakStore(Arc::downgrade(&self.inner))
    }

    pub fn backend(&self) -> Backend {
        match self.inner.db {
            Db::Sqlite(_) => Backend::Sqlite,
            Db::Postgres(_) => Backend::Postgres,
        }
    }

    pub fn options(&self) -> &StoreOptions {
        &self.inner.options
    }

    /// Commits every append queued before it, then stops the appender and closes the pool:
    /// later appends fail with `Database`.
    pub async fn close(&self) {
        let (ack, acked) = oneshot::channel();
        if self
            .inner
            .appends
            .send(appender::Command::Close(ack))
            .await
            .is_ok()
        {
            let _ = acked.await;
        }
        let task = self.inner.appender.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            let _ = task.await;
        }
        if let Some(listener) = &self.inner.listener {
            listener.abort();
        }
        self.inner.db.close().await;
    }

    /// Appends in order and returns after the commit (through the group-commit appender),
    /// with the ids assigned; then announces (id, last id) to subscribers.
    pub async fn append(
        &self,
        id: Uuid,
        events: Vec<NewEvent>,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.append_replying(id, events, None).await
    }

    /// `append`, handing out `token` for the state these events announce: its hash is
    /// stored on the conversation in the same transaction, and the token itself goes only to
    /// the webhook deliveries of these events (an `approval_required` event's copy, the
    /// status snapshot), never to the log.
    pub async fn append_replying(
        &self,
        id: Uuid,
        events: Vec<NewEvent>,
        token: Option<ReplyToken>,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, answer) = oneshot::channel();
        let stopped = || StoreError::Database("the event appender has stopped".into());
        self.inner
            .appends
            .send(appender::Command::Append {
                id,
                events,
                token,
                reply,
            })
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// "Conversation X has events up to N": every append on this replica and, on PostgreSQL,
    /// other replicas' too. An announcement may repeat or arrive after a later one for the
    /// same conversation (local and NOTIFY paths race): keep the highest. A receiver that
    /// falls behind gets `Lagged` and should re-read from the store.
    pub fn subscribe(&self) -> broadcast::Receiver<(Uuid, u64)> {
        self.inner.announcements.subscribe()
    }

    /// Changes when this replica queues webhook deliveries (other replicas' are found by
    /// polling).
    pub fn subscribe_outbox(&self) -> watch::Receiver<u64> {
        self.inner.outbox_written.subscribe()
    }

    fn wake_outbox(&self) {
        self.inner
            .outbox_written
            .send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// Microseconds since the epoch: the stored form of every timestamp.
fn to_micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

fn from_micros(us: i64) -> Result<DateTime<Utc>, StoreError> {
    DateTime::from_timestamp_micros(us)
        .ok_or_else(|| StoreError::Database(format!("stored timestamp {us} is out of range")))
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// Ids and counts are `BIGINT`: values beyond i64 cannot be stored or matched.
fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn page_limit(limit: u32) -> i64 {
    i64::from(limit.clamp(1, 10_000))
}

#[cfg(test)]
mod tests;
