//! The agentic loop: call the LLM, run the tools it asks for, feed the results back, until it
//! answers, pauses on calls that wait for someone, or the turn's step budget is spent. Each
//! step is a named function; `Agent::start` wraps them into a `Run`.

use std::sync::Arc;

use serde_json::Value;

use super::Agent;
use super::error::{RunError, RunErrorKind};
use super::event::{AgentEvent, Answer, StopReason};
use super::input::Input;
use super::run::{Emitter, Live, Run};
use super::setup::RunSetup;
use super::state::RunState;
use super::structured::{FormatCheck, repair_prompt};
use crate::context::tokens::count_message;
use crate::llm::{AnsweredByFallback, Completion, CompletionRequest, LlmError};
use crate::wire::Message;
use crate::wire::events::ModelFallback;
use crate::wire::response::ResponseFormatReport;

impl Agent {
    /// Accepts a run: compiles its config, renders the user's message, reserves one of the
    /// model's call slots. Every refusal happens here, before any event; then the returned
    /// `Run` streams the events, ending with `Finished`, `Paused` or `Failed`.
    pub fn start(
        self: &Arc<Self>,
        config: &super::RunConfig,
        state: RunState,
        input: Input,
    ) -> Result<Run, RunError> {
        let setup = Arc::new(self.compile(config)?);
        self.check_pending(&state)?;
        let new_images = input.message.as_ref().map_or(&[][..], |m| &m.images[..]);
        self.options
            .images
            .check(&state.messages, new_images)
            .map_err(|e| RunError::new(RunErrorKind::TooLarge, e))?;
        let user = input
            .message
            .as_ref()
            .map(|m| self.user_message(&setup, m))
            .transpose()?;
        let slot = setup.model.try_reserve_slot().ok_or_else(|| {
            RunError::new(
                RunErrorKind::Overloaded,
                format!(
                    "Model '{}' is at its limit of concurrent calls (llm.max_concurrent_calls_per_model); retry shortly",
                    setup.model.key
                ),
            )
        })?;
        let emit = Emitter::new(setup.masker.clone());
        let system = self.system_message(&setup, config);
        let mut live = Live::new(
            state,
            &setup,
            system,
            emit.clone(),
            input.tool_headers.clone(),
            Some(slot),
        );
        let agent = self.clone();
        let driver = async move {
            let control = input.control.clone().unwrap_or_default();
            let end = {
                let turn = agent.turn(&setup, &mut live, user, &input);
                tokio::select! {
                    biased;
                    () = control.interrupted() => None,
                    end = turn => Some(end),
                }
            };
            let end = match end {
                Some(end) => end.unwrap_or_else(AgentEvent::Failed),
                // The step in flight was dropped: its LLM call and tools are cancelled.
                None => AgentEvent::Stopped(StopReason::Interrupted {
                    cut: live.settle("the run was interrupted before this call finished"),
                }),
            };
            live.emit.emit(end);
            live.into_state()
        };
        Ok(Run::new(Box::pin(driver), emit))
    }

    /// A run waits on at most the calls of one answer: a state claiming thousands was built
    /// to be expensive (each is answered, and refused ones cost a lookup each), not saved
    /// from a pause.
    fn check_pending(&self, state: &RunState) -> Result<(), RunError> {
        let cap = self.options.max_tool_calls_per_answer;
        if state.pending.len() > cap {
            return Err(RunError::bad_input(format!(
                "The conversation has {} pending tool calls; one answer may ask for at most {cap} \
                 (agent.max_tool_calls_per_answer)",
                state.pending.len()
            )));
        }
        Ok(())
    }

