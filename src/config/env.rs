//! HolmesGPT's environment variables: the key each one sets, naming them in errors about
//! those keys, and the MODEL / API_* pairing.

use super::ConfigError;

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
    ("HOLMES_SSL_KEYFILE_PASSWORD", "server.tls_key_password"),
    ("HOLMES_SSL_CA_CERTS", "server.tls_client_ca_file"),
    ("CERTIFICATE", "ca_certificate"),
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
    ("ENABLE_ADMIN_API", "admin.enabled"),
    ("SLACK_TOKEN", "checks.slack_token"),
    ("SLACK_CHANNEL", "checks.slack_channel"),
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
pub(super) fn env_hint(message: &str) -> String {
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

/// `TRIAGE_*` variables the command line reads; the settings layer leaves them alone.
pub const CLI_ONLY_VARS: &[&str] = &["CONFIG", "API_KEY"];

/// HolmesGPT's API_BASE / API_KEY / API_VERSION describe the model MODEL names; without MODEL
/// they would describe nothing.
pub(super) fn check_env_model_vars() -> Result<(), ConfigError> {
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
