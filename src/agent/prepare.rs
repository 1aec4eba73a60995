//! Request → conversation: model lookup, validation, follow-up actions, tools for this
//! request, the regenerated system prompt at index 0 and the new user message. Everything
//! that can be refused before the first byte of a response is refused here.

use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;

use super::Agent;
use super::frontend::{self, FrontendTool};
use super::images::vision_content;
use super::structured::FormatCheck;
use crate::context::conversation::Conversation;
use crate::context::tokens::MESSAGE_OVERHEAD;
use crate::context::truncation::ToolBudget;
use crate::llm::{ModelConfig, ModelLookupError};
use crate::wire::request::{FrontendToolResult, ToolDecision};
use crate::wire::{ChatRequest, FollowUpAction, Message};

/// A request refused before the agent starts; the HTTP layer maps each kind to a status.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error("{0}")]
    BadRequest(String),
    /// The request is within the body limit but over a cap of what it may contain (413).
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    NoModel(String),
    #[error("{0}")]
    Internal(String),
}

/// What the HTTP layer knows about a request besides its body.
#[derive(Debug, Clone, Default)]
pub struct RequestMeta {
    pub request_id: String,
    /// Request headers tools may see (blocked ones already removed).
    pub headers: Vec<(String, String)>,
}

pub struct PreparedChat {
    pub model: Arc<ModelConfig>,
    pub conversation: Conversation,
    pub follow_up_actions: Vec<FollowUpAction>,
    pub response_format: Option<Value>,
    /// Set when the final answer must be validated JSON.
    pub format_check: Option<FormatCheck>,
    pub request_id: String,
    /// The `tools` array offered to the LLM (built-in + frontend tools); `None` if empty.
    pub tool_definitions: Option<Arc<RawValue>>,
    pub tools_tokens: u32,
    pub frontend_tools: Vec<FrontendTool>,
    /// Streaming with `enable_tool_approval`: calls needing approval pause the stream.
    pub pause_for_approval: bool,
    /// Streaming with `stream_deltas`: the LLM's text is also sent as it arrives.
    pub text_deltas: bool,
    pub tool_budget: ToolBudget,
    pub tool_decisions: Vec<ToolDecision>,
    pub frontend_tool_results: Vec<FrontendToolResult>,
    pub request_headers: Arc<Vec<(String, String)>>,
}

