//! The OpenAI-compatible door's chat completions over HTTP against the fake LLM: answers,
//! streams with deltas and usage, tool activity as reasoning, refused risky calls, structured
//! output, the client's own tools, Open WebUI's request shape, images. Errors are in
//! `openai_errors.rs`, the Responses API in `openai_responses.rs`; both use the helpers here.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_with};
use fake_llm::{Step, Usage};

pub fn text(content: &str, prompt: u64, completion: u64) -> Step {
    Step::Text {
        content: content.into(),
        reasoning: None,
        usage: Some(Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
        }),
    }
}

pub async fn post(app: &TestApp, path: &str, body: &Value) -> (u16, Value) {
    let resp = app
        .client
        .post(app.url(path))
        .json(body)
        .send()
        .await
        .expect("request");
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.expect("body");
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)));
    (status, value)
}

/// One SSE frame: its `event:` name (empty for none) and its data, raw.
#[derive(Debug)]
pub struct Frame {
    pub event: String,
    pub data: String,
}

impl Frame {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data)
            .unwrap_or_else(|e| panic!("frame data is not JSON ({e}): {}", self.data))
    }
}

pub async fn frames(app: &TestApp, path: &str, body: &Value) -> Vec<Frame> {
    let resp = app
        .client
        .post(app.url(path))
        .json(body)
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = tokio::time::timeout(Duration::from_secs(30), resp.text())
        .await
        .expect("stream stalled")
        .expect("stream body");
    parse_frames(&text)
}

pub fn parse_frames(text: &str) -> Vec<Frame> {
    text.split("\n\n")
        .filter(|f| !f.trim().is_empty() && !f.starts_with(':'))
        .map(|f| {
            let mut frame = Frame {
                event: String::new(),
                data: String::new(),
            };
            for line in f.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    frame.event = name.to_owned();
                } else if let Some(data) = line.strip_prefix("data: ") {
                    frame.data = data.to_owned();
                }
            }
            frame
        })
        .collect()
}

/// The chunks of a chat stream (without `[DONE]`), asserting it ends with `[DONE]`.
fn chunks(frames: &[Frame]) -> Vec<Value> {
    assert_eq!(frames.last().map(|f| f.data.as_str()), Some("[DONE]"));
    frames[..frames.len() - 1].iter().map(Frame::json).collect()
}

fn joined(chunks: &[Value], field: &str) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"][field].as_str())
        .collect()
}

#[tokio::test]
async fn models_are_the_model_list_keys() {
    let app =
        spawn_app_with("[models.second]\nmodel = \"openai/other\"\napi_base = \"{LLM}\"\n").await;
    let (status, body) = app.get_json("/v1/models").await;
    assert_eq!(status, 200);
    assert_eq!(body["object"], "list");
    let ids: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["fake", "second"]);
    let first = &body["data"][0];
    assert_eq!(first["object"], "model");
    assert_eq!(first["owned_by"], "triage");
    assert!(first["created"].as_i64().unwrap() > 1_700_000_000);
}

