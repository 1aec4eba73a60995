//! The agentic loop: call the LLM, run the tools it asks for (concurrently), feed the results
//! back, until it answers or the step budget is spent. Calls that need approval, and frontend
//! tools in pause mode, end the stream with `approval_required`; a later request resumes.

use std::collections::HashSet;
use std::sync::Arc;

use futures::stream::{Stream, StreamExt};
use serde_json::Value;

use super::Agent;
use super::approvals::{canonical, conversation_digest};
use super::frontend::{DEFAULT_NOOP_RESPONSE, FrontendTool};
use super::metadata::UsageTracker;
use super::prepare::PreparedChat;
use super::structured::{FormatCheck, repair_prompt};
use crate::context::conversation::Conversation;
use crate::context::tokens::{Tokenizer, count_message};
use crate::context::truncation::{self, ToolBudget};
use crate::llm::{CompletionRequest, LlmError};
use crate::tools::{ExecutedCall, ToolContext, ToolOutput, execute, executed_from};
use crate::wire::events::{
    AiMessage, AnswerDelta, AnswerEnd, ApprovalRequired, ErrorEvent, PendingApproval,
    PendingFrontendToolCall, StartToolCalling, TokenCount, ToolStatus,
};
use crate::wire::request::FrontendToolMode;
use crate::wire::response::{ResponseFormatReport, Truncation};
use crate::wire::{Message, StreamEvent, ToolCall};

/// Tool calls of one reply that run at the same time (HolmesGPT uses a pool of 16).
pub(super) const MAX_PARALLEL_TOOLS: usize = 16;

/// Mutable state of one request's run.
pub(super) struct Run {
    pub conv: Conversation,
    pub usage: UsageTracker,
    pub truncations: Vec<Truncation>,
    /// (tool, canonical arguments) of calls made in this request: the duplicate-call guard.
    pub seen_calls: HashSet<(String, String)>,
    pub budget: ToolBudget,
    pub request_headers: Arc<Vec<(String, String)>>,
}

/// What became of one tool call of the LLM's reply.
enum Outcome {
    Done(ExecutedCall),
    AwaitingApproval(ExecutedCall),
    FrontendPause(PendingFrontendToolCall),
}

