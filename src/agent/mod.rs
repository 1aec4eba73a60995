//! The agent: turns a chat request into a conversation and runs the agentic loop over it,
//! yielding typed events. It knows nothing of HTTP; dropping its stream cancels everything.

mod chat_loop;
mod images;
mod metadata;
mod prepare;

use std::sync::Arc;

use crate::llm::{LlmClient, ModelRegistry};
use crate::prompt::Prompts;
use crate::tools::ToolRegistry;

pub use prepare::{ChatError, PreparedChat};

pub struct Agent {
    pub models: ModelRegistry,
    pub llm: LlmClient,
    pub prompts: Prompts,
    pub tools: ToolRegistry,
    pub max_steps: u32,
}

impl Agent {
    pub fn new(
        models: ModelRegistry,
        llm: LlmClient,
        prompts: Prompts,
        tools: ToolRegistry,
        max_steps: u32,
    ) -> Arc<Agent> {
        Arc::new(Agent {
            models,
            llm,
            prompts,
            tools,
            max_steps,
        })
    }
}
