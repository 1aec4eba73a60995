//! A run's token counts in each API's words: every LLM call of the investigation counted.

use serde::Serialize;

use crate::wire::response::Costs;

#[derive(Debug, Clone, Copy, Serialize)]
pub struct ChatUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub prompt_tokens_details: PromptDetails,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct PromptDetails {
    pub cached_tokens: u64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct ResponsesUsage {
    pub input_tokens: u64,
    pub input_tokens_details: PromptDetails,
    pub output_tokens: u64,
    pub output_tokens_details: OutputDetails,
    pub total_tokens: u64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct OutputDetails {
    pub reasoning_tokens: u64,
}

impl ChatUsage {
    pub fn of(totals: &Costs) -> ChatUsage {
        ChatUsage {
            prompt_tokens: totals.prompt_tokens,
            completion_tokens: totals.completion_tokens,
            total_tokens: totals.prompt_tokens + totals.completion_tokens,
            prompt_tokens_details: PromptDetails {
                cached_tokens: totals.cache_read_input_tokens,
            },
        }
    }
}

impl ResponsesUsage {
    pub fn of(totals: &Costs) -> ResponsesUsage {
        ResponsesUsage {
            input_tokens: totals.prompt_tokens,
            input_tokens_details: PromptDetails {
                cached_tokens: totals.cache_read_input_tokens,
            },
            output_tokens: totals.completion_tokens,
            output_tokens_details: OutputDetails {
                reasoning_tokens: 0,
            },
            total_tokens: totals.prompt_tokens + totals.completion_tokens,
        }
    }
}