impl Agent {
    /// Runs a prepared chat. The stream ends after its terminal event (`ai_answer_end`,
    /// `approval_required` or `error`); dropping it cancels the LLM call and running tools.
    pub fn run(
        self: Arc<Self>,
        chat: PreparedChat,
    ) -> impl Stream<Item = StreamEvent> + Send + 'static {
        async_stream::stream! {
            let PreparedChat {
                model, conversation, follow_up_actions, response_format, format_check, request_id,
                tool_definitions, tools_tokens, frontend_tools, pause_for_approval, text_deltas,
                tool_budget, tool_decisions, frontend_tool_results, request_headers,
            } = chat;
            let mut run = Run {
                conv: conversation,
                usage: UsageTracker::default(),
                truncations: Vec::new(),
                seen_calls: HashSet::new(),
                budget: tool_budget,
                request_headers,
            };
            // Resume: answer the calls the last request paused on, then carry on.
            let resumed = self.resume(&mut run, model.tokenizer, &tool_decisions, &frontend_tool_results).await;
            match resumed {
                Ok(events) => {
                    for event in events {
                        yield event;
                    }
                }
                Err(event) => {
                    yield event;
                    return;
                }
            }
            let max_steps = self.options.max_steps;
            let mut compaction_gave_up = false;
            for step in 1..=max_steps {
                if self.over_threshold(&run, tools_tokens, &model) && !compaction_gave_up {
                    let mut why = None;
                    if self.compaction.enabled {
                        yield StreamEvent::CompactionStart(self.compaction_start(&run, tools_tokens, &model));
                        match self.compact(&mut run, tools_tokens, &model).await {
                            Ok(Some(outcome)) => {
                                let m = &outcome.event.metadata;
                                let notice = format!(
                                    "The conversation history was compacted from {} to {} tokens to fit the model's context window.",
                                    m.initial_tokens, m.compacted_tokens
                                );
                                metrics::counter!("triage_compactions_total", "outcome" => "compacted").increment(1);
                                yield StreamEvent::Compacted(Box::new(outcome.event));
                                yield StreamEvent::AiMessage(AiMessage { content: Some(notice), reasoning: None, metadata: None });
                                // The reference reports the smaller context here too: meters update at once.
                                // The duplicate guard keeps what ran before: a model that lost a result to
                                // the summary must not re-run it (and compact again) until max_steps.
                                yield StreamEvent::TokenCount(TokenCount { metadata: run.metadata(tools_tokens, &model) });
                            }
                            Ok(None) => {
                                compaction_gave_up = true;
                                why = Some("compaction did not make it smaller".to_owned());
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "compaction failed");
                                // Not again in this request: each attempt costs an LLM call.
                                compaction_gave_up = true;
                                why = Some(format!("compaction failed ({e})"));
                            }
                        }
                    } else {
                        why = Some("conversation history compaction is disabled".to_owned());
                    }
                    if !Self::fits(&run, tools_tokens, &model) {
                        let mut text = format!(
                            "The conversation no longer fits in the model's context window: the next request needs {} tokens \
                             (including {} reserved for the answer) and the window is {} tokens; {}. Please start a new conversation.",
                            Self::needed_tokens(&run, tools_tokens, &model),
                            model.max_output_tokens,
                            model.context_window,
                            why.unwrap_or_else(|| "compaction failed to reduce the tokens sufficiently".to_owned()),
                        );
                        // The reason may quote a provider error, which can echo credentials.
                        self.masker.mask(&mut text);
                        yield StreamEvent::AiMessage(AiMessage { content: Some(text.clone()), reasoning: None, metadata: None });
                        // Before the first LLM call the overflow is the request's own: 413, not a
                        // server error.
                        let status = if step == 1 { 413 } else { 500 };
                        yield StreamEvent::Error(ErrorEvent::new(text, false).with_http_status(status));
                        return;
                    }
                }
                let last_step = step == max_steps;
                let tools = tool_definitions.as_deref().filter(|_| !last_step);
                let (delta_sink, mut deltas) = if text_deltas {
                    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
                    (Some(tx), Some(rx))
                } else {
                    (None, None)
                };
                let result = {
                    let request = CompletionRequest {
                        model: &model,
                        messages: run.conv.messages(),
                        tools,
                        response_format: response_format.as_ref(),
                        text_deltas: delta_sink.as_ref(),
                    };
                    let call = self.llm.complete(&request);
                    futures::pin_mut!(call);
                    // Pieces of text are forwarded while the call runs; the ones still queued when
                    // it ends go out, joined, before anything else of this step.
                    loop {
                        let Some(rx) = deltas.as_mut() else { break call.await };
                        let piece = tokio::select! {
                            biased;
                            result = &mut call => Err(result),
                            Some(piece) = rx.recv() => Ok(piece),
                        };
                        match piece {
                            Ok(mut text) => {
                                append_queued(rx, &mut text);
                                yield StreamEvent::AnswerDelta(AnswerDelta { content: text });
                            }
                            Err(result) => {
                                let mut rest = String::new();
                                append_queued(rx, &mut rest);
                                if !rest.is_empty() {
                                    yield StreamEvent::AnswerDelta(AnswerDelta { content: rest });
                                }
                                break result;
                            }
                        }
                    }
                };
                let completion = match result {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(model = %model.key, error = %e, "LLM call failed");
                        yield self.llm_error_event(&e);
                        return;
                    }
                };
                let mut reply = Message::assistant(
                    completion.content.clone(),
                    completion.reasoning.clone(),
                    completion.tool_calls.clone(),
                );
                run.usage.record_or_estimate(
                    completion.usage,
                    run.conv.total() + tools_tokens,
                    || count_message(model.tokenizer, &reply).total(),
                    &model,
                );

