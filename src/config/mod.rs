//! Settings, layered: `config/default.toml` (compiled in) ← a file from `--config` or
//! `TRIAGE_CONFIG` ← HolmesGPT's environment variables ← `TRIAGE_*` variables (`__` nests).
//! HolmesGPT's variables are honoured so a deployment can switch binaries unchanged.
//!
//! This file holds the settings types; [`load`] layers and checks them, [`env`] maps
//! HolmesGPT's variables.

pub mod a2a;
mod checks;
pub mod entry_keys;
mod env;
mod holmes;
mod holmes_report;
mod holmes_toolsets;
pub mod keys;
mod load;
pub mod webhooks;

pub use checks::{AdminSettings, ChecksSettings};
pub use env::{CLI_ONLY_VARS, HOLMES_ENV};
pub use holmes::HolmesFiles;
pub use holmes_report::HolmesReport;
pub use holmes_toolsets::BUILTIN_EQUIVALENTS;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub server: ServerSettings,
    pub llm: LlmSettings,
    pub agent: AgentSettings,
    pub prompts: PromptSettings,
    pub compat: CompatSettings,
    #[serde(default)]
    pub approvals: ApprovalSettings,
    #[serde(default)]
    pub security: SecuritySettings,
    pub compaction: CompactionSettings,
    #[serde(default)]
    pub toolsets: ToolsetSettings,
    #[serde(default)]
    pub sandbox: crate::sandbox::SandboxSettings,
    /// MCP servers as toolsets, in HolmesGPT's `mcp_servers` shape.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, crate::tools::mcp::McpServerSettings>,
    #[serde(default)]
    pub conversations: ConversationSettings,
    /// Health checks and their notifications (`config/checks.rs`).
    #[serde(default)]
    pub checks: ChecksSettings,
    /// The reload routes (`config/checks.rs`).
    #[serde(default)]
    pub admin: AdminSettings,
    /// A2A's push notifications (`config/a2a.rs`).
    #[serde(default)]
    pub a2a: a2a::A2aSettings,
    /// Receivers of conversation updates (`[[webhooks]]`).
    #[serde(default)]
    pub webhooks: Vec<webhooks::WebhookSettings>,
    /// Custom toolsets in HolmesGPT's YAML format (`[yaml_toolsets.<name>]`; HolmesGPT's
    /// config files add theirs).
    #[serde(default)]
    pub yaml_toolsets: BTreeMap<String, crate::tools::yaml::YamlToolsetDef>,
    /// `SKILL.md` directories (HolmesGPT's `custom_skill_paths`).
    #[serde(default)]
    pub skills: crate::tools::skills::SkillSettings,
    #[serde(default)]
    pub models: BTreeMap<String, ModelEntry>,
    /// HolmesGPT's model list YAML (MODEL_LIST_FILE_LOCATION).
    #[serde(default)]
    pub model_list_file: Option<PathBuf>,
    /// Base64 of PEM CA certificates every outbound HTTPS client trusts besides the system's
    /// (HolmesGPT's CERTIFICATE): LLM providers, MCP servers, Prometheus, web pages, webhooks.
    #[serde(default)]
    pub ca_certificate: Option<String>,
    /// A single model from HolmesGPT's MODEL / API_KEY / API_BASE / API_VERSION.
    #[serde(default)]
    pub env_model: Option<ModelEntry>,
    /// Key used when a request names no model; default: the env model, else the first key.
    #[serde(default)]
    pub default_model: Option<String>,
    /// The file these settings were read from (`--config` / `TRIAGE_CONFIG`), if any: bash
    /// commands may not name it.
    #[serde(skip)]
    pub config_file: Option<PathBuf>,
    /// HolmesGPT's config files read, and what they asked for that triage does not have.
    #[serde(skip)]
    pub holmes: HolmesReport,
    /// `[models.*]` keys in the order the config file lists them (the map above is sorted).
    #[serde(skip)]
    pub model_order: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    pub host: String,
    pub port: u16,
    pub body_limit_bytes: usize,
    pub keepalive_interval_secs: f64,
    /// Accepted API keys (several allow rotation); HOLMES_API_KEY adds one.
    #[serde(default)]
    pub api_keys: Vec<String>,
    #[serde(default)]
    pub api_key: Option<String>,
    /// Serve without keys on a non-loopback address (HOLMES_UNSAFE_ALLOW_UNAUTHENTICATED).
    #[serde(default)]
    pub allow_unauthenticated: bool,
    #[serde(default)]
    pub tls_cert_file: Option<PathBuf>,
    #[serde(default)]
    pub tls_key_file: Option<PathBuf>,
    /// Opens an encrypted PKCS#8 `tls_key_file` (HOLMES_SSL_KEYFILE_PASSWORD).
    #[serde(default)]
    pub tls_key_password: Option<String>,
    /// CA certificates (PEM) client certificates must be issued by; set, every client must
    /// present one (HOLMES_SSL_CA_CERTS, as HolmesGPT's CERT_REQUIRED).
    #[serde(default)]
    pub tls_client_ca_file: Option<PathBuf>,
    /// Browser origins allowed by CORS; empty disables CORS. `*` allows any origin.
    #[serde(default)]
    pub cors_allowed_origins: Vec<String>,
    /// Host names a server without API keys answers besides localhost and IP addresses
    /// (DNS-rebinding guard); `*` allows any.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Requests served at once, when an operator wants a count cap; beyond it 503 with
    /// Retry-After. Absent: no count cap, only resource-based shedding.
    #[serde(default)]
    pub max_concurrent_requests: Option<usize>,
    /// Resident memory beyond which new requests get 503; absent: 80 % of the cgroup limit,
    /// else half the machine's memory.
    #[serde(default)]
    pub memory_budget_bytes: Option<u64>,
    /// File descriptors kept free; new requests get 503 when fewer remain.
    #[serde(default)]
    pub descriptor_reserve: Option<usize>,
    /// Whole-request deadline; a stream then ends with an `error` event.
    pub request_deadline_secs: f64,
    /// Time a client has to send its request headers (slow-loris guard).
    pub header_read_timeout_secs: f64,
    /// Time a client has to send its whole request body (408 beyond it).
    pub body_read_timeout_secs: f64,
    /// A connection whose peer accepts no response bytes for this long is closed.
    pub write_timeout_secs: f64,
    /// On SIGTERM, how long running requests may finish before open streams are ended.
    pub shutdown_grace_secs: f64,
    /// Request headers never passed to tools (HOLMES_PASSTHROUGH_BLOCKED_HEADERS).
    pub passthrough_blocked_headers: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmSettings {
    pub request_timeout_secs: f64,
    pub connect_timeout_secs: f64,
    pub first_byte_timeout_secs: f64,
    pub idle_timeout_secs: f64,
    pub retry_max_elapsed_secs: f64,
    pub retry_max_attempts: u32,
    pub retry_base_delay_ms: u64,
    pub retry_max_delay_ms: u64,
    /// LLM calls in flight per model, when an operator wants a cap; requests beyond it get 503
    /// (HolmesGPT: LLM_MAX_CONCURRENT_CALLS_PER_MODEL). Absent: no cap.
    #[serde(default)]
    pub max_concurrent_calls_per_model: Option<usize>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub max_context_size: Option<u32>,
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSettings {
    pub max_steps: u32,
    /// A tool result may take at most this share of the context window…
    pub tool_budget_pct: f64,
    /// …and at most this many tokens; larger results are cut with `[TRUNCATED]`.
    pub tool_budget_tokens: u32,
    /// Refuse a tool call identical to one already run in the same request.
    pub duplicate_call_guard: bool,
    /// Tool calls of one LLM answer that run; the rest get an error result naming the cap.
    pub max_tool_calls_per_answer: usize,
    /// Images in one request's `images`.
    pub max_images_per_request: usize,
    /// Images in the whole conversation (the history the client sends plus `images`).
    pub max_images_total: usize,
    /// Decoded bytes of all `data:` images in the conversation.
    pub max_image_bytes_total: usize,
    /// Bytes the definitions of all offered tools (built-in, YAML, MCP) may take in one LLM
    /// request; beyond it MCP tools, then YAML tools are left out.
    pub max_tool_definitions_bytes: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactionSettings {
    pub enabled: bool,
    /// Compact when tokens + reserved output exceed this share of the context window.
    pub threshold_pct: u32,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecuritySettings {
    /// Values replaced by `<secret-hidden>` in tool output and errors.
    pub secrets: Vec<String>,
    /// Environment variables whose values are secrets (masked the same way).
    pub secret_env_vars: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalSettings {
    /// HMAC key for pending-approval tokens; set it so every replica can verify a resume.
    pub signing_key: Option<String>,
    /// How long a pending approval may be resumed.
    pub token_ttl_secs: u64,
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        ApprovalSettings {
            signing_key: None,
            token_ttl_secs: 3600,
        }
    }
}

/// Server-side conversations (issue 14): where they are stored and their limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConversationSettings {
    /// `sqlite://PATH` or `postgres://…`; unset: the SQLite file `triage.db` in `data_dir`.
    pub database_url: Option<String>,
    /// Unset: `$XDG_DATA_HOME/triage`, else `$HOME/.local/share/triage`, else `./triage-data`.
    pub data_dir: Option<PathBuf>,
    /// Finished conversations not updated for this many days are deleted; 0 keeps them.
    pub retention_days: u32,
    /// Conversations running at once; starting one more is refused (429).
    pub max_running: usize,
    /// Events one conversation may hold; appending beyond it fails with a clear error.
    pub max_events_per_conversation: u64,
    /// How long the replica running a conversation holds it without renewing (it renews
    /// every third of this); a run whose replica stopped is taken over after it.
    pub lease_secs: f64,
    /// A conversation created without a title is titled by the LLM after its first answer
    /// (one more LLM call, in the background).
    pub auto_title: bool,
    /// 32 bytes, base64: the key conversation secrets are sealed with at rest. Unset: with
    /// SQLite a key generated on first start, kept in `secret.key` beside the database; with
    /// PostgreSQL required (every replica must seal with one key).
    pub secret_key: Option<String>,
    /// Keys sealed with before (base64): what they sealed is still read, and sealed again with
    /// `secret_key` at start-up.
    pub previous_secret_keys: Vec<String>,
}

impl Default for ConversationSettings {
    fn default() -> Self {
        ConversationSettings {
            database_url: None,
            data_dir: None,
            retention_days: 0,
            max_running: 2000,
            max_events_per_conversation: 100_000,
            lease_secs: 10.0,
            auto_title: true,
            secret_key: None,
            previous_secret_keys: Vec::new(),
        }
    }
}

impl ConversationSettings {
    /// The data directory: the setting, else the XDG base directory convention (the same
    /// place for every run of one user, so `cargo run -- serve` finds its conversations
    /// again), else a directory beside the working directory when there is no home.
    pub fn data_dir(&self) -> PathBuf {
        let non_empty = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty());
        self.data_dir
            .clone()
            .or_else(|| non_empty("XDG_DATA_HOME").map(|d| PathBuf::from(d).join("triage")))
            .or_else(|| non_empty("HOME").map(|h| PathBuf::from(h).join(".local/share/triage")))
            .unwrap_or_else(|| PathBuf::from("triage-data"))
    }

    /// The database to open: `database_url`, else `sqlite://<data_dir>/triage.db`.
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) if !url.trim().is_empty() => url.trim().to_owned(),
            _ => format!("sqlite://{}", self.data_dir().join("triage.db").display()),
        }
    }

    /// The password in `database_url`, if any: a secret to mask.
    pub fn database_password(&self) -> Option<String> {
        let url = url::Url::parse(self.database_url.as_deref()?).ok()?;
        let password = url.password()?;
        // As the database receives it: `%XX` escapes decoded.
        let decoded = percent_encoding::percent_decode_str(password).decode_utf8_lossy();
        Some(decoded.into_owned()).filter(|p| !p.is_empty())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptSettings {
    #[serde(default)]
    pub enabled: Option<String>,
    pub cluster_name: String,
    pub system_prompt_additions: String,
    #[serde(default)]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsetSettings {
    pub bash: crate::tools::bash::BashConfig,
    pub kubernetes: crate::tools::kubernetes::KubernetesConfig,
    pub prometheus: crate::tools::prometheus::PrometheusConfig,
    pub internet: crate::tools::internet::InternetConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompatSettings {
    pub model_name_as_string: bool,
}

/// One model, in HolmesGPT's model-list shape. Fields litellm would accept but we do not model
/// are kept in `extra`; the OpenAI request parameters among them are passed to the provider.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ModelEntry {
    pub model: String,
    #[serde(default)]
    pub api_key: Option<String>,
    #[serde(default, alias = "base_url")]
    pub api_base: Option<String>,
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub custom_args: Option<CustomArgs>,
    #[serde(default)]
    pub vision: Option<bool>,
    #[serde(default)]
    pub input_cost_per_token: Option<f64>,
    #[serde(default)]
    pub output_cost_per_token: Option<f64>,
    /// Model keys tried in order when this model's provider is out (5xx, 529, no connection,
    /// timeout before any output).
    #[serde(default)]
    pub fallbacks: Vec<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CustomArgs {
    #[serde(default)]
    pub max_context_size: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid configuration: {0}")]
    Figment(Box<figment::Error>),
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl From<figment::Error> for ConfigError {
    fn from(e: figment::Error) -> Self {
        ConfigError::Figment(Box::new(without_values(e)))
    }
}

/// `e` with the text of any value it quotes left out: an API key written where a table was
/// expected (`headers = "Bearer sk-…"`) must not end up in the logs. The key's path stays.
pub fn without_values(e: figment::Error) -> figment::Error {
    use figment::error::{Actual, Kind};
    let hide = |actual: Actual| match actual {
        Actual::Str(_) | Actual::Char(_) => Actual::Other("a string".into()),
        Actual::Other(_) => Actual::Other("a value".into()),
        Actual::Bytes(_) => Actual::Other("bytes".into()),
        other => other,
    };
    let mut errors: Vec<figment::Error> = e
        .into_iter()
        .map(|mut one| {
            one.kind = match one.kind {
                Kind::InvalidType(actual, expected) => Kind::InvalidType(hide(actual), expected),
                Kind::InvalidValue(actual, expected) => Kind::InvalidValue(hide(actual), expected),
                Kind::UnknownVariant(_, expected) => Kind::UnknownVariant("…".into(), expected),
                Kind::Unsupported(actual) => Kind::Unsupported(hide(actual)),
                other => other,
            };
            one
        })
        .collect();
    let mut chained = match errors.pop() {
        Some(last) => last,
        None => figment::Error::from(String::from("invalid configuration")),
    };
    while let Some(next) = errors.pop() {
        chained = chained.chain(next);
    }
    chained
}

impl Settings {
    /// The extra CA certificates of `ca_certificate` for outbound clients (checked when the
    /// settings load, so an error here names the key again).
    pub fn outbound_roots(&self) -> Result<crate::runtime::trust::ExtraRoots, ConfigError> {
        match self.ca_certificate.as_deref().map(str::trim) {
            None | Some("") => Ok(crate::runtime::trust::ExtraRoots::default()),
            Some(text) => crate::runtime::trust::ExtraRoots::from_base64_pem(text).map_err(|why| {
                ConfigError::Invalid(format!("`ca_certificate` (CERTIFICATE) {why}"))
            }),
        }
    }
}

impl ServerSettings {
    /// Every accepted API key: the list plus HOLMES_API_KEY.
    pub fn all_api_keys(&self) -> Vec<String> {
        self.api_keys
            .iter()
            .chain(&self.api_key)
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty())
            .collect()
    }
}
