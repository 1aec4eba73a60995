//! Push targets' deliveries (`store::push`): one worker for all of them, since clients add and
//! remove targets while the server runs. It claims the due heads of every target's queue,
//! looks the target up (gone: its deliveries are dropped), renders the body with the front
//! door's renderer (A2A's `StreamResponse`, `a2a/push.rs`) and sends it with the target's
//! own `Authorization` and token, through a client that resolves no name to a link-local or
//! metadata address. Retries, dead letters and claims are the configured receivers' (`send.rs`,
//! `worker.rs`); an error a target answers has the target's secrets masked before it is kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, header};
use futures::future::BoxFuture;
use tokio::task::JoinSet;
use uuid::Uuid;

use super::send::{Outcome, Receiver};
use super::worker::record;
use crate::store::{Failure, PushTarget, Store};

/// Renders a delivery's body (the stored snapshot) as the target's protocol has it; an error
/// dead-letters the delivery.
pub type RenderPush =
    Arc<dyn Fn(Uuid, String) -> BoxFuture<'static, Result<String, String>> + Send + Sync>;

/// How push targets are sent to.
pub struct PushSender {
    /// Retry policy, signing key, client; each target's URL and headers are put on a copy.
    template: Receiver,
    render: RenderPush,
    content_type: HeaderValue,
}

/// Names every push target in metrics: one series, not one per target a client made up.
const LABEL: &str = "push";
const POLL: Duration = Duration::from_millis(500);
const CLAIM_MARGIN: Duration = Duration::from_secs(10);
const PURGE_EVERY: Duration = Duration::from_secs(60);
/// Notifications sent at once, to all targets: many, since a target that never answers holds
/// one for the whole timeout and targets come from clients.
const MAX_IN_FLIGHT: usize = 32;
/// Of them, one task's at most: a task's targets that hang (up to `a2a.push_max_per_task`)
/// cannot take every sender and hold back every other task's notifications.
const PER_TASK: usize = 2;

/// The sends in flight per task; each send holds a [`Slot`], which gives its place back when
/// it ends, however it ends.
#[derive(Clone, Default)]
struct Busy(Arc<Mutex<HashMap<Uuid, usize>>>);

struct Slot {
    busy: Busy,
    task: Uuid,
}

impl Busy {
    fn take(&self, task: Uuid) -> Option<Slot> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let n = map.entry(task).or_default();
        if *n >= PER_TASK {
            return None;
        }
        *n += 1;
        Some(Slot {
            busy: self.clone(),
            task,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut map = self.busy.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = map.get_mut(&self.task) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.task);
            }
        }
    }
}

impl PushSender {
    /// `settings` give the policy (their URL is not used); `content_type` the bodies'.
    pub fn new(
        settings: &super::WebhookSettings,
        roots: &crate::runtime::trust::ExtraRoots,
        render: RenderPush,
        content_type: &'static str,
    ) -> Result<PushSender, String> {
        let mut settings = settings.clone();
        settings.max_in_flight = MAX_IN_FLIGHT;
        Ok(PushSender {
            template: Receiver::for_push(&settings, roots)?,
            render,
            content_type: HeaderValue::from_static(content_type),
        })
    }

    /// The headers a target's deliveries carry; a value that is no header value (the
    /// client's input was checked, so only a stored row could be) is an error.
    fn headers(&self, target: &PushTarget) -> Result<HeaderMap, String> {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, self.content_type.clone());
        let sensitive = |text: &str| {
            HeaderValue::from_str(text)
                .map(|mut v| {
                    v.set_sensitive(true);
                    v
                })
                .map_err(|_| "a stored credential is not a valid header value".to_owned())
        };
        if let Some(credentials) = &target.credentials {
            let scheme = target.scheme.as_deref().unwrap_or("Bearer");
            headers.insert(
                header::AUTHORIZATION,
                sensitive(&format!("{scheme} {credentials}"))?,
            );
        }
        if let Some(token) = &target.token {
            headers.insert("x-a2a-notification-token", sensitive(token)?);
        }
        Ok(headers)
    }
}

