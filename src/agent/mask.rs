//! Every string an event carries, masked in one pass where the event is made
//! (`run::Emitter::emit`): what is stored, streamed, delivered, forked or logged from an event
//! is already masked, so no consumer masks a field of its own. Each implementation destructures
//! its type without `..`: a field added to an event (or to what an event holds) does not
//! compile until it says how it is masked.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::error::RunError;
use super::event::{AgentEvent, Answer, CompactionReport, CompactionStarted, StopReason};
use super::state::{PendingCall, Waiting};
use super::usage::UsageReport;
use crate::tools::{ToolOutcome, ToolOutput};
use crate::wire::content::Content;
use crate::wire::events::ModelFallback;
use crate::wire::response::Truncation;
use crate::wire::{FunctionCall, Message, ToolCall};

/// A value whose strings can hold a secret.
pub trait Mask {
    /// Replaces every secret in every string this value holds by `<secret-hidden>`.
    fn mask(&mut self, secrets: &Secrets<'_>);
}

impl Mask for String {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        secrets.text(self);
    }
}

impl<T: Mask> Mask for Option<T> {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        if let Some(value) = self {
            value.mask(secrets);
        }
    }
}

impl<T: Mask> Mask for Vec<T> {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        for value in self {
            value.mask(secrets);
        }
    }
}

impl<T: Mask + ?Sized> Mask for Box<T> {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        (**self).mask(secrets);
    }
}

impl Mask for Value {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        match self {
            Value::String(s) => s.mask(secrets),
            Value::Array(items) => items.mask(secrets),
            Value::Object(map) => map.mask(secrets),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

impl Mask for Map<String, Value> {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        // Keys are strings too; the map is rebuilt only when one holds a secret.
        if self.keys().any(|k| secrets.found_in(k)) {
            for (mut key, mut value) in std::mem::take(self) {
                key.mask(secrets);
                value.mask(secrets);
                self.insert(key, value);
            }
        } else {
            for value in self.values_mut() {
                value.mask(secrets);
            }
        }
    }
}

impl Mask for Content {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        match self {
            Content::Absent => {}
            Content::Json(value) => value.mask(secrets),
            // The system prompt every run shares: copied only when it holds a secret.
            Content::Shared(text) => text.mask(secrets),
        }
    }
}

impl Mask for Message {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        let Message {
            role,
            content,
            tool_calls,
            tool_call_id,
            name,
            reasoning_content,
            token_count: _,
            extra,
        } = self;
        role.mask(secrets);
        content.mask(secrets);
        tool_calls.mask(secrets);
        tool_call_id.mask(secrets);
        name.mask(secrets);
        reasoning_content.mask(secrets);
        extra.mask(secrets);
    }
}

impl Mask for ToolCall {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        let ToolCall {
            id,
            kind,
            function: FunctionCall { name, arguments },
            pending_approval: _,
            approval_token,
            pending_frontend: _,
            extra,
        } = self;
        id.mask(secrets);
        kind.mask(secrets);
        name.mask(secrets);
        arguments.mask(secrets);
        approval_token.mask(secrets);
        extra.mask(secrets);
    }
}

impl Mask for ToolOutcome {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        let ToolOutcome {
            call_id,
            tool_name,
            toolset,
            description,
            params,
            output,
            elapsed: _,
            content,
        } = self;
        call_id.mask(secrets);
        tool_name.mask(secrets);
        toolset.mask(secrets);
        description.mask(secrets);
        params.mask(secrets);
        output.mask(secrets);
        content.mask(secrets);
    }
}

impl Mask for ToolOutput {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        let ToolOutput {
            status: _,
            data,
            error,
            return_code: _,
            invocation,
        } = self;
        data.mask(secrets);
        error.mask(secrets);
        invocation.mask(secrets);
    }
}

impl Mask for PendingCall {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        let PendingCall {
            message_index: _,
            call,
            waits_for,
        } = self;
        call.mask(secrets);
        waits_for.mask(secrets);
    }
}

impl Mask for Waiting {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        match self {
            Waiting::Approval {
                description,
                params,
            } => {
                description.mask(secrets);
                params.mask(secrets);
            }
            Waiting::Frontend { arguments } => arguments.mask(secrets),
        }
    }
}

impl Mask for UsageReport {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        let UsageReport {
            last_call: _,
            tokens: _,
            context_window: _,
            max_output_tokens: _,
            costs: _,
            totals: _,
            truncations,
        } = self;
        truncations.mask(secrets);
    }
}

