//! Tool results the agent must police: oversized output, repeated identical calls; and a tool
//! run that ends with its client.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{eventually, spawn_app_with};
use fake_llm::Step;

#[tokio::test]
async fn oversized_output_is_cut_and_reported() {
    // A 300-token budget per tool result (the window's 15% would be far larger).
    let app = spawn_app_with("[agent]\ntool_budget_tokens = 300\n").await;
    let long = "pod web-1 restarted because of OOMKilled ".repeat(200);
    app.llm.push(Step::tool(
        "big",
        "TodoWrite",
        json!({"todos": [{"id": "1", "content": long, "status": "pending"}]}),
    ));
    app.llm.push(Step::text("ok"));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    let truncations = body["metadata"]["truncations"].as_array().unwrap();
    assert_eq!(truncations.len(), 1);
    let t = &truncations[0];
    assert_eq!(t["tool_call_id"], "big");
    assert_eq!(t["tool_name"], "TodoWrite");
    assert_eq!(t["start_index"], 0);
    assert!(t["original_token_count"].as_u64().unwrap() > 1500);
    assert!(body["metadata"]["max_tokens"] == 200000);
    let sent = app.llm_messages(1);
    let content = sent[3]["content"].as_str().unwrap();
    assert!(content.ends_with("[TRUNCATED]"), "{content}");
    assert_eq!(
        content.chars().count(),
        t["end_index"].as_u64().unwrap() as usize + "\n\n[TRUNCATED]".len()
    );
    assert!(content.len() < long.len() / 2);
    assert!(
        body["tool_calls"][0]["result"]["data"]
            .as_str()
            .unwrap()
            .ends_with("[TRUNCATED]")
    );
}

#[tokio::test]
async fn an_identical_call_is_refused_once_its_output_is_known_stable() {
    let app = spawn_app_with("").await;
    let args = json!({"todos": [{"id": "1", "content": "check logs", "status": "pending"}]});
    app.llm.push(Step::tool("first", "TodoWrite", args.clone()));
    // Same arguments, keys in another order and spacing: still the same call.
    app.llm.push(Step::ToolCalls {
        content: None,
        calls: vec![fake_llm::ToolCall {
            id: "again".into(),
            name: "TodoWrite".into(),
            arguments: r#"{"todos": [{"status": "pending", "content": "check logs", "id": "1"}]}"#
                .into(),
        }],
        usage: None,
    });
    // The first repeat runs (a repeat can learn something new); it returned the same output,
    // so a third is refused.
    app.llm.push(Step::tool("third", "TodoWrite", args.clone()));
    app.llm.push(Step::text("done"));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    let calls = body["tool_calls"].as_array().unwrap();
    assert_eq!(calls[0]["result"]["status"], "success");
    assert_eq!(calls[1]["result"]["status"], "success");
    assert_eq!(calls[2]["result"]["status"], "error");
    assert!(
        calls[2]["result"]["error"]
            .as_str()
            .unwrap()
            .contains("identical call")
    );

    // With the guard off both run.
    let app = spawn_app_with("[agent]\nduplicate_call_guard = false\n").await;
    app.llm.push(Step::tool("first", "TodoWrite", args.clone()));
    app.llm.push(Step::tool("again", "TodoWrite", args.clone()));
    app.llm.push(Step::tool("third", "TodoWrite", args));
    app.llm.push(Step::text("done"));
    let (_, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(body["tool_calls"][2]["result"]["status"], "success");
}

/// Whether a process whose command line contains `pattern` runs.
fn running(pattern: &str) -> bool {
    let out = std::process::Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .expect("pgrep");
    !out.stdout.is_empty()
}

#[tokio::test]
async fn disconnect_during_a_tool_run_kills_the_tool() {
    let app = spawn_app_with("[toolsets.bash]\nallow = [\"sleep\"]\n").await;
    // A unique duration makes the process easy to find.
    let secs = format!("7.{}", std::process::id() % 1000 + 100);
    let command = format!("sleep {secs} | cat");
    app.llm
        .push(Step::tool("slow", "bash", json!({"command": command})));
    let resp = app.post_chat(&json!({"ask": "q", "stream": true})).await;
    let sleeping = format!("sleep {secs}");
    eventually("the tool to start", Duration::from_secs(5), || async {
        running(&sleeping)
    })
    .await;
    drop(resp);
    eventually(
        "the tool to end with its client",
        Duration::from_secs(2),
        || async { !running(&sleeping) },
    )
    .await;
    assert_eq!(
        app.llm.request_count(),
        1,
        "no second LLM call for a client that left"
    );
}
