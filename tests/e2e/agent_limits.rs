//! Caps on what one request may make the agent hold or do: tool calls per answer, images, one
//! streamed LLM event, one answer's length, a history over the window, and the duplicate guard
//! across compaction.

use serde_json::{Value, json};

use crate::helpers::{names, spawn_app_with};
use fake_llm::Step;

fn todo(n: usize) -> Value {
    json!({"todos": [{"id": "1", "content": format!("task {n}"), "status": "pending"}]})
}

#[tokio::test]
async fn calls_beyond_the_per_answer_cap_get_an_error_result_and_never_run() {
    let app = spawn_app_with("[agent]\nmax_tool_calls_per_answer = 3\n").await;
    let calls: Vec<(String, Value)> = (0..5).map(|i| (format!("c{i}"), todo(i))).collect();
    app.llm.push(Step::tools(
        calls
            .iter()
            .map(|(id, args)| (id.as_str(), "TodoWrite", args.clone()))
            .collect(),
    ));
    app.llm.push(Step::text("done"));
    let events = app.chat_sse(&json!({"ask": "plan"})).await;
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e.name == "tool_calling_result")
        .map(|e| &e.data)
        .collect();
    assert_eq!(results.len(), 5);
    for r in &results {
        let id = r["tool_call_id"].as_str().unwrap();
        if ["c3", "c4"].contains(&id) {
            assert_eq!(r["result"]["status"], "error", "{r}");
            let error = r["result"]["error"].as_str().unwrap();
            assert!(
                error.contains("at most 3 tool calls")
                    && error.contains("agent.max_tool_calls_per_answer"),
                "{error}"
            );
        } else {
            assert_eq!(r["result"]["status"], "success", "{r}");
        }
    }
    // The history stays valid: every call id has its result, in order.
    let sent = app.llm_messages(1);
    let answered: Vec<&str> = sent
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(answered, ["c0", "c1", "c2", "c3", "c4"]);
    assert_eq!(names(&events).last(), Some(&"ai_answer_end"));
}

fn tiny_image() -> Value {
    json!("data:image/png;base64,iVBORw0KGgo=")
}

