//! Runs that outlive a request: messages taken at the next step, pause after a step,
//! interrupt now, every call confirmed.

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

use super::tests::{ask, call, drain, harness, tool_results};
use super::*;
use crate::llm::scripted::Reply;

fn controlled(input: Input, control: &RunControl) -> Input {
    Input {
        control: Some(control.clone()),
        ..input
    }
}

#[tokio::test]
async fn an_interrupt_cuts_the_step_in_flight_and_leaves_a_valid_history() {
    let h = harness("", vec![call("w", json!({"text": "x", "wait": true}))]);
    let control = RunControl::default();
    let mut run = h
        .agent
        .start(
            &RunConfig::default(),
            RunState::default(),
            controlled(ask("go"), &control),
        )
        .unwrap();
    // Wait until the tool is running (its start is reported), then interrupt.
    loop {
        let event = tokio::time::timeout(Duration::from_secs(5), run.next())
            .await
            .unwrap();
        if matches!(event, Some(AgentEvent::ToolStarted { .. })) {
            break;
        }
    }
    control.interrupt();
    let (events, state) = drain(run).await;
    let Some(AgentEvent::Stopped(StopReason::Interrupted { cut })) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(cut, &["w".to_owned()]);
    let last = state.messages.last().unwrap();
    assert_eq!(last.tool_call_id.as_deref(), Some("w"));
    assert!(last.text().contains("interrupted"));
}

#[tokio::test]
async fn a_pause_stops_after_the_current_step_and_a_message_arrives_at_the_next() {
    let h = harness(
        "",
        vec![
            call("c1", json!({"text": "one", "wait": true})),
            Reply::Text("done".into()),
        ],
    );
    let control = RunControl::default();
    let mut run = h
        .agent
        .start(
            &RunConfig::default(),
            RunState::default(),
            controlled(ask("go"), &control),
        )
        .unwrap();
    loop {
        let event = run.next().await;
        if matches!(event, Some(AgentEvent::ToolStarted { .. })) {
            break;
        }
    }
    control.pause();
    h.gate.notify_one();
    let (events, state) = drain(run).await;
    // The step's result was kept; no further LLM call was made.
    assert_eq!(tool_results(&events), [("c1".to_owned(), "one".to_owned())]);
    assert!(matches!(
        events.last(),
        Some(AgentEvent::Stopped(StopReason::Paused))
    ));
    assert_eq!(h.llm.seen().len(), 1);

    // The next run takes a message sent meanwhile before its first LLM call.
    let control = RunControl::default();
    control.send(UserMessage {
        text: "also check the nodes".into(),
        images: Vec::new(),
    });
    let input = Input {
        control: Some(control),
        ..Input::default()
    };
    let (events, _) = drain(h.agent.start(&RunConfig::default(), state, input).unwrap()).await;
    assert!(matches!(events.last(), Some(AgentEvent::Finished(_))));
    let seen = h.llm.seen();
    assert!(
        seen[1]
            .messages
            .last()
            .unwrap()
            .text()
            .contains("also check the nodes")
    );
}

#[tokio::test]
async fn always_confirm_pauses_every_backend_call_before_it_runs() {
    let h = harness("", vec![call("c1", json!({"text": "plain"}))]);
    let config = RunConfig {
        approvals: ApprovalMode::Always,
        can_pause: true,
        ..RunConfig::default()
    };
    let (events, state) = drain(
        h.agent
            .start(&config, RunState::default(), ask("go"))
            .unwrap(),
    )
    .await;
    let Some(AgentEvent::Paused { pending }) = events.last() else {
        panic!("{events:?}")
    };
    assert!(pending[0].is_approval());
    assert!(
        matches!(&pending[0].waits_for, Waiting::Approval { description, .. } if description == "echo plain")
    );
    assert!(state.messages.iter().all(|m| !m.is_role("tool")));
}

#[tokio::test]
async fn a_runs_own_secrets_are_masked_in_what_it_reports() {
    let h = harness(
        "",
        vec![
            call("c1", json!({"text": "token=sk-run-secret-123"})),
            Reply::Text("ok".into()),
        ],
    );
    let config = RunConfig {
        secrets: vec!["sk-run-secret-123".into()],
        ..RunConfig::default()
    };
    let (events, state) = drain(
        h.agent
            .start(&config, RunState::default(), ask("go"))
            .unwrap(),
    )
    .await;
    assert_eq!(tool_results(&events)[0].1, "token=<secret-hidden>");
    assert!(
        state
            .messages
            .iter()
            .all(|m| !m.text().contains("sk-run-secret-123"))
    );
}
