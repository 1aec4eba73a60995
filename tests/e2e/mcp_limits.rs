//! What an MCP server's listing can make triage send to the LLM (issue 34): a stdio server
//! (tests/fixtures/mcp/oversized_server.py, Python's standard library only) lists a tool with a
//! 1 MiB description and one with a 1 MiB schema; another lists tools that are each fine but
//! together exceed `agent.max_tool_definitions_bytes`. Before the caps, every LLM request
//! carried all of it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fake_llm::Step;
use serde_json::{Value, json};

use crate::helpers::{TestApp, eventually, names, spawn_app_with};

const PYTHON: &str = "/usr/bin/python3";

/// The fixture server in the tools' sandbox (which reads system locations only, so the
/// system's Python and the fixture's directory); `None` without a system Python.
fn server_config(name: &str, mode: &str) -> Option<String> {
    if !Path::new(PYTHON).is_file() {
        eprintln!("SKIPPED: {PYTHON} is not installed");
        return None;
    }
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp");
    Some(format!(
        "[sandbox]\nread_paths = [\"{dir}\"]\n[mcp_servers.{name}]\n\
         config = {{ command = \"{PYTHON}\", args = [\"{script}\", \"{mode}\"] }}\n",
        dir = fixtures.display(),
        script = fixtures.join("oversized_server.py").display(),
    ))
}

async fn info(app: &TestApp) -> Value {
    app.get_json("/api/info").await.1
}

/// The server's status once it is connected.
async fn connected(app: &TestApp, name: &str) -> Value {
    eventually(
        &format!("{name} to connect"),
        Duration::from_secs(60),
        || async {
            let i = info(app).await;
            let s = i["mcp_servers"]
                .as_array()
                .and_then(|all| all.iter().find(|s| s["name"] == name))
                .cloned()
                .unwrap_or_else(|| panic!("no server {name} in {i}"));
            match s["status"] == "connected" {
                true => Ok(s),
                false => Err(s),
            }
        },
    )
    .await
}

/// The reason given for `tool` in a status list (`rejected_tools`, `trimmed_tools`, …).
fn reason<'a>(list: &'a Value, tool: &str) -> &'a str {
    list.as_array()
        .and_then(|l| l.iter().find(|t| t["name"] == tool))
        .and_then(|t| t["reason"].as_str())
        .unwrap_or_else(|| panic!("{tool} is not in {list}"))
}

/// One chat where the model calls `tool` with a word, then answers: the call's result.
async fn call(app: &TestApp, tool: &str) -> Value {
    app.llm
        .push(Step::tools(vec![("c", tool, json!({"word": "hi"}))]));
    app.llm.push(Step::text("done"));
    let events = app.chat_sse(&json!({"ask": "use the tool"})).await;
    events
        .iter()
        .find(|e| e.name == "tool_calling_result")
        .map(|e| e.data["result"].clone())
        .unwrap_or_else(|| panic!("no tool result: {:?}", names(&events)))
}

/// The `tools` of the last LLM request, and their names.
fn offered(app: &TestApp) -> (String, Vec<String>) {
    let requests = app.llm.requests();
    let tools = requests.last().expect("an LLM request")["tools"].clone();
    let names = tools
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|d| d["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    (tools.to_string(), names)
}

#[tokio::test]
async fn a_huge_description_is_trimmed_and_a_huge_schema_refused() {
    let Some(server) = server_config("big", "hostile") else {
        return;
    };
    let app = spawn_app_with(&server).await;
    let s = connected(&app, "big").await;
    assert_eq!(s["tools"], json!(["plain", "wordy"]), "{s}");
    let why = reason(&s["rejected_tools"], "fat");
    assert!(
        why.contains("mcp_servers.big.max_schema_bytes (16384)") && why.contains("not offered"),
        "{why}"
    );
    let why = reason(&s["trimmed_tools"], "wordy");
    assert!(
        why.contains("mcp_servers.big.max_description_bytes (4096)"),
        "{why}"
    );

    // The trimmed tool still works.
    let result = call(&app, "wordy").await;
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["data"], "wordy says hi", "{result}");
    // The oversized-schema tool does not exist for the model.
    let result = call(&app, "fat").await;
    assert!(
        result["error"]
            .as_str()
            .is_some_and(|e| e.contains("Failed to find tool")),
        "{result}"
    );

    // Every LLM request stayed small: the 1 MiB description went as its first 4 KiB and a note,
    // the 1 MiB schema not at all.
    for request in app.llm.requests() {
        let body = request.to_string();
        assert!(
            body.len() < 128 * 1024,
            "an LLM request of {} bytes",
            body.len()
        );
    }
    let requests = app.llm.requests();
    let wordy = requests[0]["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|d| d["function"]["name"] == "wordy"))
        .expect("wordy offered");
    let description = wordy["function"]["description"]
        .as_str()
        .unwrap_or_default();
    assert!(description.len() <= 4096, "{}", description.len());
    assert!(
        description.starts_with("Echoes a word back.")
            && description.ends_with("bytes]")
            && description.contains("description trimmed by triage"),
        "{description}"
    );
    let (_, names) = offered(&app);
    assert!(!names.iter().any(|n| n.contains("fat")), "{names:?}");

    // `triage check` says so too.
    let config = crate::cli::config_for(&app.llm, &server);
    let out = crate::cli::triage(Some(&config), &["check"]).await;
    let report = crate::cli::text(&out.stdout);
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with("big "))
        .unwrap_or_else(|| panic!("no line for big: {report}"));
    assert!(
        line.contains("2 tools")
            && line.contains("1 tools rejected")
            && line.contains("1 tools with a trimmed description"),
        "{line}"
    );
}

