//! Conversation-history compaction. When the conversation nears the model's context window,
//! the LLM summarises it and the history becomes [system prompt, summary, last user message].
//! Tool calls and their results are summarised together, never split; a history too large to
//! summarise in one request is summarised in chunks, each with the previous summary.

use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;

use super::Agent;
use super::error::{RunError, RunErrorKind};
use super::event::{AgentEvent, CompactionReport, CompactionStarted};
use super::run::Live;
use super::setup::RunSetup;
use crate::context::conversation::Conversation;
use crate::llm::{AnsweredByFallback, CompletionRequest, LlmError, ModelConfig};
use crate::wire::Message;
use crate::wire::response::Usage;

#[derive(Debug, Clone, Copy)]
pub struct CompactionOptions {
    pub enabled: bool,
    pub threshold_pct: u32,
}

#[derive(Debug, thiserror::Error)]
pub(super) enum CompactionError {
    #[error("the summary request failed: {0}")]
    Llm(#[from] LlmError),
    #[error("the LLM returned an empty summary")]
    EmptySummary,
    #[error("a single message is too large to summarise within the context window")]
    MessageTooLarge,
    #[error("prompt template: {0}")]
    Prompt(String),
}

/// Summary requests of one compaction: their usage, their count, and the call slot the run
/// reserved (for the first of them).
struct SummaryCalls {
    usage: Usage,
    requests: u32,
    slot: Option<OwnedSemaphorePermit>,
    /// Summary requests a fallback model answered.
    fallbacks: Vec<AnsweredByFallback>,
}

impl Agent {
    /// Tokens the next LLM call needs: the conversation, the tool definitions, the answer.
    fn needed_tokens(live: &Live, s: &RunSetup) -> u64 {
        u64::from(live.conv.total())
            + u64::from(s.tools_tokens)
            + u64::from(s.model.max_output_tokens)
    }

    /// Compacts the history when the next call would pass the threshold; fails the run when it
    /// still does not fit the window.
    pub(super) async fn compact_if_needed(
        &self,
        s: &RunSetup,
        live: &mut Live,
    ) -> Result<(), RunError> {
        let threshold =
            u64::from(s.model.context_window) * u64::from(self.compaction.threshold_pct) / 100;
        if Self::needed_tokens(live, s) <= threshold || live.state.compaction_gave_up {
            return Ok(());
        }
        let why = if self.compaction.enabled {
            let tail = last_user_message(live.conv.messages());
            match self.compact_and_report(s, live, tail).await {
                Ok(true) => None,
                Ok(false) => {
                    live.state.compaction_gave_up = true;
                    Some("compaction did not make it smaller".to_owned())
                }
                Err(e) => {
                    tracing::warn!(error = %e, "compaction failed");
                    // Not again in this run: each attempt costs an LLM call.
                    live.state.compaction_gave_up = true;
                    Some(format!("compaction failed ({e})"))
                }
            }
        } else {
            Some("conversation history compaction is disabled".to_owned())
        };
        if Self::needed_tokens(live, s) <= u64::from(s.model.context_window) {
            return Ok(());
        }
        let text = format!(
            "The conversation no longer fits in the model's context window: the next request needs {} tokens \
             (including {} reserved for the answer) and the window is {} tokens; {}. Please start a new conversation.",
            Self::needed_tokens(live, s),
            s.model.max_output_tokens,
            s.model.context_window,
            why.unwrap_or_else(|| "compaction failed to reduce the tokens sufficiently".to_owned()),
        );
        // The reason may quote a provider error, which can echo credentials: the `Notice` and
        // the `Failed` event it ends the run with are masked as they are emitted.
        live.emit.emit(AgentEvent::Notice(text.clone()));
        // Before the run's first LLM call the overflow is the input's own.
        let kind = if live.llm_calls == 0 {
            RunErrorKind::TooLarge
        } else {
            RunErrorKind::ContextOverflow
        };
        Err(RunError::new(kind, text))
    }

    /// Summarises the history now and reports it (start, result, notice, usage): `Ok(true)`
    /// when the history became [system, summary, `tail`…], `Ok(false)` when the summary was not
    /// smaller (the history is kept).
    pub(super) async fn compact_and_report(
        &self,
        s: &RunSetup,
        live: &mut Live,
        tail: Vec<usize>,
    ) -> Result<bool, CompactionError> {
        live.emit
            .emit(AgentEvent::CompactionStarted(CompactionStarted {
                initial_tokens: live.conv.total() + s.tools_tokens,
                num_messages: live.conv.len(),
                context_window: s.model.context_window,
                threshold_pct: self.compaction.threshold_pct,
            }));
        let Some(report) = self.compact(s, live, &tail).await? else {
            return Ok(false);
        };
        let notice = format!(
            "The conversation history was compacted from {} to {} tokens to fit the model's context window.",
            report.initial_tokens, report.compacted_tokens
        );
        metrics::counter!("triage_compactions_total", "outcome" => "compacted").increment(1);
        live.emit.emit(AgentEvent::Compacted(Box::new(report)));
        live.emit.emit(AgentEvent::Notice(notice));
        // Meters update at once, as the reference reports. The duplicate guard keeps what ran
        // before: a model that lost a result to the summary must not re-run it (and compact
        // again) until max_steps.
        live.emit_usage(s);
        Ok(true)
    }

