//! The background worker: per receiver, a task that claims the heads of its queues that are
//! due, sends up to `max_in_flight` of them at once (one per conversation, so each
//! conversation's deliveries stay in order), and records each outcome. It is woken when this
//! replica queues deliveries and polls for the rest (other replicas' rows, retries coming
//! due). Nothing a run does waits for it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use uuid::Uuid;

use super::send::{Outcome, Receiver};
use crate::store::outbox::CONVERSATIONS;
use crate::store::{Store, WeakStore};

/// How often a worker looks for due deliveries it was not woken for.
const POLL: Duration = Duration::from_millis(500);
/// How long a claim outlives the attempt's timeout: time to record the outcome.
const CLAIM_MARGIN: Duration = Duration::from_secs(10);
/// How often the queue gauges are refreshed.
const STATS_EVERY: Duration = Duration::from_secs(5);

/// Sends `receiver`'s deliveries until the store is closed or dropped.
pub(crate) fn spawn(receiver: Arc<Receiver>, store: WeakStore, owner: Uuid, default_steps: u32) {
    tokio::spawn(async move {
        let Some(mut wake) = store.upgrade().map(|s| s.subscribe_outbox()) else {
            return;
        };
        let mut in_flight = JoinSet::new();
        loop {
            let Some(live) = store.upgrade() else { return };
            fill(&receiver, &live, owner, default_steps, &mut in_flight).await;
            drop(live);
            tokio::select! {
                changed = wake.changed() => if changed.is_err() { return },
                Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    });
}

/// Claims due heads up to the receiver's room and starts sending them.
async fn fill(
    receiver: &Arc<Receiver>,
    store: &Store,
    owner: Uuid,
    default_steps: u32,
    in_flight: &mut JoinSet<()>,
) {
    let room = receiver.max_in_flight.saturating_sub(in_flight.len());
    if room == 0 {
        return;
    }
    // The database's clock (corrected on PostgreSQL): claims of replicas whose clocks
    // disagree still expire when they should.
    let now = store.now();
    let heads = match store
        .outbox_heads(&receiver.name, now, u32::try_from(room).unwrap_or(u32::MAX))
        .await
    {
        Ok(heads) => heads,
        Err(e) => {
            tracing::warn!(receiver = %receiver.name, error = %e, "cannot read the webhook outbox");
            return;
        }
    };
    let lease = chrono::Duration::from_std(receiver.timeout + CLAIM_MARGIN)
        .unwrap_or(chrono::Duration::MAX);
    for seq in heads {
        match store.outbox_claim(seq, owner, now, now + lease).await {
            Ok(true) => {
                let sent = deliver(receiver.clone(), store.clone(), owner, seq, default_steps);
                in_flight.spawn(sent);
            }
            Ok(false) => {} // another replica took it
            Err(e) => {
                tracing::warn!(receiver = %receiver.name, error = %e, "cannot claim a webhook delivery");
                return;
            }
        }
    }
}

/// One attempt of a claimed delivery, and its outcome recorded.
async fn deliver(receiver: Arc<Receiver>, store: Store, owner: Uuid, seq: i64, default_steps: u32) {
    let name = receiver.name.clone();
    let (delivery, body) = match store.outbox_seal(seq, owner, receiver.batch_size).await {
        Ok(Some(sealed)) => sealed,
        Ok(None) => return,
        Err(e) => {
            // The claim expires and the delivery is tried again.
            tracing::warn!(receiver = %name, error = %e, "cannot prepare a webhook delivery");
            return;
        }
    };
    let body = if delivery.kind == CONVERSATIONS {
        super::body::snapshot_body(body, default_steps)
    } else {
        body
    };
    let started = Instant::now();
    let outcome = receiver.attempt(&delivery, body).await;
    metrics::histogram!("triage_webhook_attempt_duration_seconds", "receiver" => name.clone())
        .record(started.elapsed().as_secs_f64());
    record(&receiver, &store, owner, seq, &delivery, outcome, &name).await;
}

/// Records an attempt's outcome: delivered (the row goes), retried later or dead-lettered.
/// `label` names the receiver in metrics (a push target's is the same for all of them).
pub(super) async fn record(
    receiver: &Receiver,
    store: &Store,
    owner: Uuid,
    seq: i64,
    delivery: &crate::store::Delivery,
    outcome: Outcome,
    label: &str,
) {
    let name = &receiver.name;
    let recorded = match outcome {
        Outcome::Delivered => {
            metrics::counter!("triage_webhook_deliveries_total", "receiver" => label.to_owned(), "outcome" => "delivered")
                .increment(1);
            store.outbox_delivered(seq, owner).await
        }
        Outcome::Failed {
            failure,
            retry_after,
            permanent,
        } => {
            let attempts = delivery.attempts.saturating_add(1);
            let next =
                receiver.next_attempt(delivery, attempts, retry_after, permanent, store.now());
            let outcome = if next.is_some() {
                tracing::info!(receiver = %name, delivery = %delivery.id, attempts, error = %failure.error, "webhook delivery failed; retrying");
                "retried"
            } else {
                tracing::warn!(receiver = %name, delivery = %delivery.id, attempts, error = %failure.error, "webhook delivery dead-lettered");
                "dead_lettered"
            };
            metrics::counter!("triage_webhook_deliveries_total", "receiver" => label.to_owned(), "outcome" => outcome)
                .increment(1);
            store.outbox_failed(seq, owner, &failure, next).await
        }
    };
    match recorded {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!(receiver = %name, delivery = %delivery.id, "a webhook delivery's claim expired during its attempt; it may be sent again (same X-Triage-Delivery)");
        }
        Err(e) => {
            tracing::warn!(receiver = %name, delivery = %delivery.id, error = %e, "cannot record a webhook delivery's outcome; it will be sent again (same X-Triage-Delivery)");
        }
    }
}

/// Keeps the queue gauges of `receivers` current, and deletes their dead letters older than
/// each one's retention, until the store is gone.
pub(crate) fn report(receivers: Vec<(String, Duration)>, store: WeakStore) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(STATS_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let Some(live) = store.upgrade() else { return };
            let stats = match live.outbox_stats().await {
                Ok(stats) => stats,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the webhook outbox's size");
                    continue;
                }
            };
            let now = live.now();
            for (name, retention) in &receivers {
                let Ok(retention) = chrono::TimeDelta::from_std(*retention) else {
                    continue;
                };
                match live.purge_dead_letters(name, now - retention).await {
                    Ok(0) => {}
                    Ok(purged) => {
                        tracing::info!(receiver = %name, purged, "webhook dead letters past their retention deleted");
                    }
                    Err(e) => {
                        tracing::warn!(receiver = %name, error = %e, "cannot delete old webhook dead letters")
                    }
                }
            }
            for (name, _) in &receivers {
                let queue = stats.iter().find(|s| &s.receiver == name);
                let pending = queue.map_or(0, |q| q.pending);
                let failed = queue.map_or(0, |q| q.failed);
                let oldest = queue
                    .and_then(|q| q.oldest_pending)
                    .map_or(0.0, |t| (now - t).as_seconds_f64().max(0.0));
                metrics::gauge!("triage_webhook_queue_depth", "receiver" => name.clone())
                    .set(pending as f64);
                metrics::gauge!("triage_webhook_dead_letters", "receiver" => name.clone())
                    .set(failed as f64);
                metrics::gauge!("triage_webhook_oldest_undelivered_seconds", "receiver" => name.clone())
                    .set(oldest);
            }
        }
    });
}
