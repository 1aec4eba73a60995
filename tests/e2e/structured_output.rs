//! `response_format`: schemas checked up front, answers validated, one repair round.

use serde_json::{Value, json};

use crate::helpers::{names, spawn_app};
use fake_llm::Step;

fn health_format() -> Value {
    json!({"type": "json_schema", "json_schema": {"name": "ClusterHealth", "strict": true, "schema": {
        "type": "object",
        "properties": {"is_healthy": {"type": "boolean"}, "summary": {"type": "string"}},
        "required": ["is_healthy", "summary"],
        "additionalProperties": false
    }}})
}

#[tokio::test]
async fn valid_answer_passes_and_format_reaches_the_llm() {
    let app = spawn_app().await;
    app.llm
        .push(Step::text(r#"{"is_healthy": true, "summary": "all good"}"#));
    let (status, body) = app
        .chat_json(&json!({"ask": "healthy?", "response_format": health_format()}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["analysis"],
        r#"{"is_healthy": true, "summary": "all good"}"#
    );
    assert_eq!(
        body["metadata"]["response_format"],
        json!({"valid": true, "repaired": false})
    );
    assert_eq!(app.llm.requests()[0]["response_format"], health_format());
}

#[tokio::test]
async fn fenced_json_is_unwrapped() {
    let app = spawn_app().await;
    app.llm.push(Step::text(
        "```json\n{\"is_healthy\": false, \"summary\": \"disk full\"}\n```",
    ));
    let (status, body) = app
        .chat_json(&json!({"ask": "healthy?", "response_format": health_format()}))
        .await;
    assert_eq!(status, 200, "{body}");
    let parsed: Value = serde_json::from_str(body["analysis"].as_str().unwrap()).unwrap();
    assert_eq!(parsed["summary"], "disk full");
    assert_eq!(app.llm.request_count(), 1);
}

#[tokio::test]
async fn invalid_then_repaired() {
    let app = spawn_app().await;
    app.llm.push(Step::text(r#"{"is_healthy": "yes"}"#));
    app.llm
        .push(Step::text(r#"{"is_healthy": true, "summary": "fixed"}"#));
    let events = app
        .chat_sse(&json!({"ask": "healthy?", "response_format": health_format()}))
        .await;
    assert_eq!(names(&events).last(), Some(&"ai_answer_end"));
    let end = &events.last().unwrap().data;
    assert_eq!(
        end["analysis"],
        r#"{"is_healthy": true, "summary": "fixed"}"#
    );
    assert_eq!(
        end["metadata"]["response_format"],
        json!({"valid": true, "repaired": true})
    );
    // The repair request showed the model its answer and what was wrong; calls forbidden.
    let repair = &app.llm.requests()[1];
    assert_eq!(repair["tool_choice"], "none");
    let msgs = repair["messages"].as_array().unwrap();
    let last = msgs.last().unwrap()["content"].as_str().unwrap();
    assert!(
        last.contains("/is_healthy") && last.contains("summary"),
        "{last}"
    );
    assert_eq!(msgs[msgs.len() - 2]["content"], r#"{"is_healthy": "yes"}"#);
    // The history ends with the corrected answer.
    let history = end["conversation_history"].as_array().unwrap();
    assert_eq!(history.last().unwrap()["content"], end["analysis"]);
}

#[tokio::test]
async fn invalid_twice_is_an_error() {
    let app = spawn_app().await;
    app.llm.push(Step::text("The cluster is fine."));
    app.llm.push(Step::text(r#"{"summary": 3}"#));
    let events = app
        .chat_sse(&json!({"ask": "healthy?", "response_format": health_format()}))
        .await;
    let last = events.last().unwrap();
    assert_eq!(last.name, "error");
    assert_eq!(last.data["error_code"], 1);
    let description = last.data["description"].as_str().unwrap();
    assert!(
        description.contains("response_format") && description.contains("/summary"),
        "{description}"
    );

    app.llm.push(Step::text("nope"));
    app.llm.push(Step::text("still nope"));
    let (status, body) = app
        .chat_json(&json!({"ask": "healthy?", "response_format": health_format()}))
        .await;
    assert_eq!(status, 502, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("not valid JSON"));
}

#[tokio::test]
async fn invalid_formats_are_400() {
    let app = spawn_app().await;
    let cases = [
        (
            json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nonsense"}}}),
            "invalid JSON Schema",
        ),
        (
            json!({"type": "json_schema", "json_schema": {"schema": {}}}),
            "name",
        ),
        (json!({"type": "json_schema"}), "json_schema"),
        (json!({"type": "yaml"}), "unsupported type"),
        (json!({"schema": {}}), "`type` is required"),
    ];
    for (format, expected) in cases {
        let (status, body) = app
            .chat_json(&json!({"ask": "q", "response_format": format}))
            .await;
        assert_eq!(status, 400, "{format} → {body}");
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("response_format: ") && detail.contains(expected),
            "{detail}"
        );
    }
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn json_object_mode() {
    let app = spawn_app().await;
    app.llm.push(Step::text("[1, 2]"));
    app.llm.push(Step::text(r#"{"ok": true}"#));
    let (status, body) = app
        .chat_json(&json!({"ask": "q", "response_format": {"type": "json_object"}}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], r#"{"ok": true}"#);
    assert_eq!(body["metadata"]["response_format"]["repaired"], true);
}

/// A model that spells a secret with JSON escapes (`\u0074` is `t`) writes text the masker
/// does not match, which every JSON reader decodes into the secret: the answer and the
/// history it returns are masked as decoded.
#[tokio::test]
async fn a_secret_spelled_with_escapes_is_masked_as_a_client_decodes_it() {
    const SECRET: &str = "s3cr3t-token-value-42";
    let app =
        crate::helpers::spawn_app_with(&format!("[security]\nsecrets = [\"{SECRET}\"]\n")).await;
    app.llm.push(Step::text(
        r#"{"is_healthy": false, "summary": "env holds s3cr3\u0074-token-value-42"}"#,
    ));
    let (status, body) = app
        .chat_json(&json!({"ask": "healthy?", "response_format": health_format()}))
        .await;
    assert_eq!(status, 200, "{body}");
    let parsed: Value = serde_json::from_str(body["analysis"].as_str().unwrap()).unwrap();
    assert_eq!(parsed["summary"], "env holds <secret-hidden>", "{body}");
    let history = body["conversation_history"].to_string();
    let decoded: Vec<Value> = serde_json::from_str(&history).unwrap();
    assert!(!format!("{decoded:?}").contains(SECRET), "{history}");
    for message in &decoded {
        if let Some(text) = message["content"].as_str()
            && let Ok(inner) = serde_json::from_str::<Value>(text)
        {
            assert!(!inner.to_string().contains(SECRET), "{text}");
        }
    }
}
