//! A2A push notifications attacked as a hostile client (metadata addresses spelled every way
//! the URL parser takes, the allow list dodged, header values built to inject or to bloat, a
//! config aimed at another task), a hostile receiver (redirects, hanging, echoing its secrets
//! back in an error) and a hostile model (a server key in a tool call's arguments): each
//! refused, contained or masked; push and webhook queues hold each other back in nothing.

use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::a2a::rpc;
use crate::helpers::{TestApp, eventually, spawn_app, spawn_app_with};
use crate::webhook_receiver::{Answer, Receiver};
use fake_llm::Step;

fn user(text: &str) -> Value {
    json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "parts": [{"text": text}]})
}

fn states(got: &[crate::webhook_receiver::Got]) -> Vec<String> {
    got.iter()
        .map(|g| {
            g.body["statusUpdate"]["status"]["state"]
                .as_str()
                .unwrap_or("?")
                .to_owned()
        })
        .collect()
}

/// A task that has run to completion; its id.
async fn finished_task(app: &TestApp) -> String {
    app.llm.push(Step::text("done"));
    let (_, body) = rpc(app, "SendMessage", json!({"message": user("hi")})).await;
    body["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_owned()
}

async fn create(app: &TestApp, task: &str, mut config: Value) -> Value {
    config["taskId"] = json!(task);
    rpc(app, "CreateTaskPushNotificationConfig", config).await.1
}

/// The message of a refusal with `code` -32602.
fn refused(answer: &Value, what: &str) -> String {
    assert_eq!(answer["error"]["code"], -32602, "{what}: {answer}");
    answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn deliveries(app: &TestApp, query: &str) -> Value {
    let (status, body) = app
        .get_json(&format!("/api/webhooks/deliveries{query}"))
        .await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test]
async fn attack_push_metadata_addresses_in_every_spelling_are_refused() {
    let app = spawn_app().await;
    let task = finished_task(&app).await;
    for url in [
        // 169.254.169.254 as decimal, hex, octal, short forms and with a trailing dot.
        "http://2852039166/latest/meta-data/",
        "http://0xA9FEA9FE/",
        "http://0xa9.0xfe.0xa9.0xfe/",
        "http://0251.0376.0251.0376/",
        "http://169.254.43518/",
        "http://169.254.169.254./",
        "http://169.254.169.254:80@/",
        "http://%31%36%39.254.169.254/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://[::ffff:169.254.169.254]:8080/",
        // NAT64, IPv4-compatible and 6to4 forms reach it too on networks that translate.
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[64:ff9b::169.254.169.254]/",
        "http://[::169.254.169.254]/",
        "http://[2002:a9fe:a9fe::1]/",
        "http://[fe80::1%25eth0]/",
        "http://[fd00:ec2::254]/",
        "http://[fd00:ec2::23]/",
        "http://[fd20:ce::254]/",
        "http://100.100.100.200/",
        "http://[64:ff9b::6464:64c8]/",
        "http://METADATA.google.internal./computeMetadata/v1/",
        "http://metadata/",
        "http://Instance-Data./",
        "http://0/",
        "http://[::]/",
        "http://255.255.255.255/",
    ] {
        let answer = create(&app, &task, json!({"url": url})).await;
        let message = refused(&answer, url);
        assert!(message.starts_with("url:"), "{url}: {message}");
    }
    // The same with the first message: nothing is created, the model is not asked.
    let before = app.llm.request_count();
    let (_, answer) = rpc(
        &app,
        "SendMessage",
        json!({"message": user("hi"), "configuration":
            {"taskPushNotificationConfig": {"url": "http://0xA9FEA9FE/"}}}),
    )
    .await;
    refused(&answer, "with the first message");
    assert_eq!(app.llm.request_count(), before);
    // Loopback and private receivers stay allowed (the usual in-cluster receiver).
    for url in [
        "http://127.0.0.1:1/",
        "http://localhost:1/",
        "http://10.0.0.7/",
        "http://[::1]:1/",
    ] {
        let answer = create(&app, &task, json!({"url": url})).await;
        assert!(answer["result"]["id"].is_string(), "{url}: {answer}");
    }
}

#[tokio::test]
async fn attack_push_allowed_hosts_cannot_be_dodged() {
    let app = spawn_app_with("[a2a]\npush_allowed_hosts = [\"hooks.example\"]\n").await;
    let task = finished_task(&app).await;
    for url in [
        "http://hooks.example@127.0.0.1/",
        "http://127.0.0.1#@hooks.example/",
        "http://127.0.0.1\\@hooks.example/",
        "http://127.0.0.1/?@hooks.example",
        "http://hooks.example.127.0.0.1.nip.io/",
        "http://evilhooks.example/",
        "http://hooks.example.evil/",
        "http://[::1]/",
        "http://hooks%2eexample.evil/",
    ] {
        let answer = create(&app, &task, json!({"url": url})).await;
        refused(&answer, url);
    }
    // Case and a trailing dot are the same host.
    for (url, shown) in [
        ("https://HOOKS.Example/a", "https://hooks.example/a"),
        ("https://hooks.example./a", "https://hooks.example./a"),
        ("https://hooks.ex%61mple/a", "https://hooks.example/a"),
    ] {
        let answer = create(&app, &task, json!({"url": url})).await;
        assert_eq!(answer["result"]["url"], shown, "{url}: {answer}");
    }
}

#[tokio::test]
async fn attack_push_header_values_cannot_inject_or_bloat() {
    let app = spawn_app().await;
    let task = finished_task(&app).await;
    let url = "http://127.0.0.1:1/";
    let long = "a".repeat(4097);
    let cases = [
        json!({"url": url, "token": long}),
        json!({"url": url, "token": "tök\u{e9}n-unicode"}),
        json!({"url": url, "token": "a\u{0}b"}),
        json!({"url": url, "token": "a\rX-Evil: 1"}),
        json!({"url": url, "authentication": {"scheme": "Bearer", "credentials": long}}),
        json!({"url": url, "authentication": {"scheme": "Bearer", "credentials": "x\r\nHost: evil"}}),
        json!({"url": url, "authentication": {"scheme": "Bearer\r\nX-Evil: 1", "credentials": "c"}}),
        json!({"url": url, "authentication": {"scheme": "B".repeat(65), "credentials": "c"}}),
        json!({"url": url, "authentication": {"scheme": "Bearér", "credentials": "c"}}),
        json!({"url": url, "authentication": {"scheme": ""}}),
        json!({"url": url, "id": "a".repeat(65)}),
        json!({"url": url, "id": "a/b"}),
        json!({"url": url, "id": "é"}),
        json!({"url": format!("http://127.0.0.1:1/{}", "p".repeat(2100))}),
    ];
    for config in cases {
        let answer = create(&app, &task, config.clone()).await;
        let what: String = config.to_string().chars().take(80).collect();
        let message = refused(&answer, &what);
        assert!(!message.contains(&long), "a refusal does not echo a secret");
    }
    // Line breaks in a URL are dropped by the parser (WHATWG): no header starts there.
    let answer = create(
        &app,
        &task,
        json!({"url": "http://127.0.0.1:1/\r\nX-Evil: 1"}),
    )
    .await;
    if let Some(url) = answer["result"]["url"].as_str() {
        assert!(!url.contains(['\r', '\n', ' ']), "{url}");
    }
    // At the limits: accepted.
    let answer = create(
        &app,
        &task,
        json!({"url": url, "token": "t".repeat(4096), "id": "i".repeat(64),
            "authentication": {"scheme": "S".repeat(64), "credentials": "c".repeat(4096)}}),
    )
    .await;
    assert_eq!(answer["result"]["id"], "i".repeat(64), "{answer}");
}

#[tokio::test]
async fn attack_push_a_config_cannot_be_aimed_at_another_task() {
    let app = spawn_app().await;
    let a = finished_task(&app).await;
    let b = finished_task(&app).await;
    let url = "http://127.0.0.1:1/";
    // Continuing task a (by its context) with a config naming task b.
    let mut next = user("more");
    next["contextId"] = json!(a);
    let (_, answer) = rpc(
        &app,
        "SendMessage",
        json!({"message": next, "configuration":
            {"taskPushNotificationConfig": {"url": url, "taskId": b}}}),
    )
    .await;
    refused(&answer, "contextId a, config for b");
    // A new task with a config naming task b.
    let (_, answer) = rpc(
        &app,
        "SendMessage",
        json!({"message": user("new"), "configuration":
            {"taskPushNotificationConfig": {"url": url, "taskId": b}}}),
    )
    .await;
    refused(&answer, "new task, config for b");
    let (_, listed) = rpc(
        &app,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": b}),
    )
    .await;
    assert_eq!(listed["result"]["configs"], json!([]), "{listed}");
    // A config of a is not read or deleted through b.
    let made = create(&app, &a, json!({"url": url, "id": "mine"})).await;
    assert_eq!(made["result"]["id"], "mine", "{made}");
    let (_, got) = rpc(
        &app,
        "GetTaskPushNotificationConfig",
        json!({"taskId": b, "id": "mine"}),
    )
    .await;
    assert_eq!(got["error"]["code"], -32001, "{got}");
    rpc(
        &app,
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": b, "id": "mine"}),
    )
    .await;
    let (_, got) = rpc(
        &app,
        "GetTaskPushNotificationConfig",
        json!({"taskId": a, "id": "mine"}),
    )
    .await;
    assert_eq!(got["result"]["id"], "mine", "{got}");
    // The cap holds; replacing one of a full task's configs is still allowed.
    for i in 1..10 {
        let made = create(&app, &a, json!({"url": url, "id": format!("c{i}")})).await;
        assert!(made["result"].is_object(), "{i}: {made}");
    }
    let full = create(&app, &a, json!({"url": url, "id": "c10"})).await;
    refused(&full, "the eleventh");
    let replaced = create(&app, &a, json!({"url": "http://127.0.0.1:2/", "id": "c3"})).await;
    assert_eq!(
        replaced["result"]["url"], "http://127.0.0.1:2/",
        "{replaced}"
    );
}

/// A receiver that answers 500 with what it was sent: raw, as JSON, and after padding that
/// puts the token across the cut the error is kept to.
async fn echoing_receiver() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new().fallback(|uri: axum::http::Uri, headers: HeaderMap| async move {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let auth = header("authorization");
        let token = header("x-a2a-notification-token");
        let body = match uri.path() {
            "/json" => json!({"you sent": {"authorization": auth, "token": token}}).to_string(),
            "/cut" => format!("{} {token}", "x".repeat(400)),
            "/location" => String::new(),
            _ => format!("bad auth {auth} and token {token}"),
        };
        if uri.path() == "/location" {
            return (
                StatusCode::FOUND,
                [("location", format!("http://127.0.0.1:9/steal?t={token}"))],
                body,
            );
        }
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            [("location", String::new())],
            body,
        )
    });
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://127.0.0.1:{port}"), server)
}

