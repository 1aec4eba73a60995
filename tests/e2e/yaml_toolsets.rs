//! Custom toolsets in HolmesGPT's YAML format (the files in tests/fixtures/holmes, loaded
//! unchanged) driven through `/api/chat` by the fake LLM: hostile arguments arrive as literal
//! words, scripts with optional parameters, the timeout, approvals, failing prerequisites.

use std::path::PathBuf;

use serde_json::{Value, json};
use triage::config::HolmesFiles;

use crate::helpers::{TestApp, names, spawn_app_holmes};
use fake_llm::Step;

pub(crate) fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

async fn app_with(files: &[&str]) -> TestApp {
    let holmes = HolmesFiles {
        config: None,
        toolset_files: files.iter().map(|f| fixture(f)).collect(),
        ..HolmesFiles::default()
    };
    spawn_app_holmes(&holmes, &[]).await
}

/// The `tool_calling_result` data of each call, by call id.
fn results(events: &[crate::helpers::Event]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter(|e| e.name == "tool_calling_result")
        .map(|e| {
            (
                e.data["tool_call_id"].as_str().unwrap_or("").to_owned(),
                e.data.clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn hostile_arguments_arrive_as_literal_words() {
    let app = app_with(&["holmes/script_tools.yaml"]).await;
    let dir = crate::helpers::tool_writable_dir("yaml-quoting");
    let d = dir.display();
    let hostile = [
        format!("$(touch {d}/pwned1)"),
        format!("`touch {d}/pwned2`"),
        format!("x; touch {d}/pwned3"),
        format!("x\ntouch {d}/pwned4"),
        format!("'; touch {d}/pwned5; '"),
        format!("\"; touch {d}/pwned6; \""),
        format!("x' && touch {d}/pwned7 && echo '"),
        "$HOME * ~ {a,b}".to_owned(),
    ];
    let calls: Vec<(String, &str, Value)> = hostile
        .iter()
        .enumerate()
        .map(|(i, h)| (format!("c{i}"), "echo_argument", json!({"value": h})))
        .collect();
    app.llm.push(Step::tools(
        calls
            .iter()
            .map(|(id, name, args)| (id.as_str(), *name, args.clone()))
            .collect(),
    ));
    app.llm.push(Step::text("done"));
    let events = app.chat_sse(&json!({"ask": "echo these"})).await;
    assert_eq!(crate::helpers::last(&events).name, "ai_answer_end");
    let results = results(&events);
    assert_eq!(results.len(), hostile.len());
    for (i, h) in hostile.iter().enumerate() {
        let (_, r) = results
            .iter()
            .find(|(id, _)| *id == format!("c{i}"))
            .expect("a result per call");
        assert_eq!(r["result"]["status"], "success", "{r}");
        assert_eq!(r["result"]["data"], format!("ARG[{h}]\n"), "{h:?}");
    }
    for n in 1..=7 {
        assert!(
            !dir.join(format!("pwned{n}")).exists(),
            "hostile value {n} ran a command"
        );
    }
    // The model saw the toolset's tool with its inferred parameter.
    let tools = app.llm.requests()[0]["tools"].clone();
    let echo = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "echo_argument")
        .expect("echo_argument offered to the model")
        .clone();
    assert_eq!(echo["function"]["parameters"]["required"], json!(["value"]));
}

#[tokio::test]
async fn scripts_optional_parameters_and_the_timeout() {
    let app = app_with(&["holmes/script_tools.yaml"]).await;
    app.llm.push(Step::tools(vec![
        ("all", "count_words", json!({"text": "alpha beta gamma"})),
        (
            "some",
            "count_words",
            json!({"text": "alpha beta alphabet", "pattern": "alpha"}),
        ),
        ("slow", "slow_tool", json!({"seconds": 30})),
        ("bad", "slow_tool", json!({"seconds": "30; id"})),
    ]));
    app.llm.push(Step::text("done"));
    let started = std::time::Instant::now();
    let events = app.chat_sse(&json!({"ask": "count"})).await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "the 1 s timeout did not stop the 30 s sleep"
    );
    let results = results(&events);
    let get = |id: &str| results.iter().find(|(i, _)| i == id).unwrap().1.clone();
    assert_eq!(get("all")["result"]["data"], "words=3\n", "{}", get("all"));
    assert_eq!(get("some")["result"]["data"], "words=3 matching=2\n");
    let slow = get("slow");
    assert_eq!(slow["result"]["status"], "error");
    assert!(
        slow["result"]["error"]
            .as_str()
            .unwrap()
            .contains("timed out after 1 s"),
        "{slow}"
    );
    let bad = get("bad");
    assert!(
        bad["result"]["error"]
            .as_str()
            .unwrap()
            .contains("expected a integer"),
        "{bad}"
    );
}

#[tokio::test]
async fn a_tool_that_requires_approval_waits_for_it() {
    let app = app_with(&["holmes/script_tools.yaml"]).await;
    let dir = crate::helpers::tool_writable_dir("yaml-approval");
    let args = json!({"directory": dir.display().to_string()});
    app.llm
        .push(Step::tools(vec![("w", "write_marker", args.clone())]));
    let events = app
        .chat_sse(&json!({"ask": "write it", "enable_tool_approval": true}))
        .await;
    let paused = crate::helpers::last(&events);
    assert_eq!(paused.name, "approval_required", "{:?}", names(&events));
    assert_eq!(
        paused.data["pending_approvals"][0]["tool_name"],
        "write_marker"
    );
    assert!(!dir.join("approved-marker").exists(), "nothing ran yet");

    app.llm.push(Step::text("Written."));
    let events = app
        .chat_sse(
            &json!({"ask": "", "conversation_history": paused.data["conversation_history"],
            "enable_tool_approval": true,
            "tool_decisions": [{"tool_call_id": "w", "approved": true}]}),
        )
        .await;
    assert_eq!(
        events[0].data["result"]["data"], "created\n",
        "{}",
        events[0].data
    );
    assert!(
        dir.join("approved-marker").exists(),
        "the approved tool ran"
    );

    // Without approvals enabled, the call becomes an error the model reads; nothing runs.
    let other = crate::helpers::tool_writable_dir("yaml-approval");
    app.llm.push(Step::tools(vec![(
        "w2",
        "write_marker",
        json!({"directory": other.display().to_string()}),
    )]));
    app.llm.push(Step::text("ok"));
    let (status, body) = app.chat_json(&json!({"ask": "write it"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tool_calls"][0]["result"]["status"], "error", "{body}");
    assert!(!other.join("approved-marker").exists());
}

#[tokio::test]
async fn failing_prerequisites_are_reported_and_their_tools_withheld() {
    let app = app_with(&["holmes/prerequisites.yaml", "holmes/kubernetes_extras.yaml"]).await;
    let (status, info) = app.get_json("/api/info").await;
    assert_eq!(status, 200);
    let toolset = |name: &str| {
        info["toolsets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {info}"))
            .clone()
    };
    let grafana = toolset("grafana_helpers");
    assert_eq!(grafana["status"], "failed");
    assert!(
        grafana["error"]
            .as_str()
            .unwrap()
            .contains("TRIAGE_TEST_GRAFANA_URL_NOT_SET is not set"),
        "{grafana}"
    );
    let vendor = toolset("vendor_cli");
    assert_eq!(vendor["status"], "failed");
    assert!(
        vendor["error"]
            .as_str()
            .unwrap()
            .contains("`triage-test-vendor-cli --version`"),
        "{vendor}"
    );
    // kubectl is installed here: the kubectl toolset's prerequisite holds.
    let extras = toolset("kubernetes/extras");
    assert_eq!(extras["status"], "enabled", "{extras}");
    assert_eq!(extras["tool_count"], 2);

    app.llm.push(Step::text("hi"));
    let _ = app.chat_json(&json!({"ask": "hi"})).await;
    let offered: Vec<String> = app.llm.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(offered.contains(&"kubectl_find_resource".to_owned()));
    assert!(
        !offered.contains(&"grafana_health".to_owned()),
        "{offered:?}"
    );
    assert!(!offered.contains(&"vendor_status".to_owned()));
    let prompt = app.system_prompt_sent(0);
    assert!(
        prompt.contains("kubectl_find_resource to find a resource"),
        "llm_instructions reach the prompt"
    );
}

#[tokio::test]
async fn toolsets_from_triages_toml_with_a_masked_env_secret() {
    let app = crate::helpers::spawn_app_with(
        r#"
[yaml_toolsets.inline]
description = "Defined in triage's TOML"
[yaml_toolsets.inline.env]
API_TOKEN = "inline-secret-value-123"
[[yaml_toolsets.inline.tools]]
name = "say"
description = "Says a word"
command = "echo said {{ word }}"
[[yaml_toolsets.inline.tools]]
name = "leak_token"
description = "Prints the token (to show it is masked)"
command = "echo token=$API_TOKEN"
"#,
    )
    .await;
    app.llm.push(Step::tools(vec![
        ("say", "say", json!({"word": "hello; echo injected"})),
        ("leak", "leak_token", json!({})),
    ]));
    app.llm.push(Step::text("done"));
    let (status, body) = app.chat_json(&json!({"ask": "say it"})).await;
    assert_eq!(status, 200, "{body}");
    let data = |i: usize| {
        body["tool_calls"][i]["result"]["data"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    let (say, leak) = if body["tool_calls"][0]["tool_call_id"] == "say" {
        (data(0), data(1))
    } else {
        (data(1), data(0))
    };
    assert_eq!(say, "said hello; echo injected\n");
    assert_eq!(
        leak, "token=<secret-hidden>\n",
        "the toolset's env secret is masked"
    );
}

#[tokio::test]
async fn an_empty_mcp_servers_from_helm_configures_nothing() {
    let dir = crate::helpers::scratch().join(format!("helm-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("custom_toolset.yaml");
    std::fs::write(&file, "toolsets: {}\nmcp_servers: {}\n").unwrap();
    let holmes = HolmesFiles {
        config: None,
        toolset_files: vec![file],
        ..HolmesFiles::default()
    };
    assert!(triage::config::Settings::from_holmes_and_toml(&holmes, &[]).is_ok());
    let _ = std::fs::remove_dir_all(dir);
}

/// A local API: `/big` answers 10 KB, `/fail` a 500 with a message, `/redirect` a 302.
async fn local_api() -> String {
    use axum::routing::get;
    let app = axum::Router::new()
        .route("/big", get(|| async { "x".repeat(10_000) }))
        .route(
            "/fail",
            get(|| async {
                (
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    "database down",
                )
            }),
        )
        .route(
            "/redirect",
            get(|| async {
                (
                    axum::http::StatusCode::FOUND,
                    [(axum::http::header::LOCATION, "http://127.0.0.1:1/elsewhere")],
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn http_tools_cap_the_body_report_errors_and_follow_no_redirect() {
    let api = local_api().await;
    let app = crate::helpers::spawn_app_with(&format!(
        r#"
[yaml_toolsets.api]
type = "http"
max_output_bytes = 1000
[[yaml_toolsets.api.tools]]
name = "api_get"
description = "GET a path of the API"
url = "{api}/{{{{ path }}}}"
"#
    ))
    .await;
    app.llm.push(Step::tools(vec![
        ("big", "api_get", json!({"path": "big"})),
        ("fail", "api_get", json!({"path": "fail"})),
        ("redirect", "api_get", json!({"path": "redirect"})),
        ("escape", "api_get", json!({"path": "../big"})),
        ("dots", "api_get", json!({"path": ".."})),
    ]));
    app.llm.push(Step::text("done"));
    let (status, body) = app.chat_json(&json!({"ask": "call the api"})).await;
    assert_eq!(status, 200, "{body}");
    let result = |id: &str| {
        body["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["tool_call_id"] == id)
            .unwrap()["result"]
            .clone()
    };
    let big = result("big");
    assert_eq!(big["status"], "success");
    assert!(
        big["data"]
            .as_str()
            .unwrap()
            .ends_with("[response cut at 1000 bytes]"),
        "{big}"
    );
    let fail = result("fail");
    assert_eq!(fail["status"], "error");
    assert!(
        fail.to_string().contains("500") && fail.to_string().contains("database down"),
        "{fail}"
    );
    let redirect = result("redirect");
    assert_eq!(
        redirect["status"], "error",
        "a 302 is not followed: {redirect}"
    );
    // `..` is encoded into the one path segment: no route, a 404, not /big.
    let escape = result("escape");
    assert_eq!(escape["status"], "error", "{escape}");
    assert!(escape.to_string().contains("404"), "{escape}");
    let dots = result("dots");
    assert!(
        dots.to_string().contains("may not be `.` or `..`"),
        "{dots}"
    );
}

#[tokio::test]
async fn a_server_side_conversation_waits_for_a_yaml_tool_approval() {
    use crate::conversations_api::{approve_until_finished, create, frames_until, state_is};
    let app = app_with(&["holmes/script_tools.yaml"]).await;
    let dir = crate::helpers::tool_writable_dir("yaml-conversation");
    app.llm.push(Step::tool(
        "w",
        "write_marker",
        json!({"directory": dir.display().to_string()}),
    ));
    app.llm.push(Step::text("Written."));
    let id = create(
        &app,
        json!({"initial_message": {"content": "write the marker"}}),
    )
    .await;
    frames_until(&app, &id, None, state_is("waiting_for_confirmation")).await;
    assert!(
        !dir.join("approved-marker").exists(),
        "nothing ran before the confirmation"
    );
    approve_until_finished(&app, &id).await;
    assert!(
        dir.join("approved-marker").exists(),
        "the confirmed tool ran"
    );
}
