//! The bash tool's allow list against a prompt-injected model (issue 11): words bash would
//! evaluate as code, kubectl credential plugins, and triage's own configuration files.

use serde_json::{Value, json};
use triage::config::Settings;

use crate::helpers::{spawn_app, spawn_with_settings};
use fake_llm::{FakeLlm, Step};

/// The result of the n-th tool call of a non-streaming answer.
fn result(body: &Value, n: usize) -> &Value {
    &body["tool_calls"][n]["result"]
}

fn assert_refused(body: &Value, n: usize, because: &str) {
    let r = result(body, n);
    let error = r["error"].as_str().unwrap_or_default();
    assert_eq!(r["status"], "error", "{r}");
    assert!(
        error.starts_with("Command refused") && error.contains(because),
        "call {n}: {r}"
    );
}

#[tokio::test]
async fn printf_v_subscripts_do_not_run_commands() {
    let app = spawn_app().await;
    let marker = crate::helpers::tool_writable_dir("printf-v").join("marker");
    let _ = std::fs::remove_file(&marker);
    app.llm.push(Step::tool(
        "a",
        "bash",
        json!({"command": "printf -v 'a[$(id >&2)]' x"}),
    ));
    app.llm.push(Step::tool(
        "b",
        "bash",
        json!({"command": format!("printf -v 'a[$(touch {})]' x", marker.display())}),
    ));
    app.llm.push(Step::text("done"));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    assert_refused(&body, 0, "printf -v");
    assert!(!result(&body, 0).to_string().contains("uid="), "{body}");
    assert_refused(&body, 1, "printf -v");
    assert!(!marker.exists(), "the subscript ran");
}

#[tokio::test]
async fn a_kubeconfig_from_the_model_is_refused() {
    let app = spawn_app().await;
    let marker = crate::helpers::tool_writable_dir("kube-exec").join("marker");
    let _ = std::fs::remove_file(&marker);
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "sh", "args": ["-c", format!("id >&2; touch {}", marker.display())]
        }}}]
    });
    let command = format!("printf '%s' '{kubeconfig}' | kubectl get pods --kubeconfig=/dev/stdin");
    app.llm
        .push(Step::tool("a", "bash", json!({ "command": command })));
    app.llm.push(Step::text("done"));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    assert_refused(&body, 0, "--kubeconfig");
    assert!(!marker.exists(), "the credential plugin ran");
}

#[tokio::test]
async fn triages_config_and_model_list_are_sensitive_paths() {
    let llm = FakeLlm::start().await;
    let dir = crate::helpers::scratch().join(format!("own-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let models = dir.join("models.yaml");
    std::fs::write(
        &models,
        format!(
            "fake:\n  model: openai/fake-model\n  api_base: {}\n  api_key: sk-in-the-list\n",
            llm.base_url()
        ),
    )
    .unwrap();
    let config = dir.join("triage.toml");
    std::fs::write(
        &config,
        format!(
            "model_list_file = \"{}\"\n[server]\nhost = \"127.0.0.1\"\nport = 0\n\
             [toolsets.kubernetes]\nenabled = false\n[toolsets.prometheus]\nenabled = false\n\
             [approvals]\nsigning_key = \"e2e-own-files-key\"\n",
            models.display()
        ),
    )
    .unwrap();
    let settings = Settings::load(Some(&config)).expect("settings from the file");
    let app = spawn_with_settings(settings, llm).await;
    for (id, path) in [("a", &config), ("b", &models)] {
        app.llm.push(Step::tool(
            id,
            "bash",
            json!({"command": format!("cat {}", path.display())}),
        ));
    }
    // Through a glob too.
    app.llm.push(Step::tool(
        "c",
        "bash",
        json!({"command": format!("cat {}/triage.t*", dir.display())}),
    ));
    app.llm.push(Step::text("done"));
    let (status, body) = app.chat_json(&json!({"ask": "q"})).await;
    assert_eq!(status, 200, "{body}");
    for n in 0..3 {
        assert_refused(&body, n, "sensitive path");
    }
    let text = body.to_string();
    assert!(!text.contains("e2e-own-files-key") && !text.contains("sk-in-the-list"));
    let _ = std::fs::remove_dir_all(&dir);
}
