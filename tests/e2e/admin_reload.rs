//! `POST /api/admin/reload*` (`ENABLE_ADMIN_API`): the files read again and swapped in whole;
//! a request in flight finishes on the configuration it started with; a broken file leaves the
//! old one serving and answers 500 with the error; 404 when the admin API is off; API key
//! required.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use triage::config::HolmesFiles;

use crate::helpers::{
    TestApp, eventually, json_body, scratch, spawn_app_reloadable, spawn_app_with,
};
use fake_llm::{Step, When};

const ADMIN_ON: &str = "[admin]\nenabled = true\n";

fn scratch_file(name: &str, text: &str) -> PathBuf {
    let dir = scratch().join(format!("admin-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    file
}

/// A HolmesGPT model list with one model per `(key, model id)`, all at the fake LLM.
fn model_list(llm_base: &str, models: &[(&str, &str)]) -> String {
    models
        .iter()
        .map(|(key, id)| format!("{key}:\n  model: openai/{id}\n  api_base: {llm_base}\n"))
        .collect()
}

async fn post(app: &TestApp, path: &str) -> (u16, Value) {
    let resp = app.client.post(app.url(path)).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, json_body(resp).await)
}

async fn model_keys(app: &TestApp) -> Vec<String> {
    let (status, body) = app.get_json("/api/model").await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_value(body["model_name"].clone()).unwrap()
}

/// An app that reads its model list from a file the test rewrites.
async fn app_with_model_list(extra: &str) -> (TestApp, PathBuf) {
    let list = scratch_file("model_list.yaml", "");
    let extras = format!(
        "model_list_file = \"{}\"\n{ADMIN_ON}{extra}",
        list.display()
    );
    // Tests write the fake's URL into the list once it is known; this entry is never called.
    std::fs::write(
        &list,
        "placeholder: {model: openai/p, api_base: \"http://127.0.0.1:9/v1\"}\n",
    )
    .unwrap();
    let app = spawn_app_reloadable(HolmesFiles::default(), &[&extras]).await;
    (app, list)
}

#[tokio::test]
async fn reloading_models_serves_the_new_model_list() {
    let (app, list) = app_with_model_list("").await;
    std::fs::write(
        &list,
        model_list(&app.llm.base_url(), &[("first", "first-model")]),
    )
    .unwrap();
    // Nothing changes until the reload.
    assert!(!model_keys(&app).await.contains(&"first".to_owned()));
    let (status, body) = post(&app, "/api/admin/reload/models").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "success");
    assert_eq!(body["component"], "models");
    assert_eq!(body["counts"]["models"], 2, "{body}");
    let keys = model_keys(&app).await;
    assert!(
        keys.contains(&"first".to_owned()) && keys.contains(&"fake".to_owned()),
        "{keys:?}"
    );
    assert!(!keys.contains(&"placeholder".to_owned()), "{keys:?}");

    std::fs::write(
        &list,
        model_list(&app.llm.base_url(), &[("second", "second-model")]),
    )
    .unwrap();
    let (status, body) = post(&app, "/api/admin/reload").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["component"], "all");
    let keys = model_keys(&app).await;
    assert!(
        keys.contains(&"second".to_owned()) && !keys.contains(&"first".to_owned()),
        "{keys:?}"
    );
    // The new model answers.
    app.llm.push(Step::text("hello from second"));
    let (status, answer) = app
        .chat_json(&json!({"ask": "hi", "model": "second"}))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(app.llm.requests().last().unwrap()["model"], "second-model");
}

