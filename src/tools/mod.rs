//! Tools the agent can call: the `Tool` trait, the registry of built-in tools, and (in
//! `execute.rs`) the execution of one tool call (argument parsing, timeout, panic containment).

pub mod bash;
pub mod capped;
mod catalog;
mod execute;
pub mod internet;
pub mod kubernetes;
pub mod mcp;
pub mod prometheus;
pub mod skills;
mod todowrite;
mod typed;
pub mod yaml;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::context::tokens::Tokenizer;
/// How a tool call went: HolmesGPT's result status, so it lives with the wire shapes.
pub use crate::wire::events::ToolStatus;

use catalog::Catalog;
pub use catalog::{ToolOrigin, WithheldTool};
pub use execute::{execute, execute_with, executed_from, parse_arguments, tool_arguments};
pub use todowrite::TodoWrite;
pub use typed::{Typed, TypedTool, invalid_parameters_line};

const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// What a tool returns.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    pub status: ToolStatus,
    pub data: String,
    pub error: Option<String>,
    pub return_code: Option<i32>,
    pub invocation: Option<String>,
}

impl ToolOutput {
    pub fn success(data: impl Into<String>) -> Self {
        ToolOutput {
            status: ToolStatus::Success,
            data: data.into(),
            error: None,
            return_code: None,
            invocation: None,
        }
    }

    pub fn error(message: impl Into<String>) -> Self {
        ToolOutput {
            status: ToolStatus::Error,
            data: String::new(),
            error: Some(message.into()),
            return_code: None,
            invocation: None,
        }
    }
}

/// Per-request facts a tool may need.
#[derive(Debug, Clone, Default)]
pub struct ToolContext {
    /// The user approved this very call: skip the tool's own approval checks.
    pub user_approved: bool,
    /// The chat request's headers minus the blocked ones (HOLMES_PASSTHROUGH_BLOCKED_HEADERS);
    /// a toolset passes on only those it is configured to.
    pub request_headers: Arc<Vec<(String, String)>>,
}

/// A named group of tools that is enabled, disabled by config, or unavailable here.
pub struct Toolset {
    pub name: String,
    /// Added to the `toolset_instructions` prompt section when the toolset is enabled.
    pub instructions: String,
    pub tools: Vec<Arc<dyn Tool>>,
    pub status: ToolsetStatus,
    /// Built-in unless marked otherwise ([`Toolset::with_origin`]): decides which tools the cap
    /// on all definitions leaves out first.
    pub origin: ToolOrigin,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolsetStatus {
    Enabled,
    /// Turned off in config.
    Disabled,
    /// Enabled in config but unusable here (no binary, no server…), with the reason.
    Unavailable(String),
}

impl Toolset {
    pub fn enabled(name: &str, instructions: &str, tools: Vec<Arc<dyn Tool>>) -> Toolset {
        Toolset {
            name: name.to_owned(),
            instructions: instructions.to_owned(),
            tools,
            status: ToolsetStatus::Enabled,
            origin: ToolOrigin::Builtin,
        }
    }

    /// Marks where the toolset comes from (a custom YAML toolset is `ToolOrigin::Yaml`).
    pub fn with_origin(mut self, origin: ToolOrigin) -> Toolset {
        self.origin = origin;
        self
    }

    pub fn disabled(name: &str) -> Toolset {
        Toolset {
            name: name.to_owned(),
            instructions: String::new(),
            tools: Vec::new(),
            status: ToolsetStatus::Disabled,
            origin: ToolOrigin::Builtin,
        }
    }

    pub fn unavailable(name: &str, reason: impl Into<String>) -> Toolset {
        Toolset {
            name: name.to_owned(),
            instructions: String::new(),
            tools: Vec::new(),
            status: ToolsetStatus::Unavailable(reason.into()),
            origin: ToolOrigin::Builtin,
        }
    }
}

pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn toolset(&self) -> &str;
    /// Shown to the LLM.
    fn description(&self) -> &str;
    /// JSON Schema of the parameters object.
    fn parameters(&self) -> &Value;
    /// One line for `tool_calling_result.description`, e.g. the command it will run.
    fn one_liner(&self, params: &Value) -> String;
    fn timeout(&self) -> Duration {
        DEFAULT_TOOL_TIMEOUT
    }
    fn invoke<'a>(&'a self, params: &'a Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput>;
}

