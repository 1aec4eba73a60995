//! A side question about a conversation (`ask_agent`): answered by one LLM call over the
//! conversation's context, without tools, recorded nowhere.

use serde_json::Value;

use super::error::RunError;
use super::settle::missing_results;
use super::{Agent, RunConfig, RunState};
use crate::llm::CompletionRequest;
use crate::wire::Message;

impl Agent {
    pub async fn ask(
        &self,
        config: &RunConfig,
        state: &RunState,
        question: &str,
    ) -> Result<String, RunError> {
        if question.trim().is_empty() {
            return Err(RunError::bad_input("`question` is empty"));
        }
        let setup = self.compile(config)?;
        let mut messages: Vec<Message> = Vec::with_capacity(state.messages.len() + 2);
        messages.extend(self.system_message(&setup, config));
        messages.extend(
            state
                .messages
                .iter()
                .filter(|m| !m.is_role("system"))
                .cloned(),
        );
        // Calls still waiting (or cut short) get a placeholder: the provider needs a result
        // for every call.
        for (at, message) in missing_results(&messages, &[], "no result yet") {
            messages.insert(at, message);
        }
        messages.push(Message::user(Value::String(question.to_owned())));
        let request = CompletionRequest {
            model: &setup.model,
            messages: &messages,
            // The history may hold tool calls: definitions go along, calls are forbidden.
            tools: setup.tool_definitions.as_deref(),
            allow_tool_calls: false,
            response_format: None,
        };
        let completion = self
            .llm
            .complete(&request, None, |_| {})
            .await
            .map_err(|e| self.llm_failure(&setup, &e))?;
        if let Some(fallback) = &completion.fallback {
            // No stream to announce it in: the log says it.
            let note = self.fallback_note(&setup, fallback);
            tracing::warn!(requested_model = %note.requested_model, model = %note.model, reason = %note.reason, "a fallback model answered the side question request");
        }
        // Not an event: masked as it is made.
        Ok(setup.masker.masked(completion.content.unwrap_or_default()))
    }
}
