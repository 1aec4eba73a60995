//! Builds the `metadata` object: provider usage, triage's own token breakdown, costs.

use crate::context::conversation::Conversation;
use crate::llm::ModelConfig;
use crate::wire::Metadata;
use crate::wire::response::{Costs, Usage};

/// Usage across the LLM calls of one request.
#[derive(Debug, Default)]
pub(super) struct UsageTracker {
    last: Usage,
    costs: Costs,
}

impl UsageTracker {
    pub fn record(&mut self, usage: Usage, model: &ModelConfig) {
        self.last = usage;
        let c = &mut self.costs;
        c.prompt_tokens += usage.prompt_tokens;
        c.completion_tokens += usage.completion_tokens;
        c.total_tokens += usage.total_tokens;
        c.max_prompt_tokens_per_call = c.max_prompt_tokens_per_call.max(usage.prompt_tokens);
        c.max_completion_tokens_per_call = c
            .max_completion_tokens_per_call
            .max(usage.completion_tokens);
        if let Some((input, output)) = model.prices {
            c.total_cost +=
                usage.prompt_tokens as f64 * input + usage.completion_tokens as f64 * output;
        }
    }

    /// Records the provider's usage, or, when the server sent none, our own count of the
    /// prompt and of the answer (counted only then).
    pub fn record_or_estimate(
        &mut self,
        reported: Option<Usage>,
        prompt_tokens: u32,
        completion_tokens: impl FnOnce() -> u32,
        model: &ModelConfig,
    ) {
        let usage = reported.unwrap_or_else(|| {
            let (prompt, completion) = (u64::from(prompt_tokens), u64::from(completion_tokens()));
            Usage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                total_tokens: prompt + completion,
            }
        });
        self.record(usage, model);
    }

    pub fn count_compaction(&mut self) {
        self.costs.num_compactions += 1;
    }

    pub fn snapshot(
        &self,
        conv: &Conversation,
        tools_tokens: u32,
        model: &ModelConfig,
    ) -> Metadata {
        Metadata {
            usage: self.last,
            tokens: conv.breakdown(tools_tokens),
            max_tokens: model.context_window,
            max_output_tokens: model.max_output_tokens,
            costs: model.prices.map(|_| self.costs),
            ..Metadata::default()
        }
    }
}