/// Parses a tool's parameters into its typed form, naming the offending field on failure.
pub fn parse_params<T: DeserializeOwned>(params: &Value) -> Result<T, String> {
    // Tracking the path allocates for every key: only parameters that fail are read again
    // with it, to name the field.
    if let Ok(parsed) = T::deserialize(params) {
        return Ok(parsed);
    }
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            format!("invalid parameters: {}", e.inner())
        } else {
            format!("invalid parameter `{path}`: {}", e.inner())
        }
    })
}

/// JSON Schema of a parameter type, as the LLM wants it (no `$schema` or `title`).
pub fn parameters_schema<T: schemars::JsonSchema>() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
    }
    schema
}

/// The enabled tools, with their OpenAI definitions serialised once per change, and every
/// toolset's status (for the prompt and for operators). MCP servers' tools come and go (a
/// server connects, re-lists, drops): the catalog is rebuilt when the hub's generation moves.
pub struct ToolRegistry {
    /// The tools of the enabled toolsets (built-in and YAML).
    builtin: Vec<(Arc<dyn Tool>, ToolOrigin)>,
    toolsets: Vec<Toolset>,
    mcp: Option<Arc<mcp::McpHub>>,
    catalog: RwLock<Arc<Catalog>>,
    /// `agent.max_tool_definitions_bytes`; unset: no cap.
    max_definitions_bytes: Option<usize>,
    /// The sandbox tool processes run in (for `/api/info`).
    sandbox: Option<crate::sandbox::Sandbox>,
}

/// The always-on toolset: planning.
pub fn core_toolset() -> Toolset {
    Toolset::enabled(
        "core_investigation",
        "",
        vec![Arc::new(Typed::new(TodoWrite))],
    )
}

impl ToolRegistry {
    pub fn new(toolsets: Vec<Toolset>) -> ToolRegistry {
        let builtin: Vec<(Arc<dyn Tool>, ToolOrigin)> = toolsets
            .iter()
            .filter(|t| t.status == ToolsetStatus::Enabled)
            .flat_map(|t| t.tools.iter().map(|tool| (tool.clone(), t.origin)))
            .collect();
        let catalog = RwLock::new(Arc::new(Catalog::new(0, builtin.clone(), None)));
        ToolRegistry {
            builtin,
            toolsets,
            mcp: None,
            catalog,
            max_definitions_bytes: None,
            sandbox: None,
        }
    }

    /// Caps the bytes all tool definitions of one request take (`agent.max_tool_definitions_bytes`).
    pub fn with_max_definitions_bytes(mut self, max: usize) -> ToolRegistry {
        self.max_definitions_bytes = Some(max);
        let catalog = Catalog::new(0, self.builtin.clone(), self.max_definitions_bytes);
        self.catalog = RwLock::new(Arc::new(catalog));
        self
    }

    pub fn with_sandbox(mut self, sandbox: crate::sandbox::Sandbox) -> ToolRegistry {
        self.sandbox = Some(sandbox);
        self
    }

    /// Adds the MCP servers' tools (as they connect).
    pub fn with_mcp(mut self, hub: Arc<mcp::McpHub>) -> ToolRegistry {
        self.mcp = Some(hub);
        self
    }

    pub fn sandbox(&self) -> Option<&crate::sandbox::Sandbox> {
        self.sandbox.as_ref()
    }

    pub fn mcp(&self) -> Option<&Arc<mcp::McpHub>> {
        self.mcp.as_ref()
    }

    pub fn builtin() -> ToolRegistry {
        ToolRegistry::new(vec![core_toolset()])
    }

    /// The catalog now, rebuilt first if an MCP server's tools changed.
    fn current(&self) -> Arc<Catalog> {
        let cached = self
            .catalog
            .read()
            .map(|c| c.clone())
            .unwrap_or_else(|e| e.into_inner().clone());
        let Some(hub) = &self.mcp else {
            return cached;
        };
        let generation = hub.generation();
        if cached.generation == generation {
            return cached;
        }
        let reserved: Vec<&str> = self.builtin.iter().map(|(t, _)| t.name()).collect();
        let mut tools = self.builtin.clone();
        tools.extend(
            hub.catalog(&reserved)
                .into_iter()
                .map(|t| (t, ToolOrigin::Mcp)),
        );
        let fresh = Arc::new(Catalog::new(generation, tools, self.max_definitions_bytes));
        if let Ok(mut c) = self.catalog.write() {
            *c = fresh.clone();
        }
        fresh
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        let catalog = self.current();
        let found = catalog.tools.iter().find(|t| t.name() == name).cloned();
        if found.is_some() || catalog.hidden.contains(name) {
            // A tool the cap left out is not there for the model, under any name.
            return found;
        }
        self.mcp.as_ref()?.qualified_tool(name)
    }

