//! The outbox's sending side: which deliveries are due, claiming one so that exactly one
//! replica sends it, sealing its body before the first attempt, and recording the outcome;
//! the dead letters and their retry; the numbers behind the metrics.
//!
//! A (receiver, conversation) queue is sent in `seq` order: only its oldest pending row (its
//! head) may be claimed, so the next one waits until the head is delivered or dead-lettered.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::db::on_pool;
use super::outbox::EVENTS;
use super::push::{RECEIVER_END, RECEIVER_PREFIX};
use super::{Page, Store, StoreError, from_micros, page_limit, to_i64, to_micros, to_u64};

/// A delivery as the worker sends it and the API lists it (its body aside).
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Its place in the outbox (the queue order).
    pub seq: i64,
    /// `X-Triage-Delivery`: the same on every attempt.
    pub id: Uuid,
    pub receiver: String,
    pub conversation_id: Uuid,
    /// `conversations` or `events`.
    pub kind: String,
    /// `X-Triage-Sequence`: the last event id it accounts for.
    pub sequence: u64,
    pub event_count: u64,
    /// `pending` or `failed` (dead-lettered).
    pub status: String,
    pub attempts: u32,
    pub created_at: DateTime<Utc>,
    /// `max_age` counts from here: the creation, or the last manual retry.
    pub age_from: DateTime<Utc>,
    pub next_attempt_at: DateTime<Utc>,
    pub last_error: Option<String>,
    pub last_status: Option<u16>,
}

const COLUMNS: &str = "seq, delivery_id, receiver, conversation_id, kind, sequence, event_count, \
                       status, attempts, created_at, age_from, next_attempt_at, last_error, \
                       last_status";

#[derive(sqlx::FromRow)]
struct Record {
    seq: i64,
    delivery_id: Uuid,
    receiver: String,
    conversation_id: Uuid,
    kind: String,
    sequence: i64,
    event_count: i64,
    status: String,
    attempts: i64,
    created_at: i64,
    age_from: i64,
    next_attempt_at: i64,
    last_error: Option<String>,
    last_status: Option<i64>,
}

/// A claimed row with what sealing needs.
#[derive(sqlx::FromRow)]
struct Head {
    #[sqlx(flatten)]
    record: Record,
    body: String,
    sealed: i64,
}

impl Record {
    fn into_delivery(self) -> Result<Delivery, StoreError> {
        Ok(Delivery {
            seq: self.seq,
            id: self.delivery_id,
            receiver: self.receiver,
            conversation_id: self.conversation_id,
            kind: self.kind,
            sequence: to_u64(self.sequence),
            event_count: to_u64(self.event_count),
            status: self.status,
            attempts: u32::try_from(self.attempts).unwrap_or(u32::MAX),
            created_at: from_micros(self.created_at)?,
            age_from: from_micros(self.age_from)?,
            // Due at once is stored as 0 (see `outbox::DUE_NOW`): shown as its creation.
            next_attempt_at: from_micros(self.next_attempt_at.max(self.created_at))?,
            last_error: self.last_error,
            last_status: self.last_status.and_then(|s| u16::try_from(s).ok()),
        })
    }
}

/// The outcome of an attempt that did not deliver.
#[derive(Debug, Clone)]
pub struct Failure {
    pub error: String,
    /// The receiver's HTTP status, if it answered.
    pub status: Option<u16>,
}

/// Why a manual retry was refused.
#[derive(Debug, thiserror::Error)]
pub enum RetryError {
    #[error("no delivery has this id")]
    NotFound,
    #[error("the delivery is not dead-lettered: it is still being sent")]
    NotFailed,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One receiver's queue, for the metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueStats {
    pub receiver: String,
    pub pending: u64,
    pub oldest_pending: Option<DateTime<Utc>>,
    pub failed: u64,
}

#[derive(Debug, Clone, Default)]
pub struct DeliveryQuery {
    pub status: Option<String>,
    pub receiver: Option<String>,
    pub conversation_id: Option<Uuid>,
    pub page_id: Option<String>,
    /// 1 ..= 10,000.
    pub limit: u32,
}

/// Whose queues a query reads: one configured receiver's, or every push target's.
#[derive(Clone, Copy)]
enum Receivers<'a> {
    Named(&'a str),
    Push,
}

impl Receivers<'_> {
    /// The condition on `receiver`, with `$1` bound to [`Receivers::bound`].
    fn condition(self) -> String {
        match self {
            Receivers::Named(_) => "receiver = $1".into(),
            // A range, which the queue index serves on both backends (LIKE may not).
            Receivers::Push => format!("receiver >= $1 AND receiver < '{RECEIVER_END}'"),
        }
    }

    fn bound(self) -> String {
        match self {
            Receivers::Named(name) => name.to_owned(),
            Receivers::Push => RECEIVER_PREFIX.to_owned(),
        }
    }
}

