//! The AG-UI front door (`POST /api/agui/chat`, what Headlamp's AI assistant speaks): an adapter
//! over holmes' stateless chat. A `RunAgentInput` becomes the `/api/chat` request it stands for
//! (`request.rs`), started with the same preparation (approval tokens verified by holmes), and
//! the run's events become AG-UI events (`stream.rs`). Approvals are interrupts whose ids carry
//! `/api/chat`'s approval tokens (`interrupts.rs`); the client's tools are frontend tools.
//! A `threadId` that names a stored conversation makes the run that conversation's next turn
//! instead (`thread.rs`, an adapter over `conversations/` as `a2a/` is), its events read back
//! from the conversation's log (`thread_stream.rs`); `render.rs` renders history messages for
//! both.

mod events;
mod input;
mod interrupts;
mod render;
mod request;
mod stream;
mod thread;
mod thread_stream;

pub use events::{AguiEvent, Outcome};
pub use input::RunAgentInput;
pub use stream::AguiRun;
pub use thread::{Door, ThreadRun, start as on_thread};

use crate::agent::RunError;
use crate::holmes::{RequestMeta, StatelessChat};
use stream::{RunContext, UsageLabel};

/// Starts the run a `RunAgentInput` asks for; every refusal comes back here, before any event
/// (the protocol has no error event before RUN_STARTED).
pub fn start(
    chat: &StatelessChat,
    input: RunAgentInput,
    meta: RequestMeta,
) -> Result<AguiRun, RunError> {
    let thread_id = input.thread_id.clone();
    let run_id = input.run_id.clone();
    let parent_run_id = input.parent_run_id.clone();
    let state = input.state.clone();
    let converted = request::convert(input)?;
    let usage_label = chat
        .serving
        .current()
        .models
        .resolve(converted.request.model.as_deref())
        .ok()
        .map(|model| UsageLabel {
            provider: provider_name(&model),
            model: model.key.clone(),
        });
    let run = chat.start_events(converted.request, meta)?;
    Ok(AguiRun::new(
        run,
        chat.signer(),
        RunContext {
            thread_id,
            run_id,
            parent_run_id,
            state,
            ask_view: converted.ask_view,
            client_results: converted.client_results,
            usage_label,
        },
    ))
}

/// The provider as the model list names it (`anthropic/…`), else by the API it speaks.
fn provider_name(model: &crate::llm::ModelConfig) -> String {
    use crate::llm::model::Api;
    match model.model_id.split_once('/') {
        Some((provider, _)) => provider.to_owned(),
        None => match model.api {
            Api::OpenAiChat => "openai",
            Api::AnthropicMessages => "anthropic",
            Api::GeminiGenerate => "gemini",
            Api::BedrockConverse => "bedrock",
        }
        .to_owned(),
    }
}
