//! Settings, layered: `config/default.toml` (compiled in) ← a file from `--config` or
//! `TRIAGE_CONFIG` ← HolmesGPT's environment variables ← `TRIAGE_*` variables (`__` nests).
//! HolmesGPT's variables are honoured so a deployment can switch binaries unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

const DEFAULT_TOML: &str = include_str!("../config/default.toml");

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
    #[serde(default)]
    pub models: BTreeMap<String, ModelEntry>,
    /// HolmesGPT's model list YAML (MODEL_LIST_FILE_LOCATION).
    #[serde(default)]
    pub model_list_file: Option<PathBuf>,
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
    /// Browser origins allowed by CORS; empty disables CORS. `*` allows any origin.
    #[serde(default)]
    pub cors_allowed_origins: Vec<String>,
    /// Host names a server without API keys answers besides localhost and IP addresses
    /// (DNS-rebinding guard); `*` allows any.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Requests served at once; beyond it 503 with Retry-After.
    pub max_concurrent_requests: usize,
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
    /// LLM calls in flight per model; requests beyond it get 503 (HolmesGPT:
    /// LLM_MAX_CONCURRENT_CALLS_PER_MODEL).
    pub max_concurrent_calls_per_model: usize,
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
        ConfigError::Figment(Box::new(e))
    }
}

/// HolmesGPT environment variable → our key.
pub const HOLMES_ENV: &[(&str, &str)] = &[
    ("HOLMES_HOST", "server.host"),
    ("HOLMES_PORT", "server.port"),
    ("HOLMES_API_KEY", "server.api_key"),
    (
        "HOLMES_UNSAFE_ALLOW_UNAUTHENTICATED",
        "server.allow_unauthenticated",
    ),
    ("HOLMES_SSL_CERTFILE", "server.tls_cert_file"),
    ("HOLMES_SSL_KEYFILE", "server.tls_key_file"),
    (
        "HOLMES_PASSTHROUGH_BLOCKED_HEADERS",
        "server.passthrough_blocked_headers",
    ),
    ("MAX_STEPS", "agent.max_steps"),
    (
        "TOOL_MAX_ALLOCATED_CONTEXT_WINDOW_PCT",
        "agent.tool_budget_pct",
    ),
    (
        "TOOL_MAX_ALLOCATED_CONTEXT_WINDOW_TOKENS",
        "agent.tool_budget_tokens",
    ),
    ("TOOL_CALL_SAFEGUARDS_ENABLED", "agent.duplicate_call_guard"),
    ("HOLMES_APPROVAL_SIGNING_KEY", "approvals.signing_key"),
    (
        "ENABLE_CONVERSATION_HISTORY_COMPACTION",
        "compaction.enabled",
    ),
    (
        "CONTEXT_WINDOW_COMPACTION_THRESHOLD_PCT",
        "compaction.threshold_pct",
    ),
    ("ENABLED_PROMPTS", "prompts.enabled"),
    ("CLUSTER_NAME", "prompts.cluster_name"),
    ("OVERRIDE_MAX_CONTENT_SIZE", "llm.max_context_size"),
    ("OVERRIDE_MAX_OUTPUT_TOKEN", "llm.max_output_tokens"),
    ("TEMPERATURE", "llm.temperature"),
    ("LLM_REQUEST_TIMEOUT", "llm.request_timeout_secs"),
    (
        "LLM_MAX_CONCURRENT_CALLS_PER_MODEL",
        "llm.max_concurrent_calls_per_model",
    ),
    ("MODEL_LIST_FILE_LOCATION", "model_list_file"),
    ("MODEL", "env_model.model"),
    ("API_KEY", "env_model.api_key"),
    ("API_BASE", "env_model.api_base"),
    ("API_VERSION", "env_model.api_version"),
];

