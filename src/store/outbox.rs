//! The outbox's write side: the deliveries a change owes each webhook receiver, built while
//! the change is written and inserted in its transaction — events in the appender's round,
//! conversation snapshots with `create`, `set_meta`, `set_config` and `delete`. A change that
//! commits has its deliveries; one that does not, has none. The sending side is
//! `deliveries.rs`; why it is built this way, `src/webhooks/mod.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::conversations::{COLUMNS, Record, is_unique_violation};
use super::db::{on_pool, placeholders};
use super::statement::{Bind, Read, Statement, run_statement};
use super::{ConversationRow, NewEvent, Store, StoreError, StoredEvent, to_i64};
use crate::conversation_domain::{ConversationStatus, EventKind, StatusChange};

/// `kind` of a snapshot delivery (`POST {base_url}/conversations`).
pub const CONVERSATIONS: &str = "conversations";
/// `kind` of an events delivery (`POST {base_url}/events/{conversation_id}`).
pub const EVENTS: &str = "events";

/// Who is owed what. Without receivers or push targets the store writes no outbox rows at
/// all.
#[derive(Debug, Default)]
pub struct OutboxPlan {
    pub receivers: Vec<OutboxReceiver>,
    /// Conversations may have push targets (`push.rs`): each status change owes each of them
    /// a snapshot.
    pub push: bool,
}

#[derive(Debug, Clone)]
pub struct OutboxReceiver {
    pub name: String,
    /// Snapshots on every status change, create, PATCH and delete.
    pub conversations: bool,
    pub events: bool,
    /// Only events of these kinds; `None`: every kind.
    pub event_kinds: Option<BTreeSet<String>>,
    /// Events per delivery at most.
    pub batch_size: usize,
    /// How long a partial batch waits for more events before it is sent.
    pub flush_delay: Duration,
}

impl OutboxReceiver {
    /// A push target: snapshots only, one per delivery.
    fn push(name: &str) -> OutboxReceiver {
        OutboxReceiver {
            name: name.to_owned(),
            conversations: true,
            events: false,
            event_kinds: None,
            batch_size: 1,
            flush_delay: Duration::ZERO,
        }
    }

    fn wants(&self, kind: EventKind) -> bool {
        self.events
            && self
                .event_kinds
                .as_ref()
                .is_none_or(|k| k.contains(kind.as_str()))
    }
}

/// What a snapshot reports: the status it was taken for (a snapshot rendered after later
/// changes still says which change it is about), and the last event it accounts for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub status: ConversationStatus,
    pub reason: Option<String>,
    pub last_event_id: u64,
    /// The reply token handed out with this change (`paused`, `waiting_for_confirmation`).
    pub reply_token: Option<String>,
}

impl Change {
    /// The change a `conversation_state_update` event records, as its writer passed it.
    fn of_status(change: &StatusChange, last_event_id: u64, reply_token: Option<&str>) -> Change {
        Change {
            status: change.status,
            reason: change.reason.clone(),
            last_event_id,
            reply_token: reply_token.map(str::to_owned),
        }
    }

    /// The row as it stands (create, PATCH, delete: `status` says which).
    fn of_row(row: &ConversationRow, status: ConversationStatus) -> Change {
        Change {
            status,
            reason: row.reason.clone(),
            last_event_id: row.last_event_id,
            reply_token: None,
        }
    }
}

