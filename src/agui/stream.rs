//! A run's events as AG-UI events. The client rebuilds the conversation from them (text
//! messages, tool calls with their parent message, tool results), so what it sends back on its
//! next run is this history; each pending approval's token is signed over the history as the
//! client holds it, which differs from the run's in two places only: the new question (the run
//! keeps the rendered prompt) and the frontend results it sent.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use super::events::{AguiEvent, Interrupt, Outcome, TokenUsage};
use super::interrupts::interrupt_id;
use super::render::new_id;
use crate::agent::{AgentEvent, PendingCall, Run, RunError, RunState, Waiting};
use crate::holmes::{ApprovalSigner, conversation_digest, frames};
use crate::wire::Message;
use crate::wire::message::Content;

/// Who answered, for RUN_FINISHED's `usage`.
#[derive(Debug, Clone)]
pub struct UsageLabel {
    pub provider: String,
    pub model: String,
}

/// What the run's rendering needs from the request.
pub struct RunContext {
    pub thread_id: String,
    pub run_id: String,
    pub parent_run_id: Option<String>,
    pub state: Option<Value>,
    /// The new user message as the client holds it.
    pub ask_view: Option<Value>,
    /// The frontend results the client sent, by call id.
    pub client_results: HashMap<String, Value>,
    pub usage_label: Option<UsageLabel>,
}

pub struct AguiRun {
    run: Run,
    signer: Arc<ApprovalSigner>,
    cx: RunContext,
    out: VecDeque<AguiEvent>,
    /// The assistant text message being streamed.
    open_text: Option<String>,
    ended: bool,
}

impl AguiRun {
    pub fn new(run: Run, signer: Arc<ApprovalSigner>, mut cx: RunContext) -> AguiRun {
        let mut out = VecDeque::new();
        out.push_back(AguiEvent::RunStarted {
            thread_id: cx.thread_id.clone(),
            run_id: cx.run_id.clone(),
            parent_run_id: cx.parent_run_id.take(),
        });
        if let Some(snapshot) = cx.state.take().filter(|s| !s.is_null()) {
            out.push_back(AguiEvent::StateSnapshot { snapshot });
        }
        AguiRun {
            run,
            signer,
            cx,
            out,
            open_text: None,
            ended: false,
        }
    }

