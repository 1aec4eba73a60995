//! The agentic loop: call the LLM, run the tools it asks for (concurrently), feed the results
//! back, until it answers or the step budget is spent. Events are yielded as they happen.

use std::sync::Arc;

use futures::stream::{FuturesUnordered, Stream, StreamExt};

use super::Agent;
use super::metadata::UsageTracker;
use super::prepare::PreparedChat;
use crate::context::tokens::count_message;
use crate::llm::{CompletionRequest, LlmError};
use crate::tools::{ToolContext, execute};
use crate::wire::events::{
    AiMessage, AnswerEnd, ErrorEvent, StartToolCalling, TokenCount, ToolCallResult,
};
use crate::wire::response::Usage;
use crate::wire::{Message, StreamEvent};

impl Agent {
    /// Runs a prepared chat. The stream ends after its terminal event (`ai_answer_end`,
    /// `approval_required` or `error`); dropping it cancels the LLM call and running tools.
    pub fn run(
        self: Arc<Self>,
        chat: PreparedChat,
    ) -> impl Stream<Item = StreamEvent> + Send + 'static {
        async_stream::stream! {
            let PreparedChat { model, conversation: mut conv, follow_up_actions, response_format, request_id } = chat;
            let tools_tokens = self.tools.definitions_tokens(model.tokenizer);
            let mut usage = UsageTracker::default();
            let ctx = ToolContext::default();
            let max_steps = self.max_steps;
            for step in 1..=max_steps {
                let last_step = step == max_steps;
                let tools = (!last_step && !self.tools.is_empty())
                    .then(|| self.tools.definitions().as_ref());
                let request = CompletionRequest {
                    model: &model,
                    messages: conv.messages(),
                    tools,
                    response_format: response_format.as_ref(),
                };
                let completion = match self.llm.complete(&request).await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(model = %model.key, error = %e, "LLM call failed");
                        yield llm_error_event(&e);
                        return;
                    }
                };
                let prompt_estimate = u64::from(conv.total() + tools_tokens);
                let reply = Message::assistant(
                    completion.content.clone(),
                    completion.reasoning.clone(),
                    completion.tool_calls.clone(),
                );
                let call_usage = completion.usage.unwrap_or_else(|| {
                    // The server sent no usage: count it ourselves.
                    let completion_tokens = u64::from(count_message(model.tokenizer, &reply).total());
                    Usage {
                        prompt_tokens: prompt_estimate,
                        completion_tokens,
                        total_tokens: prompt_estimate + completion_tokens,
                    }
                });
                usage.record(call_usage, &model);
                conv.push(reply);
                yield StreamEvent::TokenCount(TokenCount { metadata: usage.snapshot(&conv, tools_tokens, &model) });

                let calls = completion.tool_calls;
                if calls.is_empty() {
                    let mut metadata = usage.snapshot(&conv, tools_tokens, &model);
                    metadata.finish_reason = completion.finish_reason;
                    metadata.request_id = Some(request_id);
                    yield StreamEvent::AnswerEnd(Box::new(AnswerEnd {
                        analysis: completion.content.unwrap_or_default(),
                        conversation_history: conv.into_messages(),
                        follow_up_actions,
                        metadata,
                    }));
                    return;
                }
                if last_step {
                    yield StreamEvent::Error(ErrorEvent::new(
                        format!("Too many LLM calls - exceeded max_steps: {step}/{max_steps}"),
                        false,
                    ));
                    return;
                }
                if completion.content.is_some() || completion.reasoning.is_some() {
                    yield StreamEvent::AiMessage(AiMessage {
                        content: completion.content,
                        reasoning: completion.reasoning,
                        metadata: Some(usage.snapshot(&conv, tools_tokens, &model)),
                    });
                }
                for call in &calls {
                    yield StreamEvent::StartToolCalling(StartToolCalling {
                        tool_name: call.function.name.clone(),
                        id: call.id.clone(),
                    });
                }
                // Results are reported as they finish, but join the history in the order the
                // model asked for them.
                let mut contents: Vec<Option<String>> = vec![None; calls.len()];
                let mut running: FuturesUnordered<_> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, call)| {
                        let tools = &self.tools;
                        let ctx = &ctx;
                        async move { (i, execute(tools, call, ctx).await) }
                    })
                    .collect();
                while let Some((i, executed)) = running.next().await {
                    contents[i] = Some(executed.content);
                    yield tool_result_event(executed.result);
                }
                drop(running);
                for (call, content) in calls.iter().zip(contents) {
                    conv.push(Message::tool(&call.id, &call.function.name, content.unwrap_or_default()));
                }
                yield StreamEvent::TokenCount(TokenCount { metadata: usage.snapshot(&conv, tools_tokens, &model) });
            }
        }
    }
}

fn tool_result_event(result: ToolCallResult) -> StreamEvent {
    StreamEvent::ToolCallingResult(Box::new(result))
}

pub(crate) fn llm_error_event(e: &LlmError) -> StreamEvent {
    let event = ErrorEvent::new(e.to_string(), e.is_rate_limit());
    StreamEvent::Error(if e.is_auth() {
        event.with_http_status(401)
    } else {
        event
    })
}
