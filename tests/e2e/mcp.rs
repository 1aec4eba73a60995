//! MCP servers as toolsets, against real servers that `.ci/mcp-servers` installs under
//! tests/mcp/: `@modelcontextprotocol/server-everything` (stdio, SSE and streamable HTTP) and
//! `mcp-server-time` (stdio, Python). The fake LLM calls their tools through `/api/chat`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use fake_llm::Step;
use serde_json::{Value, json};

use crate::helpers::{TestApp, eventually, free_port, names, spawn_app_with};

pub(crate) fn servers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// server-everything's entry point, or `None` (with a note) when .ci/mcp-servers did not
/// install it here.
pub(crate) fn everything() -> Option<String> {
    let entry =
        servers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if entry.is_file() && which("node") {
        Some(entry.display().to_string())
    } else {
        eprintln!(
            "SKIPPED: server-everything is not installed: run .ci/mcp-servers (needs node and npm)"
        );
        None
    }
}

fn which(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The sandbox lets the servers read the directory they are installed in.
fn sandbox_layer() -> String {
    format!(
        "[sandbox]\nread_paths = [\"{}\"]\n",
        servers_dir().display()
    )
}

fn stdio_server(name: &str, entry: &str, extra: &str) -> String {
    format!(
        "[mcp_servers.{name}]\ndescription = \"the everything test server\"\n{extra}\n\
         [mcp_servers.{name}.config]\nmode = \"stdio\"\ncommand = \"node\"\nargs = [\"{entry}\", \"stdio\"]\n\
         env = {{ MARKER_FROM_CONFIG = \"marker-42\" }}\n"
    )
}

pub(crate) async fn info(app: &TestApp) -> Value {
    app.get_json("/api/info").await.1
}

pub(crate) fn server<'a>(info: &'a Value, name: &str) -> &'a Value {
    info["mcp_servers"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no server {name} in {info}"))
}

/// Waits until `name` is connected with at least `connections` sessions opened.
pub(crate) async fn connected(app: &TestApp, name: &str, connections: u64) -> Value {
    let what = format!("{name} to connect ({connections} sessions)");
    eventually(&what, Duration::from_secs(60), || async {
        let s = server(&info(app).await, name).clone();
        match s["status"] == "connected" && s["connections"].as_u64() >= Some(connections) {
            true => Ok(s),
            false => Err(s),
        }
    })
    .await
}

/// One chat where the model makes `calls`, then answers; returns the results by call id.
pub(crate) async fn run_calls(app: &TestApp, calls: Vec<(&str, &str, Value)>) -> Vec<Value> {
    let n = calls.len();
    app.llm.push(Step::tools(calls));
    app.llm.push(Step::text("done"));
    let events = app.chat_sse(&json!({"ask": "use the tools"})).await;
    let results: Vec<Value> = events
        .iter()
        .filter(|e| e.name == "tool_calling_result")
        .map(|e| e.data.clone())
        .collect();
    assert_eq!(results.len(), n, "{:?}", names(&events));
    results
}

fn by_id<'a>(results: &'a [Value], id: &str) -> &'a Value {
    results
        .iter()
        .find(|r| r["tool_call_id"] == id)
        .unwrap_or_else(|| panic!("no result {id}"))
}

const HOSTILE_TEXT: &str =
    "hello mcp $(id) `uname`; rm -rf / 'q' \"dq\" \\n {{ env.HOME }} ${HOME}";

