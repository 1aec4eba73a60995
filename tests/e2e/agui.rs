//! AG-UI at `POST /api/agui/chat`: the event stream, frontend tools, context, failures and bad
//! input (approvals: `agui_approvals.rs`). The
//! client side of a conversation is rebuilt here from the events as AG-UI clients do, and
//! sent back on the next run; `tests/browser/agui.test.mjs` does the same with `@ag-ui/client`.

use futures::StreamExt;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_with};
use eventsource_stream::Eventsource;
use fake_llm::Step;

pub(crate) async fn post(app: &TestApp, body: &Value) -> reqwest::Response {
    app.post_raw("/api/agui/chat", body.to_string()).await
}

/// Every event of a run, in order; the stream must end after its terminal event.
pub(crate) async fn run(app: &TestApp, body: &Value) -> Vec<Value> {
    let resp = post(app, body).await;
    assert_eq!(resp.status(), 200, "AG-UI status");
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut stream = resp.bytes_stream().eventsource();
    let mut events = Vec::new();
    while let Some(ev) = tokio::time::timeout(std::time::Duration::from_secs(30), stream.next())
        .await
        .expect("AG-UI stream stalled")
    {
        let ev = ev.expect("SSE event");
        events.push(serde_json::from_str::<Value>(&ev.data).expect("event JSON"));
    }
    check_sequence(&events);
    events
}

pub(crate) fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// The protocol's rules for one run: RUN_STARTED first, one terminal event last, every
/// content and end inside its start, nothing open at RUN_FINISHED, no null field anywhere.
pub(crate) fn check_sequence(events: &[Value]) {
    assert_eq!(events[0]["type"], "RUN_STARTED", "{events:?}");
    let mut open = std::collections::HashSet::new();
    for (i, e) in events.iter().enumerate() {
        let text = e.to_string();
        assert!(!text.contains(":null"), "null field in {text}");
        let t = e["type"].as_str().unwrap();
        let id = e["messageId"]
            .as_str()
            .or(e["toolCallId"].as_str())
            .unwrap_or_default()
            .to_owned();
        if t.ends_with("_START") {
            assert!(open.insert(format!("{t}:{id}")), "started twice: {text}");
        } else if t.ends_with("_CONTENT") || t == "TOOL_CALL_ARGS" {
            let start = t.replace("_CONTENT", "_START").replace("_ARGS", "_START");
            assert!(
                open.contains(&format!("{start}:{id}")),
                "{text} outside its start"
            );
        } else if t.ends_with("_END") {
            let start = t.replace("_END", "_START");
            assert!(
                open.remove(&format!("{start}:{id}")),
                "{text} without its start"
            );
        }
        let terminal = t == "RUN_FINISHED" || t == "RUN_ERROR";
        assert_eq!(
            terminal,
            i == events.len() - 1,
            "terminal event placement: {text}"
        );
        if t == "RUN_FINISHED" {
            assert!(open.is_empty(), "still open at RUN_FINISHED: {open:?}");
        }
    }
}