/// Names the environment variables that set the key an error is about, since figment reports
/// the key (`SERVER.PORT`) rather than the variable a HolmesGPT deployment set.
fn env_hint(message: &str) -> String {
    let lower = message.to_ascii_lowercase();
    let vars: Vec<String> = HOLMES_ENV
        .iter()
        .filter(|(var, key)| {
            lower.contains(&format!("\"{key}\"")) && std::env::var_os(var).is_some()
        })
        .map(|(var, _)| (*var).to_owned())
        .chain(
            std::env::vars_os()
                .filter_map(|(k, _)| k.into_string().ok())
                .filter(|k| {
                    k.strip_prefix("TRIAGE_").is_some_and(|rest| {
                        lower.contains(&format!(
                            "\"{}\"",
                            rest.to_ascii_lowercase().replace("__", ".")
                        ))
                    })
                }),
        )
        .collect();
    if vars.is_empty() {
        String::new()
    } else {
        format!(" (set by {})", vars.join(", "))
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

impl Settings {
    /// Loads settings from the layers above. `file` is `--config`; `TRIAGE_CONFIG` is its
    /// fallback.
    pub fn load(file: Option<&Path>) -> Result<Settings, ConfigError> {
        let mut figment = Figment::from(Toml::string(DEFAULT_TOML));
        let file = file
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("TRIAGE_CONFIG").map(PathBuf::from));
        let mut model_order = Vec::new();
        if let Some(path) = &file {
            if !path.is_file() {
                return Err(ConfigError::Invalid(format!(
                    "config file {} does not exist",
                    path.display()
                )));
            }
            if let Ok(text) = std::fs::read_to_string(path) {
                model_order = models_in_file_order(&[&text]);
            }
            figment = figment.merge(Toml::file(path));
        }
        check_env_model_vars()?;
        let holmes = Env::raw()
            // An empty variable means "unset" in HolmesGPT's deployments (Helm renders them).
            .filter_map(|key| {
                HOLMES_ENV
                    .iter()
                    .find(|(var, _)| key.as_str().eq_ignore_ascii_case(var))
                    .filter(|(var, _)| std::env::var(var).is_ok_and(|v| !v.trim().is_empty()))
                    .map(|(_, path)| (*path).into())
            })
            .lowercase(false);
        figment = figment
            .merge(holmes)
            // TRIAGE_CONFIG and TRIAGE_API_KEY (the CLI's `--api-key`) are not settings.
            .merge(Env::prefixed("TRIAGE_").ignore(CLI_ONLY_VARS).split("__"));
        let mut settings: Settings = figment.extract().map_err(|e| {
            let message = e.to_string();
            ConfigError::Invalid(format!("{message}{}", env_hint(&message)))
        })?;
        settings.model_order = model_order;
        settings.validate()?;
        settings.config_file = file;
        Ok(settings)
    }

    /// Parses settings from TOML text layered on the defaults (tests and tools).
    pub fn from_toml(text: &str) -> Result<Settings, ConfigError> {
        Settings::from_toml_layers(&[text])
    }

    /// Like `from_toml`, with several layers, later ones winning key by key.
    pub fn from_toml_layers(layers: &[&str]) -> Result<Settings, ConfigError> {
        let figment = layers
            .iter()
            .fold(Figment::from(Toml::string(DEFAULT_TOML)), |f, layer| {
                f.merge(Toml::string(layer))
            });
        let mut settings: Settings = figment.extract()?;
        settings.model_order = models_in_file_order(layers);
        settings.validate()?;
        Ok(settings)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("llm.request_timeout_secs", self.llm.request_timeout_secs),
            ("llm.connect_timeout_secs", self.llm.connect_timeout_secs),
            (
                "llm.first_byte_timeout_secs",
                self.llm.first_byte_timeout_secs,
            ),
            ("llm.idle_timeout_secs", self.llm.idle_timeout_secs),
        ];
        for (key, value) in positive {
            if !(value.is_finite() && value > 0.0) {
                return Err(ConfigError::Invalid(format!(
                    "`{key}` must be a positive number of seconds, got {value}"
                )));
            }
        }
        for (key, value) in [
            (
                "server.request_deadline_secs",
                self.server.request_deadline_secs,
            ),
            (
                "server.header_read_timeout_secs",
                self.server.header_read_timeout_secs,
            ),
            (
                "server.body_read_timeout_secs",
                self.server.body_read_timeout_secs,
            ),
            ("server.write_timeout_secs", self.server.write_timeout_secs),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(ConfigError::Invalid(format!(
                    "`{key}` must be a positive number of seconds, got {value}"
                )));
            }
        }
        if !(self.server.shutdown_grace_secs.is_finite() && self.server.shutdown_grace_secs >= 0.0)
        {
            return Err(ConfigError::Invalid(
                "`server.shutdown_grace_secs` must be 0 or positive".into(),
            ));
        }
        if let Some(bad) = self
            .server
            .allowed_hosts
            .iter()
            .find(|h| h.trim().is_empty() || h.contains('/'))
        {
            return Err(ConfigError::Invalid(format!(
                "`server.allowed_hosts` lists host names (`name` or `name:port`, no scheme or path), got '{bad}'"
            )));
        }
        if self.llm.max_concurrent_calls_per_model == 0 {
            return Err(ConfigError::Invalid(
                "`llm.max_concurrent_calls_per_model` must be at least 1".into(),
            ));
        }
        if self.server.max_concurrent_requests == 0 {
            return Err(ConfigError::Invalid(
                "`server.max_concurrent_requests` must be at least 1".into(),
            ));
        }
        if self.server.tls_cert_file.is_some() != self.server.tls_key_file.is_some() {
            return Err(ConfigError::Invalid(
                "TLS needs both `server.tls_cert_file` and `server.tls_key_file` (HOLMES_SSL_CERTFILE / HOLMES_SSL_KEYFILE)".into(),
            ));
        }
        let keepalive = self.server.keepalive_interval_secs;
        if !(keepalive.is_finite() && keepalive >= 0.0) {
            return Err(ConfigError::Invalid(format!(
                "`server.keepalive_interval_secs` must be 0 (off) or positive, got {keepalive}"
            )));
        }
        let pct = self.agent.tool_budget_pct;
        if !(pct.is_finite() && pct > 0.0 && pct <= 100.0) {
            return Err(ConfigError::Invalid(format!(
                "`agent.tool_budget_pct` (TOOL_MAX_ALLOCATED_CONTEXT_WINDOW_PCT) must be in (0, 100], got {pct}"
            )));
        }
        if !(1..=100).contains(&self.compaction.threshold_pct) {
            return Err(ConfigError::Invalid(format!(
                "`compaction.threshold_pct` (CONTEXT_WINDOW_COMPACTION_THRESHOLD_PCT) must be 1..=100, got {}",
                self.compaction.threshold_pct
            )));
        }
        for (key, value) in [
            (
                "agent.max_tool_calls_per_answer",
                self.agent.max_tool_calls_per_answer,
            ),
            (
                "agent.max_images_per_request",
                self.agent.max_images_per_request,
            ),
            ("agent.max_images_total", self.agent.max_images_total),
            (
                "agent.max_image_bytes_total",
                self.agent.max_image_bytes_total,
            ),
            (
                "approvals.token_ttl_secs",
                self.approvals.token_ttl_secs as usize,
            ),
        ] {
            if value == 0 {
                return Err(ConfigError::Invalid(format!("`{key}` must be at least 1")));
            }
        }
        if self.agent.max_steps == 0 {
            return Err(ConfigError::Invalid(
                "`agent.max_steps` (MAX_STEPS) must be at least 1".into(),
            ));
        }
        if !(self.llm.retry_max_elapsed_secs.is_finite() && self.llm.retry_max_elapsed_secs >= 0.0)
        {
            return Err(ConfigError::Invalid(
                "`llm.retry_max_elapsed_secs` must be 0 or positive".into(),
            ));
        }
        for (key, entry) in &self.models {
            if entry.model.trim().is_empty() {
                return Err(ConfigError::Invalid(format!(
                    "`models.{key}.model` must name a model"
                )));
            }
            crate::llm::entry_keys::check_extra_keys(&format!("[models.{key}]"), &entry.extra)
                .map_err(ConfigError::Invalid)?;
        }
        Ok(())
    }
}