#[tokio::test]
async fn attack_push_a_receiver_echoing_its_secrets_does_not_leak_them() {
    let app = spawn_app_with("[a2a]\npush_max_attempts = 1\n").await;
    let (base, _server) = echoing_receiver().await;
    let long_token = format!("LONGTOKEN-{}", "k".repeat(600));
    let secrets = [
        (
            "raw",
            "raw-token-0001\"quoted\\".to_owned(),
            "raw-cred-0001",
        ),
        (
            "json",
            "json-token-0002\"with\\escapes".to_owned(),
            "json-cred-0002\"x",
        ),
        ("cut", long_token.clone(), "cut-cred-0003"),
        ("location", "loc-token-0004&a b".to_owned(), "loc-cred-0004"),
    ];
    let task = finished_task(&app).await;
    for (path, token, credentials) in &secrets {
        let made = create(
            &app,
            &task,
            json!({"url": format!("{base}/{path}"), "id": path, "token": token,
                "authentication": {"scheme": "Bearer", "credentials": credentials}}),
        )
        .await;
        assert!(made["result"].is_object(), "{made}");
        let shown = made.to_string();
        assert!(
            !shown.contains(token.as_str()) && !shown.contains(credentials),
            "{shown}"
        );
    }
    app.llm.push(Step::text("again"));
    let mut next = user("again");
    next["contextId"] = json!(task);
    let (_, sent) = rpc(&app, "SendMessage", json!({"message": next})).await;
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
    let failed = eventually(
        "every config's notifications dead-lettered",
        Duration::from_secs(20),
        || async {
            let page = deliveries(&app, "?status=failed").await;
            let items = page["items"].as_array().cloned().unwrap_or_default();
            let receivers: std::collections::BTreeSet<String> = items
                .iter()
                .filter_map(|d| d["receiver"].as_str().map(str::to_owned))
                .collect();
            if receivers.len() == secrets.len() {
                Ok(page)
            } else {
                Err(format!("{receivers:?}"))
            }
        },
    )
    .await;
    let errors: Vec<String> = failed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["last_error"].as_str().unwrap_or_default().to_owned())
        .collect();
    let text = errors.join("\n");
    assert!(text.contains("***"), "masked, not dropped: {text}");
    assert!(
        text.contains("not followed"),
        "the redirect was refused: {text}"
    );
    assert!(
        text.contains("xxxxxxxx"),
        "the receiver's own words are kept: {text}"
    );
    for (_, token, credentials) in &secrets {
        // No piece of a secret long enough to matter: its start, its end, it whole.
        for piece in [&token[..12], &token[token.len() - 8..], &credentials[..12]] {
            assert!(!text.contains(piece), "{piece:?} leaked: {text}");
        }
    }
    // Nor anywhere else the client or an operator reads.
    let (_, events) = app
        .get_json(&format!("/api/conversations/{task}/events/search"))
        .await;
    let (_, got_task) = rpc(&app, "GetTask", json!({"id": task})).await;
    let (_, listed) = rpc(
        &app,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task}),
    )
    .await;
    let (_, conversation) = app.get_json(&format!("/api/conversations/{task}")).await;
    for shown in [events, got_task, listed, conversation, sent] {
        let shown = shown.to_string();
        for (_, token, credentials) in &secrets {
            assert!(
                !shown.contains(&token[..12]) && !shown.contains(credentials),
                "{shown}"
            );
        }
    }
}

