//! One MCP tool behind triage's `Tool` trait: which listed tools are offered (allow and deny
//! lists, a valid object schema, a name the LLM accepts), the approval check, the arguments
//! validated against the tool's schema before they are sent (the model is untrusted), the
//! per-call timeout, and the result turned into text (text joined, images and resources
//! summarised, `isError` an error) under a size cap.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::Value;

use super::limits::{json_len, trim_description};
use super::{Server, ToolNote};
use crate::tools::capped::Capped;
use crate::tools::{Tool, ToolContext, ToolOutput, ToolStatus};

/// The largest result the model is given; the rest is cut with a note (the agent's token
/// budget may cut further).
const MAX_RESULT_BYTES: usize = 512 * 1024;
/// The LLM APIs' limit on a tool name.
const MAX_NAME_LEN: usize = 64;

/// A tool as the server listed it, checked.
pub struct Listed {
    /// The server's own name for it (what `tools/call` sends).
    pub name: String,
    /// The name the LLM sees when no other tool has it: `name` with characters outside
    /// `[A-Za-z0-9_-]` replaced by `_`.
    pub exposed: String,
    pub description: String,
    pub schema: Value,
    validator: jsonschema::Validator,
}

/// What one listing gives: the tools offered, and the others reported with their reasons.
#[derive(Default)]
pub struct Listing {
    pub accepted: Vec<Arc<Listed>>,
    /// Not offered (bad or oversized schema, unusable name).
    pub rejected: Vec<ToolNote>,
    /// Offered with their description trimmed to the cap.
    pub trimmed: Vec<ToolNote>,
}

/// Keeps the tools the settings allow whose schema and name are usable; reports the others.
/// A description over `max_description_bytes` is trimmed (prose cut short still describes
/// the tool); a schema over `max_schema_bytes` costs the tool (a cut schema is not a schema).
pub fn accept(
    server: &str,
    settings: &super::McpServerSettings,
    tools: Vec<rmcp::model::Tool>,
) -> Listing {
    let mut out = Listing::default();
    for t in tools {
        let name = t.name.to_string();
        if settings.denied_tools.contains(&name)
            || settings
                .allowed_tools()
                .is_some_and(|allowed| !allowed.contains(&name))
        {
            continue;
        }
        let note = |reason: String| ToolNote {
            name: name.clone(),
            reason,
        };
        // Measured before anything else is done with it: a schema of megabytes is neither
        // copied nor compiled.
        let schema_bytes = json_len(&*t.input_schema);
        if schema_bytes > settings.max_schema_bytes {
            out.rejected.push(note(format!(
                "its inputSchema takes {schema_bytes} bytes as JSON, more than \
                 mcp_servers.{server}.max_schema_bytes ({}); a cut schema would not be valid, \
                 so the tool is not offered",
                settings.max_schema_bytes
            )));
            continue;
        }
        let schema = Value::Object((*t.input_schema).clone());
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            out.rejected.push(note(
                "its inputSchema is not a JSON Schema of type \"object\"".into(),
            ));
            continue;
        }
        let validator = match argument_validator(&schema) {
            Ok(v) => v,
            Err(e) => {
                out.rejected.push(note(format!(
                    "its inputSchema is not a valid JSON Schema: {e}"
                )));
                continue;
            }
        };
        let exposed: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if exposed.is_empty()
            || exposed.len() + server.len() + super::QUALIFIER.len() > MAX_NAME_LEN
        {
            out.rejected.push(note(format!(
                "the name is empty or too long for the model's API ({MAX_NAME_LEN} characters \
                 with the server's prefix)"
            )));
            continue;
        }
        if out.accepted.iter().any(|a| a.exposed == exposed) {
            out.rejected.push(note(format!(
                "another tool of this server is also offered as '{exposed}'"
            )));
            continue;
        }
        let mut description = t.description.map(|d| d.to_string()).unwrap_or_default();
        let max = settings.max_description_bytes;
        if let Some(trimmed) = trim_description(&description, max) {
            out.trimmed.push(note(format!(
                "its description takes {} bytes, more than \
                 mcp_servers.{server}.max_description_bytes ({max}): offered with the first {} \
                 bytes and a note that it was trimmed",
                description.len(),
                trimmed.kept
            )));
            description = trimmed.text;
        }
        out.accepted.push(Arc::new(Listed {
            name,
            exposed,
            description,
            schema,
            validator,
        }));
    }
    out
}