    /// Each MCP server's status, with the tools the cap on all definitions left out moved
    /// from `tools` to `withheld_tools`.
    pub fn mcp_statuses(&self) -> Vec<mcp::McpServerStatus> {
        let Some(hub) = &self.mcp else {
            return Vec::new();
        };
        hub.statuses(&self.current().withheld)
    }

    /// The size of the definitions offered now, the cap, and what it left out.
    pub fn definitions_report(&self) -> DefinitionsReport {
        let catalog = self.current();
        DefinitionsReport {
            bytes: catalog.definitions.get().len() as u64,
            max_bytes: self.max_definitions_bytes.map(|m| m as u64),
            tool_count: catalog.tools.len() as u64,
            withheld_tools: catalog.withheld.clone(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.current().tools.is_empty()
    }

    pub fn toolsets(&self) -> &[Toolset] {
        &self.toolsets
    }

    /// The `tools` array for the LLM request.
    pub fn definitions(&self) -> Arc<RawValue> {
        self.current().definitions.clone()
    }

    pub fn definitions_tokens(&self, tokenizer: Tokenizer) -> u32 {
        let slot = match tokenizer {
            Tokenizer::O200k => 0,
            Tokenizer::Cl100k => 1,
        };
        let catalog = self.current();
        *catalog.tokens[slot].get_or_init(|| tokenizer.count(catalog.definitions.get()))
    }
}

/// The tool definitions sent with every LLM request (`/api/info`, `tool_definitions`).
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct DefinitionsReport {
    /// Bytes of the `tools` array as sent (the request's frontend tools come on top).
    pub bytes: u64,
    /// `agent.max_tool_definitions_bytes`.
    pub max_bytes: Option<u64>,
    /// Tools offered.
    pub tool_count: u64,
    /// Tools left out because all definitions would exceed `max_bytes`.
    pub withheld_tools: Vec<WithheldTool>,
}

/// The outcome of one tool call: what the tool returned, how it was described, and the text
/// the LLM reads.
#[derive(Debug, Clone)]
pub struct ToolOutcome {
    pub call_id: String,
    pub tool_name: String,
    pub toolset: Option<String>,
    /// The tool's parameterised one-liner, e.g. the command it ran.
    pub description: String,
    pub params: Value,
    pub output: ToolOutput,
    /// `None` when nothing ran (denied, refused, answered without running).
    pub elapsed: Option<Duration>,
    /// The tool message's content.
    pub content: String,
}

impl ToolOutcome {
    pub fn ran(&self) -> bool {
        self.elapsed.is_some()
    }

    pub fn status(&self) -> ToolStatus {
        self.output.status
    }

    /// Turns the outcome into an error the model reads (denied, refused, still unapproved).
    pub fn into_error(mut self, message: String) -> ToolOutcome {
        self.output.status = ToolStatus::Error;
        self.content = format!("Error: {message}");
        self.output.error = Some(message);
        self
    }
}

/// A reqwest error in a few words for a tool result: "timed out after 20 s",
/// "Connection refused (os error 111)" (the innermost cause says most).
pub(crate) fn describe_http_error(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        return format!("timed out after {} s", timeout.as_secs());
    }
    let mut innermost = None;
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        innermost = Some(s.to_string());
        source = s.source();
    }
    innermost.unwrap_or_else(|| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ToolCall;
    use serde_json::json;

    struct Panicky(Value);
    impl Tool for Panicky {
        fn name(&self) -> &str {
            "panicky"
        }
        fn toolset(&self) -> &str {
            "test"
        }
        fn description(&self) -> &str {
            "panics"
        }
        fn parameters(&self) -> &Value {
            &self.0
        }
        fn one_liner(&self, _: &Value) -> String {
            "panic".into()
        }
        fn invoke<'a>(&'a self, _: &'a Value, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
            Box::pin(async { panic!("boom") })
        }
    }

