//! The `triage` binary as a user runs it: a subprocess with its own config file.

use std::path::PathBuf;
use std::process::Output;

use serde_json::{Value, json};

use crate::helpers::spawn_app;
use fake_llm::{FakeLlm, Step};

/// Writes a config pointing at the fake LLM and returns its path.
pub(crate) fn config_for(llm: &FakeLlm, extra: &str) -> PathBuf {
    let path =
        crate::helpers::scratch().join(format!("cli-{}.toml", uuid::Uuid::new_v4().simple()));
    // A server started with this file keeps its conversations beside it, not in $HOME; its
    // background title requests are answered aside from the scripted LLM's answers.
    crate::helpers::answer_titles(llm);
    let database = path.with_extension("db");
    let text = format!(
        "[toolsets.kubernetes]\nenabled = false\n[toolsets.prometheus]\nenabled = false\n[llm]\nretry_max_attempts = 1\n[conversations]\ndatabase_url = \"sqlite://{}\"\n[models.fake]\nmodel = \"openai/fake-model\"\napi_base = \"{}\"\n{extra}",
        database.display(),
        llm.base_url()
    );
    std::fs::write(&path, text).unwrap();
    path
}

pub(crate) async fn triage(config: Option<&PathBuf>, args: &[&str]) -> Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"));
    // Only what the test sets: no HOLMES_*, MODEL or OPENAI_API_KEY from the environment.
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .args(args);
    if let Some(c) = config {
        cmd.env("TRIAGE_CONFIG", c);
    }
    cmd.output().await.expect("triage runs")
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn ask_prints_the_answer_and_progress() {
    let llm = FakeLlm::start().await;
    llm.push(Step::tool(
        "c1",
        "TodoWrite",
        json!({"todos": [{"id": "1", "content": "check logs", "status": "in_progress"}]}),
    ));
    llm.push(Step::text("## Root cause\nThe pod is **OOMKilled**."));
    let config = config_for(&llm, "");
    let out = triage(Some(&config), &["ask", "why is pod x crashing?"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "## Root cause\nThe pod is **OOMKilled**.\n"
    );
    let progress = text(&out.stderr);
    assert!(
        progress.contains("✓ TodoWrite — Update investigation tasks"),
        "{progress}"
    );
    assert!(progress.contains("tokens"), "{progress}");
    assert!(
        llm.requests()[0]["messages"][1]["content"]
            .as_str()
            .unwrap()
            .starts_with("why is pod x crashing?")
    );
}

#[tokio::test]
async fn ask_json_prints_the_response_body() {
    let llm = FakeLlm::start().await;
    llm.push(Step::text("fine"));
    let config = config_for(&llm, "");
    let out = triage(
        Some(&config),
        &["ask", "--json", "--model", "fake", "is it ok?"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["analysis"], "fine");
    assert_eq!(body["follow_up_actions"].as_array().unwrap().len(), 3);
    assert!(body["metadata"]["tokens"]["total_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn behavior_flags_shape_the_prompt() {
    let llm = FakeLlm::start().await;
    llm.push(Step::text("a"));
    llm.push(Step::text("b"));
    let config = config_for(&llm, "");
    assert_eq!(
        triage(Some(&config), &["ask", "q"]).await.status.code(),
        Some(0)
    );
    let out = triage(
        Some(&config),
        &[
            "ask",
            "--behavior",
            "style_guide=off",
            "--behavior",
            "general_instructions=off",
            "q",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let full = llm.requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .len();
    let trimmed = llm.requests()[1]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .len();
    assert!(trimmed < full, "{trimmed} < {full}");
    let bad = triage(Some(&config), &["ask", "--behavior", "style_guide", "q"]).await;
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("KEY=on|off"));
}

#[tokio::test]
async fn ask_a_running_server() {
    let app = spawn_app().await;
    app.llm
        .push(Step::tool("t", "TodoWrite", json!({"todos": []})));
    app.llm.push(Step::text("from the server"));
    let out = triage(None, &["ask", "--server", &app.base, "q"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "from the server");
    assert!(text(&out.stderr).contains("TodoWrite"));
    app.llm.push(Step::text("json from the server"));
    let out = triage(None, &["ask", "--json", "--server", &app.base, "q"]).await;
    let body: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["analysis"], "json from the server");
    let out = triage(
        None,
        &["ask", "--server", &app.base, "--model", "nope", "q"],
    )
    .await;
    // The server's 400 for an unknown model is a usage error.
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("Unknown model 'nope'"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn failures_exit_1_and_usage_errors_exit_2() {
    let llm = FakeLlm::start().await;
    llm.push(Step::error(500, "provider down"));
    let config = config_for(&llm, "");
    let out = triage(Some(&config), &["ask", "q"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("provider down"));
    // A command that needs approval, no terminal to ask on.
    llm.push(Step::tool(
        "r",
        "bash",
        json!({"command": "rm -rf /tmp/triage-cli-nope"}),
    ));
    let out = triage(Some(&config), &["ask", "--approve", "delete it"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("terminal"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(triage(Some(&config), &["ask"]).await.status.code(), Some(2));
    assert_eq!(
        triage(Some(&config), &["frobnicate"]).await.status.code(),
        Some(2)
    );
    let broken =
        crate::helpers::scratch().join(format!("cli-bad-{}.toml", uuid::Uuid::new_v4().simple()));
    std::fs::write(&broken, "[server]\nprot = 1\n").unwrap();
    let out = triage(Some(&broken), &["check"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("prot"));
}

#[tokio::test]
async fn models_and_check() {
    let llm = FakeLlm::start().await;
    let config = config_for(
        &llm,
        "[models.other]\nmodel = \"openai/x\"\napi_base = \"http://127.0.0.1:9/v1\"\n",
    );
    let out = triage(Some(&config), &["models"]).await;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "fake (default)\nother\n");
    let out = triage(Some(&config), &["check"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(
        report.contains("configuration: ok")
            && report.contains("fake (default)")
            && report.contains("sandbox: Landlock ABI "),
        "{report}"
    );
    assert!(
        report.contains("kubernetes") && report.contains("disabled in config"),
        "{report}"
    );
    assert!(
        report.contains("core_investigation") && report.contains("enabled"),
        "{report}"
    );
    // No model at all: check says how to configure one and fails.
    let empty =
        crate::helpers::scratch().join(format!("cli-empty-{}.toml", uuid::Uuid::new_v4().simple()));
    std::fs::write(&empty, "[toolsets.kubernetes]\nenabled = false\n").unwrap();
    let out = triage(Some(&empty), &["check"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stdout).contains("OPENAI_API_KEY"));
}

pub(crate) async fn triage_env(env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().await.expect("triage runs")
}

#[tokio::test]
async fn holmesgpt_environment_works_unchanged() {
    // OPENAI_API_KEY alone gives a default model.
    let out = triage_env(&[("OPENAI_API_KEY", "sk-test-123456")], &["models"]).await;
    assert_eq!(
        text(&out.stdout),
        "gpt-4.1 (default)\n",
        "{}",
        text(&out.stderr)
    );
    // MODEL + API_BASE: one model under its own id.
    let out = triage_env(
        &[
            ("MODEL", "openai/qwen2.5"),
            ("API_BASE", "http://127.0.0.1:8000/v1"),
        ],
        &["models"],
    )
    .await;
    assert_eq!(
        text(&out.stdout),
        "openai/qwen2.5 (default)\n",
        "{}",
        text(&out.stderr)
    );
    // HolmesGPT's model list YAML with {{ env.VAR }} placeholders.
    let list =
        crate::helpers::scratch().join(format!("models-{}.yaml", uuid::Uuid::new_v4().simple()));
    std::fs::write(
        &list,
        "fast-model:\n  model: openai/gpt-4.1-mini\n  api_key: \"{{ env.MY_KEY }}\"\n  temperature: 0\naccurate-model:\n  model: openai/gpt-4.1\n  base_url: http://127.0.0.1:4000\n  custom_args:\n    max_context_size: 64000\n",
    )
    .unwrap();
    let out = triage_env(
        &[
            ("MODEL_LIST_FILE_LOCATION", list.to_str().unwrap()),
            ("MY_KEY", "sk-x"),
        ],
        &["models"],
    )
    .await;
    assert_eq!(
        text(&out.stdout),
        "fast-model (default)\naccurate-model\n",
        "{}",
        text(&out.stderr)
    );
    // A bad value names the variable and the key.
    let out = triage_env(&[("HOLMES_PORT", "not-a-port")], &["models"]).await;
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("server.port") || err.contains("HOLMES_PORT"),
        "{err}"
    );
    // TRIAGE_* variables nest with __ and win over HolmesGPT's.
    let out = triage_env(
        &[
            ("HOLMES_PORT", "6000"),
            ("TRIAGE_SERVER__PORT", "not-a-port"),
        ],
        &["models"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    // A missing model list file is an error, not a silent empty list.
    let out = triage_env(
        &[("MODEL_LIST_FILE_LOCATION", "/nonexistent/models.yaml")],
        &["models"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("MODEL_LIST_FILE_LOCATION"));
}

#[tokio::test]
async fn json_logs_carry_the_request_id_and_no_prompts() {
    let llm = FakeLlm::start().await;
    llm.push(Step::error(400, "refused by the provider"));
    let port = crate::helpers::free_port();
    let config = config_for(&llm, &format!("[server]\nport = {port}\n"));
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TRIAGE_CONFIG", &config)
        .env("ENABLE_JSON_LOGS_FORMAT", "true")
        .arg("serve")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let client = crate::helpers::http_client();
    let base = format!("http://127.0.0.1:{port}");
    crate::helpers::wait_until_ready(&client, &base).await;
    let resp = client
        .post(format!("{base}/api/chat"))
        .header("content-type", "application/json")
        .body(json!({"ask": "SECRET-QUESTION-TEXT"}).to_string())
        .send()
        .await
        .unwrap();
    let request_id = resp.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(resp.status(), 500);
    server.start_kill().unwrap();
    let out = server.wait_with_output().await.unwrap();
    let logs = text(&out.stderr);
    let lines: Vec<Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(!lines.is_empty(), "no JSON log lines in: {logs}");
    let failure = lines
        .iter()
        .find(|l| l["fields"]["message"] == "LLM call failed")
        .unwrap_or_else(|| panic!("no LLM failure logged: {logs}"));
    assert!(failure.to_string().contains(&request_id), "{failure}");
    assert!(
        !logs.contains("SECRET-QUESTION-TEXT"),
        "the prompt was logged"
    );
}
