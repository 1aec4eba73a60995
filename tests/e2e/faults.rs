//! Faults that must end in a well-formed error, never a hang, panic or half an answer; and
//! cancellation that reaches the LLM and the tools whenever the client goes away.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{names, spawn_app, spawn_app_with};
use fake_llm::Step;

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> String {
    format!(
        "data: {}\n\n",
        json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    )
}

#[tokio::test]
async fn invalid_utf8_in_the_stream_is_an_error() {
    let app = spawn_app().await;
    let mut body = chunk(json!({"content": "ok "}), None).into_bytes();
    body.extend_from_slice(b"data: {\"choices\":[{\"delta\":{\"content\":\"\xff\xfe\"}}]}\n\n");
    app.llm.push(Step::Raw { body: body.into() });
    let events = app.chat_sse(&json!({"ask": "q"})).await;
    assert_eq!(names(&events), ["error"]);
}

#[tokio::test]
async fn connection_refused_is_a_clear_error() {
    let app = spawn_app_with(
        "[models.fake]\napi_base = \"http://127.0.0.1:9/v1\"\n[llm]\nretry_max_attempts = 2\n",
    )
    .await;
    let events = app.chat_sse(&json!({"ask": "q"})).await;
    assert_eq!(names(&events), ["error"]);
    assert!(
        events[0].data["description"]
            .as_str()
            .unwrap()
            .contains("cannot reach the LLM"),
        "{}",
        events[0].data
    );
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 500, "{body}");
}

#[tokio::test]
async fn rate_limits_without_retry_after_use_backoff() {
    let app = spawn_app().await;
    app.llm.push(Step::Error {
        status: 429,
        message: "slow down".into(),
        retry_after: None,
    });
    app.llm.push(Step::Error {
        status: 503,
        message: "overloaded".into(),
        retry_after: None,
    });
    app.llm.push(Step::text("finally"));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(app.llm.request_count(), 3);
}

#[tokio::test]
async fn tool_call_arguments_that_never_close_are_a_tool_error() {
    let app = spawn_app().await;
    let mut body = chunk(
        json!({"tool_calls": [{"index": 0, "id": "t", "type": "function", "function": {"name": "TodoWrite", "arguments": ""}}]}),
        None,
    );
    body.push_str(&chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"todos\": [{\"id\": \"1\""}}]}), None));
    body.push_str(&chunk(json!({}), Some("tool_calls")));
    body.push_str("data: [DONE]\n\n");
    app.llm.push(Step::Raw { body: body.into() });
    app.llm.push(Step::text("recovered"));
    let events = app.chat_sse(&json!({"ask": "q"})).await;
    let result = events
        .iter()
        .find(|e| e.name == "tool_calling_result")
        .unwrap();
    assert_eq!(result.data["result"]["status"], "error");
    assert!(
        result.data["result"]["error"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
    assert_eq!(events.last().unwrap().data["analysis"], "recovered");
}

#[tokio::test]
async fn an_endless_answer_is_cut_at_the_cap() {
    // A 4096-token window: answers are capped near 2 × 2048 tokens.
    let app = spawn_app_with("[models.fake]\ncustom_args = { max_context_size = 4096 }\n[toolsets.bash]\nenabled = false\n[toolsets.internet]\nenabled = false\n").await;
    let piece = chunk(
        json!({"content": "again and again and again and again "}),
        None,
    );
    app.llm.push(Step::Raw {
        body: piece.repeat(3000).into(),
    });
    let events = app.chat_sse(&json!({"ask": "q"})).await;
    assert_eq!(names(&events), ["error"]);
    assert!(
        events[0].data["description"]
            .as_str()
            .unwrap()
            .contains("per-answer cap")
    );
}

fn running(pattern: &str) -> bool {
    let out = std::process::Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .expect("pgrep");
    !out.stdout.is_empty()
}

#[tokio::test]
async fn disconnect_during_a_tool_run_kills_the_tool() {
    let app = spawn_app_with(
        "[toolsets.bash]
allow = [\"sleep\"]\n",
    )
    .await;
    // A unique duration makes the process easy to find.
    let secs = format!("7.{}", std::process::id() % 1000 + 100);
    let command = format!("sleep {secs} | cat");
    app.llm
        .push(Step::tool("slow", "bash", json!({"command": command})));
    let resp = app.post_chat(&json!({"ask": "q", "stream": true})).await;
    let mut started = false;
    for _ in 0..50 {
        if running(&format!("sleep {secs}")) {
            started = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(started, "the tool never started");
    drop(resp);
    let mut gone = false;
    for _ in 0..40 {
        if !running(&format!("sleep {secs}")) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the tool outlived the client");
    assert_eq!(
        app.llm.request_count(),
        1,
        "no second LLM call for a client that left"
    );
}

#[tokio::test]
async fn disconnect_during_a_retry_backoff_stops_retrying() {
    let app =
        spawn_app_with("[llm]\nretry_base_delay_ms = 1000\nretry_max_delay_ms = 1000\n").await;
    app.llm.push(Step::Error {
        status: 503,
        message: "busy".into(),
        retry_after: Some("1".into()),
    });
    app.llm.push(Step::text("too late"));
    let resp = app.post_chat(&json!({"ask": "q", "stream": true})).await;
    assert!(app.llm.wait_for_requests(1, Duration::from_secs(5)).await);
    drop(resp);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        app.llm.request_count(),
        1,
        "a retry was sent for a client that left"
    );
}

#[tokio::test]
async fn disconnects_before_the_first_byte_and_mid_stream_cancel_the_llm_call() {
    let app = spawn_app().await;
    app.llm.push(Step::HangBeforeHeaders);
    let resp = app.post_chat(&json!({"ask": "q", "stream": true})).await;
    assert!(app.llm.wait_for_requests(1, Duration::from_secs(5)).await);
    drop(resp);
    assert!(
        app.llm
            .wait_for_cancellations(1, Duration::from_secs(5))
            .await
    );
    app.llm.push(Step::Slow {
        content: "x y z".into(),
        chunks: 20,
        interval: Duration::from_millis(100),
    });
    let resp = app.post_chat(&json!({"ask": "q", "stream": true})).await;
    assert!(app.llm.wait_for_requests(2, Duration::from_secs(5)).await);
    drop(resp);
    assert!(
        app.llm
            .wait_for_cancellations(2, Duration::from_secs(5))
            .await
    );
}
