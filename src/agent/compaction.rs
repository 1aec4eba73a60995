//! Conversation-history compaction. When the conversation nears the model's context window,
//! the LLM summarises it and the history becomes [system prompt, summary, last user message].
//! Tool calls and their results are summarised together, never split; a history too large to
//! summarise in one request is summarised in chunks, each with the previous summary.

use serde_json::Value;

use super::Agent;
use super::chat_loop::Run;
use crate::context::conversation::Conversation;
use crate::llm::{CompletionRequest, LlmError, ModelConfig};
use crate::wire::Message;
use crate::wire::events::{
    Compacted, CompactedMetadata, CompactionCost, CompactionStart, CompactionStartMetadata,
};
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

pub(super) struct Outcome {
    pub event: Compacted,
}

impl Agent {
    /// Tokens the next LLM call needs: the conversation, the tool definitions, the answer.
    pub(super) fn needed_tokens(run: &Run, tools_tokens: u32, model: &ModelConfig) -> u64 {
        u64::from(run.conv.total()) + u64::from(tools_tokens) + u64::from(model.max_output_tokens)
    }

    pub(super) fn over_threshold(&self, run: &Run, tools_tokens: u32, model: &ModelConfig) -> bool {
        let limit =
            u64::from(model.context_window) * u64::from(self.compaction.threshold_pct) / 100;
        Self::needed_tokens(run, tools_tokens, model) > limit
    }

    pub(super) fn fits(run: &Run, tools_tokens: u32, model: &ModelConfig) -> bool {
        Self::needed_tokens(run, tools_tokens, model) <= u64::from(model.context_window)
    }

    pub(super) fn compaction_start(
        &self,
        run: &Run,
        tools_tokens: u32,
        model: &ModelConfig,
    ) -> CompactionStart {
        let initial = run.conv.total() + tools_tokens;
        CompactionStart {
            content: format!(
                "Compacting conversation history ({initial} tokens, {} messages)...",
                run.conv.len()
            ),
            metadata: CompactionStartMetadata {
                initial_tokens: initial,
                num_messages: run.conv.len(),
                max_context_size: model.context_window,
                threshold_pct: self.compaction.threshold_pct,
            },
        }
    }

    /// Compacts the conversation in place. `Ok(None)` when the summary was not smaller (the
    /// original history is kept).
    pub(super) async fn compact(
        &self,
        run: &mut Run,
        tools_tokens: u32,
        model: &ModelConfig,
    ) -> Result<Option<Outcome>, CompactionError> {
        let messages = run.conv.messages();
        let initial = run.conv.total() + tools_tokens;
        let before = messages.len();
        let system = messages.first().filter(|m| m.is_role("system")).cloned();
        let body_start = usize::from(system.is_some());
        let last_user = messages.iter().rposition(|m| m.is_role("user"));
        let to_summarise = &messages[body_start..];
        let instructions = self
            .prompts
            .compaction_instructions()
            .map_err(|e| CompactionError::Prompt(e.to_string()))?;
        let mut usage_total = Usage::default();
        let summary = self
            .summarise(
                model,
                system.as_ref(),
                to_summarise,
                &instructions,
                &mut usage_total,
            )
            .await?;
        let preamble = self
            .prompts
            .render_compaction_preamble(summary_body(&summary))
            .map_err(|e| CompactionError::Prompt(e.to_string()))?;
        let mut compacted: Vec<Message> = Vec::with_capacity(3);
        compacted.extend(system);
        compacted.push(Message::user(Value::String(preamble)));
        if let Some(i) = last_user {
            compacted.push(messages[i].clone());
        }
        let new_conv = Conversation::new(model.tokenizer, compacted);
        let compacted_tokens = new_conv.total() + tools_tokens;
        run.usage.record(usage_total, model);
        run.usage.count_compaction();
        if compacted_tokens >= initial {
            tracing::warn!(
                initial,
                compacted_tokens,
                "compaction did not reduce the history: kept"
            );
            return Ok(None);
        }
        run.conv = new_conv;
        let cost = CompactionCost {
            total_cost: model
                .prices
                .map(|(i, o)| {
                    usage_total.prompt_tokens as f64 * i + usage_total.completion_tokens as f64 * o
                })
                .unwrap_or(0.0),
            prompt_tokens: usage_total.prompt_tokens,
            completion_tokens: usage_total.completion_tokens,
            total_tokens: usage_total.total_tokens,
        };
        let saved = f64::from(initial - compacted_tokens) / f64::from(initial) * 100.0;
        Ok(Some(Outcome {
            event: Compacted {
                content: format!(
                    "The conversation history has been compacted from {initial} to {compacted_tokens} tokens"
                ),
                compaction_summary: Some(summary),
                messages: run.conv.messages().to_vec(),
                metadata: CompactedMetadata {
                    initial_tokens: initial,
                    compacted_tokens,
                    compression_ratio_pct: (saved * 10.0).round() / 10.0,
                    num_messages_before: before,
                    num_messages_after: run.conv.len(),
                    max_context_size: model.context_window,
                    threshold_pct: self.compaction.threshold_pct,
                    compaction_cost: Some(cost),
                },
            },
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
        usage: &mut Usage,
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
            summary = Some(self.summary_call(model, &request, usage).await?);
            rest = &rest[safe_end..];
        }
        summary.ok_or(CompactionError::EmptySummary)
    }

    /// One summary request, tried twice: a failed or empty summary is worth one more attempt.
    async fn summary_call(
        &self,
        model: &ModelConfig,
        messages: &[Message],
        usage: &mut Usage,
    ) -> Result<String, CompactionError> {
        let request = CompletionRequest {
            model,
            messages,
            tools: None,
            response_format: None,
            text_deltas: None,
        };
        let mut last_error = CompactionError::EmptySummary;
        for attempt in 1..=2 {
            match self.llm.complete(&request).await {
                Ok(c) => {
                    if let Some(u) = c.usage {
                        usage.prompt_tokens += u.prompt_tokens;
                        usage.completion_tokens += u.completion_tokens;
                        usage.total_tokens += u.total_tokens;
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
