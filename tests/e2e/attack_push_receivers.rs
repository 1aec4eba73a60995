//! A2A push notifications attacked as a hostile receiver (redirects, hanging, echoing its
//! secrets back in an error, deleted mid-flight) and a hostile model (a server key in a tool
//! call's arguments): each contained or masked; push and webhook queues hold each other back
//! in nothing.

use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use serde_json::json;

use crate::a2a::rpc;
use crate::attack_push::{create, deliveries, finished_task, states, user};
use crate::helpers::{eventually, spawn_app_with};
use crate::webhook_receiver::{Answer, Receiver};
use fake_llm::Step;

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
