//! The calls of one assistant reply: planned (answered at once, or run), run concurrently
//! with each result reported as it finishes, then joined to the history in the order the
//! model asked for them. Calls that wait for the user or the client pause the run.

use futures::StreamExt;
use serde_json::Value;

use super::Agent;
use super::canonical::canonical_value;
use super::event::AgentEvent;
use super::frontend::DEFAULT_NOOP_RESPONSE;
use super::repeats::{self, ReplyCalls};
use super::run::{Emitter, Live};
use super::setup::RunSetup;
use super::state::{PendingCall, Waiting};
use crate::context::truncation;
use crate::llm::Completion;
use crate::tools::{
    ToolContext, ToolOutcome, ToolOutput, ToolStatus, execute_with, executed_from, tool_arguments,
};
use crate::wire::request::FrontendToolMode;
use crate::wire::{Message, ToolCall};

/// Tool calls running at the same time (HolmesGPT uses a pool of 16).
const MAX_PARALLEL_TOOLS: usize = 16;

/// What became of one call, before it is reported.
pub(super) enum Decided {
    Done(ToolOutcome),
    AwaitingApproval(ToolOutcome),
    FrontendPause(Value),
}

/// What the run still reads of a call once it is reported: the `ToolFinished` event takes the
/// outcome itself (its parameters and output can be large), the run keeps the tool message's
/// content, whether the tool ran, and what an approval asks about.
pub(super) enum Outcome {
    Done {
        content: String,
        ran: bool,
    },
    AwaitingApproval {
        content: String,
        ran: bool,
        description: String,
        params: Value,
    },
    FrontendPause(Value),
}

impl Decided {
    /// Reports a finished call (`ToolFinished`) and keeps what the run reads afterwards.
    pub(super) fn report(self, emit: &Emitter) -> Outcome {
        let (kept, shown) = self.split();
        if let Some(shown) = shown {
            emit.emit(AgentEvent::ToolFinished(Box::new(shown)));
        }
        kept
    }

    /// What the run keeps, without an event (a call waiting for approval before it ran).
    fn unreported(self) -> Outcome {
        self.split().0
    }

    fn split(self) -> (Outcome, Option<ToolOutcome>) {
        match self {
            Decided::Done(done) => {
                let kept = Outcome::Done {
                    content: done.content.clone(),
                    ran: done.ran(),
                };
                (kept, Some(done))
            }
            Decided::AwaitingApproval(asked) => {
                let kept = Outcome::AwaitingApproval {
                    content: asked.content.clone(),
                    ran: asked.ran(),
                    description: asked.description.clone(),
                    params: asked.params.clone(),
                };
                (kept, Some(asked))
            }
            Decided::FrontendPause(arguments) => (Outcome::FrontendPause(arguments), None),
        }
    }
}

enum Plan {
    Immediate(Box<Decided>),
    /// Run it, with its arguments as the tool reads them.
    Execute(Result<Value, String>),
}

/// A call to run; `approved` when the user approved this very call.
pub(super) struct Job {
    pub call: ToolCall,
    pub approved: bool,
    /// Its arguments as the tool reads them (`tools::tool_arguments`).
    pub arguments: Result<Value, String>,
}

