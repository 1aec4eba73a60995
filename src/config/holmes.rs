//! HolmesGPT's config files, read as settings layers: `config.yaml` (in
//! `HOLMES_CONFIGPATH_DIR`, else `~/.holmes`), the files its `custom_toolsets` lists, and the
//! file `CUSTOM_TOOLSET_LOCATION` names (where the Helm chart writes `toolsets`,
//! `mcp_servers` and `mcpAddons`). Each becomes a figment layer named after its file, below
//! triage's own config file; what asks for something triage does not have is reported
//! ([`HolmesReport`]), never dropped.

use std::path::{Path, PathBuf};

use figment::value::{Dict, Map};
use figment::{Metadata, Profile, Provider};
use serde_json::{Value, json};

use super::ConfigError;
use super::holmes_report::HolmesReport;
use super::holmes_toolsets::{ToolsetMapping, map_toolsets};

/// Where HolmesGPT's Helm chart mounts its files and where HolmesGPT looks for them when the
/// variables naming them are unset: `config/model_list.yaml`, `config/custom_toolset.yaml`
/// and `skills/`.
pub const HOLMES_ROOT: &str = "/etc/holmes";

/// The files to read.
#[derive(Debug, Clone, Default)]
pub struct HolmesFiles {
    /// HolmesGPT's `config.yaml`, when it exists.
    pub config: Option<PathBuf>,
    /// `CUSTOM_TOOLSET_LOCATION` (comma-separated, as HolmesGPT's deployments may set it).
    pub toolset_files: Vec<PathBuf>,
    /// The model list at HolmesGPT's default path, read when `MODEL_LIST_FILE_LOCATION` is
    /// unset and the file exists.
    pub default_model_list: Option<PathBuf>,
    /// Skill directories: `skills/` under the root when it exists, then `CUSTOM_SKILL_PATHS`
    /// (comma-separated, as the chart renders it); added to `config.yaml`'s
    /// `custom_skill_paths`.
    pub skill_dirs: Vec<PathBuf>,
}

impl HolmesFiles {
    /// Where HolmesGPT looks, from the process environment, under [`HOLMES_ROOT`].
    pub fn from_env() -> HolmesFiles {
        let lookup = |var: &str| std::env::var(var).ok();
        HolmesFiles::find(&lookup, Path::new(HOLMES_ROOT))
    }

    /// Where HolmesGPT looks: `$HOLMES_CONFIGPATH_DIR/config.yaml`, else
    /// `$HOME/.holmes/config.yaml` (either only when the file exists);
    /// `CUSTOM_TOOLSET_LOCATION`, else `<root>/config/custom_toolset.yaml` when it exists;
    /// `<root>/config/model_list.yaml` when it exists and `MODEL_LIST_FILE_LOCATION` is
    /// unset; `<root>/skills` when it exists and `CUSTOM_SKILL_PATHS`. `root` is
    /// [`HOLMES_ROOT`] but for tests, which cannot write there: a parameter rather than a
    /// variable, so no deployment can move it by accident.
    pub fn find(lookup: &dyn Fn(&str) -> Option<String>, root: &Path) -> HolmesFiles {
        // An empty variable is unset (Helm renders unset values empty).
        let set = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());
        let list = |var: &str| -> Vec<PathBuf> {
            set(var)
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
                .collect()
        };
        let dir = set("HOLMES_CONFIGPATH_DIR")
            .map(PathBuf::from)
            .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".holmes")));
        let config = dir.map(|d| d.join("config.yaml")).filter(|f| f.is_file());
        let mut toolset_files = list("CUSTOM_TOOLSET_LOCATION");
        let chart_toolsets = root.join("config/custom_toolset.yaml");
        if set("CUSTOM_TOOLSET_LOCATION").is_none() && chart_toolsets.is_file() {
            toolset_files.push(chart_toolsets);
        }
        let default_model_list = Some(root.join("config/model_list.yaml"))
            .filter(|f| set("MODEL_LIST_FILE_LOCATION").is_none() && f.is_file());
        let chart_skills = root.join("skills");
        let mut skill_dirs: Vec<PathBuf> = chart_skills
            .is_dir()
            .then_some(chart_skills)
            .into_iter()
            .collect();
        for dir in list("CUSTOM_SKILL_PATHS") {
            if !skill_dirs.contains(&dir) {
                skill_dirs.push(dir);
            }
        }
        HolmesFiles {
            config,
            toolset_files,
            default_model_list,
            skill_dirs,
        }
    }
}