/// Sends push targets' deliveries, and deletes their dead letters after `retention`, until
/// the store is closed or dropped.
pub fn spawn(sender: PushSender, store: &Store, retention: Duration) {
    let sender = Arc::new(sender);
    let owner = Uuid::new_v4();
    let weak = store.downgrade();
    tokio::spawn(async move {
        let Some(mut wake) = weak.upgrade().map(|s| s.subscribe_outbox()) else {
            return;
        };
        let mut in_flight = JoinSet::new();
        let busy = Busy::default();
        let mut purged = tokio::time::Instant::now();
        loop {
            let Some(live) = weak.upgrade() else { return };
            fill(&sender, &live, owner, &mut in_flight, &busy).await;
            if purged.elapsed() >= PURGE_EVERY {
                purged = tokio::time::Instant::now();
                purge(&live, retention).await;
            }
            drop(live);
            tokio::select! {
                changed = wake.changed() => if changed.is_err() { return },
                Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    });
}

async fn purge(store: &Store, retention: Duration) {
    let Ok(retention) = chrono::TimeDelta::from_std(retention) else {
        return;
    };
    if let Err(e) = store.purge_push_dead_letters(store.now() - retention).await {
        tracing::warn!(error = %e, "cannot delete old push notification dead letters");
    }
}

async fn fill(
    sender: &Arc<PushSender>,
    store: &Store,
    owner: Uuid,
    in_flight: &mut JoinSet<()>,
    busy: &Busy,
) {
    let room = MAX_IN_FLIGHT.saturating_sub(in_flight.len());
    if room == 0 {
        return;
    }
    let now = store.now();
    // More heads than room: those of tasks at their share are passed over for the others'.
    let wanted = room.saturating_mul(PER_TASK * 2);
    let heads = match store
        .outbox_push_heads(now, u32::try_from(wanted).unwrap_or(u32::MAX))
        .await
    {
        Ok(heads) => heads,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the push notification outbox");
            return;
        }
    };
    let lease = chrono::Duration::from_std(sender.template.timeout + CLAIM_MARGIN)
        .unwrap_or(chrono::Duration::MAX);
    for (seq, task) in heads {
        if in_flight.len() >= MAX_IN_FLIGHT {
            return;
        }
        let Some(slot) = busy.take(task) else {
            continue;
        };
        match store.outbox_claim(seq, owner, now, now + lease).await {
            Ok(true) => {
                let sent = deliver(sender.clone(), store.clone(), owner, seq);
                in_flight.spawn(async move {
                    sent.await;
                    drop(slot);
                });
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "cannot claim a push notification");
                return;
            }
        }
    }
}

async fn deliver(sender: Arc<PushSender>, store: Store, owner: Uuid, seq: i64) {
    let (delivery, body) = match store.outbox_seal(seq, owner, 1).await {
        Ok(Some(sealed)) => sealed,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(error = %e, "cannot prepare a push notification");
            return;
        }
    };
    let target = match store.push_target_of(&delivery.receiver).await {
        Ok(Some(target)) => target,
        Ok(None) => {
            // Deleted (or its task was): nothing more goes there.
            let _ = store.outbox_delivered(seq, owner).await;
            return;
        }
        Err(e) => {
            tracing::warn!(receiver = %delivery.receiver, error = %e, "cannot read a push target");
            return;
        }
    };
    let prepared = match sender.headers(&target) {
        Ok(headers) => (sender.render)(delivery.conversation_id, body)
            .await
            .map(|body| (headers, body)),
        Err(e) => Err(e),
    };
    let (receiver, outcome) = match prepared {
        Ok((headers, body)) => {
            let receiver =
                sender
                    .template
                    .for_target(delivery.receiver.clone(), &target.url, headers);
            let outcome = masked(receiver.attempt(&delivery, body).await, &target);
            (receiver, outcome)
        }
        Err(error) => {
            let receiver = sender.template.for_target(
                delivery.receiver.clone(),
                &target.url,
                HeaderMap::new(),
            );
            let failure = Failure {
                error,
                status: None,
            };
            let outcome = Outcome::Failed {
                failure,
                retry_after: None,
                permanent: true,
            };
            (receiver, outcome)
        }
    };
    record(&receiver, &store, owner, seq, &delivery, outcome, LABEL).await;
}

/// A target's answer may quote what it was sent: its secrets are masked before the error is
/// kept (the deliveries API lists it).
fn masked(outcome: Outcome, target: &PushTarget) -> Outcome {
    match outcome {
        Outcome::Failed {
            mut failure,
            retry_after,
            permanent,
        } => {
            failure.error = mask_secrets(failure.error, target);
            Outcome::Failed {
                failure,
                retry_after,
                permanent,
            }
        }
        delivered => delivered,
    }
}

/// The shortest end of an error that is taken for the start of a cut-off secret.
const CUT_SECRET_MIN: usize = 4;

/// `error` with the target's token and credentials masked: as sent, as a JSON string or a
/// URL's query would quote them, and the start of one where the kept error was cut off in it
/// (an answer is kept to its first bytes, a secret may be longer).
fn mask_secrets(mut error: String, target: &PushTarget) -> String {
    let mut secrets: Vec<String> = Vec::new();
    for secret in [&target.credentials, &target.token].into_iter().flatten() {
        if secret.is_empty() {
            continue;
        }
        let json = serde_json::Value::String(secret.clone()).to_string();
        let query: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
        secrets.extend([secret.clone(), json[1..json.len() - 1].to_owned(), query]);
    }
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    for secret in &secrets {
        error = error.replace(secret.as_str(), "***");
    }
    // The longest end of the error that begins a secret.
    let cut = secrets
        .iter()
        .filter_map(|secret| {
            let shortest = CUT_SECRET_MIN.min(secret.len());
            (shortest..secret.len().min(error.len() + 1))
                .rev()
                .find(|&n| {
                    let start = error.len() - n;
                    error.is_char_boundary(start)
                        && secret.as_bytes().starts_with(&error.as_bytes()[start..])
                })
        })
        .max();
    if let Some(n) = cut {
        error.truncate(error.len() - n);
        error.push_str("***");
    }
    error
}