#[tokio::test]
async fn the_total_cap_leaves_out_mcp_tools_first_then_yaml_never_builtins() {
    let Some(server) = server_config("sizes", "sizes") else {
        return;
    };
    let yaml = "[yaml_toolsets.words]\ndescription = \"Words\"\n\
                [[yaml_toolsets.words.tools]]\nname = \"say\"\ndescription = \"Says a word\"\n\
                command = \"echo said {{ word }}\"\n";
    // A cap below what the built-in tools take alone: everything else goes, they stay.
    let tiny = format!("{server}{yaml}[agent]\nmax_tool_definitions_bytes = 1000\n");
    let app = spawn_app_with(&tiny).await;
    let s = connected(&app, "sizes").await;
    assert_eq!(s["tools"], json!([]), "{s}");
    for tool in ["small", "medium", "large"] {
        let why = reason(&s["withheld_tools"], tool);
        assert!(
            why.contains("agent.max_tool_definitions_bytes (1000)"),
            "{why}"
        );
    }
    let report = info(&app).await["tool_definitions"].clone();
    assert_eq!(report["max_bytes"], 1000, "{report}");
    let withheld = |name: &str| -> Value {
        report["withheld_tools"]
            .as_array()
            .and_then(|w| w.iter().find(|t| t["name"] == name).cloned())
            .unwrap_or_else(|| panic!("{name} not withheld: {report}"))
    };
    assert_eq!(withheld("say")["origin"], "yaml");
    assert_eq!(withheld("say")["toolset"], "words");
    assert_eq!(withheld("large")["origin"], "mcp");
    let builtins = report["bytes"].as_u64().expect("bytes");
    assert!(builtins > 1000, "{report}");
    // Not offered, and not callable under its qualified name either.
    for tool in ["small", "sizes__small", "say"] {
        let result = call(&app, tool).await;
        assert!(
            result["error"]
                .as_str()
                .is_some_and(|e| e.contains("Failed to find tool")),
            "{tool}: {result}"
        );
    }
    let (tools, names) = offered(&app);
    assert_eq!(tools.len() as u64, builtins, "{names:?}");
    assert!(names.iter().any(|n| n == "TodoWrite"), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| ["say", "small", "medium", "large"].contains(&n.as_str())),
        "{names:?}"
    );

    // Room for the built-ins, the YAML tool and the smallest MCP tool, not for the next: the
    // largest go first, and the YAML tool stays while an MCP tool can go instead.
    let bytes = |name: &str| withheld(name)["bytes"].as_u64().expect("bytes");
    let room = builtins + 1 + bytes("say") + 1 + bytes("small");
    assert!(bytes("medium") > 100);
    let cap = room + 100;
    let app = spawn_app_with(&format!(
        "{server}{yaml}[agent]\nmax_tool_definitions_bytes = {cap}\n"
    ))
    .await;
    let s = connected(&app, "sizes").await;
    assert_eq!(s["tools"], json!(["small"]), "{s}");
    assert_eq!(s["withheld_tools"].as_array().map(Vec::len), Some(2), "{s}");
    let result = call(&app, "small").await;
    assert_eq!(result["data"], "small says hi", "{result}");
    let result = call(&app, "say").await;
    assert_eq!(result["status"], "success", "{result}");
    let (tools, names) = offered(&app);
    assert!(tools.len() as u64 <= cap, "{} > {cap}", tools.len());
    assert_eq!(tools.len() as u64, room, "{names:?}");
    let report = info(&app).await["tool_definitions"].clone();
    assert_eq!(report["bytes"].as_u64(), Some(room), "{report}");
}