/// One file's settings, in triage's shape, as a figment layer named after the file (figment's
/// errors then say which file a bad value came from).
pub struct HolmesLayer {
    name: String,
    value: Value,
}

impl Provider for HolmesLayer {
    fn metadata(&self) -> Metadata {
        Metadata::named(self.name.clone())
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        figment::providers::Serialized::defaults(&self.value).data()
    }
}

/// Keys of HolmesGPT's config that only its command line uses (alert sources and
/// destinations, runbooks, Robusta's platform): accepted, and named in one info line.
const CLI_ONLY_PREFIXES: &[&str] = &[
    "alertmanager_",
    "jira_",
    "github_",
    "slack_",
    "pagerduty_",
    "opsgenie_",
];
const CLI_ONLY_KEYS: &[&str] = &[
    "custom_runbooks",
    "custom_runbook_catalogs",
    "custom_toolsets_from_cli",
    "should_try_robusta_ai",
    "fast_model",
    "account_id",
    "session_token",
];

/// The model keys triage reads from `config.yaml`, as HolmesGPT's MODEL / API_* variables.
const MODEL_KEYS: &[&str] = &["model", "api_key", "api_base", "api_version"];

/// Reads the files into layers (in the order to merge them) and the report.
pub fn read(files: &HolmesFiles) -> Result<(Vec<HolmesLayer>, HolmesReport), ConfigError> {
    let mut layers = Vec::new();
    let mut report = HolmesReport::default();
    if let Some(config) = &files.config {
        let value = load_yaml(config)?;
        let mut listed = Vec::new();
        let layer = config_layer(&value, config, &mut report, &mut listed)?;
        layers.push(HolmesLayer {
            name: format!("HolmesGPT config {}", config.display()),
            value: layer,
        });
        report.files.push(config.clone());
        for file in listed {
            layers.push(toolset_file(&file, &mut report)?);
        }
    }
    for file in &files.toolset_files {
        layers.push(toolset_file(file, &mut report)?);
    }
    if let Some(file) = &files.default_model_list {
        layers.push(HolmesLayer {
            name: format!("HolmesGPT's default model list {}", file.display()),
            value: json!({ "model_list_file": file.display().to_string() }),
        });
    }
    if !files.skill_dirs.is_empty() {
        // After `custom_skill_paths`, which this layer would otherwise replace.
        let mut dirs: Vec<Value> = layers
            .iter()
            .filter_map(|l| l.value.pointer("/skills/paths").and_then(Value::as_array))
            .flatten()
            .cloned()
            .collect();
        for dir in &files.skill_dirs {
            let dir = Value::String(dir.display().to_string());
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        layers.push(HolmesLayer {
            name: "HolmesGPT's skill directories (/etc/holmes/skills, CUSTOM_SKILL_PATHS)".into(),
            value: json!({ "skills": { "paths": dirs } }),
        });
    }
    Ok((layers, report))
}

fn invalid(message: String) -> ConfigError {
    ConfigError::Invalid(message)
}

fn load_yaml(path: &Path) -> Result<Value, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        invalid(format!(
            "cannot read HolmesGPT file {}: {e}",
            path.display()
        ))
    })?;
    let value: Value = serde_norway::from_str(&text)
        .map_err(|e| invalid(format!("{} is not valid YAML: {e}", path.display())))?;
    match value {
        Value::Null => Ok(json!({})),
        Value::Object(_) => Ok(value),
        _ => Err(invalid(format!(
            "{} must be a YAML mapping of keys",
            path.display()
        ))),
    }
}

