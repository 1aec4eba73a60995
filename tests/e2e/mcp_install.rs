//! Stdio MCP servers as HolmesGPT users install them, with no `sandbox.read_paths`: a package
//! in a `node_modules` tree (copied to a temp dir, started through its `.bin` link) and a
//! Python virtual environment, each reading its own install; and a server that still cannot
//! read its code, whose status names the path and the key to set.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{eventually, scratch, spawn_app_with};
use crate::mcp::{connected, everything, info, run_calls, server, servers_dir};

#[tokio::test]
async fn servers_installed_by_npm_or_pip_read_their_install_without_read_paths() {
    if everything().is_none() {
        return;
    }
    let install = scratch().join(format!("mcp-install-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&install).unwrap();
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(servers_dir().join("node_modules"))
        .arg(&install)
        .status()
        .unwrap();
    assert!(copied.success());
    let bin = install.join("node_modules/.bin/mcp-server-everything");
    let entry = install.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let time = servers_dir().join(".venv/bin/mcp-server-time");
    let mut config = format!(
        "[mcp_servers.npm]\nconfig = {{ command = \"{}\", args = [\"stdio\"], allowed_tools = [\"echo\"] }}\n\
         [mcp_servers.hidden]\nconfig = {{ command = \"bash\", args = [\"-c\", \"exec node {} stdio\"] }}\n",
        bin.display(),
        entry.display()
    );
    if time.is_file() {
        config.push_str(&format!(
            "[mcp_servers.pip]\nconfig = {{ command = \"{}\", args = [\"--local-timezone\", \"UTC\"] }}\n",
            time.display()
        ));
    } else {
        eprintln!("SKIPPED (venv part): mcp-server-time is not installed: run .ci/mcp-servers");
    }
    let app = spawn_app_with(&config).await;

    // `allowed_tools` inside `config`, as HolmesGPT also accepts it, limits the listing.
    let npm = connected(&app, "npm", 1).await;
    let tools: Vec<&str> = npm["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(tools, ["echo"], "{npm}");
    let results = run_calls(
        &app,
        vec![("e", "echo", json!({"message": "from node_modules"}))],
    )
    .await;
    assert!(
        results[0]["result"]["data"]
            .as_str()
            .unwrap_or("")
            .contains("from node_modules"),
        "{}",
        results[0]
    );
    if time.is_file() {
        connected(&app, "pip", 1).await;
    }

    // The script names the package only inside a shell command: nothing grants it, and the
    // status says what could not be opened and where to grant it (not "Node.js v20").
    let error = eventually(
        "the hidden server's failure",
        Duration::from_secs(60),
        || async {
            let i = info(&app).await;
            let error = server(&i, "hidden")["last_error"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            match error.contains("sandbox.read_paths") {
                true => Ok(error),
                false => Err(i),
            }
        },
    )
    .await;
    eprintln!("the unreadable server's status: {error}");
    let tree = install.join("node_modules");
    assert!(
        error.contains(&format!("(or {})", tree.display())),
        "the advice names the install tree: {error}"
    );
    let _ = std::fs::remove_dir_all(&install);
}
