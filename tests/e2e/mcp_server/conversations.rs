//! The conversation tools over MCP: a background investigation, its status and events, its
//! approvals given and refused, follow-ups; and `list_models`.

use serde_json::{Value, json};

use super::{WAIT, call_tool, ok, text_of};
use crate::helpers::{TestApp, eventually, spawn_app, spawn_app_with};
use fake_llm::Step;

async fn wait_for_status(app: &TestApp, id: &str, wanted: &str) -> Value {
    eventually(
        &format!("the conversation to be {wanted}"),
        WAIT,
        || async {
            let result =
                call_tool(app, "conversation_status", json!({"conversation_id": id})).await;
            let status = ok(&result).clone();
            if status["status"] == wanted {
                Ok(status)
            } else {
                Err(status.to_string())
            }
        },
    )
    .await
}

#[tokio::test]
async fn conversations_run_in_the_background_and_wait_for_approval() {
    let app = spawn_app().await;
    let dir = crate::helpers::tool_writable_dir("mcp-conversation");
    let marker = dir.join("approved");
    let command = format!("touch {}", marker.display());
    app.llm
        .push(Step::tool("risky", "bash", json!({"command": command})));
    app.llm.push(Step::text("Touched it."));
    let started = call_tool(
        &app,
        "start_conversation",
        json!({"question": "touch the marker", "title": "mcp test"}),
    )
    .await;
    let id = ok(&started)["conversation_id"].as_str().unwrap().to_owned();

    let waiting = wait_for_status(&app, &id, "waiting_for_confirmation").await;
    assert_eq!(waiting["pending_approvals"][0]["tool_call_id"], "risky");
    assert_eq!(
        waiting["pending_approvals"][0]["description"],
        command.as_str()
    );
    assert_eq!(waiting["title"], "mcp test");
    assert!(!marker.exists());

    // Hostile decisions: a call that is not pending, a conversation that does not exist.
    let wrong = call_tool(
        &app,
        "approve",
        json!({"conversation_id": id, "tool_call_id": "nope"}),
    )
    .await;
    assert_eq!(wrong["isError"], true);
    assert!(text_of(&wrong).contains("waiting: risky"), "{wrong}");
    let missing = call_tool(
        &app,
        "approve",
        json!({"conversation_id": uuid::Uuid::new_v4().to_string()}),
    )
    .await;
    assert!(text_of(&missing).contains("not found"), "{missing}");
    let garbage = call_tool(
        &app,
        "conversation_status",
        json!({"conversation_id": "../etc"}),
    )
    .await;
    assert!(
        text_of(&garbage).contains("not a conversation id"),
        "{garbage}"
    );

    let approved = call_tool(
        &app,
        "approve",
        json!({"conversation_id": id, "tool_call_id": "risky", "comment": "go"}),
    )
    .await;
    assert_eq!(ok(&approved)["decided"], json!(["risky"]));
    let finished = wait_for_status(&app, &id, "finished").await;
    assert_eq!(finished["answer"], "Touched it.");
    assert!(marker.exists(), "the approved command ran");
    // Approving twice is refused: nothing waits any more.
    let again = call_tool(&app, "approve", json!({"conversation_id": id})).await;
    assert!(text_of(&again).contains("waits for no approval"), "{again}");

    // The log, page by page from a sequence number.
    let first = call_tool(
        &app,
        "conversation_events",
        json!({"conversation_id": id, "limit": 2}),
    )
    .await;
    let page = ok(&first);
    assert_eq!(page["events"].as_array().unwrap().len(), 2);
    assert_eq!(page["events"][0]["id"], 1);
    assert_eq!(page["more"], true);
    let rest = call_tool(
        &app,
        "conversation_events",
        json!({"conversation_id": id, "after": page["next_after"], "limit": 100}),
    )
    .await;
    let kinds: Vec<&str> = ok(&rest)["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"approval_required"), "{kinds:?}");
    assert!(kinds.contains(&"ai_answer_end"), "{kinds:?}");
    let end = ok(&rest)["next_after"].clone();
    let none = call_tool(
        &app,
        "conversation_events",
        json!({"conversation_id": id, "after": end}),
    )
    .await;
    assert_eq!(ok(&none)["events"], json!([]));
    let bad_limit = call_tool(
        &app,
        "conversation_events",
        json!({"conversation_id": id, "limit": 0}),
    )
    .await;
    assert_eq!(bad_limit["isError"], true);

    // A follow-up runs it again; a denial lets the agent carry on without the call.
    app.llm
        .push(Step::tool("again", "bash", json!({"command": command})));
    app.llm.push(Step::text("Fine, not touching it."));
    let sent = call_tool(
        &app,
        "send_message",
        json!({"conversation_id": id, "message": "touch it again"}),
    )
    .await;
    ok(&sent);
    wait_for_status(&app, &id, "waiting_for_confirmation").await;
    let denied = call_tool(
        &app,
        "deny",
        json!({"conversation_id": id, "comment": "not today"}),
    )
    .await;
    assert_eq!(ok(&denied)["approved"], false);
    let finished = wait_for_status(&app, &id, "finished").await;
    assert_eq!(finished["answer"], "Fine, not touching it.");
    assert!(
        app.llm
            .requests()
            .last()
            .unwrap()
            .to_string()
            .contains("not today")
    );
}

#[tokio::test]
async fn list_models_names_the_model_list() {
    let app =
        spawn_app_with("[models.second]\nmodel = \"openai/other\"\napi_base = \"{LLM}\"\n").await;
    let result = call_tool(&app, "list_models", json!({})).await;
    let models = ok(&result);
    assert_eq!(models["models"], json!(["fake", "second"]));
    assert_eq!(models["default"], "fake");
    assert!(text_of(&result).contains("\"second\""));
    let extra = call_tool(&app, "list_models", json!({"x": 1})).await;
    assert_eq!(extra["isError"], true);
}
