//! Answering the calls a run paused on: approved calls run (each result reported as it
//! finishes), denied or refused ones become error results, frontend calls take the client's
//! result. Results join the history right after their assistant message, then the loop goes on.

use std::collections::BTreeMap;

use super::Agent;
use super::calls::{Decided, Job, Outcome};
use super::canonical::canonical;
use super::error::RunError;
use super::input::{Decision, FrontendResult, Verdict};
use super::repeats;
use super::run::Live;
use super::setup::RunSetup;
use super::state::PendingCall;
use crate::tools::{ToolOutcome, ToolOutput, executed_from, parse_arguments};
use crate::wire::{Message, ToolCall};

impl Agent {
    pub(super) async fn answer_pending(
        &self,
        s: &RunSetup,
        live: &mut Live,
        decisions: &[Decision],
        frontend_results: &[FrontendResult],
    ) -> Result<(), RunError> {
        let pending = std::mem::take(&mut live.state.pending);
        if !decisions.is_empty() && !pending.iter().any(PendingCall::is_approval) {
            return Err(RunError::bad_input(format!(
                "Received {} tool decisions but no pending approvals found in conversation history",
                decisions.len()
            )));
        }
        for result in frontend_results {
            if !pending
                .iter()
                .any(|p| !p.is_approval() && p.call.id == result.call_id)
            {
                tracing::warn!(tool_call_id = %result.call_id, "frontend tool result for no pending call: ignored");
            }
        }
        // Approvals first, then frontend results, as the reference reports them; within each,
        // the order of the history.
        let (approvals, frontend): (Vec<PendingCall>, Vec<PendingCall>) =
            pending.into_iter().partition(PendingCall::is_approval);
        // Per approval: the tool message's content and whether the tool ran.
        let mut answers: Vec<Option<(String, bool)>> = Vec::with_capacity(approvals.len());
        let mut jobs = Vec::new();
        let mut job_slots = Vec::new();
        for (i, p) in approvals.iter().enumerate() {
            let output = match verdict(decisions, &p.call.id) {
                Some(Verdict::Approved) => {
                    job_slots.push(i);
                    jobs.push(Job {
                        call: p.call.clone(),
                        approved: true,
                        arguments: parse_arguments(&p.call.function.arguments),
                    });
                    answers.push(None);
                    continue;
                }
                Some(Verdict::Denied { feedback }) => {
                    let mut msg = "Tool execution was denied by the user.".to_owned();
                    if let Some(feedback) = feedback.as_deref().filter(|f| !f.trim().is_empty()) {
                        msg.push_str(" User feedback: ");
                        msg.push_str(feedback);
                    }
                    ToolOutput::error(msg)
                }
                Some(Verdict::Refused { reason }) => ToolOutput::error(reason.clone()),
                None => ToolOutput::error(
                    "Tool execution was denied: no decision was sent for this call.",
                ),
            };
            let mut outcome = self.described(&p.call, output);
            self.finish_result(s, live, &mut outcome).await;
            answers.push(result_of(Decided::Done(outcome).report(&live.emit)));
        }
        for (i, outcome) in job_slots
            .into_iter()
            .zip(self.run_calls(s, live, jobs).await)
        {
            answers[i] = result_of(outcome);
        }
        let mut answered: Vec<(usize, Message)> = Vec::new();
        for (p, outcome) in approvals.iter().zip(answers) {
            let Some((content, ran)) = outcome else {
                continue;
            };
            // Only a call that ran counts for the duplicate guard: a denied one may be asked
            // for again.
            if ran {
                let key = repeats::key(
                    &p.call.function.name,
                    &canonical(&p.call.function.arguments),
                );
                live.state.repeats.ran(key, &content);
            }
            answered.push((p.message_index, tool_message(&p.call, content)));
        }
        for p in &frontend {
            let mut outcome = frontend_result(&p.call, frontend_results);
            self.finish_result(s, live, &mut outcome).await;
            if let Some((content, _)) = result_of(Decided::Done(outcome).report(&live.emit)) {
                answered.push((p.message_index, tool_message(&p.call, content)));
            }
        }
        insert_results(live, answered);
        Ok(())
    }

    /// A result for a backend tool that did not run, described as the tool would describe it.
    pub(super) fn described(&self, call: &ToolCall, output: ToolOutput) -> ToolOutcome {
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

/// A call's result message content and whether it ran; a frontend pause has neither.
fn result_of(outcome: Outcome) -> Option<(String, bool)> {
    match outcome {
        Outcome::Done { content, ran } | Outcome::AwaitingApproval { content, ran, .. } => {
            Some((content, ran))
        }
        Outcome::FrontendPause(_) => None,
    }
}

/// The decision for a call; a front door's refusal outranks the client's decision.
fn verdict<'a>(decisions: &'a [Decision], call_id: &str) -> Option<&'a Verdict> {
    let mut for_call = decisions.iter().filter(|d| d.call_id == call_id);
    let first = for_call.next()?;
    if matches!(first.verdict, Verdict::Refused { .. }) {
        return Some(&first.verdict);
    }
    for_call
        .find(|d| matches!(d.verdict, Verdict::Refused { .. }))
        .map_or(Some(&first.verdict), |d| Some(&d.verdict))
}

fn tool_message(call: &ToolCall, content: String) -> Message {
    Message::tool(&call.id, &call.function.name, content)
}

fn frontend_result(call: &ToolCall, results: &[FrontendResult]) -> ToolOutcome {
    let name = &call.function.name;
    let output = match results.iter().find(|r| r.call_id == call.id) {
        Some(r) => ToolOutput::success(r.result.clone()),
        None => ToolOutput::error("frontend did not return a result for this tool call."),
    };
    executed_from(call, "frontend", &format!("Frontend tool: {name}"), output)
}

/// Inserts each result after its assistant message and the tool results already there;
/// later messages first, so earlier indices stay valid.
fn insert_results(live: &mut Live, answered: Vec<(usize, Message)>) {
    let mut per_message: BTreeMap<usize, Vec<Message>> = BTreeMap::new();
    for (index, message) in answered {
        per_message.entry(index).or_default().push(message);
    }
    for (index, messages) in per_message.into_iter().rev() {
        let mut at = index + 1;
        while live
            .conv
            .messages()
            .get(at)
            .is_some_and(|m| m.is_role("tool"))
        {
            at += 1;
        }
        for message in messages {
            live.insert(at, message);
            at += 1;
        }
    }
}
