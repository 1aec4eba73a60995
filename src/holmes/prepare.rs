//! A `/api/chat` request → the run's config, state and input. The client's history is the
//! state: calls flagged as pending become the state's pending calls, and each pending
//! approval's token is verified here, at the edge — a call whose token fails is refused, and
//! so is one whose arguments the client only ever saw with a secret masked.

use crate::agent::{
    ApprovalMode, Decision, FrontendResult, Input, MASK, PendingCall, RunConfig, RunError,
    RunState, UserMessage, Verdict, Waiting,
};
use crate::wire::{ChatRequest, Message};

use super::approvals::{ApprovalSigner, TokenError, conversation_digest, moved_token_message};

/// What the HTTP layer knows about a request besides its body.
#[derive(Debug, Clone, Default)]
pub struct RequestMeta {
    pub request_id: String,
    /// Request headers tools may see (blocked ones already removed).
    pub headers: Vec<(String, String)>,
}

pub(super) struct Prepared {
    pub config: RunConfig,
    pub state: RunState,
    pub input: Input,
    /// Suggested on a conversation's first turn only.
    pub first_turn: bool,
}

pub(super) fn prepare(
    signer: &ApprovalSigner,
    req: ChatRequest,
    meta: RequestMeta,
) -> Result<Prepared, RunError> {
    let history = req.conversation_history.unwrap_or_default();
    check_flag_placement(&history)?;
    let first_turn = !history.iter().any(|m| m.is_role("assistant"));
    let (mut state, mut decisions) = state_from_history(signer, history)?;
    let client_decisions = req.tool_decisions.unwrap_or_default();
    if let Some(d) = client_decisions
        .iter()
        .find(|d| d.save_prefixes.as_ref().is_some_and(|p| !p.is_empty()))
    {
        // Remembering approved prefixes would let one approval authorise later commands the
        // user never saw; triage asks for each call instead (docs/holmesgpt-compatibility.md).
        return Err(RunError::bad_input(format!(
            "tool_decisions: save_prefixes is not supported (decision for '{}'): triage asks \
             for approval of every call that needs it; send the decision without save_prefixes",
            d.tool_call_id
        )));
    }
    let frontend_results = req.frontend_tool_results.unwrap_or_default();
    let resuming = !state.messages.is_empty()
        && (!client_decisions.is_empty() || !frontend_results.is_empty());
    let has_ask = !req.ask.trim().is_empty();
    if !has_ask && !resuming {
        return Err(RunError::bad_input(
            "`ask` is empty: send a question (an empty ask only resumes a paused \
             conversation, with tool_decisions or frontend_tool_results)",
        ));
    }
    if !has_ask {
        // A resume continues the user's turn: its steps count against the same budget.
        state.steps = steps_of_last_turn(&state.messages);
    }
    decisions.extend(
        client_decisions
            .into_iter()
            .map(|d| Decision::from_user(d.tool_call_id, d.approved, d.feedback)),
    );
    let config = RunConfig {
        model: req.model,
        additional_system_prompt: req.additional_system_prompt,
        behavior_controls: req.behavior_controls,
        response_format: req.response_format,
        frontend_tools: req.frontend_tools.unwrap_or_default(),
        approvals: if req.stream && req.enable_tool_approval {
            ApprovalMode::Pause
        } else {
            ApprovalMode::Refuse
        },
        can_pause: req.stream,
        text_deltas: req.stream && req.stream_deltas,
        max_steps: None,
        secrets: Vec::new(),
        // HolmesGPT's /api/chat has no stuck detection: its duplicate guard stays the rule.
        stuck_detection: false,
    };
    let input = Input {
        message: has_ask.then(|| UserMessage {
            text: req.ask,
            images: req.images.unwrap_or_default(),
        }),
        decisions,
        frontend_results: frontend_results
            .into_iter()
            .map(|r| FrontendResult {
                call_id: r.tool_call_id,
                result: r.result,
            })
            .collect(),
        tool_headers: std::sync::Arc::new(meta.headers),
        control: None,
    };
    Ok(Prepared {
        config,
        state,
        input,
        first_turn,
    })
}

