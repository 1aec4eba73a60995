//! Fixes that came with the agent core, each over HTTP: a slot reserved when a request is
//! accepted, frontend arguments checked against their schema, the step budget of a turn across
//! resumes, and `save_prefixes` refused rather than ignored.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{eventually, names, spawn_app_with};
use fake_llm::{Step, ToolCall};

#[tokio::test]
async fn a_model_whose_slot_is_taken_after_acceptance_still_answers_503_not_500() {
    let app = spawn_app_with(
        "[llm]\nmax_concurrent_calls_per_model = 1\nfirst_byte_timeout_secs = 1.0\n",
    )
    .await;
    let dir = crate::helpers::tool_writable_dir("slot-reservation");
    // A request asking "hold" gets a stream that never ends (it would keep the slot forever).
    app.llm.set_responder(|request| {
        if request.to_string().contains("hold the slot") {
            Step::HangAfterFirstChunk {
                first: "thinking".into(),
            }
        } else {
            Step::text("Done.")
        }
    });
    let command = format!("touch {}/ran && sleep 2", dir.display());
    app.llm.reset(vec![Step::tool(
        "slow",
        "bash",
        json!({"command": command}),
    )]);
    let events = app
        .chat_sse(&json!({"ask": "run it", "enable_tool_approval": true}))
        .await;
    let paused = events.last().unwrap().data.clone();
    assert_eq!(paused["pending_approvals"][0]["tool_call_id"], "slow");

    // The resume is accepted (its slot reserved), then runs the approved command for 2 s.
    let resume = json!({"ask": "", "stream": true, "enable_tool_approval": true,
        "conversation_history": paused["conversation_history"],
        "tool_decisions": [{"tool_call_id": "slow", "approved": true}]});
    let resumed = app.post_chat(&resume).await;
    assert_eq!(resumed.status(), 200);
    let reading = tokio::spawn(crate::helpers::read_events(resumed));
    eventually(
        "the approved command to run",
        Duration::from_secs(5),
        || async { dir.join("ran").exists() },
    )
    .await;
    // Meanwhile another request finds the model full: told to come back, at once.
    let other = app.post_chat(&json!({"ask": "hold the slot"})).await;
    assert_eq!(other.status(), 503);
    assert_eq!(
        other
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let events = reading.await.unwrap();
    assert_eq!(
        events.last().unwrap().name,
        "ai_answer_end",
        "{:?}",
        names(&events)
    );
    assert!(dir.join("ran").exists());
}

fn raw_call(id: &str, name: &str, arguments: &str) -> Step {
    Step::ToolCalls {
        content: None,
        calls: vec![ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }],
        usage: None,
    }
}

#[tokio::test]
async fn frontend_arguments_off_the_schema_go_back_to_the_model_never_to_the_client() {
    let app = spawn_app_with("").await;
    app.llm
        .push(raw_call("bad_type", "show_chart", r#"{"minutes": "ten"}"#));
    app.llm
        .push(raw_call("not_json", "show_chart", "minutes=10"));
    app.llm
        .push(raw_call("good", "show_chart", r#"{"minutes": 10}"#));
    let events = app
        .chat_sse(&json!({"ask": "chart it", "frontend_tools": [{
            "name": "show_chart", "description": "draws a chart", "mode": "pause",
            "parameters": {"type": "object", "properties": {"minutes": {"type": "integer"}},
                           "required": ["minutes"]}}]}))
        .await;
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e.name == "tool_calling_result")
        .map(|e| &e.data)
        .collect();
    assert_eq!(results.len(), 2, "{:?}", names(&events));
    assert_eq!(results[0]["tool_call_id"], "bad_type");
    assert_eq!(results[0]["result"]["status"], "error");
    assert!(
        results[0]["result"]["error"]
            .as_str()
            .unwrap()
            .contains("/minutes")
    );
    assert_eq!(results[1]["tool_call_id"], "not_json");
    assert!(
        results[1]["result"]["error"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
    // The model read both errors before it called again.
    let third = app.llm_messages(2);
    let tool_texts: Vec<&str> = third
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(tool_texts.len(), 2);
    let paused = &events.last().unwrap().data;
    assert_eq!(events.last().unwrap().name, "approval_required");
    assert_eq!(
        paused["pending_frontend_tool_calls"],
        json!([{"tool_call_id": "good", "tool_name": "show_chart", "arguments": {"minutes": 10}}])
    );
}

#[tokio::test]
async fn the_step_budget_belongs_to_the_turn_not_to_each_resume() {
    let app = spawn_app_with("[agent]\nmax_steps = 2\n").await;
    let dir = crate::helpers::tool_writable_dir("step-budget");
    let command = format!("touch {}/step", dir.display());
    app.llm
        .push(Step::tool("first", "bash", json!({"command": command})));
    app.llm.push(Step::text("Answered on the last step."));
    let events = app
        .chat_sse(&json!({"ask": "go", "enable_tool_approval": true}))
        .await;
    let paused = events.last().unwrap().data.clone();
    let events = app
        .chat_sse(&json!({"ask": "", "enable_tool_approval": true,
            "conversation_history": paused["conversation_history"],
            "tool_decisions": [{"tool_call_id": "first", "approved": true}]}))
        .await;
    assert_eq!(events.last().unwrap().name, "ai_answer_end");
    // The resumed call was the turn's second and last step: calls forbidden (the definitions
    // stay, the history holds calls), so approvals cannot stretch a turn past max_steps.
    let requests = app.llm.requests();
    assert_eq!(requests[0]["tool_choice"], "auto");
    assert!(requests[1].get("tools").is_some(), "{}", requests[1]);
    assert_eq!(requests[1]["tool_choice"], "none", "{}", requests[1]);
}

#[tokio::test]
async fn save_prefixes_is_refused_with_a_400_naming_it() {
    let app = spawn_app_with("").await;
    let (status, body) = app
        .chat_json(&json!({"ask": "", "conversation_history": [
                {"role": "user", "content": "hi"}],
            "tool_decisions": [{"tool_call_id": "c1", "approved": true,
                                "save_prefixes": ["kubectl delete"]}]}))
        .await;
    assert_eq!(status, 400, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("save_prefixes") && detail.contains("c1"),
        "{detail}"
    );
    // An empty list asks for nothing: the request goes on (here to the next check).
    let (status, body) = app
        .chat_json(&json!({"ask": "", "conversation_history": [
                {"role": "user", "content": "hi"}],
            "tool_decisions": [{"tool_call_id": "c1", "approved": true, "save_prefixes": []}]}))
        .await;
    assert_eq!(status, 400);
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("no pending approvals"), "{detail}");
}
