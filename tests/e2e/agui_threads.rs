//! AG-UI on a server-side conversation: a `threadId` that is a stored conversation's id makes
//! the run that conversation's next turn (its stored history, its approvals), read back from
//! its log (frontend calls answered by the client's tool message); any other thread id stays
//! stateless. Refusals come before the stream.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::agui::{find, post, run, types, user};
use crate::conversations_api::{create, frames_until, state_is};
use crate::helpers::{TestApp, eventually, spawn_app};
use fake_llm::Step;

/// An input on thread `id` with `messages`.
fn on_thread(id: &str, messages: &[Value]) -> Value {
    json!({"threadId": id, "runId": uuid::Uuid::new_v4().to_string(), "messages": messages,
           "tools": [], "context": [], "state": {"panel": 1}, "forwardedProps": {}})
}

fn resume(id: &str, interrupt_id: &Value, status: &str, payload: Option<Value>) -> Value {
    let mut body = on_thread(id, &[user("fix it")]);
    let mut entry = json!({"interruptId": interrupt_id, "status": status});
    if let Some(p) = payload {
        entry["payload"] = p;
    }
    body["resume"] = json!([entry]);
    body
}

/// A conversation that has answered one question.
async fn answered(app: &TestApp) -> String {
    app.llm
        .push(Step::text("First answer: the pod is OOMKilled."));
    let id = create(
        app,
        json!({"initial_message": {"content": "why does my pod restart?"}}),
    )
    .await;
    frames_until(app, &id, None, state_is("finished")).await;
    id
}