impl Mask for Truncation {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        let Truncation {
            tool_call_id,
            start_index: _,
            end_index: _,
            tool_name,
            original_token_count: _,
        } = self;
        tool_call_id.mask(secrets);
        tool_name.mask(secrets);
    }
}

impl Mask for ModelFallback {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        let ModelFallback {
            requested_model,
            model,
            reason,
        } = self;
        requested_model.mask(secrets);
        model.mask(secrets);
        reason.mask(secrets);
    }
}

impl Mask for CompactionStarted {
    fn mask(&mut self, _: &Secrets<'_>) {
        // Numbers only: destructured so that a string added here is masked.
        let CompactionStarted {
            initial_tokens: _,
            num_messages: _,
            context_window: _,
            threshold_pct: _,
        } = self;
    }
}

impl Mask for CompactionReport {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        let CompactionReport {
            summary,
            messages,
            initial_tokens: _,
            compacted_tokens: _,
            num_messages_before: _,
            context_window: _,
            threshold_pct: _,
            summarization_requests: _,
            usage: _,
            cost: _,
        } = self;
        summary.mask(secrets);
        messages.mask(secrets);
    }
}

impl Mask for Answer {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        let Answer {
            text,
            finish_reason,
            format: _,
            usage,
            fallbacks,
        } = self;
        text.mask(secrets);
        finish_reason.mask(secrets);
        usage.mask(secrets);
        fallbacks.mask(secrets);
    }
}

impl Mask for RunError {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        let RunError { kind: _, message } = self;
        message.mask(secrets);
    }
}

impl Mask for StopReason {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        match self {
            StopReason::Paused => {}
            StopReason::Interrupted { cut } => cut.mask(secrets),
            StopReason::Stuck { pattern } => pattern.mask(secrets),
        }
    }
}

impl Mask for AgentEvent {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        match self {
            AgentEvent::TextDelta(text) | AgentEvent::Notice(text) => text.mask(secrets),
            AgentEvent::MessageAdded { index: _, message }
            | AgentEvent::MessageReplaced { index: _, message } => message.mask(secrets),
            AgentEvent::Thought {
                content,
                reasoning,
                usage,
            } => {
                content.mask(secrets);
                reasoning.mask(secrets);
                usage.mask(secrets);
            }
            AgentEvent::ModelFallback(fallback) => fallback.mask(secrets),
            AgentEvent::ToolStarted { call_id, tool_name } => {
                call_id.mask(secrets);
                tool_name.mask(secrets);
            }
            AgentEvent::ToolFinished(outcome) => outcome.mask(secrets),
            AgentEvent::Usage(usage) => usage.mask(secrets),
            AgentEvent::CompactionStarted(started) => started.mask(secrets),
            AgentEvent::Compacted(report) => report.mask(secrets),
            AgentEvent::Paused { pending } => pending.mask(secrets),
            AgentEvent::Finished(answer) => answer.mask(secrets),
            AgentEvent::Failed(error) => error.mask(secrets),
            AgentEvent::Stopped(reason) => reason.mask(secrets),
        }
    }
}

/// A shared string stays shared unless it holds a secret.
impl Mask for Arc<str> {
    fn mask(&mut self, secrets: &Secrets<'_>) {
        if secrets.found_in(self) {
            let mut own = self.to_string();
            own.mask(secrets);
            *self = Arc::from(own);
        }
    }
}

/// The secrets of one masking pass, for `Mask` implementations: the run's, then those issued
/// at run time.
pub struct Secrets<'a> {
    pub(super) lists: [&'a [String]; 2],
}

impl Secrets<'_> {
    pub fn is_empty(&self) -> bool {
        self.lists.iter().all(|l| l.is_empty())
    }

    /// Whether `text` holds a secret (to decide whether to copy a shared string).
    pub fn found_in(&self, text: &str) -> bool {
        self.lists
            .iter()
            .any(|list| list.iter().any(|s| text.contains(s.as_str())))
    }

    pub fn text(&self, text: &mut String) {
        for list in self.lists {
            mask_each(list, text);
        }
    }
}

/// What every secret is replaced with.
pub const MASK: &str = "<secret-hidden>";

pub(super) fn mask_each(secrets: &[String], text: &mut String) {
    for secret in secrets {
        if text.contains(secret.as_str()) {
            *text = text.replace(secret.as_str(), MASK);
        }
    }
}
