//! `stream_deltas`: the assistant's text as the LLM writes it, in `ai_answer_delta` events.

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

use crate::helpers::{Event, names, spawn_app, spawn_app_with};
use fake_llm::{Step, ToolCall};

/// The joined `ai_answer_delta` texts between two non-delta events, one entry per run.
fn delta_runs(events: &[Event]) -> Vec<String> {
    let mut runs = Vec::new();
    let mut current: Option<String> = None;
    for e in events {
        if e.name == "ai_answer_delta" {
            let piece = e.data["content"].as_str().expect("content is a string");
            assert!(!piece.is_empty(), "empty delta");
            current.get_or_insert_with(String::new).push_str(piece);
        } else if let Some(run) = current.take() {
            runs.push(run);
        }
    }
    runs.extend(current);
    runs
}

#[tokio::test]
async fn text_arrives_before_the_llm_has_finished() {
    // The LLM sends its first words and then nothing: only a delta can show them. The idle
    // timeout is longer than the wait, so an error ending the call cannot flush them instead.
    let app = spawn_app_with("[llm]\nidle_timeout_secs = 60.0\n").await;
    app.llm.push(Step::HangAfterFirstChunk {
        first: "Checking the pods".into(),
    });
    let resp = app
        .post_chat(&json!({"ask": "Why?", "stream": true, "stream_deltas": true}))
        .await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let mut seen = String::new();
    let found = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk.expect("body chunk")));
            if seen.contains("event: ai_answer_delta\ndata: {\"content\":\"Checking the pods\"}") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        found,
        Ok(true),
        "no delta while the LLM is mid-answer: {seen:?}"
    );
    assert!(!seen.contains("event: error"), "{seen:?}");
    // Hanging up cancels the LLM call, as for any stream.
    drop(body);
    assert!(
        app.llm
            .wait_for_cancellations(1, Duration::from_secs(5))
            .await
    );
}

#[tokio::test]
async fn deltas_join_to_each_llm_calls_text_and_precede_its_events() {
    let app = spawn_app().await;
    app.llm.push(Step::ToolCalls {
        content: Some("Let me look at the todo list first.".into()),
        calls: vec![ToolCall {
            id: "t1".into(),
            name: "TodoWrite".into(),
            arguments:
                json!({"todos": [{"id": "1", "content": "check pods", "status": "pending"}]})
                    .to_string(),
        }],
        usage: None,
    });
    app.llm
        .push(Step::text("All pods are running; nothing to fix."));
    let events = app
        .chat_sse(&json!({"ask": "Are the pods fine?", "stream_deltas": true}))
        .await;
    let order = names(&events);
    assert_eq!(
        delta_runs(&events),
        [
            "Let me look at the todo list first.",
            "All pods are running; nothing to fix."
        ],
        "{order:?}"
    );
    // Each LLM call's text streams first, then its usual events follow unchanged.
    let first_delta = order.iter().position(|n| *n == "ai_answer_delta").unwrap();
    let message = order.iter().position(|n| *n == "ai_message").unwrap();
    let tool_start = order
        .iter()
        .position(|n| *n == "start_tool_calling")
        .unwrap();
    let last_delta = order.iter().rposition(|n| *n == "ai_answer_delta").unwrap();
    assert!(first_delta < message && message < tool_start && tool_start < last_delta);
    assert_eq!(order.last(), Some(&"ai_answer_end"));
    let end = events.last().unwrap();
    assert_eq!(
        end.data["analysis"],
        "All pods are running; nothing to fix."
    );
    let ai_message = &events[message];
    assert_eq!(
        ai_message.data["content"],
        "Let me look at the todo list first."
    );
}

#[tokio::test]
async fn without_the_option_no_delta_is_sent() {
    let app = spawn_app().await;
    app.llm
        .push(Step::text("Everything is fine in the cluster."));
    let events = app.chat_sse(&json!({"ask": "Status?"})).await;
    assert_eq!(names(&events), ["token_count", "ai_answer_end"]);
}

#[tokio::test]
async fn a_json_answer_ignores_the_option() {
    let app = spawn_app().await;
    app.llm
        .push(Step::text("Everything is fine in the cluster."));
    let (status, body) = app
        .chat_json(&json!({"ask": "Status?", "stream": false, "stream_deltas": true}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Everything is fine in the cluster.");
}

#[tokio::test]
async fn an_answer_cut_off_mid_stream_ends_in_an_error_after_its_deltas() {
    let app = spawn_app().await;
    app.llm.push(Step::CutMidStream {
        content: "The deployment is".into(),
    });
    let events = app
        .chat_sse(&json!({"ask": "Deployment?", "stream_deltas": true}))
        .await;
    assert_eq!(delta_runs(&events), ["The deployment is"]);
    assert_eq!(
        names(&events).last(),
        Some(&"error"),
        "{:?}",
        names(&events)
    );
}