    async fn turn(
        &self,
        s: &RunSetup,
        live: &mut Live,
        user: Option<Message>,
        input: &Input,
    ) -> Result<AgentEvent, RunError> {
        self.answer_pending(s, live, &input.decisions, &input.frontend_results)
            .await?;
        if let Some(message) = user {
            live.push(message);
            live.state.steps = 0;
            live.state.repeats.new_turn();
        }
        let control = input.control.clone().unwrap_or_default();
        loop {
            for message in control.take_messages() {
                let message = self.user_message(s, &message)?;
                live.push(message);
                live.state.steps = 0;
                live.state.repeats.new_turn();
            }
            if control.pause_requested() {
                return Ok(AgentEvent::Stopped(StopReason::Paused));
            }
            if s.stuck_detection {
                match super::stuck::assess(live.conv.messages()) {
                    super::stuck::Assessment::Fine => {}
                    super::stuck::Assessment::Nudge(text) => {
                        // Once: a nudge already given is the last message until the model acts.
                        let nudged =
                            live.conv.messages().last().is_some_and(|m| {
                                m.name.as_deref() == Some(super::stuck::NUDGE_NAME)
                            });
                        if !nudged {
                            live.push(super::stuck::nudge_message(text));
                        }
                    }
                    super::stuck::Assessment::Stuck(pattern) => {
                        return Ok(AgentEvent::Stopped(StopReason::Stuck { pattern }));
                    }
                }
            }
            let step = live.state.steps + 1;
            self.compact_if_needed(s, live).await?;
            let last_step = step >= s.max_steps;
            let (completion, reply) = self.call_llm(s, live, !last_step).await?;
            live.state.steps = step;
            if completion.tool_calls.is_empty() {
                return self.finish_answer(s, live, completion, reply).await;
            }
            if last_step {
                live.push(reply);
                live.emit_usage(s);
                return Err(RunError::new(
                    RunErrorKind::MaxSteps,
                    format!(
                        "Too many LLM calls - exceeded max_steps: {step}/{}",
                        s.max_steps
                    ),
                ));
            }
            if let Some(paused) = self.act(s, live, completion, reply).await {
                return Ok(paused);
            }
        }
    }

    /// One LLM call over the conversation; its text goes out as deltas when asked for. Returns
    /// the completion and the assistant message it makes, with the call's usage recorded.
    async fn call_llm(
        &self,
        s: &RunSetup,
        live: &mut Live,
        offer_tools: bool,
    ) -> Result<(Completion, Message), RunError> {
        let slot = live.slot.take();
        live.llm_calls += 1;
        let request = CompletionRequest {
            model: &s.model,
            messages: live.conv.messages(),
            // On the last step the definitions stay and calls are forbidden: a history with
            // tool calls and no tools is refused by Anthropic and Bedrock (HolmesGPT #1142).
            tools: s.tool_definitions.as_deref(),
            allow_tool_calls: offer_tools,
            response_format: s.response_format.as_ref(),
        };
        let emit = live.emit.clone();
        let deltas = s.text_deltas;
        let result = self
            .llm
            .complete(&request, slot, |text| {
                if deltas {
                    emit.emit(AgentEvent::TextDelta(text.to_owned()));
                }
            })
            .await;
        let completion = result.map_err(|e| {
            tracing::warn!(model = %s.model.key, error = %e, "LLM call failed");
            self.llm_failure(s, &e)
        })?;
        let mut reply = Message::assistant(
            completion.content.clone(),
            completion.reasoning.clone(),
            completion.tool_calls.clone(),
        );
        reply.set_thinking_blocks(completion.thinking_blocks.clone());
        let prompt = live.conv.total() + s.tools_tokens;
        // Priced as the model that answered.
        live.state.usage.record_or_estimate(
            completion.usage,
            prompt,
            || count_message(s.model.tokenizer, &reply).total(),
            completion.answered_by(&s.model),
        );
        if let Some(fallback) = &completion.fallback {
            self.announce_fallback(s, &live.emit, &mut live.fallbacks, fallback);
        }
        Ok((completion, reply))
    }

    /// The model answered: the answer joins the history, is checked against the response
    /// format (one repair round), and ends the run.
    async fn finish_answer(
        &self,
        s: &RunSetup,
        live: &mut Live,
        completion: Completion,
        reply: Message,
    ) -> Result<AgentEvent, RunError> {
        live.push(reply);
        let mut text = completion.content.unwrap_or_default();
        let mut format = None;
        if let Some(check) = &s.format_check {
            let checked = match check.check(&text) {
                Ok(clean) => Ok((clean, false)),
                Err(violations) => {
                    tracing::info!(
                        ?violations,
                        "answer does not match response_format: repairing"
                    );
                    self.repair_answer(s, live, check, &violations)
                        .await?
                        .map(|clean| (clean, true))
                }
            };
            match checked {
                Ok((clean, repaired)) => {
                    text = clean;
                    if let Some(masked) = super::structured::mask_decoded(&text, &s.masker) {
                        let last = live.conv.len() - 1;
                        live.replace(
                            last,
                            Message::assistant(Some(masked.clone()), None, Vec::new()),
                        );
                        text = masked;
                    }
                    format = Some(ResponseFormatReport {
                        valid: true,
                        repaired,
                    });
                }
                Err(violations) => {
                    live.emit_usage(s);
                    return Err(RunError::new(
                        RunErrorKind::InvalidAnswer,
                        format!(
                            "The answer does not match the requested response_format after one repair attempt: {}",
                            violations.join("; ")
                        ),
                    ));
                }
            }
        }
        let usage = live.report(s);
        live.emit.emit(AgentEvent::Usage(Box::new(usage.clone())));
        Ok(AgentEvent::Finished(Box::new(Answer {
            text,
            finish_reason: completion.finish_reason,
            format,
            usage,
            fallbacks: std::mem::take(&mut live.fallbacks),
        })))
    }

