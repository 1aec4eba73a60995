//! `[mcp_servers.<name>]`: HolmesGPT's `mcp_servers` entries (`description`, `config` with
//! `url`, `mode`, `headers`, `command`, `args`, `env`) plus triage's own keys. The field names
//! are HolmesGPT's YAML names, so that its `config.yaml` maps onto these settings unchanged.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Per-call timeout when `timeout_secs` is not set (HolmesGPT has none).
pub const DEFAULT_CALL_TIMEOUT_SECS: u64 = 120;
/// A tool description longer than this is trimmed (`max_description_bytes`): about a thousand
/// tokens, several times what the descriptions of common servers take, and the part a
/// description opens with (what the tool does) is kept.
pub const DEFAULT_MAX_DESCRIPTION_BYTES: usize = 4 * 1024;
/// A tool whose schema is longer than this is not offered (`max_schema_bytes`): four times
/// the description's cap, since exceeding it costs the whole tool.
pub const DEFAULT_MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// The smallest cap either key accepts: room for a sentence and the trimming note.
pub const MIN_CAP_BYTES: usize = 256;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct McpServerSettings {
    /// What the server is for: shown to the model with the server's tools.
    #[serde(default)]
    pub description: String,
    /// HolmesGPT's toolset key: more instructions for the model.
    #[serde(default)]
    pub llm_instructions: Option<String>,
    #[serde(default)]
    pub config: McpConnection,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// Only these tools are offered (unset: all of them).
    #[serde(default)]
    pub allowed_tools: Option<Vec<String>>,
    /// Never offered, even when allowed.
    #[serde(default)]
    pub denied_tools: Vec<String>,
    /// Every tool (`true`) or the listed tools wait for the user's approval.
    #[serde(default)]
    pub requires_approval: RequiresApproval,
    /// Longest one call may take.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// A tool's description beyond this many bytes is trimmed, with a note saying so.
    #[serde(default = "default_max_description_bytes")]
    pub max_description_bytes: usize,
    /// A tool whose `inputSchema` takes more bytes (as compact JSON) is not offered.
    #[serde(default = "default_max_schema_bytes")]
    pub max_schema_bytes: usize,
}

fn enabled_by_default() -> bool {
    true
}

fn default_timeout() -> u64 {
    DEFAULT_CALL_TIMEOUT_SECS
}

fn default_max_description_bytes() -> usize {
    DEFAULT_MAX_DESCRIPTION_BYTES
}

fn default_max_schema_bytes() -> usize {
    DEFAULT_MAX_SCHEMA_BYTES
}

/// How to reach the server (HolmesGPT's `config` block).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct McpConnection {
    #[serde(default)]
    pub url: Option<String>,
    /// Unset: `stdio` when a `command` is given, else `sse` (HolmesGPT's default).
    #[serde(default)]
    pub mode: Option<McpMode>,
    /// Sent with every HTTP request; values may name environment variables (`${NAME}`,
    /// `{{ env.NAME }}`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// The stdio server's environment, besides PATH, LANG, HOME and TMPDIR.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// HolmesGPT accepts the server's `allowed_tools` here too.
    #[serde(default)]
    pub allowed_tools: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum McpMode {
    #[serde(rename = "sse")]
    Sse,
    #[serde(rename = "streamable-http")]
    StreamableHttp,
    #[serde(rename = "stdio")]
    Stdio,
}

impl McpMode {
    pub fn as_str(self) -> &'static str {
        match self {
            McpMode::Sse => "sse",
            McpMode::StreamableHttp => "streamable-http",
            McpMode::Stdio => "stdio",
        }
    }
}

/// `requires_approval = true` (every tool) or a list of tool names.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum RequiresApproval {
    All(bool),
    Tools(Vec<String>),
}

impl Default for RequiresApproval {
    fn default() -> Self {
        RequiresApproval::All(false)
    }
}

impl RequiresApproval {
    pub fn applies_to(&self, tool: &str) -> bool {
        match self {
            RequiresApproval::All(all) => *all,
            RequiresApproval::Tools(tools) => tools.iter().any(|t| t == tool),
        }
    }
}

/// A server's settings checked and with its environment references expanded.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub endpoint: Endpoint,
    pub call_timeout: Duration,
}