pub struct McpTool {
    /// The name the LLM calls it by.
    name: String,
    server: Arc<Server>,
    listed: Arc<Listed>,
    needs_approval: bool,
}

impl McpTool {
    pub fn new(name: String, server: Arc<Server>, listed: Arc<Listed>) -> McpTool {
        let needs_approval = server.settings.requires_approval.applies_to(&listed.name);
        McpTool {
            name,
            server,
            listed,
            needs_approval,
        }
    }

    async fn call(&self, params: &Value, ctx: &ToolContext) -> ToolOutput {
        let server = &self.server.name;
        let complaints: Vec<String> = self
            .listed
            .validator
            .iter_errors(params)
            .take(5)
            .map(|e| match e.instance_path().to_string() {
                p if p.is_empty() => e.to_string(),
                p => format!("{p}: {e}"),
            })
            .collect();
        if !complaints.is_empty() {
            return ToolOutput::error(format!(
                "invalid arguments for {} (nothing was sent to the server): {}",
                self.name,
                complaints.join("; ")
            ));
        }
        // Checked after the arguments: the user is never asked to approve a call that
        // cannot run.
        if self.needs_approval && !ctx.user_approved {
            return ToolOutput {
                status: ToolStatus::ApprovalRequired,
                error: Some(format!(
                    "MCP server '{server}' requires approval for {}",
                    self.listed.name
                )),
                ..ToolOutput::success("")
            };
        }
        let Value::Object(arguments) = params else {
            return ToolOutput::error("the arguments must be a JSON object");
        };
        let Some(peer) = self.server.lock().peer.clone() else {
            let why = self
                .server
                .lock()
                .last_error
                .clone()
                .unwrap_or_else(|| "connecting".into());
            return ToolOutput::error(format!(
                "MCP server '{server}' is not connected ({why}); try again shortly"
            ));
        };
        let limit = self.timeout_limit();
        let mut request = CallToolRequestParams::new(self.listed.name.clone());
        request.arguments = Some(arguments.clone());
        match tokio::time::timeout(limit, peer.call_tool(request)).await {
            Err(_) => ToolOutput::error(format!(
                "MCP tool {} of server '{server}' did not answer within {} s",
                self.listed.name,
                limit.as_secs()
            )),
            Ok(Err(e)) => {
                let message = format!("MCP server '{server}': {e}");
                // The connection, not the call, failed: the supervisor opens a new session.
                if matches!(
                    e,
                    ServiceError::TransportSend(_) | ServiceError::TransportClosed
                ) {
                    self.server.lock().last_error = Some(message.clone());
                    self.server.broken.notify_one();
                }
                ToolOutput::error(message)
            }
            Ok(Ok(result)) => render(result),
        }
    }

    fn timeout_limit(&self) -> Duration {
        Duration::from_secs(self.server.settings.timeout_secs.max(1))
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn toolset(&self) -> &str {
        &self.server.name
    }
    fn description(&self) -> &str {
        &self.listed.description
    }
    fn parameters(&self) -> &Value {
        &self.listed.schema
    }
    fn one_liner(&self, params: &Value) -> String {
        let mut args = params.to_string();
        if args.len() > 200 {
            let cut = (0..=200)
                .rev()
                .find(|i| args.is_char_boundary(*i))
                .unwrap_or(0);
            args.truncate(cut);
            args.push('…');
        }
        format!("{}/{}({args})", self.server.name, self.listed.name)
    }
    /// A backstop: the call itself stops at the server's `timeout_secs`.
    fn timeout(&self) -> Duration {
        self.timeout_limit() + Duration::from_secs(5)
    }
    fn invoke<'a>(&'a self, params: &'a Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(self.call(params, ctx))
    }
}

/// The result as the model reads it: text blocks joined, other blocks summarised (read as
/// JSON, so that content types newer than this code still show), capped.
/// A server's schema is the server's word, not ours: its patterns get a small compiled size
/// and a backtracking bound, so a hostile pattern costs a refusal, not a stuck worker.
fn argument_validator(schema: &Value) -> Result<jsonschema::Validator, String> {
    let patterns = jsonschema::PatternOptions::fancy_regex()
        .backtrack_limit(10_000)
        .size_limit(1 << 20)
        .dfa_size_limit(1 << 20);
    jsonschema::options()
        .with_pattern_options(patterns)
        .build(schema)
        .map_err(|e| e.to_string())
}

