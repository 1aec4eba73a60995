use serde_json::json;

use super::*;
use crate::wire::ToolCall;

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall::new(id.into(), name.into(), "{\"c\":1}".into())
}

#[test]
fn calls_and_results_pair_in_order_with_signatures_back_in_place() {
    let mut assistant = Message::assistant(
        None,
        None,
        vec![
            call("a", "bash"),
            call(&format!("{LOCAL_ID_PREFIX}1"), "todo"),
        ],
    );
    assistant.set_thinking_blocks(vec![
        json!({"type": SIGNATURE_BLOCK, "part": "call", "call": 0, "signature": "sig0"}),
    ]);
    let history = [
        Message::system("sys"),
        Message::user(json!("q")),
        assistant,
        // Out of order, plus one answering nothing.
        Message::tool(&format!("{LOCAL_ID_PREFIX}1"), "todo", "done".into()),
        Message::tool("a", "bash", "Error: failed".into()),
        Message::tool("zzz", "bash", "stray".into()),
    ];
    let t = translate(&history, true);
    assert_eq!(t.system, "sys");
    assert_eq!(t.contents.len(), 3);
    let model = &t.contents[1];
    assert_eq!(model["role"], "model");
    assert_eq!(model["parts"][0]["thoughtSignature"], "sig0");
    assert_eq!(model["parts"][0]["functionCall"]["id"], "a");
    assert!(model["parts"][1]["functionCall"].get("id").is_none());
    assert!(model["parts"][1].get("thoughtSignature").is_none());
    let answers = t.contents[2]["parts"].as_array().unwrap();
    assert_eq!(answers[0]["functionResponse"]["name"], "bash");
    assert_eq!(
        answers[0]["functionResponse"]["response"]["error"],
        "Error: failed"
    );
    assert_eq!(answers[1]["functionResponse"]["name"], "todo");
    assert!(answers[2]["text"].as_str().unwrap().contains("stray"));
}

#[test]
fn a_call_left_unanswered_gets_an_error_answer_and_roles_alternate() {
    let history = [
        Message::assistant(Some("hi".into()), None, vec![call("a", "bash")]),
        Message::user(json!("next question")),
    ];
    let t = translate(&history, true);
    let roles: Vec<&str> = t
        .contents
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "model", "user"]);
    let parts = t.contents[2]["parts"].as_array().unwrap();
    assert_eq!(parts[0]["functionResponse"]["name"], "bash");
    assert_eq!(parts[1]["text"], "next question");
}

#[test]
fn without_tools_calls_are_text_and_images_inline() {
    let history = [
        Message::user(json!([{"type": "text", "text": "see"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}])),
        Message::assistant(None, None, vec![call("a", "bash")]),
        Message::tool("a", "bash", "out".into()),
    ];
    let t = translate(&history, false);
    assert_eq!(
        t.contents[0]["parts"][1]["inlineData"]["mimeType"],
        "image/png"
    );
    let flat = serde_json::to_string(&t.contents).unwrap();
    assert!(!flat.contains("functionCall") && !flat.contains("functionResponse"));
    assert!(flat.contains("out"));
}

#[test]
fn cloud_storage_images_are_file_data_other_urls_are_named() {
    let history = [Message::user(json!([
        {"type": "image_url", "image_url": {"url": "gs://bucket/graphs/cpu.PNG"}},
        {"type": "image_url", "image_url": {"url": "gs://bucket/notes.txt"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cpu.png"}}
    ]))];
    let t = translate(&history, false);
    let parts = &t.contents[0]["parts"];
    assert_eq!(
        parts[0]["fileData"],
        json!({"mimeType": "image/png", "fileUri": "gs://bucket/graphs/cpu.PNG"})
    );
    assert_eq!(parts[1]["text"], "[Image: gs://bucket/notes.txt]");
    assert_eq!(parts[2]["text"], "[Image: https://example.com/cpu.png]");
}
