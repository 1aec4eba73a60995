//! Custom toolsets in HolmesGPT's YAML format: tools whose `command` or `script` template is
//! rendered with the model's arguments, shell-quoted, and run by bash in the sandbox
//! ([`tool`]); `type: http` toolsets whose tools send one request each ([`http`]).
//! Prerequisites (commands that must succeed, variables that must be set) are checked at
//! start-up: a toolset that fails one is reported unavailable with the reason.

pub mod config;
mod http;
mod template;
mod tool;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use config::{ParameterDef, Prerequisite, ToolsetKind, YamlToolDef, YamlToolsetDef};
pub use template::expand_env;
use tool::{CommandTool, Param, ParamKind, Runner};

use super::{Tool, ToolOrigin, Toolset};
use crate::sandbox::{Approval, Sandbox};

/// HolmesGPT runs its commands without a limit; triage stops them after this by default.
const DEFAULT_TIMEOUT_SECS: u64 = 60;
const DEFAULT_MAX_OUTPUT: usize = 1024 * 1024;
/// A prerequisite command gets at most this long.
const PREREQUISITE_TIMEOUT: Duration = Duration::from_secs(30);

/// What the YAML toolsets share with the rest of triage.
pub struct Shared<'a> {
    pub sandbox: &'a Sandbox,
    /// `toolsets.bash.memory_limit_mb`: the same limit for every shell command.
    pub memory_limit_mb: u64,
    /// Reads triage's environment (a parameter so tests need not change it).
    pub lookup: &'a (dyn Fn(&str) -> Option<String> + Sync),
    /// What `type: http` tools trust besides the system's roots.
    pub roots: &'a crate::runtime::trust::ExtraRoots,
}

/// Builds every toolset; a definition triage cannot use is an error naming the toolset, the
/// tool and the key.
pub async fn toolsets(
    defs: &BTreeMap<String, YamlToolsetDef>,
    shared: &Shared<'_>,
) -> Result<Vec<Toolset>, String> {
    // Concurrently: each may wait up to 30 s on a prerequisite command.
    futures::future::join_all(defs.iter().map(|(name, def)| toolset(name, def, shared)))
        .await
        .into_iter()
        .collect()
}

async fn toolset(name: &str, def: &YamlToolsetDef, shared: &Shared<'_>) -> Result<Toolset, String> {
    if !def.enabled {
        return Ok(Toolset::disabled(name));
    }
    let lookup = shared.lookup;
    let timeout = Duration::from_secs(def.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS).max(1));
    let max_output = def.max_output_bytes.unwrap_or(DEFAULT_MAX_OUTPUT).max(1);
    let mut env = crate::tools::bash::run::child_env(lookup);
    for prerequisite in &def.prerequisites {
        env.extend(
            prerequisite
                .env
                .iter()
                .filter_map(|var| lookup(var).map(|v| (var.clone(), v))),
        );
    }
    for (key, value) in &def.env {
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "toolset `{name}`: `env` key `{key}` is not a variable name"
            ));
        }
        env.retain(|(k, _)| k != key);
        env.push((key.clone(), template::expand_env(value, lookup)));
    }
    let bash = crate::tools::bash::find_bash();
    let runner = bash.clone().map(|bash| {
        Arc::new(Runner {
            bash,
            env,
            sandbox: shared.sandbox.clone(),
            grants: grants(lookup),
            max_output,
            memory_limit_mb: shared.memory_limit_mb,
        })
    });
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    if def.transformers.is_some() || def.tools.iter().any(|t| t.transformers.is_some()) {
        tracing::warn!(
            toolset = name,
            "`transformers` (HolmesGPT's LLM summaries of tool output) are not applied: large \
             output is truncated instead"
        );
    }
    for def_tool in &def.tools {
        let at = |key: &str| format!("toolset `{name}`, tool `{}`: {key}", def_tool.name);
        check_tool_name(&def_tool.name).map_err(|e| format!("toolset `{name}`: {e}"))?;
        let requires_approval = def_tool.requires_approval.unwrap_or(def.requires_approval);
        let timeout = def_tool
            .timeout_secs
            .map_or(timeout, |s| Duration::from_secs(s.max(1)));
        let description = if def_tool.description.trim().is_empty() {
            def_tool.user_description.clone().unwrap_or_default()
        } else {
            def_tool.description.clone()
        };
        match def.kind {
            ToolsetKind::Yaml => {
                let source = match (&def_tool.command, &def_tool.script) {
                    (Some(c), None) => c,
                    (None, Some(s)) => s,
                    (Some(_), Some(_)) => return Err(at("has both `command` and `script`")),
                    (None, None) => return Err(at("needs a `command` or a `script`")),
                };
                if def_tool.url.is_some()
                    || def_tool.method.is_some()
                    || !def_tool.headers.is_empty()
                {
                    return Err(at(
                        "`url`, `method` and `headers` belong to `type: http` toolsets",
                    ));
                }
                // HolmesGPT pipes the output through `additional_instructions`.
                let source = match &def_tool.additional_instructions {
                    Some(post) if !post.trim().is_empty() => format!("{{\n{source}\n}} | {post}"),
                    _ => source.clone(),
                };
                let template = template::expand_env(&source, lookup);
                let params = parameters(&template, def_tool).map_err(|e| at(&e))?;
                let Some(runner) = &runner else {
                    continue;
                };
                tools.push(Arc::new(CommandTool {
                    name: def_tool.name.clone(),
                    toolset: name.to_owned(),
                    description,
                    schema: tool::schema(&params),
                    params,
                    template,
                    requires_approval,
                    timeout,
                    runner: runner.clone(),
                }));
            }
            ToolsetKind::Http => {
                if def_tool.command.is_some()
                    || def_tool.script.is_some()
                    || def_tool.additional_instructions.is_some()
                {
                    return Err(at(
                        "`command` and `script` belong to command toolsets, not `type: http`",
                    ));
                }
                let url = def_tool.url.as_deref().ok_or_else(|| at("needs a `url`"))?;
                let params = parameters(url, def_tool).map_err(|e| at(&e))?;
                let request = http::HttpTool::new(
                    http::HttpSpec {
                        name: def_tool.name.clone(),
                        toolset: name.to_owned(),
                        description,
                        schema: tool::schema(&params),
                        params,
                        url: url.to_owned(),
                        method: def_tool.method.as_deref().unwrap_or("GET"),
                        headers: &def_tool.headers,
                        requires_approval,
                        timeout,
                        max_output,
                        own_ports: shared.sandbox.walled_ports(),
                        roots: shared.roots,
                    },
                    lookup,
                )
                .map_err(|e| at(&e))?;
                tools.push(Arc::new(request));
            }
        }
    }
    if def.kind == ToolsetKind::Yaml && runner.is_none() {
        return Ok(Toolset::unavailable(name, "bash is not installed"));
    }
    if let Some(reason) = failed_prerequisite(def, runner.as_deref(), lookup).await {
        return Ok(Toolset::unavailable(name, reason));
    }
    let instructions = match (&def.llm_instructions, def.description.trim()) {
        (Some(i), _) => format!("# {name}\n{i}\n"),
        (None, "") => String::new(),
        (None, d) => format!("# {name}\n{d}\n"),
    };
    Ok(Toolset::enabled(name, &instructions, tools).with_origin(ToolOrigin::Yaml))
}

