//! The tool sandbox as the real server sets it up: what `/api/info` reports, start-up refusing
//! a user it cannot drop to, a bash command running in its private TMPDIR, and kubectl
//! without access to a kubeconfig its user cannot read.

use serde_json::json;
use triage::config::Settings;
use triage::sandbox::{Sandbox, SandboxSettings};
use triage::startup::Application;
use triage::tools::ToolsetStatus;
use triage::tools::kubernetes::KubernetesConfig;

use crate::helpers::spawn_app_with;
use crate::kube_standin::{kubeconfig_text, unique_temp_dir};
use fake_llm::Step;

fn running_as_root() -> bool {
    // SAFETY: geteuid only reads the process's credentials.
    unsafe { libc::geteuid() == 0 }
}

#[tokio::test]
async fn api_info_reports_the_sandbox_in_force() {
    let app = spawn_app_with("[sandbox]\nmax_processes = 99\nmax_cpu_secs = 7\n").await;
    let (status, info) = app.get_json("/api/info").await;
    assert_eq!(status, 200);
    let sandbox = &info["sandbox"];
    assert_eq!(sandbox["limits"]["max_processes"], 99, "{sandbox}");
    assert_eq!(sandbox["limits"]["max_cpu_secs"], 7);
    assert_eq!(sandbox["limits"]["max_file_size_mb"], 100);
    assert_eq!(sandbox["no_new_privs"], true);
    // The kernels this runs on have Landlock; one without is reported as such.
    let landlock = &sandbox["landlock"];
    assert_eq!(landlock["available"], true, "{landlock}");
    assert!(landlock["kernel_abi"].as_u64().unwrap() >= 1);
    if running_as_root() {
        assert_eq!(sandbox["tools_uid"], 65534);
        assert_eq!(sandbox["separate_user"], true);
    }
}

#[tokio::test]
async fn start_up_refuses_a_tools_user_it_cannot_use() {
    let build = |toml: &str| {
        let settings = Settings::from_toml(&format!(
            "[server]\nport = 0\n[conversations]\ndata_dir = \"{}\"\n[toolsets.kubernetes]\nenabled = false\n{toml}",
            crate::helpers::test_data_dir().display()
        ))
        .expect("settings");
        Application::build(settings)
    };
    let err = build("[sandbox]\nuser = \"no-such-user-anywhere\"\n").await;
    if running_as_root() {
        let err = err.err().expect("refused").to_string();
        assert!(
            err.contains("sandbox.user") && err.contains("no such user"),
            "{err}"
        );
        let err = build("[sandbox]\nuser = \"root\"\n")
            .await
            .err()
            .expect("refused");
        assert!(err.to_string().contains("root"), "{err}");
    } else {
        // Not root: tools keep triage's uid and the setting does not apply.
        assert!(err.is_ok());
    }
    let err = Settings::from_toml("[sandbox]\nenabled = false\n").unwrap_err();
    assert!(err.to_string().contains("enabled"), "{err}");
}

#[tokio::test]
async fn bash_commands_run_in_a_private_tmpdir() {
    let app = spawn_app_with("").await;
    app.llm.push(Step::tool(
        "c1",
        "bash",
        json!({"command": "stat -c %a:%u . && ls -A && id -u"}),
    ));
    app.llm.push(Step::text("done"));
    let (status, body) = app.chat_json(&json!({"ask": "where am I?"})).await;
    assert_eq!(status, 200, "{body}");
    let data = body["tool_calls"][0]["result"]["data"].as_str().unwrap();
    // The working directory is the call's TMPDIR: empty, mode 700, the tools' user's.
    let uid = match running_as_root() {
        true => 65534,
        // SAFETY: geteuid only reads the process's credentials.
        false => unsafe { libc::geteuid() },
    };
    assert_eq!(data, format!("700:{uid}\n{uid}\n"));
}

#[tokio::test]
async fn a_kubeconfig_the_tools_user_cannot_read_makes_kubernetes_unavailable() {
    use std::os::unix::fs::PermissionsExt;
    if !running_as_root() {
        return; // the tools run as triage's own user, who can read it
    }
    let dir = unique_temp_dir("kube-private");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_text("http://127.0.0.1:1")).expect("write");
    let sandbox = Sandbox::new(&SandboxSettings::default(), &[], &[]).expect("sandbox");
    let ts = triage::tools::kubernetes::toolset(
        &KubernetesConfig {
            kubeconfig: Some(kubeconfig),
            ..KubernetesConfig::default()
        },
        &sandbox,
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    let ToolsetStatus::Unavailable(reason) = &ts.status else {
        panic!("expected unavailable, got {:?}", ts.status);
    };
    assert!(
        reason.contains("permission denied") && reason.contains("sandbox.user"),
        "{reason}"
    );
}
