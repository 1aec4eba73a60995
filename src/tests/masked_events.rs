//! Masking is done once, where an event is made: every kind of `AgentEvent`, generated with a
//! secret planted in each of its strings (the server's, the conversation's, a credential
//! issued at run time; text deltas also split across two pieces), goes through a run's
//! emitter, and no consumer finds one — the stored form (the conversation log, its search,
//! replay and forks), a webhook's event batch, and `/api/chat`'s HolmesGPT frames with the
//! history their terminal frames carry.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::agent::{
    AgentEvent, Answer, CompactionReport, CompactionStarted, PendingCall, Run, RunError,
    RunErrorKind, RunMasker, RunState, SecretMasker, StopReason, UsageReport, Waiting,
};
use crate::holmes::{ApprovalSigner, ChatRun};
use crate::secrets::IssuedSecrets;
use crate::store::StoredEvent;
use crate::tools::{ToolOutcome, ToolOutput, ToolStatus};
use crate::wire::content::Content;
use crate::wire::events::ModelFallback;
use crate::wire::response::{ResponseFormatReport, Truncation, Usage};
use crate::wire::{Message, ToolCall};

/// Upper-case letters and digits at both ends: no occurrence can form across the edge of a
/// `<secret-hidden>` put in the text.
const SERVER: &str = "SRVKEY7781QZ";
const OWN: &str = "CONVPW4242XY";
const ISSUED: &str = "ISSUEDTOK5150RT";

fn masker() -> RunMasker {
    let issued = IssuedSecrets::default();
    issued.remember(ISSUED);
    RunMasker::new(
        Arc::new(SecretMasker::new([SERVER.to_owned()]).with_issued(issued)),
        SecretMasker::new([OWN.to_owned()]),
    )
}

fn leaked(text: &str) -> Option<&'static str> {
    [SERVER, OWN, ISSUED].into_iter().find(|s| text.contains(s))
}

/// Any text (quotes, newlines, markup, non-ASCII) with one of the secrets inside.
fn planted() -> impl Strategy<Value = String> {
    let around = || "[a-zA-Z0-9 \n\"\\\\<>{}:,é😀-]{0,10}";
    (around(), 0..3usize, around()).prop_map(|(before, which, after)| {
        format!("{before}{}{after}", [SERVER, OWN, ISSUED][which])
    })
}

fn value() -> impl Strategy<Value = Value> {
    (planted(), planted(), planted(), planted())
        .prop_map(|(key, v, item, deep)| json!({key: v, "list": [item, 1, null, {"deep": deep}]}))
}

fn tool_call() -> impl Strategy<Value = ToolCall> {
    (
        planted(),
        planted(),
        planted(),
        planted(),
        planted(),
        value(),
    )
        .prop_map(|(id, kind, name, arguments, token, extra)| {
            let mut call = ToolCall::new(id, name, arguments);
            call.kind = kind;
            call.approval_token = Some(token);
            call.extra = extra.as_object().cloned().unwrap_or_default();
            call
        })
}