    struct Hangs(Value);
    impl Tool for Hangs {
        fn name(&self) -> &str {
            "hangs"
        }
        fn toolset(&self) -> &str {
            "test"
        }
        fn description(&self) -> &str {
            "never returns"
        }
        fn parameters(&self) -> &Value {
            &self.0
        }
        fn one_liner(&self, _: &Value) -> String {
            "hang".into()
        }
        fn timeout(&self) -> Duration {
            Duration::from_millis(50)
        }
        fn invoke<'a>(&'a self, _: &'a Value, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test]
    async fn a_hanging_tool_times_out_into_an_error() {
        let reg = ToolRegistry::new(vec![Toolset::enabled(
            "test",
            "",
            vec![Arc::new(Hangs(json!({"type": "object"})))],
        )]);
        let r = execute(&reg, &call("hangs", "{}"), &ToolContext::default()).await;
        assert_eq!(r.status(), ToolStatus::Error);
        assert!(r.content.contains("did not finish within"), "{}", r.content);
    }

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall::new("c1".into(), name.into(), args.into())
    }

    #[tokio::test]
    async fn bad_arguments_and_unknown_tools_become_error_results() {
        let reg = ToolRegistry::builtin();
        let ctx = ToolContext::default();
        let r = execute(&reg, &call("TodoWrite", "{not json"), &ctx).await;
        assert_eq!(r.status(), ToolStatus::Error);
        assert!(
            r.content
                .starts_with("Error: Invalid tool arguments: not valid JSON")
        );
        let r = execute(&reg, &call("TodoWrite", "[1]"), &ctx).await;
        assert!(r.content.contains("expected a JSON object"));
        let r = execute(&reg, &call("nope", "{}"), &ctx).await;
        assert!(r.content.contains("Failed to find tool nope"));
        let r = execute(&reg, &call("TodoWrite", "{\"todos\": 3}"), &ctx).await;
        assert!(r.content.contains("`todos`"), "{}", r.content);
    }

    #[tokio::test]
    async fn a_panicking_tool_is_contained() {
        let reg = ToolRegistry::new(vec![Toolset::enabled(
            "test",
            "",
            vec![Arc::new(Panicky(json!({"type":"object"})))],
        )]);
        let r = execute(&reg, &call("panicky", "{}"), &ToolContext::default()).await;
        assert_eq!(r.status(), ToolStatus::Error);
        assert!(r.content.contains("crashed"));
    }

    /// Over `agent.max_tool_definitions_bytes` a YAML tool is left out (no tool of an MCP
    /// server here to go first) and is not found when called; the built-ins stay even though
    /// they alone exceed the cap.
    #[tokio::test]
    async fn the_definitions_cap_leaves_out_yaml_tools_and_keeps_builtins() {
        let toolsets = || {
            let hangs = Arc::new(Hangs(json!({"type": "object"})));
            vec![
                core_toolset(),
                Toolset::enabled("test", "", vec![hangs]).with_origin(ToolOrigin::Yaml),
            ]
        };
        assert!(ToolRegistry::new(toolsets()).get("hangs").is_some());
        let reg = ToolRegistry::new(toolsets()).with_max_definitions_bytes(10);
        let report = reg.definitions_report();
        assert_eq!(report.max_bytes, Some(10));
        assert_eq!(report.tool_count, 1);
        assert_eq!(report.bytes as usize, reg.definitions().get().len());
        assert_eq!(report.withheld_tools.len(), 1);
        let w = &report.withheld_tools[0];
        assert_eq!((w.toolset.as_str(), w.name.as_str()), ("test", "hangs"));
        assert_eq!(w.origin, ToolOrigin::Yaml);
        assert!(
            w.reason.contains("agent.max_tool_definitions_bytes (10)"),
            "{}",
            w.reason
        );
        assert!(reg.get("TodoWrite").is_some());
        let r = execute(&reg, &call("hangs", "{}"), &ToolContext::default()).await;
        assert!(
            r.content.contains("Failed to find tool hangs"),
            "{}",
            r.content
        );
    }

    #[test]
    fn definitions_are_openai_tools() {
        let reg = ToolRegistry::builtin();
        let defs: Value = serde_json::from_str(reg.definitions().get()).unwrap();
        assert_eq!(defs[0]["type"], "function");
        assert_eq!(defs[0]["function"]["name"], "TodoWrite");
        assert_eq!(defs[0]["function"]["parameters"]["type"], "object");
        assert!(reg.definitions_tokens(Tokenizer::O200k) > 20);
    }
}
