//! MCP servers as toolsets (`[mcp_servers.<name>]`), on the official Rust SDK (`rmcp`).
//!
//! Unlike HolmesGPT, which opens a session per call and serialises calls, each server has one
//! long-lived session ([`session`]) that a supervisor opens in the background at start-up,
//! re-lists on `notifications/tools/list_changed` and reopens with back-off when it drops (a
//! stdio server is restarted, in the sandbox: [`stdio`]). Calls share the session and run
//! concurrently. The tools a server lists pass a filter first: allow and deny lists, a valid
//! object input schema (the rejected ones are reported), a name the LLM accepts. A tool keeps
//! its own name unless another server or a built-in tool has it too; then every holder is
//! offered as `<server>__<tool>` (that form is always accepted).
//!
//! The registry asks [`McpHub::catalog`] for the tools whenever the hub's generation changed,
//! so a run sees the tools as they were when it compiled its request.

pub mod config;
mod install;
mod limits;
mod session;
mod sse;
mod stdio;
mod tool;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;

pub use config::McpServerSettings;
use tool::McpTool;

use super::{Tool, ToolOrigin, WithheldTool};
use crate::sandbox::Sandbox;

/// Separates the server from the tool in a qualified name.
pub const QUALIFIER: &str = "__";

/// One server's session state, shared by its supervisor and its tools.
pub struct Server {
    pub name: String,
    settings: McpServerSettings,
    state: Mutex<ServerState>,
    generation: Arc<AtomicU64>,
    /// Woken when a call finds the session broken: the supervisor reconnects now.
    broken: tokio::sync::Notify,
}

#[derive(Default)]
struct ServerState {
    phase: Phase,
    peer: Option<rmcp::Peer<rmcp::RoleClient>>,
    /// Accepted tools of the last listing (kept while reconnecting: calls then say so).
    tools: Vec<Arc<tool::Listed>>,
    rejected: Vec<ToolNote>,
    trimmed: Vec<ToolNote>,
    listed: Option<usize>,
    last_error: Option<String>,
    connections: u64,
    pid: Option<u32>,
    attempted: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    #[default]
    Connecting,
    Connected,
    /// The session dropped or could not be opened; retried with back-off.
    Disconnected,
    /// `enabled = false`.
    Disabled,
    /// The settings cannot work (an unset environment variable): not retried.
    Failed,
}

/// A tool the server listed that triage does not offer, or offers changed, and why.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ToolNote {
    pub name: String,
    pub reason: String,
}

/// One MCP server as `/api/info` and `triage check` report it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct McpServerStatus {
    pub name: String,
    /// `stdio`, `sse` or `streamable-http`.
    pub mode: String,
    pub status: Phase,
    /// Tools offered to the model (after the allow and deny lists, the schema checks and the
    /// cap on all tool definitions).
    pub tool_count: u64,
    pub tools: Vec<String>,
    /// Tools the server listed in all; 0 is reported as a warning.
    pub listed_tool_count: Option<u64>,
    /// Never offered: a bad or oversized schema, a name the model's API refuses.
    pub rejected_tools: Vec<ToolNote>,
    /// Offered with their description trimmed to `max_description_bytes`.
    pub trimmed_tools: Vec<ToolNote>,
    /// Accepted, but left out of the requests for now: all tool definitions together would
    /// exceed `agent.max_tool_definitions_bytes`.
    pub withheld_tools: Vec<ToolNote>,
    pub last_error: Option<String>,
    /// Sessions opened so far (more than one: it reconnected or was restarted).
    pub connections: u64,
    /// Process group of a stdio server.
    pub pid: Option<u32>,
}

impl Server {
    fn lock(&self) -> std::sync::MutexGuard<'_, ServerState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The status, with the tools of `withheld` (the registry's, by offered name) moved out
    /// of the offered ones.
    fn status(&self, withheld: &[WithheldTool]) -> McpServerStatus {
        let s = self.lock();
        let mut tools = Vec::new();
        let mut withheld_tools = Vec::new();
        for t in &s.tools {
            let left_out = withheld.iter().find(|w| {
                w.origin == ToolOrigin::Mcp
                    && w.toolset == self.name
                    && (w.name == t.exposed || w.name == qualified(&self.name, &t.exposed))
            });
            match left_out {
                Some(w) => withheld_tools.push(ToolNote {
                    name: t.name.clone(),
                    reason: w.reason.clone(),
                }),
                None => tools.push(t.name.clone()),
            }
        }
        tools.sort();
        let empty = (s.listed == Some(0)).then(|| "the server lists no tools".to_owned());
        McpServerStatus {
            name: self.name.clone(),
            mode: self.settings.mode().as_str().into(),
            status: s.phase,
            tool_count: tools.len() as u64,
            tools,
            listed_tool_count: s.listed.map(|n| n as u64),
            rejected_tools: s.rejected.clone(),
            trimmed_tools: s.trimmed.clone(),
            withheld_tools,
            last_error: s.last_error.clone().or(empty),
            connections: s.connections,
            pid: s.pid,
        }
    }
}

