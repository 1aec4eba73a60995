//! Group commit: every append goes through one task, which takes everything queued, writes it
//! in one transaction, then answers each caller. N concurrent appenders cost about one commit
//! (one fsync on PostgreSQL) instead of N.
//!
//! Callers never hang: a failed round answers each of its callers with the error; if the task
//! stops (close, panic), queued and later appends fail because their channels close; a round
//! that takes longer than `ROUND_TIMEOUT` is abandoned with an error.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::conversations::{COLUMNS, Record};
use super::db::{Db, on_pool};
use super::outbox::{self, OutboxPlan};
use super::push;
use super::replies::token_hash;
use super::statement::run_statement;
use super::{
    ConversationRow, NOTIFY_CHANNEL, NewEvent, ReplyToken, StoreError, StoreOptions, StoredEvent,
    from_micros, to_i64,
};

pub(crate) type Reply = oneshot::Sender<Result<Vec<StoredEvent>, StoreError>>;

pub(crate) enum Command {
    Append {
        id: Uuid,
        events: Vec<NewEvent>,
        token: Option<ReplyToken>,
        reply: Reply,
    },
    /// Commit what is queued before it, acknowledge, stop.
    Close(oneshot::Sender<()>),
}

/// Appends waiting for the appender before `append` itself waits (back-pressure).
const QUEUE: usize = 8192;
/// Events in one transaction at most; the rest wait for the next round.
const ROUND_EVENTS: usize = 20_000;
/// Rows per INSERT statement (6 parameters each, well under both backends' limits).
const INSERT_ROWS: usize = 1000;
const ROUND_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) fn spawn(
    db: Db,
    options: StoreOptions,
    announce: broadcast::Sender<(Uuid, u64)>,
    outbox_written: watch::Sender<u64>,
) -> (mpsc::Sender<Command>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(QUEUE);
    let task = tokio::spawn(run(db, options, rx, announce, outbox_written));
    (tx, task)
}

struct Pending {
    id: Uuid,
    events: Vec<NewEvent>,
    token: Option<ReplyToken>,
    reply: Reply,
}

async fn run(
    db: Db,
    options: StoreOptions,
    mut queue: mpsc::Receiver<Command>,
    announce: broadcast::Sender<(Uuid, u64)>,
    outbox_written: watch::Sender<u64>,
) {
    let mut closing = None;
    while closing.is_none() {
        let Some(first) = queue.recv().await else {
            return;
        };
        let mut round = Vec::new();
        closing = take(first, &mut round);
        if closing.is_none() && !options.commit_interval.is_zero() {
            tokio::time::sleep(options.commit_interval).await;
        }
        let mut events: usize = round.iter().map(|p| p.events.len()).sum();
        while closing.is_none() && events < ROUND_EVENTS {
            match queue.try_recv() {
                Ok(command) => {
                    closing = take(command, &mut round);
                    events += round.last().map_or(0, |p| p.events.len());
                }
                Err(_) => break,
            }
        }
        if round.is_empty() {
            continue;
        }
        let requests: Vec<Request> = round
            .iter()
            .map(|p| (p.id, p.events.as_slice(), p.token.as_ref()))
            .collect();
        let outcome = tokio::time::timeout(
            ROUND_TIMEOUT,
            commit(
                &db,
                &requests,
                options.max_events_per_conversation,
                options.outbox.as_deref(),
            ),
        )
        .await
        .unwrap_or_else(|_| {
            Err(StoreError::Database(
                "the append transaction timed out; its outcome is unknown".into(),
            ))
        });
        match outcome {
            Ok((answers, last_ids, queued_deliveries)) => {
                for (pending, answer) in round.into_iter().zip(answers) {
                    let _ = pending.reply.send(answer);
                }
                if queued_deliveries {
                    outbox_written.send_modify(|n| *n = n.wrapping_add(1));
                }
                for (id, last) in last_ids {
                    let _ = announce.send((id, last));
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "append transaction failed");
                for pending in round {
                    let _ = pending.reply.send(Err(StoreError::Database(e.to_string())));
                }
            }
        }
    }
    if let Some(ack) = closing {
        let _ = ack.send(());
    }
}

/// Queues an append into the round; a `Close` is returned instead.
fn take(command: Command, round: &mut Vec<Pending>) -> Option<oneshot::Sender<()>> {
    match command {
        Command::Append {
            id,
            events,
            token,
            reply,
        } => {
            round.push(Pending {
                id,
                events,
                token,
                reply,
            });
            None
        }
        Command::Close(ack) => Some(ack),
    }
}

