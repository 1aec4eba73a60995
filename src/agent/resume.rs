//! Resuming a paused conversation: the calls the last response paused on (flagged in the
//! history) get their results — approved calls run, denied or unverifiable ones become error
//! results, frontend calls take the client's result — inserted right after their assistant
//! message, each reported as `tool_calling_result` before the loop goes on.

use std::collections::HashMap;

use super::Agent;
use super::approvals::{TokenError, conversation_digest};
use futures::StreamExt;

use super::chat_loop::{MAX_PARALLEL_TOOLS, Run, tool_result_event};
use crate::context::tokens::Tokenizer;
use crate::tools::{ExecutedCall, ToolContext, ToolOutput, execute, executed_from};
use crate::wire::events::{ErrorEvent, ToolStatus};
use crate::wire::request::{FrontendToolResult, ToolDecision};
use crate::wire::{Message, StreamEvent, ToolCall};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Approval,
    Frontend,
}

struct Pending {
    message_index: usize,
    call: ToolCall,
    kind: Kind,
}

impl Agent {
    /// Answers every paused call in the history. Returns the events to emit first, or the
    /// error event that ends the request.
    pub(super) async fn resume(
        &self,
        run: &mut Run,
        tok: Tokenizer,
        decisions: &[ToolDecision],
        frontend_results: &[FrontendToolResult],
    ) -> Result<Vec<StreamEvent>, StreamEvent> {
        let pending = take_pending(run);
        if !decisions.is_empty() && !pending.iter().any(|p| p.kind == Kind::Approval) {
            // The client's mistake: a non-streaming request answers 400, not 500.
            return Err(StreamEvent::Error(
                ErrorEvent::new(
                    format!(
                        "Received {} tool decisions but no pending approvals found in conversation history",
                        decisions.len()
                    ),
                    false,
                )
                .with_http_status(400),
            ));
        }
        for result in frontend_results {
            if !pending
                .iter()
                .any(|p| p.kind == Kind::Frontend && p.call.id == result.tool_call_id)
            {
                tracing::warn!(tool_call_id = %result.tool_call_id, "frontend tool result for no pending call: ignored");
            }
        }
        let mut answered: Vec<(usize, Message)> = Vec::new();
        let mut events = Vec::new();
        // Approved calls run at the same time, as the calls of one reply do; results are
        // reported in the order of the history. Approvals first, then frontend results, as the
        // reference reports them.
        let headers = run.request_headers.clone();
        let approvals: Vec<&Pending> = pending
            .iter()
            .filter(|p| p.kind == Kind::Approval)
            .collect();
        // A plain loop, not an iterator closure: the closure's lifetimes make the request's
        // future not provably `Send`.
        let mut decisions_run = Vec::with_capacity(approvals.len());
        for p in &approvals {
            let digest = conversation_digest(&run.conv.messages()[..=p.message_index]);
            decisions_run.push(self.decide(&p.call, digest, decisions, &headers));
        }
        let decided: Vec<ExecutedCall> = futures::stream::iter(decisions_run)
            .buffered(MAX_PARALLEL_TOOLS)
            .collect()
            .await;
        let frontend = pending
            .iter()
            .filter(|p| p.kind == Kind::Frontend)
            .map(|p| (p, frontend_result(&p.call, frontend_results)));
        for (p, mut executed) in approvals.into_iter().zip(decided).chain(frontend) {
            self.finish_result(run, &mut executed, tok);
            // Only a call that ran counts for the duplicate guard: a denied one may be
            // asked for again.
            if executed.result.result.elapsed_seconds.is_some() {
                run.seen_calls.insert((
                    p.call.function.name.clone(),
                    super::approvals::canonical(&p.call.function.arguments),
                ));
            }
            events.push(tool_result_event(&executed));
            answered.push((
                p.message_index,
                Message::tool(&p.call.id, &p.call.function.name, executed.content),
            ));
        }
        insert_results(run, answered);
        Ok(events)
    }

