//! triage's A2A door driven by PyPI's a2a-sdk client (tests/a2a_client/client.py in the venv
//! `.ci/a2a-client` builds; A2A_CLIENT_VENV names it): the card resolved, a streamed task, get
//! and list, a blocking follow-up in the same context, input-required → approve → completed,
//! the SDK's own exceptions for an unknown task and a missing A2A-Version, push notification
//! configs made with the SDK and the notifications they bring. Without the venv
//! the test skips with a note, unless A2A_CLIENT_TEST_REQUIRED=1 (.ci/run sets it).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::helpers::spawn_app_with;
use fake_llm::Step;

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/a2a_client/client.py");

fn venv_python() -> Option<PathBuf> {
    let python = std::env::var_os("A2A_CLIENT_VENV").map(|v| PathBuf::from(v).join("bin/python"));
    match python {
        Some(python) if python.is_file() => Some(python),
        _ => {
            assert!(
                std::env::var("A2A_CLIENT_TEST_REQUIRED").as_deref() != Ok("1"),
                "A2A_CLIENT_TEST_REQUIRED=1 but A2A_CLIENT_VENV names no venv: run \
                 `export A2A_CLIENT_VENV=$(bash .ci/a2a-client)`"
            );
            eprintln!(
                "SKIPPED a2a_client: no a2a-sdk venv; `export A2A_CLIENT_VENV=$(bash .ci/a2a-client)` makes one"
            );
            None
        }
    }
}

#[tokio::test]
async fn the_a2a_sdk_client_runs_a_whole_investigation() {
    let Some(python) = venv_python() else { return };
    let app = spawn_app_with("[server]\napi_keys = [\"a2a-client-key\"]\n").await;
    let dir = crate::helpers::tool_writable_dir("a2a-client");
    app.llm.push(Step::text("It is OOMKilled."));
    app.llm.push(Step::text("Raise the memory limit."));
    app.llm.push(Step::tool(
        "risky",
        "bash",
        json!({"command": format!("touch {}/marker", dir.display())}),
    ));
    app.llm.push(Step::text("Marker created."));
    app.llm.push(Step::text("Nothing else."));
    let receiver = crate::webhook_receiver::Receiver::up("unused").await;

    let run = tokio::process::Command::new(&python)
        .arg(CLIENT)
        .arg(&app.base)
        .arg("a2a-client-key")
        .arg(&dir)
        .arg(format!("{}/a2a-push", receiver.url()))
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env("NO_PROXY", "*")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the client finishes")
        .expect("the client starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "client failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for step in [
        "card",
        "streaming",
        "get and list",
        "blocking follow-up",
        "approval",
        "unknown task",
        "push config",
        "version",
    ] {
        assert!(
            stdout.lines().any(|l| l == format!("ok: {step}")),
            "step {step} did not pass:\n{stdout}\n{stderr}"
        );
    }
    assert!(dir.join("marker").exists(), "the approved call ran");
    // The follow-up's changes reached the SDK's config: working, then completed.
    let task = stdout
        .lines()
        .find_map(|l| l.strip_prefix("push-task: "))
        .expect("the client names the pushed task")
        .to_owned();
    let got = receiver
        .wait_for(Duration::from_secs(20), |got| {
            got.iter()
                .any(|g| g.body["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")
        })
        .await;
    for g in &got {
        assert_eq!(g.path, "/a2a-push");
        assert_eq!(
            g.body["statusUpdate"]["taskId"],
            task.as_str(),
            "{}",
            g.body
        );
        assert_eq!(g.headers["x-a2a-notification-token"], "sdk-push-token");
        assert_eq!(g.headers["authorization"], "Bearer sdk-cred");
    }
    assert_eq!(
        got[0].body["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING",
        "{:?}",
        got.iter().map(|g| &g.body).collect::<Vec<_>>()
    );
    assert_eq!(
        app.llm.remaining(),
        0,
        "every scripted answer was asked for"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
