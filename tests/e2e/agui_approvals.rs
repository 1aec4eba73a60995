//! AG-UI approvals: a call that needs approval is an interrupt whose id carries `/api/chat`'s
//! signed token; resumed resolved it runs, cancelled or resolved with a no it is denied, and a
//! forged, altered or moved id never runs it.

use serde_json::{Value, json};

use crate::agui::{apply, find, input, post, run, user};
use crate::helpers::{TestApp, spawn_app, spawn_app_with};
use fake_llm::Step;

fn touch(dir: &std::path::Path) -> String {
    format!("touch {}/agui-approved", dir.display())
}

/// Run 1: the model asks for a command that needs approval. Returns the client's messages
/// and the interrupt.
async fn interrupted(app: &TestApp, command: &str) -> (Vec<Value>, Value) {
    app.llm
        .push(Step::tool("risky", "bash", json!({"command": command})));
    let mut messages = vec![user("fix it")];
    let events = run(app, &input(&messages)).await;
    let end = events.last().unwrap();
    assert_eq!(end["type"], "RUN_FINISHED");
    assert_eq!(end["outcome"]["type"], "interrupt", "{end}");
    let interrupts = end["outcome"]["interrupts"].as_array().unwrap();
    assert_eq!(interrupts.len(), 1);
    let interrupt = interrupts[0].clone();
    assert_eq!(interrupt["toolCallId"], "risky");
    assert_eq!(interrupt["reason"], "tool_approval");
    assert_eq!(interrupt["metadata"]["command"], command);
    assert_eq!(interrupt["metadata"]["toolName"], "bash");
    assert!(interrupt["expiresAt"].as_str().unwrap().ends_with('Z'));
    assert!(
        find(&events, "TOOL_CALL_RESULT").is_empty(),
        "nothing ran: {events:?}"
    );
    apply(&mut messages, &events);
    (messages, interrupt)
}

fn resume(messages: &[Value], interrupt_id: &Value, status: &str, payload: Option<Value>) -> Value {
    let mut body = input(messages);
    let mut entry = json!({"interruptId": interrupt_id, "status": status});
    if let Some(p) = payload {
        entry["payload"] = p;
    }
    body["resume"] = json!([entry]);
    body
}

#[tokio::test]
async fn an_approval_is_an_interrupt_and_resolving_it_runs_the_command() {
    let app = spawn_app().await;
    let dir = crate::helpers::tool_writable_dir("agui-approvals");
    let (messages, interrupt) = interrupted(&app, &touch(&dir)).await;
    assert!(!dir.join("agui-approved").exists());
    app.llm.push(Step::text("Fixed."));
    let events = run(&app, &resume(&messages, &interrupt["id"], "resolved", None)).await;
    assert!(
        dir.join("agui-approved").exists(),
        "the approved command ran"
    );
    let result = find(&events, "TOOL_CALL_RESULT")[0];
    assert_eq!(result["toolCallId"], "risky");
    assert!(
        find(&events, "TOOL_CALL_START").is_empty(),
        "the call is not sent again"
    );
    assert_eq!(
        events.last().unwrap()["outcome"],
        json!({"type": "success"})
    );
    // The model saw the call's result after its call, then answered.
    let roles: Vec<String> = app
        .llm_messages(1)
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
}

