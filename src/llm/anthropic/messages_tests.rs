use serde_json::json;

use super::*;
use crate::wire::ToolCall;

fn call(id: &str) -> ToolCall {
    ToolCall::new(id.into(), "bash".into(), r#"{"command":"ls"}"#.into())
}

#[test]
fn system_roles_and_tool_blocks() {
    let history = vec![
        Message::system("You are triage."),
        Message::user(json!("why is it down?")),
        Message::assistant(Some("Looking.".into()), None, vec![call("a"), call("b")]),
        Message::tool("a", "bash", "pods".into()),
        Message::tool("b", "bash", "Error: denied".into()),
        Message::user(json!("and?")),
        Message::assistant(Some("Fine.".into()), None, Vec::new()),
        Message::user(json!("thanks")),
    ];
    let t = translate(&history, false);
    assert_eq!(t.system, "You are triage.");
    assert_eq!(
        t.messages,
        vec![
            json!({"role": "user", "content": [{"type": "text", "text": "why is it down?"}]}),
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "a", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "b", "name": "bash", "input": {"command": "ls"}},
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "pods"},
                {"type": "tool_result", "tool_use_id": "b", "content": "Error: denied", "is_error": true},
                {"type": "text", "text": "and?"},
            ]}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "Fine."}]}),
            json!({"role": "user", "content": [{"type": "text", "text": "thanks"}]}),
        ]
    );
}

#[test]
fn empty_text_is_dropped_and_same_roles_merge() {
    let history = vec![
        Message::user(json!("")),
        Message::user(json!("one")),
        Message::assistant(Some(String::new()), None, Vec::new()),
        Message::user(json!([{"type": "text", "text": " "}, {"type": "text", "text": "two"}])),
    ];
    let t = translate(&history, false);
    assert_eq!(
        t.messages,
        vec![json!({"role": "user", "content": [
            {"type": "text", "text": "one"}, {"type": "text", "text": "two"}]})]
    );
}

#[test]
fn missing_results_and_orphans_are_repaired() {
    let history = vec![
        Message::user(json!("go")),
        Message::assistant(None, None, vec![call("a")]),
        Message::tool("zzz", "bash", "stray".into()),
    ];
    let t = translate(&history, false);
    let results = t.messages[2]["content"].as_array().unwrap();
    assert_eq!(results[0]["tool_use_id"], "a");
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(results[1]["type"], "text");
    assert!(results[1]["text"].as_str().unwrap().contains("stray"));
}

#[test]
fn images_become_base64_or_url_sources() {
    let history = vec![Message::user(json!([
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
    ]))];
    let content = translate(&history, false).messages[0]["content"].clone();
    assert_eq!(
        content[1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}})
    );
    assert_eq!(
        content[2]["source"],
        json!({"type": "url", "url": "https://example.com/a.png"})
    );
}

#[test]
fn thinking_blocks_go_first_and_only_with_thinking_on() {
    let mut reply = Message::assistant(Some("ok".into()), None, vec![call("a")]);
    reply.set_thinking_blocks(vec![
        json!({"type": "thinking", "thinking": "hm", "signature": "sig", "extra": 1}),
        json!({"type": "redacted_thinking", "data": "xyz"}),
    ]);
    let history = vec![
        Message::user(json!("q")),
        reply,
        Message::tool("a", "bash", "out".into()),
    ];
    let on = translate(&history, true);
    let blocks = on.messages[1]["content"].as_array().unwrap();
    assert_eq!(
        blocks[0],
        json!({"type": "thinking", "thinking": "hm", "signature": "sig"})
    );
    assert_eq!(
        blocks[1],
        json!({"type": "redacted_thinking", "data": "xyz"})
    );
    assert_eq!(blocks[2]["type"], "text");
    let off = translate(&history, false);
    assert_eq!(off.messages[1]["content"][0]["type"], "text");
}

#[test]
fn a_history_starting_with_the_assistant_gets_a_user_turn_first() {
    let t = translate(
        &[Message::assistant(Some("hi".into()), None, Vec::new())],
        false,
    );
    assert_eq!(t.messages[0]["role"], "user");
    assert_eq!(t.messages[1]["role"], "assistant");
}

#[test]
fn the_cache_breakpoint_is_the_last_non_thinking_block() {
    let mut messages = vec![json!({"role": "user", "content": [
        {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})];
    mark_cache_breakpoint(&mut messages);
    assert_eq!(
        messages[0]["content"][1]["cache_control"]["type"],
        "ephemeral"
    );
    assert!(messages[0]["content"][0].get("cache_control").is_none());
}

#[test]
fn hostile_thinking_blocks_from_a_client_are_dropped_not_sent() {
    let mut reply = Message::assistant(Some("ok".into()), None, Vec::new());
    reply.extra.insert(
        crate::wire::message::THINKING_BLOCKS.into(),
        json!([{"type": "thinking", "thinking": 5, "signature": "s"},
               {"type": "thinking", "thinking": "no signature"},
               {"type": "tool_use", "id": "x", "name": "bash", "input": {}},
               "not an object"]),
    );
    let history = vec![Message::user(json!("q")), reply];
    let t = translate(&history, true);
    assert_eq!(
        t.messages[1]["content"],
        json!([{"type": "text", "text": "ok"}])
    );
}

#[test]
fn without_tool_definitions_tool_blocks_become_text() {
    let history = vec![
        Message::user(json!("go")),
        Message::assistant(None, None, vec![call("a")]),
        Message::tool("a", "bash", "pods".into()),
    ];
    let mut messages = translate(&history, false).messages;
    tool_blocks_as_text(&mut messages);
    let text = serde_json::to_string(&messages).unwrap();
    assert!(
        !text.contains("tool_use") && !text.contains("tool_result"),
        "{text}"
    );
    assert!(
        text.contains("Called tool bash (call a)") && text.contains("pods"),
        "{text}"
    );
}
