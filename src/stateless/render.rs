//! A run's events as HolmesGPT frames. The terminal frames carry the history, as HolmesGPT's
//! do: the run's final state, with each pending call flagged (and each pending approval given
//! a token bound to the history before it).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};

use super::approvals::{ApprovalSigner, conversation_digest};
use crate::agent::{
    AgentEvent, CompactionReport, PendingCall, Run, RunError, RunErrorKind, UsageReport, Waiting,
};
use crate::tools::ToolOutcome;
use crate::wire::events::{
    AiMessage, AnswerDelta, AnswerEnd, ApprovalRequired, CompactedMetadata, CompactionCost,
    CompactionStart, CompactionStartMetadata, ErrorEvent, PendingApproval, PendingFrontendToolCall,
    StartToolCalling, TokenCount, ToolCallResult, ToolResultBody,
};
use crate::wire::{ChatResponse, FollowUpAction, Message, Metadata, StreamEvent};

const SCHEMA_VERSION: &str = "robusta:v1.0.0";

/// A `/api/chat` run, as a stream of frames.
pub struct ChatRun {
    run: Run,
    signer: Arc<ApprovalSigner>,
    follow_up_actions: Vec<FollowUpAction>,
    request_id: String,
    /// The error that ended the run, for a front door that answers with a status.
    failure: Option<RunError>,
}

impl ChatRun {
    pub(super) fn new(
        run: Run,
        signer: Arc<ApprovalSigner>,
        follow_up_actions: Vec<FollowUpAction>,
        request_id: String,
    ) -> ChatRun {
        ChatRun {
            run,
            signer,
            follow_up_actions,
            request_id,
            failure: None,
        }
    }

    /// The non-streaming answer (HTTP JSON, `triage ask --json`), or the error that ended
    /// the run.
    pub async fn collect(mut self) -> Result<ChatResponse, RunError> {
        let mut tool_calls: Vec<ToolCallResult> = Vec::new();
        while let Some(frame) = self.next().await {
            match frame {
                StreamEvent::ToolCallingResult(result) => {
                    // One entry per call id, the latest winning.
                    tool_calls.retain(|t| t.tool_call_id != result.tool_call_id);
                    tool_calls.push(*result);
                }
                StreamEvent::AnswerEnd(end) => {
                    return Ok(ChatResponse {
                        analysis: end.analysis,
                        conversation_history: end.conversation_history,
                        tool_calls,
                        follow_up_actions: end.follow_up_actions,
                        pending_approvals: None,
                        metadata: end.metadata,
                    });
                }
                StreamEvent::Error(e) => {
                    return Err(self
                        .failure
                        .take()
                        .unwrap_or_else(|| RunError::new(RunErrorKind::Internal, e.description)));
                }
                StreamEvent::ApprovalRequired(_) => {
                    return Err(RunError::new(
                        RunErrorKind::Internal,
                        "the agent paused for approval, which needs `stream: true`",
                    ));
                }
                _ => {}
            }
        }
        Err(RunError::new(
            RunErrorKind::Internal,
            "the agent stopped without an answer",
        ))
    }

    fn render(&mut self, event: AgentEvent) -> Option<StreamEvent> {
        Some(match event {
            AgentEvent::TextDelta(content) => StreamEvent::AnswerDelta(AnswerDelta { content }),
            AgentEvent::MessageAdded { .. } | AgentEvent::MessageReplaced { .. } => return None,
            AgentEvent::Thought {
                content,
                reasoning,
                usage,
            } => StreamEvent::AiMessage(AiMessage {
                content,
                reasoning,
                metadata: Some(metadata(&usage)),
            }),
            AgentEvent::Notice(text) => StreamEvent::AiMessage(AiMessage {
                content: Some(text),
                reasoning: None,
                metadata: None,
            }),
            AgentEvent::ToolStarted { call_id, tool_name } => {
                StreamEvent::StartToolCalling(StartToolCalling {
                    tool_name,
                    id: call_id,
                })
            }
            AgentEvent::ToolFinished(outcome) => {
                StreamEvent::ToolCallingResult(Box::new(tool_result(*outcome)))
            }
            AgentEvent::Usage(usage) => StreamEvent::TokenCount(TokenCount {
                metadata: metadata(&usage),
            }),
            AgentEvent::CompactionStarted(c) => StreamEvent::CompactionStart(CompactionStart {
                content: format!(
                    "Compacting conversation history ({} tokens, {} messages)...",
                    c.initial_tokens, c.num_messages
                ),
                metadata: CompactionStartMetadata {
                    initial_tokens: c.initial_tokens,
                    num_messages: c.num_messages,
                    max_context_size: c.context_window,
                    threshold_pct: c.threshold_pct,
                },
            }),
            AgentEvent::Compacted(report) => StreamEvent::Compacted(Box::new(compacted(*report))),
            AgentEvent::Paused { pending } => {
                let history = self.history(&pending);
                StreamEvent::ApprovalRequired(Box::new(ApprovalRequired {
                    content: None,
                    analysis: None,
                    conversation_history: history,
                    follow_up_actions: std::mem::take(&mut self.follow_up_actions),
                    requires_approval: true,
                    pending_approvals: pending
                        .iter()
                        .filter_map(|p| match &p.waits_for {
                            Waiting::Approval {
                                description,
                                params,
                            } => Some(PendingApproval {
                                tool_call_id: p.call.id.clone(),
                                tool_name: p.call.function.name.clone(),
                                description: description.clone(),
                                params: params.clone(),
                            }),
                            Waiting::Frontend { .. } => None,
                        })
                        .collect(),
                    pending_frontend_tool_calls: pending
                        .iter()
                        .filter_map(|p| match &p.waits_for {
                            Waiting::Frontend { arguments } => Some(PendingFrontendToolCall {
                                tool_call_id: p.call.id.clone(),
                                tool_name: p.call.function.name.clone(),
                                arguments: arguments.clone(),
                            }),
                            Waiting::Approval { .. } => None,
                        })
                        .collect(),
                }))
            }
            AgentEvent::Finished(answer) => {
                let mut metadata = metadata(&answer.usage);
                metadata.finish_reason = answer.finish_reason;
                metadata.request_id = Some(self.request_id.clone());
                metadata.response_format = answer.format;
                StreamEvent::AnswerEnd(Box::new(AnswerEnd {
                    analysis: answer.text,
                    conversation_history: self.history(&[]),
                    follow_up_actions: std::mem::take(&mut self.follow_up_actions),
                    metadata,
                }))
            }
            // Nothing pauses or interrupts a stateless run; were it to, the client hears why.
            AgentEvent::Stopped(reason) => StreamEvent::Error(ErrorEvent::new(
                format!("the run was stopped: {reason:?}"),
                false,
            )),
            AgentEvent::Failed(error) => {
                let frame = ErrorEvent::new(
                    error.message.clone(),
                    error.kind == RunErrorKind::RateLimited,
                );
                self.failure = Some(error);
                StreamEvent::Error(frame)
            }
        })
    }

