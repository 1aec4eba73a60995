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
