//! Push targets: URLs a client asked to be told of a conversation's status changes at (A2A's
//! push notification configs). Each target is a webhook outbox receiver of its own, named
//! [`receiver_name`]: the appender writes it a snapshot delivery with every status change of
//! its conversation, in the change's transaction (`outbox.rs`), so a notification is as
//! durable, ordered and retried as a configured receiver's. The token and credentials sent
//! with them are sealed at rest like conversation secrets, bound to the conversation.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::db::{on_pool, placeholders};
use super::{Store, StoreError, from_micros, to_micros};

/// Every push target's receiver name starts so; a configured receiver's name cannot (no `/`).
pub const RECEIVER_PREFIX: &str = "push/";
/// The first name past every push receiver's in byte order (`'/' + 1`): with the prefix, the
/// range a query selects them by.
pub(super) const RECEIVER_END: &str = "push0";

/// The outbox receiver a target's deliveries are queued under.
pub fn receiver_name(conversation_id: Uuid, target_id: &str) -> String {
    format!("{RECEIVER_PREFIX}{conversation_id}/{target_id}")
}

#[derive(Clone, PartialEq)]
pub struct PushTarget {
    pub conversation_id: Uuid,
    pub id: String,
    pub url: String,
    /// The `Authorization` scheme (`Bearer`, `Basic`, …) sent with `credentials`.
    pub scheme: Option<String>,
    pub credentials: Option<String>,
    /// Sent as `X-A2A-Notification-Token`, so the receiver knows the notification is for it.
    pub token: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// Without the secrets.
impl std::fmt::Debug for PushTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushTarget")
            .field("conversation_id", &self.conversation_id)
            .field("id", &self.id)
            .field("url", &self.url)
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

impl PushTarget {
    pub fn receiver(&self) -> String {
        receiver_name(self.conversation_id, &self.id)
    }
}

/// What storing a target came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Put {
    Stored,
    /// The conversation does not exist.
    NoConversation,
    /// It has `max` targets already (replacing one of them is still allowed).
    Full {
        max: usize,
    },
}

#[derive(sqlx::FromRow)]
struct Record {
    conversation_id: Uuid,
    target_id: String,
    url: String,
    scheme: Option<String>,
    secrets: String,
    created_at: i64,
}

const COLUMNS: &str = "conversation_id, target_id, url, scheme, secrets, created_at";

impl Store {
    fn seal_target(&self, target: &PushTarget) -> Result<String, StoreError> {
        let values = [&target.token, &target.credentials].map(|v| match v {
            Some(s) => Value::String(s.clone()),
            None => Value::Null,
        });
        let envelope = self
            .inner
            .options
            .keys
            .seal(target.conversation_id, &values)
            .map_err(|reason| StoreError::Sealed {
                id: target.conversation_id,
                reason,
            })?;
        Ok(envelope.to_string())
    }

    fn open_target(&self, record: Record) -> Result<PushTarget, StoreError> {
        let id = record.conversation_id;
        let sealed = |reason| StoreError::Sealed { id, reason };
        let envelope: Value = serde_json::from_str(&record.secrets)
            .map_err(|e| StoreError::Database(format!("push target {id}: {e}")))?;
        let values = self
            .inner
            .options
            .keys
            .open(id, &envelope)
            .map_err(sealed)?;
        let text = |i: usize| values.get(i).and_then(Value::as_str).map(str::to_owned);
        Ok(PushTarget {
            conversation_id: id,
            id: record.target_id,
            url: record.url,
            scheme: record.scheme,
            token: text(0),
            credentials: text(1),
            created_at: from_micros(record.created_at)?,
        })
    }

