//! The agent doors' streams and the MCP tools against a hostile model and client: secrets
//! split across deltas, SSE-looking answers, wrong argument types, guessed conversation ids,
//! odd progress tokens, and a stream on a task that never settles.

use std::time::Duration;

use fake_llm::Step;
use serde_json::{Value, json};

use super::{a2a_stream, last_state, user};
use crate::helpers::{spawn_app, spawn_app_with};

#[tokio::test]
async fn a_secret_split_across_deltas_is_masked_in_every_door() {
    let secret = "s3cr3t-doors-split-token";
    let app = spawn_app_with(&format!("[security]\nsecrets = [\"{secret}\"]\n")).await;
    let answer = format!("first {secret} then data: {{\"jsonrpc\":\"2.0\"}}\n\nevent: x\n\n");
    app.llm.push(Step::Slow {
        content: answer.clone(),
        chunks: 12,
        interval: Duration::from_millis(20),
    });
    let responses = a2a_stream(
        &app,
        "SendStreamingMessage",
        json!({"message": user("leak")}),
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(
        last_state(&responses),
        "TASK_STATE_COMPLETED",
        "{responses:?}"
    );
    let all = serde_json::to_string(&responses).unwrap();
    assert!(!all.contains(secret) && !all.contains("s3cr3t"), "{all}");
    assert!(responses.iter().all(|r| r["id"] == 9), "{responses:?}");

    // MCP: investigate, with a progress token of an odd type, as one answer.
    app.llm.push(Step::Slow {
        content: answer,
        chunks: 12,
        interval: Duration::from_millis(20),
    });
    let resp = app
        .client
        .post(app.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(
            &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "investigate", "arguments": {"question": "leak"},
            "_meta": {"progressToken": "p-1"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(!text.contains("s3cr3t"), "{text}");
    // The model's `data:` and `event:` lines stay inside one JSON string of one frame.
    let frames: Vec<&str> = text.lines().filter(|l| l.starts_with("data:")).collect();
    for frame in &frames {
        let value: Value = serde_json::from_str(frame.trim_start_matches("data:").trim())
            .unwrap_or_else(|e| panic!("{e}: {frame}"));
        assert_eq!(value["jsonrpc"], "2.0");
    }
    assert!(!text.lines().any(|l| l.starts_with("event: x")), "{text}");
}

#[tokio::test]
async fn mcp_tools_refuse_wrong_types_guessed_ids_and_odd_tokens() {
    let app = spawn_app().await;
    let call = |name: &'static str, arguments: Value, meta: Value| {
        let app = &app;
        async move {
            let mut params = json!({"name": name, "arguments": arguments});
            if !meta.is_null() {
                params["_meta"] = meta;
            }
            let resp = app
                .client
                .post(app.url("/mcp"))
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-06-18")
                .json(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": params}))
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let text = resp.text().await.unwrap();
            let last = text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .rfind(|d| !d.is_empty())
                .map_or_else(|| text.clone(), str::to_owned);
            let value: Value =
                serde_json::from_str(&last).unwrap_or_else(|e| panic!("{e}: {text}"));
            (status, value)
        }
    };
    let refused =
        |value: &Value| value["result"]["isError"] == true || value["error"]["code"].is_i64();
    for (name, arguments) in [
        ("investigate", json!({"question": 5})),
        ("investigate", json!({"question": ["a"]})),
        ("investigate", json!({"question": "q", "model": {"$ne": 1}})),
        ("investigate", json!({})),
        (
            "conversation_status",
            json!({"conversation_id": uuid::Uuid::new_v4().to_string()}),
        ),
        (
            "conversation_status",
            json!({"conversation_id": "../../etc/passwd"}),
        ),
        ("conversation_status", json!({"conversation_id": 7})),
        (
            "conversation_events",
            json!({"conversation_id": uuid::Uuid::nil().to_string(), "limit": -1}),
        ),
        (
            "approve",
            json!({"conversation_id": uuid::Uuid::new_v4().to_string(), "tool_call_id": "x"}),
        ),
        (
            "deny",
            json!({"conversation_id": uuid::Uuid::max().to_string()}),
        ),
        (
            "send_message",
            json!({"conversation_id": uuid::Uuid::new_v4().to_string(), "message": "hi"}),
        ),
        (
            "start_conversation",
            json!({"question": "x", "__proto__": {"run": false}}),
        ),
        ("no_such_tool", json!({})),
        (
            "investigate",
            json!({"question": "x".repeat(2 << 20), "extra": true}),
        ),
    ] {
        let (status, value) = call(name, arguments.clone(), Value::Null).await;
        let shown: String = arguments.to_string().chars().take(100).collect();
        assert!(
            status == 200 || status == 400,
            "{name} {shown}: {status} {value}"
        );
        assert!(refused(&value), "{name} {shown}: {value}");
        assert!(!value.to_string().contains("panicked"), "{value}");
    }
    // Progress tokens of odd types: refused as params, or the call runs; never a hang.
    for token in [
        json!({"a": 1}),
        json!(1.5),
        json!(null),
        json!(true),
        json!(-1),
        json!(""),
    ] {
        app.llm.push(Step::text("fine"));
        let (status, value) = tokio::time::timeout(
            Duration::from_secs(20),
            call(
                "investigate",
                json!({"question": "q"}),
                json!({"progressToken": token}),
            ),
        )
        .await
        .expect("an answer");
        assert!(status == 200 || status == 400, "{token}: {status} {value}");
        assert!(
            value["result"].is_object() || value["error"]["code"] == -32602,
            "{token}: {value}"
        );
    }
    // Only the well-formed investigations reached the model.
    assert!(app.llm.request_count() <= 6, "{}", app.llm.request_count());
}