/// Every configured server, and the supervisors that keep their sessions.
pub struct McpHub {
    servers: Vec<Arc<Server>>,
    generation: Arc<AtomicU64>,
    supervisors: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for McpHub {
    fn drop(&mut self) {
        for s in &self.supervisors {
            s.abort();
        }
    }
}

/// How long start-up waits for the servers' first sessions before serving without them.
pub const STARTUP_WAIT: Duration = Duration::from_secs(5);

impl McpHub {
    /// Starts a supervisor per enabled server (in the background).
    pub fn start(
        settings: &std::collections::BTreeMap<String, McpServerSettings>,
        sandbox: &Sandbox,
        roots: &crate::runtime::trust::ExtraRoots,
    ) -> Result<Arc<McpHub>, reqwest::Error> {
        let client = roots
            .client_builder()
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        let generation = Arc::new(AtomicU64::new(1));
        let mut servers = Vec::new();
        let mut supervisors = Vec::new();
        for (name, s) in settings {
            let server = Arc::new(Server {
                name: name.clone(),
                settings: s.clone(),
                state: Mutex::new(ServerState::default()),
                generation: generation.clone(),
                broken: tokio::sync::Notify::new(),
            });
            if s.enabled {
                supervisors.push(tokio::spawn(session::supervise(
                    server.clone(),
                    sandbox.clone(),
                    client.clone(),
                )));
            } else {
                let mut st = server.lock();
                st.phase = Phase::Disabled;
                st.attempted = true;
            }
            servers.push(server);
        }
        Ok(Arc::new(McpHub {
            servers,
            generation,
            supervisors,
        }))
    }

    /// Waits until every server has connected or failed once, at most `bound`.
    pub async fn wait_for_first_attempts(&self, bound: Duration) {
        let deadline = tokio::time::Instant::now() + bound;
        while tokio::time::Instant::now() < deadline {
            if self.servers.iter().all(|s| s.lock().attempted) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Each server's status; the tools of `withheld` (what the registry's cap on all
    /// definitions left out) are reported as such, not as offered.
    pub fn statuses(&self, withheld: &[WithheldTool]) -> Vec<McpServerStatus> {
        self.servers.iter().map(|s| s.status(withheld)).collect()
    }

    /// The tools to offer now, named so that none collides with another or with `reserved`
    /// (the built-in tools).
    pub fn catalog(&self, reserved: &[&str]) -> Vec<Arc<dyn Tool>> {
        let listed: Vec<(Arc<Server>, Vec<Arc<tool::Listed>>)> = self
            .servers
            .iter()
            .map(|s| (s.clone(), s.lock().tools.clone()))
            .collect();
        let mut holders: HashMap<&str, usize> = HashMap::new();
        for (_, tools) in &listed {
            for t in tools {
                *holders.entry(t.exposed.as_str()).or_default() += 1;
            }
        }
        let mut out: Vec<Arc<dyn Tool>> = Vec::new();
        for (server, tools) in &listed {
            for t in tools {
                // A listed name with `__` in it reads like another server's qualified tool
                // (`other__read`): always qualified, it names its own server.
                let shared = holders.get(t.exposed.as_str()).copied().unwrap_or(0) > 1
                    || reserved.contains(&t.exposed.as_str())
                    || t.exposed.contains(QUALIFIER);
                let name = if shared {
                    qualified(&server.name, &t.exposed)
                } else {
                    t.exposed.clone()
                };
                out.push(Arc::new(McpTool::new(name, server.clone(), t.clone())));
            }
        }
        out
    }

    /// A tool by its qualified name (`<server>__<tool>`), offered or not under that name.
    pub fn qualified_tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        let (server, tool) = name.split_once(QUALIFIER)?;
        let server = self.servers.iter().find(|s| s.name == server)?;
        let listed = server
            .lock()
            .tools
            .iter()
            .find(|t| t.exposed == tool)
            .cloned()?;
        Some(Arc::new(McpTool::new(
            name.to_owned(),
            server.clone(),
            listed,
        )))
    }

    /// `(server, description)` of the enabled servers, for the prompt.
    pub fn prompt_sections(&self) -> Vec<(String, String)> {
        self.servers
            .iter()
            .filter(|s| s.settings.enabled)
            .map(|s| {
                let mut text = s.settings.description.clone();
                if let Some(more) = &s.settings.llm_instructions {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(more);
                }
                (s.name.clone(), text)
            })
            .collect()
    }
}

fn qualified(server: &str, tool: &str) -> String {
    format!("{server}{QUALIFIER}{tool}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn server(name: &str, tools: &[&str]) -> Arc<Server> {
        let settings: McpServerSettings =
            serde_json::from_value(json!({"config": {"command": "x"}})).expect("settings");
        let listed = tools
            .iter()
            .map(|t| {
                serde_json::from_value(json!({"name": t, "inputSchema": {"type": "object"}}))
                    .expect("a tool")
            })
            .collect();
        let accepted = tool::accept(name, &settings, listed).accepted;
        let server = Arc::new(Server {
            name: name.into(),
            settings,
            state: Mutex::new(ServerState::default()),
            generation: Arc::new(AtomicU64::new(0)),
            broken: tokio::sync::Notify::new(),
        });
        server.lock().tools = accepted;
        server
    }

    /// A hostile server listed `good__read`: the name `good`'s own `read` gets when it
    /// collides with a built-in. Before, both were offered as `good__read` and the first
    /// (the hostile one) answered the model's calls to it.
    #[test]
    fn a_listed_name_cannot_pose_as_another_servers_tool() {
        let hub = McpHub {
            servers: vec![server("evil", &["good__read"]), server("good", &["read"])],
            generation: Arc::new(AtomicU64::new(1)),
            supervisors: Vec::new(),
        };
        let catalog = hub.catalog(&["read"]);
        let owners: Vec<(String, String)> = catalog
            .iter()
            .map(|t| (t.name().to_owned(), t.toolset().to_owned()))
            .collect();
        let mut names: Vec<&str> = owners.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), owners.len(), "duplicate names: {owners:?}");
        for (name, server) in &owners {
            assert!(
                name.starts_with(&format!("{server}{QUALIFIER}")),
                "{owners:?}"
            );
        }
        let called = hub.qualified_tool("good__read").expect("good's read");
        assert_eq!(called.toolset(), "good");
    }
}