    /// One repair round: the model sees its answer and the violations and answers again (no
    /// tools). On success the final assistant message is replaced by the corrected JSON, so
    /// the history carries the answer the client got.
    async fn repair_answer(
        &self,
        s: &RunSetup,
        live: &mut Live,
        check: &FormatCheck,
        violations: &[String],
    ) -> Result<Result<String, Vec<String>>, RunError> {
        let mut messages = live.conv.messages().to_vec();
        messages.push(Message::user(Value::String(repair_prompt(violations))));
        let request = CompletionRequest {
            model: &s.model,
            messages: &messages,
            tools: s.tool_definitions.as_deref(),
            allow_tool_calls: false,
            response_format: s.response_format.as_ref(),
        };
        // The repaired answer arrives whole in the final event: no deltas.
        let completion = self
            .llm
            .complete(&request, live.slot.take(), |_| {})
            .await
            .map_err(|e| self.llm_failure(s, &e))?;
        let text = completion.content.as_deref().unwrap_or_default();
        live.state.usage.record_or_estimate(
            completion.usage,
            live.conv.total(),
            || s.model.tokenizer.count(text),
            completion.answered_by(&s.model),
        );
        if let Some(fallback) = &completion.fallback {
            self.announce_fallback(s, &live.emit, &mut live.fallbacks, fallback);
        }
        let clean = match check.check(text) {
            Ok(clean) => clean,
            Err(violations) => return Ok(Err(violations)),
        };
        let last = live.conv.len() - 1;
        live.replace(
            last,
            Message::assistant(Some(clean.clone()), None, Vec::new()),
        );
        Ok(Ok(clean))
    }

    /// What the stream and the answer's metadata say of a call a fallback answered; the
    /// reason quotes a provider error, which can echo credentials.
    pub(super) fn fallback_note(
        &self,
        s: &RunSetup,
        fallback: &AnsweredByFallback,
    ) -> ModelFallback {
        // Also logged where there is no stream (titles, side questions): masked here.
        let reason = s.masker.masked(fallback.reason.clone());
        ModelFallback {
            requested_model: s.model.key.clone(),
            model: fallback.model.key.clone(),
            reason,
        }
    }

    /// Every call a fallback answered is announced in the stream and listed in the answer's
    /// metadata: never a silent switch of model.
    pub(super) fn announce_fallback(
        &self,
        s: &RunSetup,
        emit: &Emitter,
        fallbacks: &mut Vec<ModelFallback>,
        fallback: &AnsweredByFallback,
    ) {
        let note = self.fallback_note(s, fallback);
        fallbacks.push(note.clone());
        emit.emit(AgentEvent::ModelFallback(note));
    }

    /// An LLM failure as the run's error; provider messages can echo credentials: masked
    /// here, since outside a run (condense, titles, side questions) no event carries it.
    pub(super) fn llm_failure(&self, s: &RunSetup, e: &LlmError) -> RunError {
        let message = s.masker.masked(e.to_string());
        let kind = match e {
            LlmError::RateLimited { .. } => RunErrorKind::RateLimited,
            // 401 from the provider would read as the client's own key: a bad gateway.
            LlmError::Auth { .. } | LlmError::Oversized(_) => RunErrorKind::BadGateway,
            LlmError::Overloaded(_) => RunErrorKind::Overloaded,
            _ => RunErrorKind::Provider,
        };
        RunError::new(kind, message)
    }
}
