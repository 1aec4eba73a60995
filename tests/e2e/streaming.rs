//! SSE transport: early headers, keep-alive comments, exact framing and the terminal event.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_with};
use fake_llm::Step;

const KEEPALIVE: &str = ": keep-alive";

fn ask() -> Value {
    json!({"ask": "Is the cluster healthy?", "stream": true})
}

/// The whole raw body of a streaming chat (status 200, text/event-stream).
async fn raw_stream(app: &TestApp) -> String {
    let resp = app.post_chat(&ask()).await;
    assert_eq!(resp.status(), 200);
    let bytes = tokio::time::timeout(Duration::from_secs(10), resp.bytes())
        .await
        .expect("stream ended in time")
        .expect("body");
    String::from_utf8(bytes.to_vec()).expect("UTF-8 body")
}

/// Splits a raw SSE body into frames, asserting each is either a keep-alive comment or exactly
/// `event: NAME\ndata: ONE-LINE-JSON-OBJECT\n\n`. Returns the events (keep-alives skipped) and
/// the number of keep-alive comments.
fn parse_frames(raw: &str) -> (Vec<(String, Value)>, usize) {
    assert!(raw.ends_with("\n\n"), "body ends mid-frame: {raw:?}");
    let mut events = Vec::new();
    let mut keepalives = 0;
    for frame in raw.strip_suffix("\n\n").unwrap().split("\n\n") {
        if frame == KEEPALIVE {
            keepalives += 1;
            continue;
        }
        let lines: Vec<&str> = frame.split('\n').collect();
        assert_eq!(lines.len(), 2, "not `event:` + `data:` lines: {frame:?}");
        let name = lines[0]
            .strip_prefix("event: ")
            .unwrap_or_else(|| panic!("no `event: ` line: {frame:?}"));
        assert!(!name.is_empty() && !name.contains(' '), "{frame:?}");
        let data = lines[1]
            .strip_prefix("data: ")
            .unwrap_or_else(|| panic!("no `data: ` line: {frame:?}"));
        let data: Value = serde_json::from_str(data)
            .unwrap_or_else(|e| panic!("data is not JSON ({e}): {frame:?}"));
        assert!(data.is_object(), "{frame:?}");
        events.push((name.to_string(), data));
    }
    (events, keepalives)
}

fn is_terminal(name: &str) -> bool {
    matches!(name, "ai_answer_end" | "error" | "approval_required")
}

/// Exactly one terminal event, and it is the last frame.
fn assert_one_terminal_at_end(events: &[(String, Value)], raw: &str) {
    let terminals: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, (name, _))| is_terminal(name))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(terminals, [events.len() - 1], "{raw}");
}

#[tokio::test]
async fn headers_are_flushed_before_the_llm_answers() {
    let app = spawn_app_with("[llm]\nfirst_byte_timeout_secs = 10.0\n").await;
    app.llm.push(Step::HangBeforeHeaders);
    let resp = tokio::time::timeout(Duration::from_secs(2), app.post_chat(&ask()))
        .await
        .expect("response headers within 2 s while the LLM is silent");
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().unwrap();
    assert!(ct.starts_with("text/event-stream"), "{ct}");
    // The LLM really has not answered: it got the request and is still hanging.
    assert!(app.llm.wait_for_requests(1, Duration::from_secs(2)).await);
    assert_eq!(app.llm.cancellations(), 0);
    drop(resp);
}

#[tokio::test]
async fn keepalive_comments_fill_silence_and_the_stream_still_ends_cleanly() {
    let app = spawn_app_with("[server]\nkeepalive_interval_secs = 0.2\n").await;
    app.llm.push(Step::Slow {
        content: "All nodes are ready.".into(),
        chunks: 3,
        interval: Duration::from_millis(400),
    });
    let raw = raw_stream(&app).await;
    let (events, keepalives) = parse_frames(&raw);
    assert!(keepalives >= 1, "no keep-alive comment in {raw:?}");
    assert!(raw.contains(": keep-alive\n\n"));
    assert_one_terminal_at_end(&events, &raw);
    let (name, data) = events.last().unwrap();
    assert_eq!(name, "ai_answer_end");
    assert_eq!(data["analysis"], "All nodes are ready.");
    assert!(
        raw.ends_with("}\n\n"),
        "last frame is the answer, not a comment"
    );
}

#[tokio::test]
async fn keepalive_zero_disables_comments() {
    let app = spawn_app_with("[server]\nkeepalive_interval_secs = 0\n").await;
    app.llm.push(Step::Slow {
        content: "All nodes are ready.".into(),
        chunks: 3,
        interval: Duration::from_millis(400),
    });
    let raw = raw_stream(&app).await;
    assert!(!raw.contains("keep-alive"), "{raw:?}");
    assert!(!raw.contains("\n:") && !raw.starts_with(':'), "{raw:?}");
    let (events, keepalives) = parse_frames(&raw);
    assert_eq!(keepalives, 0);
    assert_one_terminal_at_end(&events, &raw);
    assert_eq!(events.last().unwrap().0, "ai_answer_end");
}

#[tokio::test]
async fn every_stream_ends_with_exactly_one_terminal_event() {
    let app = spawn_app_with("[agent]\nmax_steps = 2\n[llm]\nretry_max_attempts = 1\n").await;
    let todos = json!({"todos": [{"id": "1", "content": "Check pods", "status": "pending"}]});
    let scenarios: Vec<(&str, Vec<Step>, &str)> = vec![
        (
            "plain answer",
            vec![Step::text("Healthy.")],
            "ai_answer_end",
        ),
        (
            "reasoning then answer",
            vec![Step::text_with_reasoning("Let me think.", "Healthy.")],
            "ai_answer_end",
        ),
        (
            "tool call then answer",
            vec![
                Step::tool("call_1", "TodoWrite", todos.clone()),
                Step::text("Planned."),
            ],
            "ai_answer_end",
        ),
        (
            "LLM error",
            vec![Step::error(500, "upstream exploded")],
            "error",
        ),
        (
            "stream cut",
            vec![Step::CutMidStream {
                content: "Half an".into(),
            }],
            "error",
        ),
        (
            "step budget",
            vec![
                Step::tool("call_1", "TodoWrite", todos.clone()),
                Step::tool("call_2", "TodoWrite", todos.clone()),
            ],
            "error",
        ),
    ];
    for (what, steps, terminal) in scenarios {
        for step in steps {
            app.llm.push(step);
        }
        let raw = raw_stream(&app).await;
        let (events, keepalives) = parse_frames(&raw);
        assert_eq!(keepalives, 0, "{what}: default interval is 15 s: {raw}");
        assert!(!events.is_empty(), "{what}: empty stream");
        assert_one_terminal_at_end(&events, &raw);
        let (name, data) = events.last().unwrap();
        assert_eq!(name, terminal, "{what}: {raw}");
        if name == "error" {
            assert_eq!(data["success"], false, "{what}: {raw}");
            assert!(data["error_code"].is_i64(), "{what}: {raw}");
            assert!(data["description"].is_string(), "{what}: {raw}");
            assert!(data["msg"].is_string(), "{what}: {raw}");
        } else {
            assert!(data["analysis"].is_string(), "{what}: {raw}");
        }
        assert_eq!(app.llm.remaining(), 0, "{what}: script fully consumed");
    }
}