    /// The run's final history, each pending call flagged where the client will send it back.
    fn history(&mut self, pending: &[PendingCall]) -> Vec<Message> {
        let mut messages = self
            .run
            .take_state()
            .map(|s| s.messages)
            .unwrap_or_default();
        let mut digests: Vec<(usize, String)> = Vec::new();
        for p in pending {
            let index = p.message_index;
            let digest = match digests.iter().find(|(i, _)| *i == index) {
                Some((_, d)) => d.clone(),
                None => {
                    let Some(prefix) = messages.get(..=index) else {
                        continue;
                    };
                    let d = conversation_digest(prefix);
                    digests.push((index, d.clone()));
                    d
                }
            };
            let Some(call) = messages
                .get_mut(index)
                .and_then(|m| m.tool_calls.as_mut())
                .and_then(|calls| calls.iter_mut().find(|c| c.id == p.call.id))
            else {
                continue;
            };
            match p.waits_for {
                Waiting::Approval { .. } => {
                    call.pending_approval = Some(true);
                    call.approval_token = Some(self.signer.sign(
                        &call.id,
                        &call.function.name,
                        &call.function.arguments,
                        &digest,
                    ));
                }
                Waiting::Frontend { .. } => call.pending_frontend = Some(true),
            }
        }
        messages
    }
}

impl Stream for ChatRun {
    type Item = StreamEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StreamEvent>> {
        loop {
            let Some(event) = std::task::ready!(self.run.poll_next_unpin(cx)) else {
                return Poll::Ready(None);
            };
            if let Some(frame) = self.render(event) {
                return Poll::Ready(Some(frame));
            }
        }
    }
}

pub fn metadata(usage: &UsageReport) -> Metadata {
    Metadata {
        usage: usage.last_call,
        tokens: usage.tokens,
        max_tokens: usage.context_window,
        max_output_tokens: usage.max_output_tokens,
        costs: usage.costs,
        truncations: usage.truncations.clone(),
        ..Metadata::default()
    }
}

/// `tool_calling_result`: HolmesGPT's structured tool result.
fn tool_result(outcome: ToolOutcome) -> ToolCallResult {
    ToolCallResult {
        tool_call_id: outcome.call_id,
        tool_name: outcome.tool_name.clone(),
        name: outcome.tool_name,
        description: outcome.description,
        role: "tool".into(),
        result: ToolResultBody {
            schema_version: SCHEMA_VERSION.into(),
            status: outcome.output.status,
            error: outcome.output.error,
            return_code: outcome.output.return_code,
            data: outcome.output.data,
            images: None,
            url: None,
            invocation: outcome.output.invocation,
            params: outcome.params,
            icon_url: None,
            elapsed_seconds: outcome.elapsed.map(|d| d.as_secs_f64()),
        },
        toolset_name: outcome.toolset,
    }
}

fn compacted(r: CompactionReport) -> crate::wire::events::Compacted {
    let saved = f64::from(r.initial_tokens.saturating_sub(r.compacted_tokens))
        / f64::from(r.initial_tokens.max(1))
        * 100.0;
    crate::wire::events::Compacted {
        content: format!(
            "The conversation history has been compacted from {} to {} tokens",
            r.initial_tokens, r.compacted_tokens
        ),
        compaction_summary: Some(r.summary),
        metadata: CompactedMetadata {
            initial_tokens: r.initial_tokens,
            compacted_tokens: r.compacted_tokens,
            compression_ratio_pct: (saved * 10.0).round() / 10.0,
            num_messages_before: r.num_messages_before,
            num_messages_after: r.messages.len(),
            max_context_size: r.context_window,
            threshold_pct: r.threshold_pct,
            fallback_used: false,
            fallback_reason: None,
            summarization_requests: r.summarization_requests,
            compaction_cost: Some(CompactionCost {
                total_cost: r.cost,
                prompt_tokens: r.usage.prompt_tokens,
                completion_tokens: r.usage.completion_tokens,
                total_tokens: r.usage.total_tokens,
                cached_tokens: None,
                cache_creation_tokens: None,
            }),
        },
        messages: r.messages,
    }
}
