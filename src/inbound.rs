//! Webhooks in: `POST /api/webhook/{conversation_id}/{state_name}` with the conversation's
//! reply token answers what it waits for from elsewhere — approvals, a resume, a message.
//!
//! The token is the credential (no API key): minted when the conversation enters a state
//! that waits for the outside world, handed out only in that change's webhook deliveries,
//! stored as a SHA-256 and compared in constant time; a new state's token replaces the old.
//! Failed attempts are limited per conversation (on each replica). Every accepted event is
//! kept (`webhook_inbound`: a duplicate — same token and event key — gets the first answer
//! and changes nothing) and logged in the conversation as a `webhook` event with its data,
//! its sender's address and time. An approval that arrives while the run is still on its way
//! into `waiting_for_confirmation` (the token is out with `approval_required` before the
//! status is stored) is kept and applied the moment the state is entered.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::conversation_domain::{ConversationStatus, EventKind};
use crate::conversations::api::{ConfirmationResponse, SendMessage};
use crate::conversations::{ConversationError, Conversations};
use crate::store::{Inbound as Kept, NewEvent, ReplyState, StoreError, token_hash};
use crate::wire::request::ToolDecision;

// The states a token is minted for, as senders name them (`state_name`).
pub const WAITING: &str = ConversationStatus::WaitingForConfirmation.as_str();
pub const PAUSED: &str = ConversationStatus::Paused.as_str();
const RUNNING: &str = ConversationStatus::Running.as_str();

/// Failed token attempts per conversation and window before further wrong ones get 429.
const MAX_FAILURES: u32 = 10;
const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Conversations whose failures are tracked at once (the oldest are forgotten).
const MAX_TRACKED: usize = 10_000;
/// How long an early event waits for its state before it expires.
const EARLY_WAIT: Duration = Duration::from_secs(300);
/// Early events kept per token at most (distinct keys; beyond it 429).
const MAX_EARLY: usize = 10;

/// The request body.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookEvent {
    /// `approval_granted`, `approval_denied` (in `waiting_for_confirmation`), `resume`,
    /// `message` (in `paused`); any other key changes nothing.
    pub event_key: String,
    /// `tool_call_ids` (the approvals it answers; default all), `comment` (a denial's
    /// reason), `content` (the message).
    #[serde(default)]
    pub data: Option<Map<String, Value>>,
}

/// What an accepted event is answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WebhookAnswer {
    /// The conversation's execution status after the event applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The event key matches nothing in that state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_transition: Option<bool>,
    /// Kept until the conversation enters the state (202).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<bool>,
}

pub struct Request {
    pub conversation_id: Uuid,
    pub state_name: String,
    pub token: Option<String>,
    pub event: WebhookEvent,
    /// The sender, as the audit shows it.
    pub source: String,
}

#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("conversation not found")]
    NotFound,
    /// Unknown, stale and missing tokens alike.
    #[error("invalid or stale reply token")]
    BadToken,
    #[error("the conversation is {status}, not {expected}")]
    NotInState { status: String, expected: String },
    #[error("too many failed token attempts for this conversation; retry later")]
    Throttled(Duration),
    #[error(transparent)]
    Failed(#[from] ConversationError),
}

impl From<StoreError> for Refused {
    fn from(e: StoreError) -> Self {
        Refused::Failed(e.into())
    }
}

/// What an event does, decided before it is logged.
enum Action {
    Decide(Vec<ToolDecision>),
    Resume,
    Message(String),
    Nothing,
}

pub struct Inbound {
    conversations: Arc<Conversations>,
    failures: Mutex<HashMap<Uuid, (Instant, u32)>>,
    /// (conversation, token hash) pairs a task waits for on this replica.
    waiters: Mutex<HashSet<(Uuid, String)>>,
}

impl Inbound {
    pub fn new(conversations: Arc<Conversations>) -> Arc<Inbound> {
        Arc::new(Inbound {
            conversations,
            failures: Mutex::default(),
            waiters: Mutex::default(),
        })
    }

