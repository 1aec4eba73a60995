//! Errors that name the fix, exit codes as the README says, and quiet logs (issue 12).

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use triage::config::Settings;

use crate::cli::{config_for, text, triage, triage_env};
use crate::helpers::{eventually, http_client};
use crate::helpers::{names, spawn_app, spawn_with_settings};
use fake_llm::{FakeLlm, Step};

#[tokio::test]
async fn usage_errors_exit_2_and_name_the_fix() {
    let llm = FakeLlm::start().await;
    let config = config_for(&llm, "");
    // No model configured.
    for command in [&["ask", "q"][..], &["models"], &["check"]] {
        let out = triage_env(&[], command).await;
        assert_eq!(
            out.status.code(),
            Some(2),
            "{command:?}: {}",
            text(&out.stderr)
        );
    }
    // An unknown --model names the valid keys.
    let out = triage(Some(&config), &["ask", "--model", "nope", "q"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("Valid model keys: fake"),
        "{}",
        text(&out.stderr)
    );
    // An unknown --behavior key names the valid ones.
    let out = triage(Some(&config), &["ask", "--behavior", "style_guid=off", "q"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("style_guide"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(llm.request_count(), 0, "nothing reached the LLM");
    // Against a running server: cli::ask_a_running_server.
}

#[tokio::test]
async fn ask_server_urls_say_what_was_tried_and_what_to_write() {
    let out = triage(None, &["ask", "--server", "localhost:5050", "q"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("http://"),
        "{}",
        text(&out.stderr)
    );
    let out = triage(
        None,
        &["ask", "--server", "http://127.0.0.1:5050/api/chat", "q"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("write --server http://127.0.0.1:5050"),
        "{}",
        text(&out.stderr)
    );
    let out = triage(None, &["ask", "--server", "http://127.0.0.1:9", "q"]).await;
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("http://127.0.0.1:9/api/chat") && err.contains("triage serve"),
        "{err}"
    );
}

#[tokio::test]
async fn approve_without_a_terminal_says_approvals_need_one() {
    let llm = FakeLlm::start().await;
    llm.push(Step::tool(
        "r",
        "bash",
        json!({"command": "rm -rf /tmp/triage-nope"}),
    ));
    let config = config_for(&llm, "");
    let out = triage(Some(&config), &["ask", "--approve", "delete it"]).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("need a terminal") && !err.contains("with --approve"),
        "{err}"
    );
}

#[tokio::test]
async fn get_api_chat_is_405_with_json_and_allow() {
    let app = spawn_app().await;
    let resp = app.client.get(app.url("/api/chat")).send().await.unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(resp.headers()["allow"], "POST");
    let body = crate::helpers::json_body(resp).await;
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("GET is not accepted"),
        "{body}"
    );
}

#[tokio::test]
async fn provider_auth_refusal_is_502_naming_the_model_credentials() {
    let app = spawn_app().await;
    app.llm.push(Step::error(401, "Incorrect API key provided"));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 502, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("model 'fake'") && detail.contains("api_key"),
        "{detail}"
    );
}

#[tokio::test]
async fn a_provider_404_names_the_url_and_suggests_v1() {
    let llm = FakeLlm::start().await;
    let root = llm.base_url().trim_end_matches("/v1").to_owned();
    let settings = Settings::from_toml(&format!(
        "[server]\nport = 0\n[llm]\nretry_max_attempts = 1\n[toolsets.kubernetes]\nenabled = false\n[toolsets.prometheus]\nenabled = false\n[models.nov1]\nmodel = \"openai/fake-model\"\napi_base = \"{root}\"\n"
    ))
    .unwrap();
    let app = spawn_with_settings(settings, llm).await;
    for _ in 0..2 {
        app.llm.push(Step::error(404, "Not Found"));
    }
    let url = format!("{root}/chat/completions");
    let hint = format!("try api_base = \"{root}/v1\"");
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    let detail = body["detail"].as_str().unwrap();
    assert_eq!(status, 500, "{body}");
    assert!(detail.contains(&url) && detail.contains(&hint), "{detail}");
    let events = app.chat_sse(&json!({"ask": "q", "stream": true})).await;
    assert_eq!(names(&events), ["error"]);
    let description = events[0].data["description"].as_str().unwrap();
    assert!(
        description.contains(&url) && description.contains(&hint),
        "{description}"
    );
}

#[tokio::test]
async fn ignored_request_fields_are_reported_in_metadata_warnings() {
    let app = spawn_app().await;
    app.llm.push(Step::text("a"));
    let (status, body) = app
        .chat_json(&json!({"ask": "q", "streem": true, "behavior_controls": {"style_guid": false}}))
        .await;
    assert_eq!(status, 200, "{body}");
    let warnings = body["metadata"]["warnings"].to_string();
    assert!(
        warnings.contains("streem") && warnings.contains("style_guid"),
        "{body}"
    );
    app.llm.push(Step::text("b"));
    let events = app
        .chat_sse(&json!({"ask": "q", "stream": true, "colour": "red"}))
        .await;
    let end = events.last().unwrap();
    assert!(
        end.data["metadata"]["warnings"]
            .to_string()
            .contains("colour"),
        "{events:?}"
    );
    // Nothing ignored: no warnings key.
    app.llm.push(Step::text("c"));
    let (_, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert!(body["metadata"].get("warnings").is_none(), "{body}");
}

/// A kubectl stand-in: `version --client` reports `minor`, anything else fails as with no
/// cluster.
fn fake_kubectl(minor: u32) -> std::path::PathBuf {
    let path = crate::helpers::scratch().join(format!("kubectl-{}", uuid::Uuid::new_v4().simple()));
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in\n  *--client*) echo '{{\"clientVersion\":{{\"major\":\"1\",\"minor\":\"{minor}\",\"gitVersion\":\"v1.{minor}.0\"}}}}' ;;\n  *) echo 'error: no cluster here' >&2; exit 1 ;;\nesac\n"
    );
    std::fs::write(&path, script).unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&path)
        .status()
        .unwrap();
    path
}