pub fn render(result: CallToolResult) -> ToolOutput {
    let mut parts: Vec<String> = Vec::new();
    for block in &result.content {
        let Ok(v) = serde_json::to_value(block) else {
            continue;
        };
        let field = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        parts.push(
            match v.get("type").and_then(Value::as_str).unwrap_or_default() {
                "text" => field("text"),
                kind @ ("image" | "audio") => format!(
                    "[{kind}: {}, {} bytes base64]",
                    field("mimeType"),
                    v.get("data").and_then(Value::as_str).map_or(0, str::len)
                ),
                "resource" => {
                    let r = v.get("resource").cloned().unwrap_or_default();
                    let uri = r.get("uri").and_then(Value::as_str).unwrap_or_default();
                    match r.get("text").and_then(Value::as_str) {
                        Some(text) => format!("[resource {uri}]\n{text}"),
                        None => format!("[resource {uri}: binary, not shown]"),
                    }
                }
                "resource_link" => format!("[resource link: {} {}]", field("uri"), field("name")),
                other => format!("[{other} content, not shown]"),
            },
        );
    }
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    let mut capped = Capped::default();
    capped.push(text.as_bytes(), MAX_RESULT_BYTES);
    let mut data = String::from_utf8_lossy(&capped.bytes).into_owned();
    if capped.truncated() {
        data.push_str(&format!(
            "\n[TRUNCATED: the result had {} bytes; the first {MAX_RESULT_BYTES} are shown]",
            capped.total
        ));
    }
    if result.is_error == Some(true) {
        let message = if data.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            data
        };
        return ToolOutput::error(message);
    }
    if data.is_empty() {
        return ToolOutput {
            status: ToolStatus::NoData,
            ..ToolOutput::success("")
        };
    }
    ToolOutput::success(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(v: Value) -> CallToolResult {
        serde_json::from_value(v).expect("a CallToolResult")
    }

    #[test]
    fn results_join_text_summarise_the_rest_and_flag_errors() {
        let out = render(result(json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///x", "text": "body"}},
            {"type": "text", "text": "two"}
        ]})));
        assert_eq!(out.status, ToolStatus::Success);
        assert_eq!(
            out.data,
            "one\n[image: image/png, 8 bytes base64]\n[resource file:///x]\nbody\ntwo"
        );
        let out = render(result(
            json!({"content": [{"type": "text", "text": "bad tz"}], "isError": true}),
        ));
        assert_eq!(out.status, ToolStatus::Error);
        assert_eq!(out.error.as_deref(), Some("bad tz"));
        let out = render(result(json!({"content": []})));
        assert_eq!(out.status, ToolStatus::NoData);
        let big = "x".repeat(MAX_RESULT_BYTES + 10);
        let out = render(result(json!({"content": [{"type": "text", "text": big}]})));
        assert!(out.data.ends_with("are shown]") && out.data.len() < MAX_RESULT_BYTES + 200);
    }

    fn listed(name: &str, schema: Value) -> rmcp::model::Tool {
        serde_json::from_value(json!({"name": name, "inputSchema": schema})).expect("a tool")
    }

    #[test]
    fn bad_schemas_and_names_are_rejected_and_lists_filter() {
        let settings: super::super::McpServerSettings = serde_json::from_value(json!({
            "config": {"command": "x"}, "denied_tools": ["gone"]
        }))
        .expect("settings");
        let tools = vec![
            listed(
                "ok.tool",
                json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
            ),
            listed("array", json!({"type": "array"})),
            listed(
                "broken",
                json!({"type": "object", "properties": {"a": {"type": 12}}}),
            ),
            listed("gone", json!({"type": "object"})),
            listed(&"n".repeat(80), json!({"type": "object"})),
        ];
        let Listing {
            accepted: ok,
            rejected,
            ..
        } = accept("srv", &settings, tools);
        assert_eq!(
            ok.iter().map(|t| t.exposed.as_str()).collect::<Vec<_>>(),
            ["ok_tool"]
        );
        assert_eq!(ok[0].name, "ok.tool");
        let names: Vec<&str> = rejected.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names.len(), 3, "{rejected:?}");
        assert!(names.contains(&"array") && names.contains(&"broken"));
        assert!(!ok[0].validator.is_valid(&json!({"a": "1; rm -rf /"})));
    }

    /// A 1 MiB description is trimmed and the tool kept; a schema over the cap costs the tool
    /// before it is copied or compiled; both say why, naming the key.
    #[test]
    fn oversized_descriptions_are_trimmed_and_oversized_schemas_refused() {
        let settings: super::super::McpServerSettings = serde_json::from_value(json!({
            "config": {"command": "x"}, "max_description_bytes": 1000, "max_schema_bytes": 300
        }))
        .expect("settings");
        let wordy: rmcp::model::Tool = serde_json::from_value(json!({
            "name": "wordy", "description": "é".repeat(1 << 19), "inputSchema": {"type": "object"}
        }))
        .expect("a tool");
        let many = (0..40).map(|i| (format!("p{i}"), json!({"type": "string"})));
        let fat = listed(
            "fat",
            json!({"type": "object", "properties": Value::Object(many.collect())}),
        );
        let out = accept("srv", &settings, vec![wordy, fat]);
        assert_eq!(out.accepted.len(), 1);
        assert!(out.accepted[0].description.len() <= 1000);
        assert!(
            out.accepted[0]
                .description
                .contains("description trimmed by triage")
        );
        assert_eq!(out.trimmed.len(), 1);
        assert_eq!(out.trimmed[0].name, "wordy");
        let why = &out.trimmed[0].reason;
        assert!(
            why.contains("1048576 bytes") && why.contains("mcp_servers.srv.max_description_bytes"),
            "{why}"
        );
        assert_eq!(out.rejected.len(), 1);
        assert_eq!(out.rejected[0].name, "fat");
        let why = &out.rejected[0].reason;
        assert!(
            why.contains("mcp_servers.srv.max_schema_bytes (300)") && why.contains("not offered"),
            "{why}"
        );
    }

    #[test]
    fn hostile_patterns_end_and_refuse() {
        let settings: super::super::McpServerSettings =
            serde_json::from_value(json!({"config": {"command": "x"}})).expect("settings");
        let with_pattern = |pattern: &str| json!({"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}});
        let tools = vec![
            // A back-reference: only a backtracking engine runs it, exponentially here.
            listed("bomb", with_pattern("^(\\w+\\s?)*\\1$")),
            // Compiles to far more than the size bound.
            listed("huge", with_pattern("(\\w{100}){100}{100}")),
        ];
        let ok = accept("srv", &settings, tools).accepted;
        let hostile = json!({"a": format!("{}!", "ab".repeat(5000))});
        // The checks end, and what they cannot decide is not valid: nothing is sent.
        for tool in &ok {
            assert!(!tool.validator.is_valid(&hostile), "{}", tool.name);
            assert!(
                !tool.validator.is_valid(&json!({"a": "x"})),
                "{}",
                tool.name
            );
        }
        assert!(ok[0].validator.is_valid(&json!({"a": "abab"})));
    }

    #[tokio::test]
    async fn arguments_are_checked_before_approval_and_before_any_session() {
        let settings: super::super::McpServerSettings = serde_json::from_value(json!({
            "config": {"command": "x"}, "requires_approval": true
        }))
        .expect("settings");
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let mut ok = accept("srv", &settings, vec![listed("count", schema)]).accepted;
        let server = Arc::new(Server {
            name: "srv".into(),
            settings,
            state: std::sync::Mutex::new(Default::default()),
            generation: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            broken: tokio::sync::Notify::new(),
        });
        let tool = McpTool::new("count".into(), server, ok.remove(0));
        let ctx = ToolContext::default();
        let out = tool.call(&json!({"n": "1; $(reboot)"}), &ctx).await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(out.error.unwrap_or_default().contains("nothing was sent"));
        let out = tool.call(&json!({"n": 1}), &ctx).await;
        assert_eq!(out.status, ToolStatus::ApprovalRequired);
        let approved = ToolContext {
            user_approved: true,
            ..ToolContext::default()
        };
        let out = tool.call(&json!({"n": 1}), &approved).await;
        assert!(out.error.unwrap_or_default().contains("is not connected"));
    }
}
