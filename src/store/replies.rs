//! Webhooks in: a conversation's reply token (only its hash is stored, written in the same
//! round as the event that hands the token out) and the inbound events it authorises — the
//! audit trail, the answer a duplicate gets, the early events waiting for their state.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::conversations::is_unique_violation;
use super::db::on_pool;
use super::{Store, StoreError, from_micros, to_micros};
use crate::conversation_domain::ConversationStatus;

/// A token minted for the state a conversation is about to wait in. It travels with the
/// append that announces that state; the store keeps its hash on the conversation and puts
/// the token itself only in that append's webhook deliveries, never in the log.
#[derive(Clone, PartialEq, Eq)]
pub struct ReplyToken {
    pub token: String,
    /// `waiting_for_confirmation` or `paused`.
    pub state: ConversationStatus,
}

impl std::fmt::Debug for ReplyToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyToken")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl ReplyToken {
    /// 256 random bits, URL-safe.
    pub fn mint(state: ConversationStatus) -> ReplyToken {
        ReplyToken {
            token: URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>()),
            state,
        }
    }
}

/// The stored form of a token: SHA-256, hex.
pub fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What the inbound side needs of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyState {
    pub status: String,
    /// The live token's hash and the state it was minted for.
    pub token_hash: Option<String>,
    pub token_state: Option<String>,
    /// Whether the conversation has entered that state (events before are early).
    pub entered: bool,
}

/// One inbound event, as kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Inbound {
    pub seq: i64,
    pub conversation_id: Uuid,
    pub token_hash: String,
    pub state_name: String,
    pub event_key: String,
    pub data: Value,
    /// Who sent it (the peer address, and `X-Forwarded-For` when present).
    pub source: String,
    pub received_at: DateTime<Utc>,
    /// `queued` (early), `applied`, `no_transition`.
    pub status: String,
    /// What it was answered.
    pub answer: Value,
}

#[derive(sqlx::FromRow)]
struct InboundRecord {
    seq: i64,
    conversation_id: Uuid,
    token_hash: String,
    state_name: String,
    event_key: String,
    data: String,
    source: String,
    received_at: i64,
    status: String,
    answer: String,
}

impl InboundRecord {
    fn into_inbound(self) -> Result<Inbound, StoreError> {
        let json = |text: &str| {
            serde_json::from_str(text)
                .map_err(|e| StoreError::Database(format!("a stored inbound event: {e}")))
        };
        Ok(Inbound {
            seq: self.seq,
            conversation_id: self.conversation_id,
            token_hash: self.token_hash,
            state_name: self.state_name,
            event_key: self.event_key,
            data: json(&self.data)?,
            source: self.source,
            received_at: from_micros(self.received_at)?,
            status: self.status,
            answer: json(&self.answer)?,
        })
    }
}

const INBOUND_COLUMNS: &str = "seq, conversation_id, token_hash, state_name, event_key, data, \
                               source, received_at, status, answer";

impl Store {
    /// The conversation's status and live reply token; `None` if it does not exist.
    pub async fn reply_state(&self, id: Uuid) -> Result<Option<ReplyState>, StoreError> {
        let found: Option<(String, Option<String>, Option<String>, i64)> = on_pool!(&self.inner.db, pool => sqlx::query_as(
                "SELECT status, reply_token_hash, reply_state, reply_entered FROM conversations \
                 WHERE id = $1")
                .bind(id)
                .fetch_optional(pool)
                .await?);
        Ok(
            found.map(|(status, token_hash, token_state, entered)| ReplyState {
                status,
                token_hash,
                token_state,
                entered: entered != 0,
            }),
        )
    }

