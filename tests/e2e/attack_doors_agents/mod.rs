//! Hostile clients and a hostile model against the agent doors: A2A (`/a2a` and the agent
//! card) and the MCP server (`/mcp`). What `a2a.rs` and `mcp_server/` already cover is not
//! repeated: here are the key in a query string, a card behind a proxy, JSON-RPC corner cases,
//! forged paging tokens, decisions aimed at another task's calls, odd parts, many followers
//! of one task, and secrets split across the model's deltas.

mod streams_and_mcp;

use std::time::Duration;

use eventsource_stream::Eventsource;
use fake_llm::Step;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::helpers::{TestApp, json_body, spawn_app, spawn_app_with};

const KEY: &str = "doors-attack-key";

fn keyed() -> String {
    format!("[server]\napi_keys = [\"{KEY}\"]\n")
}

/// A raw POST to `/a2a` with `A2A-Version: 1.0` and `headers`: status and JSON body.
async fn a2a_raw(app: &TestApp, body: String, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = app
        .client
        .post(app.url("/a2a"))
        .header("a2a-version", "1.0")
        .header("content-type", "application/json")
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let resp = request.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, json_body(resp).await)
}

async fn a2a(app: &TestApp, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": "atk", "method": method, "params": params});
    let (status, body) = a2a_raw(app, body.to_string(), &[]).await;
    assert_eq!(status, 200, "{body}");
    body
}

fn user(text: &str) -> Value {
    json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "parts": [{"text": text}]})
}