    /// Compacts the conversation in place: [system, summary, the messages at `tail`].
    /// `Ok(None)` when the summary was not smaller (the original history is kept).
    async fn compact(
        &self,
        s: &RunSetup,
        live: &mut Live,
        tail: &[usize],
    ) -> Result<Option<CompactionReport>, CompactionError> {
        let model = &s.model;
        let messages = live.conv.messages();
        let initial = live.conv.total() + s.tools_tokens;
        let before = messages.len();
        let system = messages.first().filter(|m| m.is_role("system")).cloned();
        let body_start = usize::from(system.is_some());
        let to_summarise = &messages[body_start..];
        let instructions = self
            .prompts
            .compaction_instructions()
            .map_err(|e| CompactionError::Prompt(e.to_string()))?;
        let mut calls = SummaryCalls {
            usage: Usage::default(),
            requests: 0,
            slot: live.slot.take(),
            fallbacks: Vec::new(),
        };
        let summary = self
            .summarise(
                model,
                system.as_ref(),
                to_summarise,
                &instructions,
                &mut calls,
            )
            .await;
        // Announced whatever became of the summary: the switch of model happened.
        for fallback in &calls.fallbacks {
            self.announce_fallback(s, &live.emit, &mut live.fallbacks, fallback);
        }
        let summary = summary?;
        let preamble = self
            .prompts
            .render_compaction_preamble(summary_body(&summary))
            .map_err(|e| CompactionError::Prompt(e.to_string()))?;
        let mut compacted: Vec<Message> = Vec::with_capacity(2 + tail.len());
        compacted.extend(system);
        compacted.push(Message::user(Value::String(preamble)));
        compacted.extend(tail.iter().filter_map(|&i| messages.get(i)).cloned());
        let new_conv = Conversation::new(model.tokenizer, compacted);
        let compacted_tokens = new_conv.total() + s.tools_tokens;
        live.state.usage.record(calls.usage, model);
        live.state.usage.count_compaction();
        if compacted_tokens >= initial {
            tracing::warn!(
                initial,
                compacted_tokens,
                "compaction did not reduce the history: kept"
            );
            return Ok(None);
        }
        live.conv = new_conv;
        let cost = model
            .prices
            .map(|(i, o)| {
                calls.usage.prompt_tokens as f64 * i + calls.usage.completion_tokens as f64 * o
            })
            .unwrap_or(0.0);
        Ok(Some(CompactionReport {
            summary,
            messages: live.conv.messages().to_vec(),
            initial_tokens: initial,
            compacted_tokens,
            num_messages_before: before,
            context_window: model.context_window,
            threshold_pct: self.compaction.threshold_pct,
            summarization_requests: calls.requests,
            usage: calls.usage,
            cost,
        }))
    }

    /// Summarises `messages` in as few requests as fit the window: each chunk ends at a
    /// message boundary that does not separate a tool call from its results, and carries the
    /// summary of the chunks before it.
    async fn summarise(
        &self,
        model: &ModelConfig,
        system: Option<&Message>,
        messages: &[Message],
        instructions: &str,
        calls: &mut SummaryCalls,
    ) -> Result<String, CompactionError> {
        let tok = model.tokenizer;
        // Room for the request: the window minus the summary we expect back.
        let reserve = model.max_output_tokens.min(model.context_window / 4);
        let fixed = system.and_then(|s| s.token_count).unwrap_or(0) + tok.count(instructions) + 16;
        let room = model
            .context_window
            .saturating_sub(reserve)
            .saturating_sub(fixed);
        let mut summary: Option<String> = None;
        let mut rest = messages;
        while !rest.is_empty() {
            let carried = summary.as_ref().map(|s| {
                Message::user(Value::String(format!(
                    "Summary of the earlier part of the conversation:\n{s}"
                )))
            });
            let mut budget =
                room.saturating_sub(carried.as_ref().map_or(0, |m| tok.count(&m.text()) + 8));
            let mut safe_end = 0;
            for (i, m) in rest.iter().enumerate() {
                let cost = m.token_count.unwrap_or_else(|| tok.count(&m.text()) + 8);
                if cost > budget {
                    break;
                }
                budget -= cost;
                let end = i + 1;
                // A chunk may end here only if no tool result of this call follows.
                if rest.get(end).is_none_or(|next| !next.is_role("tool")) {
                    safe_end = end;
                }
            }
            if safe_end == 0 {
                return Err(CompactionError::MessageTooLarge);
            }
            let mut request: Vec<Message> = Vec::with_capacity(safe_end + 3);
            request.extend(system.cloned());
            request.extend(carried);
            request.extend(rest[..safe_end].iter().map(flatten));
            request.push(Message::user(Value::String(instructions.to_owned())));
            summary = Some(self.summary_call(model, &request, calls).await?);
            rest = &rest[safe_end..];
        }
        summary.ok_or(CompactionError::EmptySummary)
    }

