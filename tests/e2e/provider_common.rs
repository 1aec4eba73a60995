//! What the native-provider tests (Anthropic, Gemini, Bedrock) share: reading the fake's
//! recorded requests and the stream's last event, the ids a paused history waits on, the
//! check that a streamed turn ended with the expected answer, and the scenarios every
//! provider runs the same way (a plain answer, two tool rounds, an approval, a frontend tool,
//! a retried failure, a leaving client); each provider's test adds its wire's assertions.

use std::time::Duration;

use fake_llm::Step;
use serde_json::{Value, json};

use crate::helpers::{
    Event, TestApp, assert_leaving_cancels, eventually, names, tool_writable_dir,
};

pub fn last_event(events: &[Event]) -> &Value {
    &events.last().expect("events").data
}

/// The blocks (`content_key`) of entry `i` of the request list `list_key` of request `n`:
/// `("messages", "content")` for Anthropic and Bedrock, `("contents", "parts")` for Gemini.
pub fn request_blocks(
    app: &TestApp,
    n: usize,
    (list_key, content_key): (&str, &str),
    i: usize,
) -> Vec<Value> {
    app.llm.requests()[n][list_key][i][content_key]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The ids of the calls in a history waiting for a decision.
pub fn pending_ids(history: &Value) -> Vec<String> {
    history
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["pending_approval"] == true || c["pending_frontend"] == true)
        .filter_map(|c| c["id"].as_str().map(str::to_owned))
        .collect()
}

/// The stream ended with `ai_answer_end` carrying `analysis`.
pub fn assert_answered(events: &[Event], analysis: &str) {
    assert_eq!(names(events).last(), Some(&"ai_answer_end"), "{events:#?}");
    assert_eq!(last_event(events)["analysis"], analysis, "{events:#?}");
}

/// Config lines that make a long history overflow a small window, tools off.
pub const SMALL_WINDOW: &str = "custom_args = { max_context_size = 8000 }\n[toolsets.bash]\nenabled = false\n[toolsets.internet]\nenabled = false\n";

/// A history too long for `SMALL_WINDOW` is summarised (a request the provider's fake found
/// valid), then answered from the summary instead of the history.
pub async fn assert_compaction_summarises_then_answers(app: &TestApp) {
    let long = |tag: &str| format!("{tag} {}", "pod node disk memory error ".repeat(250));
    app.llm
        .push(Step::text("<summary>SUMMARY-MARKER</summary>"));
    app.llm.push(Step::text("Checkout waits on the database."));
    let history = json!([
        {"role": "user", "content": long("Why is checkout slow?")},
        {"role": "assistant", "content": long("Looking into it.")},
    ]);
    let events = app
        .chat_sse(&json!({"ask": "Any news?", "conversation_history": history}))
        .await;
    assert!(
        names(&events).contains(&"conversation_history_compacted"),
        "{:?}",
        names(&events)
    );
    assert_answered(&events, "Checkout waits on the database.");
    let requests = app.llm.requests();
    assert_eq!(requests.len(), 2);
    let answer_request = requests[1].to_string();
    assert!(answer_request.contains("SUMMARY-MARKER"));
    assert!(!answer_request.contains("Looking into it."));
}

