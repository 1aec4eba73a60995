//! Server-side conversations over HTTP, on SQLite and PostgreSQL (`conversations_pg.rs`): the
//! lifecycle, approvals in both shapes, replay after a reconnect, pause and interrupt, and
//! every refusal (stuck runs: `conversation_contract.rs`).

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::conversations_pg::on_both_stores;
use crate::helpers::{TestApp, eventually, json_body};
use fake_llm::Step;

on_both_stores! {
    lifecycle: lifecycle;
    approvals: approval_flow;
    pause_then_interrupt: pause_vs_interrupt;
    refusals: refusals_are_precise;
}

/// One frame of a conversation's event stream.
#[derive(Debug)]
pub(crate) struct Frame {
    pub id: u64,
    pub name: String,
    pub data: Value,
}

/// Sends `content` to conversation `id` and runs it: accepted (HTTP 200).
pub(crate) async fn send_and_run(app: &TestApp, id: &str, content: &str) {
    let (status, _) = post(
        app,
        &format!("/api/conversations/{id}/events"),
        json!({"content": content, "run": true}),
    )
    .await;
    assert_eq!(status, 200);
}

pub(crate) async fn post(app: &TestApp, path: &str, body: Value) -> (u16, Value) {
    let resp = app.post_raw(path, body.to_string()).await;
    let status = resp.status().as_u16();
    (status, json_body(resp).await)
}

pub(crate) async fn create(app: &TestApp, body: Value) -> String {
    let (status, info) = post(app, "/api/conversations", body).await;
    assert_eq!(status, 201, "{info}");
    info["id"].as_str().unwrap().to_owned()
}

