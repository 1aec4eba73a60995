//! A run's events as HolmesGPT frames. The terminal frames carry the history, as HolmesGPT's
//! do: the run's final state, with each pending call flagged (and each pending approval given
//! a token bound to the history before it).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};

use super::approvals::{ApprovalSigner, conversation_digest};
use crate::agent::{AgentEvent, PendingCall, Run, RunError, RunErrorKind, Waiting};
use crate::holmes::frames;
use crate::wire::events::{AnswerEnd, ApprovalRequired, ErrorEvent, ToolCallResult};
use crate::wire::{ChatResponse, FollowUpAction, Message, StreamEvent};

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
    pub(crate) fn new(
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
        let event = match frames::frame(event) {
            Ok(frame) => return frame,
            Err(event) => event,
        };
        Some(match event {
            AgentEvent::Paused { pending } => {
                let history = self.history(&pending);
                StreamEvent::ApprovalRequired(Box::new(ApprovalRequired {
                    content: None,
                    analysis: None,
                    conversation_history: history,
                    follow_up_actions: std::mem::take(&mut self.follow_up_actions),
                    requires_approval: true,
                    pending_approvals: frames::pending_approvals(&pending),
                    pending_frontend_tool_calls: frames::pending_frontend(&pending),
                }))
            }
            AgentEvent::Finished(answer) => {
                let mut metadata = frames::metadata(&answer.usage);
                metadata.finish_reason = answer.finish_reason;
                metadata.request_id = Some(self.request_id.clone());
                metadata.response_format = answer.format;
                metadata.model_fallbacks = answer.fallbacks;
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
            // `frames::frame` renders every other event.
            _ => return None,
        })
    }

    /// The run's final history, each pending call flagged where the client will send it back.
    /// The client gets it masked as the events are (the tool calls the model wrote included),
    /// and the approval tokens are signed over what it gets: it sends that back
    /// (`prepare.rs` refuses to run an approved call it only saw masked).
    fn history(&mut self, pending: &[PendingCall]) -> Vec<Message> {
        let mut messages = self
            .run
            .take_state()
            .map(|s| s.messages)
            .unwrap_or_default();
        self.run.masker().mask(&mut messages);
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
