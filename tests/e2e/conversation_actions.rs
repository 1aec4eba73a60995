//! Work on a whole conversation beside its runs, over HTTP on both stores: `condense`,
//! `generate_title` and auto-titling, `fork`, and text deltas on the event stream.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::conversations_api::{create, frames_until, post, send_and_run, state_is};
use crate::conversations_pg::on_both_stores;
use crate::helpers::{TestApp, eventually};
use fake_llm::Step;

on_both_stores! {
    condense: condense_flow;
    titles: title_flow;
    auto_title: auto_title_flow;
    fork: fork_flow;
    fork_while_running: fork_of_a_running_conversation;
    deltas: deltas_flow;
}

/// About `n` words, so a history is clearly larger than its summary.
fn words(n: usize) -> String {
    (0..n).map(|i| format!("w{} ", i % 97)).collect()
}

async fn info(app: &TestApp, id: &str) -> Value {
    let (status, info) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 200, "{info}");
    info
}

async fn events(app: &TestApp, id: &str) -> Vec<Value> {
    let (status, page) = app
        .get_json(&format!("/api/conversations/{id}/events/search?limit=100"))
        .await;
    assert_eq!(status, 200, "{page}");
    page["items"].as_array().unwrap().clone()
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["kind"].as_str().unwrap()).collect()
}

/// The messages of the LLM's latest request.
fn last_sent(app: &TestApp) -> Vec<Value> {
    app.llm_messages(app.llm.requests().len() - 1)
}

fn contents(messages: &[Value]) -> String {
    serde_json::to_string(messages).unwrap()
}

async fn condense_flow(app: &TestApp) {
    let missing = "1c0ffee0-0000-4000-8000-000000000000";
    let (status, _) = post(
        app,
        &format!("/api/conversations/{missing}/condense"),
        json!({}),
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = post(app, "/api/conversations/nope/condense", json!({})).await;
    assert_eq!(status, 422);
    let empty = create(app, json!({})).await;
    let (status, body) = post(
        app,
        &format!("/api/conversations/{empty}/condense"),
        json!({}),
    )
    .await;
    assert_eq!(status, 409, "{body}");

    app.llm
        .push(Step::text(&format!("Checkout is slow: {}", words(300))));
    let id = create(
        app,
        json!({"initial_message": {"content": format!("Why is checkout slow? {}", words(300))}}),
    )
    .await;
    frames_until(app, &id, None, state_is("finished")).await;
    let first = info(app, &id).await["last_event_id"].as_u64();
    app.llm.push(Step::text("Still slow."));
    send_and_run(app, &id, "And now?").await;
    frames_until(app, &id, first, state_is("finished")).await;
    let before = info(app, &id).await;
    app.llm.push(Step::text(
        "<summary>SUMMARY-MARKER: the database is slow</summary>",
    ));
    let (status, body) = post(app, &format!("/api/conversations/{id}/condense"), json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"success": true}));
    // The summary request offers no tools.
    assert!(app.llm.requests().last().unwrap().get("tools").is_none());
    let log = events(app, &id).await;
    let last = before["last_event_id"].as_u64().unwrap() as usize;
    assert_eq!(
        kinds(&log[last..]),
        [
            "conversation_history_compaction_start",
            "conversation_history_compacted",
            "ai_message",
            "token_count"
        ]
    );
    let after = info(app, &id).await;
    assert_eq!(after["execution_status"], "finished", "the status is kept");
    assert_eq!(
        after["stats"]["llm_calls"], 3,
        "the summary call is counted"
    );
    assert!(
        after["stats"]["context_tokens"].as_u64() < before["stats"]["context_tokens"].as_u64(),
        "{before} {after}"
    );
    // The saved state is the summary plus the last exchange: the next run sends that.
    app.llm.push(Step::text("Still the database."));
    send_and_run(app, &id, "Any change?").await;
    frames_until(
        app,
        &id,
        Some(after["last_event_id"].as_u64().unwrap()),
        state_is("finished"),
    )
    .await;
    let sent = last_sent(app);
    let roles: Vec<&str> = sent.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["system", "user", "user", "assistant", "user"],
        "{sent:?}"
    );
    assert!(
        sent[1]["content"]
            .as_str()
            .unwrap()
            .contains("SUMMARY-MARKER")
    );
    assert!(contents(&sent[2..3]).contains("And now?"));
    assert_eq!(sent[3]["content"], "Still slow.");
    assert!(
        !contents(&sent).contains("w96"),
        "the first exchange is summarised away"
    );
    assert_eq!(app.llm.remaining(), 0);

    // A summary no smaller than the history is not kept; the log says so.
    app.llm.push(Step::text("Fine."));
    let short = create(app, json!({"initial_message": {"content": "ok?"}})).await;
    frames_until(app, &short, None, state_is("finished")).await;
    let before = info(app, &short).await;
    app.llm.push(Step::text(&words(400)));
    let (status, body) = post(
        app,
        &format!("/api/conversations/{short}/condense"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"success": false}));
    let log = events(app, &short).await;
    let last = before["last_event_id"].as_u64().unwrap() as usize;
    assert_eq!(
        kinds(&log[last..]),
        ["conversation_history_compaction_start", "ai_message"]
    );
    assert!(
        log.last().unwrap()["payload"]["content"]
            .as_str()
            .unwrap()
            .contains("kept")
    );
}

