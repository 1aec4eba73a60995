//! Leases and commands: what lets several replicas share one database. The replica running a
//! conversation holds a lease on its row until a deadline it keeps pushing forward; a lease
//! past its deadline belongs to a replica that stopped, and may be claimed by another. A
//! command for a conversation that runs elsewhere (a message, pause, interrupt) is queued in
//! `conversation_commands` and the owner woken (NOTIFY on PostgreSQL); the owner takes its
//! commands by deleting them, so each is applied once.

use std::sync::atomic::Ordering;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::db::on_pool;
use super::{COMMANDS_CHANNEL, Store, StoreError, from_micros, to_micros};

/// Who holds a conversation's lease, and until when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub owner: Uuid,
    pub until: DateTime<Utc>,
}

impl Lease {
    pub fn is_live(&self, now: DateTime<Utc>) -> bool {
        self.until > now
    }
}

/// A command queued for the replica that runs a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedCommand {
    pub seq: i64,
    pub conversation_id: Uuid,
    pub kind: String,
    pub payload: serde_json::Value,
}

#[derive(sqlx::FromRow)]
struct CommandRecord {
    seq: i64,
    conversation_id: Uuid,
    kind: String,
    payload: String,
}

impl Store {
    /// Takes the lease for `owner` until `until` if nobody holds a live one (now being
    /// `now`). False if another replica holds it, or the conversation does not exist.
    pub async fn claim(
        &self,
        id: Uuid,
        owner: Uuid,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let claimed = on_pool!(&self.inner.db, pool => sqlx::query(
            "UPDATE conversations SET owner = $2, lease_until = $3 \
             WHERE id = $1 AND (owner IS NULL OR lease_until IS NULL OR lease_until <= $4)")
            .bind(id)
            .bind(owner)
            .bind(to_micros(until))
            .bind(to_micros(now))
            .execute(pool)
            .await?
            .rows_affected());
        Ok(claimed == 1)
    }

    /// Pushes every lease `owner` holds to `until`; returns the conversations it still holds.
    pub async fn renew(&self, owner: Uuid, until: DateTime<Utc>) -> Result<Vec<Uuid>, StoreError> {
        let held: Vec<(Uuid,)> = on_pool!(&self.inner.db, pool => sqlx::query_as(
            "UPDATE conversations SET lease_until = $2 WHERE owner = $1 RETURNING id")
            .bind(owner)
            .bind(to_micros(until))
            .fetch_all(pool)
            .await?);
        Ok(held.into_iter().map(|(id,)| id).collect())
    }

    /// Gives the lease up (if `owner` still holds it). True if it did.
    pub async fn release(&self, id: Uuid, owner: Uuid) -> Result<bool, StoreError> {
        let released = on_pool!(&self.inner.db, pool => sqlx::query(
            "UPDATE conversations SET owner = NULL, lease_until = NULL WHERE id = $1 AND owner = $2")
            .bind(id)
            .bind(owner)
            .execute(pool)
            .await?
            .rows_affected());
        Ok(released == 1)
    }

    /// Every lease given up at once: a single replica (SQLite) starting again owns them all.
    pub async fn release_all(&self) -> Result<u64, StoreError> {
        let released = on_pool!(&self.inner.db, pool => sqlx::query(
            "UPDATE conversations SET owner = NULL, lease_until = NULL WHERE owner IS NOT NULL")
            .execute(pool)
            .await?
            .rows_affected());
        Ok(released)
    }

    pub async fn lease(&self, id: Uuid) -> Result<Option<Lease>, StoreError> {
        let found: Option<(Option<Uuid>, Option<i64>)> = on_pool!(&self.inner.db, pool =>
            sqlx::query_as("SELECT owner, lease_until FROM conversations WHERE id = $1")
                .bind(id)
                .fetch_optional(pool)
                .await?);
        match found {
            Some((Some(owner), Some(until))) => Ok(Some(Lease {
                owner,
                until: from_micros(until)?,
            })),
            _ => Ok(None),
        }
    }

