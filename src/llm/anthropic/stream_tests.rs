use super::*;
use crate::llm::assemble::Assembler;

fn feed(events: &[Value]) -> (AnswerStream, Assembler) {
    let mut stream = AnswerStream::default();
    let mut answer = Assembler::default();
    for event in events {
        for fragment in stream.push(&event.to_string()).unwrap() {
            answer.push(fragment).unwrap();
        }
    }
    (stream, answer)
}

#[test]
fn text_thinking_and_tool_use_with_cached_usage() {
    let (stream, answer) = feed(&[
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 10,
            "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Let me "}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "check."}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "signature_delta", "signature": "EqQB"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "ping"}),
        json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "text_delta", "text": "Checking."}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}}),
        json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": "{\"command\":"}}),
        json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": "\"ls\"}"}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "content_block_start", "index": 3,
            "content_block": {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}}}),
        json!({"type": "content_block_stop", "index": 3}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 42}}),
        json!({"type": "message_stop"}),
    ]);
    assert!(stream.is_complete());
    let done = answer.finish();
    assert_eq!(done.reasoning.as_deref(), Some("Let me check."));
    assert_eq!(done.content.as_deref(), Some("Checking."));
    assert_eq!(
        done.thinking_blocks,
        vec![json!({"type": "thinking", "thinking": "Let me check.", "signature": "EqQB"})]
    );
    assert_eq!(done.tool_calls.len(), 2);
    assert_eq!(done.tool_calls[0].id, "toolu_1");
    assert_eq!(done.tool_calls[0].function.arguments, r#"{"command":"ls"}"#);
    assert_eq!(done.tool_calls[1].function.arguments, "{}");
    assert_eq!(done.finish_reason.as_deref(), Some("tool_calls"));
    let usage = done.usage.unwrap();
    assert_eq!(usage.prompt_tokens, 130);
    assert_eq!(usage.cache_read_input_tokens, 100);
    assert_eq!(usage.cache_creation_input_tokens, 20);
    assert_eq!(usage.completion_tokens, 42);
    assert_eq!(usage.total_tokens, 172);
}

#[test]
fn an_error_event_is_the_providers_message() {
    let mut stream = AnswerStream::default();
    let err = stream
        .push(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#)
        .unwrap_err();
    assert!(
        matches!(err, LlmError::Upstream { status: 529, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("overloaded_error: Overloaded"));
}

#[test]
fn redacted_thinking_is_kept_and_unknown_events_skipped() {
    let (stream, answer) = feed(&[
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "redacted_thinking", "data": "opaque"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "some_future_event"}),
    ]);
    assert!(!stream.is_complete());
    assert_eq!(
        answer.finish().thinking_blocks,
        vec![json!({"type": "redacted_thinking", "data": "opaque"})]
    );
}

#[test]
fn a_delta_for_an_unknown_block_is_an_error() {
    let mut stream = AnswerStream::default();
    let delta = json!({"type": "content_block_delta", "index": 7,
        "delta": {"type": "text_delta", "text": "x"}});
    assert!(stream.push(&delta.to_string()).is_err());
}

#[test]
fn an_endless_signature_is_cut() {
    let mut stream = AnswerStream::default();
    let start = json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "thinking", "thinking": "", "signature": ""}});
    stream.push(&start.to_string()).unwrap();
    let piece = json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "signature_delta", "signature": "x".repeat(40_000)}})
    .to_string();
    stream.push(&piece).unwrap();
    assert!(matches!(stream.push(&piece), Err(LlmError::Oversized(_))));
}