/// The history as a run state: pending flags become pending calls (and never survive), and a
/// pending approval whose token does not verify is refused. A genuine token issued for another
/// conversation refuses the whole request.
fn state_from_history(
    signer: &ApprovalSigner,
    mut history: Vec<Message>,
) -> Result<(RunState, Vec<Decision>), RunError> {
    let mut pending = Vec::new();
    let mut refusals = Vec::new();
    for i in 0..history.len() {
        let flagged = history[i].is_role("assistant")
            && history[i]
                .tool_calls()
                .iter()
                .any(|c| c.pending_approval == Some(true) || c.pending_frontend == Some(true));
        if !flagged {
            continue;
        }
        // Flags and tokens are not part of the digest: computed before they are taken off.
        let digest = conversation_digest(&history[..=i]);
        for call in history[i].tool_calls.iter_mut().flatten() {
            let approval = call.pending_approval.take() == Some(true);
            let frontend = call.pending_frontend.take() == Some(true);
            let token = call.approval_token.take();
            if approval {
                let verified = signer.verify(
                    token.as_deref(),
                    &call.id,
                    &call.function.name,
                    &call.function.arguments,
                    &digest,
                );
                if verified == Err(TokenError::OtherConversation) {
                    return Err(RunError::bad_input(moved_token_message(&call.id)));
                }
                if let Err(reason) = verified {
                    tracing::warn!(tool_call_id = %call.id, ?reason, "approval token rejected");
                    refusals.push(Decision {
                        call_id: call.id.clone(),
                        verdict: Verdict::Refused {
                            reason: refusal(signer, reason),
                        },
                    });
                } else if call.function.arguments.contains(MASK) {
                    // The history came back masked and the server keeps no copy: running the
                    // text with the marker in it would run what nobody wrote.
                    refusals.push(Decision {
                        call_id: call.id.clone(),
                        verdict: Verdict::Refused {
                            reason: MASKED_CALL.to_owned(),
                        },
                    });
                }
                pending.push(PendingCall {
                    message_index: i,
                    call: call.clone(),
                    waits_for: Waiting::Approval {
                        description: String::new(),
                        params: serde_json::Value::Null,
                    },
                });
            } else if frontend {
                pending.push(PendingCall {
                    message_index: i,
                    call: call.clone(),
                    waits_for: Waiting::Frontend {
                        arguments: serde_json::Value::Null,
                    },
                });
            }
        }
    }
    let state = RunState {
        messages: history,
        pending,
        ..RunState::default()
    };
    Ok((state, refusals))
}

/// Why an approved call whose arguments hold the mask did not run.
const MASKED_CALL: &str = "Not run: the call's arguments hold a secret, which the client \
     only ever saw as <secret-hidden>, and the server keeps no copy of what was masked between \
     requests, so what was approved is not what was written. Call the tool again without the \
     secret in its arguments (a tool that needs a credential is configured with it).";

fn refusal(signer: &ApprovalSigner, reason: TokenError) -> String {
    let why = match reason {
        TokenError::Expired => format!(
            "the approval expired (pending approvals are valid for {} s, \
             approvals.token_ttl_secs)",
            signer.ttl_secs()
        ),
        _ => "this pending approval was not issued by this server for this \
              conversation, or was altered"
            .to_owned(),
    };
    format!(
        "Approval token validation failed ({reason:?}): {why}, so the tool was not \
         run. Call the tool again if it is still needed."
    )
}

/// A run pauses on the calls of its last reply, so flags belong to the last assistant message
/// only. Refusing the rest keeps a resume to one digest of the history (each flagged message
/// costs one: thousands would make a request quadratic) and leaves no earlier call, nor one
/// sharing an id with a call elsewhere, to be resumed.
fn check_flag_placement(history: &[Message]) -> Result<(), RunError> {
    let last_assistant = history.iter().rposition(|m| m.is_role("assistant"));
    let misplaced = history.iter().enumerate().find(|(i, m)| {
        Some(*i) != last_assistant
            && m.tool_calls()
                .iter()
                .any(|c| c.pending_approval == Some(true) || c.pending_frontend == Some(true))
    });
    match misplaced {
        Some((i, _)) => Err(RunError::bad_input(format!(
            "conversation_history[{i}] has a tool call flagged pending_approval or \
             pending_frontend: only the last assistant message, the one the run paused on, \
             may have pending calls"
        ))),
        None => Ok(()),
    }
}

/// LLM calls since the last user message: one per assistant message.
fn steps_of_last_turn(messages: &[Message]) -> u32 {
    let start = messages
        .iter()
        .rposition(|m| m.is_role("user"))
        .map_or(0, |i| i + 1);
    messages[start..]
        .iter()
        .filter(|m| m.is_role("assistant"))
        .count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ToolCall;
    use serde_json::json;

    #[test]
    fn a_token_moved_into_another_history_is_named() {
        let s = ApprovalSigner::new(Some("k"), 3600);
        let call = ToolCall::new("c".into(), "bash".into(), r#"{"command":"rm x"}"#.into());
        let mut h = vec![
            Message::system("prompt"),
            Message::user(json!("why?")),
            Message::assistant(None, None, vec![call]),
        ];
        let token = s.sign(
            "c",
            "bash",
            r#"{"command":"rm x"}"#,
            &conversation_digest(&h),
        );
        let call = &mut h[2].tool_calls.as_mut().unwrap()[0];
        call.pending_approval = Some(true);
        call.approval_token = Some(token);
        let (state, refusals) = state_from_history(&s, h.clone()).unwrap();
        assert_eq!(state.pending.len(), 1);
        assert!(refusals.is_empty());
        h[1] = Message::user(json!("something else entirely"));
        let refused = state_from_history(&s, h).unwrap_err();
        assert!(refused.message.contains("different conversation"));
    }
}