/// What an AG-UI client keeps of a run: its messages rebuilt from the events.
pub(crate) fn apply(messages: &mut Vec<Value>, events: &[Value]) {
    for e in events {
        match e["type"].as_str().unwrap() {
            "TEXT_MESSAGE_START" => {
                messages.push(json!({"id": e["messageId"], "role": e["role"], "content": ""}))
            }
            "TEXT_MESSAGE_CONTENT" | "REASONING_MESSAGE_CONTENT" => {
                let m = messages
                    .iter_mut()
                    .find(|m| m["id"] == e["messageId"])
                    .unwrap();
                let text = format!(
                    "{}{}",
                    m["content"].as_str().unwrap(),
                    e["delta"].as_str().unwrap()
                );
                m["content"] = json!(text);
            }
            "REASONING_MESSAGE_START" => {
                messages.push(json!({"id": e["messageId"], "role": "reasoning", "content": ""}))
            }
            "TOOL_CALL_START" => {
                let call = json!({"id": e["toolCallId"], "type": "function",
                    "function": {"name": e["toolCallName"], "arguments": ""}});
                match messages.iter_mut().find(|m| m["id"] == e["parentMessageId"]) {
                    Some(m) => {
                        if m["toolCalls"].is_null() {
                            m["toolCalls"] = json!([]);
                        }
                        m["toolCalls"].as_array_mut().unwrap().push(call);
                    }
                    None => messages.push(json!({"id": e["parentMessageId"], "role": "assistant", "toolCalls": [call]})),
                }
            }
            "TOOL_CALL_ARGS" => {
                let call = messages
                    .iter_mut()
                    .flat_map(|m| m["toolCalls"].as_array_mut().into_iter().flatten())
                    .find(|c| c["id"] == e["toolCallId"])
                    .unwrap();
                let args = format!(
                    "{}{}",
                    call["function"]["arguments"].as_str().unwrap(),
                    e["delta"].as_str().unwrap()
                );
                call["function"]["arguments"] = json!(args);
            }
            "TOOL_CALL_RESULT" => {
                let owner = messages.iter().position(|m| {
                    m["toolCalls"]
                        .as_array()
                        .is_some_and(|c| c.iter().any(|c| c["id"] == e["toolCallId"]))
                });
                let message = json!({"id": e["messageId"], "role": "tool", "toolCallId": e["toolCallId"], "content": e["content"]});
                match owner {
                    Some(mut at) => {
                        at += 1;
                        while messages.get(at).is_some_and(|m| m["role"] == "tool") {
                            at += 1;
                        }
                        messages.insert(at, message);
                    }
                    None => messages.push(message),
                }
            }
            _ => {}
        }
    }
}

pub(crate) fn input(messages: &[Value]) -> Value {
    json!({"threadId": "thread-1", "runId": uuid::Uuid::new_v4().to_string(), "messages": messages,
           "tools": [], "context": [], "state": {}, "forwardedProps": {}})
}

pub(crate) fn user(text: &str) -> Value {
    json!({"id": uuid::Uuid::new_v4().to_string(), "role": "user", "content": text})
}

pub(crate) fn find<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

#[tokio::test]
async fn text_streams_as_token_deltas_and_the_run_reports_usage_and_state() {
    let app = spawn_app().await;
    app.llm
        .push(Step::text("The pod is OOMKilled: its limit is 64Mi."));
    let mut body = input(&[user("why does my pod restart?")]);
    body["state"] = json!({"cluster": "prod", "n": 1});
    body["parentRunId"] = json!("run-0");
    let events = run(&app, &body).await;
    assert_eq!(events[0]["threadId"], "thread-1");
    assert_eq!(events[0]["runId"], body["runId"]);
    assert_eq!(events[0]["parentRunId"], "run-0");
    assert_eq!(
        events[1],
        json!({"type": "STATE_SNAPSHOT", "snapshot": {"cluster": "prod", "n": 1}})
    );
    let deltas = find(&events, "TEXT_MESSAGE_CONTENT");
    assert!(deltas.len() >= 2, "streamed as deltas: {events:?}");
    let text: String = deltas
        .iter()
        .map(|d| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "The pod is OOMKilled: its limit is 64Mi.");
    assert_eq!(find(&events, "TEXT_MESSAGE_START")[0]["role"], "assistant");
    let end = events.last().unwrap();
    assert_eq!(end["type"], "RUN_FINISHED");
    assert_eq!(end["outcome"], json!({"type": "success"}));
    let usage = &end["usage"][0];
    assert_eq!(usage["model"], "fake");
    assert!(usage["provider"].is_string());
    assert!(usage["inputTokens"].as_u64().unwrap() > 0);
    assert_eq!(
        usage["totalTokens"].as_u64().unwrap(),
        usage["inputTokens"].as_u64().unwrap() + usage["outputTokens"].as_u64().unwrap()
    );
}