#[tokio::test]
async fn attack_push_a_redirect_is_never_followed() {
    let app = spawn_app_with("[a2a]\npush_max_attempts = 3\n").await;
    let elsewhere = Receiver::up("unused").await;
    let receiver = Receiver::up("unused").await;
    receiver.set_default(Answer::Redirect(format!("{}/stolen", elsewhere.url())));
    app.llm.push(Step::text("done"));
    let (_, body) = rpc(
        &app,
        "SendMessage",
        json!({"message": user("hi"), "configuration":
            {"taskPushNotificationConfig": {"url": receiver.url(), "token": "redirect-token-1"}}}),
    )
    .await;
    let task = body["result"]["task"]["id"].as_str().unwrap().to_owned();
    let page = eventually(
        "the redirect dead-lettered at once",
        Duration::from_secs(20),
        || async {
            let page = deliveries(&app, &format!("?status=failed&conversation_id={task}")).await;
            if page["items"].as_array().is_some_and(|a| !a.is_empty()) {
                Ok(page)
            } else {
                Err(page.to_string())
            }
        },
    )
    .await;
    assert_eq!(
        page["items"][0]["attempts"], 1,
        "a redirect is permanent: {page}"
    );
    assert!(elsewhere.got().is_empty(), "nothing went where it pointed");
}