/// `TRIAGE_*` variables the command line reads; the settings layer leaves them alone.
pub const CLI_ONLY_VARS: &[&str] = &["CONFIG", "API_KEY"];

/// The `[models.*]` keys of TOML layers in the order they are written, first mention winning.
/// figment's maps are sorted, so the order is read from the text itself.
fn models_in_file_order(layers: &[&str]) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for layer in layers {
        let Ok(table) = layer.parse::<toml::Table>() else {
            continue;
        };
        if let Some(models) = table.get("models").and_then(toml::Value::as_table) {
            for key in models.keys() {
                if !order.contains(key) {
                    order.push(key.clone());
                }
            }
        }
    }
    order
}

/// HolmesGPT's API_BASE / API_KEY / API_VERSION describe the model MODEL names; without MODEL
/// they would describe nothing.
fn check_env_model_vars() -> Result<(), ConfigError> {
    let set = |var: &str| std::env::var(var).is_ok_and(|v| !v.trim().is_empty());
    if set("MODEL") {
        return Ok(());
    }
    let orphans: Vec<&str> = ["API_BASE", "API_KEY", "API_VERSION"]
        .into_iter()
        .filter(|v| set(v))
        .collect();
    if orphans.is_empty() {
        return Ok(());
    }
    Err(ConfigError::Invalid(format!(
        "{} set but MODEL is not: set MODEL to the model to call with its provider prefix, \
         e.g. MODEL=openai/<name as the server lists it> for an OpenAI-compatible server",
        orphans.join(", ") + if orphans.len() == 1 { " is" } else { " are" }
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse() {
        let s = Settings::from_toml("").unwrap();
        assert_eq!(s.server.port, 5050);
        assert_eq!(s.agent.max_steps, 40);
        assert!(s.models.is_empty());
    }

    #[test]
    fn unknown_key_is_named() {
        let err = Settings::from_toml("[server]\nprot = 1\n").unwrap_err();
        assert!(err.to_string().contains("prot"), "{err}");
    }

    #[test]
    fn allowed_hosts_are_names() {
        let err = Settings::from_toml("[server]\nallowed_hosts = [\"https://triage.example\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("server.allowed_hosts") && err.contains("https://triage.example"),
            "{err}"
        );
        assert!(
            Settings::from_toml("[server]\nallowed_hosts = [\"triage.example:8080\"]\n").is_ok()
        );
    }

    #[test]
    fn model_order_is_the_file_order() {
        let s = Settings::from_toml_layers(&[
            "[models.zeta]\nmodel = \"openai/z\"\n[models.alpha]\nmodel = \"openai/a\"\n",
            "[models.beta]\nmodel = \"openai/b\"\n[models.zeta]\ntemperature = 0.1\n",
        ])
        .unwrap();
        assert_eq!(s.model_order, ["zeta", "alpha", "beta"]);
    }

    #[test]
    fn model_entry_typos_are_refused() {
        let err = Settings::from_toml("[models.x]\nmodel = \"openai/m\"\napi_bse = \"http://h\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`api_bse`") && err.contains("[models.x]"),
            "{err}"
        );
    }

    #[test]
    fn model_entries_keep_extra_fields() {
        let s = Settings::from_toml(
            "[models.a]\nmodel = \"openai/x\"\nbase_url = \"http://h/v1\"\ntop_p = 0.5\n",
        )
        .unwrap();
        let a = &s.models["a"];
        assert_eq!(a.api_base.as_deref(), Some("http://h/v1"));
        assert_eq!(a.extra["top_p"], serde_json::json!(0.5));
    }
}