/// `config.yaml` in triage's shape; the `custom_toolsets` files it lists go to `listed`.
fn config_layer(
    value: &Value,
    file: &Path,
    report: &mut HolmesReport,
    listed: &mut Vec<PathBuf>,
) -> Result<Value, ConfigError> {
    let empty = serde_json::Map::new();
    let entries = value.as_object().unwrap_or(&empty);
    let mut layer = json!({});
    let mut mapping = ToolsetMapping::default();
    let mut cli_only = Vec::new();
    let base = file.parent().unwrap_or(Path::new("."));
    for (key, v) in entries {
        let key = key.as_str();
        match key {
            _ if MODEL_KEYS.contains(&key) => layer["env_model"][key] = v.clone(),
            "max_steps" => layer["agent"]["max_steps"] = v.clone(),
            "cluster_name" => layer["prompts"]["cluster_name"] = v.clone(),
            "toolsets" => map_toolsets(v, file, &mut mapping)?,
            "mcp_servers" => set_mcp_servers(&mut layer, v),
            "custom_toolsets" => listed.extend(
                paths(v, key, file)?
                    .into_iter()
                    .map(|p| if p.is_absolute() { p } else { base.join(p) }),
            ),
            "custom_skill_paths" => {
                let dirs = paths(v, key, file)?
                    .into_iter()
                    .map(|p| if p.is_absolute() { p } else { base.join(p) })
                    .map(|p| Value::String(p.display().to_string()))
                    .collect();
                layer["skills"]["paths"] = Value::Array(dirs);
            }
            "skill_repos" => {
                let repos = as_list(v)
                    .iter()
                    .map(|r| match r {
                        Value::String(s) => Value::String(s.clone()),
                        other => Value::String(other.to_string()),
                    })
                    .collect();
                layer["skills"]["repos"] = Value::Array(repos);
            }
            _ if CLI_ONLY_KEYS.contains(&key)
                || CLI_ONLY_PREFIXES.iter().any(|p| key.starts_with(p)) =>
            {
                cli_only.push(key.to_owned())
            }
            _ => {
                return Err(invalid(format!(
                    "unknown key `{key}` in HolmesGPT config {}: triage reads model, api_key, \
                     api_base, api_version, max_steps, cluster_name, toolsets, mcp_servers, \
                     custom_toolsets, custom_skill_paths and skill_repos (and ignores the \
                     command line's alert-source keys)",
                    file.display()
                )));
            }
        }
    }
    if layer.get("env_model").is_some() && layer["env_model"].get("model").is_none() {
        return Err(invalid(format!(
            "HolmesGPT config {} sets api_key, api_base or api_version but not `model`: set \
             model to the model to call with its provider prefix, e.g. openai/gpt-4.1",
            file.display()
        )));
    }
    if !cli_only.is_empty() {
        tracing::info!(
            file = %file.display(),
            keys = %cli_only.join(", "),
            "HolmesGPT command-line keys ignored (triage has no alert sources or destinations)"
        );
    }
    mapping.apply(&mut layer, report);
    Ok(layer)
}

/// A file of toolsets (`custom_toolsets`, `CUSTOM_TOOLSET_LOCATION`).
fn toolset_file(file: &Path, report: &mut HolmesReport) -> Result<HolmesLayer, ConfigError> {
    if !file.is_file() {
        return Err(invalid(format!(
            "HolmesGPT toolset file {} does not exist",
            file.display()
        )));
    }
    let value = load_yaml(file)?;
    let mut layer = json!({});
    let mut mapping = ToolsetMapping::default();
    for (key, v) in value.as_object().into_iter().flatten() {
        match key.as_str() {
            "toolsets" => map_toolsets(v, file, &mut mapping)?,
            "mcp_servers" => set_mcp_servers(&mut layer, v),
            "mcpAddons" => {
                for (addon, settings) in v.as_object().into_iter().flatten() {
                    if settings.get("enabled").and_then(Value::as_bool) == Some(true) {
                        report.unavailable.push((
                            format!("mcpAddons.{addon}"),
                            "a Helm add-on that deploys an MCP server beside HolmesGPT; \
                             triage does not deploy it: list the server's URL under mcp_servers"
                                .into(),
                        ));
                    }
                }
            }
            other => {
                return Err(invalid(format!(
                    "unknown key `{other}` in HolmesGPT toolset file {}: it may hold toolsets, \
                     mcp_servers and mcpAddons",
                    file.display()
                )));
            }
        }
    }
    mapping.apply(&mut layer, report);
    report.files.push(file.to_path_buf());
    Ok(HolmesLayer {
        name: format!("HolmesGPT toolset file {}", file.display()),
        value: layer,
    })
}

/// `mcp_servers`, unchanged, for triage's key of that name; an empty one (as Helm renders
/// when none are configured) configures nothing and is left out.
fn set_mcp_servers(layer: &mut Value, v: &Value) {
    let empty = v.is_null() || v.as_object().is_some_and(serde_json::Map::is_empty);
    if !empty {
        layer["mcp_servers"] = v.clone();
    }
}

fn as_list(v: &Value) -> Vec<Value> {
    match v {
        Value::Null => Vec::new(),
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    }
}

fn paths(v: &Value, key: &str, file: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    as_list(v)
        .into_iter()
        .map(|p| match p {
            Value::String(s) => Ok(PathBuf::from(s)),
            _ => Err(invalid(format!(
                "`{key}` in {} must list file paths",
                file.display()
            ))),
        })
        .collect()
}