fn code(body: &Value) -> i64 {
    body["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("an error: {body}"))
}

/// Every JSON-RPC response of a streaming call, within `limit`.
async fn a2a_stream(app: &TestApp, method: &str, params: Value, limit: Duration) -> Vec<Value> {
    let resp = app
        .client
        .post(app.url("/a2a"))
        .header("a2a-version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let read = async {
        let mut out = Vec::new();
        let mut events = resp.bytes_stream().eventsource();
        while let Some(event) = events.next().await {
            let event = event.unwrap();
            out.push(serde_json::from_str::<Value>(&event.data).unwrap());
        }
        out
    };
    tokio::time::timeout(limit, read)
        .await
        .expect("the stream ends once the task settles")
}

fn last_state(responses: &[Value]) -> &Value {
    let last = responses.last().expect("a response");
    last.pointer("/result/statusUpdate/status/state")
        .or_else(|| last.pointer("/result/task/status/state"))
        .unwrap_or(&Value::Null)
}

#[tokio::test]
async fn the_card_says_nothing_internal_and_trusts_no_forwarded_host() {
    let app = spawn_app_with(&keyed()).await;
    let get = |headers: Vec<(&'static str, &'static str)>| {
        let mut request = app.client.get(app.url("/.well-known/agent-card.json"));
        for (name, value) in headers {
            request = request.header(name, value);
        }
        async move { request.send().await.unwrap() }
    };
    let resp = get(vec![]).await;
    assert_eq!(resp.status(), 200);
    let vary = resp
        .headers()
        .get_all("vary")
        .iter()
        .map(|v| v.to_str().unwrap().to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join(",");
    // A shared cache in front must not hand one client's http:// card (a spoofed
    // X-Forwarded-Proto) to the next, who would then send its key in the clear.
    assert!(vary.contains("x-forwarded-proto"), "Vary: {vary:?}");
    assert!(vary.contains("host"), "Vary: {vary:?}");
    let card = json_body(resp).await;
    let text = card.to_string();
    for leak in [
        KEY,
        "api_base",
        "127.0.0.1:0",
        "/v1",
        "model",
        "secret",
        "config",
    ] {
        assert!(
            !text.to_ascii_lowercase().contains(leak),
            "{leak} in {text}"
        );
    }
    let url = |card: &Value| {
        card["supportedInterfaces"][0]["url"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // X-Forwarded-Host is not read; a scheme other than https reads as http.
    let own = url(&card);
    let card = json_body(
        get(vec![
            ("x-forwarded-host", "evil.example"),
            ("x-forwarded-proto", "javascript"),
            ("forwarded", "host=evil.example;proto=https"),
        ])
        .await,
    )
    .await;
    assert_eq!(url(&card), own);
    // A Host that is not a plain authority (userinfo, path, quote) names nobody.
    for host in ["evil.example@good", "good/evil", "a\"b", "x y"] {
        let card = json_body(get(vec![("host", host)]).await).await;
        assert_eq!(url(&card), "http://localhost/a2a", "{host}");
    }
    // The card is read-only: no other method reaches it.
    let post = app
        .client
        .post(app.url("/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap();
    assert!(
        matches!(post.status().as_u16(), 401 | 405),
        "{}",
        post.status()
    );
}

#[tokio::test]
async fn a_key_in_the_query_string_is_no_key() {
    let app = spawn_app_with(&keyed()).await;
    let get = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}});
    for query in [
        format!("?api_key={KEY}"),
        format!("?key={KEY}"),
        format!("?x-api-key={KEY}"),
        format!("?access_token={KEY}"),
    ] {
        let resp = app
            .client
            .post(app.url(&format!("/a2a{query}")))
            .header("a2a-version", "1.0")
            .json(&get)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 401, "/a2a{query}");
        let resp = app
            .client
            .post(app.url(&format!("/mcp{query}")))
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 401, "/mcp{query}");
    }
    // A key in the wrong header, or with the wrong case of scheme prefix glued on, neither.
    for (name, value) in [
        ("api-key", KEY.to_owned()),
        ("authorization", KEY.to_owned()),
        ("authorization", format!("Bearer {KEY}x")),
        ("x-api-key", format!(" {KEY}x")),
    ] {
        let (status, _) = a2a_raw(&app, get.to_string(), &[(name, value.as_str())]).await;
        assert_eq!(status, 401, "{name}: {value}");
    }
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn json_rpc_corner_cases_are_answered_precisely() {
    let app = spawn_app().await;
    let deep = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{{\"id\":\"x\",\"n\":{}{}}}}}",
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let cases: Vec<(String, i64, Value)> = vec![
        // Too deep for the parser: a parse error, not a stack overflow.
        (deep, -32700, Value::Null),
        (r#"{"jsonrpc":"2.0","id":1.5,"method":"GetTask","params":{"id":"x"}}"#.into(), -32600, Value::Null),
        (r#"{"jsonrpc":"2.0","id":true,"method":"GetTask","params":{"id":"x"}}"#.into(), -32600, Value::Null),
        (r#"{"jsonrpc":"2.0","id":null,"method":"GetTask","params":{"id":"x"}}"#.into(), -32600, Value::Null),
        (r#"{"jsonrpc":2.0,"id":3,"method":"GetTask","params":{"id":"x"}}"#.into(), -32600, json!(3)),
        (r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"GetTask","params":{"id":"x"}}"#.into(), -32001, json!(18_446_744_073_709_551_615_u64)),
        (r#"{"jsonrpc":"2.0","id":"4","method":"GetTask","params":{"id":"x","historyLength":"3"}}"#.into(), -32602, json!("4")),
        (r#"{"jsonrpc":"2.0","id":5,"method":"GetTask","params":{"id":5}}"#.into(), -32602, json!(5)),
        (r#"{"jsonrpc":"2.0","id":6,"method":"ListTasks","params":{"pageSize":"10"}}"#.into(), -32602, json!(6)),
        (r#"{"jsonrpc":"2.0","id":7,"method":"ListTasks","params":{"pageSize":1e3}}"#.into(), -32602, json!(7)),
        (r#"{"jsonrpc":"2.0","id":8,"method":"GetTask","params":{"id":"x"},"id":9}"#.into(), -32001, json!(9)),
        (r#"{"jsonrpc":"2.0","id":10,"method":"getTask","params":{"id":"x"}}"#.into(), -32601, json!(10)),
        (r#"{"jsonrpc":"2.0","id":11,"method":"__proto__","params":{}}"#.into(), -32601, json!(11)),
        (r#"{"jsonrpc":"2.0","id":12,"method":"GetTask","params":{"__proto__":{"id":"x"}}}"#.into(), -32602, json!(12)),
        (r#"[{"jsonrpc":"2.0","id":13,"method":"GetTask","params":{"id":"x"}}]"#.into(), -32600, Value::Null),
        ("\u{feff}{}".into(), -32700, Value::Null),
    ];
    for (body, wanted, id) in cases {
        let (status, answer) = a2a_raw(&app, body.clone(), &[]).await;
        let shown: String = body.chars().take(120).collect();
        assert_eq!(status, 200, "{shown}: {answer}");
        assert_eq!(code(&answer), wanted, "{shown}: {answer}");
        assert_eq!(answer["id"], id, "{shown}: {answer}");
        assert!(answer.get("result").is_none());
    }
    // Another content type, or none, is still JSON-RPC.
    let resp = app
        .client
        .post(app.url("/a2a"))
        .header("a2a-version", "1.0")
        .header("content-type", "text/plain")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}"#)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body = json_body(resp).await;
    assert!(status == 200 || status == 415, "{status}: {body}");
    // Version header garbage is the version error, not a crash.
    for version in ["1.0\u{0}", "١.٠", "1.0, 0.3", &"9".repeat(10_000)] {
        let resp = app
            .client
            .post(app.url("/a2a"))
            .header("a2a-version", version.as_bytes())
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}"#)
            .send()
            .await;
        let Ok(resp) = resp else { continue };
        if resp.status() == 431 || resp.status() == 400 {
            continue;
        }
        assert_eq!(resp.status(), 200);
        assert_eq!(code(&json_body(resp).await), -32009);
    }
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn forged_page_tokens_are_refused_and_real_ones_page() {
    let app = spawn_app().await;
    for n in 0..3 {
        app.llm.push(Step::text(&format!("answer {n}")));
        let body = a2a(&app, "SendMessage", json!({"message": user("q")})).await;
        assert_eq!(
            body["result"]["task"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
    }
    for token in [
        json!("-1"),
        json!("0"),
        json!("' OR 1=1 --"),
        json!("../../etc/passwd"),
        json!("x".repeat(100_000)),
        json!(uuid::Uuid::new_v4().to_string()),
        json!("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="),
    ] {
        let body = a2a(
            &app,
            "ListTasks",
            json!({"pageToken": token, "pageSize": 1}),
        )
        .await;
        assert_eq!(code(&body), -32602, "{body}");
    }
    for bad in [
        json!(0),
        json!(-1),
        json!(i64::MIN),
        json!(2_147_483_648_i64),
        json!(null),
    ] {
        let body = a2a(&app, "ListTasks", json!({"pageSize": bad})).await;
        if bad.is_null() {
            assert_eq!(
                body["result"]["tasks"].as_array().unwrap().len(),
                3,
                "{body}"
            );
        } else {
            assert_eq!(code(&body), -32602, "{bad}: {body}");
        }
    }
    // The real tokens walk every task once.
    let mut seen = std::collections::HashSet::new();
    let mut token = String::new();
    loop {
        let body = a2a(
            &app,
            "ListTasks",
            json!({"pageSize": 1, "pageToken": token}),
        )
        .await;
        let result = &body["result"];
        for task in result["tasks"].as_array().unwrap() {
            assert!(
                seen.insert(task["id"].as_str().unwrap().to_owned()),
                "{body}"
            );
        }
        assert_eq!(result["totalSize"], 3);
        token = result["nextPageToken"].as_str().unwrap().to_owned();
        if token.is_empty() {
            break;
        }
        assert!(seen.len() <= 3);
    }
    assert_eq!(seen.len(), 3);
    // A garbage context is no task, not an error about the store.
    let body = a2a(&app, "ListTasks", json!({"contextId": "'; DROP TABLE"})).await;
    assert_eq!(body["result"]["tasks"], json!([]), "{body}");
}

/// A task waiting for approval of `call` (a bash `touch` of `file`): its id.
async fn waiting_task(app: &TestApp, call: &str, file: &std::path::Path) -> String {
    let command = format!("touch {}", file.display());
    app.llm
        .push(Step::tool(call, "bash", json!({"command": command})));
    let body = a2a(app, "SendMessage", json!({"message": user("touch it")})).await;
    let task = &body["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{body}"
    );
    task["id"].as_str().unwrap().to_owned()
}

fn decision(task: &str, approve: bool, call: &str) -> Value {
    json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "taskId": task, "parts": [{"data": {"approve": approve, "toolCallId": call}}]}})
}

#[tokio::test]
async fn decisions_cannot_reach_another_tasks_calls() {
    let app = spawn_app().await;
    let dir = crate::helpers::tool_writable_dir("attack-doors-approvals");
    let (file_a, file_b) = (dir.join("a"), dir.join("b"));
    let task_a = waiting_task(&app, "call-a", &file_a).await;
    let task_b = waiting_task(&app, "call-b", &file_b).await;

    // B's call named on A, and a call nobody made: refused, nothing runs, both still wait.
    for call in ["call-b", "call-zzz", ""] {
        let body = a2a(&app, "SendMessage", decision(&task_a, true, call)).await;
        assert!(body.get("error").is_some(), "{call}: {body}");
    }
    // B's id as the context of A's message.
    let mut mixed = decision(&task_a, true, "call-a");
    mixed["message"]["contextId"] = json!(task_b);
    assert_eq!(code(&a2a(&app, "SendMessage", mixed).await), -32602);
    // Data parts with extra (prototype-style) keys are not decisions.
    let mut proto = decision(&task_a, true, "call-a");
    proto["message"]["parts"][0]["data"]["__proto__"] = json!({"approve": true});
    assert_eq!(code(&a2a(&app, "SendMessage", proto).await), -32602);
    for task in [&task_a, &task_b] {
        let body = a2a(&app, "GetTask", json!({"id": task})).await;
        assert_eq!(
            body["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{body}"
        );
    }
    assert!(!file_a.exists() && !file_b.exists());

    // A decided properly, then again: the second is refused and runs nothing twice.
    app.llm.push(Step::text("done a"));
    let body = a2a(&app, "SendMessage", decision(&task_a, true, "call-a")).await;
    assert_eq!(
        body["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{body}"
    );
    assert!(file_a.exists());
    std::fs::remove_file(&file_a).unwrap();
    let body = a2a(&app, "SendMessage", decision(&task_a, true, "call-a")).await;
    assert_eq!(code(&body), -32004, "{body}");
    assert!(
        !file_a.exists(),
        "an approval given twice ran the call twice"
    );
    // B is untouched by all of that; denied, then cancel and approve are refused.
    assert!(!file_b.exists());
    app.llm.push(Step::text("left b"));
    let body = a2a(&app, "SendMessage", decision(&task_b, false, "call-b")).await;
    assert_eq!(
        body["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{body}"
    );
    assert_eq!(
        code(&a2a(&app, "CancelTask", json!({"id": task_b})).await),
        -32002
    );
    assert_eq!(
        code(&a2a(&app, "SendMessage", decision(&task_b, true, "call-b")).await),
        -32004
    );
    assert!(!file_b.exists());
    // Guessed task ids: nobody's task.
    for guess in [
        uuid::Uuid::nil().to_string(),
        uuid::Uuid::max().to_string(),
        task_a.to_uppercase(),
    ] {
        let body = a2a(&app, "CancelTask", json!({"id": guess})).await;
        assert!(matches!(code(&body), -32001 | -32002), "{guess}: {body}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn odd_parts_reach_the_model_as_text_or_are_refused() {
    let app = spawn_app().await;
    // Many small parts and a data part with prototype-style keys: the model reads them as text.
    let mut parts: Vec<Value> = (0..2000)
        .map(|n| json!({"text": format!("p{n}")}))
        .collect();
    parts.push(json!({"data": {"__proto__": {"admin": true}, "constructor": {"prototype": 1}}}));
    app.llm.push(Step::text("read them"));
    let body = a2a(
        &app,
        "SendMessage",
        json!({"message": {"messageId": "m-many",
        "role": "ROLE_USER", "parts": parts}}),
    )
    .await;
    assert_eq!(
        body["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{body}"
    );
    let sent = app.llm_messages(0).last().unwrap()["content"].to_string();
    assert!(
        sent.contains("p1999") && sent.contains("__proto__"),
        "{}",
        &sent[..200]
    );

    let message =
        |parts: Value| json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": parts}});
    let cases = [
        (
            json!([{"raw": "aGk=", "mediaType": "application/octet-stream"}]),
            -32005,
        ),
        (json!([{"url": "file:///etc/passwd"}]), -32005),
        (json!([{"text": "a", "data": {"b": 1}}]), -32602),
        (json!([{}]), -32602),
        (json!([{"text": 5}]), -32602),
        (json!([{"text": "   "}]), -32602),
        (json!("text"), -32602),
        (json!([{"text": "hi", "metadata": {"__proto__": {}}}]), 0),
    ];
    for (parts, wanted) in cases {
        if wanted == 0 {
            app.llm.push(Step::text("ok"));
        }
        let body = a2a(&app, "SendMessage", message(parts.clone())).await;
        if wanted == 0 {
            assert!(
                body.get("result").is_some() || code(&body) == -32602,
                "{parts}: {body}"
            );
        } else {
            assert_eq!(code(&body), wanted, "{parts}: {body}");
        }
    }
}

#[tokio::test]
async fn many_followers_of_one_task_all_end_when_it_ends() {
    let app = spawn_app().await;
    app.llm.push(Step::Slow {
        content: "a slow answer in pieces".into(),
        chunks: 10,
        interval: Duration::from_millis(150),
    });
    let message = json!({"message": user("slow"), "configuration": {"returnImmediately": true}});
    let body = a2a(&app, "SendMessage", message).await;
    let id = body["result"]["task"]["id"].as_str().unwrap().to_owned();
    let followers = (0..24).map(|_| {
        let app = &app;
        let id = id.clone();
        async move {
            // The task may have ended before a late follower asks: then it is refused.
            let resp = app
                .client
                .post(app.url("/a2a"))
                .header("a2a-version", "1.0")
                .json(
                    &json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask",
                    "params": {"id": id}}),
                )
                .send()
                .await
                .unwrap();
            let kind = resp.headers()["content-type"].to_str().unwrap().to_owned();
            if kind.starts_with("application/json") {
                return code(&json_body(resp).await) == -32004;
            }
            let text = tokio::time::timeout(Duration::from_secs(30), resp.text())
                .await
                .expect("every follower's stream ends")
                .unwrap();
            text.contains("TASK_STATE_COMPLETED")
        }
    });
    let ends = futures::future::join_all(followers).await;
    assert!(ends.iter().all(|ok| *ok), "{ends:?}");
}