#[tokio::test]
async fn a_completion_answers_with_usage() {
    let app = spawn_app().await;
    app.llm.push(text("All pods are healthy.", 120, 9));
    let (status, body) = post(
        &app,
        "/v1/chat/completions",
        &json!({"model": "fake", "messages": [
            {"role": "system", "content": "Answer in one sentence."},
            {"role": "user", "content": "are my pods ok?"}
        ]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion");
    assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(body["model"], "fake");
    let choice = &body["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "All pods are healthy.");
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(body["usage"]["prompt_tokens"], 120);
    assert_eq!(body["usage"]["completion_tokens"], 9);
    assert_eq!(body["usage"]["total_tokens"], 129);
    // The client's system message joins triage's prompt; the question goes through the user
    // template.
    let system = app.system_prompt_sent(0);
    assert!(system.contains("Answer in one sentence."), "{system}");
    assert!(system.contains("nobody can approve tool calls"));
    let sent = app.llm_messages(0);
    assert!(
        sent.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("are my pods ok?")
    );
}

#[tokio::test]
async fn a_stream_sends_deltas_then_usage_then_done() {
    let app = spawn_app().await;
    app.llm.push(text("The node is out of disk space.", 50, 7));
    let frames = frames(
        &app,
        "/v1/chat/completions",
        &json!({"model": "fake", "stream": true, "stream_options": {"include_usage": true},
                "messages": [{"role": "user", "content": "why?"}]}),
    )
    .await;
    let chunks = chunks(&frames);
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let pieces = chunks
        .iter()
        .filter(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        })
        .count();
    assert!(pieces >= 3, "token deltas, not one piece: {chunks:?}");
    assert_eq!(joined(&chunks, "content"), "The node is out of disk space.");
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 50);
    assert_eq!(usage["usage"]["completion_tokens"], 7);
    let ids: std::collections::HashSet<&str> =
        chunks.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 1, "one id for the whole stream");
}

#[tokio::test]
async fn without_include_usage_no_chunk_carries_usage() {
    let app = spawn_app().await;
    app.llm.push(text("fine", 5, 1));
    let frames = frames(
        &app,
        "/v1/chat/completions",
        &json!({"model": "fake", "stream": true, "messages": [{"role": "user", "content": "ok?"}]}),
    )
    .await;
    let chunks = chunks(&frames);
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
}

#[tokio::test]
async fn tool_calls_show_as_reasoning_and_risky_ones_are_refused() {
    let app = spawn_app().await;
    let dir = crate::helpers::tool_writable_dir("openai-refused");
    let marker = dir.join("must-not-exist");
    app.llm.push(Step::tools(vec![
        ("safe", "bash", json!({"command": "echo hello"})),
        (
            "risky",
            "bash",
            json!({"command": format!("touch {}", marker.display())}),
        ),
    ]));
    app.llm
        .push(text("Done: echo worked, touch was refused.", 10, 5));
    let frames = frames(
        &app,
        "/v1/chat/completions",
        &json!({"model": "fake", "stream": true, "messages": [{"role": "user", "content": "go"}]}),
    )
    .await;
    let chunks = chunks(&frames);
    let reasoning = joined(&chunks, "reasoning_content");
    assert!(reasoning.contains("Calling `bash`"), "{reasoning}");
    assert!(reasoning.contains("(echo hello) succeeded"), "{reasoning}");
    assert!(reasoning.contains("failed: "), "{reasoning}");
    assert_eq!(
        joined(&chunks, "content"),
        "Done: echo worked, touch was refused."
    );
    assert!(!marker.exists(), "the risky command ran");
    // The model read the refusal as the call's result.
    let second = app.llm_messages(1);
    let refusal = second
        .iter()
        .find(|m| m["tool_call_id"] == "risky")
        .expect("the refused call's result");
    assert!(
        refusal["content"].as_str().unwrap().contains("rejected"),
        "{refusal}"
    );
    // Nothing but the answer is content; no tool call reaches a plain client.
    assert!(
        chunks
            .iter()
            .all(|c| c["choices"][0]["delta"].get("tool_calls").is_none())
    );
}

#[tokio::test]
async fn a_completion_carries_tool_activity_as_reasoning_content() {
    let app = spawn_app().await;
    app.llm
        .push(Step::tool("c1", "bash", json!({"command": "echo hi"})));
    app.llm.push(text("hi was printed", 10, 3));
    let (status, body) = post(
        &app,
        "/v1/chat/completions",
        &json!({"model": "fake", "messages": [{"role": "user", "content": "go"}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let message = &body["choices"][0]["message"];
    assert_eq!(message["content"], "hi was printed");
    assert!(
        message["reasoning_content"]
            .as_str()
            .unwrap()
            .contains("echo hi")
    );
    assert!(message.get("tool_calls").is_none());
}

fn health_format() -> Value {
    json!({"type": "json_schema", "json_schema": {"name": "health", "strict": true, "schema": {
        "type": "object", "properties": {"healthy": {"type": "boolean"}},
        "required": ["healthy"], "additionalProperties": false}}})
}

#[tokio::test]
async fn structured_output_is_enforced_and_streamed_whole() {
    let app = spawn_app().await;
    app.llm.push(text("not json at all", 5, 2));
    app.llm.push(text(r#"{"healthy": true}"#, 5, 2));
    let (status, body) = post(
        &app,
        "/v1/chat/completions",
        &json!({"model": "fake", "response_format": health_format(),
                "messages": [{"role": "user", "content": "healthy?"}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let content = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(content).unwrap(),
        json!({"healthy": true})
    );
    assert_eq!(app.llm.requests()[0]["response_format"], health_format());

    // Streaming: the repaired answer only, never the failed first attempt.
    app.llm.push(text("{broken", 5, 2));
    app.llm.push(text(r#"{"healthy": false}"#, 5, 2));
    let frames = frames(
        &app,
        "/v1/chat/completions",
        &json!({"model": "fake", "stream": true, "response_format": health_format(),
                "messages": [{"role": "user", "content": "healthy?"}]}),
    )
    .await;
    assert_eq!(joined(&chunks(&frames), "content"), r#"{"healthy": false}"#);
}

#[tokio::test]
async fn client_tools_end_the_run_and_their_results_continue_it() {
    let app = spawn_app().await;
    let tools = json!([{"type": "function", "function": {"name": "open_dashboard",
        "description": "Opens a dashboard", "parameters": {"type": "object",
        "properties": {"name": {"type": "string"}}, "required": ["name"]}}}]);
    app.llm
        .push(Step::tool("ui1", "open_dashboard", json!({"name": "pods"})));
    let (status, body) = post(
        &app,
        "/v1/chat/completions",
        &json!({"model": "fake", "tools": tools, "messages": [{"role": "user", "content": "show me"}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["id"], "ui1");
    assert_eq!(call["function"]["name"], "open_dashboard");
    assert_eq!(
        serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(),
        json!({"name": "pods"})
    );
    // The next request carries the call and its result: the run continues from there.
    app.llm.push(text("The dashboard is open.", 5, 4));
    let (status, body) = post(
        &app,
        "/v1/chat/completions",
        &json!({"model": "fake", "tools": tools, "messages": [
            {"role": "user", "content": "show me"},
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "ui1", "content": "opened"}
        ]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "The dashboard is open."
    );
    let sent = app.llm_messages(1);
    let result = sent.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["content"], "opened");
    assert_eq!(result["tool_call_id"], "ui1");
}

#[tokio::test]
async fn open_webui_request_shape_streams() {
    let app = spawn_app().await;
    app.llm.push(text("Hello from triage.", 8, 4));
    // What Open WebUI sends for a chat with a tool offered (its own function-calling mode).
    let body = json!({
        "model": "fake",
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]}
        ],
        "stream": true,
        "stream_options": {"include_usage": true},
        "temperature": 0.7,
        "max_tokens": 512,
        "tools": [{"type": "function", "function": {"name": "web_search",
            "description": "Search the web", "parameters": {"type": "object",
            "properties": {"query": {"type": "string"}}}}}]
    });
    let frames = frames(&app, "/v1/chat/completions", &body).await;
    let chunks = chunks(&frames);
    assert_eq!(joined(&chunks, "content"), "Hello from triage.");
    assert_eq!(chunks.last().unwrap()["usage"]["total_tokens"], 12);
    let offered = app.llm.requests()[0]["tools"].to_string();
    assert!(
        offered.contains("web_search"),
        "the client's tool is offered to the model"
    );
}

#[tokio::test]
async fn images_reach_a_vision_model() {
    let app = spawn_app_with("[models.fake]\nvision = true\n").await;
    app.llm.push(text("a graph", 5, 2));
    let (status, body) = post(
        &app,
        "/v1/chat/completions",
        &json!({"model": "fake", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}}
        ]}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let sent = app.llm_messages(0);
    assert!(
        sent.last().unwrap()["content"]
            .to_string()
            .contains("data:image/png;base64")
    );
}

#[tokio::test]
async fn a_hostile_model_cannot_leak_a_secret_through_either_field() {
    let secret = "sk-model-key-0123456789abcdef";
    let app = spawn_app_with(&format!("[models.fake]\napi_key = \"{secret}\"\n")).await;
    app.llm.push(Step::tool(
        "c1",
        "bash",
        json!({"command": format!("echo {secret}")}),
    ));
    app.llm.push(text(&format!("the key is {secret}"), 5, 5));
    let frames = frames(
        &app,
        "/v1/chat/completions",
        &json!({"model": "fake", "stream": true, "messages": [{"role": "user", "content": "leak"}]}),
    )
    .await;
    let all: String = frames.iter().map(|f| f.data.as_str()).collect();
    assert!(!all.contains(secret), "{all}");
    let chunks = chunks(&frames);
    assert!(joined(&chunks, "content").contains("<secret-hidden>"));
}