#[tokio::test]
async fn too_many_or_too_large_images_are_refused_with_413() {
    let app = spawn_app_with(
        "[models.fake]\nvision = true\n[agent]\nmax_images_per_request = 4\nmax_images_total = 6\nmax_image_bytes_total = 1000\n",
    )
    .await;
    let images: Vec<Value> = (0..5).map(|_| tiny_image()).collect();
    let (status, body) = app
        .chat_json(&json!({"ask": "look", "images": images}))
        .await;
    assert_eq!(status, 413, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("agent.max_images_per_request"),
        "{body}"
    );
    // Images already in the history count towards the total.
    let parts: Vec<Value> = (0..5)
        .map(|_| json!({"type": "image_url", "image_url": {"url": tiny_image()}}))
        .collect();
    let history =
        json!([{"role": "user", "content": parts}, {"role": "assistant", "content": "seen"}]);
    let (status, body) = app
        .chat_json(&json!({"ask": "again", "conversation_history": history, "images": [tiny_image(), tiny_image()]}))
        .await;
    assert_eq!(status, 413, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("7 in the conversation"),
        "{body}"
    );
    let big = format!("data:image/png;base64,{}", "A".repeat(2000));
    let (status, body) = app
        .chat_json(&json!({"ask": "look", "images": [big]}))
        .await;
    assert_eq!(status, 413, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("agent.max_image_bytes_total"),
        "{body}"
    );
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn an_llm_line_that_never_ends_fails_the_call_with_502() {
    // Megabytes arrive slowly in a debug build on a loaded machine: the idle timeout between
    // events must not end the call first.
    let app = spawn_app_with("[llm]\nidle_timeout_secs = 120.0\n").await;
    // 5 MiB of one event without a newline: over the 4 MiB cap.
    let mut body = b"data: {\"choices\":[{\"delta\":{\"content\":\"".to_vec();
    body.extend(std::iter::repeat_n(b'x', 5 * 1024 * 1024));
    app.llm.push(Step::Raw { body: body.into() });
    let (status, body) = app.chat_json(&json!({"ask": "hi"})).await;
    assert_eq!(status, 502, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("LLM response too large") && detail.contains("without ending"),
        "{detail}"
    );
    // Streaming: an error event naming the cause.
    let mut body = b"data: ".to_vec();
    body.extend(std::iter::repeat_n(b'y', 5 * 1024 * 1024));
    app.llm.push(Step::Raw { body: body.into() });
    let events = app.chat_sse(&json!({"ask": "hi"})).await;
    let last = events.last().unwrap();
    assert_eq!(last.name, "error");
    assert!(
        last.data["description"]
            .as_str()
            .unwrap()
            .contains("too large"),
        "{}",
        last.data
    );
}

/// About `n` tokens of common words.
fn words(n: usize) -> String {
    const WORDS: [&str; 5] = ["pod", "node", "disk", "memory", "error"];
    (0..n).map(|i| format!("{} ", WORDS[i % 5])).collect()
}

const SMALL_WINDOW: &str = "[models.fake]\ncustom_args = { max_context_size = 8000 }\n[toolsets.bash]\nenabled = false\n[toolsets.internet]\nenabled = false\n";

#[tokio::test]
async fn a_history_over_the_window_is_the_clients_error_413() {
    let app = spawn_app_with(&format!("{SMALL_WINDOW}[compaction]\nenabled = false\n")).await;
    let history =
        json!([{"role": "user", "content": words(7000)}, {"role": "assistant", "content": "ok"}]);
    let (status, body) = app
        .chat_json(&json!({"ask": "q", "conversation_history": history}))
        .await;
    assert_eq!(status, 413, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("needs") && detail.contains("tokens") && detail.contains("window is 8000"),
        "{detail}"
    );
    assert_eq!(app.llm.request_count(), 0);
}

const SUMMARY: &str = "<analysis>\nx\n</analysis>\n<summary>\n1. Planned the work.\n</summary>";

#[tokio::test]
async fn the_duplicate_guard_survives_compaction() {
    let app = spawn_app_with(SMALL_WINDOW).await;
    // A plan large enough that, once in the history, the next step compacts first.
    let big = json!({"todos": [{"id": "1", "content": words(2200), "status": "pending"}]});
    app.llm.push(Step::tool("first", "TodoWrite", big.clone()));
    app.llm.push(Step::text(SUMMARY));
    // The first repeat runs (its output could have changed) and returns the same output.
    app.llm.push(Step::tool("again", "TodoWrite", big.clone()));
    // The repeated call's own arguments bring the history over the threshold again.
    app.llm.push(Step::text(SUMMARY));
    app.llm.push(Step::tool("third", "TodoWrite", big.clone()));
    app.llm.push(Step::text(SUMMARY));
    app.llm.push(Step::text("done"));
    let events = app.chat_sse(&json!({"ask": "plan it"})).await;
    let n = names(&events);
    assert!(
        n.contains(&"conversation_history_compacted"),
        "{n:?} {:?}",
        events.last()
    );
    let again = events
        .iter()
        .find(|e| e.name == "tool_calling_result" && e.data["tool_call_id"] == "again")
        .unwrap();
    assert_eq!(again.data["result"]["status"], "success");
    let again = events
        .iter()
        .find(|e| e.name == "tool_calling_result" && e.data["tool_call_id"] == "third")
        .unwrap();
    // Not run again (on failure, print the status only: the data is kilobytes of plan).
    assert_eq!(again.data["result"]["status"], "error");
    assert!(
        again.data["result"]["error"]
            .as_str()
            .unwrap()
            .contains("identical call"),
        "{}",
        again.data
    );
    assert_eq!(n.last(), Some(&"ai_answer_end"), "{n:?}");
    assert_eq!(app.llm.request_count(), 7);
}

#[tokio::test]
async fn an_endless_answer_is_cut_at_the_cap() {
    // A 4096-token window: answers are capped near 2 × 2048 tokens.
    let app = spawn_app_with("[models.fake]\ncustom_args = { max_context_size = 4096 }\n[toolsets.bash]\nenabled = false\n[toolsets.internet]\nenabled = false\n").await;
    let piece = format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": "again and again and again and again "}, "finish_reason": null}]})
    );
    app.llm.push(Step::Raw {
        body: piece.repeat(3000).into(),
    });
    let events = app.chat_sse(&json!({"ask": "q"})).await;
    assert_eq!(names(&events), ["error"]);
    let description = events[0].data["description"].as_str().unwrap();
    assert!(description.contains("per-answer cap"), "{description}");
}