#[tokio::test]
async fn kubectl_too_old_is_reported_by_check_and_api_info() {
    let llm = FakeLlm::start().await;
    let kubectl = fake_kubectl(20);
    let config = config_for(&llm, "").to_str().unwrap().to_owned();
    let text_config = std::fs::read_to_string(&config).unwrap().replace(
        "[toolsets.kubernetes]\nenabled = false",
        &format!("[toolsets.kubernetes]\nkubectl = \"{}\"", kubectl.display()),
    );
    std::fs::write(&config, &text_config).unwrap();
    let out = triage_env(&[("TRIAGE_CONFIG", &config)], &["check"]).await;
    assert!(
        text(&out.stdout).contains("kubectl 1.20 is too old"),
        "{}",
        text(&out.stdout)
    );
    let settings = Settings::from_toml_layers(&[&text_config, "[server]\nport = 0\n"]).unwrap();
    let app = spawn_with_settings(settings, llm).await;
    let (_, info) = app.get_json("/api/info").await;
    assert!(
        info.to_string().contains("kubectl 1.20 is too old"),
        "{info}"
    );
}

#[tokio::test]
async fn serve_takes_host_and_port_flags_and_logs_each_problem_once_without_colour() {
    let llm = FakeLlm::start().await;
    let port = crate::helpers::free_port();
    let kubectl = fake_kubectl(32);
    let config = config_for(&llm, "");
    let text_config = std::fs::read_to_string(&config).unwrap().replace(
        "[toolsets.kubernetes]\nenabled = false",
        &format!("[toolsets.kubernetes]\nkubectl = \"{}\"", kubectl.display()),
    );
    std::fs::write(&config, text_config).unwrap();
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TRIAGE_CONFIG", &config)
        // No HOME here: the conversation store must not land in the working tree.
        .env("XDG_DATA_HOME", crate::helpers::test_data_dir())
        .args(["serve", "--host", "127.0.0.1", "--port", &port.to_string()])
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let client = http_client();
    eventually(
        "serve --port to listen",
        Duration::from_secs(30),
        || async {
            client
                .get(format!("http://127.0.0.1:{port}/healthz"))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
        },
    )
    .await;
    let _ = server.start_kill();
    let out = server.wait_with_output().await.unwrap();
    let log = text(&out.stderr);
    assert_eq!(log.matches("no cluster here").count(), 1, "{log}");
    assert!(!log.contains('\x1b'), "{log}");
    assert!(
        log.contains("model configured") && log.contains("/v1/chat/completions"),
        "{log}"
    );

    // One-shot commands do not warn about the approval signing key.
    llm.push(Step::text("fine"));
    let out = triage(Some(&config), &["ask", "q"]).await;
    assert!(
        !text(&out.stderr).contains("signing key"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn the_console_can_say_no_model_is_configured_before_anyone_types() {
    let settings = Settings::from_toml(
        "[server]\nport = 0\napi_keys = [\"k\"]\n[toolsets.kubernetes]\nenabled = false\n[toolsets.prometheus]\nenabled = false\n",
    )
    .unwrap();
    if std::env::var("OPENAI_API_KEY").is_ok() {
        return; // that variable alone configures a model
    }
    let app = spawn_with_settings(settings, FakeLlm::start().await).await;
    // Both without the API key: the page asks /readyz first and links the README section.
    let (status, ready) = app.get_json("/readyz").await;
    assert_eq!(status, 503);
    assert!(
        ready["detail"].as_str().unwrap().contains("OPENAI_API_KEY"),
        "{ready}"
    );
    let readme = app
        .client
        .get(app.url("/console/readme.md"))
        .send()
        .await
        .unwrap();
    assert_eq!(readme.status(), 200);
    assert!(
        readme
            .text()
            .await
            .unwrap()
            .contains("## Pointing triage at an LLM")
    );
    let script = app
        .client
        .get(app.url("/console/app.js"))
        .send()
        .await
        .unwrap();
    let script = script.text().await.unwrap();
    assert!(script.contains("\"/readyz\"") && script.contains("/console/readme.md"));
}
