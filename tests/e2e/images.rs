//! `images`: every accepted form becomes the OpenAI vision content array; every bad one is 400.

use serde_json::json;

use crate::helpers::{spawn_app, spawn_app_with};
use fake_llm::Step;

const PNG: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

#[tokio::test]
async fn every_form_reaches_the_llm() {
    let app = spawn_app_with("[models.fake]\nvision = true\n").await;
    app.llm.push(Step::text("A dashboard."));
    let (status, body) = app
        .chat_json(&json!({
            "ask": "What is in these?",
            "images": [
                "https://example.com/a.png",
                PNG,
                {"url": "https://example.com/b.jpg", "detail": "high", "format": "image/jpeg"}
            ]
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    let user = &app.llm_messages(0)[1];
    let parts = user["content"].as_array().unwrap();
    assert_eq!(parts.len(), 4);
    assert_eq!(parts[0]["type"], "text");
    assert!(
        parts[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("What is in these?")
    );
    assert_eq!(
        parts[1],
        json!({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}})
    );
    assert_eq!(parts[2]["image_url"]["url"], PNG);
    assert_eq!(
        parts[3]["image_url"],
        json!({"url": "https://example.com/b.jpg", "detail": "high", "format": "image/jpeg"})
    );
    // Images are counted with the documented estimate (765 tokens each).
    assert!(body["metadata"]["tokens"]["user_tokens"].as_u64().unwrap() > 3 * 765);
}

#[tokio::test]
async fn bad_images_are_400() {
    let app = spawn_app_with("[models.fake]\nvision = true\n").await;
    let cases = [
        (json!([{"detail": "high"}]), "'url'"),
        (json!(["data:image/png;base64"]), "malformed data URI"),
        (json!(["data:image/png;base64,%%%"]), "not base64"),
        (json!(["data:text/plain;base64,aGk="]), "not an image"),
        (json!(["file:///etc/passwd"]), "http(s) URL or a data: URI"),
        (
            json!([{"url": "https://x/y.png", "detail": "ultra"}]),
            "detail",
        ),
    ];
    for (images, expected) in cases {
        let (status, body) = app.chat_json(&json!({"ask": "q", "images": images})).await;
        assert_eq!(status, 400, "{images} → {body}");
        assert!(
            body["detail"].as_str().unwrap().contains(expected),
            "{images} → {body}"
        );
    }
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn a_model_without_vision_refuses_images() {
    let app = spawn_app().await;
    let (status, body) = app.chat_json(&json!({"ask": "q", "images": [PNG]})).await;
    assert_eq!(status, 400);
    assert!(
        body["detail"].as_str().unwrap().contains("vision = true"),
        "{body}"
    );
}