/// The declared parameters, or, when none are declared, one required string per placeholder.
/// A placeholder that is not declared would fail every call: refused here.
fn parameters(template: &str, def: &YamlToolDef) -> Result<BTreeMap<String, Param>, String> {
    let used = template::placeholders(template)?;
    let Some(declared) = &def.parameters else {
        let params = used
            .into_iter()
            .map(|n| {
                let p = Param {
                    kind: ParamKind::String,
                    required: true,
                    description: None,
                };
                (n, p)
            })
            .collect();
        return Ok(params);
    };
    if let Some(missing) = used.iter().find(|u| !declared.contains_key(*u)) {
        return Err(format!(
            "the template uses `{missing}`, which `parameters` does not declare"
        ));
    }
    let mut params = BTreeMap::new();
    for (name, p) in declared {
        let kind = ParamKind::parse(&p.kind).ok_or_else(|| {
            format!(
                "parameter `{name}` has type `{}`: string, integer, number or boolean",
                p.kind
            )
        })?;
        params.insert(
            name.clone(),
            Param {
                kind,
                required: p.required,
                description: p.description.clone(),
            },
        );
    }
    Ok(params)
}

/// OpenAI's rule for function names.
fn check_tool_name(name: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "tool name `{name}` must be 1–64 letters, digits, `_` or `-`"
        ))
    }
}

/// What a command needs to read: the kubeconfig, as for the bash tool.
fn grants(lookup: &dyn Fn(&str) -> Option<String>) -> crate::sandbox::Grants {
    let kubeconfigs = lookup("KUBECONFIG")
        .map(|k| {
            k.split(':')
                .filter(|p| p.starts_with('/'))
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default();
    let home = lookup("HOME");
    crate::tools::kubernetes::kubectl_grants(kubeconfigs, home.as_deref().map(Path::new), None)
}

/// The first prerequisite that does not hold, as the reason the toolset is unavailable.
async fn failed_prerequisite(
    def: &YamlToolsetDef,
    runner: Option<&Runner>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    for prerequisite in &def.prerequisites {
        if let Some(var) = prerequisite
            .env
            .iter()
            .find(|v| lookup(v).is_none_or(|value| value.trim().is_empty()))
        {
            return Some(format!(
                "prerequisite failed: environment variable {var} is not set"
            ));
        }
        let Some(command) = &prerequisite.command else {
            continue;
        };
        let Some(runner) = runner else {
            return Some("bash is not installed".into());
        };
        let command = template::expand_env(command, lookup);
        let out = runner
            .run(&command, PREREQUISITE_TIMEOUT, Approval::NotApproved)
            .await;
        if out.status == super::ToolStatus::Error {
            let first_line = out.data.lines().next().unwrap_or("").trim();
            let error = out.error.unwrap_or_default();
            return Some(format!(
                "prerequisite failed: `{command}`: {error}{}",
                if first_line.is_empty() {
                    String::new()
                } else {
                    format!(" ({first_line})")
                }
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests;