type Answers = Vec<Result<Vec<StoredEvent>, StoreError>>;
/// A conversation, the events to append to it, and the reply token they hand out.
type Request<'a> = (Uuid, &'a [NewEvent], Option<&'a ReplyToken>);

/// One transaction for the whole round: lock the conversations' rows, number each request's
/// events after the row's `last_event_id`, insert them and the webhook deliveries they owe,
/// move `last_event_id`, and on PostgreSQL NOTIFY (delivered at commit). A request for an
/// unknown conversation, or one that would pass the cap, gets its own error and does not fail
/// the others. Also says whether it queued deliveries.
async fn commit(
    db: &Db,
    requests: &[Request<'_>],
    max_events: u64,
    outbox: Option<&OutboxPlan>,
) -> Result<(Answers, BTreeMap<Uuid, u64>, bool), StoreError> {
    // Sorted, so concurrent replicas lock rows in one order (no deadlock).
    let ids: Vec<Uuid> = requests
        .iter()
        .map(|(id, _, _)| *id)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let (begin, lock) = if db.is_postgres() {
        ("BEGIN", " ORDER BY id FOR UPDATE")
    } else {
        // IMMEDIATE takes the write lock first (waiting on busy_timeout), instead of failing
        // when a read snapshot must be upgraded after another writer committed.
        ("BEGIN IMMEDIATE", "")
    };
    let select = format!(
        "SELECT id, last_event_id FROM conversations WHERE id IN ({}){lock}",
        db.placeholders(1, ids.len())
    );
    on_pool!(db, pool => {
        let mut tx = pool.begin_with(begin).await?;
        let mut query = sqlx::query_as::<_, (Uuid, i64)>(&select);
        for id in &ids {
            query = query.bind(*id);
        }
        let current: HashMap<Uuid, i64> = query.fetch_all(&mut *tx).await?.into_iter().collect();
        let plan = number(requests, current, max_events)?;
        for ((id, events, token), answer) in requests.iter().zip(&plan.answers) {
            if let (Some(token), Ok(_)) = (token, answer) {
                // Handed out before the state is stored (`approval_required`), entered with
                // the status change itself.
                let entered = events
                    .iter()
                    .any(|e| e.status.as_ref().is_some_and(|s| s.status == token.state));
                sqlx::query(
                    "UPDATE conversations SET reply_token_hash = $2, reply_state = $3, \
                     reply_entered = $4 WHERE id = $1",
                )
                .bind(*id)
                .bind(token_hash(&token.token))
                .bind(token.state.as_str())
                .bind(i64::from(entered))
                .execute(&mut *tx)
                .await?;
            }
        }
        let mut queued_deliveries = false;
        if let Some(outbox) = outbox.filter(|o| o.is_active()) {
            let now = Utc::now().timestamp_micros();
            let changed = status_changes(outbox, requests, &plan.answers);
            let mut rows = HashMap::new();
            let mut push = HashMap::new();
            if outbox.push && !changed.is_empty() {
                let sql = push::receivers_sql(changed.len());
                let mut query = sqlx::query_as::<_, (Uuid, String)>(&sql);
                for id in &changed {
                    query = query.bind(*id);
                }
                push = push::by_conversation(query.fetch_all(&mut *tx).await?);
            }
            if !changed.is_empty() {
                let sql = format!(
                    "SELECT {COLUMNS} FROM conversations WHERE id IN ({})",
                    db.placeholders(1, changed.len())
                );
                let mut query = sqlx::query_as::<_, Record>(&sql);
                for id in &changed {
                    query = query.bind(*id);
                }
                for record in query.fetch_all(&mut *tx).await? {
                    let row: ConversationRow = record.into_row_without_secrets()?;
                    rows.insert(row.id, row);
                }
            }
            let mut deliveries = Vec::new();
            for ((id, events, token), answer) in requests.iter().zip(&plan.answers) {
                if let Ok(stored) = answer {
                    let token = token.map(|t| t.token.as_str());
                    let push = push.get(id).map_or(&[][..], Vec::as_slice);
                    deliveries.extend(
                        outbox.for_append(*id, events, stored, &rows, push, token, now)?,
                    );
                }
            }
            queued_deliveries = !deliveries.is_empty();
            for insert in outbox::inserts(deliveries, now) {
                run_statement!(&mut *tx, insert)?;
            }
        }
        for chunk in plan.rows.chunks(INSERT_ROWS) {
            let values = (0..chunk.len())
                .map(|i| format!("({})", db.placeholders(i * 6 + 1, 6)))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "INSERT INTO events (conversation_id, seq, kind, source, timestamp, payload) VALUES {values}"
            );
            let mut insert = sqlx::query(&sql);
            for row in chunk {
                insert = insert
                    .bind(row.id)
                    .bind(row.seq)
                    .bind(row.kind)
                    .bind(row.source)
                    .bind(row.micros)
                    .bind(&row.payload);
            }
            insert.execute(&mut *tx).await?;
        }
        if !plan.last.is_empty() {
            let values = (0..plan.last.len())
                .map(|i| format!("({})", db.placeholders(i * 2 + 1, 2)))
                .collect::<Vec<_>>()
                .join(", ");
            // VALUES columns are named column1, column2 on both backends.
            let sql = format!(
                "UPDATE conversations SET last_event_id = v.column2 FROM (VALUES {values}) AS v \
                 WHERE conversations.id = v.column1"
            );
            let mut update = sqlx::query(&sql);
            for (id, last) in &plan.last {
                update = update.bind(*id).bind(*last);
            }
            update.execute(&mut *tx).await?;
            if db.is_postgres() {
                let sql = format!(
                    "SELECT pg_notify('{NOTIFY_CHANNEL}', v.column1) FROM (VALUES {}) AS v",
                    (1..=plan.last.len()).map(|n| format!("(${n})")).collect::<Vec<_>>().join(", ")
                );
                let mut notify = sqlx::query(&sql);
                for (id, last) in &plan.last {
                    notify = notify.bind(format!("{id}:{last}"));
                }
                notify.execute(&mut *tx).await?;
            }
        }
        tx.commit().await?;
        let last = plan.last.into_iter().map(|(id, n)| (id, n as u64)).collect();
        Ok((plan.answers, last, queued_deliveries))
    })
}

