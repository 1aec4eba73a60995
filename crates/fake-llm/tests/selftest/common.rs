//! Helpers of the fake's self-tests: requests sent with reqwest, answers read back.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

use fake_llm::FakeLlm;

pub const WAIT: Duration = Duration::from_secs(2);

pub fn chat_body(stream: bool, include_usage: bool) -> Value {
    let mut body = json!({
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "why is my pod crashlooping?"}],
    });
    if stream {
        body["stream"] = json!(true);
        if include_usage {
            body["stream_options"] = json!({"include_usage": true});
        }
    }
    body
}

pub async fn post(fake: &FakeLlm, body: &Value) -> reqwest::Response {
    post_raw(
        &format!("{}/chat/completions", fake.base_url()),
        body.to_string(),
    )
    .await
}

pub async fn post_raw(url: &str, body: String) -> reqwest::Response {
    http_client()
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("request to fake llm")
}

/// The response body parsed as JSON (reqwest's `json` feature is not enabled).
pub async fn json_body(resp: reqwest::Response) -> Value {
    let bytes = resp.bytes().await.expect("response body");
    serde_json::from_slice(&bytes).expect("json body")
}

/// All SSE `data:` payloads of a response, in order.
pub async fn sse_data(resp: reqwest::Response) -> Vec<String> {
    let mut events = resp.bytes_stream().eventsource();
    let mut out = Vec::new();
    while let Some(ev) = events.next().await {
        out.push(ev.expect("sse event").data);
    }
    out
}

/// Parses the data payloads up to (excluding) `[DONE]`; asserts `[DONE]` is last.
pub fn chunks(data: &[String]) -> Vec<Value> {
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{data:?}");
    data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("chunk json"))
        .collect()
}

pub fn delta_strings(chunks: &[Value], field: &str) -> (String, usize) {
    let mut s = String::new();
    let mut n = 0;
    for c in chunks {
        let piece = c.pointer(&format!("/choices/0/delta/{field}"));
        if let Some(v) = piece.and_then(Value::as_str).filter(|v| !v.is_empty()) {
            s.push_str(v);
            n += 1;
        }
    }
    (s, n)
}

pub fn finish_reasons(chunks: &[Value]) -> Vec<String> {
    chunks
        .iter()
        .filter_map(|c| {
            c.pointer("/choices/0/finish_reason")
                .and_then(Value::as_str)
        })
        .map(str::to_string)
        .collect()
}

/// A client for the fake on loopback (the ring provider installed, as reqwest's
/// `rustls-no-provider` feature requires when the workspace enables it; proxies ignored).
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("build reqwest client")
}
