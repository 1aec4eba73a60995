//! One table of error statuses for every front door: a conversation whose work the agent
//! refuses answers the status `/api/chat` answers for the same refusal (a provider's rate
//! limit, a model's call slots full when a run starts). Conversations answered 503 and 429 the
//! other way round.

use std::time::Duration;

use serde_json::json;

use crate::conversations_api::{create, post};
use crate::helpers::{TestApp, json_body, spawn_app_with};
use fake_llm::Step;

fn rate_limited(app: &TestApp) {
    for _ in 0..2 {
        app.llm.push(Step::Error {
            status: 429,
            message: "quota hit".into(),
            retry_after: Some("0".into()),
        });
    }
}

#[tokio::test]
async fn a_provider_rate_limit_is_429_on_api_chat_and_on_a_conversation() {
    let app = spawn_app_with("[llm]\nretry_max_attempts = 2\n").await;
    let id = create(&app, json!({})).await;

    rate_limited(&app);
    let (status, chat) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 429, "{chat}");

    rate_limited(&app);
    let ask = format!("/api/conversations/{id}/ask_agent");
    let (status, asked) = post(&app, &ask, json!({"question": "q"})).await;
    assert_eq!(status, 429, "{asked}");
    assert!(
        asked["detail"].as_str().unwrap().contains("quota hit"),
        "{asked}"
    );
}

#[tokio::test]
async fn full_call_slots_are_503_with_retry_after_on_api_chat_and_on_a_conversation() {
    let app = spawn_app_with("[llm]\nmax_concurrent_calls_per_model = 1\n").await;
    create(&app, json!({})).await;
    // A stream that never ends holds the model's only slot.
    app.llm.push(Step::HangAfterFirstChunk {
        first: "thinking".into(),
    });
    let holding = app.post_chat(&json!({"ask": "hold", "stream": true})).await;
    assert_eq!(holding.status(), 200);
    assert!(app.llm.wait_for_requests(1, Duration::from_secs(5)).await);

    let retry_after = |resp: &reqwest::Response| {
        resp.headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let chat = app.post_chat(&json!({"ask": "q"})).await;
    assert_eq!(
        (chat.status().as_u16(), retry_after(&chat)),
        (503, Some("1".into()))
    );

    // A run cannot start: the conversation is kept with its message, and the answer says how
    // to start it later.
    let created = app
        .post_raw(
            "/api/conversations",
            json!({"initial_message": {"content": "look"}}).to_string(),
        )
        .await;
    assert_eq!(
        (created.status().as_u16(), retry_after(&created)),
        (503, Some("1".into()))
    );
    let detail = json_body(created).await;
    let detail = detail["detail"].as_str().unwrap();
    assert!(
        detail.contains("max_concurrent_calls_per_model"),
        "{detail}"
    );
    assert!(detail.contains("/run to start it"), "{detail}");
    let (_, count) = app.get_json("/api/conversations/count").await;
    assert_eq!(count, 2, "the conversation was kept");
    drop(holding);
}