impl Agent {
    pub fn prepare(&self, req: ChatRequest, meta: RequestMeta) -> Result<PreparedChat, ChatError> {
        let model = self
            .models
            .resolve(req.model.as_deref())
            .map_err(|e| match e {
                ModelLookupError::NoneConfigured => ChatError::NoModel(e.to_string()),
                ModelLookupError::Unknown { .. } => ChatError::BadRequest(e.to_string()),
            })?;
        let history = req.conversation_history.unwrap_or_default();
        self.options
            .images
            .check(&history, req.images.as_deref().unwrap_or_default())
            .map_err(ChatError::TooLarge)?;
        if let Some(moved) = self.signer.moved_token(&history) {
            return Err(ChatError::BadRequest(moved));
        }
        let tool_decisions = req.tool_decisions.unwrap_or_default();
        let frontend_tool_results = req.frontend_tool_results.unwrap_or_default();
        let resuming = !history.is_empty()
            && (!tool_decisions.is_empty() || !frontend_tool_results.is_empty());
        let has_ask = !req.ask.trim().is_empty();
        if !has_ask && !resuming {
            return Err(ChatError::BadRequest(
                "`ask` is empty: send a question (an empty ask only resumes a paused \
                 conversation, with tool_decisions or frontend_tool_results)"
                    .into(),
            ));
        }
        let follow_up_actions = if history.iter().any(|m| m.is_role("assistant")) {
            Vec::new()
        } else {
            FollowUpAction::defaults()
        };
        let (frontend_tools, frontend_defs) = frontend::validate(
            req.frontend_tools.as_deref().unwrap_or_default(),
            &self.tools,
            req.stream,
        )?;
        let format_check = match &req.response_format {
            Some(format) => FormatCheck::compile(format)
                .map_err(|e| ChatError::BadRequest(format!("response_format: {e}")))?,
            None => None,
        };
        let controls = req.behavior_controls.as_ref();
        let sections = self.prompts.sections(controls);
        let user_content = if has_ask {
            Some(self.user_content(&req.ask, sections, req.images.as_deref(), &model)?)
        } else {
            None
        };
        let system = self.prompts.system_prompt(
            sections,
            req.additional_system_prompt.as_deref(),
            model.tokenizer,
        );
        let mut conversation = Conversation::new(model.tokenizer, history);
        if !system.text.is_empty() {
            let mut message = Message::system(system.text.clone());
            message.token_count = Some(system.tokens + MESSAGE_OVERHEAD);
            // Regenerated every turn and installed at index 0, whatever the client sent first.
            if conversation
                .messages()
                .first()
                .is_some_and(|m| m.is_role("system"))
            {
                conversation.replace(0, message);
            } else {
                conversation.insert(0, message);
            }
        }
        if let Some(content) = user_content {
            conversation.push(Message::user(content));
        }
        let (tool_definitions, tools_tokens) = self.tool_definitions(&frontend_defs, &model)?;
        Ok(PreparedChat {
            tool_budget: ToolBudget::new(
                model.context_window,
                self.options.tool_budget_pct,
                self.options.tool_budget_tokens,
            ),
            model,
            conversation,
            follow_up_actions,
            response_format: req.response_format,
            format_check,
            request_id: meta.request_id,
            request_headers: Arc::new(meta.headers),
            tool_definitions,
            tools_tokens,
            frontend_tools,
            pause_for_approval: req.stream && req.enable_tool_approval,
            text_deltas: req.stream && req.stream_deltas,
            tool_decisions,
            frontend_tool_results,
        })
    }

    /// Built-in definitions (serialised once at start-up) plus this request's frontend tools.
    fn tool_definitions(
        &self,
        frontend_defs: &[Value],
        model: &ModelConfig,
    ) -> Result<(Option<Arc<RawValue>>, u32), ChatError> {
        let builtin = self.tools.definitions();
        let builtin_tokens = self.tools.definitions_tokens(model.tokenizer);
        if frontend_defs.is_empty() {
            let defs = (!self.tools.is_empty()).then(|| builtin.clone());
            return Ok((defs, builtin_tokens));
        }
        let extra = serde_json::to_string(frontend_defs)
            .map_err(|e| ChatError::Internal(format!("cannot encode frontend tools: {e}")))?;
        let extra_tokens = model.tokenizer.count(&extra);
        let base = builtin.get();
        let combined = if self.tools.is_empty() {
            extra
        } else {
            // "[a,b]" + "[c]" → "[a,b,c]"
            format!("{},{}", &base[..base.len() - 1], &extra[1..])
        };
        let raw = RawValue::from_string(combined)
            .map_err(|e| ChatError::Internal(format!("cannot encode tools: {e}")))?;
        Ok((Some(Arc::from(raw)), builtin_tokens + extra_tokens))
    }

    fn user_content(
        &self,
        ask: &str,
        sections: crate::prompt::SectionSet,
        images: Option<&[crate::wire::request::ImageInput]>,
        model: &ModelConfig,
    ) -> Result<Value, ChatError> {
        let text = self
            .prompts
            .user_prompt(ask, sections, chrono::Utc::now())
            .map_err(|e| ChatError::Internal(e.to_string()))?;
        match images.filter(|i| !i.is_empty()) {
            None => Ok(Value::String(text)),
            Some(_) if !model.vision => Err(ChatError::BadRequest(format!(
                "model '{}' does not accept images: set `vision = true` on its entry if it is a vision model",
                model.key
            ))),
            Some(images) => vision_content(&text, images).map_err(ChatError::BadRequest),
        }
    }
}
