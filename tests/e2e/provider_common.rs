//! What the native-provider tests (Anthropic, Gemini, Bedrock) share: reading the fake's
//! recorded requests and the stream's last event, the ids a paused history waits on, and the
//! check that a streamed turn ended with the expected answer.

use fake_llm::Step;
use serde_json::{Value, json};

use crate::helpers::{Event, TestApp, names};

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
