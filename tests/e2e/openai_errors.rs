//! The OpenAI-compatible door's refusals, each in OpenAI's error shape: bad bodies, unknown
//! parameters and models, limits, unknown routes, API keys; a failure mid-stream as an error
//! chunk; a client that leaves a stream cancelling its run.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{spawn_app, spawn_app_with};
use crate::openai_compat::{frames, post, text};
use fake_llm::Step;

pub fn error_of(body: &Value) -> &Value {
    let error = &body["error"];
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(error["type"].is_string(), "{body}");
    assert!(
        error.get("param").is_some() && error.get("code").is_some(),
        "{body}"
    );
    error
}

#[tokio::test]
async fn bad_requests_get_openai_errors() {
    let app = spawn_app().await;
    let user = json!([{"role": "user", "content": "q"}]);
    let cases = [
        (
            json!({"model": "nope", "messages": user}),
            404,
            Some("model"),
        ),
        (json!({"messages": user}), 400, Some("model")),
        (json!({"model": "fake"}), 400, Some("messages")),
        (
            json!({"model": "fake", "messages": user, "colour": 1}),
            400,
            Some("colour"),
        ),
        (
            json!({"model": "fake", "messages": [{"role": "user", "content": "q", "x": 1}]}),
            400,
            Some("messages[0].x"),
        ),
        (
            json!({"model": "fake", "messages": [{"role": "robot", "content": "q"}]}),
            400,
            Some("messages[0].role"),
        ),
        (
            json!({"model": "fake", "messages": []}),
            400,
            Some("messages"),
        ),
        (
            json!({"model": "fake", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}),
            400,
            Some("messages"),
        ),
        (
            json!({"model": "fake", "messages": [{"role": "tool", "tool_call_id": "forged", "content": "x"}]}),
            400,
            Some("messages"),
        ),
        (
            json!({"model": "fake", "messages": user, "n": 3}),
            400,
            Some("n"),
        ),
        (
            json!({"model": "fake", "messages": user, "tool_choice": "required"}),
            400,
            Some("tool_choice"),
        ),
        (
            json!({"model": "fake", "messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}),
            400,
            Some("messages[0].content[0].type"),
        ),
        (
            json!({"model": "fake", "messages": user, "response_format": {"type": "xml"}}),
            400,
            None,
        ),
        (
            json!({"model": "fake", "messages": user, "tools": [{"type": "function", "function": {"name": "bash"}}]}),
            400,
            None,
        ),
    ];
    for (body, status, param) in cases {
        let (got, answer) = post(&app, "/v1/chat/completions", &body).await;
        assert_eq!(got, status, "{body} → {answer}");
        let error = error_of(&answer);
        if let Some(param) = param {
            assert_eq!(error["param"], param, "{body} → {answer}");
        }
    }
    let (_, answer) = post(
        &app,
        "/v1/chat/completions",
        &json!({"model": "nope", "messages": user}),
    )
    .await;
    assert_eq!(answer["error"]["code"], "model_not_found");
    // Malformed JSON and a body that is not an object.
    for raw in ["{\"model\": ", "[1,2]", "", "\u{0}"] {
        let resp = app.post_raw("/v1/chat/completions", raw.to_owned()).await;
        assert_eq!(resp.status(), 400, "{raw:?}");
        error_of(&crate::helpers::json_body(resp).await);
    }
    assert_eq!(
        app.llm.request_count(),
        0,
        "no refused request reached the model"
    );
}

#[tokio::test]
async fn limits_and_unknown_routes_answer_in_openai_shape() {
    let app = spawn_app_with("[server]\nbody_limit_bytes = 4096\n").await;
    let huge = "x".repeat(10_000);
    let (status, body) = post(
        &app,
        "/v1/chat/completions",
        &json!({"model": "fake", "messages": [{"role": "user", "content": huge}]}),
    )
    .await;
    assert_eq!(status, 413);
    error_of(&body);
    let (status, body) = app.get_json("/v1/nothing-here").await;
    assert_eq!(status, 404);
    error_of(&body);
    let resp = app
        .client
        .get(app.url("/v1/chat/completions"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    error_of(&crate::helpers::json_body(resp).await);
}

#[tokio::test]
async fn the_api_key_is_a_bearer_and_refusals_are_openai_shaped() {
    let app = spawn_app_with("[server]\napi_keys = [\"sk-triage-test\"]\n").await;
    app.llm.push(text("ok", 1, 1));
    let body = json!({"model": "fake", "messages": [{"role": "user", "content": "q"}]});
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("Bearer sk-triage-test-forged"),
        Some("Basic sk-triage-test"),
    ] {
        let mut request = app.client.post(app.url("/v1/chat/completions")).json(&body);
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        let resp = request.send().await.unwrap();
        assert_eq!(resp.status(), 401, "{auth:?}");
        assert_eq!(resp.headers()["www-authenticate"], "Bearer");
        let answer = crate::helpers::json_body(resp).await;
        assert_eq!(error_of(&answer)["code"], "invalid_api_key");
        assert!(!answer.to_string().contains("sk-triage-test"));
    }
    let resp = app.client.get(app.url("/v1/models")).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    let resp = app
        .client
        .post(app.url("/v1/chat/completions"))
        .bearer_auth("sk-triage-test")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn a_provider_failure_mid_stream_is_an_error_chunk_that_ends_it() {
    let app = spawn_app().await;
    app.llm.push(Step::FailMidStream {
        content: "partial answer".into(),
        kind: "server_error".into(),
        message: "the provider broke".into(),
    });
    let frames = frames(
        &app,
        "/v1/chat/completions",
        &json!({"model": "fake", "stream": true, "messages": [{"role": "user", "content": "q"}]}),
    )
    .await;
    let last = frames.last().unwrap();
    assert_ne!(last.data, "[DONE]");
    let error = last.json();
    error_of(&error);
    assert!(frames.iter().all(|f| f.data != "[DONE]"));
}

#[tokio::test]
async fn a_client_leaving_a_stream_cancels_the_run() {
    let app = spawn_app().await;
    app.llm.push(Step::HangAfterFirstChunk {
        first: "thinking".into(),
    });
    let resp = app
        .client
        .post(app.url("/v1/chat/completions"))
        .json(&json!({"model": "fake", "stream": true, "messages": [{"role": "user", "content": "q"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(app.llm.wait_for_requests(1, Duration::from_secs(5)).await);
    crate::helpers::assert_leaving_cancels(&app, move || drop(resp), "chat completion").await;
}