    async fn decide(
        &self,
        call: &ToolCall,
        digest: String,
        decisions: &[ToolDecision],
        headers: &std::sync::Arc<Vec<(String, String)>>,
    ) -> ExecutedCall {
        let name = &call.function.name;
        if let Err(reason) = self.signer.verify(
            call.approval_token.as_deref(),
            &call.id,
            name,
            &call.function.arguments,
            &digest,
        ) {
            tracing::warn!(tool_call_id = %call.id, ?reason, "approval token rejected");
            let why = match reason {
                TokenError::Expired => format!(
                    "the approval expired (pending approvals are valid for {} s, \
                     approvals.token_ttl_secs)",
                    self.signer.ttl_secs()
                ),
                _ => "this pending approval was not issued by this server for this \
                      conversation, or was altered"
                    .to_owned(),
            };
            return executed_from(
                call,
                "",
                name,
                ToolOutput::error(format!(
                    "Approval token validation failed ({reason:?}): {why}, so the tool was not \
                     run. Call the tool again if it is still needed."
                )),
            );
        }
        let decision = decisions.iter().find(|d| d.tool_call_id == call.id);
        match decision {
            Some(d) if d.approved => {
                let ctx = ToolContext {
                    user_approved: true,
                    request_headers: headers.clone(),
                };
                let mut executed = execute(&self.tools, call, &ctx).await;
                if executed.result.result.status == ToolStatus::ApprovalRequired {
                    executed.result.result.status = ToolStatus::Error;
                    executed.content = "Error: the tool still requires approval".into();
                }
                executed
            }
            Some(d) => {
                let mut msg = "Tool execution was denied by the user.".to_owned();
                if let Some(feedback) = d.feedback.as_deref().filter(|f| !f.trim().is_empty()) {
                    msg.push_str(" User feedback: ");
                    msg.push_str(feedback);
                }
                self.described(call, ToolOutput::error(msg))
            }
            None => self.described(
                call,
                ToolOutput::error("Tool execution was denied: no decision was sent for this call."),
            ),
        }
    }

    /// A result for a backend tool that did not run, described as the tool would describe it.
    fn described(&self, call: &ToolCall, output: ToolOutput) -> ExecutedCall {
        let name = &call.function.name;
        match self.tools.get(name) {
            Some(tool) => {
                let params = serde_json::from_str(&call.function.arguments).unwrap_or_default();
                executed_from(call, tool.toolset(), &tool.one_liner(&params), output)
            }
            None => executed_from(call, "", name, output),
        }
    }
}

fn frontend_result(call: &ToolCall, results: &[FrontendToolResult]) -> ExecutedCall {
    let name = &call.function.name;
    let output = match results.iter().find(|r| r.tool_call_id == call.id) {
        Some(r) => ToolOutput::success(r.result.clone()),
        None => ToolOutput::error("frontend did not return a result for this tool call."),
    };
    executed_from(call, "frontend", &format!("Frontend tool: {name}"), output)
}

/// Finds and clears the pending flags (so they never survive a resume).
fn take_pending(run: &mut Run) -> Vec<Pending> {
    let mut pending = Vec::new();
    let indices: Vec<usize> = run
        .conv
        .messages()
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            m.is_role("assistant")
                && m.tool_calls()
                    .iter()
                    .any(|c| c.pending_approval.is_some() || c.pending_frontend.is_some())
        })
        .map(|(i, _)| i)
        .collect();
    for i in indices {
        for call in run.conv.message_mut(i).tool_calls.iter_mut().flatten() {
            let kind = if call.pending_approval.take() == Some(true) {
                Some(Kind::Approval)
            } else if call.pending_frontend.take() == Some(true) {
                Some(Kind::Frontend)
            } else {
                None
            };
            call.pending_frontend = None;
            if let Some(kind) = kind {
                pending.push(Pending {
                    message_index: i,
                    call: call.clone(),
                    kind,
                });
            }
            call.approval_token = None;
        }
    }
    pending
}

/// Inserts each result after its assistant message and the tool results already there;
/// later messages first, so earlier indices stay valid.
fn insert_results(run: &mut Run, mut answered: Vec<(usize, Message)>) {
    let mut per_message: HashMap<usize, Vec<Message>> = HashMap::new();
    for (index, message) in answered.drain(..) {
        per_message.entry(index).or_default().push(message);
    }
    let mut indices: Vec<usize> = per_message.keys().copied().collect();
    indices.sort_unstable_by(|a, b| b.cmp(a));
    for index in indices {
        let mut at = index + 1;
        while run
            .conv
            .messages()
            .get(at)
            .is_some_and(|m| m.is_role("tool"))
        {
            at += 1;
        }
        for message in per_message.remove(&index).unwrap_or_default() {
            run.conv.insert(at, message);
            at += 1;
        }
    }
}
