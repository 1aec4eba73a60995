//! HolmesGPT's custom toolset format, as written in `toolsets:` of its config files, in the
//! files `custom_toolsets` lists, or under `[yaml_toolsets.<name>]` in triage's TOML.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One toolset. HolmesGPT's documentation fields (`docs_url`, `icon_url`, `tags`,
/// `installation_instructions`) are accepted so its files load unchanged; they change nothing.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct YamlToolsetDef {
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// `yaml` (commands, the default) or `http` (requests).
    #[serde(default, rename = "type")]
    pub kind: ToolsetKind,
    #[serde(default)]
    pub description: String,
    /// Added to the system prompt while the toolset is enabled.
    #[serde(default)]
    pub llm_instructions: Option<String>,
    #[serde(default)]
    pub prerequisites: Vec<Prerequisite>,
    #[serde(default)]
    pub tools: Vec<YamlToolDef>,
    /// Every tool of the toolset waits for the user's approval.
    #[serde(default)]
    pub requires_approval: bool,
    /// Default timeout of its tools (60 s when unset).
    #[serde(default, alias = "timeout_seconds")]
    pub timeout_secs: Option<u64>,
    /// Output (or response body) kept; beyond it the command is stopped (1 MiB when unset).
    #[serde(default)]
    pub max_output_bytes: Option<usize>,
    /// Variables the commands get besides PATH, LANG and HOME (`${VAR}` reads triage's
    /// environment). The variables named by `env` prerequisites are passed too.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// HolmesGPT's free-form toolset settings; for commands they are unused.
    #[serde(default)]
    pub config: Option<serde_json::Value>,
    #[serde(default)]
    pub docs_url: Option<String>,
    #[serde(default)]
    pub icon_url: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub installation_instructions: Option<String>,
    /// As for tools: accepted, not applied.
    #[serde(default)]
    pub transformers: Option<serde_json::Value>,
}

fn enabled_by_default() -> bool {
    true
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ToolsetKind {
    #[default]
    Yaml,
    Http,
}

/// What must hold for the toolset to be usable: a command that succeeds, or variables that
/// are set. A failing one makes the toolset unavailable, with the reason.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Prerequisite {
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub env: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct YamlToolDef {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// A one-line command template: `kubectl get pods -n {{ namespace }}`.
    #[serde(default)]
    pub command: Option<String>,
    /// A multi-line bash script template.
    #[serde(default)]
    pub script: Option<String>,
    /// Declared parameters; otherwise inferred from the `{{ name }}` placeholders.
    #[serde(default)]
    pub parameters: Option<BTreeMap<String, ParameterDef>>,
    #[serde(default)]
    pub requires_approval: Option<bool>,
    #[serde(default, alias = "timeout_seconds")]
    pub timeout_secs: Option<u64>,
    /// `http` toolsets: the URL template (`https://api.example/v1/items/{{ id }}`).
    #[serde(default)]
    pub url: Option<String>,
    /// `http` toolsets: GET (default), POST, PUT, PATCH, DELETE or HEAD.
    #[serde(default)]
    pub method: Option<String>,
    /// `http` toolsets: request headers; values may name variables as `${VAR}`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// HolmesGPT's line for people (the tool's one-liner shows the command instead).
    #[serde(default)]
    pub user_description: Option<String>,
    /// A command the output is piped through (HolmesGPT's post-processing, e.g. `jq …`).
    #[serde(default)]
    pub additional_instructions: Option<String>,
    /// HolmesGPT's output transformers (LLM summaries): accepted, not applied (a warning
    /// says so); triage truncates large output instead.
    #[serde(default)]
    pub transformers: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ParameterDef {
    #[serde(default = "string_type", rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default = "enabled_by_default")]
    pub required: bool,
}

fn string_type() -> String {
    "string".into()
}