#[derive(Debug, Clone)]
pub enum Endpoint {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    Http {
        mode: McpMode,
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl McpServerSettings {
    /// The mode in force: `mode`, else `stdio` for a command, else HolmesGPT's `sse`.
    pub fn mode(&self) -> McpMode {
        match (self.config.mode, &self.config.command, &self.config.url) {
            (Some(mode), _, _) => mode,
            (None, Some(_), None) => McpMode::Stdio,
            _ => McpMode::Sse,
        }
    }

    /// The tools offered, when limited: `allowed_tools`, or the same key inside `config`.
    pub fn allowed_tools(&self) -> Option<&[String]> {
        self.allowed_tools
            .as_deref()
            .or(self.config.allowed_tools.as_deref())
    }

    /// Checks that the keys fit together; the error names the offending key.
    pub fn check(&self, name: &str) -> Result<(), String> {
        let key = |k: &str| format!("mcp_servers.{name}.{k}");
        // `__` separates server and tool in a qualified tool name: not in a server's name.
        if name.is_empty()
            || name.contains(super::QUALIFIER)
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))
        {
            return Err(format!(
                "mcp_servers: server name '{name}' must be letters, digits, '_' or '-' (it \
                 prefixes tool names)"
            ));
        }
        if self.timeout_secs == 0 {
            return Err(format!("{}: must be at least 1", key("timeout_secs")));
        }
        if let (Some(beside), Some(inside)) = (&self.allowed_tools, &self.config.allowed_tools)
            && beside != inside
        {
            return Err(format!(
                "{} and {} list different tools: keep one",
                key("allowed_tools"),
                key("config.allowed_tools")
            ));
        }
        for (k, v) in [
            ("max_description_bytes", self.max_description_bytes),
            ("max_schema_bytes", self.max_schema_bytes),
        ] {
            if v < MIN_CAP_BYTES {
                return Err(format!("{}: must be at least {MIN_CAP_BYTES}", key(k)));
            }
        }
        let c = &self.config;
        match self.mode() {
            McpMode::Stdio => {
                if c.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
                    return Err(format!(
                        "{}: required with mode = \"stdio\"",
                        key("config.command")
                    ));
                }
                if c.url.is_some() {
                    return Err(format!(
                        "{}: not used with mode = \"stdio\"",
                        key("config.url")
                    ));
                }
                if !c.headers.is_empty() {
                    return Err(format!(
                        "{}: not used with mode = \"stdio\"",
                        key("config.headers")
                    ));
                }
            }
            mode => {
                let Some(url) = c.url.as_deref() else {
                    return Err(format!(
                        "{}: required with mode = \"{}\"",
                        key("config.url"),
                        mode.as_str()
                    ));
                };
                match url::Url::parse(url) {
                    Ok(u) if matches!(u.scheme(), "http" | "https") => {}
                    _ => {
                        return Err(format!(
                            "{}: '{url}' is not an http(s) URL",
                            key("config.url")
                        ));
                    }
                }
                for (k, v) in [
                    ("command", c.command.is_some()),
                    ("args", !c.args.is_empty()),
                    ("env", !c.env.is_empty()),
                ] {
                    if v {
                        return Err(format!(
                            "{}: only used with mode = \"stdio\"",
                            key(&format!("config.{k}"))
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Expands environment references (in the URL, headers, command, args and env) with
    /// `lookup`; a variable that is not set is an error naming it.
    pub fn resolve(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Resolved, String> {
        let c = &self.config;
        let expand = |what: &str, s: &str| {
            expand_env(s, lookup)
                .map_err(|var| format!("{what}: environment variable {var} is not set"))
        };
        let endpoint = match self.mode() {
            McpMode::Stdio => Endpoint::Stdio {
                command: expand("config.command", c.command.as_deref().unwrap_or_default())?,
                args: c
                    .args
                    .iter()
                    .map(|a| expand("config.args", a))
                    .collect::<Result<_, _>>()?,
                env: c
                    .env
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), expand(&format!("config.env.{k}"), v)?)))
                    .collect::<Result<_, String>>()?,
            },
            mode => {
                let url = expand("config.url", c.url.as_deref().unwrap_or_default())?;
                Endpoint::Http {
                    mode,
                    url: if mode == McpMode::Sse {
                        sse_url(&url)
                    } else {
                        url
                    },
                    headers: c
                        .headers
                        .iter()
                        .map(|(k, v)| Ok((k.clone(), expand(&format!("config.headers.{k}"), v)?)))
                        .collect::<Result<_, String>>()?,
                }
            }
        };
        Ok(Resolved {
            endpoint,
            call_timeout: Duration::from_secs(self.timeout_secs.max(1)),
        })
    }
}

/// HolmesGPT appends `/sse` to an SSE server's URL unless it already ends so.
fn sse_url(url: &str) -> String {
    let trimmed = url.trim_end_matches('/');
    if trimmed.ends_with("/sse") {
        trimmed.to_owned()
    } else {
        format!("{trimmed}/sse")
    }
}

/// Replaces `${NAME}` and `{{ env.NAME }}` with the variable's value; `Err(NAME)` when it is
/// not set.
pub fn expand_env(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let dollar = rest.find("${");
        let braces = rest.find("{{");
        let (start, open, close) = match (dollar, braces) {
            (Some(d), Some(b)) if b < d => (b, "{{", "}}"),
            (Some(d), _) => (d, "${", "}"),
            (None, Some(b)) => (b, "{{", "}}"),
            (None, None) => break,
        };
        let after = &rest[start + open.len()..];
        let Some(end) = after.find(close) else { break };
        let inner = after[..end].trim();
        let name = if open == "{{" {
            match inner.strip_prefix("env.") {
                Some(n) => n.trim(),
                // Not an environment reference: kept as written.
                None => {
                    out.push_str(&rest[..start + open.len() + end + close.len()]);
                    rest = &after[end + close.len()..];
                    continue;
                }
            }
        } else {
            inner
        };
        let value = lookup(name).ok_or_else(|| name.to_owned())?;
        out.push_str(&rest[..start]);
        out.push_str(&value);
        rest = &after[end + close.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<McpServerSettings, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn holmes_shape_parses_with_sse_default_and_suffix() {
        let s = parse(json!({"description": "d", "config": {"url": "http://h:1/", "headers": {"Authorization": "Bearer ${TOKEN}"}}}))
            .expect("parses");
        assert_eq!(s.mode(), McpMode::Sse);
        assert_eq!(s.timeout_secs, 120);
        s.check("x").expect("valid");
        let r = s
            .resolve(&|k| (k == "TOKEN").then(|| "t0k".to_owned()))
            .expect("resolves");
        match r.endpoint {
            Endpoint::Http { url, headers, .. } => {
                assert_eq!(url, "http://h:1/sse");
                assert_eq!(headers, vec![("Authorization".into(), "Bearer t0k".into())]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(sse_url("http://h/sse"), "http://h/sse");
        let missing = s.resolve(&|_| None).expect_err("unset variable");
        assert!(
            missing.contains("TOKEN") && missing.contains("config.headers.Authorization"),
            "{missing}"
        );
    }

    #[test]
    fn unknown_and_misplaced_keys_are_named() {
        let e = parse(json!({"config": {"url": "http://h", "bogus": 1}})).expect_err("unknown");
        assert!(e.contains("bogus"), "{e}");
        let e = parse(json!({"confg": {}})).expect_err("unknown");
        assert!(e.contains("confg"), "{e}");
        let s = parse(json!({"config": {"mode": "stdio", "url": "http://h", "command": "x"}}))
            .expect("parses");
        assert!(
            s.check("t")
                .expect_err("url with stdio")
                .contains("mcp_servers.t.config.url")
        );
        let s = parse(json!({"config": {"mode": "streamable-http"}})).expect("parses");
        assert!(s.check("t").expect_err("no url").contains("config.url"));
        let s = parse(json!({"config": {"command": "x"}, "timeout_secs": 0})).expect("parses");
        assert!(s.check("t").expect_err("zero").contains("timeout_secs"));
        for k in ["max_description_bytes", "max_schema_bytes"] {
            let s = parse(json!({"config": {"command": "x"}, k: 10})).expect("parses");
            let e = s.check("t").expect_err("too small");
            assert!(e.contains(&format!("mcp_servers.t.{k}")), "{e}");
        }
        let e = parse(json!({"config": {"command": "x"}, "max_descripton_bytes": 9000}))
            .expect_err("a misspelt cap");
        assert!(e.contains("max_descripton_bytes"), "{e}");
        let s = parse(json!({"config": {"command": "x"}})).expect("parses");
        assert_eq!(s.mode(), McpMode::Stdio);
        assert!(s.check("bad name").is_err());
        assert!(
            s.check("a__b").is_err(),
            "`__` would make qualified names ambiguous"
        );
    }

    #[test]
    fn allowed_tools_may_sit_inside_config_as_in_holmesgpt() {
        let inside = parse(json!({"config": {"url": "http://h/mcp", "allowed_tools": ["search"]}}))
            .expect("parses");
        inside.check("docs").expect("valid");
        assert_eq!(inside.allowed_tools(), Some(&["search".to_owned()][..]));
        let beside =
            parse(json!({"config": {"url": "http://h/mcp"}, "allowed_tools": ["fetch"]})).unwrap();
        assert_eq!(beside.allowed_tools(), Some(&["fetch".to_owned()][..]));
        let both = parse(
            json!({"config": {"url": "http://h/mcp", "allowed_tools": ["a"]},
            "allowed_tools": ["b"]}),
        )
        .unwrap();
        let err = both.check("docs").expect_err("two different lists");
        assert!(
            err.contains("mcp_servers.docs.allowed_tools")
                && err.contains("mcp_servers.docs.config.allowed_tools"),
            "{err}"
        );
        assert_eq!(
            parse(json!({"config": {"url": "http://h"}}))
                .unwrap()
                .allowed_tools(),
            None
        );
    }

    #[test]
    fn requires_approval_is_a_bool_or_a_list() {
        let s =
            parse(json!({"config": {"command": "x"}, "requires_approval": ["rm"]})).expect("list");
        assert!(s.requires_approval.applies_to("rm") && !s.requires_approval.applies_to("ls"));
        let s =
            parse(json!({"config": {"command": "x"}, "requires_approval": true})).expect("bool");
        assert!(s.requires_approval.applies_to("ls"));
    }

    #[test]
    fn env_templates_expand_both_spellings() {
        let env = |k: &str| Some(format!("<{k}>"));
        assert_eq!(
            expand_env("a ${X} b {{ env.Y }} {{other}}", &env).expect("ok"),
            "a <X> b <Y> {{other}}"
        );
        assert_eq!(expand_env("no refs", &env).expect("ok"), "no refs");
        assert_eq!(expand_env("${UNSET}", &|_| None), Err("UNSET".into()));
    }
}