/// Conversations whose status changes in the round, when some receiver wants snapshots.
fn status_changes(
    outbox: &OutboxPlan,
    requests: &[Request<'_>],
    answers: &Answers,
) -> BTreeSet<Uuid> {
    if !outbox.wants_status_changes() {
        return BTreeSet::new();
    }
    requests
        .iter()
        .zip(answers)
        .filter(|((_, events, _), answer)| {
            answer.is_ok() && events.iter().any(|e| e.status.is_some())
        })
        .map(|((id, _, _), _)| *id)
        .collect()
}

struct Row<'a> {
    id: Uuid,
    seq: i64,
    kind: &'static str,
    source: &'a str,
    micros: i64,
    payload: String,
}

struct Plan<'a> {
    rows: Vec<Row<'a>>,
    answers: Answers,
    /// The new `last_event_id` of every conversation that got events.
    last: BTreeMap<Uuid, i64>,
}

/// Numbers each request's events in queue order after its conversation's current last id.
fn number<'a>(
    requests: &'a [Request<'a>],
    mut current: HashMap<Uuid, i64>,
    max_events: u64,
) -> Result<Plan<'a>, StoreError> {
    let mut plan = Plan {
        rows: Vec::new(),
        answers: Vec::with_capacity(requests.len()),
        last: BTreeMap::new(),
    };
    let max = to_i64(max_events);
    for (id, events, _) in requests {
        let Some(last) = current.get_mut(id) else {
            plan.answers.push(Err(StoreError::NotFound));
            continue;
        };
        let count = i64::try_from(events.len()).unwrap_or(i64::MAX);
        if last.saturating_add(count) > max {
            plan.answers
                .push(Err(StoreError::TooManyEvents { max: max_events }));
            continue;
        }
        let mut stored = Vec::with_capacity(events.len());
        for event in events.iter() {
            *last += 1;
            let payload = serde_json::to_string(&event.payload)
                .map_err(|e| StoreError::Database(format!("serialising an event: {e}")))?;
            let micros = event.timestamp.timestamp_micros();
            stored.push(StoredEvent {
                id: *last as u64,
                kind: event.kind,
                source: event.source.clone(),
                timestamp: from_micros(micros)?,
                payload: event.payload.clone(),
            });
            plan.rows.push(Row {
                id: *id,
                seq: *last,
                kind: event.kind.as_str(),
                source: &event.source,
                micros,
                payload,
            });
        }
        plan.last.insert(*id, *last);
        plan.answers.push(Ok(stored));
    }
    Ok(plan)
}
