//! A conversation's own `secrets`, in the user's message and written by the model into a tool
//! call's arguments and into its answer: `<secret-hidden>` in `tool_calling_result.params` and
//! in everything a client or receiver gets — `events/search`, the event stream, webhook
//! deliveries, a fork's events — while the model reads, and the command runs with, what was
//! written. `/api/chat` does the same with the
//! server's secrets, and refuses to run an approved call whose arguments it only showed
//! masked.

use serde_json::{Value, json};

use crate::conversations_api::{create, frames_until, post, state_is};
use crate::helpers::{TestApp, spawn_app_with};
use crate::masked_approvals::{assert_hidden, webhook_bodies};
use crate::webhook_receiver::Receiver;
use crate::webhooks_out::{SECRET, receiver_toml};
use fake_llm::Step;

const DB_PASSWORD: &str = "db-password-s3cr3t-4711";
const MASK: &str = "<secret-hidden>";

async fn events_of(app: &TestApp, id: &str) -> Vec<Value> {
    let (status, page) = app
        .get_json(&format!("/api/conversations/{id}/events/search?limit=100"))
        .await;
    assert_eq!(status, 200, "{page}");
    page["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_conversations_secrets_in_the_models_arguments_reach_no_one() {
    let receiver = Receiver::up(SECRET).await;
    let app = spawn_app_with(&receiver_toml(&receiver.url(), "")).await;
    // The model writes the password into its command, then quotes it in its answer.
    app.llm.push(Step::tool(
        "c1",
        "bash",
        json!({"command": format!("echo {DB_PASSWORD} | wc -c")}),
    ));
    app.llm.push(Step::text(&format!(
        "The password {DB_PASSWORD} has 24 bytes."
    )));
    let id = create(
        &app,
        json!({"confirmation_policy": {"kind": "NeverConfirm"},
               "secrets": {"DB": DB_PASSWORD},
               "initial_message": {"content": format!("How long is {DB_PASSWORD}?")}}),
    )
    .await;
    let frames = frames_until(&app, &id, None, state_is("finished")).await;
    // The model read the question and its own call as they were written.
    let sent = app.llm.requests()[1]["messages"].to_string();
    assert!(
        sent.contains(&format!("How long is {DB_PASSWORD}?")),
        "{sent}"
    );
    assert!(
        sent.contains(&format!("echo {DB_PASSWORD} | wc -c")),
        "{sent}"
    );
    let asked = frames.iter().find(|f| f.name == "user_message").unwrap();
    assert_eq!(asked.data["content"], format!("How long is {MASK}?"));
    for frame in &frames {
        assert_hidden(
            DB_PASSWORD,
            &format!("stream {}", frame.name),
            &frame.data.to_string(),
        );
    }
    let result = frames
        .iter()
        .find(|f| f.name == "tool_calling_result")
        .expect("a tool result");
    assert_eq!(
        result.data["result"]["params"]["command"],
        format!("echo {MASK} | wc -c"),
        "{}",
        result.data
    );
    // The command ran with the real value: 23 characters and a newline.
    assert_eq!(result.data["result"]["data"].as_str().unwrap().trim(), "24");
    let answer = frames.iter().find(|f| f.name == "ai_answer_end").unwrap();
    assert_eq!(
        answer.data["analysis"],
        format!("The password {MASK} has 24 bytes.")
    );
    let (_, last) = app
        .get_json(&format!("/api/conversations/{id}/agent_final_response"))
        .await;
    assert_eq!(
        last["response"],
        format!("The password {MASK} has 24 bytes."),
        "{last}"
    );
    let log = events_of(&app, &id).await;
    let assistant = log
        .iter()
        .find(|e| e["kind"] == "message" && e["payload"]["message"]["role"] == "assistant")
        .expect("the assistant's message is logged");
    assert_eq!(
        assistant["payload"]["message"]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .map(|a| a.contains(MASK)),
        Some(true),
        "{assistant}"
    );
    for event in &log {
        assert_hidden(DB_PASSWORD, "events/search", &event.to_string());
    }
    for g in webhook_bodies(&app, &receiver, &id).await {
        assert_hidden(DB_PASSWORD, &g.path, &String::from_utf8_lossy(&g.raw));
    }

    // A fork copies the log as it is stored; its run goes on from the masked history.
    let (status, fork) = post(&app, &format!("/api/conversations/{id}/fork"), json!({})).await;
    assert_eq!(status, 201, "{fork}");
    let fork_id = fork["id"].as_str().unwrap();
    for event in events_of(&app, fork_id).await {
        assert_hidden(DB_PASSWORD, "the fork's events", &event.to_string());
    }
    assert_hidden(DB_PASSWORD, "the fork", &fork.to_string());
}

#[tokio::test]
async fn the_servers_secrets_in_the_models_arguments_are_hidden_from_the_chat_client() {
    let app = spawn_app_with(&format!("[security]\nsecrets = [\"{DB_PASSWORD}\"]\n")).await;
    app.llm.push(Step::tool(
        "c1",
        "bash",
        json!({"command": format!("echo {DB_PASSWORD} | wc -c")}),
    ));
    app.llm.push(Step::text("Done."));
    let events = app.chat_sse(&json!({"ask": "How long is it?"})).await;
    for event in &events {
        assert_hidden(DB_PASSWORD, &event.name, &event.data.to_string());
    }
    let result = events
        .iter()
        .find(|e| e.name == "tool_calling_result")
        .unwrap();
    assert_eq!(
        result.data["result"]["params"]["command"],
        format!("echo {MASK} | wc -c")
    );
    assert_eq!(result.data["result"]["data"].as_str().unwrap().trim(), "24");
}

/// The client only ever saw the call with the secret masked: an approval of that copy cannot
/// run the real command (the server keeps nothing), and running the masked text would run a
/// command nobody wrote. The call gets an error result saying why; the run goes on.
#[tokio::test]
async fn an_approved_call_shown_masked_is_refused_with_a_reason() {
    let app = spawn_app_with(&format!("[security]\nsecrets = [\"{DB_PASSWORD}\"]\n")).await;
    let dir = crate::helpers::tool_writable_dir("masked-approval");
    let command = format!("touch {}/{DB_PASSWORD}", dir.display());
    app.llm
        .push(Step::tool("risky", "bash", json!({"command": command})));
    let events = app
        .chat_sse(&json!({"ask": "make it", "enable_tool_approval": true}))
        .await;
    let paused = events.last().unwrap();
    assert_eq!(paused.name, "approval_required");
    for event in &events {
        assert_hidden(DB_PASSWORD, &event.name, &event.data.to_string());
    }
    assert_eq!(
        paused.data["pending_approvals"][0]["params"]["command"],
        format!("touch {}/{MASK}", dir.display())
    );
    app.llm.push(Step::text("Understood."));
    let events = app
        .chat_sse(&json!({"ask": "", "enable_tool_approval": true,
            "conversation_history": paused.data["conversation_history"],
            "tool_decisions": [{"tool_call_id": "risky", "approved": true}]}))
        .await;
    let result = events
        .iter()
        .find(|e| e.name == "tool_calling_result")
        .expect("the refused call's result");
    assert_eq!(result.data["result"]["status"], "error", "{}", result.data);
    assert!(
        result.data["result"]["error"]
            .as_str()
            .unwrap()
            .contains("secret"),
        "{}",
        result.data
    );
    assert_eq!(events.last().unwrap().name, "ai_answer_end");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "neither the real nor the masked command ran"
    );
}
