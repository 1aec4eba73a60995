//! Configuration that never lies: what a newcomer writes is what triage does, or triage says
//! why not (issue 12). The binary runs as a subprocess, as a user runs it.

use serde_json::json;
use triage::config::Settings;

use crate::cli::{config_for, text, triage, triage_env};
use crate::helpers::spawn_with_settings;
use fake_llm::{FakeLlm, Step};

fn write_temp(name: &str, contents: &str) -> std::path::PathBuf {
    let path = crate::helpers::scratch().join(format!("{}-{name}", uuid::Uuid::new_v4().simple()));
    std::fs::write(&path, contents).unwrap();
    path
}

#[tokio::test]
async fn a_typo_in_a_model_entry_stops_start_up_naming_key_entry_and_valid_keys() {
    let llm = FakeLlm::start().await;
    for typo in ["api_bse = \"http://127.0.0.1:1/v1\"", "temprature = 0.2"] {
        let config = config_for(&llm, &format!("[models.x]\nmodel = \"openai/m\"\n{typo}\n"));
        for command in ["check", "models", "serve"] {
            let out = triage(Some(&config), &[command]).await;
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command}: {err}");
            let key = typo.split(' ').next().unwrap();
            assert!(err.contains(&format!("`{key}`")), "{err}");
            assert!(err.contains("[models.x]"), "{err}");
            assert!(
                err.contains("api_base") && err.contains("temperature"),
                "{err}"
            );
        }
    }
    // HolmesGPT's model list YAML: the same rule.
    let list = write_temp(
        "models.yaml",
        "m:\n  model: openai/x\n  api_bse: http://h/v1\n",
    );
    let out = triage_env(
        &[("MODEL_LIST_FILE_LOCATION", list.to_str().unwrap())],
        &["models"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("`api_bse`"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn provider_keys_of_holmesgpt_model_lists_are_sent() {
    let llm = FakeLlm::start().await;
    llm.push(Step::text("ok"));
    let config = config_for(
        &llm,
        "reasoning_effort = \"low\"\nthinking = { type = \"enabled\", budget_tokens = 1024 }\nmax_tokens = 300\nextra_headers = { x-team = \"sre\" }\nallowed_openai_params = [\"reasoning_effort\"]\n",
    );
    let out = triage(Some(&config), &["ask", "q"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sent = &llm.requests()[0];
    assert_eq!(sent["reasoning_effort"], "low");
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 1024})
    );
    assert_eq!(sent["max_tokens"], 300);
    assert!(sent.get("allowed_openai_params").is_none(), "{sent}");
    assert!(sent.get("extra_headers").is_none(), "{sent}");
}

/// Runs `--help` of `args` and returns every `[env: X]` it advertises.
async fn advertised_env(args: &[&str]) -> Vec<String> {
    let help = text(&triage(None, args).await.stdout);
    help.split("[env: ")
        .skip(1)
        .filter_map(|rest| rest.split(['=', ']']).next().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn every_variable_help_advertises_works() {
    let llm = FakeLlm::start().await;
    let config = config_for(&llm, "");
    let mut vars = Vec::new();
    for args in [&["ask", "--help"][..], &["serve", "--help"], &["--help"]] {
        vars.extend(advertised_env(args).await);
    }
    assert!(vars.contains(&"TRIAGE_API_KEY".to_owned()), "{vars:?}");
    for var in vars {
        let out = triage_env(
            &[
                (var.as_str(), "some-value"),
                ("TRIAGE_CONFIG", config.to_str().unwrap()),
            ],
            &["models"],
        )
        .await;
        assert_eq!(out.status.code(), Some(0), "{var}: {}", text(&out.stderr));
    }
}

#[tokio::test]
async fn openai_base_variables_are_honoured_and_check_shows_the_endpoint() {
    let llm = FakeLlm::start().await;
    for var in ["OPENAI_API_BASE", "OPENAI_BASE_URL"] {
        llm.push(Step::text("answered locally"));
        let env = [
            ("MODEL", "openai/fake-model"),
            (var, llm.base_url().leak() as &str),
            ("OPENAI_API_KEY", "sk-local-test"),
        ];
        let out = triage_env(&env, &["ask", "q"]).await;
        assert_eq!(out.status.code(), Some(0), "{var}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "answered locally\n");
        let out = triage_env(&env, &["check"]).await;
        let report = text(&out.stdout);
        assert!(
            report.contains(&format!("{}/chat/completions", llm.base_url())),
            "{report}"
        );
    }
}

#[tokio::test]
async fn api_base_without_model_says_to_set_model() {
    let out = triage_env(&[("API_BASE", "http://127.0.0.1:8000/v1")], &["models"]).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("API_BASE is set but MODEL is not"), "{err}");
    assert!(!err.to_ascii_lowercase().contains("env_model"), "{err}");
}

#[tokio::test]
async fn the_default_model_is_the_first_in_the_file() {
    let llm = FakeLlm::start().await;
    let text_config = format!(
        "[models.zeta]\nmodel = \"openai/fake-model\"\napi_base = \"{}\"\n[models.alpha]\nmodel = \"openai/x\"\napi_base = \"http://127.0.0.1:9/v1\"\n",
        llm.base_url()
    );
    let config = write_temp("order.toml", &text_config);
    let out = triage(Some(&config), &["models"]).await;
    assert_eq!(
        text(&out.stdout),
        "zeta (default)\nalpha\n",
        "{}",
        text(&out.stderr)
    );

    let settings = Settings::from_toml_layers(&[
        "[server]\nport = 0\n[toolsets.kubernetes]\nenabled = false\n[toolsets.prometheus]\nenabled = false\n",
        &text_config,
    ])
    .unwrap();
    let app = spawn_with_settings(settings, llm).await;
    let (_, models) = app.get_json("/api/model").await;
    assert_eq!(models["model_name"], json!(["zeta", "alpha"]));
    let (_, info) = app.get_json("/api/info").await;
    assert_eq!(info["default_model"], "zeta");
    assert_eq!(info["models"], json!(["zeta", "alpha"]));
    app.llm.push(Step::text("from zeta"));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["analysis"], "from zeta");
}

#[tokio::test]
async fn check_calls_each_model_and_fails_when_the_default_fails() {
    let llm = FakeLlm::start().await;
    let root = llm.base_url().trim_end_matches("/v1").to_owned();
    let config = config_for(
        &llm,
        &format!(
            "[models.wrongpath]\nmodel = \"openai/fake-model\"\napi_base = \"{root}/api\"\n[models.wrongname]\nmodel = \"openai/no-such-model\"\napi_base = \"{}\"\n[models.down]\nmodel = \"openai/x\"\napi_base = \"http://127.0.0.1:9/v1\"\n",
            llm.base_url()
        ),
    );
    llm.push(Step::error(
        404,
        "The model `no-such-model` does not exist.",
    ));
    let out = triage(Some(&config), &["check"]).await;
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}{}", text(&out.stderr));
    let line = |key: &str| {
        report
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{key} ")))
            .unwrap_or_else(|| panic!("no line for {key}: {report}"))
            .to_owned()
    };
    assert!(
        line("fake").contains("(default)") && line("fake").ends_with("reachable"),
        "{report}"
    );
    assert!(
        line("wrongpath").contains(&format!("try api_base = \"{root}/api/v1\"")),
        "{report}"
    );
    assert!(
        line("wrongname").contains("wrong model name") && line("wrongname").contains("fake-model"),
        "{report}"
    );
    assert!(line("down").contains("unreachable"), "{report}");

    // The default model's credentials refused: check fails.
    llm.set_models(Err(401));
    let out = triage(Some(&config), &["check"]).await;
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        line_of(&report, "fake").contains("auth refused"),
        "{report}"
    );
}

fn line_of(report: &str, key: &str) -> String {
    report
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{key} ")))
        .unwrap_or_default()
        .to_owned()
}
