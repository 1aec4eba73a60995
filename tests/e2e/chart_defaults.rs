//! What HolmesGPT's Helm chart leaves to defaults: it mounts `model_list.yaml` and
//! `custom_toolset.yaml` under `/etc/holmes/config/` and skills under `/etc/holmes/skills/`
//! without setting the variables that name them. A directory laid out as the chart mounts it
//! stands for `/etc/holmes` (tests cannot write there); everything else is the real server.
//! Also `[[webhooks]]` written without a `name`.

use std::path::{Path, PathBuf};

use serde_json::Value;
use triage::config::HolmesFiles;

use crate::helpers::{TestApp, spawn_app_holmes, spawn_app_with};

fn chart_root() -> PathBuf {
    let root =
        crate::helpers::scratch().join(format!("etc-holmes-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(root.join("config")).unwrap();
    root
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The chart's files: a model list, a toolset file with a custom toolset, and a skill
/// without `name` (as the chart's `customSkills` example writes it) in a ConfigMap layout.
fn mount_chart_files(root: &Path, llm_base: &str) {
    write(
        &root.join("config/model_list.yaml"),
        &format!(
            "chart-model:\n  model: openai/chart-model\n  api_base: {llm_base}\n  api_key: sk-chart\n"
        ),
    );
    write(
        &root.join("config/custom_toolset.yaml"),
        "toolsets:\n  chart/extras:\n    description: from the chart\n    tools:\n      - name: chart_echo\n        description: says hi\n        command: echo hi\nmcp_servers: {}\n",
    );
    let skills = root.join("skills");
    write(
        &skills.join("..2026_01_01_00_00_00.1/dns-troubleshooting/SKILL.md"),
        "---\ndescription: Troubleshoot DNS resolution failures in the cluster\n---\n1. Check CoreDNS\n",
    );
    std::os::unix::fs::symlink("..2026_01_01_00_00_00.1", skills.join("..data")).unwrap();
    std::os::unix::fs::symlink(
        "..data/dns-troubleshooting",
        skills.join("dns-troubleshooting"),
    )
    .unwrap();
}

fn toolset(info: &Value, name: &str) -> Value {
    info["toolsets"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("no toolset {name} in {info}"))
}

async fn models(app: &TestApp) -> Vec<String> {
    let (status, body) = app.get_json("/api/model").await;
    assert_eq!(status, 200, "{body}");
    body["model_name"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_charts_files_load_from_the_default_paths_without_variables() {
    let root = chart_root();
    // The fake LLM's address is known once an app started; the model list only has to name
    // an address, and the request below goes to the test's own `fake` model.
    mount_chart_files(&root, "http://127.0.0.1:9/v1");
    let no_variables = |_: &str| None;
    let files = HolmesFiles::find(&no_variables, &root);
    assert_eq!(
        files.toolset_files,
        [root.join("config/custom_toolset.yaml")]
    );
    let app = spawn_app_holmes(&files, &[]).await;
    let listed = models(&app).await;
    assert!(listed.contains(&"chart-model".to_owned()), "{listed:?}");
    let (_, info) = app.get_json("/api/info").await;
    assert_eq!(
        toolset(&info, "chart/extras")["status"],
        "enabled",
        "{info}"
    );
    assert_eq!(toolset(&info, "skills")["status"], "enabled", "{info}");
    app.llm.push(fake_llm::Step::text("ok"));
    let _ = app
        .chat_sse(&serde_json::json!({"ask": "q", "model": "fake"}))
        .await;
    let prompt = app.system_prompt_sent(0);
    assert!(
        prompt.contains("dns-troubleshooting")
            && prompt.contains("Troubleshoot DNS resolution failures"),
        "the chart's skill, named after its directory, is offered: {prompt}"
    );

    // The chart renders `mcp_servers` into the same file; `allowed_tools` may sit inside
    // `config` there, as HolmesGPT accepts it.
    write(
        &root.join("config/custom_toolset.yaml"),
        "mcp_servers:\n  docs:\n    config:\n      url: http://127.0.0.1:9/mcp\n      mode: streamable-http\n      allowed_tools: [search]\n",
    );
    let s = triage::config::Settings::from_holmes_and_toml(
        &HolmesFiles::find(&no_variables, &root),
        &[],
    )
    .expect("the chart's mcp_servers load");
    assert_eq!(
        s.mcp_servers["docs"].allowed_tools(),
        Some(&["search".to_owned()][..])
    );

    // Set variables win over the defaults, as in HolmesGPT; CUSTOM_SKILL_PATHS adds to them.
    let elsewhere = root.join("elsewhere.yaml");
    write(&elsewhere, "toolsets: {}\n");
    let team_skills = root.join("team-skills");
    let variables = |var: &str| match var {
        "CUSTOM_TOOLSET_LOCATION" => Some(elsewhere.display().to_string()),
        "MODEL_LIST_FILE_LOCATION" => Some("/somewhere/else.yaml".to_owned()),
        "CUSTOM_SKILL_PATHS" => Some(format!(" {} ,", team_skills.display())),
        _ => None,
    };
    let files = HolmesFiles::find(&variables, &root);
    assert_eq!(files.toolset_files, [elsewhere]);
    assert_eq!(files.default_model_list, None);
    assert_eq!(files.skill_dirs, [root.join("skills"), team_skills]);

    // Nothing mounted, nothing read: a machine without /etc/holmes starts as before.
    let bare = chart_root();
    let files = HolmesFiles::find(&no_variables, &bare);
    assert!(files.toolset_files.is_empty() && files.default_model_list.is_none());
    assert!(files.skill_dirs.is_empty());
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&bare);
}

/// `[[webhooks]]` without `name`, as the earlier issue's example wrote them: each is named after
/// its URL's host, a second one on that host gets `-2`, and their queues run under those names.
#[tokio::test]
async fn webhooks_without_a_name_are_named_after_their_host() {
    let app = spawn_app_with(
        "[[webhooks]]\nbase_url = \"http://127.0.0.1:9/a\"\n\
         [[webhooks]]\nbase_url = \"http://127.0.0.1:10/b\"\n\
         [[webhooks]]\nname = \"named\"\nbase_url = \"http://localhost:11\"\n",
    )
    .await;
    let metrics = crate::helpers::eventually(
        "the receivers' queue gauges",
        std::time::Duration::from_secs(10),
        || async {
            let m = app.metrics().await;
            ["\"127.0.0.1\"", "\"127.0.0.1-2\"", "\"named\""]
                .iter()
                .all(|r| m.contains(&format!("triage_webhook_queue_depth{{receiver={r}}}")))
                .then_some(m)
        },
    )
    .await;
    assert!(!metrics.contains("receiver=\"\""), "no receiver is unnamed");
}