/// Approves every pending call of `id` and reads its stream until it is `finished`.
pub(crate) async fn approve_until_finished(app: &TestApp, id: &str) -> Vec<Frame> {
    let (status, body) = post(
        app,
        &format!("/api/conversations/{id}/events/respond_to_confirmation"),
        json!({"accept": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    frames_until(app, id, None, state_is("finished")).await
}

/// Reads the stream (from `after`) until a frame satisfies `until`; every frame read.
pub(crate) async fn frames_until(
    app: &TestApp,
    id: &str,
    after: Option<u64>,
    until: impl Fn(&Frame) -> bool,
) -> Vec<Frame> {
    let mut request = app
        .client
        .get(app.url(&format!("/api/conversations/{id}/events/stream")));
    if let Some(after) = after {
        request = request.header("last-event-id", after.to_string());
    }
    let resp = request.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut events = resp.bytes_stream().eventsource();
    let mut out = Vec::new();
    loop {
        let next = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .expect("conversation stream stalled")
            .expect("stream ended early")
            .expect("SSE frame");
        let frame = Frame {
            id: next.id.parse().expect("every frame has an id"),
            name: next.event,
            data: serde_json::from_str(&next.data).unwrap(),
        };
        let stop = until(&frame);
        out.push(frame);
        if stop {
            return out;
        }
    }
}

pub(crate) fn state_is(status: &'static str) -> impl Fn(&Frame) -> bool {
    move |f| f.name == "conversation_state_update" && f.data["execution_status"] == status
}

/// Create, run, follow, replay, follow up, search.
async fn lifecycle(app: &TestApp) {
    app.llm.push(Step::text("All pods are healthy."));
    let id = create(
        app,
        json!({"title": "pods", "tags": {"team": "sre"},
               "initial_message": {"content": "Are my pods healthy?"}}),
    )
    .await;
    let frames = frames_until(app, &id, None, state_is("finished")).await;
    let ids: Vec<u64> = frames.iter().map(|f| f.id).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "gap-free from 1"
    );
    let names: Vec<&str> = frames.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names[0], "user_message");
    assert!(names.contains(&"ai_answer_end"), "{names:?}");
    let answer = frames.iter().find(|f| f.name == "ai_answer_end").unwrap();
    assert_eq!(answer.data["analysis"], "All pods are healthy.");
    assert!(answer.data.get("conversation_history").is_none());

    let (status, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(info["execution_status"], "finished");
    assert_eq!(info["title"], "pods");
    assert_eq!(info["stats"]["llm_calls"], 1);
    assert_eq!(info["last_event_id"], *ids.last().unwrap());

    // A reconnect with Last-Event-ID gets exactly what came after, then waits for more.
    let mid = ids[ids.len() / 2];
    let replay = frames_until(app, &id, Some(mid), state_is("finished")).await;
    assert_eq!(replay[0].id, mid + 1);
    assert_eq!(replay.last().unwrap().id, *ids.last().unwrap());

    // A follow-up continues the same conversation: the LLM sees the first exchange.
    app.llm.push(Step::text("Still healthy."));
    send_and_run(app, &id, "And now?").await;
    frames_until(app, &id, Some(*ids.last().unwrap()), state_is("finished")).await;
    let sent = app.llm_messages(1);
    assert!(sent.iter().any(|m| m["content"] == "All pods are healthy."));

    let (status, page) = app
        .get_json(&format!(
            "/api/conversations/{id}/events/search?kind=ai_answer_end&limit=10"
        ))
        .await;
    assert_eq!(status, 200);
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    let (_, count) = app
        .get_json(&format!(
            "/api/conversations/{id}/events/count?kind=user_message"
        ))
        .await;
    assert_eq!(count, 2);
    // A side question: answered from the context, stored nowhere.
    let (_, before) = app.get_json(&format!("/api/conversations/{id}")).await;
    app.llm.push(Step::text("Two checks, both healthy."));
    let (status, asked) = post(
        app,
        &format!("/api/conversations/{id}/ask_agent"),
        json!({"question": "Summarise in one line"}),
    )
    .await;
    assert_eq!(status, 200, "{asked}");
    assert_eq!(asked["response"], "Two checks, both healthy.");
    let (_, after) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(before["last_event_id"], after["last_event_id"]);
    let sent = app.llm_messages(app.llm.requests().len() - 1);
    assert_eq!(sent.last().unwrap()["content"], "Summarise in one line");
    assert!(sent.iter().any(|m| m["content"] == "Still healthy."));
    let (_, last) = app
        .get_json(&format!("/api/conversations/{id}/agent_final_response"))
        .await;
    assert_eq!(last["response"], "Still healthy.");
    let (status, _) = post(
        app,
        &format!("/api/conversations/{id}/confirmation_policy"),
        json!({"policy": {"kind": "AlwaysConfirm"}}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = post(
        app,
        &format!("/api/conversations/{id}/secrets"),
        json!({"secrets": {"DB_PASSWORD": "hunter2-very-secret"}}),
    )
    .await;
    assert_eq!(status, 200);
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(info["confirmation_policy"]["kind"], "AlwaysConfirm");
    assert!(!info.to_string().contains("hunter2-very-secret"));
    let (_, found) = app
        .get_json("/api/conversations/search?status=finished")
        .await;
    assert!(
        found["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == id.as_str())
    );
}

/// A risky call waits for confirmation; either shape answers it.
async fn approval_flow(app: &TestApp) {
    let dir = crate::helpers::tool_writable_dir("conversation-approval");
    let command = format!("touch {}/confirmed", dir.display());
    app.llm
        .push(Step::tool("risky", "bash", json!({"command": command})));
    app.llm.push(Step::text("Done."));
    let id = create(
        app,
        json!({"initial_message": {"content": "make the file"}}),
    )
    .await;
    frames_until(app, &id, None, state_is("waiting_for_confirmation")).await;
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(info["pending_actions"][0]["tool_call_id"], "risky");
    assert_eq!(info["pending_actions"][0]["waits_for"], "approval");
    assert!(!dir.join("confirmed").exists());
    // Nothing runs, is sent or is condensed while a confirmation is due.
    let (status, _) = post(app, &format!("/api/conversations/{id}/run"), json!({})).await;
    assert_eq!(status, 409);
    let (status, _) = post(
        app,
        &format!("/api/conversations/{id}/events"),
        json!({"content": "hurry"}),
    )
    .await;
    assert_eq!(status, 409);
    let (status, body) = post(app, &format!("/api/conversations/{id}/condense"), json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("confirmation"));
    // A decision for a call that does not wait here is refused, not taken as a denial of
    // the one that does: it still waits.
    let (status, body) = post(
        app,
        &format!("/api/conversations/{id}/events/respond_to_confirmation"),
        json!({"tool_decisions": [{"tool_call_id": "riksy", "approved": true}]}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("risky"), "{body}");
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(
        info["execution_status"], "waiting_for_confirmation",
        "{info}"
    );

    approve_until_finished(app, &id).await;
    assert!(dir.join("confirmed").exists());
    let (status, _) = post(
        app,
        &format!("/api/conversations/{id}/events/respond_to_confirmation"),
        json!({"tool_decisions": [{"tool_call_id": "risky", "approved": true}]}),
    )
    .await;
    assert_eq!(status, 409, "nothing is pending any more");
}

/// Waits until the fake LLM has a request in flight.
async fn until_llm_in_flight(app: &TestApp) {
    eventually(
        "the LLM call to be in flight",
        Duration::from_secs(5),
        || async { app.llm.in_flight() > 0 },
    )
    .await
}

/// Pause lets the step in flight finish (its tool runs, its result is kept) and stops before
/// the next LLM call: `paused`, never `finished`. Interrupt cuts the LLM call now.
async fn pause_vs_interrupt(app: &TestApp) {
    app.llm.push(Step::Paced {
        before: Duration::from_millis(500),
        between_chunks: Duration::ZERO,
        step: Box::new(Step::tool(
            "look",
            "bash",
            json!({"command": "echo paused-step"}),
        )),
    });
    let id = create(app, json!({"initial_message": {"content": "look around"}})).await;
    assert!(app.llm.wait_for_requests(1, Duration::from_secs(10)).await);
    // While it runs: no second run, no compaction.
    let (status, _) = post(app, &format!("/api/conversations/{id}/run"), json!({})).await;
    assert_eq!(status, 409);
    let (status, body) = post(app, &format!("/api/conversations/{id}/condense"), json!({})).await;
    assert_eq!(status, 409, "{body}");
    let (status, _) = post(app, &format!("/api/conversations/{id}/pause"), json!({})).await;
    assert_eq!(status, 200);
    let frames = frames_until(app, &id, None, state_is("paused")).await;
    let names: Vec<&str> = frames.iter().map(|f| f.name.as_str()).collect();
    assert!(names.contains(&"tool_calling_result"), "{names:?}");
    assert!(!names.contains(&"ai_answer_end"), "{names:?}");
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(info["execution_status"], "paused");
    assert!(info.get("reason").is_none(), "{info}");
    assert_eq!(app.llm.requests().len(), 1, "no LLM call after the pause");

    // Run again; this time interrupt while the LLM writes.
    app.llm.push(Step::HangAfterFirstChunk {
        first: "thinking".into(),
    });
    let last = info["last_event_id"].as_u64().unwrap();
    let (status, _) = post(app, &format!("/api/conversations/{id}/run"), json!({})).await;
    assert_eq!(status, 200);
    frames_until(app, &id, Some(last), state_is("running")).await;
    until_llm_in_flight(app).await;
    let (status, _) = post(
        app,
        &format!("/api/conversations/{id}/interrupt"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200);
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(info["execution_status"], "paused");
    assert_eq!(info["reason"], "interrupted");
    assert!(
        app.llm
            .wait_for_cancellations(1, Duration::from_secs(2))
            .await,
        "the LLM request was dropped"
    );
    // The paused step's tool result is in the history the next run sends.
    app.llm.push(Step::text("Done looking."));
    let (status, _) = post(app, &format!("/api/conversations/{id}/run"), json!({})).await;
    assert_eq!(status, 200);
    frames_until(app, &id, Some(last), state_is("finished")).await;
    let sent = app.llm_messages(app.llm.requests().len() - 1);
    assert!(
        sent.iter()
            .any(|m| m["role"] == "tool" && m["content"].as_str().unwrap().contains("paused-step")),
        "{sent:?}"
    );
}

async fn refusals_are_precise(app: &TestApp) {
    let missing = "6f1c3a52-5d0b-4c53-9f69-2d1f6a1b9e10";
    let (status, _) = app.get_json(&format!("/api/conversations/{missing}")).await;
    assert_eq!(status, 404);
    let (status, _) = app.get_json("/api/conversations/not-a-uuid").await;
    assert_eq!(status, 422);
    let (status, body) = post(app, "/api/conversations", json!({"tags": {"Team": "x"}})).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = post(app, "/api/conversations", json!({"model": "nope"})).await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = post(app, "/api/conversations", json!({"unknown": 1})).await;
    assert_eq!(status, 422);
    // A first message no run could take leaves no conversation behind.
    let (status, body) = post(
        app,
        "/api/conversations",
        json!({"initial_message": {"content": "look", "images": ["data:image/png;base64,iVBORw0KGgo="]}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (_, count) = app.get_json("/api/conversations/count").await;
    assert_eq!(count, 0);
    let id = create(app, json!({"id": missing})).await;
    assert_eq!(id, missing);
    let (status, _) = post(app, "/api/conversations", json!({"id": missing})).await;
    assert_eq!(status, 409);
    let (status, _) = post(
        app,
        &format!("/api/conversations/{id}/events/respond_to_confirmation"),
        json!({"accept": true}),
    )
    .await;
    assert_eq!(status, 409);
    let (status, _) = post(
        app,
        &format!("/api/conversations/{id}/events"),
        json!({"content": " "}),
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = app.get_json("/api/conversations/search?limit=1000").await;
    assert_eq!(status, 422);
    let resp = app
        .client
        .delete(app.url(&format!("/api/conversations/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (status, _) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 404);
}
