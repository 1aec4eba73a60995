//! Nothing triage starts can make a request triage serves: a hostile stdio MCP server
//! (tests/fixtures/mcp/hostile_server.py, standard library only) tries every route of triage's
//! listener, over IPv4 and IPv6, plain `connect`, TCP Fast Open and MPTCP, while a conversation waits
//! for a person's approval. Once, on a keyless server, such a process approved its own call.
//! Each wall is seen to hold alone: Landlock's TCP rules with tools as triage's own uid, the
//! peer uid check with the TCP rules down (as on a kernel without them), and both together.

use std::path::PathBuf;

use fake_llm::Step;
use serde_json::{Value, json};

use crate::helpers::{TestApp, eventually, free_port, spawn_app_adjusted, tool_writable_dir};
use crate::webhooks_in::wait_status;
use triage::config::{HolmesFiles, Settings};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/hostile_server.py")
}

/// A keyless server on every address of both families, with the hostile server as a toolset.
async fn app(port: u16, extra: &str, tls: bool, adjust: impl FnOnce(&mut Settings)) -> TestApp {
    let fixture = fixture();
    let dir = fixture.parent().expect("fixture dir").display().to_string();
    let layer = format!(
        "[server]\nhost = \"::\"\nport = {port}\nallow_unauthenticated = true\n{extra}\n\
         [sandbox]\nread_paths = [\"{dir}\"]\n\
         [mcp_servers.hostile]\nconfig = {{ command = \"python3\", args = [\"{}\"], \
         env = {{ TRIAGE_PORTS = \"{port}\", TRIAGE_TLS = \"{}\" }} }}\n",
        fixture.display(),
        if tls { "1" } else { "0" },
    );
    spawn_app_adjusted(&HolmesFiles::default(), &[&layer], adjust).await
}

/// Waits until the hostile server's `probe` is offered.
async fn hostile_connected(app: &TestApp) {
    eventually(
        "the hostile MCP server to connect",
        std::time::Duration::from_secs(30),
        || async {
            let (_, info) = app.get_json("/api/info").await;
            info["mcp_servers"]
                .as_array()
                .and_then(|s| s.iter().find(|s| s["name"] == "hostile"))
                .is_some_and(|s| s["status"] == "connected")
        },
    )
    .await
}

/// A conversation whose bash call waits for approval; the call would create `marker`.
async fn waiting_conversation(app: &TestApp, marker: &std::path::Path) -> String {
    app.llm.push(Step::tools(vec![(
        "call_wait",
        "bash",
        json!({"command": format!("touch {}", marker.display())}),
    )]));
    let resp = app
        .post_raw(
            "/api/conversations",
            json!({"initial_message": {"content": "fix it"}}).to_string(),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let created: Value = resp.json().await.expect("json");
    let id = created["id"].as_str().expect("id").to_owned();
    wait_status(app, &id, "waiting_for_confirmation").await;
    id
}

/// The model calls `probe`; returns what the hostile server saw, one line per attempt.
async fn probe(app: &TestApp, conversation: &str) -> String {
    hostile_connected(app).await;
    app.llm.push(Step::tools(vec![(
        "call_probe",
        "probe",
        json!({"conversation": conversation}),
    )]));
    app.llm.push(Step::text("checked"));
    let events = app.chat_sse(&json!({"ask": "check the network"})).await;
    let result = events
        .iter()
        .find(|e| e.name == "tool_calling_result")
        .unwrap_or_else(|| {
            let seen: Vec<_> = events.iter().map(|e| (&e.name, &e.data)).collect();
            panic!("no probe result: {seen:?}")
        });
    let data = &result.data["result"]["data"];
    data.as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| data.to_string())
}

/// Every attempt failed before any answer, and the attempts covered both families and both
/// ways of connecting.
fn assert_nothing_got_through(report: &str, how: &str) {
    let lines: Vec<&str> = report.lines().collect();
    assert!(lines.len() >= 40, "{how}: too few attempts:\n{report}");
    for wanted in ["family=2", "family=10", "connect ", "fastopen ", "mptcp "] {
        assert!(
            report.contains(wanted),
            "{how}: no {wanted} attempt:\n{report}"
        );
    }
    let through: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains("HTTP ") || l.contains("garbage"))
        .collect();
    assert!(
        through.is_empty(),
        "{how}: the wall let these through: {through:#?}"
    );
}

async fn wall(app: &TestApp) -> Value {
    app.get_json("/api/info").await.1["sandbox"]["network"].clone()
}

#[tokio::test]
async fn both_walls_keep_a_hostile_mcp_server_from_approving_its_own_call() {
    let port = free_port();
    let app = app(port, "", false, |_| {}).await;
    let wall = wall(&app).await;
    assert_eq!(wall["walled_ports"], json!([port]), "{wall}");
    assert_eq!(wall["tcp_rules"], true, "{wall}");
    assert_eq!(wall["peer_uid_check"], true, "{wall}");
    assert!(wall["warning"].is_null(), "{wall}");
    let marker = tool_writable_dir("network-wall").join("approved-by-a-tool");
    let id = waiting_conversation(&app, &marker).await;
    let report = probe(&app, &id).await;
    assert_nothing_got_through(&report, "both walls");
    // Landlock refuses the connect itself (EACCES), the seccomp filter the Fast Open send.
    assert!(report.contains("refused 13"), "{report}");
    assert!(report.contains("refused 1"), "{report}");
    let (_, conversation) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(conversation["execution_status"], "waiting_for_confirmation");
    assert!(!marker.exists(), "the waiting call ran");
}