#[tokio::test]
async fn a_stdio_server_lists_and_answers_in_the_sandbox() {
    let Some(entry) = everything() else { return };
    let started = Instant::now();
    let app = spawn_app_with(&format!(
        "{}{}",
        sandbox_layer(),
        stdio_server("everything", &entry, "timeout_secs = 2")
    ))
    .await;
    let s = connected(&app, "everything", 1).await;
    eprintln!(
        "server-everything (stdio) listed its tools {} ms after start-up began",
        started.elapsed().as_millis()
    );
    let tools: Vec<&str> = s["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(tools.contains(&"echo") && tools.contains(&"get-sum"), "{s}");
    assert!(s["pid"].as_u64().is_some(), "{s}");

    let results = run_calls(
        &app,
        vec![
            // First, and still the last to finish: calls share the session concurrently.
            (
                "slow",
                "trigger-long-running-operation",
                json!({"duration": 30, "steps": 3}),
            ),
            // Shell syntax in a string argument is data: it arrives as sent, run by nothing.
            ("echo", "echo", json!({"message": HOSTILE_TEXT})),
            ("sum", "get-sum", json!({"a": 2, "b": 40})),
            // The model is untrusted: a string where the schema wants a number, with shell
            // syntax in it, is refused before anything reaches the server.
            (
                "hostile",
                "get-sum",
                json!({"a": "1; rm -rf / $(id)", "b": 1}),
            ),
            ("env", "get-env", json!({})),
        ],
    )
    .await;
    let echo = by_id(&results, "echo");
    assert_eq!(echo["result"]["status"], "success", "{echo}");
    assert!(
        echo["result"]["data"]
            .as_str()
            .unwrap()
            .contains(HOSTILE_TEXT),
        "{echo}"
    );
    assert_eq!(echo["toolset_name"], "everything", "{echo}");
    assert!(
        by_id(&results, "sum")["result"]["data"]
            .as_str()
            .unwrap()
            .contains("42")
    );
    let hostile = by_id(&results, "hostile");
    assert_eq!(hostile["result"]["status"], "error");
    let why = hostile["result"]["error"].as_str().unwrap();
    assert!(
        why.contains("invalid arguments") && why.contains("nothing was sent"),
        "{why}"
    );
    assert_eq!(
        results.last().unwrap()["tool_call_id"],
        "slow",
        "{results:?}"
    );
    let slow = by_id(&results, "slow");
    assert_eq!(slow["result"]["status"], "error");
    assert!(
        slow["result"]["error"]
            .as_str()
            .unwrap()
            .contains("did not answer within 2 s"),
        "{slow}"
    );
    // A clean environment plus the server's own `env`: nothing of triage's.
    let env = by_id(&results, "env")["result"]["data"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(env.contains("marker-42"), "{env}");
    assert!(
        env.contains("triage-sandbox-"),
        "TMPDIR and HOME are the private directory: {env}"
    );
    assert!(
        !env.contains("CARGO_MANIFEST_DIR") && !env.contains("TRIAGE"),
        "{env}"
    );

    // The server's description reaches the model with its toolset.
    let prompt = app.system_prompt_sent(0);
    assert!(
        prompt.contains("`everything`") && prompt.contains("the everything test server"),
        "{prompt}"
    );
    // The session outlived the timed-out call: the next call works at once.
    let results = run_calls(
        &app,
        vec![("again", "echo", json!({"message": "still here"}))],
    )
    .await;
    assert!(
        results[0]["result"]["data"]
            .as_str()
            .unwrap()
            .contains("still here")
    );
    assert_eq!(server(&info(&app).await, "everything")["connections"], 1);
}

#[tokio::test]
async fn a_killed_stdio_server_is_restarted_and_reads_only_what_the_sandbox_allows() {
    let Some(entry) = everything() else { return };
    // World-readable, but outside what the sandbox lets tools read: a server that can read it
    // exits before it speaks, and never connects.
    let secret =
        crate::helpers::scratch().join(format!("mcp-secret-{}", uuid::Uuid::new_v4().simple()));
    std::fs::write(&secret, "not for tools").unwrap();
    let script = format!(
        "cat {} >/dev/null 2>&1 && exit 3; exec node {entry} stdio",
        secret.display()
    );
    let app = spawn_app_with(&format!(
        "{}[mcp_servers.ev]\nconfig = {{ command = \"bash\", args = [\"-c\", {}] }}\n",
        sandbox_layer(),
        serde_json::to_string(&script).unwrap()
    ))
    .await;
    let s = connected(&app, "ev", 1).await;
    let pgid = s["pid"].as_i64().unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", "--", &format!("-{pgid}")])
        .status()
        .unwrap();
    assert!(killed.success());
    let s = connected(&app, "ev", 2).await;
    assert_ne!(s["pid"].as_i64(), Some(pgid), "{s}");
    let results = run_calls(&app, vec![("e", "echo", json!({"message": "back"}))]).await;
    assert!(
        results[0]["result"]["data"]
            .as_str()
            .unwrap()
            .contains("back"),
        "{}",
        results[0]
    );
    let _ = std::fs::remove_file(&secret);
}

#[tokio::test]
async fn allow_and_deny_lists_filter_and_approvals_pause() {
    let Some(entry) = everything() else { return };
    let extra = "allowed_tools = [\"echo\", \"get-sum\", \"get-env\"]\ndenied_tools = [\"get-env\"]\n\
                 requires_approval = [\"echo\"]";
    let app = spawn_app_with(&format!(
        "{}{}",
        sandbox_layer(),
        stdio_server("ev", &entry, extra)
    ))
    .await;
    let s = connected(&app, "ev", 1).await;
    assert_eq!(s["tools"], json!(["echo", "get-sum"]), "{s}");
    assert!(s["listed_tool_count"].as_u64().unwrap() > 2);

    // A denied tool does not exist for the model.
    let results = run_calls(&app, vec![("d", "get-env", json!({}))]).await;
    assert!(
        results[0]["result"]["error"]
            .as_str()
            .unwrap()
            .contains("Failed to find tool")
    );

    app.llm.push(Step::tools(vec![
        ("free", "get-sum", json!({"a": 1, "b": 2})),
        ("gated", "echo", json!({"message": "approved words"})),
    ]));
    let events = app
        .chat_sse(&json!({"ask": "go", "enable_tool_approval": true}))
        .await;
    let paused = &events.last().unwrap().data;
    assert_eq!(
        events.last().unwrap().name,
        "approval_required",
        "{:?}",
        names(&events)
    );
    assert_eq!(paused["pending_approvals"][0]["tool_call_id"], "gated");
    app.llm.push(Step::text("ok"));
    let events = app
        .chat_sse(
            &json!({"ask": "", "conversation_history": paused["conversation_history"],
            "enable_tool_approval": true,
            "tool_decisions": [{"tool_call_id": "gated", "approved": true}]}),
        )
        .await;
    let result = events
        .iter()
        .find(|e| e.name == "tool_calling_result")
        .unwrap();
    assert_eq!(
        result.data["result"]["status"], "success",
        "{}",
        result.data
    );
    assert!(
        result.data["result"]["data"]
            .as_str()
            .unwrap()
            .contains("approved words")
    );
}

/// server-everything serving HTTP on a free port, killed on drop.
struct HttpServer {
    port: u16,
    _child: tokio::process::Child,
}

async fn http_server(entry: &str, transport: &str) -> HttpServer {
    http_server_on(entry, transport, free_port()).await
}

async fn http_server_on(entry: &str, transport: &str, port: u16) -> HttpServer {
    let child = tokio::process::Command::new("node")
        .args([entry, transport])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start server-everything");
    let what = format!("server-everything {transport} to listen");
    eventually(&what, Duration::from_secs(30), || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;
    HttpServer {
        port,
        _child: child,
    }
}

#[tokio::test]
async fn sse_and_streamable_http_servers_with_colliding_names() {
    let Some(entry) = everything() else { return };
    let sse = http_server(&entry, "sse").await;
    let http = http_server(&entry, "streamableHttp").await;
    // `mode` omitted: HolmesGPT's default, SSE, with `/sse` appended to the URL.
    let app = spawn_app_with(&format!(
        "[mcp_servers.old]\nconfig = {{ url = \"http://127.0.0.1:{}\", headers = {{ X-Test = \"{{{{ env.HOME }}}}\" }} }}\n\
         [mcp_servers.new]\nconfig = {{ url = \"http://127.0.0.1:{}/mcp\", mode = \"streamable-http\" }}\n",
        sse.port, http.port
    ))
    .await;
    for name in ["old", "new"] {
        let s = connected(&app, name, 1).await;
        assert!(s["tool_count"].as_u64().unwrap() > 3, "{s}");
    }
    let i = info(&app).await;
    assert_eq!(server(&i, "old")["mode"], "sse");
    // Both servers have `echo`: each is offered under its server's name.
    let results = run_calls(
        &app,
        vec![
            ("a", "old__echo", json!({"message": "over sse"})),
            ("b", "new__echo", json!({"message": "over streamable http"})),
            ("c", "echo", json!({"message": "ambiguous"})),
        ],
    )
    .await;
    assert!(
        by_id(&results, "a")["result"]["data"]
            .as_str()
            .unwrap()
            .contains("over sse")
    );
    assert!(
        by_id(&results, "b")["result"]["data"]
            .as_str()
            .unwrap()
            .contains("over streamable http")
    );
    assert_eq!(by_id(&results, "c")["result"]["status"], "error");
    let offered = app.llm.requests()[0]["tools"].to_string();
    assert!(
        offered.contains("\"old__echo\"") && offered.contains("\"new__get-sum\""),
        "{offered}"
    );
}

#[tokio::test]
async fn mcp_server_time_over_stdio() {
    let program = servers_dir().join(".venv/bin/mcp-server-time");
    if !program.is_file() {
        eprintln!(
            "SKIPPED: mcp-server-time is not installed: run .ci/mcp-servers (needs python3-venv)"
        );
        return;
    }
    let app = spawn_app_with(&format!(
        "{}[mcp_servers.time]\ndescription = \"clocks\"\nconfig = {{ command = \"{}\", args = [\"--local-timezone\", \"UTC\"] }}\n",
        sandbox_layer(),
        program.display()
    ))
    .await;
    let s = connected(&app, "time", 1).await;
    assert_eq!(s["mode"], "stdio");
    let results = run_calls(
        &app,
        vec![
            (
                "now",
                "get_current_time",
                json!({"timezone": "Europe/Paris"}),
            ),
            (
                "bad",
                "get_current_time",
                json!({"timezone": "Mars/Olympus_Mons"}),
            ),
        ],
    )
    .await;
    let now = by_id(&results, "now");
    assert_eq!(now["result"]["status"], "success", "{now}");
    assert!(
        now["result"]["data"]
            .as_str()
            .unwrap()
            .contains("Europe/Paris"),
        "{now}"
    );
    // The server's own error result (isError) reaches the model as an error.
    let bad = by_id(&results, "bad");
    assert_eq!(bad["result"]["status"], "error", "{bad}");
    assert!(
        bad["result"]["error"]
            .as_str()
            .unwrap()
            .contains("Mars/Olympus_Mons"),
        "{bad}"
    );
}

#[tokio::test]
async fn unreachable_servers_are_reported_and_bad_config_is_named() {
    let port = free_port();
    let started = Instant::now();
    let app = spawn_app_with(&format!(
        "[mcp_servers.down]\nconfig = {{ url = \"http://127.0.0.1:{port}\", mode = \"streamable-http\" }}\n\
         [mcp_servers.nokey]\nconfig = {{ url = \"http://127.0.0.1:{port}\", headers = {{ Authorization = \"Bearer ${{TRIAGE_TEST_UNSET_TOKEN}}\" }} }}\n\
         [mcp_servers.off]\nenabled = false\nconfig = {{ command = \"true\" }}\n\
         [mcp_servers.mute]\nconfig = {{ command = \"sleep\", args = [\"60\"] }}\n"
    ))
    .await;
    // A server that never answers holds start-up back for the short bound only.
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(15),
        "start-up waited {waited:?}"
    );
    let i = info(&app).await;
    assert_eq!(server(&i, "down")["status"], "disconnected", "{i}");
    assert!(server(&i, "down")["last_error"].is_string());
    assert_eq!(server(&i, "nokey")["status"], "failed");
    assert!(
        server(&i, "nokey")["last_error"]
            .as_str()
            .unwrap()
            .contains("TRIAGE_TEST_UNSET_TOKEN")
    );
    assert_eq!(server(&i, "mute")["status"], "connecting", "{i}");
    assert_eq!(server(&i, "off")["status"], "disabled");

    let bad = triage::config::Settings::from_toml(
        "[mcp_servers.x]\nconfig = { url = \"http://h\", tranport = \"sse\" }\n",
    )
    .expect_err("an unknown key");
    assert!(bad.to_string().contains("tranport"), "{bad}");
    let bad =
        triage::config::Settings::from_toml("[mcp_servers.x]\nconfig = { mode = \"stdio\" }\n")
            .expect_err("stdio without a command");
    assert!(
        bad.to_string().contains("mcp_servers.x.config.command"),
        "{bad}"
    );
}

#[tokio::test]
async fn a_changed_tool_list_is_listed_again() {
    let python = servers_dir().join(".venv/bin/python");
    if !python.is_file() {
        eprintln!(
            "SKIPPED: tests/mcp/.venv is not installed: run .ci/mcp-servers (needs python3-venv)"
        );
        return;
    }
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp");
    let app = spawn_app_with(&format!(
        "[sandbox]\nread_paths = [\"{}\", \"{}\"]\n[mcp_servers.dyn]\nconfig = {{ command = \"{}\", args = [\"{}\"] }}\n\
         [mcp_servers.empty]\nconfig = {{ command = \"{python}\", args = [\"-c\", \"from mcp.server.mcpserver import MCPServer; MCPServer('empty').run()\"] }}\n",
        servers_dir().display(),
        fixtures.display(),
        python.display(),
        fixtures.join("dynamic_server.py").display(),
        python = python.display(),
    ))
    .await;
    let s = connected(&app, "dyn", 1).await;
    assert_eq!(s["tools"], json!(["unlock"]), "{s}");
    // A server with no tools is connected and says so.
    let empty = connected(&app, "empty", 1).await;
    assert_eq!(empty["listed_tool_count"], 0, "{empty}");
    assert_eq!(empty["last_error"], "the server lists no tools", "{empty}");
    let results = run_calls(&app, vec![("u", "unlock", json!({}))]).await;
    assert_eq!(results[0]["result"]["data"], "unlocked", "{}", results[0]);
    let s = eventually(
        "the tools to be re-listed",
        Duration::from_secs(20),
        || async {
            let s = server(&info(&app).await, "dyn").clone();
            match s["tools"] == json!(["unlock", "unlocked_tool"]) {
                true => Ok(s),
                false => Err(s),
            }
        },
    )
    .await;
    assert_eq!(s["connections"], 1, "re-listed, not reconnected: {s}");
    let results = run_calls(&app, vec![("x", "unlocked_tool", json!({"word": "hi"}))]).await;
    assert_eq!(
        results[0]["result"]["data"], "unlocked says hi",
        "{}",
        results[0]
    );
}

#[tokio::test]
async fn an_http_server_that_restarts_is_reconnected() {
    let Some(entry) = everything() else { return };
    for transport in ["sse", "streamableHttp"] {
        let first = http_server(&entry, transport).await;
        let port = first.port;
        let (url, mode) = match transport {
            "sse" => (format!("http://127.0.0.1:{port}/sse"), "sse"),
            _ => (format!("http://127.0.0.1:{port}/mcp"), "streamable-http"),
        };
        let app = spawn_app_with(&format!(
            "[mcp_servers.web]\nconfig = {{ url = \"{url}\", mode = \"{mode}\" }}\n"
        ))
        .await;
        connected(&app, "web", 1).await;
        drop(first);
        // Gone for certain before the call below.
        eventually(
            "the server to stop listening",
            Duration::from_secs(10),
            || async {
                tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .is_err()
            },
        )
        .await;
        if transport == "streamableHttp" {
            // Idle, nothing tells it is gone but the pings: the status says so soon.
            let what = "the server to be shown as not connected";
            eventually(what, Duration::from_secs(40), || async {
                server(&info(&app).await, "web")["status"] != "connected"
            })
            .await;
        }
        // A call while it is down is an error result, not a hang.
        let results = run_calls(&app, vec![("down", "echo", json!({"message": "x"}))]).await;
        assert_eq!(results[0]["result"]["status"], "error", "{}", results[0]);
        let _second = http_server_on(&entry, transport, port).await;
        connected(&app, "web", 2).await;
        let results = run_calls(&app, vec![("up", "echo", json!({"message": "again"}))]).await;
        assert!(
            results[0]["result"]["data"]
                .as_str()
                .unwrap()
                .contains("again"),
            "{transport}: {}",
            results[0]
        );
    }
}

#[tokio::test]
async fn triage_check_reports_each_server() {
    let Some(entry) = everything() else { return };
    let llm = fake_llm::FakeLlm::start().await;
    let config = crate::cli::config_for(
        &llm,
        &format!(
            "{}{}[mcp_servers.gone]\nconfig = {{ command = \"/nonexistent/mcp-server\" }}\n",
            sandbox_layer(),
            stdio_server("everything", &entry, "")
        ),
    );
    let out = crate::cli::triage(Some(&config), &["check"]).await;
    let report = crate::cli::text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}");
    let line = |name: &str| {
        report
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no line for {name}: {report}"))
            .to_owned()
    };
    assert!(report.contains("mcp servers:"), "{report}");
    let everything = line("everything");
    assert!(
        everything.contains("connected (stdio,") && everything.contains(" tools"),
        "{everything}"
    );
    // Between attempts the supervisor is `disconnected`, then `connecting` again after its
    // back-off (a slow model probe outlasts it): either way the report names why it failed.
    let gone = line("gone");
    assert!(
        (gone.contains("disconnected") || gone.contains("connecting ("))
            && gone.contains("cannot start /nonexistent/mcp-server"),
        "{gone}"
    );
}
