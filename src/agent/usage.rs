//! Usage across the LLM calls of a run, and the report of it the events carry: provider usage,
//! triage's own token breakdown, costs.

use serde::{Deserialize, Serialize};

use crate::context::conversation::Conversation;
use crate::llm::ModelConfig;
use crate::wire::response::{Costs, TokenBreakdown, Truncation, Usage};

/// Cache reads cost a tenth of the input price and cache writes a quarter more, as Anthropic
/// bills them (five-minute cache); only providers that report cached tokens are affected.
const CACHE_READ_PRICE_FACTOR: f64 = 0.1;
const CACHE_WRITE_PRICE_FACTOR: f64 = 1.25;

/// The price of a call's input at `input` dollars a token, cached tokens at their rates.
fn prompt_cost(usage: &Usage, input: f64) -> f64 {
    let cached = usage.cache_read_input_tokens + usage.cache_creation_input_tokens;
    let uncached = usage.prompt_tokens.saturating_sub(cached);
    input
        * (uncached as f64
            + usage.cache_read_input_tokens as f64 * CACHE_READ_PRICE_FACTOR
            + usage.cache_creation_input_tokens as f64 * CACHE_WRITE_PRICE_FACTOR)
}

/// Usage across the LLM calls of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct UsageLedger {
    last: Usage,
    costs: Costs,
    /// LLM calls recorded (a compaction's summary requests count as one).
    #[serde(default)]
    calls: u64,
}

/// A snapshot of a run's usage, as `token_count` and the final metadata show it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageReport {
    /// The provider's usage of the last LLM call.
    pub last_call: Usage,
    pub tokens: TokenBreakdown,
    pub context_window: u32,
    pub max_output_tokens: u32,
    /// Cumulative; present when the model has per-token prices.
    pub costs: Option<Costs>,
    /// Cumulative token counts of every LLM call recorded, priced or not (what an
    /// OpenAI-compatible answer reports as its usage).
    pub totals: Costs,
    pub truncations: Vec<Truncation>,
}

impl UsageLedger {
    pub fn record(&mut self, usage: Usage, model: &ModelConfig) {
        self.last = usage;
        self.calls += 1;
        let c = &mut self.costs;
        c.prompt_tokens += usage.prompt_tokens;
        c.completion_tokens += usage.completion_tokens;
        c.total_tokens += usage.total_tokens;
        c.cache_read_input_tokens += usage.cache_read_input_tokens;
        c.cache_creation_input_tokens += usage.cache_creation_input_tokens;
        c.max_prompt_tokens_per_call = c.max_prompt_tokens_per_call.max(usage.prompt_tokens);
        c.max_completion_tokens_per_call = c
            .max_completion_tokens_per_call
            .max(usage.completion_tokens);
        if let Some((input, output)) = model.prices {
            c.total_cost += prompt_cost(&usage, input) + usage.completion_tokens as f64 * output;
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
                ..Usage::default()
            }
        });
        self.record(usage, model);
    }

    /// LLM calls and cumulative costs so far.
    pub fn totals(&self) -> (u64, Costs) {
        (self.calls, self.costs)
    }

    pub fn count_compaction(&mut self) {
        self.costs.num_compactions += 1;
    }

    pub fn report(
        &self,
        conv: &Conversation,
        tools_tokens: u32,
        model: &ModelConfig,
        truncations: &[Truncation],
    ) -> UsageReport {
        UsageReport {
            last_call: self.last,
            tokens: conv.breakdown(tools_tokens),
            context_window: model.context_window,
            max_output_tokens: model.max_output_tokens,
            costs: model.prices.map(|_| self.costs),
            totals: self.costs,
            truncations: truncations.to_vec(),
        }
    }
}
