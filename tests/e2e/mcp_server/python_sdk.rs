//! The official MCP Python SDK as the client of `/mcp`.

use std::time::Duration;

use fake_llm::Step;
use serde_json::json;

use crate::helpers::spawn_app_with;

/// The official MCP Python SDK (PyPI `mcp`, pinned in tests/mcp_client/requirements.txt) as
/// the client, in the venv `.ci/mcp-client` builds (`MCP_CLIENT_VENV`). Without it the test
/// skips with a note, unless `MCP_CLIENT_TEST_REQUIRED=1` (CI) makes that a failure.
#[tokio::test]
async fn python_sdk_client_drives_every_tool() {
    let Some(python) = sdk_python() else {
        return;
    };
    let app = spawn_app_with("[server]\napi_keys = [\"sdk-key\"]\n").await;
    // investigate: one tool call (a progress note before and after it), then the answer.
    app.llm
        .push(Step::tool("c1", "bash", json!({"command": "echo sdk"})));
    app.llm.push(Step::text("SDK answer."));
    // The conversation: answered at once.
    app.llm.push(Step::text("Conversation answer."));
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client/client.py");
    let output = tokio::process::Command::new(&python)
        .arg(&script)
        .env("MCP_URL", app.url("/mcp"))
        .env("MCP_API_KEY", "sdk-key")
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), output)
        .await
        .expect("the SDK client finished")
        .expect("run the SDK client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the SDK client failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("mcp client: all checks passed"),
        "{stdout}\n{stderr}"
    );
}

/// The venv's python, or `None` (with a note) when there is none and it is not required.
fn sdk_python() -> Option<std::path::PathBuf> {
    let required = std::env::var("MCP_CLIENT_TEST_REQUIRED").is_ok_and(|v| v == "1");
    let python = std::env::var_os("MCP_CLIENT_VENV")
        .map(|venv| std::path::PathBuf::from(venv).join("bin/python"))
        .filter(|p| p.exists());
    if python.is_none() {
        assert!(
            !required,
            "MCP_CLIENT_TEST_REQUIRED=1 but MCP_CLIENT_VENV names no venv (run .ci/mcp-client)"
        );
        eprintln!("skipped: no MCP Python SDK venv (MCP_CLIENT_VENV=$(bash .ci/mcp-client))");
    }
    python
}