/// Errors longer than this are cut (the receiver writes them).
const ERROR_MAX: usize = 1000;
/// Sealing stops taking in more events beyond this body size: a delivery is held in memory
/// while it is sent, `max_in_flight` of them per receiver.
const BATCH_BYTES_MAX: usize = 1024 * 1024;

impl Store {
    /// Heads of `receiver`'s queues that are due and not claimed by anyone, oldest first.
    /// Only the worker writes existing outbox rows (the writers of changes only insert), so
    /// a round of appends never waits for, or deadlocks with, a delivery being recorded.
    pub async fn outbox_heads(
        &self,
        receiver: &str,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<i64>, StoreError> {
        let heads = self.heads(Receivers::Named(receiver), now, limit).await?;
        Ok(heads.into_iter().map(|(seq, _)| seq).collect())
    }

    /// The due heads of every push target's queues (`push.rs`), oldest first, with their
    /// conversations (the worker shares its sends out among them).
    pub async fn outbox_push_heads(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<(i64, Uuid)>, StoreError> {
        self.heads(Receivers::Push, now, limit).await
    }

    async fn heads(
        &self,
        receivers: Receivers<'_>,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<(i64, Uuid)>, StoreError> {
        // An events delivery still waiting out its flush delay is due at once when a
        // snapshot is queued behind it (the status changed: the snapshot must not wait).
        let sql = format!(
            "SELECT o.seq, o.conversation_id FROM webhook_outbox o JOIN (SELECT MIN(seq) AS head \
                   FROM webhook_outbox WHERE {} AND status = 'pending' \
                   GROUP BY receiver, conversation_id) h ON o.seq = h.head \
                   WHERE (o.claim_until IS NULL OR o.claim_until <= $2) \
                   AND (o.next_attempt_at <= $2 OR (o.sealed = 0 AND EXISTS (SELECT 1 \
                   FROM webhook_outbox n WHERE n.receiver = o.receiver \
                   AND n.conversation_id = o.conversation_id AND n.status = 'pending' \
                   AND n.seq > o.seq AND n.kind = 'conversations'))) \
                   ORDER BY o.seq LIMIT $3",
            receivers.condition()
        );
        let heads: Vec<(i64, Uuid)> = on_pool!(&self.inner.db, pool => sqlx::query_as(&sql)
            .bind(receivers.bound())
            .bind(to_micros(now))
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?);
        Ok(heads)
    }

    /// Claims a pending delivery for `owner` until `until`, unless someone else's claim is
    /// live. Exactly one of several replicas claiming at once gets it.
    pub async fn outbox_claim(
        &self,
        seq: i64,
        owner: Uuid,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let claimed = on_pool!(&self.inner.db, pool => sqlx::query(
            "UPDATE webhook_outbox SET claimed_by = $2, claim_until = $3 WHERE seq = $1 \
             AND status = 'pending' AND (claim_until IS NULL OR claim_until <= $4)")
            .bind(seq)
            .bind(owner)
            .bind(to_micros(until))
            .bind(to_micros(now))
            .execute(pool)
            .await?
            .rows_affected());
        Ok(claimed == 1)
    }

    /// The claimed delivery with its body, fixed for every attempt: before the first one, an
    /// events delivery takes in the events deliveries queued right behind it (up to
    /// `batch_size` events), so a burst goes out in few requests. `None` if `owner` no longer
    /// holds the claim.
    pub async fn outbox_seal(
        &self,
        seq: i64,
        owner: Uuid,
        batch_size: usize,
    ) -> Result<Option<(Delivery, String)>, StoreError> {
        let begin = if self.inner.db.is_postgres() {
            "BEGIN"
        } else {
            "BEGIN IMMEDIATE"
        };
        let head_sql = format!(
            "SELECT {COLUMNS}, body, sealed FROM webhook_outbox \
             WHERE seq = $1 AND claimed_by = $2 AND status = 'pending'"
        );
        on_pool!(&self.inner.db, pool => {
            let mut tx = pool.begin_with(begin).await?;
            let head: Option<Head> = sqlx::query_as(&head_sql)
                .bind(seq)
                .bind(owner)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(Head { record, body, sealed }) = head else {
                return Ok(None);
            };
            if sealed != 0 {
                return Ok(Some((record.into_delivery()?, body)));
            }
            let mut body = body;
            let mut merged: Vec<i64> = Vec::new();
            let mut count = record.event_count;
            let mut sequence = record.sequence;
            if record.kind == EVENTS {
                let behind: Vec<(i64, String, String, i64, i64, i64)> = sqlx::query_as(
                    "SELECT seq, kind, body, sequence, event_count, sealed FROM webhook_outbox \
                     WHERE receiver = $1 AND conversation_id = $2 AND status = 'pending' \
                     AND seq > $3 ORDER BY seq LIMIT $4")
                    .bind(&record.receiver)
                    .bind(record.conversation_id)
                    .bind(seq)
                    .bind(to_i64(batch_size as u64))
                    .fetch_all(&mut *tx)
                    .await?;
                let mut events = parse_events(&body)?;
                let mut bytes = body.len();
                for (next, kind, next_body, next_sequence, n, next_sealed) in behind {
                    let fits = count.saturating_add(n) <= to_i64(batch_size as u64)
                        && bytes + next_body.len() <= BATCH_BYTES_MAX;
                    if kind != EVENTS || next_sealed != 0 || !fits {
                        break;
                    }
                    bytes += next_body.len();
                    events.extend(parse_events(&next_body)?);
                    merged.push(next);
                    count += n;
                    sequence = next_sequence;
                }
                if !merged.is_empty() {
                    body = serde_json::to_string(&events).map_err(|e| {
                        StoreError::Database(format!("serialising a webhook body: {e}"))
                    })?;
                }
            }
            sqlx::query("UPDATE webhook_outbox SET sealed = 1, body = $2, event_count = $3, \
                         sequence = $4 WHERE seq = $1")
                .bind(seq)
                .bind(&body)
                .bind(count)
                .bind(sequence)
                .execute(&mut *tx)
                .await?;
            for chunk in merged.chunks(500) {
                let sql = format!(
                    "DELETE FROM webhook_outbox WHERE seq IN ({})",
                    super::db::placeholders(1, chunk.len())
                );
                let mut delete = sqlx::query(&sql);
                for s in chunk {
                    delete = delete.bind(*s);
                }
                delete.execute(&mut *tx).await?;
            }
            tx.commit().await?;
            let mut delivery = record.into_delivery()?;
            delivery.event_count = to_u64(count);
            delivery.sequence = to_u64(sequence);
            Ok(Some((delivery, body)))
        })
    }

    /// Delivered: the row goes (the receiver has it). False if `owner` had lost the claim.
    pub async fn outbox_delivered(&self, seq: i64, owner: Uuid) -> Result<bool, StoreError> {
        let gone = on_pool!(&self.inner.db, pool => sqlx::query(
            "DELETE FROM webhook_outbox WHERE seq = $1 AND claimed_by = $2")
            .bind(seq)
            .bind(owner)
            .execute(pool)
            .await?
            .rows_affected());
        Ok(gone == 1)
    }

    /// A failed attempt: tried again at `next` or, when `next` is `None`, dead-lettered.
    pub async fn outbox_failed(
        &self,
        seq: i64,
        owner: Uuid,
        failure: &Failure,
        next: Option<DateTime<Utc>>,
    ) -> Result<bool, StoreError> {
        let error: String = failure.error.chars().take(ERROR_MAX).collect();
        let (status, next) = match next {
            Some(at) => ("pending", to_micros(at)),
            None => ("failed", to_micros(Utc::now())),
        };
        let written = on_pool!(&self.inner.db, pool => sqlx::query(
            "UPDATE webhook_outbox SET status = $3, attempts = attempts + 1, \
             next_attempt_at = $4, last_error = $5, last_status = $6, claimed_by = NULL, \
             claim_until = NULL WHERE seq = $1 AND claimed_by = $2")
            .bind(seq)
            .bind(owner)
            .bind(status)
            .bind(next)
            .bind(&error)
            .bind(failure.status.map(i64::from))
            .execute(pool)
            .await?
            .rows_affected());
        Ok(written == 1)
    }

    /// Deletes `receiver`'s dead letters that failed before `cutoff`; returns how many.
    pub async fn purge_dead_letters(
        &self,
        receiver: &str,
        cutoff: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        self.purge(Receivers::Named(receiver), cutoff).await
    }

    /// Deletes the push targets' dead letters that failed before `cutoff`.
    pub async fn purge_push_dead_letters(&self, cutoff: DateTime<Utc>) -> Result<u64, StoreError> {
        self.purge(Receivers::Push, cutoff).await
    }

    async fn purge(
        &self,
        receivers: Receivers<'_>,
        cutoff: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        // A dead letter's `next_attempt_at` is the moment it failed (`outbox_failed`).
        let sql = format!(
            "DELETE FROM webhook_outbox WHERE status = 'failed' AND {} AND next_attempt_at < $2",
            receivers.condition()
        );
        Ok(on_pool!(&self.inner.db, pool => sqlx::query(&sql)
            .bind(receivers.bound())
            .bind(to_micros(cutoff))
            .execute(pool)
            .await?
            .rows_affected()))
    }

    /// Every claim given up: a single replica (SQLite) starting again owns them all.
    pub async fn release_outbox_claims(&self) -> Result<u64, StoreError> {
        Ok(on_pool!(&self.inner.db, pool => sqlx::query(
            "UPDATE webhook_outbox SET claimed_by = NULL, claim_until = NULL \
             WHERE claimed_by IS NOT NULL")
            .execute(pool)
            .await?
            .rows_affected()))
    }

    /// A dead letter queued again, as if new: its attempts and age start over, its id and
    /// body stay (a receiver that got it before recognises it).
    pub async fn retry_delivery(&self, id: Uuid) -> Result<Delivery, RetryError> {
        let now = to_micros(Utc::now());
        let retried = on_pool!(&self.inner.db, pool => sqlx::query(
            "UPDATE webhook_outbox SET status = 'pending', attempts = 0, age_from = $2, \
             next_attempt_at = 0, claimed_by = NULL, claim_until = NULL \
             WHERE delivery_id = $1 AND status = 'failed'")
            .bind(id)
            .bind(now)
            .execute(pool)
            .await
            .map_err(StoreError::from)?
            .rows_affected());
        let found = self.delivery(id).await?.ok_or(RetryError::NotFound)?;
        if retried == 0 {
            return Err(RetryError::NotFailed);
        }
        self.wake_outbox();
        Ok(found)
    }

    pub async fn delivery(&self, id: Uuid) -> Result<Option<Delivery>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM webhook_outbox WHERE delivery_id = $1");
        let record: Option<Record> = on_pool!(&self.inner.db, pool => sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(pool)
            .await?);
        record.map(Record::into_delivery).transpose()
    }

    /// Deliveries not yet delivered, in queue order, with filters.
    pub async fn deliveries(&self, q: &DeliveryQuery) -> Result<Page<Delivery>, StoreError> {
        let after = match &q.page_id {
            Some(p) => Some(p.parse::<i64>().map_err(|_| StoreError::InvalidPageId)?),
            None => None,
        };
        let mut conditions = Vec::new();
        let mut n = 0;
        let mut next = || {
            n += 1;
            format!("${n}")
        };
        if q.status.is_some() {
            conditions.push(format!("status = {}", next()));
        }
        if q.receiver.is_some() {
            conditions.push(format!("receiver = {}", next()));
        }
        if q.conversation_id.is_some() {
            conditions.push(format!("conversation_id = {}", next()));
        }
        if after.is_some() {
            conditions.push(format!("seq > {}", next()));
        }
        let limit_at = next();
        let sql = format!(
            "SELECT {COLUMNS} FROM webhook_outbox {} ORDER BY seq LIMIT {limit_at}",
            super::conversations::where_clause(&conditions)
        );
        let limit = page_limit(q.limit);
        let records: Vec<Record> = on_pool!(&self.inner.db, pool => {
            let mut query = sqlx::query_as(&sql);
            if let Some(status) = &q.status {
                query = query.bind(status);
            }
            if let Some(receiver) = &q.receiver {
                query = query.bind(receiver);
            }
            if let Some(id) = q.conversation_id {
                query = query.bind(id);
            }
            if let Some(after) = after {
                query = query.bind(after);
            }
            query.bind(limit + 1).fetch_all(pool).await?
        });
        let mut items = records
            .into_iter()
            .map(Record::into_delivery)
            .collect::<Result<Vec<_>, _>>()?;
        let next_page_id = if items.len() as i64 > limit {
            items.truncate(limit as usize);
            items.last().map(|d| d.seq.to_string())
        } else {
            None
        };
        Ok(Page {
            items,
            next_page_id,
        })
    }

    /// Per receiver with anything queued: pending and dead-lettered deliveries, and when the
    /// oldest pending one was written.
    pub async fn outbox_stats(&self) -> Result<Vec<QueueStats>, StoreError> {
        let rows: Vec<(String, String, i64, Option<i64>)> = on_pool!(&self.inner.db, pool =>
            sqlx::query_as(
                "SELECT receiver, status, COUNT(*), MIN(created_at) FROM webhook_outbox \
                 GROUP BY receiver, status ORDER BY receiver")
                .fetch_all(pool)
                .await?);
        let mut stats: Vec<QueueStats> = Vec::new();
        for (receiver, status, count, oldest) in rows {
            if stats.last().is_none_or(|s| s.receiver != receiver) {
                stats.push(QueueStats {
                    receiver: receiver.clone(),
                    pending: 0,
                    oldest_pending: None,
                    failed: 0,
                });
            }
            let Some(entry) = stats.last_mut() else {
                continue;
            };
            if status == "pending" {
                entry.pending = to_u64(count);
                entry.oldest_pending = oldest.map(from_micros).transpose()?;
            } else {
                entry.failed = to_u64(count);
            }
        }
        Ok(stats)
    }
}

fn parse_events(body: &str) -> Result<Vec<Value>, StoreError> {
    serde_json::from_str(body).map_err(|e| {
        StoreError::Database(format!("a stored webhook body is not a JSON array: {e}"))
    })
}
