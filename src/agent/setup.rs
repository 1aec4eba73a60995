//! `RunConfig` → `RunSetup`: the model resolved, the response format and frontend tool schemas
//! compiled, the tool definitions and system prompt built. Everything a config can be refused
//! for is refused here, before a run starts.

use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;

use super::Agent;
use super::config::{ApprovalMode, RunConfig};
use super::error::{RunError, RunErrorKind};
use super::frontend::{self, FrontendTool};
use super::images::vision_content;
use super::message::UserMessage;
use super::structured::FormatCheck;
use crate::context::tokens::MESSAGE_OVERHEAD;
use crate::context::truncation::ToolBudget;
use crate::llm::{ModelConfig, ModelLookupError};
use crate::prompt::SectionSet;
use crate::wire::Message;

pub struct RunSetup {
    pub model: Arc<ModelConfig>,
    pub sections: SectionSet,
    pub response_format: Option<Value>,
    /// Set when the final answer must be validated JSON.
    pub format_check: Option<FormatCheck>,
    /// The `tools` array offered to the LLM (built-in + frontend tools); `None` if empty.
    pub tool_definitions: Option<Arc<RawValue>>,
    pub tools_tokens: u32,
    pub frontend_tools: Vec<FrontendTool>,
    pub pause_for_approval: bool,
    /// Every backend call waits for approval (`ApprovalMode::Always`).
    pub approve_every_call: bool,
    /// The server's secrets and the run's own (`RunConfig::secrets`): what the run's events,
    /// the tool output the model reads and its errors are masked with.
    pub masker: super::RunMasker,
    pub text_deltas: bool,
    pub tool_budget: ToolBudget,
    pub max_steps: u32,
    pub stuck_detection: bool,
}

impl Agent {
    pub fn compile(&self, config: &RunConfig) -> Result<RunSetup, RunError> {
        let model = self
            .models
            .resolve(config.model.as_deref())
            .map_err(|e| match e {
                ModelLookupError::NoneConfigured => {
                    RunError::new(RunErrorKind::NoModel, e.to_string())
                }
                ModelLookupError::Unknown { .. } => RunError::bad_input(e.to_string()),
            })?;
        let (frontend_tools, frontend_defs) =
            frontend::compile(&config.frontend_tools, &self.tools, config.can_pause)?;
        let format_check = match &config.response_format {
            Some(format) => FormatCheck::compile(format)
                .map_err(|e| RunError::bad_input(format!("response_format: {e}")))?,
            None => None,
        };
        let sections = self.prompts.sections(config.behavior_controls.as_ref());
        let (tool_definitions, tools_tokens) = self.tool_definitions(&frontend_defs, &model)?;
        Ok(RunSetup {
            tool_budget: ToolBudget::new(
                model.context_window,
                self.options.tool_budget_pct,
                self.options.tool_budget_tokens,
            ),
            model,
            sections,
            response_format: config.response_format.clone(),
            format_check,
            tool_definitions,
            tools_tokens,
            frontend_tools,
            pause_for_approval: config.approvals != ApprovalMode::Refuse,
            approve_every_call: config.approvals == ApprovalMode::Always,
            masker: super::RunMasker::new(
                self.masker.clone(),
                super::SecretMasker::new(config.secrets.iter().cloned()),
            ),
            text_deltas: config.text_deltas,
            max_steps: config.max_steps.unwrap_or(self.options.max_steps).max(1),
            stuck_detection: config.stuck_detection,
        })
    }

    /// Built-in definitions (serialised once at start-up) plus the run's frontend tools.
    fn tool_definitions(
        &self,
        frontend_defs: &[Value],
        model: &ModelConfig,
    ) -> Result<(Option<Arc<RawValue>>, u32), RunError> {
        let builtin = self.tools.definitions();
        let builtin_tokens = self.tools.definitions_tokens(model.tokenizer);
        // One look at the catalog: MCP tools may change between two.
        let no_builtin = builtin.get() == "[]";
        if frontend_defs.is_empty() {
            let defs = (!no_builtin).then(|| builtin.clone());
            return Ok((defs, builtin_tokens));
        }
        let internal = |e: serde_json::Error| {
            RunError::new(
                RunErrorKind::Internal,
                format!("cannot encode the tools: {e}"),
            )
        };
        let extra = serde_json::to_string(frontend_defs).map_err(internal)?;
        let extra_tokens = model.tokenizer.count(&extra);
        let base = builtin.get();
        let combined = if no_builtin {
            extra
        } else {
            // "[a,b]" + "[c]" → "[a,b,c]"
            format!("{},{}", &base[..base.len() - 1], &extra[1..])
        };
        let raw = RawValue::from_string(combined).map_err(internal)?;
        Ok((Some(Arc::from(raw)), builtin_tokens + extra_tokens))
    }

    /// Adds a user message to a stored state, outside a run (a conversation that is not
    /// running): checked and rendered as a run would; the turn starts afresh.
    pub fn add_user_message(
        &self,
        config: &RunConfig,
        state: &mut super::RunState,
        message: &UserMessage,
    ) -> Result<(), RunError> {
        let setup = self.compile(config)?;
        self.options
            .images
            .check(&state.messages, &message.images)
            .map_err(|e| RunError::new(RunErrorKind::TooLarge, e))?;
        state.messages.push(self.user_message(&setup, message)?);
        state.steps = 0;
        state.repeats.new_turn();
        Ok(())
    }

    /// The system prompt, regenerated for every run (built here, not kept in the setup: a run
    /// holds one copy, in its conversation).
    pub(super) fn system_message(&self, setup: &RunSetup, config: &RunConfig) -> Option<Message> {
        let system = self.prompts.system_prompt(
            setup.sections,
            config.additional_system_prompt.as_deref(),
            setup.model.tokenizer,
        );
        (!system.text.is_empty()).then(|| {
            let mut message = Message::shared_system(system.text.clone());
            message.token_count = Some(system.tokens + MESSAGE_OVERHEAD);
            message
        })
    }

    /// The user's message as the LLM gets it: the prompt template around the text, and the
    /// images as vision content.
    pub(super) fn user_message(
        &self,
        setup: &RunSetup,
        message: &UserMessage,
    ) -> Result<Message, RunError> {
        let prompt = self
            .prompts
            .user_prompt(&message.text, setup.sections, chrono::Utc::now())
            .map_err(|e| RunError::new(RunErrorKind::Internal, e.to_string()))?;
        if message.images.is_empty() {
            // Counted here, where the sections' share is known, so the conversation does not
            // count the whole text again.
            let tokens = prompt.tokens(setup.model.tokenizer);
            let mut user = Message::user(Value::String(prompt.text));
            user.token_count = Some(tokens + MESSAGE_OVERHEAD);
            return Ok(user);
        }
        let text = prompt.text;
        if !setup.model.vision {
            return Err(RunError::bad_input(format!(
                "model '{}' does not accept images: set `vision = true` on its entry if it is a vision model",
                setup.model.key
            )));
        }
        vision_content(&text, &message.images)
            .map(Message::user)
            .map_err(RunError::bad_input)
    }
}