    fn render(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::TextDelta(delta) if !delta.is_empty() => {
                let message_id = match &self.open_text {
                    Some(id) => id.clone(),
                    None => {
                        let id = new_id();
                        self.open_text = Some(id.clone());
                        self.out.push_back(AguiEvent::TextMessageStart {
                            message_id: id.clone(),
                            role: "assistant",
                        });
                        id
                    }
                };
                self.out
                    .push_back(AguiEvent::TextMessageContent { message_id, delta });
            }
            AgentEvent::MessageAdded { message, .. } => self.message(*message),
            AgentEvent::Notice(text) => self.custom("triage.notice", json!({ "text": text })),
            AgentEvent::ModelFallback(fallback) => self.custom(
                "triage.model_fallback",
                serde_json::to_value(fallback).unwrap_or(Value::Null),
            ),
            AgentEvent::CompactionStarted(c) => self.custom(
                "triage.compaction_started",
                serde_json::to_value(frames::compaction_start(&c)).unwrap_or(Value::Null),
            ),
            AgentEvent::Compacted(report) => {
                let c = frames::compacted(*report);
                let value = json!({ "text": c.content, "metadata": c.metadata });
                self.custom("triage.compacted", value);
            }
            AgentEvent::Paused { pending } => self.paused(&pending),
            AgentEvent::Finished(_) => {
                self.close_text();
                let usage = self.usage();
                self.finish(
                    Outcome::Success {
                        pending_tool_call_ids: Vec::new(),
                    },
                    usage,
                );
            }
            AgentEvent::Failed(error) => self.fail(&error),
            AgentEvent::Stopped(reason) => self.out.push_back(AguiEvent::RunError {
                message: format!("the run was stopped: {reason:?}"),
                code: Some("stopped".into()),
            }),
            // Carried by the messages (text, reasoning, calls and results) or by the end.
            AgentEvent::TextDelta(_)
            | AgentEvent::MessageReplaced { .. }
            | AgentEvent::Thought { .. }
            | AgentEvent::ToolStarted { .. }
            | AgentEvent::ToolFinished(_)
            | AgentEvent::Usage(_) => {}
        }
    }

    fn message(&mut self, message: Message) {
        if message.is_role("assistant") {
            self.assistant(message);
        } else if message.is_role("tool") {
            let Some(tool_call_id) = message.tool_call_id.clone() else {
                return;
            };
            // The client holds its own message for a result it sent.
            if self.cx.client_results.contains_key(&tool_call_id) {
                return;
            }
            self.out
                .push_back(super::render::tool_result(tool_call_id, &message));
        }
        // The user's question: the client holds it already.
    }

    /// The model's reply, its streamed text (if any) closed.
    fn assistant(&mut self, message: Message) {
        let open = self.open_text.take();
        super::render::assistant(&mut self.out, open, message);
    }

    /// Approvals become interrupts; frontend calls, without approvals, a success that names
    /// them for the client to answer.
    fn paused(&mut self, pending: &[PendingCall]) {
        self.close_text();
        let state = self.run.take_state();
        let usage = self.usage_of(state.as_ref());
        let view = state.map(|s| self.client_view(s)).unwrap_or_default();
        let interrupts = self.interrupts(pending, &view);
        let outcome = if interrupts.is_empty() {
            Outcome::Success {
                pending_tool_call_ids: pending.iter().map(|p| p.call.id.clone()).collect(),
            }
        } else {
            Outcome::Interrupt { interrupts }
        };
        self.finish(outcome, usage);
    }

    /// The run's final history as the client holds it (masked as the events were).
    fn client_view(&self, state: RunState) -> Vec<Message> {
        let mut view = state.messages;
        self.run.masker().mask(&mut view);
        if let Some(ask) = &self.cx.ask_view
            && let Some(user) = view.iter_mut().rev().find(|m| m.is_role("user"))
        {
            user.content = Content::Json(ask.clone());
        }
        for message in view.iter_mut().filter(|m| m.is_role("tool")) {
            let sent = message
                .tool_call_id
                .as_ref()
                .and_then(|id| self.cx.client_results.get(id));
            if let Some(sent) = sent {
                message.content = Content::Json(sent.clone());
            }
        }
        view
    }

    fn interrupts(&self, pending: &[PendingCall], view: &[Message]) -> Vec<Interrupt> {
        let expires_at = (chrono::Utc::now()
            + chrono::Duration::seconds(i64::try_from(self.signer.ttl_secs()).unwrap_or(i64::MAX)))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let mut digests: Vec<(usize, String)> = Vec::new();
        let mut interrupts = Vec::new();
        for p in pending {
            let Waiting::Approval {
                description,
                params,
            } = &p.waits_for
            else {
                continue;
            };
            let index = p.message_index;
            let Some(call) = view
                .get(index)
                .and_then(|m| m.tool_calls().iter().find(|c| c.id == p.call.id))
            else {
                continue;
            };
            let digest = match digests.iter().find(|(i, _)| *i == index) {
                Some((_, d)) => d.clone(),
                None => {
                    let d = conversation_digest(&view[..=index]);
                    digests.push((index, d.clone()));
                    d
                }
            };
            let token = self.signer.sign(
                &call.id,
                &call.function.name,
                &call.function.arguments,
                &digest,
            );
            interrupts.push(Interrupt {
                id: interrupt_id(&call.id, &token),
                reason: "tool_approval",
                message: format!(
                    "{} wants to run `{description}`: approve or deny it",
                    call.function.name
                ),
                tool_call_id: call.id.clone(),
                expires_at: Some(expires_at.clone()),
                metadata: json!({
                    "toolName": call.function.name,
                    "command": description,
                    "params": params,
                }),
            });
        }
        interrupts
    }

    fn usage(&mut self) -> Vec<TokenUsage> {
        let state = self.run.take_state();
        self.usage_of(state.as_ref())
    }

    /// The request's LLM calls, in the protocol's accounting.
    fn usage_of(&self, state: Option<&RunState>) -> Vec<TokenUsage> {
        let (Some(state), Some(label)) = (state, &self.cx.usage_label) else {
            return Vec::new();
        };
        let (calls, costs) = state.usage.totals();
        if calls == 0 {
            return Vec::new();
        }
        vec![TokenUsage {
            provider: label.provider.clone(),
            model: label.model.clone(),
            input_tokens: costs.prompt_tokens,
            output_tokens: costs.completion_tokens,
            total_tokens: costs.total_tokens,
            cached_input_tokens: (costs.cache_read_input_tokens > 0)
                .then_some(costs.cache_read_input_tokens),
        }]
    }

    fn close_text(&mut self) {
        if let Some(message_id) = self.open_text.take() {
            self.out.push_back(AguiEvent::TextMessageEnd { message_id });
        }
    }

    fn custom(&mut self, name: &'static str, value: Value) {
        self.out.push_back(AguiEvent::Custom { name, value });
    }

    fn finish(&mut self, outcome: Outcome, usage: Vec<TokenUsage>) {
        self.out.push_back(AguiEvent::RunFinished {
            thread_id: self.cx.thread_id.clone(),
            run_id: self.cx.run_id.clone(),
            outcome,
            usage,
        });
    }

    fn fail(&mut self, error: &RunError) {
        let code = serde_json::to_value(error.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned));
        self.out.push_back(AguiEvent::RunError {
            message: error.message.clone(),
            code,
        });
    }
}

impl Stream for AguiRun {
    type Item = AguiEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AguiEvent>> {
        loop {
            if let Some(event) = self.out.pop_front() {
                if event.is_terminal() {
                    self.ended = true;
                    self.out.clear();
                }
                return Poll::Ready(Some(event));
            }
            if self.ended {
                return Poll::Ready(None);
            }
            match std::task::ready!(self.run.poll_next_unpin(cx)) {
                Some(event) => self.render(event),
                None => self.out.push_back(AguiEvent::RunError {
                    message: "the agent stopped without an answer".into(),
                    code: Some("internal".into()),
                }),
            }
        }
    }
}