#[tokio::test]
async fn attack_push_a_hanging_receiver_holds_back_no_other_task() {
    let app = spawn_app_with("[a2a]\npush_timeout_secs = 6.0\npush_max_attempts = 1\n").await;
    let hang = Receiver::up("unused").await;
    hang.set_default(Answer::Hang);
    let ok = Receiver::up("unused").await;
    // Task a: ten configs, all at a receiver that never answers.
    let a = finished_task(&app).await;
    for i in 0..10 {
        let made = create(&app, &a, json!({"url": hang.url(), "id": format!("h{i}")})).await;
        assert!(made["result"].is_object(), "{made}");
    }
    app.llm.push(Step::text("a again"));
    let mut next = user("again");
    next["contextId"] = json!(a);
    let started = Instant::now();
    let (_, sent) = rpc(&app, "SendMessage", json!({"message": next})).await;
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "the run does not wait for its notifications: {sent}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    eventually(
        "task a's notifications in flight",
        Duration::from_secs(10),
        || async {
            if hang.got().len() >= 2 {
                Ok(())
            } else {
                Err(hang.got().len().to_string())
            }
        },
    )
    .await;
    // Task b, while a's hang: its notifications arrive well before a's time out.
    app.llm.push(Step::text("b done"));
    let started = Instant::now();
    let (_, body) = rpc(
        &app,
        "SendMessage",
        json!({"message": user("b"), "configuration":
            {"taskPushNotificationConfig": {"url": ok.url()}}}),
    )
    .await;
    assert!(body["result"]["task"].is_object(), "{body}");
    ok.wait_for(Duration::from_secs(20), |got| {
        states(got).last().map(String::as_str) == Some("TASK_STATE_COMPLETED")
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "task b waited {:?} behind task a's hanging receiver",
        started.elapsed()
    );
}

