//! A thread's run as AG-UI events, read from its conversation's stored log after the point the
//! run was sent (so the run lives on the server: dropping the stream stops nothing, and a slow
//! client never holds it back). The history messages the log holds become text messages, tool
//! calls and results (`render.rs`, as the stateless run renders them); the status the run
//! settles in ends the stream: finished is RUN_FINISHED, waiting for approval RUN_FINISHED
//! with an interrupt per call, an error RUN_ERROR, and a pause, interrupt or stuck stop a
//! RUN_ERROR saying so.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

use super::events::{AguiEvent, Interrupt, Outcome};
use super::render;
use crate::conversation_domain::{ConversationStatus, EventKind};
use crate::conversations::Conversations;
use crate::store::{EventQuery, StoredEvent};
use crate::wire::Message;
use crate::wire::events::{PendingApproval, PendingFrontendToolCall};

/// Events read from the store per query.
const PAGE: u32 = 100;

/// What RUN_STARTED and RUN_FINISHED repeat from the input.
pub struct Head {
    pub thread_id: String,
    pub run_id: String,
    pub parent_run_id: Option<String>,
    pub state: Option<Value>,
}

/// The events of conversation `id`'s run after event `after`, until it settles; `idle` is how
/// often a quiet stream checks that the conversation is still there.
pub fn follow(
    conversations: Arc<Conversations>,
    id: Uuid,
    after: u64,
    head: Head,
    idle: Duration,
) -> impl Stream<Item = AguiEvent> {
    async_stream::stream! {
        let mut render = Render::new(id, head);
        for event in render.out.drain(..) {
            yield event;
        }
        let store = conversations.store().clone();
        let mut news = store.subscribe();
        let mut after = after;
        loop {
            let query = EventQuery { after: Some(after), limit: PAGE, ..EventQuery::default() };
            let page = match store.events(id, &query).await {
                Ok(page) => page,
                Err(e) => {
                    yield render.error(format!("cannot read conversation {id}'s log: {e}"), "internal");
                    return;
                }
            };
            let full = page.items.len() as u32 == PAGE;
            let masker = conversations.log_masker(id).await;
            for mut event in page.items {
                after = event.id;
                // Stored masked already; masked again with the conversation's secrets as
                // every reader of the log does.
                masker.mask(&mut event.payload);
                let ended = render.event(&event);
                for out in render.out.drain(..) {
                    yield out;
                }
                if ended {
                    return;
                }
            }
            if full {
                continue;
            }
            loop {
                tokio::select! {
                    note = news.recv() => match note {
                        Ok((conversation, seq)) if conversation == id && seq > after => break,
                        Ok(_) => {}
                        Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => {
                            yield render.error("the server is shutting down".into(), "internal");
                            return;
                        }
                    },
                    () = tokio::time::sleep(idle) => {
                        if !matches!(store.get(id).await, Ok(Some(_))) {
                            yield render.error(format!("conversation {id} was deleted"), "gone");
                            return;
                        }
                        // Nothing may have been announced (another replica's run): look.
                        break;
                    }
                }
            }
        }
    }
}

struct Render {
    id: Uuid,
    head: Head,
    out: VecDeque<AguiEvent>,
    /// The calls the run paused on, from its `approval_required` event.
    approvals: Vec<PendingApproval>,
    frontend: Vec<PendingFrontendToolCall>,
    /// The run's error, from its `error` event.
    error: Option<String>,
}

impl Render {
    fn new(id: Uuid, mut head: Head) -> Render {
        let mut out = VecDeque::new();
        out.push_back(AguiEvent::RunStarted {
            thread_id: head.thread_id.clone(),
            run_id: head.run_id.clone(),
            parent_run_id: head.parent_run_id.take(),
        });
        if let Some(snapshot) = head.state.take().filter(|s| !s.is_null()) {
            out.push_back(AguiEvent::StateSnapshot { snapshot });
        }
        Render {
            id,
            head,
            out,
            approvals: Vec::new(),
            frontend: Vec::new(),
            error: None,
        }
    }