    /// Keeps an inbound event. `Ok(None)`: one with the same token and event key is kept
    /// already (a duplicate, answered from `inbound_duplicate`).
    pub async fn record_inbound(&self, event: &Inbound) -> Result<Option<i64>, StoreError> {
        let json = |v: &Value| v.to_string();
        let inserted: Result<(i64,), sqlx::Error> = on_pool!(&self.inner.db, pool => sqlx::query_as(
            "INSERT INTO webhook_inbound (conversation_id, token_hash, state_name, event_key, \
             data, source, received_at, status, answer) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING seq")
            .bind(event.conversation_id)
            .bind(&event.token_hash)
            .bind(&event.state_name)
            .bind(&event.event_key)
            .bind(json(&event.data))
            .bind(&event.source)
            .bind(to_micros(event.received_at))
            .bind(&event.status)
            .bind(json(&event.answer))
            .fetch_one(pool)
            .await);
        match inserted {
            Ok((seq,)) => Ok(Some(seq)),
            Err(e) if is_unique_violation(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The kept event a duplicate repeats.
    pub async fn inbound_duplicate(
        &self,
        id: Uuid,
        token_hash: &str,
        event_key: &str,
    ) -> Result<Option<Inbound>, StoreError> {
        let sql = format!(
            "SELECT {INBOUND_COLUMNS} FROM webhook_inbound \
             WHERE conversation_id = $1 AND token_hash = $2 AND event_key = $3"
        );
        let record: Option<InboundRecord> = on_pool!(&self.inner.db, pool => sqlx::query_as(&sql)
            .bind(id)
            .bind(token_hash)
            .bind(event_key)
            .fetch_optional(pool)
            .await?);
        record.map(InboundRecord::into_inbound).transpose()
    }

    /// Records how an inbound event ended; `None` forgets it (it could not be applied, and
    /// the sender may try again).
    pub async fn settle_inbound(
        &self,
        seq: i64,
        outcome: Option<(&str, &Value)>,
    ) -> Result<(), StoreError> {
        match outcome {
            Some((status, answer)) => on_pool!(&self.inner.db, pool => sqlx::query(
                "UPDATE webhook_inbound SET status = $2, answer = $3 WHERE seq = $1")
                .bind(seq)
                .bind(status)
                .bind(answer.to_string())
                .execute(pool)
                .await?
                .rows_affected()),
            None => on_pool!(&self.inner.db, pool => sqlx::query(
                "DELETE FROM webhook_inbound WHERE seq = $1")
                .bind(seq)
                .execute(pool)
                .await?
                .rows_affected()),
        };
        Ok(())
    }

    /// Early events for the token `token_hash`, oldest first.
    pub async fn queued_inbound(
        &self,
        id: Uuid,
        token_hash: &str,
    ) -> Result<Vec<Inbound>, StoreError> {
        let sql = format!(
            "SELECT {INBOUND_COLUMNS} FROM webhook_inbound WHERE conversation_id = $1 \
             AND token_hash = $2 AND status = 'queued' ORDER BY seq"
        );
        let records: Vec<InboundRecord> = on_pool!(&self.inner.db, pool => sqlx::query_as(&sql)
            .bind(id)
            .bind(token_hash)
            .fetch_all(pool)
            .await?);
        records
            .into_iter()
            .map(InboundRecord::into_inbound)
            .collect()
    }

    /// Takes a queued event for applying (so that of two replicas only one applies it).
    pub async fn take_queued_inbound(&self, seq: i64) -> Result<bool, StoreError> {
        let taken = on_pool!(&self.inner.db, pool => sqlx::query(
            "UPDATE webhook_inbound SET status = 'applying' WHERE seq = $1 AND status = 'queued'")
            .bind(seq)
            .execute(pool)
            .await?
            .rows_affected());
        Ok(taken == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_url_safe() {
        let (a, b) = (
            ReplyToken::mint(ConversationStatus::Paused),
            ReplyToken::mint(ConversationStatus::Paused),
        );
        assert_ne!(a.token, b.token);
        assert_eq!(a.token.len(), 43, "256 bits in base64url");
        assert!(
            a.token
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        assert_eq!(token_hash("abc").len(), 64);
        assert!(!format!("{a:?}").contains(&a.token), "never in a log line");
    }
}