#[tokio::test]
async fn a_request_in_flight_during_a_reload_finishes_on_the_old_model() {
    let (app, list) = app_with_model_list("").await;
    let base = app.llm.base_url();
    std::fs::write(&list, model_list(&base, &[("triage", "old-model")])).unwrap();
    let (status, body) = post(&app, "/api/admin/reload/models").await;
    assert_eq!(status, 200, "{body}");
    // The old model holds its answer until after the reload.
    let old = app.llm.when(When::model("old-model"));
    old.push(Step::Paced {
        before: Duration::from_millis(2500),
        between_chunks: Duration::ZERO,
        step: Box::new(Step::text("answered by the old model")),
    });
    let new = app.llm.when(When::model("new-model"));
    new.push(Step::text("answered by the new model"));
    let in_flight = {
        let client = app.client.clone();
        let url = app.url("/api/chat");
        tokio::spawn(async move {
            let resp = client
                .post(url)
                .json(&json!({"ask": "first", "model": "triage"}))
                .send()
                .await
                .unwrap();
            (resp.status().as_u16(), json_body(resp).await)
        })
    };
    eventually(
        "the old model's call to start",
        Duration::from_secs(10),
        || async { old.request_count() == 1 },
    )
    .await;
    std::fs::write(&list, model_list(&base, &[("triage", "new-model")])).unwrap();
    let (status, body) = post(&app, "/api/admin/reload/models").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        !in_flight.is_finished(),
        "the old model answered before the reload: no test"
    );
    let (status, answer) = in_flight.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["analysis"], "answered by the old model");
    // The next request takes the new configuration.
    let (status, answer) = app
        .chat_json(&json!({"ask": "second", "model": "triage"}))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["analysis"], "answered by the new model");
    assert_eq!((old.request_count(), new.request_count()), (1, 1));
}

#[tokio::test]
async fn a_broken_file_answers_500_and_the_old_configuration_keeps_serving() {
    let (app, list) = app_with_model_list("").await;
    std::fs::write(
        &list,
        model_list(&app.llm.base_url(), &[("kept", "kept-model")]),
    )
    .unwrap();
    assert_eq!(post(&app, "/api/admin/reload/models").await.0, 200);
    for broken in ["kept: [this is: not: a model\n", "kept: not a mapping\n"] {
        std::fs::write(&list, broken).unwrap();
        let (status, body) = post(&app, "/api/admin/reload/models").await;
        assert_eq!(status, 500, "{body}");
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.contains("previous configuration is still serving"),
            "{detail}"
        );
        assert!(detail.contains("model"), "{detail}");
        let keys = model_keys(&app).await;
        assert!(keys.contains(&"kept".to_owned()), "{keys:?}");
    }
    app.llm.push(Step::text("still here"));
    let (status, answer) = app.chat_json(&json!({"ask": "hi", "model": "kept"})).await;
    assert_eq!(status, 200, "{answer}");
}

#[tokio::test]
async fn reloading_toolsets_reads_the_toolset_files_again() {
    let file = scratch_file("custom_toolset.yaml", "toolsets: {}\n");
    let holmes = HolmesFiles {
        config: None,
        toolset_files: vec![file.clone()],
        ..HolmesFiles::default()
    };
    let app = spawn_app_reloadable(holmes, &[ADMIN_ON]).await;
    let has_toolset = |info: &Value| {
        info["toolsets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "reloaded_tools" && t["status"] == "enabled")
    };
    let (_, info) = app.get_json("/api/info").await;
    assert!(!has_toolset(&info));
    std::fs::write(
        &file,
        "toolsets:\n  reloaded_tools:\n    description: \"added later\"\n    tools:\n      - name: \"say_hello\"\n        description: \"Say hello\"\n        command: \"echo hello\"\n",
    )
    .unwrap();
    let (status, body) = post(&app, "/api/admin/reload/toolsets").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["component"], "toolsets");
    let (_, info) = app.get_json("/api/info").await;
    assert!(has_toolset(&info), "{info}");
    // A toolset file that no longer reads: refused, and the toolset is still there.
    std::fs::write(&file, "toolsets: [unclosed\n").unwrap();
    let (status, body) = post(&app, "/api/admin/reload/toolsets").await;
    assert_eq!(status, 500, "{body}");
    let (_, info) = app.get_json("/api/info").await;
    assert!(has_toolset(&info), "{info}");
}

#[tokio::test]
async fn the_admin_api_is_404_when_off() {
    let app = spawn_app_with("").await;
    for path in [
        "/api/admin/reload",
        "/api/admin/reload/toolsets",
        "/api/admin/reload/models",
    ] {
        let (status, body) = post(&app, path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .contains("ENABLE_ADMIN_API")
        );
    }
}