/// One answer without streaming, then one streamed (`streamed` is its step): both answered.
/// Returns the JSON body of the first and the request that asked for it.
pub async fn assert_plain_answer_streamed_and_not(app: &TestApp, streamed: Step) -> (Value, Value) {
    app.llm.push(Step::text("The pod is OOMKilled."));
    let (status, body) = app
        .chat_json(&json!({"ask": "Why is my pod crashing?"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "The pod is OOMKilled.");
    assert_eq!(body["metadata"]["finish_reason"], "stop");
    let request = app.llm.requests()[0].clone();

    app.llm.push(streamed);
    let events = app.chat_sse(&json!({"ask": "again", "stream": true})).await;
    assert_answered(&events, "Streamed answer.");
    (body, request)
}

/// A TodoWrite call (`ids[0]`), then two bash calls in one turn, one that succeeds
/// (`echo one`, `ids[1]`) and one that fails (`ids[2]`), then the answer: three requests,
/// the third carrying both rounds for the provider's test to check.
pub async fn assert_two_tool_rounds_answered(app: &TestApp, ids: [&str; 3]) {
    app.llm
        .push(Step::tool(ids[0], "TodoWrite", json!({"todos": []})));
    app.llm.push(Step::tools(vec![
        (ids[1], "bash", json!({"command": "echo one"})),
        (
            ids[2],
            "bash",
            json!({"command": "definitely-not-a-command-xyz"}),
        ),
    ]));
    app.llm.push(Step::text("Both ran."));
    let events = app
        .chat_sse(&json!({"ask": "investigate", "stream": true}))
        .await;
    assert_answered(&events, "Both ran.");
    assert_eq!(app.llm.request_count(), 3);
}

/// A safe and a risky bash call in one turn, with approval on: the turn pauses with one call
/// waiting, which is approved in a stateless resume and runs. Returns the approved call's id.
pub async fn assert_approval_resumes_statelessly(app: &TestApp, purpose: &str) -> String {
    let dir = tool_writable_dir(purpose);
    let command = format!("touch {}/approved", dir.display());
    app.llm.push(Step::tools(vec![
        ("safe", "bash", json!({"command": "echo hello"})),
        ("risky", "bash", json!({"command": command})),
    ]));
    let events = app
        .chat_sse(&json!({"ask": "fix it", "enable_tool_approval": true}))
        .await;
    assert_eq!(names(&events).last(), Some(&"approval_required"));
    let history = last_event(&events)["conversation_history"].clone();
    let pending = pending_ids(&history);
    assert_eq!(pending.len(), 1, "{history:#}");
    app.llm.push(Step::text("Fixed."));
    let (status, body) = app
        .chat_json(&json!({"ask": "", "enable_tool_approval": true,
            "conversation_history": history,
            "tool_decisions": [{"tool_call_id": pending[0], "approved": true}]}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "Fixed.");
    assert!(dir.join("approved").exists());
    pending[0].clone()
}

/// The model calls the frontend tool `show_chart` (declared by `tools`) with `call_id`: the
/// turn pauses with the tool offered, and resumes with the browser's result, answered.
/// Returns the id the paused history waited on and the request that offered the tool.
pub async fn assert_frontend_tool_pauses_and_resumes(
    app: &TestApp,
    tools: &Value,
    call_id: &str,
) -> (String, Value) {
    app.llm
        .push(Step::tool(call_id, "show_chart", json!({"metric": "cpu"})));
    let events = app
        .chat_sse(&json!({"ask": "chart cpu", "frontend_tools": tools}))
        .await;
    assert_eq!(
        names(&events).last(),
        Some(&"approval_required"),
        "{events:#?}"
    );
    let offering = app.llm.requests().last().expect("a request").clone();
    let offered = offering["tools"].to_string() + &offering["toolConfig"].to_string();
    assert!(offered.contains("\"show_chart\""), "{offered}");
    let history = last_event(&events)["conversation_history"].clone();
    let id = pending_ids(&history)
        .pop()
        .expect("a pending frontend call");
    app.llm.push(Step::text("CPU peaked at 93%."));
    let events = app
        .chat_sse(&json!({"ask": "", "frontend_tools": tools, "conversation_history": history,
            "frontend_tool_results": [{"tool_call_id": id, "tool_name": "show_chart", "result": "peak 93%"}]}))
        .await;
    assert_answered(&events, "CPU peaked at 93%.");
    (id, offering)
}

/// The provider's stream fails (`kind`, `message`) before any output: the call is retried
/// once and answered.
pub async fn assert_failure_before_output_is_retried(app: &TestApp, kind: &str, message: &str) {
    let before = app.llm.request_count();
    app.llm.push(Step::FailMidStream {
        content: String::new(),
        kind: kind.into(),
        message: message.into(),
    });
    app.llm.push(Step::text("Recovered."));
    let events = app.chat_sse(&json!({"ask": "q", "stream": true})).await;
    assert_eq!(last_event(&events)["analysis"], "Recovered.", "{events:#?}");
    assert_eq!(app.llm.request_count(), before + 2);
}

/// A client that drops its streamed response mid-answer cancels the provider's call
/// (`provider` names it in the failure message).
pub async fn assert_a_leaving_client_cancels(app: &TestApp, provider: &str) {
    let before = app.llm.request_count();
    app.llm.push(Step::Paced {
        before: Duration::ZERO,
        between_chunks: Duration::from_millis(100),
        step: Box::new(Step::text(&"word ".repeat(100))),
    });
    let resp = app.post_chat(&json!({"ask": "q", "stream": true})).await;
    assert_eq!(resp.status(), 200);
    assert!(
        app.llm
            .wait_for_requests(before + 1, Duration::from_secs(5))
            .await
    );
    let streaming = || async { app.llm.in_flight() == 1 };
    eventually("the answer to stream", Duration::from_secs(5), streaming).await;
    assert_leaving_cancels(app, || drop(resp), provider).await;
}

/// A JSON-schema `response_format` whose first answer is not JSON: the answer is repaired
/// in a second call and reported valid. Returns the requests of both calls.
pub async fn assert_structured_output_repaired(app: &TestApp) -> Vec<Value> {
    let format = json!({"type": "json_schema", "json_schema": {"name": "Health", "schema": {
        "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}});
    app.llm.push(Step::text("not json"));
    app.llm.push(Step::text("{\"ok\": true}"));
    let (status, body) = app
        .chat_json(&json!({"ask": "healthy?", "response_format": format}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "{\"ok\": true}");
    assert_eq!(
        body["metadata"]["response_format"],
        json!({"valid": true, "repaired": true})
    );
    app.llm.requests()
}