/// A snapshot delivery as the outbox keeps it: what its body is rendered from, taken in the
/// transaction of the change it reports — the row as it stood then (no secrets; of its state
/// only the pending calls) and the change. The store renders nothing: the webhook worker
/// renders the body from this at each attempt, the same bytes every time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub change: Change,
    pub id: Uuid,
    pub title: Option<String>,
    pub tags: BTreeMap<String, String>,
    /// The stored config, its secrets left out.
    pub config: Value,
    /// The state's `pending` calls.
    pub pending: Value,
    pub stats: Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Snapshot {
    fn of_row(row: &ConversationRow, change: Change) -> Snapshot {
        Snapshot {
            change,
            id: row.id,
            title: row.title.clone(),
            tags: row.tags.clone(),
            config: row.config.clone(),
            pending: row.state.get("pending").cloned().unwrap_or(Value::Null),
            stats: row.stats.clone(),
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// One delivery to insert.
#[derive(Debug)]
pub(super) struct NewDelivery {
    receiver: String,
    conversation_id: Uuid,
    kind: &'static str,
    body: String,
    /// `X-Triage-Sequence`: the last event id it accounts for.
    sequence: i64,
    event_count: i64,
    next_attempt_at: i64,
}

/// `next_attempt_at` of a delivery due at once: before any clock's now, so that replicas
/// whose clocks disagree never hold it back.
const DUE_NOW: i64 = 0;

/// Rows per INSERT (10 values each: well under both backends' parameter limits).
const INSERT_ROWS: usize = 500;

fn json(value: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Database(format!("serialising a webhook body: {e}")))
}

impl OutboxPlan {
    /// Whether some receiver wants snapshots (the appender then reads the rows they show).
    pub(super) fn wants_conversations(&self) -> bool {
        self.receivers.iter().any(|r| r.conversations)
    }

    /// Whether a change may owe anyone a delivery.
    pub(super) fn is_active(&self) -> bool {
        self.push || !self.receivers.is_empty()
    }

    /// Whether a status change owes snapshots (to receivers or to push targets).
    pub(super) fn wants_status_changes(&self) -> bool {
        self.push || self.wants_conversations()
    }

    /// A snapshot for every receiver that wants them, due now.
    pub(super) fn snapshots(
        &self,
        row: &ConversationRow,
        change: Change,
    ) -> Result<Vec<NewDelivery>, StoreError> {
        let sequence = to_i64(change.last_event_id);
        let body = json(&Snapshot::of_row(row, change))?;
        Ok(self
            .receivers
            .iter()
            .filter(|r| r.conversations)
            .map(|r| NewDelivery {
                receiver: r.name.clone(),
                conversation_id: row.id,
                kind: CONVERSATIONS,
                body: body.clone(),
                sequence,
                event_count: 0,
                next_attempt_at: DUE_NOW,
            })
            .collect())
    }

    /// The deliveries one committed append owes, in order per receiver: its events in
    /// batches, and a snapshot after each status change (the events before it due at once:
    /// the snapshot must not wait behind them; the worker does the same for events of
    /// earlier rounds). `rows` holds the conversations that changed status in the round, as
    /// they stand in its transaction. `events` are the append's, `stored` what they became;
    /// `push` the receivers of the conversation's push targets.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn for_append(
        &self,
        id: Uuid,
        events: &[NewEvent],
        stored: &[StoredEvent],
        rows: &HashMap<Uuid, ConversationRow>,
        push: &[String],
        token: Option<&str>,
        now: i64,
    ) -> Result<Vec<NewDelivery>, StoreError> {
        // The token handed out with these events is in their deliveries, not in the log.
        let with_token: Vec<StoredEvent>;
        let stored = match token {
            Some(token) if stored.iter().any(|e| e.kind == EventKind::ApprovalRequired) => {
                with_token = stored
                    .iter()
                    .map(|e| {
                        let mut e = e.clone();
                        if e.kind == EventKind::ApprovalRequired {
                            e.payload["reply_token"] = Value::String(token.to_owned());
                        }
                        e
                    })
                    .collect();
                with_token.as_slice()
            }
            _ => stored,
        };
        let push: Vec<OutboxReceiver> = push.iter().map(|n| OutboxReceiver::push(n)).collect();
        let mut out = Vec::new();
        for receiver in self.receivers.iter().chain(&push) {
            let first = out.len();
            let mut batch: Vec<&StoredEvent> = Vec::new();
            let delay = i64::try_from(receiver.flush_delay.as_micros()).unwrap_or(i64::MAX);
            for (event, new) in stored.iter().zip(events) {
                if receiver.wants(event.kind) {
                    batch.push(event);
                    if batch.len() >= receiver.batch_size {
                        out.push(events_delivery(receiver, id, &batch, DUE_NOW)?);
                        batch.clear();
                    }
                }
                if let Some(status) = &new.status
                    && receiver.conversations
                    && let Some(row) = rows.get(&id)
                {
                    if !batch.is_empty() {
                        out.push(events_delivery(receiver, id, &batch, DUE_NOW)?);
                        batch.clear();
                    }
                    for earlier in &mut out[first..] {
                        earlier.next_attempt_at = DUE_NOW;
                    }
                    let change = Change::of_status(status, event.id, token);
                    let body = json(&Snapshot::of_row(row, change))?;
                    out.push(NewDelivery {
                        receiver: receiver.name.clone(),
                        conversation_id: id,
                        kind: CONVERSATIONS,
                        body,
                        sequence: to_i64(event.id),
                        event_count: 0,
                        next_attempt_at: DUE_NOW,
                    });
                }
            }
            if !batch.is_empty() {
                // A partial batch waits for more events, at most the flush delay.
                let due = now.saturating_add(delay);
                out.push(events_delivery(receiver, id, &batch, due)?);
            }
        }
        Ok(out)
    }
}

fn events_delivery(
    receiver: &OutboxReceiver,
    id: Uuid,
    batch: &[&StoredEvent],
    due: i64,
) -> Result<NewDelivery, StoreError> {
    Ok(NewDelivery {
        receiver: receiver.name.clone(),
        conversation_id: id,
        kind: EVENTS,
        body: json(&batch)?,
        sequence: batch.last().map_or(0, |e| to_i64(e.id)),
        event_count: i64::try_from(batch.len()).unwrap_or(i64::MAX),
        next_attempt_at: due,
    })
}

/// INSERTs for `deliveries`, each with a new delivery id.
pub(super) fn inserts(deliveries: Vec<NewDelivery>, now: i64) -> Vec<Statement> {
    let mut statements = Vec::new();
    let mut rows = deliveries.into_iter().peekable();
    while rows.peek().is_some() {
        let chunk: Vec<NewDelivery> = rows.by_ref().take(INSERT_ROWS).collect();
        let values = (0..chunk.len())
            .map(|i| format!("({})", placeholders(i * 10 + 1, 10)))
            .collect::<Vec<_>>()
            .join(", ");
        let mut binds = Vec::with_capacity(chunk.len() * 10);
        for d in chunk {
            binds.extend([
                Bind::Uuid(Uuid::new_v4()),
                Bind::Text(d.receiver),
                Bind::Uuid(d.conversation_id),
                Bind::Text(d.kind.to_owned()),
                Bind::Text(d.body),
                Bind::Int(d.sequence),
                Bind::Int(d.event_count),
                Bind::Int(now),
                Bind::Int(now),
                Bind::Int(d.next_attempt_at),
            ]);
        }
        statements.push(Statement {
            sql: format!(
                "INSERT INTO webhook_outbox (delivery_id, receiver, conversation_id, kind, body, \
                 sequence, event_count, created_at, age_from, next_attempt_at) VALUES {values}"
            ),
            binds,
        });
    }
    statements
}

impl Store {
    /// Runs `write` on conversation `id` and, when receivers want snapshots and it changed a
    /// row, the snapshot deliveries it owes (`status`, else the row's), in one transaction.
    /// Returns the rows written; `Conflict` for a duplicate id.
    pub(super) async fn write_reporting(
        &self,
        id: Uuid,
        write: Statement,
        read: Read,
        status: Option<ConversationStatus>,
    ) -> Result<u64, StoreError> {
        let conflict = |e: sqlx::Error| {
            if is_unique_violation(&e) {
                StoreError::Conflict(id.to_string())
            } else {
                e.into()
            }
        };
        let plan = self
            .inner
            .options
            .outbox
            .as_deref()
            .filter(|p| p.wants_conversations());
        let Some(plan) = plan else {
            return Ok(on_pool!(&self.inner.db, pool => run_statement!(pool, write)
                .map_err(conflict)?
                .rows_affected()));
        };
        let (begin, lock) = if self.inner.db.is_postgres() {
            ("BEGIN", " FOR UPDATE")
        } else {
            ("BEGIN IMMEDIATE", "")
        };
        let select = format!("SELECT {COLUMNS} FROM conversations WHERE id = $1{lock}");
        let now = Utc::now().timestamp_micros();
        let written = on_pool!(&self.inner.db, pool => {
            let mut tx = pool.begin_with(begin).await?;
            let mut record: Option<Record> = None;
            if read == Read::Before {
                record = sqlx::query_as(&select).bind(id).fetch_optional(&mut *tx).await?;
            }
            let written = run_statement!(&mut *tx, write).map_err(conflict)?.rows_affected();
            if written > 0 && read == Read::After {
                record = sqlx::query_as(&select).bind(id).fetch_optional(&mut *tx).await?;
            }
            if let Some(record) = record.filter(|_| written > 0) {
                let row = record.into_row_without_secrets()?;
                let change = Change::of_row(&row, status.unwrap_or(row.status));
                for insert in inserts(plan.snapshots(&row, change)?, now) {
                    run_statement!(&mut *tx, insert)?;
                }
            }
            tx.commit().await?;
            written
        });
        if written > 0 {
            self.wake_outbox();
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan(batch_size: usize, kinds: Option<&[&str]>) -> OutboxPlan {
        OutboxPlan {
            push: false,
            receivers: vec![OutboxReceiver {
                name: "r".into(),
                conversations: true,
                events: true,
                event_kinds: kinds.map(|k| k.iter().map(|s| (*s).to_owned()).collect()),
                batch_size,
                flush_delay: Duration::from_secs(1),
            }],
        }
    }

    /// An append of these events (a status for a status change), numbered from 1.
    fn append(
        kinds: &[(EventKind, Option<ConversationStatus>)],
    ) -> (Vec<NewEvent>, Vec<StoredEvent>) {
        kinds
            .iter()
            .zip(1..)
            .map(|(&(kind, status), id)| {
                let status = status.map(|s| StatusChange::new(s, None));
                let payload = status.as_ref().map_or(json!({}), StatusChange::payload);
                let new = NewEvent {
                    kind,
                    source: "agent".into(),
                    timestamp: Utc::now(),
                    payload: payload.clone(),
                    status,
                };
                let stored = StoredEvent {
                    id,
                    kind,
                    source: "agent".into(),
                    timestamp: new.timestamp,
                    payload,
                };
                (new, stored)
            })
            .unzip()
    }

    fn row(id: Uuid) -> ConversationRow {
        ConversationRow {
            id,
            title: None,
            tags: Default::default(),
            status: ConversationStatus::Running,
            reason: None,
            config: json!({}),
            state: json!({"messages": [], "pending": [{"call": "c"}]}),
            state_event_id: 0,
            stats: json!({}),
            last_event_id: 0,
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    #[test]
    fn events_are_batched_and_a_status_change_follows_what_came_before_it() {
        let id = Uuid::new_v4();
        let rows = HashMap::from([(id, row(id))]);
        let message = (EventKind::Message, None);
        let finished = (
            EventKind::ConversationStateUpdate,
            Some(ConversationStatus::Finished),
        );
        let (events, stored) = append(&[message, message, message, finished, message]);
        let out = plan(2, None)
            .for_append(id, &events, &stored, &rows, &[], None, 100)
            .unwrap();
        let shape: Vec<(&str, i64, i64, i64)> = out
            .iter()
            .map(|d| (d.kind, d.sequence, d.event_count, d.next_attempt_at))
            .collect();
        let later = 100 + 1_000_000;
        assert_eq!(
            shape,
            [
                (EVENTS, 2, 2, DUE_NOW),
                (EVENTS, 4, 2, DUE_NOW),
                (CONVERSATIONS, 4, 0, DUE_NOW),
                (EVENTS, 5, 1, later),
            ]
        );
        // The snapshot keeps what its body is rendered from: the change as its writer
        // passed it, and of the row's state only the pending calls.
        let snapshot: Snapshot = serde_json::from_str(&out[2].body).unwrap();
        assert_eq!(snapshot.change.status, ConversationStatus::Finished);
        assert_eq!(snapshot.change.last_event_id, 4);
        assert_eq!(snapshot.pending, json!([{"call": "c"}]));
    }

    #[test]
    fn a_status_change_is_known_from_its_writer_not_from_its_payload() {
        let id = Uuid::new_v4();
        let rows = HashMap::from([(id, row(id))]);
        let (mut events, stored) = append(&[(
            EventKind::ConversationStateUpdate,
            Some(ConversationStatus::Paused),
        )]);
        // A payload saying otherwise is the log's business, not the snapshot's.
        events[0].payload = json!({"execution_status": "finished"});
        let out = plan(20, None)
            .for_append(id, &events, &stored, &rows, &[], Some("tok"), 0)
            .unwrap();
        let snapshot: Snapshot = serde_json::from_str(&out[1].body).unwrap();
        assert_eq!(snapshot.change.status, ConversationStatus::Paused);
        assert_eq!(snapshot.change.reply_token.as_deref(), Some("tok"));
        // Without the status, an event of that kind owes no snapshot.
        events[0].status = None;
        let out = plan(20, None)
            .for_append(id, &events, &stored, &rows, &[], None, 0)
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].kind, EVENTS);
    }

    #[test]
    fn event_kinds_filter_what_a_receiver_gets() {
        let id = Uuid::new_v4();
        let (events, stored) =
            append(&[(EventKind::Message, None), (EventKind::AiAnswerEnd, None)]);
        let out = plan(20, Some(&["ai_answer_end"]))
            .for_append(id, &events, &stored, &HashMap::new(), &[], None, 0)
            .unwrap();
        assert_eq!(out.len(), 1);
        let body: Value = serde_json::from_str(&out[0].body).unwrap();
        assert_eq!(body[0]["kind"], "ai_answer_end");
        assert_eq!(body.as_array().unwrap().len(), 1);
    }
}
