//! Request → conversation: model lookup, validation, follow-up actions, the regenerated
//! system prompt at index 0 and the new user message. Everything that can be refused before
//! the first byte of a response is refused here.

use std::sync::Arc;

use serde_json::Value;

use super::Agent;
use super::images::vision_content;
use crate::context::conversation::Conversation;
use crate::context::tokens::MESSAGE_OVERHEAD;
use crate::llm::{ModelConfig, ModelLookupError};
use crate::wire::{ChatRequest, FollowUpAction, Message};

/// A request refused before the agent starts; the HTTP layer maps each kind to a status.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NoModel(String),
    #[error("{0}")]
    Internal(String),
}

pub struct PreparedChat {
    pub model: Arc<ModelConfig>,
    pub conversation: Conversation,
    pub follow_up_actions: Vec<FollowUpAction>,
    pub response_format: Option<Value>,
    pub request_id: String,
}

impl Agent {
    pub fn prepare(&self, req: ChatRequest) -> Result<PreparedChat, ChatError> {
        let model = self
            .models
            .resolve(req.model.as_deref())
            .map_err(|e| match e {
                ModelLookupError::NoneConfigured => ChatError::NoModel(e.to_string()),
                ModelLookupError::Unknown { .. } => ChatError::BadRequest(e.to_string()),
            })?;
        let history = req.conversation_history.unwrap_or_default();
        let follow_up_actions = if history.iter().any(|m| m.is_role("assistant")) {
            Vec::new()
        } else {
            FollowUpAction::defaults()
        };
        if req.ask.trim().is_empty() {
            return Err(ChatError::BadRequest(
                "`ask` is empty: send a question (an empty ask only resumes a paused conversation)"
                    .into(),
            ));
        }
        let user_content = self.user_content(
            &req.ask,
            req.behavior_controls.as_ref(),
            req.images.as_deref(),
            &model,
        )?;

        let sections = self.prompts.sections(req.behavior_controls.as_ref());
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
        conversation.push(Message::user(user_content));

        Ok(PreparedChat {
            model,
            conversation,
            follow_up_actions,
            response_format: req.response_format,
            request_id: uuid::Uuid::new_v4().to_string(),
        })
    }

    fn user_content(
        &self,
        ask: &str,
        controls: Option<&std::collections::HashMap<String, bool>>,
        images: Option<&[crate::wire::request::ImageInput]>,
        model: &ModelConfig,
    ) -> Result<Value, ChatError> {
        let sections = self.prompts.sections(controls);
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