    /// Stores `target`, replacing the conversation's target of the same id; at most `max`
    /// per conversation.
    pub async fn put_push_target(
        &self,
        target: &PushTarget,
        max: usize,
    ) -> Result<Put, StoreError> {
        let secrets = self.seal_target(target)?;
        let begin = if self.inner.db.is_postgres() {
            "BEGIN"
        } else {
            "BEGIN IMMEDIATE"
        };
        let lock = if self.inner.db.is_postgres() {
            " FOR UPDATE"
        } else {
            ""
        };
        let conversation = format!("SELECT id FROM conversations WHERE id = $1{lock}");
        on_pool!(&self.inner.db, pool => {
            let mut tx = pool.begin_with(begin).await?;
            let exists: Option<(Uuid,)> = sqlx::query_as(&conversation)
                .bind(target.conversation_id)
                .fetch_optional(&mut *tx)
                .await?;
            if exists.is_none() {
                return Ok(Put::NoConversation);
            }
            let others: (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM push_targets WHERE conversation_id = $1 AND target_id <> $2")
                .bind(target.conversation_id)
                .bind(&target.id)
                .fetch_one(&mut *tx)
                .await?;
            if usize::try_from(others.0).unwrap_or(usize::MAX) >= max {
                return Ok(Put::Full { max });
            }
            sqlx::query("DELETE FROM push_targets WHERE conversation_id = $1 AND target_id = $2")
                .bind(target.conversation_id)
                .bind(&target.id)
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                "INSERT INTO push_targets (conversation_id, target_id, receiver, url, scheme, \
                 secrets, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)")
                .bind(target.conversation_id)
                .bind(&target.id)
                .bind(target.receiver())
                .bind(&target.url)
                .bind(target.scheme.as_deref())
                .bind(&secrets)
                .bind(to_micros(target.created_at))
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(Put::Stored)
        })
    }

    pub async fn push_target(
        &self,
        conversation_id: Uuid,
        target_id: &str,
    ) -> Result<Option<PushTarget>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM push_targets WHERE conversation_id = $1 AND target_id = $2"
        );
        let record: Option<Record> = on_pool!(&self.inner.db, pool => sqlx::query_as(&sql)
            .bind(conversation_id)
            .bind(target_id)
            .fetch_optional(pool)
            .await?);
        record.map(|r| self.open_target(r)).transpose()
    }

    /// The target deliveries queued under `receiver` go to, if it still exists.
    pub async fn push_target_of(&self, receiver: &str) -> Result<Option<PushTarget>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM push_targets WHERE receiver = $1");
        let record: Option<Record> = on_pool!(&self.inner.db, pool => sqlx::query_as(&sql)
            .bind(receiver)
            .fetch_optional(pool)
            .await?);
        record.map(|r| self.open_target(r)).transpose()
    }

    /// A conversation's targets, oldest first.
    pub async fn push_targets(&self, conversation_id: Uuid) -> Result<Vec<PushTarget>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM push_targets WHERE conversation_id = $1 \
             ORDER BY created_at, target_id"
        );
        let records: Vec<Record> = on_pool!(&self.inner.db, pool => sqlx::query_as(&sql)
            .bind(conversation_id)
            .fetch_all(pool)
            .await?);
        records.into_iter().map(|r| self.open_target(r)).collect()
    }

    /// Deletes a target and what is still queued for it: nothing more is sent there. False
    /// if there was none.
    pub async fn delete_push_target(
        &self,
        conversation_id: Uuid,
        target_id: &str,
    ) -> Result<bool, StoreError> {
        let receiver = receiver_name(conversation_id, target_id);
        on_pool!(&self.inner.db, pool => {
            let mut tx = pool.begin().await?;
            let gone = sqlx::query(
                "DELETE FROM push_targets WHERE conversation_id = $1 AND target_id = $2")
                .bind(conversation_id)
                .bind(target_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            sqlx::query("DELETE FROM webhook_outbox WHERE receiver = $1")
                .bind(&receiver)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(gone > 0)
        })
    }
}

/// The query for the receivers of the push targets of `n` conversations (bound as `$1…$n`),
/// which the appender runs inside its transaction: a target stored before a change commits
/// hears of it.
pub(super) fn receivers_sql(n: usize) -> String {
    format!(
        "SELECT conversation_id, receiver FROM push_targets WHERE conversation_id IN ({}) \
         ORDER BY created_at, target_id",
        placeholders(1, n)
    )
}

/// Query rows by conversation.
pub(super) fn by_conversation(rows: Vec<(Uuid, String)>) -> HashMap<Uuid, Vec<String>> {
    let mut out: HashMap<Uuid, Vec<String>> = HashMap::new();
    for (id, receiver) in rows {
        out.entry(id).or_default().push(receiver);
    }
    out
}
