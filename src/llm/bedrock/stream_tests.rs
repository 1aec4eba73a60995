use aws_smithy_types::event_stream::Header;

use super::*;

fn event(kind: &str, payload: Value) -> Message {
    Message::new(payload.to_string().into_bytes())
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String("event".into()),
        ))
        .add_header(Header::new(
            ":event-type",
            HeaderValue::String(kind.to_owned().into()),
        ))
}

#[test]
fn text_tools_reasoning_and_usage() {
    let mut s = AnswerStream::default();
    let mut out = Vec::new();
    for (kind, payload) in [
        ("messageStart", json!({"role": "assistant"})),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "hm"}}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "sig"}}}),
        ),
        ("contentBlockStop", json!({"contentBlockIndex": 0})),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"text": "hi"}}),
        ),
        (
            "contentBlockStart",
            json!({"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "t1", "name": "bash"}}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 2, "delta": {"toolUse": {"input": "{\"c\":"}}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 2, "delta": {"toolUse": {"input": "1}"}}}),
        ),
        ("contentBlockStop", json!({"contentBlockIndex": 2})),
        ("messageStop", json!({"stopReason": "tool_use"})),
        (
            "metadata",
            json!({"usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 45,
                                      "cacheReadInputTokens": 20, "cacheWriteInputTokens": 10}}),
        ),
    ] {
        out.extend(s.push(event(kind, payload)).unwrap());
    }
    assert!(s.is_done());
    out.extend(s.finish().unwrap());
    assert_eq!(out[0], Fragment::Reasoning("hm".into()));
    assert_eq!(
        out[1],
        Fragment::ThinkingBlock(json!({"type": "thinking", "thinking": "hm", "signature": "sig"}))
    );
    assert_eq!(out[2], Fragment::Text("hi".into()));
    let args: String = out
        .iter()
        .filter_map(|f| match f {
            Fragment::ToolCall(c) => c.arguments.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(args, "{\"c\":1}");
    let Some(Fragment::Usage(usage)) = out.iter().find(|f| matches!(f, Fragment::Usage(_))) else {
        panic!("no usage in {out:?}");
    };
    assert_eq!(
        (usage.prompt_tokens, usage.cache_read_input_tokens),
        (40, 20)
    );
    assert_eq!(out.last(), Some(&Fragment::Finish("tool_calls".into())));
}

#[test]
fn exceptions_are_classified() {
    let throttled = Message::new(br#"{"message":"slow down"}"#.to_vec())
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String("exception".into()),
        ))
        .add_header(Header::new(
            ":exception-type",
            HeaderValue::String("throttlingException".into()),
        ));
    let err = AnswerStream::default().push(throttled).unwrap_err();
    assert!(
        err.is_rate_limit() && err.to_string().contains("slow down"),
        "{err}"
    );
    let invalid = exception("ValidationException", &json!({"message": "bad toolConfig"}));
    assert!(!invalid.is_retryable() && invalid.to_string().contains("bad toolConfig"));
    assert!(exception("serviceUnavailableException", &json!({})).is_retryable());
    // An answer cut before messageStop is not whole.
    assert!(AnswerStream::default().finish().is_none());
}