                let calls = completion.tool_calls;
                if calls.is_empty() {
                    run.conv.push(reply);
                    let mut analysis = completion.content.unwrap_or_default();
                    let mut format_report = None;
                    if let Some(check) = &format_check {
                        let repaired = match check.check(&analysis) {
                            Ok(clean) => Ok((clean, false)),
                            Err(violations) => {
                                tracing::info!(?violations, "answer does not match response_format: repairing");
                                match self.repair_answer(&mut run, &model, response_format.as_ref(), check, &violations).await {
                                    Ok(result) => result.map(|clean| (clean, true)),
                                    Err(e) => {
                                        yield self.llm_error_event(&e);
                                        return;
                                    }
                                }
                            }
                        };
                        match repaired {
                            Ok((clean, was_repaired)) => {
                                analysis = clean;
                                format_report = Some(ResponseFormatReport { valid: true, repaired: was_repaired });
                            }
                            Err(violations) => {
                                yield StreamEvent::TokenCount(TokenCount { metadata: run.metadata(tools_tokens, &model) });
                                yield StreamEvent::Error(ErrorEvent::new(
                                    format!(
                                        "The answer does not match the requested response_format after one repair attempt: {}",
                                        violations.join("; ")
                                    ),
                                    false,
                                ).with_http_status(502));
                                return;
                            }
                        }
                    }
                    let mut metadata = run.metadata(tools_tokens, &model);
                    yield StreamEvent::TokenCount(TokenCount { metadata: metadata.clone() });
                    metadata.finish_reason = completion.finish_reason;
                    metadata.request_id = Some(request_id);
                    metadata.response_format = format_report;
                    yield StreamEvent::AnswerEnd(Box::new(AnswerEnd {
                        analysis,
                        conversation_history: run.conv.into_messages(),
                        follow_up_actions,
                        metadata,
                    }));
                    return;
                }
                if last_step {
                    run.conv.push(reply);
                    yield StreamEvent::TokenCount(TokenCount { metadata: run.metadata(tools_tokens, &model) });
                    yield StreamEvent::Error(ErrorEvent::new(
                        format!("Too many LLM calls - exceeded max_steps: {step}/{max_steps}"),
                        false,
                    ));
                    return;
                }
                let assistant_index = run.conv.len();
                // Pending flags are set on the reply before it joins the history (counts are
                // unaffected: flags are not sent to the LLM).
                let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(calls.len());
                let mut scheduled = Vec::new();
                for (i, call) in calls.iter().enumerate() {
                    match self.plan_call(call, i, &frontend_tools, &mut run) {
                        Planned::Immediate(outcome) => outcomes.push(Some(*outcome)),
                        Planned::Execute => {
                            outcomes.push(None);
                            scheduled.push(i);
                        }
                    }
                }
                if let Some(reply_calls) = reply.tool_calls.as_mut() {
                    for (call, outcome) in reply_calls.iter_mut().zip(&outcomes) {
                        if let Some(Outcome::FrontendPause(_)) = outcome {
                            call.pending_frontend = Some(true);
                        }
                    }
                }
                run.conv.push(reply);
                yield StreamEvent::TokenCount(TokenCount { metadata: run.metadata(tools_tokens, &model) });
                if completion.content.is_some() || completion.reasoning.is_some() {
                    yield StreamEvent::AiMessage(AiMessage {
                        content: completion.content,
                        reasoning: completion.reasoning,
                        metadata: Some(run.metadata(tools_tokens, &model)),
                    });
                }
                for call in &calls {
                    yield StreamEvent::StartToolCalling(StartToolCalling {
                        tool_name: call.function.name.clone(),
                        id: call.id.clone(),
                    });
                }
                for outcome in outcomes.iter().flatten() {
                    if let Outcome::Done(executed) = outcome {
                        yield tool_result_event(executed);
                    }
                }
                // Results are reported as they finish, but join the history in the order the
                // model asked for them.
                let ctx = ToolContext { user_approved: false, request_headers: run.request_headers.clone() };
                // At most MAX_PARALLEL_TOOLS at a time: a reply asking for thousands of calls
                // must not start thousands of processes.
                let mut pending_calls = Vec::with_capacity(scheduled.len());
                for &i in &scheduled {
                    let call = &calls[i];
                    let ctx = &ctx;
                    let tools = &self.tools;
                    pending_calls.push(async move { (i, execute(tools, call, ctx).await) });
                }
                let mut running = futures::stream::iter(pending_calls).buffer_unordered(MAX_PARALLEL_TOOLS);
                while let Some((i, mut executed)) = running.next().await {
                    self.finish_result(&mut run, &mut executed, model.tokenizer);
                    let outcome = if executed.result.result.status == ToolStatus::ApprovalRequired {
                        if pause_for_approval {
                            Outcome::AwaitingApproval(executed)
                        } else {
                            Outcome::Done(rejected_for_security(executed))
                        }
                    } else {
                        Outcome::Done(executed)
                    };
                    match &outcome {
                        Outcome::Done(e) | Outcome::AwaitingApproval(e) => yield tool_result_event(e),
                        Outcome::FrontendPause(_) => {}
                    }
                    outcomes[i] = Some(outcome);
                }
                drop(running);