#[tokio::test]
async fn attack_push_deleting_mid_flight_or_the_conversation_drops_what_was_queued() {
    let app = spawn_app_with("[a2a]\npush_timeout_secs = 2.0\npush_max_attempts = 8\n").await;
    // Deleted while its notification hangs: not tried again.
    let hang = Receiver::up("unused").await;
    hang.set_default(Answer::Hang);
    app.llm.push(Step::text("done"));
    let (_, body) = rpc(
        &app,
        "SendMessage",
        json!({"message": user("hi"), "configuration":
            {"taskPushNotificationConfig": {"url": hang.url(), "id": "h"}}}),
    )
    .await;
    let task = body["result"]["task"]["id"].as_str().unwrap().to_owned();
    eventually(
        "a notification in flight",
        Duration::from_secs(10),
        || async {
            if hang.got().is_empty() {
                Err("none".to_owned())
            } else {
                Ok(())
            }
        },
    )
    .await;
    let (_, deleted) = rpc(
        &app,
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": task, "id": "h"}),
    )
    .await;
    assert_eq!(deleted["result"], json!({}), "{deleted}");
    let page = deliveries(&app, &format!("?conversation_id={task}")).await;
    assert_eq!(page["items"], json!([]), "{page}");
    let tried = hang.got().len();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(hang.got().len(), tried, "not tried again after its delete");
    assert_eq!(
        deliveries(&app, &format!("?conversation_id={task}")).await["items"],
        json!([])
    );

    // A conversation deleted with notifications owed to a receiver that is down: dropped.
    let down = Receiver::down("unused");
    app.llm.push(Step::text("done"));
    let (_, body) = rpc(
        &app,
        "SendMessage",
        json!({"message": user("hi"), "configuration":
            {"taskPushNotificationConfig": {"url": down.url()}}}),
    )
    .await;
    let task = body["result"]["task"]["id"].as_str().unwrap().to_owned();
    eventually("notifications queued", Duration::from_secs(10), || async {
        let page = deliveries(&app, &format!("?conversation_id={task}")).await;
        if page["items"].as_array().is_some_and(|a| !a.is_empty()) {
            Ok(())
        } else {
            Err(page.to_string())
        }
    })
    .await;
    let gone = app
        .client
        .delete(app.url(&format!("/api/conversations/{task}")))
        .send()
        .await
        .unwrap();
    assert!(gone.status().is_success(), "{}", gone.status());
    eventually("its deliveries gone", Duration::from_secs(10), || async {
        let page = deliveries(&app, &format!("?conversation_id={task}")).await;
        if page["items"] == json!([]) {
            Ok(())
        } else {
            Err(page.to_string())
        }
    })
    .await;
    down.start().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        down.got().is_empty(),
        "nothing sent for a deleted conversation"
    );
}