    /// Checks, keeps, logs and applies one event: 200 or 202 with the answer.
    pub async fn receive(self: &Arc<Self>, req: Request) -> Result<(u16, WebhookAnswer), Refused> {
        let id = req.conversation_id;
        let store = self.conversations.store();
        let state = store.reply_state(id).await?.ok_or(Refused::NotFound)?;
        // Only wrong tokens are throttled: refusing the live one too would let anyone who
        // knows the conversation id keep its approvals out with ten guesses a minute.
        let Some(hash) = verified(req.token.as_deref(), &state) else {
            if let Some(wait) = self.throttled(id) {
                return Err(Refused::Throttled(wait));
            }
            self.failed(id);
            return Err(Refused::BadToken);
        };
        let key = &req.event.event_key;
        // Refused before it is kept: an early event is answered 202 long before it applies.
        let data = req.event.data.as_ref();
        wanted_ids(data.and_then(|d| d.get("tool_call_ids")))?;
        if let Some(kept) = store.inbound_duplicate(id, &hash, key).await? {
            return Ok((200, answer_of(&kept)));
        }
        let for_state = state.token_state.as_deref() == Some(req.state_name.as_str());
        let in_state = for_state && state.status == req.state_name;
        let early =
            for_state && !state.entered && req.state_name == WAITING && state.status == RUNNING;
        let received = Utc::now();
        if !in_state && !early {
            self.audit(&req, "not_in_state", received).await;
            return Err(Refused::NotInState {
                status: state.status,
                expected: req.state_name,
            });
        }
        if early && store.queued_inbound(id, &hash).await?.len() >= MAX_EARLY {
            return Err(Refused::Throttled(Duration::from_secs(1)));
        }
        let queued = WebhookAnswer {
            queued: Some(true),
            ..WebhookAnswer::default()
        };
        let kept = Kept {
            seq: 0,
            conversation_id: id,
            token_hash: hash.clone(),
            state_name: req.state_name.clone(),
            event_key: key.clone(),
            data: Value::Object(req.event.data.clone().unwrap_or_default()),
            source: req.source.clone(),
            received_at: received,
            status: if early { "queued" } else { "applying" }.into(),
            answer: if early {
                to_value(&queued)
            } else {
                Value::Null
            },
        };
        let Some(seq) = store.record_inbound(&kept).await? else {
            // The same event, at the same moment: the first one applies it.
            let first = store.inbound_duplicate(id, &hash, key).await?;
            return Ok((200, first.as_ref().map(answer_of).unwrap_or_default()));
        };
        if early {
            self.audit(&req, "queued", received).await;
            self.apply_when_entered(id, hash);
            return Ok((202, queued));
        }
        match self.apply(&req, received).await {
            Ok((status, answer)) => {
                store
                    .settle_inbound(seq, Some((status, &to_value(&answer))))
                    .await?;
                Ok((200, answer))
            }
            Err(e) => {
                // Not applied: forgotten, so the sender may try again.
                let _ = store.settle_inbound(seq, None).await;
                Err(e.into())
            }
        }
    }

    /// Decides, logs, then applies the event; returns the kept status and the answer.
    async fn apply(
        &self,
        req: &Request,
        received: DateTime<Utc>,
    ) -> Result<(&'static str, WebhookAnswer), ConversationError> {
        let id = req.conversation_id;
        let action = self.action(req).await?;
        let outcome = match action {
            Action::Nothing => "no_transition",
            _ => "applied",
        };
        self.audit(req, outcome, received).await;
        let convs = &self.conversations;
        match action {
            Action::Nothing => {
                return Ok((
                    "no_transition",
                    WebhookAnswer {
                        no_transition: Some(true),
                        ..WebhookAnswer::default()
                    },
                ));
            }
            Action::Decide(decisions) => {
                let response = ConfirmationResponse {
                    tool_decisions: Some(decisions),
                    ..ConfirmationResponse::default()
                };
                convs.respond(id, response).await?;
            }
            Action::Resume => convs.run(id).await?,
            Action::Message(content) => {
                let message = SendMessage {
                    content,
                    images: None,
                    run: Some(true),
                };
                convs.send_message(id, message).await?;
            }
        }
        let status = convs.info(id).await?.execution_status;
        Ok((
            "applied",
            WebhookAnswer {
                state: Some(status.to_string()),
                ..WebhookAnswer::default()
            },
        ))
    }

