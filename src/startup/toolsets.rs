//! The toolsets at start-up: every built-in, YAML and skills toolset loaded, the names checked,
//! and the files of triage's own that bash commands and the sandbox keep away from tools.

use std::time::Duration;

use super::StartupError;
use crate::config::{ConfigError, Settings};
use crate::sandbox::Sandbox;
use crate::tools::{self, ToolRegistry, ToolsetStatus};

/// Every file triage reads configuration or credentials from: its config file, the model list,
/// the TLS key and certificate, HolmesGPT's custom toolset files (`CUSTOM_TOOLSET_LOCATION`,
/// which deployments shared with HolmesGPT may set), a credentials file a provider variable
/// points at, and the conversation store's data directory, database files and key (other
/// conversations' secrets). Bash commands may not name them and the sandbox does not let tools
/// read them.
pub(super) fn triage_files(settings: &Settings) -> Vec<std::path::PathBuf> {
    let custom_toolsets = std::env::var("CUSTOM_TOOLSET_LOCATION").unwrap_or_default();
    let credential_files = super::credentials::CREDENTIAL_FILE_ENV_VARS
        .iter()
        .filter_map(std::env::var_os)
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_file());
    [
        &settings.config_file,
        &settings.model_list_file,
        &settings.server.tls_key_file,
        &settings.server.tls_cert_file,
    ]
    .into_iter()
    .flatten()
    .cloned()
    .chain(
        custom_toolsets
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(std::path::PathBuf::from),
    )
    .chain(credential_files)
    .chain(settings.holmes.files.iter().cloned())
    .chain(super::store_files::protected(&settings.conversations))
    .map(|file| std::path::absolute(&file).unwrap_or(file))
    .collect()
}

/// What the sandbox keeps every tool from reading: triage's files and the absolute paths
/// declared sensitive for bash (files holding this server's credentials). Not the kubeconfig:
/// kubectl needs it.
pub(super) fn own_files(settings: &Settings) -> Vec<std::path::PathBuf> {
    let mut files = triage_files(settings);
    files.extend(
        settings
            .toolsets
            .bash
            .sensitive_paths
            .iter()
            .filter(|p| p.starts_with('/'))
            .map(std::path::PathBuf::from),
    );
    files
}

/// The bash settings, with triage's files and the kubeconfig the kubernetes toolset uses among
/// the paths bash commands may not name.
pub(super) fn bash_settings(settings: &Settings) -> tools::bash::BashConfig {
    let cfg = &settings.toolsets;
    let mut bash = cfg.bash.clone();
    let kubeconfig = cfg.kubernetes.kubeconfig.clone();
    let kubeconfig = kubeconfig.map(|file| std::path::absolute(&file).unwrap_or(file));
    for path in triage_files(settings).into_iter().chain(kubeconfig) {
        bash.sensitive_paths.push(path.display().to_string());
    }
    bash
}

pub(super) async fn load_tools(
    settings: &Settings,
    sandbox: &Sandbox,
    roots: &crate::runtime::trust::ExtraRoots,
) -> Result<ToolRegistry, StartupError> {
    let cfg = &settings.toolsets;
    let http = roots
        .client_builder()
        .connect_timeout(Duration::from_secs(10))
        .build()?;
    let (kubernetes, prometheus) = tokio::join!(
        tools::kubernetes::toolset(&cfg.kubernetes, sandbox),
        tools::prometheus::toolset(&cfg.prometheus, &http),
    );
    let mut toolsets = vec![
        tools::core_toolset(),
        tools::bash::toolset(&bash_settings(settings), sandbox),
        kubernetes,
        prometheus,
        tools::internet::toolset(&cfg.internet, roots, sandbox.walled_ports()),
    ];
    toolsets.extend(tools::skills::toolset(&settings.skills));
    let lookup = |var: &str| std::env::var(var).ok();
    let shared = tools::yaml::Shared {
        sandbox,
        memory_limit_mb: cfg.bash.memory_limit_mb,
        lookup: &lookup,
        roots,
    };
    let yaml = tools::yaml::toolsets(&settings.yaml_toolsets, &shared)
        .await
        .map_err(|e| ConfigError::Invalid(format!("yaml_toolsets: {e}")))?;
    toolsets.extend(yaml);
    // Asked for in HolmesGPT's files, not available here: reported like any other toolset.
    toolsets.extend(
        settings
            .holmes
            .unavailable
            .iter()
            .map(|(name, reason)| tools::Toolset::unavailable(name, reason.clone())),
    );
    check_unique_names(&toolsets)?;
    for t in &toolsets {
        match &t.status {
            ToolsetStatus::Enabled => {
                tracing::info!(toolset = %t.name, tools = t.tools.len(), "toolset enabled")
            }
            ToolsetStatus::Disabled => {
                tracing::info!(toolset = %t.name, "toolset disabled in config")
            }
            ToolsetStatus::Unavailable(reason) => {
                tracing::warn!(toolset = %t.name, %reason, "toolset unavailable")
            }
        }
    }
    Ok(ToolRegistry::new(toolsets)
        .with_max_definitions_bytes(settings.agent.max_tool_definitions_bytes))
}

/// Two toolsets with one name, or two enabled tools with one name, would make calls
/// ambiguous: refused at start-up, naming them.
fn check_unique_names(toolsets: &[tools::Toolset]) -> Result<(), StartupError> {
    let mut names = std::collections::BTreeSet::new();
    let mut tool_names = std::collections::BTreeMap::new();
    for t in toolsets {
        if !names.insert(t.name.as_str()) {
            return Err(ConfigError::Invalid(format!(
                "two toolsets are named `{}`: rename the custom one",
                t.name
            ))
            .into());
        }
        if t.status != ToolsetStatus::Enabled {
            continue;
        }
        for tool in &t.tools {
            if let Some(other) = tool_names.insert(tool.name().to_owned(), t.name.clone()) {
                return Err(ConfigError::Invalid(format!(
                    "toolsets `{other}` and `{}` both have a tool named `{}`",
                    t.name,
                    tool.name()
                ))
                .into());
            }
        }
    }
    Ok(())
}
