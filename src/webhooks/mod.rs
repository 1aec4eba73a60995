//! Webhooks out (issue 15): every receiver configured in `[[webhooks]]` hears of every
//! conversation change — a snapshot (`POST {base_url}/conversations`) on create, each status
//! change, PATCH, a config change and delete, and the stored events (`POST
//! {base_url}/events/{conversation_id}`, a JSON array) in batches — and none is lost.
//!
//! # Design, and why
//!
//! - **A transactional outbox** (`store::outbox`, table `webhook_outbox`). A delivery is a row
//!   written in the transaction of the change it reports: the appender's round for events
//!   and status changes (a status change is always logged as a `conversation_state_update`
//!   event, so one place catches them all, whoever writes them), `create`, `set_meta`,
//!   `set_config` and `delete` for the others. A change that commits has its deliveries and
//!   one that does not has none, on SQLite and PostgreSQL alike; `kill -9` at any point loses
//!   nothing. No receivers configured: no rows, no cost.
//! - **What a body shows is kept when written.** A snapshot keeps the row as it stands
//!   inside the transaction (status, reason and last event id from the change it reports;
//!   `store::Snapshot`), so a delivery sent late still says what happened then, and a
//!   deleted conversation's snapshot needs no row. The worker renders the body from it
//!   (`body.rs`) at each attempt: the store never calls up into webhooks. Events are stored with their delivery: the events of a deleted
//!   conversation still arrive. The cost is a copy of each event per receiver until it is
//!   delivered; delivered rows are deleted.
//! - **Order per (receiver, conversation).** Rows are numbered (`seq`); only the oldest
//!   pending row of a queue (its head) may be sent, so a conversation's deliveries arrive in
//!   the order of its changes, while different conversations, and different receivers, never
//!   wait for each other. A dead letter stops holding its queue back: the rest goes on, and
//!   a retried dead letter is sent before anything queued after it that is still pending.
//! - **Batches.** An append's events are split into deliveries of at most `batch_size`; a
//!   partial one waits up to `flush_delay_secs` and, at its first attempt, takes in the
//!   partial ones queued right behind it. A status change sends the events before it at once
//!   (its snapshot must not wait behind them).
//! - **One sender per delivery.** A worker claims a head with a conditional UPDATE
//!   (`claimed_by`, `claim_until`): with several replicas exactly one sends it; a replica that
//!   dies mid-attempt leaves a claim that expires after the attempt's timeout, and another
//!   replica sends the delivery again. Receivers de-duplicate by `X-Triage-Delivery`, fixed
//!   when the row is written (body and batch are sealed before the first attempt), so a
//!   retry is byte-for-byte the same request.
//! - **Failures.** Exponential back-off with jitter (`retry_base_delay_ms` doubling up to
//!   `retry_max_delay_secs`), never sooner than `Retry-After`; after `max_attempts`, or
//!   `max_age_secs` after it was written, a delivery is dead-lettered (status `failed`,
//!   listed by `GET /api/webhooks/deliveries?status=failed`, queued again by `POST
//!   /api/webhooks/deliveries/{id}/retry`) until `dead_letter_retention_secs` have passed,
//!   then deleted, so a receiver that stays away cannot fill the database. A 4xx other than 408, 425 and 429, or a
//!   redirect, is dead-lettered at once: the same request cannot succeed.
//! - **Isolation.** Runs, event streams and a run's end only write rows; the worker is a
//!   separate task with a client per receiver (redirects never followed, a deadline per
//!   attempt, at most `max_in_flight` requests at once, at most 512 bytes of an error answer
//!   read), sharing no connection pool or limit with the LLM's client. A receiver's URL comes
//!   from the config only: a delivery adds a fixed path and the conversation's UUID to it.
//! - **Secrets** never reach a body (the snapshot's credential fields are null; events are
//!   what the API shows); the receivers' own secrets may come from the environment
//!   (`${NAME}`) and are masked like every other credential.
//!
//! Push targets (`push.rs`, A2A's push notification configs) ride the same outbox: each is a
//! receiver of its own (`push/{conversation}/{target}`) owed a snapshot per status change.
//!
//! Webhooks in (reply tokens) are a front door of their own: `crate::inbound`.

pub mod body;
pub mod push;
mod send;
mod worker;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

pub use crate::config::webhooks::WebhookSettings;
pub use send::signature;

use crate::store::outbox::{CONVERSATIONS, EVENTS};
use crate::store::{Backend, OutboxPlan, OutboxReceiver, Store};

/// What the store must write for `receivers` and, with `push`, for push targets (`None`
/// without either).
pub fn outbox_plan(receivers: &[WebhookSettings], push: bool) -> Option<Arc<OutboxPlan>> {
    if receivers.is_empty() && !push {
        return None;
    }
    Some(Arc::new(OutboxPlan {
        push,
        receivers: receivers
            .iter()
            .map(|r| OutboxReceiver {
                name: r.name.clone(),
                conversations: r.wants(CONVERSATIONS),
                events: r.wants(EVENTS),
                event_kinds: (!r.event_kinds.is_empty())
                    .then(|| r.event_kinds.iter().cloned().collect::<BTreeSet<_>>()),
                batch_size: r.batch_size,
                flush_delay: Duration::from_secs_f64(r.flush_delay_secs),
            })
            .collect(),
    }))
}

/// Starts a worker per receiver (and the queue gauges) on `store`; they stop when it is
/// dropped. Snapshots show `default_steps` for a conversation that sets no `max_iterations`.
pub async fn start(
    receivers: &[WebhookSettings],
    store: &Store,
    default_steps: u32,
    roots: &crate::runtime::trust::ExtraRoots,
) -> Result<(), String> {
    if receivers.is_empty() {
        return Ok(());
    }
    let built = receivers
        .iter()
        .map(|r| send::Receiver::new(r, roots))
        .collect::<Result<Vec<_>, _>>()?;
    // One SQLite file has one replica: claims left by the process that ran before are its own.
    if store.backend() == Backend::Sqlite {
        store
            .release_outbox_claims()
            .await
            .map_err(|e| format!("webhook outbox: {e}"))?;
    }
    let owner = uuid::Uuid::new_v4();
    for receiver in built {
        tracing::info!(receiver = %receiver.name, "webhook receiver configured");
        worker::spawn(Arc::new(receiver), store.downgrade(), owner, default_steps);
    }
    worker::report(
        receivers
            .iter()
            .map(|r| {
                let retention = Duration::from_secs_f64(r.dead_letter_retention_secs);
                (r.name.clone(), retention)
            })
            .collect(),
        store.downgrade(),
    );
    Ok(())
}
