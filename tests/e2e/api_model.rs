//! `GET /api/model`, the 404 fallback, and choosing a model per chat request.

use serde_json::{Value, json};

use crate::helpers::{json_body, spawn_app, spawn_app_with};
use fake_llm::Step;

const OTHER_MODEL: &str = "[models.other]\nmodel = \"openai/x\"\napi_base = \"{LLM}\"\n";

#[tokio::test]
async fn lists_the_configured_model_keys() {
    let app = spawn_app().await;
    let (status, body) = app.get_json("/api/model").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"model_name": ["fake"]}));
}

#[tokio::test]
async fn lists_every_model_key() {
    let app = spawn_app_with(OTHER_MODEL).await;
    let (status, body) = app.get_json("/api/model").await;
    assert_eq!(status, 200, "{body}");
    let mut keys: Vec<&str> = body["model_name"]
        .as_array()
        .unwrap_or_else(|| panic!("model_name is an array: {body}"))
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["fake", "other"], "keys, not model ids: {body}");
    assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
}

#[tokio::test]
async fn model_name_as_a_json_encoded_string_in_compat_mode() {
    let app = spawn_app_with(&format!(
        "[compat]\nmodel_name_as_string = true\n{OTHER_MODEL}"
    ))
    .await;
    let (status, body) = app.get_json("/api/model").await;
    assert_eq!(status, 200, "{body}");
    let encoded = body["model_name"]
        .as_str()
        .unwrap_or_else(|| panic!("model_name is a string: {body}"));
    let decoded: Value = serde_json::from_str(encoded).expect("the string holds JSON");
    let mut keys: Vec<&str> = decoded
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["fake", "other"]);
}

#[tokio::test]
async fn unknown_routes_are_404_with_detail() {
    let app = spawn_app().await;
    let (status, body) = app.get_json("/api/nope").await;
    assert_eq!(status, 404);
    assert_eq!(body, json!({"detail": "Not Found"}));

    let resp = app.post_raw("/api/chats", "{\"ask\":\"q\"}".into()).await;
    assert_eq!(resp.status(), 404);
    assert_eq!(json_body(resp).await, json!({"detail": "Not Found"}));
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn chat_uses_the_chosen_model() {
    let app = spawn_app_with(OTHER_MODEL).await;
    app.llm.push(Step::text("from x"));
    app.llm.push(Step::text("from the default"));
    app.llm.push(Step::text("from fake"));

    let (status, body) = app.chat_json(&json!({"ask": "q", "model": "other"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "from x");
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = app.chat_json(&json!({"ask": "q", "model": "fake"})).await;
    assert_eq!(status, 200, "{body}");

    let requests = app.llm.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0]["model"], "x", "the provider name, not the key");
    assert_eq!(requests[1]["model"], "fake-model", "the default model");
    assert_eq!(requests[2]["model"], "fake-model");
}

#[tokio::test]
async fn chat_uses_the_chosen_model_when_streaming() {
    let app = spawn_app_with(OTHER_MODEL).await;
    app.llm.push(Step::text("from x"));
    let events = app.chat_sse(&json!({"ask": "q", "model": "other"})).await;
    assert_eq!(crate::helpers::last(&events).name, "ai_answer_end");
    assert_eq!(app.llm.requests()[0]["model"], "x");
}
