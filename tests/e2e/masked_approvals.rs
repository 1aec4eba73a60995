//! A YAML tool whose command expands `${VENDOR_KEY}` (a secret by `security.secret_env_vars`)
//! and needs approval: the key is `<secret-hidden>` wherever the waiting call is shown — the
//! conversation's `pending_actions`, its `approval_required` event (stored, replayed), the
//! webhook snapshots and event batches — under both confirmation policies that pause, and in
//! `/api/chat`'s `approval_required` frame. The approved call still runs the real command.

use std::time::Duration;

use serde_json::{Value, json};

use crate::conversations_api::{approve_until_finished, create, frames_until, state_is};
use crate::helpers::{TestApp, spawn_app_with};
use crate::webhook_receiver::{Got, Receiver};
use crate::webhooks_out::{SECRET, receiver_toml};
use fake_llm::Step;

/// The vendor's key, only in triage's environment (no other test reads `VENDOR_KEY`).
const VENDOR_KEY: &str = "vendor-key-7f3a9c21e5d4";
const MASK: &str = "<secret-hidden>";

fn vendor_toolset() -> &'static str {
    r#"
[security]
secret_env_vars = ["VENDOR_KEY"]
[yaml_toolsets.vendor]
description = "The vendor's order API"
requires_approval = true
[[yaml_toolsets.vendor.tools]]
name = "vendor_lookup"
description = "Looks an order up at the vendor"
command = "echo looked up {{ order }} with key ${VENDOR_KEY}"
"#
}

async fn vendor_app(extra: &str) -> TestApp {
    // SAFETY: set before the app starts, always to the same value; no other test reads it.
    unsafe { std::env::set_var("VENDOR_KEY", VENDOR_KEY) };
    spawn_app_with(&format!("{}\n{extra}", vendor_toolset())).await
}

pub(crate) fn assert_hidden(secret: &str, what: &str, text: &str) {
    assert!(!text.contains(secret), "{secret} in {what}: {text}");
}

async fn search_all(app: &TestApp, id: &str) -> Value {
    let (status, page) = app
        .get_json(&format!("/api/conversations/{id}/events/search?limit=100"))
        .await;
    assert_eq!(status, 200, "{page}");
    page
}

/// Every webhook body the receiver got for `id` once it has the conversation `finished`.
pub(crate) async fn webhook_bodies(app: &TestApp, receiver: &Receiver, id: &str) -> Vec<Got> {
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    let last = info["last_event_id"].as_u64().unwrap();
    let events_path = format!("/hooks/events/{id}");
    receiver
        .wait_for(Duration::from_secs(30), |got| {
            let snapshot_finished = got.iter().any(|g| {
                g.path == "/hooks/conversations"
                    && g.body["id"] == id
                    && g.body["execution_status"] == "finished"
            });
            let all_events = got
                .iter()
                .filter(|g| g.path == events_path)
                .flat_map(|g| g.body.as_array().cloned().unwrap_or_default())
                .any(|e| e["id"].as_u64() == Some(last));
            snapshot_finished && all_events
        })
        .await
        .into_iter()
        .filter(|g| g.path == events_path || g.body["id"] == id)
        .collect()
}

#[tokio::test]
async fn an_expanded_key_is_hidden_wherever_a_waiting_call_is_shown() {
    let receiver = Receiver::up(SECRET).await;
    let app = vendor_app(&receiver_toml(&receiver.url(), "")).await;
    for policy in ["ConfirmRisky", "AlwaysConfirm"] {
        app.llm
            .push(Step::tool("v1", "vendor_lookup", json!({"order": "42"})));
        app.llm.push(Step::text("Order 42 is fine."));
        let id = create(
            &app,
            json!({"confirmation_policy": {"kind": policy},
                   "initial_message": {"content": "How is order 42?"}}),
        )
        .await;
        let waiting = frames_until(&app, &id, None, state_is("waiting_for_confirmation")).await;
        let asked = waiting
            .iter()
            .find(|f| f.name == "approval_required")
            .expect("an approval_required event");
        let shown = &asked.data["pending_approvals"][0];
        assert_eq!(shown["tool_call_id"], "v1", "{policy}: {}", asked.data);
        assert_hidden(
            VENDOR_KEY,
            &format!("{policy}: approval_required"),
            &asked.data.to_string(),
        );
        assert!(
            shown["description"].as_str().unwrap().contains(MASK),
            "{policy}: {shown}"
        );
        let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
        let action = &info["pending_actions"][0];
        assert_eq!(action["waits_for"], "approval", "{info}");
        assert_eq!(
            action["description"],
            format!("echo looked up '42' with key {MASK}"),
            "{policy}: {info}"
        );
        assert_hidden(VENDOR_KEY, "GET conversation", &info.to_string());

        let frames = approve_until_finished(&app, &id).await;
        // The approved call ran the real command; its output is masked as before.
        let result = frames
            .iter()
            .rfind(|f| f.name == "tool_calling_result")
            .expect("the approved call's result");
        assert_eq!(
            result.data["result"]["data"].as_str().unwrap().trim(),
            format!("looked up 42 with key {MASK}"),
            "{policy}"
        );
        for frame in &frames {
            assert_hidden(
                VENDOR_KEY,
                &format!("stream {}", frame.name),
                &frame.data.to_string(),
            );
        }
        assert_hidden(
            VENDOR_KEY,
            "events/search",
            &search_all(&app, &id).await.to_string(),
        );
        let got = webhook_bodies(&app, &receiver, &id).await;
        assert!(
            got.iter()
                .any(|g| g.body["pending_actions"][0]["tool_call_id"] == "v1"),
            "a snapshot of the waiting conversation"
        );
        for g in &got {
            assert_hidden(VENDOR_KEY, &g.path, &String::from_utf8_lossy(&g.raw));
        }
    }
}

#[tokio::test]
async fn an_expanded_key_is_hidden_in_the_chat_approval_frame() {
    let app = vendor_app("").await;
    app.llm
        .push(Step::tool("v1", "vendor_lookup", json!({"order": "42"})));
    let events = app
        .chat_sse(&json!({"ask": "How is order 42?", "enable_tool_approval": true}))
        .await;
    let paused = events.last().unwrap();
    assert_eq!(paused.name, "approval_required");
    assert_eq!(
        paused.data["pending_approvals"][0]["description"],
        format!("echo looked up '42' with key {MASK}")
    );
    for event in &events {
        assert_hidden(VENDOR_KEY, &event.name, &event.data.to_string());
    }
    // Approved, the real command runs (the key was never in the call's arguments).
    app.llm.push(Step::text("Order 42 is fine."));
    let events = app
        .chat_sse(&json!({"ask": "", "enable_tool_approval": true,
            "conversation_history": paused.data["conversation_history"],
            "tool_decisions": [{"tool_call_id": "v1", "approved": true}]}))
        .await;
    let result = events
        .iter()
        .find(|e| e.name == "tool_calling_result")
        .expect("the approved call's result");
    assert_eq!(
        result.data["result"]["data"].as_str().unwrap().trim(),
        format!("looked up 42 with key {MASK}")
    );
    for event in &events {
        assert_hidden(VENDOR_KEY, &event.name, &event.data.to_string());
    }
}