                let mut pending_approvals = Vec::new();
                let mut pending_frontend = Vec::new();
                let mut digest = None;
                for (call, outcome) in calls.iter().zip(outcomes) {
                    match outcome {
                        Some(Outcome::Done(executed)) => {
                            run.conv.push(Message::tool(&call.id, &call.function.name, executed.content));
                        }
                        Some(Outcome::AwaitingApproval(executed)) => {
                            // Bound to the history up to this reply: the token is no good elsewhere.
                            let digest = digest.get_or_insert_with(|| conversation_digest(&run.conv.messages()[..=assistant_index]));
                            let token = self.signer.sign(&call.id, &call.function.name, &call.function.arguments, digest);
                            mark_pending_approval(&mut run.conv, assistant_index, &call.id, token);
                            pending_approvals.push(PendingApproval {
                                tool_call_id: call.id.clone(),
                                tool_name: call.function.name.clone(),
                                description: executed.result.description,
                                params: executed.result.result.params,
                            });
                        }
                        Some(Outcome::FrontendPause(pending)) => pending_frontend.push(pending),
                        None => {}
                    }
                }
                yield StreamEvent::TokenCount(TokenCount { metadata: run.metadata(tools_tokens, &model) });
                if !pending_approvals.is_empty() || !pending_frontend.is_empty() {
                    metrics::counter!("triage_approvals_requested_total").increment(pending_approvals.len() as u64);
                    metrics::counter!("triage_frontend_pauses_total").increment(pending_frontend.len() as u64);
                    yield StreamEvent::ApprovalRequired(Box::new(ApprovalRequired {
                        content: None,
                        analysis: None,
                        conversation_history: run.conv.into_messages(),
                        follow_up_actions,
                        requires_approval: true,
                        pending_approvals,
                        pending_frontend_tool_calls: pending_frontend,
                    }));
                    return;
                }
            }
        }
    }

    /// Decides what to do with a call before anything runs: frontend tools and duplicates are
    /// answered at once; everything else is executed.
    fn plan_call(
        &self,
        call: &ToolCall,
        index: usize,
        frontend: &[FrontendTool],
        run: &mut Run,
    ) -> Planned {
        let name = &call.function.name;
        let cap = self.options.max_tool_calls_per_answer;
        if index >= cap {
            // Every call still gets a result, so the history stays valid for the provider.
            return Planned::Immediate(Box::new(Outcome::Done(executed_from(
                call,
                "",
                name,
                ToolOutput::error(format!(
                    "Not run: one answer may ask for at most {cap} tool calls \
                     (agent.max_tool_calls_per_answer); ask for the rest in a later answer."
                )),
            ))));
        }
        if let Some(tool) = frontend.iter().find(|t| t.name == *name) {
            return Planned::Immediate(Box::new(match tool.mode {
                FrontendToolMode::Pause => Outcome::FrontendPause(PendingFrontendToolCall {
                    tool_call_id: call.id.clone(),
                    tool_name: name.clone(),
                    arguments: serde_json::from_str(&call.function.arguments)
                        .unwrap_or_else(|_| Value::Object(Default::default())),
                }),
                FrontendToolMode::Noop => {
                    let text = tool
                        .noop_response
                        .clone()
                        .unwrap_or_else(|| DEFAULT_NOOP_RESPONSE.into());
                    Outcome::Done(executed_from(
                        call,
                        "frontend",
                        &format!("Frontend tool: {name}"),
                        ToolOutput::success(text),
                    ))
                }
            }));
        }
        if self.options.duplicate_call_guard
            && !run
                .seen_calls
                .insert((name.clone(), canonical(&call.function.arguments)))
        {
            return Planned::Immediate(Box::new(Outcome::Done(executed_from(
                call,
                "",
                name,
                ToolOutput::error(
                    "Refusing to run this tool call: an identical call (same tool, same arguments) \
                     already ran in this request. Use its earlier output (or the summary, if the \
                     history was compacted), or change the arguments.",
                ),
            ))));
        }
        Planned::Execute
    }
}

