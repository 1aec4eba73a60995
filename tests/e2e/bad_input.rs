//! Refusals before the agent starts: a precise status, a `{"detail": …}` body, JSON (never SSE,
//! even when `stream: true` was asked for), and nothing sent to the LLM.

use serde_json::{Value, json};
use triage::config::Settings;

use crate::helpers::{TestApp, json_body, spawn_app, spawn_app_with, spawn_with_settings};
use fake_llm::FakeLlm;

/// POSTs a raw body to /api/chat; checks it is a JSON error (not SSE) and returns
/// (status, detail).
async fn refused(app: &TestApp, body: impl Into<String>) -> (u16, Value) {
    let resp = app.post_raw("/api/chat", body.into()).await;
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = json_body(resp).await;
    assert!(
        content_type.starts_with("application/json"),
        "errors are JSON, not {content_type:?}: {body}"
    );
    let obj = body.as_object().unwrap_or_else(|| panic!("object: {body}"));
    assert_eq!(obj.len(), 1, "only `detail`: {body}");
    (status, body["detail"].clone())
}

/// The 422 of a body that is JSON but not an object.
fn assert_not_an_object(detail: &Value) {
    assert_eq!(
        *detail,
        json!([{"type": "model_attributes_type", "loc": ["body"], "msg": "the request body must be a JSON object"}])
    );
}

/// The single FastAPI-style validation entry of a 422 detail.
fn validation_entry(detail: &Value) -> &Value {
    let list = detail
        .as_array()
        .unwrap_or_else(|| panic!("422 detail is a list: {detail}"));
    assert_eq!(list.len(), 1, "{detail}");
    let entry = &list[0];
    assert!(entry["type"].is_string(), "{detail}");
    assert!(entry["msg"].is_string(), "{detail}");
    assert!(entry["loc"].is_array(), "{detail}");
    entry
}

fn detail_text(detail: &Value) -> String {
    detail
        .as_str()
        .unwrap_or_else(|| panic!("detail is a string: {detail}"))
        .to_owned()
}

/// What a 422 says: its single entry's `loc` and `msg`, without the parser's position
/// (` at line 1 column 8`), which only restates where serde stopped.
fn validation_said(detail: &Value) -> String {
    let entry = validation_entry(detail);
    assert_eq!(entry["type"], "value_error", "{detail}");
    let msg = entry["msg"].as_str().unwrap_or_default();
    let msg = msg.split(" at line ").next().unwrap_or(msg);
    format!("{} {msg}", entry["loc"])
}

/// What any refusal says: the detail text, or the 422 entry as `validation_said` puts it.
fn said(detail: &Value) -> String {
    match detail.as_str() {
        Some(text) => text.to_owned(),
        None => validation_said(detail),
    }
}

const EMPTY_ASK: &str = "`ask` is empty: send a question (an empty ask only resumes a paused conversation, with tool_decisions or frontend_tool_results)";
const MISSING_ASK: &str = "[\"body\"] missing field `ask`";

