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

fn frame(message_type: &str, headers: &[(&str, &str)], payload: &[u8]) -> Message {
    let mut message = Message::new(payload.to_vec()).add_header(Header::new(
        ":message-type",
        HeaderValue::String(message_type.to_owned().into()),
    ));
    for (name, value) in headers {
        message = message.add_header(Header::new(
            name.to_string(),
            HeaderValue::String(value.to_string().into()),
        ));
    }
    message
}

/// Redacted reasoning is kept until its block stops: a server that never stops one must not
/// grow it without bound (each frame alone is within the event bound).
#[test]
fn redacted_reasoning_is_bounded() {
    let mut s = AnswerStream::default();
    let piece = "r".repeat(1024 * 1024);
    let delta = json!({"contentBlockIndex": 0,
        "delta": {"reasoningContent": {"redactedContent": piece}}});
    let outcome = (0..6).try_for_each(|_| {
        s.push(event("contentBlockDelta", delta.clone()))
            .map(|_| ())
    });
    assert!(
        matches!(outcome, Err(LlmError::Oversized(_))),
        "{outcome:?}"
    );
}

/// An exception's message goes into an error event: a megabyte of it is cut as an HTTP error
/// body's message is.
#[test]
fn exception_messages_are_cut() {
    let huge = json!({"message": "x".repeat(1024 * 1024)}).to_string();
    let err = AnswerStream::default()
        .push(frame(
            "exception",
            &[(":exception-type", "validationException")],
            huge.as_bytes(),
        ))
        .unwrap_err();
    assert!(
        err.to_string().len() < 4096,
        "{} bytes",
        err.to_string().len()
    );
}

/// `:message-type: error` frames carry their code and message in headers, the payload empty.
#[test]
fn error_frames_keep_their_code() {
    let err = AnswerStream::default()
        .push(frame(
            "error",
            &[
                (":error-code", "ThrottlingException"),
                (":error-message", "slow down"),
            ],
            b"",
        ))
        .unwrap_err();
    assert!(
        err.is_rate_limit() && err.to_string().contains("slow down"),
        "{err}"
    );
}

/// Tool input that is not JSON, unknown events and a tool delta for a text block: errors or
/// nothing, never a panic.
#[test]
fn hostile_events_end_in_errors_not_panics() {
    let mut s = AnswerStream::default();
    assert!(
        s.push(event("someFutureEvent", json!({"x": 1})))
            .unwrap()
            .is_empty()
    );
    assert!(s.push(frame("event", &[], b"not json")).is_err());
    assert!(s.push(frame("surprise", &[], b"{}")).is_err());
    s.push(event(
        "contentBlockDelta",
        json!({"contentBlockIndex": 0, "delta": {"text": "hi"}}),
    ))
    .unwrap();
    let err = s
        .push(event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{"}}}),
        ))
        .unwrap_err();
    assert!(err.to_string().contains("started no tool use"), "{err}");
    assert!(s.finish().is_none());
}

/// Tool uses with empty names and blocks never stopped count nothing toward the answer cap,
/// yet each holds memory: their number is bounded.
#[test]
fn endless_content_blocks_are_bounded() {
    let mut s = AnswerStream::default();
    let outcome = (0..5000u64).try_for_each(|i| {
        s.push(event(
            "contentBlockStart",
            json!({"contentBlockIndex": i, "start": {"toolUse": {"toolUseId": "", "name": ""}}}),
        ))
        .map(|_| ())
    });
    assert!(
        matches!(outcome, Err(LlmError::Oversized(_))),
        "{outcome:?}"
    );
}