#[tokio::test]
async fn reloads_need_the_api_key() {
    let app = spawn_app_with(&format!(
        "{ADMIN_ON}[server]\napi_keys = [\"admin-key-1\"]\n"
    ))
    .await;
    let (status, _) = post(&app, "/api/admin/reload/models").await;
    assert_eq!(status, 401);
    let resp = app
        .client
        .post(app.url("/api/admin/reload/models"))
        .bearer_auth("admin-key-1")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

/// `triage serve` as an operator starts it: `ENABLE_ADMIN_API`, `SLACK_TOKEN` and
/// `MODEL_LIST_FILE_LOCATION` from the environment. A reload reads the model list again; a
/// failed check's deliveries (Slack refusing the channel, a receiver quoting the request's
/// headers back) leave no credential in the answer or the log.
#[tokio::test]
async fn serve_takes_the_admin_switch_and_slack_token_from_the_environment() {
    use crate::notification_fakes::Fakes;
    const SLACK_TOKEN: &str = "xoxb-env-token-31337";
    const HEADER_SECRET: &str = "echoed-header-secret-42";
    let llm = fake_llm::FakeLlm::start().await;
    let fakes = Fakes::start().await;
    let list = scratch_file(
        "models.yaml",
        &model_list(&llm.base_url(), &[("before", "m1")]),
    );
    let config = list.with_file_name("triage.toml");
    let port = crate::helpers::free_port();
    std::fs::write(
        &config,
        format!(
            "[server]\nport = {port}\n[toolsets.kubernetes]\nenabled = false\n\
             [toolsets.prometheus]\nenabled = false\n[checks]\nslack_api_base = \"{base}/api\"\n",
            base = fakes.base
        ),
    )
    .unwrap();
    let log = list.with_file_name("stderr.log");
    let _server = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TRIAGE_CONFIG", &config)
        .env("XDG_DATA_HOME", crate::helpers::test_data_dir())
        .env("MODEL_LIST_FILE_LOCATION", &list)
        .env("ENABLE_ADMIN_API", "true")
        .env("SLACK_TOKEN", SLACK_TOKEN)
        .arg("serve")
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let client = crate::helpers::http_client();
    let base = format!("http://127.0.0.1:{port}");
    crate::helpers::wait_until_ready(&client, &base).await;
    let keys = |body: Value| -> Vec<String> {
        serde_json::from_value(body["model_name"].clone()).unwrap()
    };

    std::fs::write(&list, model_list(&llm.base_url(), &[("after", "m2")])).unwrap();
    let resp = client
        .post(format!("{base}/api/admin/reload/models"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let models = json_body(
        client
            .get(format!("{base}/api/model"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(keys(models), ["after"]);

    llm.push(Step::text(
        r#"{"rationale": "the queue is stuck", "passed": false}"#,
    ));
    let resp = client
        .post(format!("{base}/api/checks/execute"))
        .json(
            &json!({"query": "Is the queue draining?", "mode": "alert", "destinations": [
                {"type": "slack", "config": {"channel": "#nope"}},
                {"type": "webhook", "config": {"url": format!("{}/hook/echo", fakes.base),
                    "headers": {"X-Secret": HEADER_SECRET}}},
            ]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let answer = json_body(resp).await;
    assert_eq!(answer["status"], "fail", "{answer}");
    let notes = answer["notifications"].as_array().unwrap();
    assert_eq!(notes[0]["status"], "failed", "{answer}");
    assert!(
        notes[0]["error"]
            .as_str()
            .unwrap()
            .contains("channel_not_found")
    );
    assert_eq!(notes[1]["status"], "failed", "{answer}");
    let echoed = notes[1]["error"].as_str().unwrap();
    assert!(
        echoed.contains("HTTP 400") && echoed.contains("<secret-hidden>"),
        "{echoed}"
    );
    // Slack got the token from the environment.
    let slack = fakes.to("/api/chat.postMessage");
    assert_eq!(
        slack[0].headers["authorization"],
        format!("Bearer {SLACK_TOKEN}")
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("check notification not delivered"),
        "{logged}"
    );
    for secret in [SLACK_TOKEN, HEADER_SECRET] {
        assert!(!answer.to_string().contains(secret), "{secret} in {answer}");
        assert!(!logged.contains(secret), "{secret} in the log:\n{logged}");
    }
}