#[tokio::test]
async fn malformed_json_is_400() {
    let app = spawn_app().await;
    // The detail says what is wrong and where, in the parser's words.
    for (body, fault) in [
        ("{\"ask\": ", "EOF while parsing a value at line 1 column 8"),
        ("{ask: 'q'}", "key must be a string at line 1 column 2"),
        (
            "{\"ask\": \"q\"} trailing",
            "trailing characters at line 1 column 14",
        ),
    ] {
        let (status, detail) = refused(&app, body).await;
        assert_eq!(status, 400, "{body}: {detail}");
        assert_eq!(
            detail_text(&detail),
            format!("Malformed JSON body: {fault}"),
            "{body}"
        );
    }
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn empty_body_is_400() {
    let app = spawn_app().await;
    for body in ["", "  \n"] {
        let (status, detail) = refused(&app, body).await;
        assert_eq!(status, 400, "{body:?}: {detail}");
        assert_eq!(
            detail_text(&detail),
            "Request body is empty: expected a JSON object"
        );
    }
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn empty_json_array_body_is_422() {
    let app = spawn_app().await;
    let (status, detail) = refused(&app, "[]").await;
    assert_eq!(status, 422, "{detail}");
    assert_not_an_object(&detail);
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn json_array_body_with_elements_is_422() {
    let app = spawn_app().await;
    app.llm.push(fake_llm::Step::text("should not be asked"));
    let (status, detail) = refused(&app, "[\"Why is my pod crashing?\"]").await;
    assert_eq!(status, 422, "{detail}");
    assert_not_an_object(&detail);
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn wrong_types_are_422_naming_the_field_and_the_value() {
    let app = spawn_app().await;
    for (body, said_) in [
        (
            json!({"ask": "q", "stream": "yes"}),
            r#"["body","stream"] stream: invalid type: string "yes", expected a boolean"#,
        ),
        (
            json!({"ask": 5}),
            r#"["body","ask"] ask: invalid type: integer `5`, expected a string"#,
        ),
        (
            json!({"ask": "q", "conversation_history": "none"}),
            r#"["body","conversation_history"] conversation_history: invalid type: string "none", expected a sequence"#,
        ),
        (
            json!({"ask": "q", "behavior_controls": {"intro": "off"}}),
            r#"["body","behavior_controls","intro"] behavior_controls.intro: invalid type: string "off", expected a boolean"#,
        ),
    ] {
        let (status, detail) = refused(&app, body.to_string()).await;
        assert_eq!(status, 422, "{body}: {detail}");
        assert_eq!(validation_said(&detail), said_, "{body}");
    }
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn missing_ask_is_422_naming_ask() {
    let app = spawn_app().await;
    for body in [json!({}), json!({"stream": false, "model": "fake"})] {
        let (status, detail) = refused(&app, body.to_string()).await;
        assert_eq!(status, 422, "{body}: {detail}");
        assert_eq!(validation_said(&detail), MISSING_ASK, "{body}");
    }
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn non_object_history_item_is_422_with_its_index() {
    let app = spawn_app().await;
    for (history, said_) in [
        (
            json!([3]),
            r#"["body","conversation_history",0] conversation_history[0]: invalid type: integer `3`, expected struct Message"#,
        ),
        (
            json!([{"role": "user", "content": "hi"}, "oops"]),
            r#"["body","conversation_history",1] conversation_history[1]: invalid type: string "oops", expected struct Message"#,
        ),
    ] {
        let body = json!({"ask": "q", "conversation_history": history});
        let (status, detail) = refused(&app, body.to_string()).await;
        assert_eq!(status, 422, "{detail}");
        assert_eq!(validation_said(&detail), said_);
    }
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn unknown_model_is_400_listing_the_valid_keys() {
    let app = spawn_app_with("[models.other]\nmodel = \"openai/x\"\napi_base = \"{LLM}\"\n").await;
    let (status, detail) = refused(
        &app,
        json!({"ask": "q", "model": "gpt-5-turbo-max"}).to_string(),
    )
    .await;
    assert_eq!(status, 400, "{detail}");
    assert_eq!(
        detail_text(&detail),
        "Unknown model 'gpt-5-turbo-max'. Valid model keys: fake, other"
    );
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn empty_ask_without_resume_data_is_400() {
    let app = spawn_app().await;
    for ask in ["", "   \n"] {
        let (status, detail) = refused(&app, json!({"ask": ask}).to_string()).await;
        assert_eq!(status, 400, "{ask:?}: {detail}");
        assert_eq!(detail_text(&detail), EMPTY_ASK);
    }
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn oversized_body_is_413() {
    let app = spawn_app_with("[server]\nbody_limit_bytes = 2048\n").await;
    let ask = "x".repeat(10 * 1024);
    let (status, detail) = refused(&app, json!({"ask": ask}).to_string()).await;
    assert_eq!(status, 413, "{detail}");
    assert_eq!(
        detail_text(&detail),
        "Request body too large: the limit is 2048 bytes (server.body_limit_bytes)"
    );
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn body_under_the_limit_is_accepted() {
    let app = spawn_app_with("[server]\nbody_limit_bytes = 2048\n").await;
    app.llm.push(fake_llm::Step::text("ok"));
    let (status, body) = app.chat_json(&json!({"ask": "x".repeat(1024)})).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn streaming_requests_are_refused_with_http_errors_too() {
    let app = spawn_app_with("[server]\nbody_limit_bytes = 2048\n").await;
    let cases: Vec<(Value, u16, &str)> = vec![
        (json!({"stream": true}), 422, MISSING_ASK),
        (
            json!({"ask": 5, "stream": true}),
            422,
            r#"["body","ask"] ask: invalid type: integer `5`, expected a string"#,
        ),
        (
            json!({"ask": "q", "stream": true, "conversation_history": [3]}),
            422,
            r#"["body","conversation_history",0] conversation_history[0]: invalid type: integer `3`, expected struct Message"#,
        ),
        (
            json!({"ask": "q", "stream": true, "model": "nope"}),
            400,
            "Unknown model 'nope'. Valid model keys: fake",
        ),
        (json!({"ask": "", "stream": true}), 400, EMPTY_ASK),
        (
            json!({"ask": "x".repeat(10 * 1024), "stream": true}),
            413,
            "Request body too large: the limit is 2048 bytes (server.body_limit_bytes)",
        ),
    ];
    for (body, status_, said_) in cases {
        let (status, detail) = refused(&app, body.to_string()).await;
        assert_eq!(status, status_, "{detail}");
        assert_eq!(said(&detail), said_);
    }
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn server_without_a_model_starts_and_answers_503() {
    if std::env::var("OPENAI_API_KEY").is_ok() {
        eprintln!("skipped: OPENAI_API_KEY is set, so the registry configures a default model");
        return;
    }
    let settings = Settings::from_toml("[server]\nhost = \"127.0.0.1\"\nport = 0\n")
        .expect("settings without models");
    assert!(settings.models.is_empty());
    let app = spawn_with_settings(settings, FakeLlm::start().await).await;

    let (status, body) = app.get_json("/api/model").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"model_name": []}));

    for stream in [false, true] {
        let (status, detail) =
            refused(&app, json!({"ask": "q", "stream": stream}).to_string()).await;
        assert_eq!(status, 503, "stream={stream}: {detail}");
        let text = detail_text(&detail);
        assert!(text.contains("OPENAI_API_KEY"), "{text}");
        assert!(text.contains("MODEL"), "{text}");
    }
    assert_eq!(app.llm.request_count(), 0);
}