impl Agent {
    /// Handles the tool calls of a reply; `Some(Paused)` when calls wait for someone.
    pub(super) async fn act(
        &self,
        s: &RunSetup,
        live: &mut Live,
        completion: Completion,
        reply: Message,
    ) -> Option<AgentEvent> {
        let calls = completion.tool_calls;
        let assistant_index = live.conv.len();
        let mut reply_calls = ReplyCalls::default();
        let (plans, guard_keys): (Vec<Plan>, Vec<Option<String>>) = calls
            .iter()
            .enumerate()
            .map(|(i, call)| self.plan_call(s, live, &mut reply_calls, call, i))
            .unzip();
        live.push(reply);
        live.emit_usage(s);
        if completion.content.is_some() || completion.reasoning.is_some() {
            live.emit.emit(AgentEvent::Thought {
                content: completion.content,
                reasoning: completion.reasoning,
                usage: Box::new(live.report(s)),
            });
        }
        for call in &calls {
            live.emit.emit(AgentEvent::ToolStarted {
                call_id: call.id.clone(),
                tool_name: call.function.name.clone(),
            });
        }
        let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(calls.len());
        let mut jobs = Vec::new();
        let mut job_slots = Vec::new();
        for (i, plan) in plans.into_iter().enumerate() {
            match plan {
                Plan::Immediate(decided) => outcomes.push(Some(match *decided {
                    done @ Decided::Done(_) => done.report(&live.emit),
                    // Asked before anything ran: the pause reports it.
                    waiting => waiting.unreported(),
                })),
                Plan::Execute(arguments) => {
                    outcomes.push(None);
                    job_slots.push(i);
                    jobs.push(Job {
                        call: calls[i].clone(),
                        approved: false,
                        arguments,
                    });
                }
            }
        }
        for (i, outcome) in job_slots
            .into_iter()
            .zip(self.run_calls(s, live, jobs).await)
        {
            outcomes[i] = Some(outcome);
        }
        let mut pending = Vec::new();
        for ((call, outcome), guard_key) in calls.into_iter().zip(outcomes).zip(guard_keys) {
            match outcome {
                Some(Outcome::Done { content, ran }) => {
                    if let Some(key) = guard_key.filter(|_| ran) {
                        live.state.repeats.ran(key, &content);
                    }
                    live.push(Message::tool(&call.id, &call.function.name, content));
                }
                Some(Outcome::AwaitingApproval {
                    description,
                    params,
                    ..
                }) => pending.push(PendingCall {
                    message_index: assistant_index,
                    call,
                    waits_for: Waiting::Approval {
                        description,
                        params,
                    },
                }),
                Some(Outcome::FrontendPause(arguments)) => pending.push(PendingCall {
                    message_index: assistant_index,
                    call,
                    waits_for: Waiting::Frontend { arguments },
                }),
                None => {}
            }
        }
        live.emit_usage(s);
        if pending.is_empty() {
            return None;
        }
        let approvals = pending.iter().filter(|p| p.is_approval()).count();
        metrics::counter!("triage_approvals_requested_total").increment(approvals as u64);
        metrics::counter!("triage_frontend_pauses_total")
            .increment((pending.len() - approvals) as u64);
        let event = AgentEvent::Paused {
            pending: pending.clone(),
        };
        // What waits is shown from the state too (`pending_actions`, webhook snapshots): its
        // description and arguments are kept masked there; the calls keep what the model
        // wrote, which is what runs.
        for p in &mut pending {
            s.masker.mask(&mut p.waits_for);
        }
        live.state.pending = pending;
        Some(event)
    }

    /// Decides what to do with a call before anything runs: frontend tools, duplicates and
    /// calls over the per-answer cap are answered at once; everything else is run.
    fn plan_call(
        &self,
        s: &RunSetup,
        live: &Live,
        reply_calls: &mut ReplyCalls,
        call: &ToolCall,
        index: usize,
    ) -> (Plan, Option<String>) {
        let name = &call.function.name;
        let cap = self.options.max_tool_calls_per_answer;
        // Answered without running: nothing for the duplicate guard to record.
        let answer = |toolset: &str, description: &str, output: ToolOutput| {
            let done = executed_from(call, toolset, description, output);
            (Plan::Immediate(Box::new(Decided::Done(done))), None)
        };
        if index >= cap {
            // Every call still gets a result, so the history stays valid for the provider.
            return answer(
                "",
                name,
                ToolOutput::error(format!(
                    "Not run: one answer may ask for at most {cap} tool calls \
                     (agent.max_tool_calls_per_answer); ask for the rest in a later answer."
                )),
            );
        }
        if let Some(tool) = s.frontend_tools.iter().find(|t| t.name == *name) {
            let description = format!("Frontend tool: {name}");
            let arguments = match tool.check_arguments(&call.function.arguments) {
                Ok(arguments) => arguments,
                // The model reads why and calls again; the client never gets bad arguments.
                Err(why) => {
                    return answer(
                        "frontend",
                        &description,
                        ToolOutput::error(format!(
                            "Not sent to the frontend: {why}. Call the tool again with arguments that match its schema."
                        )),
                    );
                }
            };
            return match tool.mode {
                FrontendToolMode::Pause => (
                    Plan::Immediate(Box::new(Decided::FrontendPause(arguments))),
                    None,
                ),
                FrontendToolMode::Noop => {
                    let text = tool
                        .noop_response
                        .clone()
                        .unwrap_or_else(|| DEFAULT_NOOP_RESPONSE.into());
                    answer("frontend", &description, ToolOutput::success(text))
                }
            };
        }
        // Read once: for the duplicate guard's key and for the tool.
        let mut read = None;
        let mut guard_key = None;
        if self.options.duplicate_call_guard {
            let arguments = read.insert(serde_json::from_str::<Value>(&call.function.arguments));
            let canonical = match arguments {
                Ok(value) => canonical_value(value),
                // Text that is not JSON is its own canonical form.
                Err(_) => call.function.arguments.clone(),
            };
            let key = repeats::key(name, &canonical);
            if !reply_calls.first(&key) || live.state.repeats.refuses(&key) {
                return answer("", name, ToolOutput::error(repeats::REFUSAL));
            }
            guard_key = Some(key);
        }
        if s.approve_every_call {
            // Recorded when it runs, once approved.
            let asked = self.described(
                call,
                ToolOutput {
                    status: ToolStatus::ApprovalRequired,
                    error: Some("every tool call waits for the user's approval".into()),
                    ..ToolOutput::success("")
                },
            );
            return (
                Plan::Immediate(Box::new(Decided::AwaitingApproval(asked))),
                None,
            );
        }
        let read = read.unwrap_or_else(|| serde_json::from_str(&call.function.arguments));
        (
            Plan::Execute(tool_arguments(&call.function.arguments, read)),
            guard_key,
        )
    }