    async fn action(&self, req: &Request) -> Result<Action, ConversationError> {
        let data = req.event.data.clone().unwrap_or_default();
        let text = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_owned);
        Ok(
            match (req.state_name.as_str(), req.event.event_key.as_str()) {
                (WAITING, key @ ("approval_granted" | "approval_denied")) => {
                    let wanted = wanted_ids(data.get("tool_call_ids"))?;
                    let info = self.conversations.info(req.conversation_id).await?;
                    let decisions: Vec<ToolDecision> = info
                        .pending_actions
                        .iter()
                        .filter(|p| p.waits_for == "approval")
                        .filter(|p| {
                            wanted
                                .as_ref()
                                .is_none_or(|w| w.contains(&p.tool_call_id.as_str()))
                        })
                        .map(|p| ToolDecision {
                            tool_call_id: p.tool_call_id.clone(),
                            approved: key == "approval_granted",
                            feedback: text("comment"),
                            save_prefixes: None,
                        })
                        .collect();
                    if decisions.is_empty() {
                        Action::Nothing
                    } else {
                        Action::Decide(decisions)
                    }
                }
                (PAUSED, "resume") => Action::Resume,
                (PAUSED, "message") => match text("content").filter(|c| !c.trim().is_empty()) {
                    Some(content) => Action::Message(content),
                    None => {
                        return Err(ConversationError::BadInput(
                            "a `message` event needs `data.content`".into(),
                        ));
                    }
                },
                _ => Action::Nothing,
            },
        )
    }

    /// The conversation's log shows every authenticated event: who sent what, when, and
    /// what came of it.
    async fn audit(&self, req: &Request, outcome: &str, received: DateTime<Utc>) {
        let id = req.conversation_id;
        // Masked like every other logged event: a message's text may quote a secret.
        let masker = self.conversations.log_masker(id).await;
        let mut event = NewEvent {
            kind: EventKind::Webhook,
            source: "user".into(),
            timestamp: Utc::now(),
            payload: json!({
                "event_key": req.event.event_key,
                "state_name": req.state_name,
                "data": req.event.data,
                "sender": req.source,
                "received_at": received,
                "outcome": outcome,
            }),
            status: None,
        };
        masker.mask(&mut event.payload);
        if let Err(e) = self.conversations.store().append(id, vec![event]).await {
            tracing::warn!(conversation = %id, error = %e, "cannot log an inbound webhook event");
        }
    }

    /// Applies the early events kept for `hash` once the conversation waits under that
    /// token; expires them if it goes elsewhere, or after `EARLY_WAIT`.
    fn apply_when_entered(self: &Arc<Self>, id: Uuid, hash: String) {
        let key = (id, hash.clone());
        let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        if !waiters.insert(key.clone()) {
            return; // the task waiting already applies every event kept for the token
        }
        drop(waiters);
        let this: Weak<Inbound> = Arc::downgrade(self);
        let done = Arc::downgrade(self);
        let forget = move || {
            if let Some(inbound) = done.upgrade() {
                inbound
                    .waiters
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&key);
            }
        };
        let mut announced = self.conversations.store().subscribe();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + EARLY_WAIT;
            let outcome = async {
                loop {
                    let Some(inbound) = this.upgrade() else {
                        return;
                    };
                    let state = inbound.conversations.store().reply_state(id).await;
                    let current = matches!(&state, Ok(Some(s)) if s.token_hash.as_deref() == Some(hash.as_str()));
                    match state {
                        Ok(Some(s)) if current && s.status == WAITING => {
                            inbound.apply_queued(id, &hash, true).await;
                            return;
                        }
                        Ok(Some(s)) if current && s.status == RUNNING => {}
                        Ok(_) => {
                            inbound.apply_queued(id, &hash, false).await;
                            return;
                        }
                        Err(e) => {
                            tracing::warn!(conversation = %id, error = %e, "cannot read a conversation for its early webhook events")
                        }
                    }
                    drop(inbound);
                    if tokio::time::Instant::now() >= deadline {
                        if let Some(inbound) = this.upgrade() {
                            inbound.apply_queued(id, &hash, false).await;
                        }
                        return;
                    }
                    let wait = tokio::time::sleep(Duration::from_millis(500));
                    tokio::pin!(wait);
                    loop {
                        tokio::select! {
                            () = &mut wait => break,
                            heard = announced.recv() => match heard {
                                Ok((about, _)) if about != id => continue,
                                _ => break,
                            },
                        }
                    }
                }
            };
            outcome.await;
            forget();
        });
    }

    /// Takes the events kept for `hash` and applies them in order (or expires them).
    async fn apply_queued(&self, id: Uuid, hash: &str, apply: bool) {
        let store = self.conversations.store();
        let queued = match store.queued_inbound(id, hash).await {
            Ok(queued) => queued,
            Err(e) => {
                tracing::warn!(conversation = %id, error = %e, "cannot read early webhook events");
                return;
            }
        };
        for kept in queued {
            if !matches!(store.take_queued_inbound(kept.seq).await, Ok(true)) {
                continue; // another replica took it
            }
            let outcome = if apply {
                let req = Request {
                    conversation_id: id,
                    state_name: kept.state_name.clone(),
                    token: None,
                    event: WebhookEvent {
                        event_key: kept.event_key.clone(),
                        data: kept.data.as_object().cloned(),
                    },
                    source: kept.source.clone(),
                };
                match self.apply(&req, kept.received_at).await {
                    Ok((status, answer)) => (status, to_value(&answer)),
                    Err(e) => ("failed", json!({"error": e.to_string()})),
                }
            } else {
                ("expired", json!({"expired": true}))
            };
            if let Err(e) = store
                .settle_inbound(kept.seq, Some((outcome.0, &outcome.1)))
                .await
            {
                tracing::warn!(conversation = %id, error = %e, "cannot record an early webhook event's outcome");
            }
        }
    }

    /// How long until the conversation takes attempts again, if it is over its limit.
    fn throttled(&self, id: Uuid) -> Option<Duration> {
        let failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let (since, count) = failures.get(&id)?;
        let left = FAILURE_WINDOW.checked_sub(since.elapsed())?;
        (*count >= MAX_FAILURES).then_some(left)
    }

    fn failed(&self, id: Uuid) {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        if failures.len() >= MAX_TRACKED {
            failures.retain(|_, (since, _)| since.elapsed() < FAILURE_WINDOW);
            if failures.len() >= MAX_TRACKED {
                failures.clear();
            }
        }
        let entry = failures.entry(id).or_insert((Instant::now(), 0));
        if entry.0.elapsed() >= FAILURE_WINDOW {
            *entry = (Instant::now(), 0);
        }
        entry.1 += 1;
    }
}