async fn title_flow(app: &TestApp) {
    let empty = create(app, json!({})).await;
    let (status, body) = post(
        app,
        &format!("/api/conversations/{empty}/generate_title"),
        json!({}),
    )
    .await;
    assert_eq!(status, 409, "no user message yet: {body}");
    let missing = "1c0ffee0-0000-4000-8000-000000000001";
    let (status, _) = post(
        app,
        &format!("/api/conversations/{missing}/generate_title"),
        json!({}),
    )
    .await;
    assert_eq!(status, 404);

    app.llm.push(Step::text("Restarts are OOM kills."));
    let id = create(
        app,
        json!({"initial_message": {"content": "Why does checkout-7f9 restart every hour?"}}),
    )
    .await;
    frames_until(app, &id, None, state_is("finished")).await;
    assert_eq!(titled(app, &id).await, crate::helpers::FAKE_TITLE);
    app.titles.push(Step::text(
        "Title: \"Checkout pod restarts hourly.\"\nexplanation",
    ));
    // An empty body is the defaults.
    let resp = app
        .post_raw(
            &format!("/api/conversations/{id}/generate_title"),
            String::new(),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let body = crate::helpers::json_body(resp).await;
    assert_eq!(body, json!({"title": "Checkout pod restarts hourly"}));
    assert_eq!(
        info(app, &id).await["title"],
        "Checkout pod restarts hourly"
    );
    let request = app.titles.requests().last().unwrap().clone();
    assert!(request.get("tools").is_none());
    assert!(contents(request["messages"].as_array().unwrap()).contains("checkout-7f9"));

    app.titles.push(Step::text(
        "Checkout pod restarts every hour after each deploy",
    ));
    let (status, body) = post(
        app,
        &format!("/api/conversations/{id}/generate_title"),
        json!({"max_length": 20}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let title = body["title"].as_str().unwrap();
    assert!(title.chars().count() <= 20, "{title}");
    assert_eq!(info(app, &id).await["title"], title);
    for bad in [
        json!({"max_length": 0}),
        json!({"max_length": 201}),
        json!({"max_length": "x"}),
        json!({"max": 3}),
    ] {
        let (status, body) = post(
            app,
            &format!("/api/conversations/{id}/generate_title"),
            bad.clone(),
        )
        .await;
        assert_eq!(status, 422, "{bad}: {body}");
    }
}

/// Waits until the conversation's title is set; panics after 10 s.
async fn titled(app: &TestApp, id: &str) -> String {
    let what = format!("conversation {id} to be titled");
    eventually(&what, Duration::from_secs(10), || async {
        info(app, id).await["title"].as_str().map(str::to_owned)
    })
    .await
}

async fn auto_title_flow(app: &TestApp) {
    app.llm.push(Step::text("The pods are fine."));
    app.titles.push(Step::text("Pod health check"));
    let id = create(
        app,
        json!({"initial_message": {"content": "Are my pods healthy?"}}),
    )
    .await;
    frames_until(app, &id, None, state_is("finished")).await;
    assert_eq!(titled(app, &id).await, "Pod health check");
    let request = app.titles.requests()[0].clone();
    assert!(request.get("tools").is_none(), "no tools for a title");
    assert!(contents(request["messages"].as_array().unwrap()).contains("Are my pods healthy?"));
    assert_eq!(
        app.llm.requests().len(),
        1,
        "the title took no scripted answer"
    );

    // Only after the first answer.
    app.llm.push(Step::text("Still fine."));
    let last = info(app, &id).await["last_event_id"].as_u64().unwrap();
    send_and_run(app, &id, "And now?").await;
    frames_until(app, &id, Some(last), state_is("finished")).await;
    // A title given at creation is never replaced.
    app.llm.push(Step::text("Answer."));
    let named = create(
        app,
        json!({"title": "mine", "initial_message": {"content": "Anything wrong?"}}),
    )
    .await;
    frames_until(app, &named, None, state_is("finished")).await;
    // An absence: the background title work is given the time to go wrong.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        app.titles.request_count(),
        1,
        "no title request after these answers"
    );
    assert_eq!(info(app, &named).await["title"], "mine");

    // A failed title request leaves the title empty and the run finished.
    app.llm.push(Step::text("Answer."));
    app.titles.push(Step::Error {
        status: 400,
        message: "no titles today".into(),
        retry_after: None,
    });
    let failed = create(
        app,
        json!({"initial_message": {"content": "Check the disks"}}),
    )
    .await;
    frames_until(app, &failed, None, state_is("finished")).await;
    eventually(
        "the title to be requested",
        Duration::from_secs(10),
        || async { app.titles.request_count() == 2 },
    )
    .await;
    // An absence again: a title stored after the refusal would show by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let failed_info = info(app, &failed).await;
    assert_eq!(failed_info["title"], Value::Null);
    assert_eq!(failed_info["execution_status"], "finished");
    // Not tried again after a later answer.
    app.llm.push(Step::text("Again."));
    send_and_run(app, &failed, "And the network?").await;
    frames_until(
        app,
        &failed,
        failed_info["last_event_id"].as_u64(),
        state_is("finished"),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(app.titles.request_count(), 2);
    assert_eq!(app.llm.requests().len(), 5);
    assert_eq!(info(app, &failed).await["title"], Value::Null);
}

async fn fork_flow(app: &TestApp) {
    app.llm.push(Step::tool(
        "look",
        "bash",
        json!({"command": "echo forked-output"}),
    ));
    app.llm.push(Step::text("Looked."));
    let source = create(
        app,
        json!({"title": "src", "tags": {"team": "sre"}, "initial_message": {"content": "look"}}),
    )
    .await;
    frames_until(app, &source, None, state_is("finished")).await;
    let src = info(app, &source).await;
    let src_log = events(app, &source).await;
    let last = src["last_event_id"].as_u64().unwrap();

    // The whole log, same ids, then the fork's own state update.
    let (status, fork) = post(app, &format!("/api/conversations/{source}/fork"), json!({})).await;
    assert_eq!(status, 201, "{fork}");
    let fork_id = fork["id"].as_str().unwrap().to_owned();
    assert_ne!(fork_id, source);
    assert_eq!(fork["execution_status"], "idle");
    assert_eq!(fork["title"], "src");
    assert_eq!(fork["tags"], json!({"team": "sre"}));
    assert_eq!(fork["last_event_id"], last + 1);
    assert_eq!(
        fork["stats"]["llm_calls"], 0,
        "metrics start fresh by default"
    );
    let fork_log = events(app, &fork_id).await;
    assert_eq!(fork_log[..last as usize], src_log[..]);
    let boundary = &fork_log[last as usize];
    assert_eq!(boundary["kind"], "conversation_state_update");
    assert_eq!(boundary["payload"]["execution_status"], "idle");
    assert!(
        boundary["payload"]["reason"]
            .as_str()
            .unwrap()
            .contains(&source)
    );
    // It continues with the whole history; the source is untouched.
    app.llm.push(Step::text("Forked answer."));
    send_and_run(app, &fork_id, "and then?").await;
    frames_until(app, &fork_id, Some(last + 1), state_is("finished")).await;
    let sent = contents(&last_sent(app));
    assert!(
        sent.contains("forked-output") && sent.contains("Looked."),
        "{sent}"
    );
    assert_eq!(info(app, &source).await["last_event_id"], last);

    // From the call's start: the call was cut there, and gets an error result.
    let cut = src_log
        .iter()
        .find(|e| e["kind"] == "start_tool_calling")
        .unwrap()["id"]
        .as_u64()
        .unwrap();
    let early_id = "5eed0000-0000-4000-8000-000000000002";
    let (status, early) = post(
        app,
        &format!("/api/conversations/{source}/fork"),
        json!({"id": early_id, "title": "early", "from_event_id": cut, "reset_metrics": false}),
    )
    .await;
    assert_eq!(status, 201, "{early}");
    assert_eq!(early["id"], early_id);
    assert_eq!(early["title"], "early");
    assert_eq!(early["last_event_id"], cut + 1);
    assert_eq!(early["stats"]["llm_calls"], src["stats"]["llm_calls"]);
    app.llm.push(Step::text("Trying again."));
    send_and_run(app, early_id, "retry").await;
    frames_until(app, early_id, Some(cut + 1), state_is("finished")).await;
    let sent = last_sent(app);
    let call_at = sent
        .iter()
        .position(|m| m["tool_calls"][0]["id"] == "look")
        .expect("the cut call is in the history");
    assert_eq!(sent[call_at + 1]["role"], "tool");
    assert!(
        sent[call_at + 1]["content"]
            .as_str()
            .unwrap()
            .contains("forked")
    );
    assert!(!contents(&sent).contains("Looked."), "{sent:?}");

    // Forks of forks, at the edges.
    let (status, empty) = post(
        app,
        &format!("/api/conversations/{early_id}/fork"),
        json!({"from_event_id": 0}),
    )
    .await;
    assert_eq!(status, 201, "{empty}");
    assert_eq!(empty["last_event_id"], 1);
    let fork_last = info(app, &fork_id).await["last_event_id"].as_u64().unwrap();
    let (status, again) = post(
        app,
        &format!("/api/conversations/{fork_id}/fork"),
        json!({"from_event_id": fork_last}),
    )
    .await;
    assert_eq!(status, 201, "{again}");
    assert_eq!(again["last_event_id"], fork_last + 1);

    // Refusals.
    let fork_path = format!("/api/conversations/{source}/fork");
    for (body, expected) in [
        (json!({"id": source}), 409),
        (json!({"id": early_id}), 409),
        (json!({"from_event_id": last + 100}), 400),
        (json!({"tags": {"Bad": "x"}}), 400),
        (json!({"from_event_id": -1}), 422),
        (json!({"unknown": 1}), 422),
    ] {
        let (status, detail) = post(app, &fork_path, body.clone()).await;
        assert_eq!(status, expected, "{body}: {detail}");
    }
    let missing = "1c0ffee0-0000-4000-8000-000000000003";
    let (status, _) = post(
        app,
        &format!("/api/conversations/{missing}/fork"),
        json!({}),
    )
    .await;
    assert_eq!(status, 404);
    let (_, count) = app.get_json("/api/conversations/count").await;
    assert_eq!(count, 5, "no refused fork left anything behind");
}

/// A fork of a running conversation copies what is committed; the source runs on.
async fn fork_of_a_running_conversation(app: &TestApp) {
    app.llm
        .push(Step::tool("wait", "bash", json!({"command": "echo first"})));
    app.llm.push(Step::HangAfterFirstChunk {
        first: "still".into(),
    });
    let source = create(app, json!({"initial_message": {"content": "go"}})).await;
    // The tool's result is in the log (committed) once its message event is.
    let frames = frames_until(app, &source, None, |f| {
        f.name == "message" && f.data["message"]["role"] == "tool"
    })
    .await;
    assert!(app.llm.wait_for_requests(2, Duration::from_secs(10)).await);
    let (status, fork) = post(app, &format!("/api/conversations/{source}/fork"), json!({})).await;
    assert_eq!(status, 201, "{fork}");
    assert_eq!(fork["execution_status"], "idle");
    assert!(fork["last_event_id"].as_u64().unwrap() > frames.last().unwrap().id);
    assert_eq!(info(app, &source).await["execution_status"], "running");
    // The fork's history holds the finished call and its result.
    app.llm.push(Step::text("From the fork."));
    let fork_id = fork["id"].as_str().unwrap();
    send_and_run(app, fork_id, "continue here").await;
    frames_until(app, fork_id, None, state_is("finished")).await;
    let sent = last_sent(app);
    assert!(contents(&sent).contains("first"), "{sent:?}");
    let (status, _) = post(
        app,
        &format!("/api/conversations/{source}/interrupt"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200);
}

/// One raw SSE block: its `id:` (if any), event name and data.
struct RawFrame {
    id: Option<String>,
    name: String,
    data: Value,
}

/// Reads raw SSE blocks (ids as sent, not as a parser carries them over) until `until`.
async fn raw_frames_until(
    resp: reqwest::Response,
    until: impl Fn(&RawFrame) -> bool,
) -> Vec<RawFrame> {
    let mut body = resp.bytes_stream();
    let mut buffer = String::new();
    let mut out = Vec::new();
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            if block.starts_with(':') {
                continue;
            }
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
            };
            let frame = RawFrame {
                id: field("id:"),
                name: field("event:").unwrap_or_default(),
                data: serde_json::from_str(&field("data:").unwrap_or_default()).unwrap(),
            };
            let stop = until(&frame);
            out.push(frame);
            if stop {
                return out;
            }
        }
        let chunk = tokio::time::timeout(Duration::from_secs(20), body.next())
            .await
            .expect("stream stalled")
            .expect("stream ended")
            .unwrap();
        buffer.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

async fn deltas_flow(app: &TestApp) {
    let id = create(app, json!({})).await;
    let stream = |query: &str| {
        app.client
            .get(app.url(&format!("/api/conversations/{id}/events/stream{query}")))
            .send()
    };
    let (status, _) = app
        .get_json(&format!(
            "/api/conversations/{id}/events/stream?stream_deltas=yes"
        ))
        .await;
    assert_eq!(status, 422);
    let with = stream("?stream_deltas=true").await.unwrap();
    let without = stream("").await.unwrap();
    assert_eq!(with.status(), 200);
    app.llm.push(Step::Paced {
        before: Duration::from_millis(100),
        between_chunks: Duration::from_millis(30),
        step: Box::new(Step::text("The checkout pod is fine")),
    });
    send_and_run(app, &id, "How is checkout?").await;
    let finished = |f: &RawFrame| {
        f.name == "conversation_state_update" && f.data["execution_status"] == "finished"
    };
    let frames = raw_frames_until(with, finished).await;
    let deltas: Vec<&RawFrame> = frames
        .iter()
        .filter(|f| f.name == "ai_answer_delta")
        .collect();
    assert!(deltas.len() > 1, "the text came in pieces");
    assert!(deltas.iter().all(|f| f.id.is_none()), "deltas have no id");
    assert!(
        frames
            .iter()
            .filter(|f| f.name != "ai_answer_delta")
            .all(|f| f.id.is_some())
    );
    let joined: String = deltas
        .iter()
        .map(|f| f.data["content"].as_str().unwrap())
        .collect();
    assert_eq!(joined, "The checkout pod is fine");
    let end = frames
        .iter()
        .position(|f| f.name == "ai_answer_end")
        .unwrap();
    let last_delta = frames
        .iter()
        .rposition(|f| f.name == "ai_answer_delta")
        .unwrap();
    assert!(
        last_delta < end,
        "deltas come before the answer they make up"
    );
    let plain = raw_frames_until(without, finished).await;
    assert!(plain.iter().all(|f| f.name != "ai_answer_delta"));
    let (_, stored) = app
        .get_json(&format!(
            "/api/conversations/{id}/events/count?kind=ai_answer_delta"
        ))
        .await;
    assert_eq!(stored, 0, "deltas are not stored");
}