#[tokio::test]
async fn cancelling_or_resolving_with_a_no_denies_the_call() {
    for (status, payload) in [
        ("cancelled", None),
        (
            "resolved",
            Some(json!({"approved": false, "feedback": "not in prod"})),
        ),
    ] {
        let app = spawn_app().await;
        let dir = crate::helpers::tool_writable_dir("agui-approvals");
        let (messages, interrupt) = interrupted(&app, &touch(&dir)).await;
        app.llm.push(Step::text("Understood."));
        let events = run(
            &app,
            &resume(&messages, &interrupt["id"], status, payload.clone()),
        )
        .await;
        assert!(!dir.join("agui-approved").exists(), "{status}: nothing ran");
        let result = find(&events, "TOOL_CALL_RESULT")[0]["content"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(result.contains("denied"), "{result}");
        if payload.is_some() {
            assert!(result.contains("not in prod"), "{result}");
        }
        assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    }
}

#[tokio::test]
async fn a_forged_or_altered_interrupt_id_never_runs_the_command() {
    let app = spawn_app().await;
    let dir = crate::helpers::tool_writable_dir("agui-approvals");
    let (messages, interrupt) = interrupted(&app, &touch(&dir)).await;
    let id = interrupt["id"].as_str().unwrap();
    // The signature's last characters changed: refused, the model reads why.
    let mut forged = id[..id.len() - 2].to_owned();
    forged.push_str(if id.ends_with("AA") { "BB" } else { "AA" });
    app.llm.push(Step::text("I could not run it."));
    let events = run(&app, &resume(&messages, &json!(forged), "resolved", None)).await;
    let result = find(&events, "TOOL_CALL_RESULT")[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        result.contains("Approval token validation failed"),
        "{result}"
    );
    assert!(!dir.join("agui-approved").exists());

    // The command changed in the client's messages: the token no longer matches it.
    let mut altered = messages.clone();
    for m in &mut altered {
        if let Some(calls) = m["toolCalls"].as_array_mut() {
            calls[0]["function"]["arguments"] =
                json!(json!({"command": "rm -rf /tmp/x"}).to_string());
        }
    }
    app.llm.push(Step::text("Not run."));
    let events = run(&app, &resume(&altered, &interrupt["id"], "resolved", None)).await;
    assert!(
        find(&events, "TOOL_CALL_RESULT")[0]["content"]
            .as_str()
            .unwrap()
            .contains("validation failed")
    );

    // The history before the call changed: the id was issued for another conversation.
    let mut moved = messages.clone();
    moved[0]["content"] = json!("something else entirely");
    let resp = post(&app, &resume(&moved, &interrupt["id"], "resolved", None)).await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("different conversation"),
        "{body}"
    );

    // An id naming a call that is not there, and one that is not an id at all.
    let other = id.replacen(id.split('.').next().unwrap(), "b3RoZXI", 1);
    for (bad, says) in [
        (other.as_str(), "'other'"),
        ("garbage", "not an interrupt id"),
    ] {
        let resp = post(&app, &resume(&messages, &json!(bad), "resolved", None)).await;
        assert_eq!(resp.status(), 400);
        let body: Value = resp.json().await.unwrap();
        assert!(body["detail"].as_str().unwrap().contains(says), "{body}");
    }
    assert!(!dir.join("agui-approved").exists());
}

#[tokio::test]
async fn a_secret_the_model_writes_is_masked_everywhere_and_its_approval_never_runs() {
    let app = spawn_app_with("[security]\nsecrets = [\"s3cr3t-value-123\"]\n").await;
    let dir = crate::helpers::tool_writable_dir("agui-approvals");
    let command = format!("{} # s3cr3t-value-123", touch(&dir));
    app.llm
        .push(Step::tool("risky", "bash", json!({"command": command})));
    let mut messages = vec![user("fix it")];
    let events = run(&app, &input(&messages)).await;
    let text = serde_json::to_string(&events).unwrap();
    assert!(!text.contains("s3cr3t-value-123"), "{text}");
    let interrupt = events.last().unwrap()["outcome"]["interrupts"][0].clone();
    apply(&mut messages, &events);
    app.llm.push(Step::text("Not run."));
    let events = run(&app, &resume(&messages, &interrupt["id"], "resolved", None)).await;
    let result = find(&events, "TOOL_CALL_RESULT")[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(result.contains("hold a secret"), "{result}");
    assert!(
        !dir.join("agui-approved").exists(),
        "what was approved is not what was written"
    );
}
