//! A2A push notifications attacked as a hostile client: metadata addresses spelled every way
//! the URL parser takes, the allow list dodged, header values built to inject or to bloat, a
//! config aimed at another task, the feature turned off: each refused. Hostile receivers and a
//! hostile model are `attack_push_receivers.rs`.

use serde_json::{Value, json};

use crate::a2a::rpc;
use crate::helpers::{TestApp, spawn_app, spawn_app_with};
use fake_llm::Step;

pub(crate) fn user(text: &str) -> Value {
    json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "parts": [{"text": text}]})
}

pub(crate) fn states(got: &[crate::webhook_receiver::Got]) -> Vec<String> {
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
pub(crate) async fn finished_task(app: &TestApp) -> String {
    app.llm.push(Step::text("done"));
    let (_, body) = rpc(app, "SendMessage", json!({"message": user("hi")})).await;
    body["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_owned()
}

pub(crate) async fn create(app: &TestApp, task: &str, mut config: Value) -> Value {
    config["taskId"] = json!(task);
    rpc(app, "CreateTaskPushNotificationConfig", config).await.1
}

/// The message of a refusal with `code` -32602.
pub(crate) fn refused(answer: &Value, what: &str) -> String {
    assert_eq!(answer["error"]["code"], -32602, "{what}: {answer}");
    answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

pub(crate) async fn deliveries(app: &TestApp, query: &str) -> Value {
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