    /// Renders one stored event; true when the run has settled (the last event is out).
    fn event(&mut self, event: &StoredEvent) -> bool {
        let p = &event.payload;
        match event.kind {
            EventKind::Message => {
                if let Ok(message) = serde_json::from_value::<Message>(p["message"].clone()) {
                    self.message(message);
                }
            }
            EventKind::ApprovalRequired => {
                self.approvals = list(&p["pending_approvals"]);
                self.frontend = list(&p["pending_frontend_tool_calls"]);
            }
            EventKind::Error => {
                let text = p["msg"].as_str().or(p["description"].as_str());
                self.error = text.map(str::to_owned);
            }
            EventKind::ConversationStateUpdate => {
                let Some(status) = p["execution_status"]
                    .as_str()
                    .and_then(|s| s.parse::<ConversationStatus>().ok())
                else {
                    return false;
                };
                let reason = p["reason"].as_str();
                return self.settled(status, reason);
            }
            _ => {}
        }
        false
    }

    fn message(&mut self, message: Message) {
        if message.is_role("assistant") {
            render::assistant(&mut self.out, None, message);
        } else if message.is_role("tool")
            && let Some(call) = message.tool_call_id.clone()
        {
            self.out.push_back(render::tool_result(call, &message));
        }
        // The user's message: the client holds it already.
    }

    /// The end a status means, if it is one.
    fn settled(&mut self, status: ConversationStatus, reason: Option<&str>) -> bool {
        let event = match status {
            ConversationStatus::Idle | ConversationStatus::Running => return false,
            ConversationStatus::Finished => self.finished(Outcome::Success {
                pending_tool_call_ids: Vec::new(),
            }),
            ConversationStatus::WaitingForConfirmation => {
                let outcome = if self.approvals.is_empty() {
                    Outcome::Success {
                        pending_tool_call_ids: self
                            .frontend
                            .iter()
                            .map(|f| f.tool_call_id.clone())
                            .collect(),
                    }
                } else {
                    Outcome::Interrupt {
                        interrupts: self.approvals.iter().map(|a| self.interrupt(a)).collect(),
                    }
                };
                self.finished(outcome)
            }
            ConversationStatus::Error => {
                let message = self
                    .error
                    .take()
                    .or(reason.map(str::to_owned))
                    .unwrap_or_else(|| "the conversation's run failed".into());
                self.error(message, "error")
            }
            other => {
                let why = reason.map(|r| format!(": {r}")).unwrap_or_default();
                self.error(
                    format!(
                        "conversation {}'s run stopped ({}{why}): `POST \
                         /api/conversations/{}/run` continues it",
                        self.id,
                        other.as_str(),
                        self.id
                    ),
                    "stopped",
                )
            }
        };
        self.out.push_back(event);
        true
    }

    fn interrupt(&self, a: &PendingApproval) -> Interrupt {
        Interrupt {
            id: super::interrupts::thread_interrupt_id(self.id, &a.tool_call_id),
            reason: "tool_approval",
            message: format!(
                "{} wants to run `{}`: approve or deny it",
                a.tool_name, a.description
            ),
            tool_call_id: a.tool_call_id.clone(),
            // The conversation keeps its pending calls: they do not expire.
            expires_at: None,
            metadata: json!({
                "toolName": a.tool_name,
                "command": a.description,
                "params": a.params,
                "conversationId": self.id,
            }),
        }
    }

    fn finished(&self, outcome: Outcome) -> AguiEvent {
        AguiEvent::RunFinished {
            thread_id: self.head.thread_id.clone(),
            run_id: self.head.run_id.clone(),
            outcome,
            usage: Vec::new(),
        }
    }

    fn error(&self, message: String, code: &str) -> AguiEvent {
        AguiEvent::RunError {
            message,
            code: Some(code.to_owned()),
        }
    }
}

fn list<T: serde::de::DeserializeOwned>(value: &Value) -> Vec<T> {
    serde_json::from_value(value.clone()).unwrap_or_default()
}