    /// Runs calls concurrently (at most `MAX_PARALLEL_TOOLS` at once: a reply asking for
    /// thousands must not start thousands of processes), reporting each result as it
    /// finishes. Returns the outcomes in the order of `jobs`.
    pub(super) async fn run_calls(
        &self,
        s: &RunSetup,
        live: &mut Live,
        jobs: Vec<Job>,
    ) -> Vec<Outcome> {
        let headers = live.tool_headers.clone();
        let approved: Vec<bool> = jobs.iter().map(|job| job.approved).collect();
        let mut running = Vec::with_capacity(jobs.len());
        for (i, job) in jobs.into_iter().enumerate() {
            let ctx = ToolContext {
                user_approved: job.approved,
                request_headers: headers.clone(),
            };
            let tools = &self.tools;
            running.push(async move {
                let done = execute_with(tools, &job.call, job.arguments, &ctx).await;
                (i, done)
            });
        }
        let mut running = futures::stream::iter(running).buffer_unordered(MAX_PARALLEL_TOOLS);
        let mut outcomes: Vec<Option<Outcome>> = approved.iter().map(|_| None).collect();
        while let Some((i, mut done)) = running.next().await {
            self.finish_result(s, live, &mut done).await;
            let decided = classify(done, approved[i], s.pause_for_approval);
            outcomes[i] = Some(decided.report(&live.emit));
        }
        outcomes.into_iter().flatten().collect()
    }

    /// Every tool result passes here before the model reads it: the text it reads masked,
    /// and the output masked before it is cut to the budget (a secret cut in two would no
    /// longer be found). The rest of the outcome is masked as its event is emitted.
    pub(super) async fn finish_result(
        &self,
        s: &RunSetup,
        live: &mut Live,
        done: &mut ToolOutcome,
    ) {
        s.masker.mask(&mut done.content);
        s.masker.mask(&mut done.output.data);
        let content = std::mem::take(&mut done.content);
        let data = std::mem::take(&mut done.output.data);
        let Some(cut) = s
            .tool_budget
            .cut_result_off_workers(s.model.tokenizer, content, data)
            .await
        else {
            done.content = "Error: the tool's output could not be measured".into();
            done.output.status = ToolStatus::Error;
            return;
        };
        if let Some((end_index, original)) = cut.truncated {
            live.state.truncations.push(truncation::record(
                &done.call_id,
                &done.tool_name,
                end_index,
                original,
            ));
        }
        done.content = cut.content;
        done.output.data = cut.data;
    }
}

/// What a finished call means for the run: a call its tool wants approved pauses the run (or,
/// with approvals off, becomes an error the model can recover from).
fn classify(mut done: ToolOutcome, approved: bool, pause_for_approval: bool) -> Decided {
    if done.status() != ToolStatus::ApprovalRequired {
        return Decided::Done(done);
    }
    if approved {
        done.output.status = ToolStatus::Error;
        done.content = "Error: the tool still requires approval".into();
        return Decided::Done(done);
    }
    if pause_for_approval {
        return Decided::AwaitingApproval(done);
    }
    let reason = done
        .output
        .error
        .take()
        .unwrap_or_else(|| "the command needs approval".into());
    Decided::Done(done.into_error(format!("Tool call rejected for security reasons: {reason}")))
}