fn content() -> impl Strategy<Value = Content> {
    prop_oneof![
        Just(Content::Absent),
        planted().prop_map(Content::text),
        planted().prop_map(|s| Content::Shared(Arc::from(s))),
        value().prop_map(|v| Content::Json(json!([{"type": "text", "text": v}]))),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    (
        planted(),
        content(),
        prop::collection::vec(tool_call(), 0..3),
        planted(),
        planted(),
        planted(),
        value(),
    )
        .prop_map(|(role, content, calls, call_id, name, reasoning, extra)| {
            let mut m = Message::assistant(None, None, calls);
            m.role = role;
            m.content = content;
            m.tool_call_id = Some(call_id);
            m.name = Some(name);
            m.reasoning_content = Some(reasoning);
            m.extra = extra.as_object().cloned().unwrap_or_default();
            m
        })
}

fn usage() -> impl Strategy<Value = UsageReport> {
    (planted(), planted()).prop_map(|(tool_call_id, tool_name)| UsageReport {
        truncations: vec![Truncation {
            tool_call_id,
            start_index: 0,
            end_index: 3,
            tool_name,
            original_token_count: 9,
        }],
        ..UsageReport::default()
    })
}

fn fallback() -> impl Strategy<Value = ModelFallback> {
    (planted(), planted(), planted()).prop_map(|(requested_model, model, reason)| ModelFallback {
        requested_model,
        model,
        reason,
    })
}

fn outcome() -> impl Strategy<Value = ToolOutcome> {
    (
        (planted(), planted(), planted(), planted()),
        (value(), planted(), planted(), planted(), planted()),
    )
        .prop_map(
            |(
                (call_id, tool_name, toolset, description),
                (params, data, error, invocation, content),
            )| {
                ToolOutcome {
                    call_id,
                    tool_name,
                    toolset: Some(toolset),
                    description,
                    params,
                    output: ToolOutput {
                        status: ToolStatus::ApprovalRequired,
                        data,
                        error: Some(error),
                        return_code: Some(1),
                        invocation: Some(invocation),
                    },
                    elapsed: Some(Duration::from_millis(5)),
                    content,
                }
            },
        )
}

fn pending() -> impl Strategy<Value = PendingCall> {
    (tool_call(), planted(), value(), any::<bool>()).prop_map(|(call, description, v, approval)| {
        PendingCall {
            message_index: 0,
            call,
            waits_for: if approval {
                Waiting::Approval {
                    description,
                    params: v,
                }
            } else {
                Waiting::Frontend { arguments: v }
            },
        }
    })
}

/// Events that do not end a run; a delta may come as two pieces that split its secret.
fn events() -> impl Strategy<Value = Vec<AgentEvent>> {
    prop_oneof![
        planted().prop_map(|t| vec![AgentEvent::TextDelta(t)]),
        (planted(), 1..11usize).prop_map(|(t, at)| {
            let at = t
                .find(SERVER)
                .or(t.find(OWN))
                .or(t.find(ISSUED))
                .unwrap_or(0)
                + at;
            let at = (0..=at.min(t.len()))
                .rev()
                .find(|&i| t.is_char_boundary(i))
                .unwrap_or(0);
            vec![
                AgentEvent::TextDelta(t[..at].to_owned()),
                AgentEvent::TextDelta(t[at..].to_owned()),
            ]
        }),
        (0..4usize, message()).prop_map(|(index, message)| vec![AgentEvent::MessageAdded {
            index,
            message: Box::new(message)
        }]),
        (0..4usize, message()).prop_map(|(index, message)| vec![AgentEvent::MessageReplaced {
            index,
            message: Box::new(message)
        }]),
        (planted(), planted(), usage()).prop_map(|(c, r, u)| vec![AgentEvent::Thought {
            content: Some(c),
            reasoning: Some(r),
            usage: Box::new(u)
        }]),
        planted().prop_map(|t| vec![AgentEvent::Notice(t)]),
        fallback().prop_map(|f| vec![AgentEvent::ModelFallback(f)]),
        (planted(), planted())
            .prop_map(|(call_id, tool_name)| vec![AgentEvent::ToolStarted { call_id, tool_name }]),
        outcome().prop_map(|o| vec![AgentEvent::ToolFinished(Box::new(o))]),
        usage().prop_map(|u| vec![AgentEvent::Usage(Box::new(u))]),
        Just(vec![AgentEvent::CompactionStarted(CompactionStarted {
            initial_tokens: 10,
            num_messages: 2,
            context_window: 100,
            threshold_pct: 90,
        })]),
        (planted(), prop::collection::vec(message(), 0..3)).prop_map(|(summary, messages)| {
            vec![AgentEvent::Compacted(Box::new(CompactionReport {
                summary,
                messages,
                initial_tokens: 10,
                compacted_tokens: 5,
                num_messages_before: 4,
                context_window: 100,
                threshold_pct: 90,
                summarization_requests: 1,
                usage: Usage::default(),
                cost: 0.0,
            }))]
        }),
    ]
}

/// Every event that ends a run.
fn terminal() -> impl Strategy<Value = AgentEvent> {
    prop_oneof![
        prop::collection::vec(pending(), 1..3).prop_map(|pending| AgentEvent::Paused { pending }),
        (
            planted(),
            planted(),
            usage(),
            prop::collection::vec(fallback(), 0..2)
        )
            .prop_map(
                |(text, finish_reason, usage, fallbacks)| AgentEvent::Finished(Box::new(Answer {
                    text,
                    finish_reason: Some(finish_reason),
                    format: Some(ResponseFormatReport {
                        valid: true,
                        repaired: false
                    }),
                    usage,
                    fallbacks,
                }))
            ),
        planted().prop_map(|m| AgentEvent::Failed(RunError::new(RunErrorKind::Provider, m))),
        Just(AgentEvent::Stopped(StopReason::Paused)),
        prop::collection::vec(planted(), 0..3)
            .prop_map(|cut| AgentEvent::Stopped(StopReason::Interrupted { cut })),
        planted().prop_map(|pattern| AgentEvent::Stopped(StopReason::Stuck { pattern })),
    ]
}

fn run(events: &[AgentEvent], history: &[Message]) -> Run {
    let state = RunState {
        messages: history.to_vec(),
        ..RunState::default()
    };
    Run::replaying(masker(), events.to_vec(), state)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn no_consumer_receives_a_secret(
        events in prop::collection::vec(events(), 0..8),
        end in terminal(),
        history in prop::collection::vec(message(), 0..3),
    ) {
        let mut all: Vec<AgentEvent> = events.into_iter().flatten().collect();
        all.push(end);

        // The stored form: what the log keeps, `events/search` and the stream replay, a fork
        // copies, and a webhook receiver gets in its event batches.
        let emitted: Vec<AgentEvent> = futures::executor::block_on(run(&all, &history).collect());
        let mut batch = Vec::new();
        for (id, event) in emitted.into_iter().enumerate() {
            let Some(stored) = crate::conversations::events::stored(event) else {
                continue;
            };
            let text = format!("{} {} {}", stored.kind, stored.source, stored.payload);
            prop_assert_eq!(leaked(&text), None, "stored: {}", text);
            batch.push(StoredEvent {
                id: id as u64 + 1,
                kind: stored.kind,
                source: stored.source,
                timestamp: stored.timestamp,
                payload: stored.payload,
            });
        }
        let body = serde_json::to_string(&batch).unwrap_or_default();
        prop_assert_eq!(leaked(&body), None, "webhook batch: {}", body);

        // `/api/chat`'s frames, the history of the terminal frame included.
        let signer = Arc::new(ApprovalSigner::new(Some("k"), 60));
        let chat = ChatRun::new(run(&all, &history), signer, Vec::new(), "request".into());
        let frames: Vec<_> = futures::executor::block_on(StreamExt::collect::<Vec<_>>(chat));
        prop_assert!(!frames.is_empty());
        for frame in frames {
            let mut data = Vec::new();
            prop_assert!(frame.write_data(&mut data).is_ok());
            let text = String::from_utf8_lossy(&data);
            prop_assert_eq!(leaked(&text), None, "{} frame: {}", frame.name(), text);
        }
    }
}