#[tokio::test]
async fn reasoning_is_a_reasoning_span_and_never_goes_back_to_the_model() {
    let app = spawn_app().await;
    app.llm.push(Step::text_with_reasoning(
        "Check the limits first.",
        "It is the limit.",
    ));
    let events = run(&app, &input(&[user("why?")])).await;
    let t = types(&events);
    let start = t.iter().position(|t| *t == "REASONING_START").unwrap();
    assert_eq!(
        t[start..start + 5],
        [
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END"
        ]
    );
    assert_eq!(events[start + 2]["delta"], "Check the limits first.");
    let mut messages = vec![user("why?")];
    apply(&mut messages, &events);
    messages.push(user("and now?"));
    app.llm.push(Step::text("Still the limit."));
    run(&app, &input(&messages)).await;
    let sent = serde_json::to_string(&app.llm_messages(1)).unwrap();
    assert!(!sent.contains("Check the limits first."), "{sent}");
    assert!(sent.contains("It is the limit."));
}

#[tokio::test]
async fn a_backend_tool_call_streams_its_call_and_its_result() {
    let app = spawn_app().await;
    app.llm.push(Step::tool(
        "c1",
        "bash",
        json!({"command": "echo hello-from-tool"}),
    ));
    app.llm.push(Step::text("It said hello."));
    let events = run(&app, &input(&[user("say hello")])).await;
    let start = find(&events, "TOOL_CALL_START")[0];
    assert_eq!(start["toolCallId"], "c1");
    assert_eq!(start["toolCallName"], "bash");
    assert!(start["parentMessageId"].is_string());
    let args: String = find(&events, "TOOL_CALL_ARGS")
        .iter()
        .map(|a| a["delta"].as_str().unwrap())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args).unwrap(),
        json!({"command": "echo hello-from-tool"})
    );
    let result = find(&events, "TOOL_CALL_RESULT")[0];
    assert_eq!(result["toolCallId"], "c1");
    assert_eq!(result["role"], "tool");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("hello-from-tool"),
        "{result}"
    );
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    let t = types(&events);
    let result_at = t.iter().position(|t| *t == "TOOL_CALL_RESULT").unwrap();
    assert!(t.iter().position(|t| *t == "TOOL_CALL_END").unwrap() < result_at);
    assert!(t.iter().rposition(|t| *t == "TEXT_MESSAGE_START").unwrap() > result_at);
}

#[tokio::test]
async fn a_frontend_tool_ends_the_run_and_its_result_continues_it() {
    let app = spawn_app().await;
    let tools = json!([{"name": "show_chart", "description": "Render a chart in the user's browser",
        "parameters": {"type": "object", "properties": {"metric": {"type": "string"}}, "required": ["metric"]}}]);
    app.llm
        .push(Step::tool("fe1", "show_chart", json!({"metric": "cpu"})));
    let mut messages = vec![user("show me CPU")];
    let mut body = input(&messages);
    body["tools"] = tools.clone();
    let events = run(&app, &body).await;
    let end = events.last().unwrap();
    assert_eq!(
        end["outcome"],
        json!({"type": "success", "pendingToolCallIds": ["fe1"]})
    );
    assert_eq!(
        find(&events, "TOOL_CALL_START")[0]["toolCallName"],
        "show_chart"
    );
    assert!(find(&events, "TOOL_CALL_RESULT").is_empty());
    let offered = app.llm.requests()[0]["tools"].to_string();
    assert!(offered.contains("show_chart"));

    apply(&mut messages, &events);
    messages.push(
        json!({"id": "r1", "role": "tool", "toolCallId": "fe1", "content": "rendered: peak 93%"}),
    );
    app.llm.push(Step::text("CPU peaked at 93%."));
    let mut body = input(&messages);
    body["tools"] = tools;
    let events = run(&app, &body).await;
    assert!(
        find(&events, "TOOL_CALL_RESULT").is_empty(),
        "the client holds its own result"
    );
    let sent = app.llm_messages(1);
    let result = sent.iter().find(|m| m["tool_call_id"] == "fe1").unwrap();
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("rendered: peak 93%")
    );
    assert_eq!(
        events.last().unwrap()["outcome"],
        json!({"type": "success"})
    );
}