/// With the TCP rules down, connections get through the kernel and are closed unread: over
/// TLS, before the handshake.
#[tokio::test]
async fn the_peer_uid_check_alone_holds_on_tls_too() {
    let dir = tool_writable_dir("network-wall-tls");
    let (cert, key) = crate::helpers::self_signed_cert(&dir);
    let port = free_port();
    let tls = format!(
        "tls_cert_file = \"{}\"\ntls_key_file = \"{}\"",
        cert.display(),
        key.display()
    );
    let mut app = app(port, &tls, true, |s| {
        s.sandbox.tcp_rules_off_for_tests = true
    })
    .await;
    app.base = app.base.replacen("http://", "https://", 1);
    app.client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .expect("client");
    let wall = wall(&app).await;
    assert_eq!(wall["tcp_rules"], false, "{wall}");
    assert_eq!(wall["peer_uid_check"], true, "{wall}");
    assert!(
        wall["warning"]
            .as_str()
            .is_some_and(|w| w.contains("one network wall is down"))
    );
    let marker = tool_writable_dir("network-wall-tls-marker").join("approved-by-a-tool");
    let id = waiting_conversation(&app, &marker).await;
    let report = probe(&app, &id).await;
    assert_nothing_got_through(&report, "peer uid check");
    // The kernel let the connections through; triage closed them.
    assert!(report.contains(" closed"), "{report}");
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("triage_tool_connections_refused_total{peer=\"tool\"}"),
        "{metrics}"
    );
    let (_, conversation) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(conversation["execution_status"], "waiting_for_confirmation");
    assert!(!marker.exists(), "the waiting call ran");
    let _ = std::fs::remove_dir_all(dir);
}

/// Tools that keep triage's uid (triage not root) cannot be told apart by their sockets:
/// the TCP rules alone hold, and `/api/info` says the second wall is down.
#[tokio::test]
async fn the_tcp_rules_alone_hold_when_tools_keep_triage_s_uid() {
    let port = free_port();
    let app = app(port, "", false, |s| s.sandbox.keep_uid_for_tests = true).await;
    let wall = wall(&app).await;
    assert_eq!(wall["tcp_rules"], true, "{wall}");
    assert_eq!(wall["peer_uid_check"], false, "{wall}");
    assert!(
        wall["warning"]
            .as_str()
            .is_some_and(|w| w.contains("triage's uid")),
        "{wall}"
    );
    let marker = tool_writable_dir("network-wall-same-uid").join("approved-by-a-tool");
    let id = waiting_conversation(&app, &marker).await;
    let report = probe(&app, &id).await;
    assert_nothing_got_through(&report, "TCP rules");
    let (_, conversation) = app.get_json(&format!("/api/conversations/{id}")).await;
    assert_eq!(conversation["execution_status"], "waiting_for_confirmation");
    assert!(!marker.exists(), "the waiting call ran");
}

/// The control: with both walls down the same fixture is answered, and `/api/info` says so
/// loudly. (Without this, a fixture that never reached anything would pass the tests above.)
#[tokio::test]
async fn without_walls_the_fixture_is_answered() {
    let port = free_port();
    let app = app(port, "", false, |s| {
        s.sandbox.keep_uid_for_tests = true;
        s.sandbox.tcp_rules_off_for_tests = true;
    })
    .await;
    let wall = wall(&app).await;
    assert_eq!(wall["layers"], "none", "{wall}");
    assert!(
        wall["warning"]
            .as_str()
            .is_some_and(|w| w.starts_with("NO WALL")),
        "{wall}"
    );
    let report = probe(&app, "none").await;
    assert!(report.contains("connect [127.0.0.1]"), "{report}");
    assert!(report.contains("HTTP 200"), "{report}");
    for way in [
        "connect [::1]",
        "fastopen [127.0.0.1]",
        "fastopen [::1]",
        "mptcp [127.0.0.1]",
    ] {
        assert!(
            report
                .lines()
                .any(|l| l.starts_with(way) && l.contains("HTTP 200")),
            "{way}: {report}"
        );
    }
}

/// triage's own HTTP clients run outside the wall: a model that steers `fetch_webpage` (with
/// private addresses allowed) or a YAML `http` tool whose host and port it fills in at
/// triage's own port is refused, before any request.
#[tokio::test]
async fn triage_s_own_http_clients_refuse_its_own_port() {
    let port = free_port();
    let app = spawn_app_adjusted(
        &HolmesFiles::default(),
        &[&format!(
            "[server]\nport = {port}\n[toolsets.internet]\nallow_private_addresses = true\n\
             [yaml_toolsets.api]\ntype = \"http\"\n[[yaml_toolsets.api.tools]]\nname = \"api_get\"\n\
             description = \"GET a service\"\nurl = \"http://{{{{ host }}}}:{{{{ port }}}}/api/info\"\n"
        )],
        |_| {},
    )
    .await;
    app.llm.push(Step::tools(vec![
        (
            "fetch",
            "fetch_webpage",
            json!({"url": format!("http://127.0.0.1:{port}/api/conversations")}),
        ),
        (
            "yaml",
            "api_get",
            json!({"host": "localhost", "port": port.to_string()}),
        ),
    ]));
    app.llm.push(Step::text("done"));
    let (status, body) = app.chat_json(&json!({"ask": "look around"})).await;
    assert_eq!(status, 200, "{body}");
    for id in ["fetch", "yaml"] {
        let call = body["tool_calls"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["tool_call_id"] == id))
            .unwrap_or_else(|| panic!("no {id} in {body}"));
        assert_eq!(call["result"]["status"], "error", "{call}");
        assert!(
            call.to_string()
                .contains("the port triage itself listens on"),
            "{call}"
        );
    }
}