#[tokio::test]
async fn attack_push_a_model_cannot_leak_a_server_secret_into_a_notification() {
    let key = "sk-attack-push-server-key-9876";
    let app = spawn_app_with(&format!("[models.fake]\napi_key = \"{key}\"\n")).await;
    let receiver = Receiver::up("unused").await;
    app.llm.push(Step::tool(
        "leak",
        "bash",
        json!({"command": format!("touch /tmp/never-{key}")}),
    ));
    let (_, body) = rpc(
        &app,
        "SendMessage",
        json!({"message": user("go"), "configuration":
            {"taskPushNotificationConfig": {"url": receiver.url()}}}),
    )
    .await;
    assert!(body["result"]["task"].is_object(), "{body}");
    let got = receiver
        .wait_for(Duration::from_secs(20), |got| {
            states(got).contains(&"TASK_STATE_INPUT_REQUIRED".to_owned())
        })
        .await;
    let waiting = got.last().unwrap();
    let text = String::from_utf8_lossy(&waiting.raw).into_owned();
    assert!(text.contains("leak"), "the pending call is shown: {text}");
    assert!(!text.contains(key), "the server's key is masked: {text}");
    assert!(!text.contains(&key[..12]), "{text}");
}

#[tokio::test]
async fn attack_push_and_webhook_queues_hold_each_other_back_in_nothing() {
    // The configured receiver down: push notifications still arrive.
    let webhook = Receiver::down("unused");
    let push = Receiver::up("unused").await;
    let app = spawn_app_with(&format!(
        "[[webhooks]]\nname = \"ops\"\nbase_url = \"{}\"\n",
        webhook.url()
    ))
    .await;
    app.llm.push(Step::text("done"));
    rpc(
        &app,
        "SendMessage",
        json!({"message": user("hi"), "configuration":
            {"taskPushNotificationConfig": {"url": push.url()}}}),
    )
    .await;
    push.wait_for(Duration::from_secs(20), |got| {
        states(got).last().map(String::as_str) == Some("TASK_STATE_COMPLETED")
    })
    .await;
    drop(app);

    // The push target down: the configured receiver still hears everything.
    let webhook = Receiver::up("unused").await;
    let push = Receiver::down("unused");
    let app = spawn_app_with(&format!(
        "[[webhooks]]\nname = \"ops\"\nbase_url = \"{}\"\n",
        webhook.url()
    ))
    .await;
    app.llm.push(Step::text("done"));
    let (_, body) = rpc(
        &app,
        "SendMessage",
        json!({"message": user("hi"), "configuration":
            {"taskPushNotificationConfig": {"url": push.url(), "token": "push-only-token"}}}),
    )
    .await;
    let task = body["result"]["task"]["id"].as_str().unwrap().to_owned();
    let got = webhook
        .wait_for(Duration::from_secs(20), |got| {
            got.iter()
                .any(|g| g.path == "/conversations" && g.body.to_string().contains("\"finished\""))
        })
        .await;
    for g in &got {
        assert!(
            !String::from_utf8_lossy(&g.raw).contains("push-only-token"),
            "a push config's token never reaches a configured receiver"
        );
        assert!(g.headers.get("x-a2a-notification-token").is_none());
    }
    eventually(
        "the receiver's queue drained",
        Duration::from_secs(20),
        || async {
            let page = deliveries(&app, &format!("?conversation_id={task}&receiver=ops")).await;
            if page["items"] == json!([]) {
                Ok(())
            } else {
                Err(page.to_string())
            }
        },
    )
    .await;
}

#[tokio::test]
async fn attack_push_turned_off_refuses_every_path() {
    let app = spawn_app_with("[a2a]\npush_notifications = false\n").await;
    let task = finished_task(&app).await;
    let config = json!({"url": "http://127.0.0.1:1/"});
    let mut by_context = user("more");
    by_context["contextId"] = json!(task);
    let mut new_context = user("new");
    new_context["contextId"] = json!(uuid::Uuid::new_v4());
    for message in [by_context, new_context] {
        let (_, answer) = rpc(
            &app,
            "SendMessage",
            json!({"message": message, "configuration": {"taskPushNotificationConfig": config}}),
        )
        .await;
        assert_eq!(answer["error"]["code"], -32003, "{answer}");
    }
    let (_, answer) = rpc(
        &app,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task}),
    )
    .await;
    assert_eq!(answer["error"]["code"], -32003, "{answer}");
}
