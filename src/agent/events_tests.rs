//! What a run sends its front door: the message-copy events, on for conversations, off for a
//! front door that renders the history from the final state.

use serde_json::json;

use super::tests::{ask, call, drain, harness};
use super::*;
use crate::llm::scripted::Reply;

#[tokio::test]
async fn a_run_without_history_events_sends_no_message_copies_and_ends_the_same() {
    let replies = || {
        vec![
            call("c1", json!({"text": "pods"})),
            Reply::Text("All fine.".into()),
        ]
    };
    let is_history = |e: &AgentEvent| {
        matches!(
            e,
            AgentEvent::MessageAdded { .. } | AgentEvent::MessageReplaced { .. }
        )
    };
    let with = harness("", replies());
    let (all, state) = drain(
        with.agent
            .start(&RunConfig::default(), RunState::default(), ask("why?"))
            .unwrap(),
    )
    .await;
    let without = harness("", replies());
    let (fewer, lean_state) = drain(
        without
            .agent
            .start(&RunConfig::default(), RunState::default(), ask("why?"))
            .unwrap()
            .without_history_events(),
    )
    .await;
    // user, assistant's call, tool result, answer (the system message is installed, not added)
    assert_eq!(all.iter().filter(|e| is_history(e)).count(), 4, "{all:?}");
    assert!(!fewer.iter().any(is_history), "{fewer:?}");
    let kinds = |events: &[AgentEvent]| -> Vec<std::mem::Discriminant<AgentEvent>> {
        events
            .iter()
            .filter(|e| !is_history(e))
            .map(std::mem::discriminant)
            .collect()
    };
    assert_eq!(kinds(&all), kinds(&fewer));
    // The user message carries the time of day; the rest must match whole.
    let roles =
        |s: &RunState| -> Vec<String> { s.messages.iter().map(|m| m.role.clone()).collect() };
    assert_eq!(roles(&state), roles(&lean_state));
    assert_eq!(state.messages[2..], lean_state.messages[2..]);
}

/// The model writes a conversation's secret into its calls: every event shows it masked, the
/// state keeps what the model wrote (the next LLM call and an approved call use it), and what
/// the state shows of a waiting call (`pending_actions`) is masked.
#[tokio::test]
async fn secrets_the_model_writes_are_masked_in_events_and_kept_in_the_state() {
    let secret = "sk-written-by-the-model-77";
    let h = harness(
        "",
        vec![
            call("c1", json!({"text": format!("plain {secret}")})),
            call(
                "c2",
                json!({"text": format!("guarded {secret}"), "guarded": true}),
            ),
        ],
    );
    let config = RunConfig {
        secrets: vec![secret.into()],
        approvals: ApprovalMode::Pause,
        can_pause: true,
        ..RunConfig::default()
    };
    let (events, state) = drain(
        h.agent
            .start(&config, RunState::default(), ask("go"))
            .unwrap(),
    )
    .await;
    let shown = format!("{events:?}");
    assert!(!shown.contains(secret), "{shown}");
    assert!(shown.contains("plain <secret-hidden>"), "{shown}");
    let Some(AgentEvent::Paused { pending }) = events.last() else {
        panic!("{events:?}")
    };
    assert!(
        pending[0]
            .call
            .function
            .arguments
            .contains("<secret-hidden>")
    );
    // The state: the calls as written, what waits shown masked.
    let calls: Vec<&str> = state
        .messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .map(|c| c.function.arguments.as_str())
        .collect();
    assert!(calls.iter().all(|a| a.contains(secret)), "{calls:?}");
    assert!(state.pending[0].call.function.arguments.contains(secret));
    let Waiting::Approval {
        description,
        params,
    } = &state.pending[0].waits_for
    else {
        panic!("{:?}", state.pending)
    };
    assert_eq!(description, "echo guarded <secret-hidden>");
    assert_eq!(params["text"], "guarded <secret-hidden>");
    // The model read its own first call as it wrote it.
    let seen = h.llm.seen();
    assert!(format!("{:?}", seen[1].messages).contains(secret));
}