#[tokio::test]
async fn context_and_client_instructions_reach_the_model() {
    let app = spawn_app().await;
    app.llm.push(Step::text("ok"));
    let mut body = input(&[
        json!({"id": "s", "role": "system", "content": "Answer in one sentence."}),
        user("what is wrong?"),
    ]);
    body["context"] = json!([{"description": "Current namespace", "value": "payments-prod"}]);
    run(&app, &body).await;
    let prompt = app.system_prompt_sent(0);
    assert!(
        prompt.contains("Current namespace: payments-prod"),
        "{prompt}"
    );
    assert!(prompt.contains("Answer in one sentence."));
    let roles: Vec<String> = app
        .llm_messages(0)
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(roles, ["system", "user"]);
}

#[tokio::test]
async fn an_llm_failure_is_run_error_and_nothing_follows() {
    let app = spawn_app().await;
    app.llm
        .set_default(Step::error(400, "the provider refused: bad request"));
    let events = run(&app, &input(&[user("why?")])).await;
    let end = events.last().unwrap();
    assert_eq!(end["type"], "RUN_ERROR", "{events:?}");
    assert!(
        end["message"].as_str().unwrap().contains("bad request"),
        "{end}"
    );
    assert!(end["code"].is_string());
    assert_eq!(types(&events)[0], "RUN_STARTED");
}

#[tokio::test]
async fn malformed_inputs_are_refused_before_the_stream_with_a_precise_error() {
    let app = spawn_app().await;
    let cases: Vec<(String, u16, &str)> = vec![
        ("not json".into(), 400, ""),
        ("[1]".into(), 422, "JSON object"),
        (json!({"runId": "r", "messages": []}).to_string(), 422, "threadId"),
        (json!({"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "robot", "content": "x"}]}).to_string(), 422, "messages"),
        (json!({"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "user", "content": 5}]}).to_string(), 422, "messages"),
        (json!({"threadId": "t", "runId": "r", "messages": []}).to_string(), 400, "nothing to answer"),
        (json!({"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "tool", "toolCallId": "x", "content": "y"}]}).to_string(), 400, "answers no tool call"),
        (json!({"threadId": "t", "runId": "r", "messages": [user("q")], "resume": [{"interruptId": "a.b", "status": "maybe"}]}).to_string(), 422, "resume"),
        (json!({"threadId": "t", "runId": "r", "messages": [user("q")], "resume": [{"interruptId": "a.b", "status": "resolved"}]}).to_string(), 400, "no assistant message"),
        (json!({"threadId": "t", "runId": "r", "messages": [user("q")], "forwardedProps": {"model": "no-such-model"}}).to_string(), 400, "no-such-model"),
    ];
    for (body, status, says) in cases {
        let resp = app.post_raw("/api/agui/chat", body.clone()).await;
        assert_eq!(resp.status().as_u16(), status, "{body}");
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        let text = resp.text().await.unwrap();
        assert!(text.contains(says), "{body} → {text}");
    }
    assert_eq!(app.llm.request_count(), 0, "no bad input reached the model");
}

#[tokio::test]
async fn an_api_key_is_required_when_one_is_configured() {
    let app = spawn_app_with("[server]\napi_keys = [\"key-one-111\"]\n").await;
    let body = input(&[user("q")]).to_string();
    let resp = app.post_raw("/api/agui/chat", body.clone()).await;
    assert_eq!(resp.status(), 401);
    app.llm.push(Step::text("ok"));
    let resp = app
        .client
        .post(app.url("/api/agui/chat"))
        .header("content-type", "application/json")
        .header("authorization", "Bearer key-one-111")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(text.contains("RUN_FINISHED"), "{text}");
}

#[tokio::test]
async fn headlamp_s_probe_of_the_root_finds_the_server_alive() {
    // Headlamp's probe sends no Accept header and takes a success, 404, 405 or 422 as alive.
    let app = spawn_app_with("[server]\napi_keys = [\"key-one-111\"]\n").await;
    let resp = app.client.get(app.url("/")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let resp = app
        .client
        .get(app.url("/api/agui/chat"))
        .send()
        .await
        .unwrap();
    assert!(
        [401, 405].contains(&resp.status().as_u16()),
        "{}",
        resp.status()
    );
}