/// The presented token's hash, if it is the conversation's live token (constant time).
fn verified(presented: Option<&str>, state: &ReplyState) -> Option<String> {
    let hash = token_hash(presented?);
    let live = state.token_hash.as_deref()?;
    let same = hash.len() == live.len()
        && hash
            .bytes()
            .zip(live.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    same.then_some(hash)
}

/// `data.tool_call_ids`: absent or null is every pending call; anything but a list of strings
/// is refused, since reading it as "no list" would approve calls the sender did not name.
fn wanted_ids(ids: Option<&Value>) -> Result<Option<Vec<&str>>, ConversationError> {
    let refused =
        || ConversationError::BadInput("`data.tool_call_ids` is a list of tool call ids".into());
    match ids {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(ids)) => ids
            .iter()
            .map(|id| id.as_str().ok_or_else(refused))
            .collect::<Result<_, _>>()
            .map(Some),
        Some(_) => Err(refused()),
    }
}

fn to_value(answer: &WebhookAnswer) -> Value {
    serde_json::to_value(answer).unwrap_or(Value::Null)
}

fn answer_of(kept: &Kept) -> WebhookAnswer {
    serde_json::from_value(kept.answer.clone()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_live_token_verifies() {
        let state = |hash: Option<String>| ReplyState {
            status: WAITING.into(),
            token_hash: hash,
            token_state: Some(WAITING.into()),
            entered: true,
        };
        let live = state(Some(token_hash("the-token")));
        assert_eq!(
            verified(Some("the-token"), &live),
            Some(token_hash("the-token"))
        );
        assert_eq!(verified(Some("the-tokem"), &live), None);
        assert_eq!(verified(None, &live), None);
        assert_eq!(verified(Some("the-token"), &state(None)), None);
    }
}
