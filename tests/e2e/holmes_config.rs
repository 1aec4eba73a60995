//! HolmesGPT's config files: `~/.holmes/config.yaml` (through `HOLMES_CONFIGPATH_DIR`) and the
//! Helm chart's `CUSTOM_TOOLSET_LOCATION` file, read by a real `triage serve` subprocess
//! (HOME and the config dir are temp dirs: the real ~/.holmes is never read), with built-in
//! toolsets enabled by HolmesGPT's names, custom toolsets (kubectl against the API stand-in,
//! an HTTP API), skills, and everything triage lacks reported, not dropped.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::routing::get;
use serde_json::{Value, json};
use triage::config::{HolmesFiles, Settings};

use crate::helpers::{free_port, http_client, wait_until_ready};
use crate::kube_standin::{self, POD_CRASH};
use crate::yaml_toolsets::fixture;
use fake_llm::{FakeLlm, Step};

fn temp_dir(purpose: &str) -> PathBuf {
    let dir = crate::helpers::scratch().join(format!(
        "holmes-{purpose}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A HolmesGPT config.yaml as a user writes it, pointing at the fake LLM.
fn write_config(dir: &Path, llm: &FakeLlm) -> PathBuf {
    let text = format!(
        "model: openai/fake-model\napi_base: {llm}\napi_key: sk-holmes-test\nmax_steps: 7\n\
         cluster_name: staging\n\
         alertmanager_url: http://alertmanager:9093\nslack_channel: '#sre'\njira_query: 'project = OPS'\n\
         custom_toolsets:\n  - {extras}\n  - {scripts}\n  - {http}\n\
         custom_skill_paths:\n  - {skills}\n\
         skill_repos:\n  - https://git.example/skills.git\n\
         toolsets:\n  kubernetes/core:\n    enabled: true\n",
        llm = llm.base_url(),
        extras = fixture("holmes/kubernetes_extras.yaml").display(),
        scripts = fixture("holmes/script_tools.yaml").display(),
        http = fixture("holmes/http_toolset.yaml").display(),
        skills = fixture("skills").display(),
    );
    let path = dir.join("config.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_files_map_onto_triages_settings() {
    let dir = temp_dir("map");
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "model: openai/m\napi_base: http://127.0.0.1:1/v1\nmax_steps: 9\ncluster_name: prod\n\
             github_owner: me\npagerduty_api_key: x\ncustom_skill_paths: [{}]\n",
            fixture("skills").display()
        ),
    )
    .unwrap();
    let files = HolmesFiles {
        config: Some(config.clone()),
        toolset_files: vec![fixture("holmes/helm_custom_toolset.yaml")],
        ..HolmesFiles::default()
    };
    let s = Settings::from_holmes_and_toml(&files, &[]).expect("HolmesGPT files load");
    let env_model = s.env_model.as_ref().expect("the model of config.yaml");
    assert_eq!(env_model.model, "openai/m");
    assert_eq!(env_model.api_base.as_deref(), Some("http://127.0.0.1:1/v1"));
    assert_eq!(s.agent.max_steps, 9);
    assert_eq!(s.prompts.cluster_name, "prod");
    assert!(s.toolsets.kubernetes.enabled);
    assert!(s.toolsets.prometheus.enabled);
    assert_eq!(
        s.toolsets.prometheus.url.as_deref(),
        Some("http://127.0.0.1:9")
    );
    assert!(!s.toolsets.internet.enabled);
    assert_eq!(s.toolsets.bash.allow, ["helm list"]);
    assert_eq!(s.skills.paths, [fixture("skills")]);
    let mut unavailable: Vec<&str> = s
        .holmes
        .unavailable
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    unavailable.sort();
    assert_eq!(
        unavailable,
        ["grafana/loki", "mcpAddons.aws"],
        "datadog/logs is disabled"
    );
    assert_eq!(
        s.holmes.files,
        [config, fixture("holmes/helm_custom_toolset.yaml")]
    );

    // triage's own TOML wins over HolmesGPT's files.
    let s =
        Settings::from_holmes_and_toml(&files, &["[toolsets.internet]\nenabled = true\n"]).unwrap();
    assert!(s.toolsets.internet.enabled);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn unknown_keys_are_errors_naming_key_and_file() {
    let dir = temp_dir("unknown");
    let config = dir.join("config.yaml");
    let load = |text: &str| {
        std::fs::write(&config, text).unwrap();
        let files = HolmesFiles {
            config: Some(config.clone()),
            toolset_files: Vec::new(),
            ..HolmesFiles::default()
        };
        Settings::from_holmes_and_toml(&files, &[])
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let err = load("modle: openai/x\n").unwrap_err();
    assert!(
        err.contains("`modle`") && err.contains(&config.display().to_string()),
        "{err}"
    );
    let err = load("api_key: sk-x\n").unwrap_err();
    assert!(err.contains("not `model`"), "{err}");
    // A typo inside a custom toolset is named with its path and the file.
    let err =
        load("toolsets:\n  mine:\n    tools:\n      - name: t\n        comand: ls\n").unwrap_err();
    assert!(
        err.contains("comand") && err.contains("HolmesGPT config"),
        "{err}"
    );
    // mcp_servers reaches triage's `mcp_servers` settings unchanged.
    std::fs::write(
        &config,
        "mcp_servers:\n  docs:\n    description: the docs server\n    config:\n      url: http://127.0.0.1:1/mcp\n      mode: streamable-http\n",
    )
    .unwrap();
    let files = HolmesFiles {
        config: Some(config.clone()),
        toolset_files: Vec::new(),
        ..HolmesFiles::default()
    };
    let s = Settings::from_holmes_and_toml(&files, &[]).expect("mcp_servers load");
    let docs = &s.mcp_servers["docs"];
    assert_eq!(docs.description, "the docs server");
    assert_eq!(docs.config.url.as_deref(), Some("http://127.0.0.1:1/mcp"));
    assert!(docs.config.mode.is_some());
    // A typo inside an MCP server is named.
    let err = load("mcp_servers:\n  docs:\n    config:\n      urll: http://x\n").unwrap_err();
    assert!(err.contains("urll"), "{err}");
    // A toolset file takes toolsets, mcp_servers and mcpAddons only.
    let file = dir.join("toolsets.yaml");
    std::fs::write(&file, "toolset:\n  x: {}\n").unwrap();
    let err = Settings::from_holmes_and_toml(
        &HolmesFiles {
            config: None,
            toolset_files: vec![file.clone()],
            ..HolmesFiles::default()
        },
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("`toolset`") && err.contains(&file.display().to_string()),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Each request's path and Authorization header.
type Requests = Arc<Mutex<Vec<(String, String)>>>;

/// The HTTP API of the `status_api` fixture: records each request's path and Authorization.
async fn status_api() -> (String, Requests) {
    let seen: Requests = Arc::default();
    let app = Router::new()
        .route(
            "/services/{*rest}",
            get(
                |State(seen): State<Requests>, uri: Uri, headers: HeaderMap| async move {
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_owned();
                    seen.lock().unwrap().push((uri.path().to_owned(), auth));
                    r#"{"status":"degraded"}"#
                },
            ),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}"), seen)
}

#[tokio::test]
async fn serve_reads_holmes_config_and_the_helm_toolset_file() {
    let standin = kube_standin::start().await;
    let (api, api_seen) = status_api().await;
    let llm = FakeLlm::start().await;
    let home = temp_dir("home");
    let config_dir = temp_dir("config");
    write_config(&config_dir, &llm);
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let env: Vec<(&str, String)> = vec![
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", home.display().to_string()),
        ("HOLMES_CONFIGPATH_DIR", config_dir.display().to_string()),
        (
            "CUSTOM_TOOLSET_LOCATION",
            fixture("holmes/helm_custom_toolset.yaml")
                .display()
                .to_string(),
        ),
        (
            "KUBECONFIG",
            standin.kubeconfig_path().display().to_string(),
        ),
        ("STATUS_API_URL", api.clone()),
        ("STATUS_API_TOKEN", "tok-123".into()),
        ("HOLMES_PORT", port.to_string()),
        ("XDG_DATA_HOME", home.join("data").display().to_string()),
    ];

    // `triage check` lists every toolset, the unavailable ones with their reasons.
    let mut check = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"));
    check.env_clear().arg("check");
    for (k, v) in &env {
        check.env(k, v);
    }
    let out = check.output().await.expect("triage check runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    for line in [
        "grafana/loki",
        "a HolmesGPT built-in toolset triage has no equivalent for",
        "mcpAddons.aws",
        "skill_repos",
        "not supported",
        "kubernetes/extras",
        "status_api",
    ] {
        assert!(
            stdout.contains(line),
            "{line} missing from:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_triage"));
    cmd.env_clear().arg("serve").kill_on_drop(true);
    for (k, v) in &env {
        cmd.env(k, v);
    }
    let _server = cmd.spawn().expect("triage serve starts");
    let client = http_client();
    wait_until_ready(&client, &base).await;

    let info =
        crate::helpers::json_body(client.get(format!("{base}/api/info")).send().await.unwrap())
            .await;
    let status = |name: &str| -> (String, String) {
        let t = info["toolsets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in {info}"));
        (
            t["status"].as_str().unwrap_or("").to_owned(),
            t["error"].as_str().unwrap_or("").to_owned(),
        )
    };
    assert_eq!(status("kubernetes").0, "enabled", "{info}");
    assert_eq!(status("internet").0, "disabled");
    assert_eq!(
        status("prometheus").0,
        "failed",
        "enabled by the Helm file, unreachable here"
    );
    assert_eq!(status("grafana/loki").0, "failed");
    assert_eq!(status("kubernetes/extras").0, "enabled");
    assert_eq!(status("text_tools").0, "enabled");
    assert_eq!(
        status("status_api").0,
        "enabled",
        "{:?}",
        status("status_api")
    );
    assert_eq!(status("skills").0, "enabled");
    assert_eq!(info["models"], json!(["openai/fake-model"]));

    llm.push(Step::tools(vec![
        (
            "find",
            "kubectl_find_resource",
            json!({"kind": "pods", "namespace": "default", "keyword": "checkout"}),
        ),
        (
            "api",
            "service_status",
            json!({"service": "checkout/../admin?x=1"}),
        ),
        ("skill", "fetch_skill", json!({"skill_name": "oom-kills"})),
        (
            "evil",
            "fetch_skill",
            json!({"skill_name": "../../etc/passwd"}),
        ),
    ]));
    llm.push(Step::text("The checkout pod is crash-looping."));
    let resp = client
        .post(format!("{base}/api/chat"))
        .header("content-type", "application/json")
        .body(json!({"ask": "why is checkout failing?"}).to_string())
        .send()
        .await
        .unwrap();
    let body = crate::helpers::json_body(resp).await;
    let result = |id: &str| -> Value {
        body["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["tool_call_id"] == id)
            .unwrap_or_else(|| panic!("{id} in {body}"))["result"]
            .clone()
    };
    let find = result("find");
    assert!(find["data"].as_str().unwrap().contains(POD_CRASH), "{find}");
    let api_result = result("api");
    assert_eq!(
        api_result["data"], r#"{"status":"degraded"}"#,
        "{api_result}"
    );
    let seen = api_seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [(
            "/services/checkout%2F..%2Fadmin%3Fx%3D1".to_owned(),
            "Bearer tok-123".to_owned()
        )]
    );
    let skill = result("skill");
    assert!(
        skill["data"]
            .as_str()
            .unwrap()
            .contains("Last State: Terminated"),
        "{skill}"
    );
    let evil = result("evil");
    assert_eq!(evil["status"], "error");
    assert!(!evil.to_string().contains("root:"), "{evil}");

    // The system prompt lists the skills; config.yaml's cluster name and step limit apply.
    let prompt = llm.requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(
        prompt.contains("oom-kills: Investigate containers killed"),
        "{prompt}"
    );
    assert!(prompt.contains("crashloop: Investigate pods in CrashLoopBackOff"));
    assert!(
        prompt.contains("staging"),
        "cluster_name reaches the prompt"
    );
    let _ = std::fs::remove_dir_all(home);
    let _ = std::fs::remove_dir_all(config_dir);
}