    /// Conversations whose status is one of `statuses` and whose lease is gone or expired:
    /// runs whose replica stopped.
    pub async fn orphaned(
        &self,
        statuses: &[crate::conversation_domain::ConversationStatus],
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Uuid>, StoreError> {
        let sql = format!(
            "SELECT id FROM conversations WHERE status IN ({}) \
             AND (owner IS NULL OR lease_until IS NULL OR lease_until <= ${}) LIMIT ${}",
            super::db::placeholders(1, statuses.len()),
            statuses.len() + 1,
            statuses.len() + 2
        );
        let ids: Vec<(Uuid,)> = on_pool!(&self.inner.db, pool => {
            let mut query = sqlx::query_as(&sql);
            for status in statuses {
                query = query.bind(status.as_str());
            }
            query
                .bind(to_micros(now))
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?
        });
        Ok(ids.into_iter().map(|(id,)| id).collect())
    }

    /// Queues a command for the conversation's owner and wakes it.
    pub async fn push_command(
        &self,
        id: Uuid,
        kind: &str,
        payload: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let payload = serde_json::to_string(payload)
            .map_err(|e| StoreError::Database(format!("serialising: {e}")))?;
        let inserted = match &self.inner.db {
            // The wake-up is part of the statement: a queued command is always announced.
            super::db::Db::Postgres(pool) => sqlx::query(
                "WITH queued AS (INSERT INTO conversation_commands (conversation_id, kind, payload) \
                 SELECT id, $2, $3 FROM conversations WHERE id = $1 RETURNING conversation_id) \
                 SELECT pg_notify($4, conversation_id::text) FROM queued",
            )
            .bind(id)
            .bind(kind)
            .bind(&payload)
            .bind(COMMANDS_CHANNEL)
            .fetch_all(pool)
            .await?
            .len(),
            super::db::Db::Sqlite(pool) => {
                let inserted = sqlx::query(
                    "INSERT INTO conversation_commands (conversation_id, kind, payload) \
                     SELECT id, $2, $3 FROM conversations WHERE id = $1",
                )
                .bind(id)
                .bind(kind)
                .bind(&payload)
                .execute(pool)
                .await?
                .rows_affected();
                // One replica: its own subscribers are the only ones to wake.
                if inserted > 0 {
                    let _ = self.inner.commands.send(id);
                }
                usize::try_from(inserted).unwrap_or(usize::MAX)
            }
        };
        if inserted == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// Takes (deletes and returns, in order) the commands queued for conversations `owner`
    /// holds.
    pub async fn take_commands(&self, owner: Uuid) -> Result<Vec<QueuedCommand>, StoreError> {
        self.take(
            "DELETE FROM conversation_commands WHERE conversation_id IN \
             (SELECT id FROM conversations WHERE owner = $1) \
             RETURNING seq, conversation_id, kind, payload",
            owner,
        )
        .await
    }

    /// Takes the commands of conversations no live lease holds (as of `now`): what a run
    /// that ended, or a sender that could not look after queueing, left behind.
    pub async fn take_stranded_commands(
        &self,
        now: DateTime<Utc>,
    ) -> Result<Vec<QueuedCommand>, StoreError> {
        let records: Vec<CommandRecord> = on_pool!(&self.inner.db, pool => sqlx::query_as(
            "DELETE FROM conversation_commands WHERE conversation_id IN \
             (SELECT id FROM conversations WHERE owner IS NULL OR lease_until IS NULL \
              OR lease_until <= $1) \
             RETURNING seq, conversation_id, kind, payload")
            .bind(to_micros(now))
            .fetch_all(pool)
            .await?);
        commands_of(records)
    }

    /// Takes the commands queued for one conversation, whoever holds it.
    pub async fn take_commands_of(&self, id: Uuid) -> Result<Vec<QueuedCommand>, StoreError> {
        self.take(
            "DELETE FROM conversation_commands WHERE conversation_id = $1 \
             RETURNING seq, conversation_id, kind, payload",
            id,
        )
        .await
    }

    async fn take(&self, sql: &str, key: Uuid) -> Result<Vec<QueuedCommand>, StoreError> {
        let records: Vec<CommandRecord> = on_pool!(&self.inner.db, pool => sqlx::query_as(sql)
            .bind(key)
            .fetch_all(pool)
            .await?);
        commands_of(records)
    }

    /// "A command is queued for conversation X": woken by other replicas' `push_command`
    /// (LISTEN on PostgreSQL) and this one's. May be lost while the LISTEN connection is
    /// down: the owner also takes its commands on a timer.
    pub fn subscribe_commands(&self) -> tokio::sync::broadcast::Receiver<Uuid> {
        self.inner.commands.subscribe()
    }

    /// The time leases are measured in: this machine's clock corrected by the database's
    /// (PostgreSQL), so that replicas with skewed clocks agree on when a lease expires.
    pub fn now(&self) -> DateTime<Utc> {
        let offset = self.inner.clock_offset_us.load(Ordering::Relaxed);
        Utc::now() + chrono::Duration::microseconds(offset)
    }

    /// Measures the database's clock against this machine's (PostgreSQL; SQLite shares the
    /// machine's). A failure keeps the last offset.
    pub async fn sync_clock(&self) {
        let super::db::Db::Postgres(pool) = &self.inner.db else {
            return;
        };
        let before = Utc::now();
        let answer: Result<(i64,), sqlx::Error> =
            sqlx::query_as("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint")
                .fetch_one(pool)
                .await;
        let after = Utc::now();
        if let Ok((database_us,)) = answer {
            let midpoint = to_micros(before) + (to_micros(after) - to_micros(before)) / 2;
            self.inner
                .clock_offset_us
                .store(database_us - midpoint, Ordering::Relaxed);
        }
    }
}

fn commands_of(records: Vec<CommandRecord>) -> Result<Vec<QueuedCommand>, StoreError> {
    let mut commands = records
        .into_iter()
        .map(|r| {
            Ok(QueuedCommand {
                seq: r.seq,
                conversation_id: r.conversation_id,
                kind: r.kind,
                payload: serde_json::from_str(&r.payload).map_err(|e| {
                    StoreError::Database(format!("a stored command is not valid JSON: {e}"))
                })?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    // RETURNING promises no order.
    commands.sort_by_key(|c| c.seq);
    Ok(commands)
}
