//! The `bash` toolset: one tool that runs a read-only shell command for troubleshooting.
//!
//! Every command is parsed with tree-sitter-bash and classified ([`policy::classify`]):
//! allowed commands run at once; commands outside the allow list need the user's approval
//! (the tool returns `approval_required` and the agent loop asks); dangerous forms
//! (substitutions, file redirections, `sudo`, reading secrets, …) are refused outright,
//! even with approval. Commands run in a clean environment inside the sandbox ([`run`],
//! [`crate::sandbox`]): without approval they may write only in their private `TMPDIR`.

mod allowlist;
mod deny;
mod evaluation;
mod hidden_reads;
mod parse;
mod patterns;
mod policy;
#[cfg(test)]
mod policy_tests;
mod program_checks;
pub(crate) mod run;
#[cfg(test)]
mod sandbox_tests;
mod sensitive_paths;
mod tool;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Toolset, Typed};
use crate::sandbox::Sandbox;

pub use allowlist::BuiltinAllowlist;
pub use policy::{Policy, Verdict, classify};
pub use tool::BashTool;

const TOOLSET: &str = "bash";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BashConfig {
    pub enabled: bool,
    /// Built-in allow list: `core`, `extended` or `none`.
    pub builtin_allowlist: BuiltinAllowlist,
    /// More allowed command prefixes, e.g. `helm list`.
    pub allow: Vec<String>,
    /// Refused command prefixes, e.g. `kubectl get configmap`.
    pub deny: Vec<String>,
    /// More absolute paths commands may never name (besides `/etc/shadow`, `~/.ssh`, the
    /// KUBECONFIG files…), e.g. files holding this server's own credentials.
    pub sensitive_paths: Vec<String>,
    /// Default timeout of a command.
    pub timeout_secs: u64,
    /// Largest timeout the model may ask for.
    pub max_timeout_secs: u64,
    /// Virtual-memory limit of a command (`ulimit -v`); 0 for none.
    pub memory_limit_mb: u64,
    /// Output kept; beyond it the command is killed.
    pub max_output_bytes: usize,
}

impl Default for BashConfig {
    fn default() -> Self {
        BashConfig {
            enabled: true,
            builtin_allowlist: BuiltinAllowlist::Extended,
            allow: Vec::new(),
            deny: Vec::new(),
            sensitive_paths: Vec::new(),
            timeout_secs: 30,
            max_timeout_secs: 300,
            memory_limit_mb: 800,
            max_output_bytes: 1024 * 1024,
        }
    }
}

pub fn toolset(cfg: &BashConfig, sandbox: &Sandbox) -> Toolset {
    if !cfg.enabled {
        return Toolset::disabled(TOOLSET);
    }
    let Some(bash) = find_bash() else {
        return Toolset::unavailable(TOOLSET, "bash is not installed");
    };
    let tool = BashTool::new(cfg, bash, sandbox, |k| std::env::var(k).ok());
    let instructions = instructions(&tool.policy);
    Toolset::enabled(TOOLSET, &instructions, vec![Arc::new(Typed::new(tool))])
}

/// `bash` in the commands' PATH, else in triage's.
pub(crate) fn find_bash() -> Option<PathBuf> {
    let inherited = std::env::var("PATH").unwrap_or_default();
    run::SAFE_PATH
        .split(':')
        .chain(inherited.split(':'))
        .filter(|d| d.starts_with('/'))
        .map(|d| Path::new(d).join("bash"))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn instructions(policy: &Policy) -> String {
    let allowed: Vec<String> = policy.allowed().collect();
    let allowed = if allowed.is_empty() {
        "none (every command needs the user's approval)".to_owned()
    } else {
        allowed.join(", ")
    };
    format!(
        "# Shell commands (bash tool)\n\
         Use the `bash` tool to run read-only commands, preferring `kubectl get`, `kubectl \
         describe`, `kubectl logs` and `kubectl events` with text filters such as `grep`, \
         `head` and `jq`. Commands that run without approval: {allowed}. Anything else needs \
         the user's approval, so prefer those.\n\
         Combine commands with `|`, `&&`, `||` and `;` only. Do not use variables ($X), \
         command substitution ($(…), backticks), subshells, loops, redirection to files or \
         `&`; `2>&1` and `2>/dev/null` are fine. Quote arguments that contain spaces or \
         special characters (`'*.log'`, `'jsonpath={{.items[*].metadata.name}}'`), as \
         unquoted globs need approval. Reading Kubernetes Secrets and credential files is \
         refused, also through a link or a glob that reaches them.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn config_defaults_and_parsing() {
        let cfg: BashConfig = serde_json::from_value(json!({
            "builtin_allowlist": "core", "allow": ["helm list"], "deny": ["kubectl delete"]
        }))
        .unwrap();
        assert_eq!(cfg.builtin_allowlist, BuiltinAllowlist::Core);
        assert_eq!(cfg.timeout_secs, 30);
        assert_eq!(cfg.max_timeout_secs, 300);
        assert_eq!(cfg.memory_limit_mb, 800);
        assert_eq!(cfg.max_output_bytes, 1_048_576);
        assert!(serde_json::from_value::<BashConfig>(json!({"bogus": 1})).is_err());
        assert!(serde_json::from_value::<BashConfig>(json!({"builtin_allowlist": "all"})).is_err());
        let none: BashConfig =
            serde_json::from_value(json!({"builtin_allowlist": "none"})).unwrap();
        assert_eq!(none.builtin_allowlist, BuiltinAllowlist::None);
    }

    #[test]
    fn toolset_states() {
        let sandbox = Sandbox::for_tests();
        let off = toolset(
            &BashConfig {
                enabled: false,
                ..BashConfig::default()
            },
            &sandbox,
        );
        assert_eq!(off.status, super::super::ToolsetStatus::Disabled);
        let on = toolset(&BashConfig::default(), &sandbox);
        assert_eq!(on.status, super::super::ToolsetStatus::Enabled);
        assert_eq!(on.tools.len(), 1);
        assert_eq!(on.tools[0].name(), "bash");
        assert_eq!(on.tools[0].toolset(), "bash");
        assert!(on.instructions.contains("kubectl get"));
        assert!(
            on.instructions
                .contains("jsonpath={.items[*].metadata.name}")
        );
        let schema = on.tools[0].parameters();
        assert_eq!(schema["required"], json!(["command"]));
        assert!(schema["properties"]["suggested_prefixes"].is_object());
        assert_eq!(
            on.tools[0].one_liner(&json!({"command": "kubectl get pods"})),
            "kubectl get pods"
        );
    }
}
