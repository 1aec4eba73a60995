//! What the native-provider tests (Anthropic, Gemini, Bedrock) share: reading the fake's
//! recorded requests and the stream's last event, the ids a paused history waits on, and the
//! check that a streamed turn ended with the expected answer.

use serde_json::Value;

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