    /// One summary request, tried twice: a failed or empty summary is worth one more attempt.
    async fn summary_call(
        &self,
        model: &ModelConfig,
        messages: &[Message],
        calls: &mut SummaryCalls,
    ) -> Result<String, CompactionError> {
        let request = CompletionRequest {
            model,
            messages,
            tools: None,
            allow_tool_calls: false,
            response_format: None,
        };
        let mut last_error = CompactionError::EmptySummary;
        for attempt in 1..=2 {
            calls.requests += 1;
            match self.llm.complete(&request, calls.slot.take(), |_| {}).await {
                Ok(c) => {
                    calls.fallbacks.extend(c.fallback);
                    if let Some(u) = c.usage {
                        let usage = &mut calls.usage;
                        usage.prompt_tokens += u.prompt_tokens;
                        usage.completion_tokens += u.completion_tokens;
                        usage.total_tokens += u.total_tokens;
                        usage.cache_read_input_tokens += u.cache_read_input_tokens;
                        usage.cache_creation_input_tokens += u.cache_creation_input_tokens;
                    }
                    match c.content.filter(|t| !t.trim().is_empty()) {
                        Some(text) => return Ok(text),
                        None => last_error = CompactionError::EmptySummary,
                    }
                }
                Err(e) => {
                    tracing::warn!(attempt, error = %e, "compaction summary request failed");
                    last_error = CompactionError::Llm(e);
                }
            }
        }
        Err(last_error)
    }
}

/// A run keeps the question it is answering after the summary.
fn last_user_message(messages: &[Message]) -> Vec<usize> {
    messages
        .iter()
        .rposition(|m| m.is_role("user"))
        .into_iter()
        .collect()
}

/// The text between `<summary>` tags, or everything when the model used none.
fn summary_body(text: &str) -> &str {
    text.split_once("<summary>")
        .map(|(_, rest)| rest.split_once("</summary>").map_or(rest, |(body, _)| body))
        .map_or(text, str::trim)
}

/// Tool calls and results as plain text, so the summary request needs no tool definitions and
/// works with servers whose chat templates are strict about tool messages.
fn flatten(m: &Message) -> Message {
    match m.role.as_str() {
        "tool" => Message::user(Value::String(format!(
            "[Result of tool {} (call {})]\n{}",
            m.name.as_deref().unwrap_or("?"),
            m.tool_call_id.as_deref().unwrap_or("?"),
            m.text()
        ))),
        "assistant" if !m.tool_calls().is_empty() => {
            let mut text = m.text();
            for c in m.tool_calls() {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&format!(
                    "[Called tool {} (call {}) with arguments {}]",
                    c.function.name, c.id, c.function.arguments
                ));
            }
            Message::assistant(Some(text), None, Vec::new())
        }
        _ => {
            let mut copy = m.clone();
            copy.token_count = None;
            copy
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_the_summary_part() {
        assert_eq!(
            summary_body("<analysis>a</analysis>\n<summary>\nS\n</summary>"),
            "S"
        );
        assert_eq!(summary_body("plain"), "plain");
        assert_eq!(summary_body("<summary>unterminated"), "unterminated");
    }

    #[test]
    fn flattens_tool_traffic() {
        let call =
            crate::wire::ToolCall::new("c1".into(), "bash".into(), "{\"command\":\"ls\"}".into());
        let a = flatten(&Message::assistant(
            Some("checking".into()),
            None,
            vec![call],
        ));
        assert_eq!(
            a.text(),
            "checking\n[Called tool bash (call c1) with arguments {\"command\":\"ls\"}]"
        );
        assert!(a.tool_calls.is_none());
        let t = flatten(&Message::tool("c1", "bash", "file".into()));
        assert_eq!(t.role, "user");
        assert!(t.text().starts_with("[Result of tool bash (call c1)]"));
    }
}