async fn status(app: &TestApp, id: &str) -> String {
    let (code, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(code, 200, "{info}");
    info["execution_status"].as_str().unwrap().to_owned()
}

async fn refused(app: &TestApp, body: &Value) -> (u16, String) {
    let resp = post(app, body).await;
    let code = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap();
    (code, body["detail"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn a_thread_that_is_a_conversation_continues_it() {
    let app = spawn_app().await;
    let id = answered(&app).await;
    app.llm.push(Step::text("Raise its memory limit to 256Mi."));
    let events = run(&app, &on_thread(&id, &[user("what should I do?")])).await;
    assert_eq!(events[0]["threadId"], json!(id));
    assert_eq!(
        events[1],
        json!({"type": "STATE_SNAPSHOT", "snapshot": {"panel": 1}})
    );
    let text: String = find(&events, "TEXT_MESSAGE_CONTENT")
        .iter()
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Raise its memory limit to 256Mi.", "{events:?}");
    assert_eq!(
        events.last().unwrap()["outcome"],
        json!({"type": "success"})
    );
    // The model read the stored history, not the client's (which held only the question).
    let sent = app.llm_messages(1);
    let said: Vec<&str> = sent.iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(
        said.iter().any(|c| c.contains("First answer")),
        "the stored turn reached the model: {sent:?}"
    );
    // The turn is the conversation's: stored, and it is finished.
    assert_eq!(status(&app, &id).await, "finished");
    let (_, log) = app
        .get_json(&format!(
            "/api/conversations/{id}/events/search?kind=user_message"
        ))
        .await;
    let logged = log.to_string();
    assert!(logged.contains("what should I do?"), "{logged}");
    let (_, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(info["stats"]["llm_calls"], 2, "{info}");
}

#[tokio::test]
async fn an_interrupt_on_a_thread_resumed_approved_runs_the_command() {
    let app = spawn_app().await;
    let id = answered(&app).await;
    let dir = crate::helpers::tool_writable_dir("agui-thread");
    let command = format!("touch {}/approved", dir.display());
    app.llm
        .push(Step::tool("risky", "bash", json!({"command": command})));
    let events = run(&app, &on_thread(&id, &[user("fix it")])).await;
    let end = events.last().unwrap();
    assert_eq!(end["outcome"]["type"], "interrupt", "{end}");
    let interrupt = &end["outcome"]["interrupts"][0];
    assert_eq!(interrupt["id"], json!(format!("{id}:risky")));
    assert_eq!(interrupt["toolCallId"], "risky");
    assert_eq!(interrupt["metadata"]["command"], json!(command));
    assert_eq!(find(&events, "TOOL_CALL_START")[0]["toolCallId"], "risky");
    assert!(find(&events, "TOOL_CALL_RESULT").is_empty(), "{events:?}");
    assert!(!dir.join("approved").exists());
    assert_eq!(status(&app, &id).await, "waiting_for_confirmation");

    // A new message while it waits, and a resume naming no call it waits for, are refused.
    let (code, detail) = refused(&app, &on_thread(&id, &[user("hello?")])).await;
    assert_eq!(code, 409, "{detail}");
    assert!(detail.contains("resume"), "{detail}");
    for wrong in [
        json!("risky"),
        json!(format!("{id}:other")),
        json!(format!("{}:risky", uuid::Uuid::new_v4())),
    ] {
        let (code, detail) = refused(&app, &resume(&id, &wrong, "resolved", None)).await;
        assert_eq!(code, 400, "{wrong}: {detail}");
        assert!(detail.contains("names no tool call"), "{detail}");
    }
    let (code, detail) = refused(
        &app,
        &resume(
            &id,
            &interrupt["id"],
            "resolved",
            Some(json!({"approved": "no"})),
        ),
    )
    .await;
    assert_eq!(code, 400, "{detail}");
    assert!(!dir.join("approved").exists());

    app.llm.push(Step::text("Fixed."));
    let events = run(&app, &resume(&id, &interrupt["id"], "resolved", None)).await;
    assert!(dir.join("approved").exists(), "the approved command ran");
    assert_eq!(find(&events, "TOOL_CALL_RESULT")[0]["toolCallId"], "risky");
    assert!(find(&events, "TOOL_CALL_START").is_empty(), "{events:?}");
    let text: String = find(&events, "TEXT_MESSAGE_CONTENT")
        .iter()
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Fixed.");
    assert_eq!(
        events.last().unwrap()["outcome"],
        json!({"type": "success"})
    );
    assert_eq!(status(&app, &id).await, "finished");
}

#[tokio::test]
async fn an_interrupt_on_a_thread_cancelled_denies_the_call() {
    let app = spawn_app().await;
    let (code, info) = crate::conversations_api::post(&app, "/api/conversations", json!({})).await;
    assert_eq!(code, 201, "{info}");
    let id = info["id"].as_str().unwrap().to_owned();
    let dir = crate::helpers::tool_writable_dir("agui-thread-deny");
    let command = format!("touch {}/denied", dir.display());
    app.llm
        .push(Step::tool("risky", "bash", json!({"command": command})));
    let events = run(&app, &on_thread(&id, &[user("fix it")])).await;
    let interrupt = events.last().unwrap()["outcome"]["interrupts"][0].clone();
    assert_eq!(interrupt["id"], json!(format!("{id}:risky")));
    app.llm.push(Step::text("Left it alone."));
    let events = run(
        &app,
        &resume(
            &id,
            &interrupt["id"],
            "resolved",
            Some(json!({"approved": false, "feedback": "not in prod"})),
        ),
    )
    .await;
    assert!(!dir.join("denied").exists(), "a denied command never runs");
    assert_eq!(find(&events, "TOOL_CALL_RESULT")[0]["toolCallId"], "risky");
    assert_eq!(
        events.last().unwrap()["outcome"],
        json!({"type": "success"})
    );
    // The model was told why.
    let last = app.llm.requests().len() - 1;
    let sent = app.llm_messages(last).last().unwrap().to_string();
    assert!(sent.contains("not in prod"), "{sent}");
}

#[tokio::test]
async fn a_thread_naming_no_conversation_stays_stateless() {
    let app = spawn_app().await;
    let thread = uuid::Uuid::new_v4().to_string();
    app.llm.push(Step::text("Stateless answer."));
    let events = run(&app, &on_thread(&thread, &[user("hi")])).await;
    assert_eq!(events[0]["threadId"], json!(thread));
    assert!(types(&events).contains(&"TEXT_MESSAGE_CONTENT"));
    // No conversation was made or named.
    let (_, count) = app.get_json("/api/conversations/count").await;
    assert_eq!(count, json!(0), "{count}");
    let (code, _) = app.get_json(&format!("/api/conversations/{thread}")).await;
    assert_eq!(code, 404);
    // Its interrupts are the signed stateless ones.
    app.llm.push(Step::tool(
        "risky",
        "bash",
        json!({"command": "touch /tmp/x"}),
    ));
    let events = run(&app, &on_thread(&thread, &[user("fix it")])).await;
    let id = events.last().unwrap()["outcome"]["interrupts"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!id.starts_with(&thread) && id.contains('.'), "{id}");
}

#[tokio::test]
async fn a_running_conversation_is_refused_and_a_dropped_stream_leaves_the_run_going() {
    let app = spawn_app().await;
    let id = answered(&app).await;
    app.llm.push(Step::Slow {
        content: "slowly ".repeat(8),
        chunks: 8,
        interval: Duration::from_millis(250),
    });
    // The client reads RUN_STARTED and goes away.
    let resp = post(&app, &on_thread(&id, &[user("take your time")])).await;
    assert_eq!(resp.status(), 200);
    let mut stream = resp.bytes_stream();
    let first = stream.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("RUN_STARTED"));
    eventually("the conversation runs", Duration::from_secs(20), || async {
        status(&app, &id).await == "running"
    })
    .await;
    let (code, detail) = refused(&app, &on_thread(&id, &[user("and now?")])).await;
    assert_eq!(code, 409, "{detail}");
    assert!(detail.contains("already running"), "{detail}");
    drop(stream);
    eventually(
        "the run to go on without its stream",
        Duration::from_secs(20),
        || async { status(&app, &id).await == "finished" },
    )
    .await;
    let (_, answer) = app
        .get_json(&format!(
            "/api/conversations/{id}/events/search?kind=ai_answer_end"
        ))
        .await;
    assert!(answer.to_string().contains("slowly slowly"), "{answer}");
}

#[tokio::test]
async fn a_frontend_call_on_a_thread_is_answered_by_the_client_s_tool_message() {
    let app = spawn_app().await;
    let id = create(
        &app,
        json!({"frontend_tools": [{"name": "show_chart", "description": "Draws a chart"}]}),
    )
    .await;
    app.llm.push(Step::tool(
        "call_fe",
        "show_chart",
        json!({"metric": "cpu"}),
    ));
    let events = run(&app, &on_thread(&id, &[user("show me CPU")])).await;
    assert_eq!(
        events.last().unwrap()["outcome"],
        json!({"type": "success", "pendingToolCallIds": ["call_fe"]}),
        "{events:?}"
    );
    app.llm.push(Step::text("CPU peaked at 93%."));
    let messages = [
        user("show me CPU"),
        json!({"id": "a1", "role": "assistant", "toolCalls": [{"id": "call_fe", "type": "function",
            "function": {"name": "show_chart", "arguments": "{\"metric\":\"cpu\"}"}}]}),
        json!({"id": "t1", "role": "tool", "toolCallId": "call_fe", "content": "rendered: peak 93%"}),
    ];
    let events = run(&app, &on_thread(&id, &messages)).await;
    let text: String = find(&events, "TEXT_MESSAGE_CONTENT")
        .iter()
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "CPU peaked at 93%.", "{events:?}");
    let sent = app.llm_messages(1).last().unwrap().to_string();
    assert!(sent.contains("rendered: peak 93%"), "{sent}");
    assert_eq!(status(&app, &id).await, "finished");
}