impl Agent {
    /// One repair round: the model sees its answer and the violations and answers again (no
    /// tools). On success the final assistant message is replaced by the corrected JSON, so
    /// the history carries the answer the client got.
    async fn repair_answer(
        &self,
        run: &mut Run,
        model: &crate::llm::ModelConfig,
        response_format: Option<&Value>,
        check: &FormatCheck,
        violations: &[String],
    ) -> Result<Result<String, Vec<String>>, LlmError> {
        let mut messages = run.conv.messages().to_vec();
        messages.push(Message::user(Value::String(repair_prompt(violations))));
        let request = CompletionRequest {
            model,
            messages: &messages,
            tools: None,
            response_format,
            // The repaired answer arrives whole in `ai_answer_end`.
            text_deltas: None,
        };
        let completion = self.llm.complete(&request).await?;
        let text = completion.content.unwrap_or_default();
        run.usage.record_or_estimate(
            completion.usage,
            run.conv.total(),
            || model.tokenizer.count(&text),
            model,
        );
        let clean = match check.check(&text) {
            Ok(clean) => clean,
            Err(violations) => return Ok(Err(violations)),
        };
        let last = run.conv.len() - 1;
        run.conv.replace(
            last,
            Message::assistant(Some(clean.clone()), None, Vec::new()),
        );
        Ok(Ok(clean))
    }
}

enum Planned {
    Immediate(Box<Outcome>),
    Execute,
}

impl Run {
    pub fn metadata(
        &self,
        tools_tokens: u32,
        model: &crate::llm::ModelConfig,
    ) -> crate::wire::Metadata {
        let mut m = self.usage.snapshot(&self.conv, tools_tokens, model);
        m.truncations = self.truncations.clone();
        m
    }

    /// Cuts an oversized result to the per-tool budget and records the cut.
    pub fn limit_size(&mut self, executed: &mut ExecutedCall, tok: Tokenizer) {
        let Some((cut, end_index, original)) = self.budget.cut(tok, &executed.content) else {
            return;
        };
        self.truncations.push(truncation::record(
            &executed.result.tool_call_id,
            &executed.result.tool_name,
            end_index,
            original,
        ));
        // A successful result's data is the content itself: reuse the cut, tokenising once.
        if executed.result.result.data == executed.content {
            executed.result.result.data = cut.clone();
        } else if let Some((data, _, _)) = self.budget.cut(tok, &executed.result.result.data) {
            executed.result.result.data = data;
        }
        executed.content = cut;
    }
}

/// Appends the pieces of text already queued, so that a burst goes out as one delta.
fn append_queued(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>, text: &mut String) {
    while let Ok(more) = rx.try_recv() {
        text.push_str(&more);
    }
}

fn mark_pending_approval(
    conv: &mut Conversation,
    assistant_index: usize,
    call_id: &str,
    token: String,
) {
    if let Some(call) = conv
        .message_mut(assistant_index)
        .tool_calls
        .iter_mut()
        .flatten()
        .find(|c| c.id == call_id)
    {
        call.pending_approval = Some(true);
        call.approval_token = Some(token);
    }
}

/// Approvals are off (automation): the call becomes an error the LLM can recover from.
fn rejected_for_security(mut executed: ExecutedCall) -> ExecutedCall {
    let reason = executed
        .result
        .result
        .error
        .take()
        .unwrap_or_else(|| "the command needs approval".into());
    let message = format!("Tool call rejected for security reasons: {reason}");
    executed.result.result.status = ToolStatus::Error;
    executed.content = format!("Error: {message}");
    executed.result.result.error = Some(message);
    executed
}

pub(super) fn tool_result_event(executed: &ExecutedCall) -> StreamEvent {
    StreamEvent::ToolCallingResult(Box::new(executed.result.clone()))
}

impl Agent {
    /// An LLM failure as an `error` event; provider messages can echo credentials: masked.
    pub(crate) fn llm_error_event(&self, e: &LlmError) -> StreamEvent {
        let mut description = e.to_string();
        self.masker.mask(&mut description);
        let event = ErrorEvent::new(description, e.is_rate_limit());
        // 502 when the provider refused triage's credentials (401 would read as the client's
        // own key) or misbehaved: a bad gateway either way.
        StreamEvent::Error(if e.is_auth() || matches!(e, LlmError::Oversized(_)) {
            event.with_http_status(502)
        } else {
            event
        })
    }

    /// Every tool result passes here before anyone sees it: secrets masked, size limited.
    pub(super) fn finish_result(&self, run: &mut Run, executed: &mut ExecutedCall, tok: Tokenizer) {
        if !self.masker.is_empty() {
            self.masker.mask(&mut executed.content);
            self.masker.mask(&mut executed.result.result.data);
            self.masker.mask_opt(&mut executed.result.result.error);
            self.masker.mask(&mut executed.result.description);
        }
        run.limit_size(executed, tok);
    }
}
