//! A2A push notifications, raw against the fake LLM and a loopback receiver: a config given
//! with the first message hears every status change of its task in order (working,
//! input-required with the calls waited for, working, completed), signed, with its own
//! `Authorization` and token, retried past a failing answer; configs read back without their
//! secrets; a deleted config hears nothing more; every refusal is a JSON-RPC error naming
//! the field.

use std::time::Duration;

use serde_json::{Value, json};

use crate::a2a::rpc;
use crate::helpers::{spawn_app, spawn_app_with};
use crate::webhook_receiver::{Answer, Receiver};
use fake_llm::Step;

fn user(text: &str) -> Value {
    json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "parts": [{"text": text}]})
}

async fn agent_card(app: &crate::helpers::TestApp) -> Value {
    let resp = app
        .client
        .get(app.url("/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap();
    crate::helpers::json_body(resp).await
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

#[tokio::test]
async fn a_task_pushes_each_status_change_to_its_config_in_order() {
    let receiver = Receiver::up("push-signing-secret").await;
    // The first attempt fails: the notification is sent again, the same delivery.
    receiver.script(vec![Answer::Status(503)]);
    let app = spawn_app_with(
        "[a2a]\npush_signing_secret = \"push-signing-secret\"\npush_max_per_task = 2\n",
    )
    .await;
    let dir = crate::helpers::tool_writable_dir("a2a-push");
    let command = format!("touch {}/pushed", dir.display());
    app.llm
        .push(Step::tool("risky", "bash", json!({"command": command})));
    app.llm.push(Step::text("Created it."));
    let config = json!({"url": format!("{}/hooks/a2a?team=sre", receiver.url()),
        "token": "task-token-123",
        "authentication": {"scheme": "Bearer", "credentials": "receiver-cred-456"}});
    let (_, body) = rpc(
        &app,
        "SendMessage",
        json!({"message": user("make the file"),
            "configuration": {"taskPushNotificationConfig": config}}),
    )
    .await;
    let task = body["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_owned();
    let got = receiver
        .wait_for(Duration::from_secs(20), |got| {
            states(got).contains(&"TASK_STATE_INPUT_REQUIRED".to_owned())
        })
        .await;
    let waiting = got.last().unwrap();
    let parts = &waiting.body["statusUpdate"]["status"]["message"]["parts"];
    assert_eq!(
        parts[1]["data"]["pendingActions"][0]["toolCallId"], "risky",
        "{}",
        waiting.body
    );

    let approve = json!({"messageId": "m-approve", "role": "ROLE_USER", "taskId": task,
        "parts": [{"data": {"approve": true, "toolCallId": "risky"}}]});
    let (_, body) = rpc(&app, "SendMessage", json!({"message": approve})).await;
    assert_eq!(
        body["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{body}"
    );
    let got = receiver
        .wait_for(Duration::from_secs(20), |got| {
            states(got).last().map(String::as_str) == Some("TASK_STATE_COMPLETED")
        })
        .await;
    assert_eq!(
        states(&got),
        [
            "TASK_STATE_WORKING",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED"
        ]
    );
    assert!(
        receiver.got().len() > got.len(),
        "the failed attempt was retried"
    );
    for g in &got {
        assert_eq!(g.path, "/hooks/a2a");
        assert_eq!(g.body["statusUpdate"]["taskId"], task.as_str());
        assert_eq!(g.body["statusUpdate"]["contextId"], task.as_str());
        assert_eq!(g.headers["authorization"], "Bearer receiver-cred-456");
        assert_eq!(g.headers["x-a2a-notification-token"], "task-token-123");
        assert_eq!(g.headers["content-type"], "application/a2a+json");
        assert!(g.signature_ok, "signed with a2a.push_signing_secret");
    }
    assert!(dir.join("pushed").exists());

    // Read back without the token and the credentials; listed; a second config by id.
    let (_, listed) = rpc(
        &app,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task}),
    )
    .await;
    let configs = listed["result"]["configs"].as_array().unwrap().clone();
    assert_eq!(configs.len(), 1, "{listed}");
    let id = configs[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        configs[0],
        json!({"id": id, "taskId": task, "url": format!("{}/hooks/a2a?team=sre", receiver.url()),
            "authentication": {"scheme": "Bearer"}})
    );
    let (_, got_one) = rpc(
        &app,
        "GetTaskPushNotificationConfig",
        json!({"taskId": task, "id": id}),
    )
    .await;
    assert_eq!(got_one["result"], configs[0]);
    assert!(!listed.to_string().contains("task-token-123"));
    assert!(!listed.to_string().contains("receiver-cred-456"));
    let second = Receiver::up("unused").await;
    let (_, made) = rpc(
        &app,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "id": "second", "url": second.url()}),
    )
    .await;
    assert_eq!(made["result"]["id"], "second", "{made}");
    let (_, full) = rpc(
        &app,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "id": "third", "url": second.url()}),
    )
    .await;
    assert_eq!(full["error"]["code"], -32602, "push_max_per_task: {full}");

    // Deleted: nothing more arrives there; the other config still hears the next turn.
    let (_, deleted) = rpc(
        &app,
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": task, "id": id}),
    )
    .await;
    assert_eq!(deleted["result"], json!({}), "{deleted}");
    let (_, again) = rpc(
        &app,
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": task, "id": id}),
    )
    .await;
    assert_eq!(again["result"], json!({}), "idempotent: {again}");
    let before = receiver.unique().len();
    app.llm.push(Step::text("Still fine."));
    let mut next = user("and now?");
    next["contextId"] = json!(task);
    let (_, body) = rpc(&app, "SendMessage", json!({"message": next})).await;
    assert_eq!(
        body["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{body}"
    );
    second
        .wait_for(Duration::from_secs(20), |got| {
            states(got).last().map(String::as_str) == Some("TASK_STATE_COMPLETED")
        })
        .await;
    assert_eq!(
        receiver.unique().len(),
        before,
        "the deleted config heard nothing"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn push_configs_are_refused_precisely() {
    let app = spawn_app().await;
    app.llm.push(Step::text("done"));
    let (_, body) = rpc(&app, "SendMessage", json!({"message": user("hi")})).await;
    let task = body["result"]["task"]["id"].as_str().unwrap().to_owned();
    let card = agent_card(&app).await;
    assert_eq!(card["capabilities"]["pushNotifications"], true);

    let cases: Vec<(Value, i64, &str)> = vec![
        (
            json!({"url": "http://169.254.169.254/latest/meta-data"}),
            -32602,
            "link-local",
        ),
        (json!({"url": "http://[fe80::1]/x"}), -32602, "link-local"),
        (
            json!({"url": "http://[::ffff:169.254.169.254]/"}),
            -32602,
            "link-local",
        ),
        (
            json!({"url": "http://metadata.google.internal/"}),
            -32602,
            "metadata",
        ),
        (
            json!({"url": "http://user:pass@127.0.0.1:1/"}),
            -32602,
            "credentials",
        ),
        (json!({"url": "ftp://127.0.0.1/"}), -32602, "http or https"),
        (json!({"url": "not a url"}), -32602, "not a URL"),
        (
            json!({"url": "http://127.0.0.1:1/", "token": "a\r\nX-Injected: 1"}),
            -32602,
            "token",
        ),
        (
            json!({"url": "http://127.0.0.1:1/", "authentication":
            {"scheme": "Bearer", "credentials": "x\ny"}}),
            -32602,
            "credentials",
        ),
        (
            json!({"url": "http://127.0.0.1:1/", "authentication": {"scheme": "Bear er"}}),
            -32602,
            "scheme",
        ),
        (
            json!({"url": "http://127.0.0.1:1/", "id": "../../etc"}),
            -32602,
            "id",
        ),
        (
            json!({"url": "http://127.0.0.1:1/", "bogus": 1}),
            -32602,
            "bogus",
        ),
    ];
    for (mut config, code, says) in cases {
        config["taskId"] = json!(task);
        let (_, answer) = rpc(&app, "CreateTaskPushNotificationConfig", config.clone()).await;
        assert_eq!(answer["error"]["code"], code, "{config}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{config}: {message}");
    }
    // With the first message, refused before any task is made.
    let (_, answer) = rpc(
        &app,
        "SendMessage",
        json!({"message": user("hi"), "configuration":
            {"taskPushNotificationConfig": {"url": "http://169.254.169.254/"}}}),
    )
    .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(
        app.llm.request_count(),
        1,
        "only the first task reached the model"
    );
    // Unknown tasks and configs, paging this agent does not hand out.
    for (method, params, code) in [
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": uuid::Uuid::new_v4(), "url": "http://127.0.0.1:1/"}),
            -32001,
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": task, "id": "nope"}),
            -32001,
        ),
        (
            "ListTaskPushNotificationConfigs",
            json!({"taskId": task, "pageToken": "forged"}),
            -32602,
        ),
    ] {
        let (_, answer) = rpc(&app, method, params).await;
        assert_eq!(answer["error"]["code"], code, "{method}: {answer}");
    }

    // Turned off: the card says so and every method answers -32003.
    let off = spawn_app_with("[a2a]\npush_notifications = false\n").await;
    let card = agent_card(&off).await;
    assert_eq!(card["capabilities"]["pushNotifications"], false);
    for (method, params) in [
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task, "url": "http://127.0.0.1:1/"}),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": task, "id": "x"}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": task})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": task, "id": "x"}),
        ),
        (
            "SendMessage",
            json!({"message": user("hi"), "configuration":
            {"taskPushNotificationConfig": {"url": "http://127.0.0.1:1/"}}}),
        ),
    ] {
        let (_, answer) = rpc(&off, method, params).await;
        assert_eq!(answer["error"]["code"], -32003, "{method}: {answer}");
    }
    // An allow list admits its hosts only.
    let listed = spawn_app_with("[a2a]\npush_allowed_hosts = [\"hooks.example\"]\n").await;
    listed.llm.push(Step::text("done"));
    let (_, body) = rpc(&listed, "SendMessage", json!({"message": user("hi")})).await;
    let task = body["result"]["task"]["id"].as_str().unwrap().to_owned();
    let (_, answer) = rpc(
        &listed,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "url": "http://127.0.0.1:1/"}),
    )
    .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let (_, answer) = rpc(
        &listed,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "url": "https://HOOKS.example/a2a"}),
    )
    .await;
    assert_eq!(
        answer["result"]["url"], "https://hooks.example/a2a",
        "{answer}"
    );
}
