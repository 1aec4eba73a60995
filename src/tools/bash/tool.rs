//! The `bash` tool itself: its parameters, and one call, from the model's JSON through the
//! policy's verdict to a sandboxed run and the output the model sees.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::super::{ToolContext, ToolOutput, TypedTool};
use super::{BashConfig, Policy, TOOLSET, Verdict, classify, run};
use crate::sandbox::{Approval, Grants, Sandbox};
use crate::wire::events::ToolStatus;

/// Added to output that reports a refused access, which the sandbox may have caused.
const SANDBOX_NOTE: &str = "[note: commands run in a sandbox: without the user's approval they \
    may write only in $TMPDIR (their working directory), and no command may read triage's own \
    files; \"Permission denied\" above may come from it]";

/// Parameters of the `bash` tool.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct BashParams {
    /// The shell command to run, e.g. `kubectl get pods -n prod | grep -v Running`.
    command: String,
    /// Timeout in seconds (default 30, at most 300).
    #[serde(default)]
    timeout: Option<u64>,
    /// Command prefixes the user could approve for later calls, e.g. `["kubectl rollout
    /// status"]`; each must occur literally in the command.
    #[serde(default)]
    suggested_prefixes: Option<Vec<String>>,
}

pub struct BashTool {
    pub(super) policy: Policy,
    bash: PathBuf,
    env: Vec<(String, String)>,
    sandbox: Sandbox,
    /// What kubectl, run from a command, needs to read.
    grants: Grants,
    default_timeout: u64,
    max_timeout: u64,
    memory_limit_mb: u64,
    max_output: usize,
}

impl BashTool {
    /// `lookup` reads triage's environment (a parameter so tests need not change it).
    pub(super) fn new(
        cfg: &BashConfig,
        bash: PathBuf,
        sandbox: &Sandbox,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let env = run::child_env(&lookup);
        let home = env
            .iter()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| v.clone());
        // Relative paths are checked as if from here; commands really run in their private
        // TMPDIR, deeper below, so a path can only reach less than the check assumed.
        let cwd = if Path::new("/tmp").is_dir() {
            "/tmp"
        } else {
            "/"
        };
        // Relative entries are relative to where kubectl runs: the commands' directory.
        let kubeconfigs: Vec<String> = lookup("KUBECONFIG")
            .map(|k| {
                k.split(':')
                    .filter(|p| !p.is_empty())
                    .map(|p| match p.starts_with('/') {
                        true => p.to_owned(),
                        false => format!("{cwd}/{p}"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let grants = super::super::kubernetes::kubectl_grants(
            kubeconfigs.iter().map(PathBuf::from).collect(),
            home.as_deref().map(Path::new),
            None,
        );
        let policy = Policy::new(
            cfg.builtin_allowlist,
            &cfg.allow,
            &cfg.deny,
            home,
            cwd.to_owned(),
        )
        .with_sensitive_paths(kubeconfigs)
        .with_sensitive_paths(cfg.sensitive_paths.iter().cloned());
        let max_timeout = cfg.max_timeout_secs.max(1);
        BashTool {
            policy,
            bash,
            env,
            sandbox: sandbox.clone(),
            grants,
            default_timeout: cfg.timeout_secs.clamp(1, max_timeout),
            max_timeout,
            memory_limit_mb: cfg.memory_limit_mb,
            max_output: cfg.max_output_bytes.max(1),
        }
    }

    async fn call(&self, p: BashParams, ctx: &ToolContext) -> ToolOutput {
        let command = p.command;
        let with_invocation = |mut out: ToolOutput| {
            out.invocation = Some(command.clone());
            out
        };
        if let Some(missing) = p
            .suggested_prefixes
            .iter()
            .flatten()
            .find(|s| !command.contains(s.as_str()))
        {
            return with_invocation(ToolOutput::error(format!(
                "suggested prefix '{missing}' does not occur in the command"
            )));
        }
        match classify(&command, &self.policy) {
            Verdict::Refused(reason) => {
                tracing::info!(%command, %reason, "bash command refused");
                return with_invocation(ToolOutput::error(format!("Command refused: {reason}")));
            }
            Verdict::NeedsApproval(reason) if !ctx.user_approved => {
                return with_invocation(ToolOutput {
                    status: ToolStatus::ApprovalRequired,
                    data: String::new(),
                    error: Some(format!("Command requires approval. {reason}")),
                    return_code: None,
                    invocation: None,
                });
            }
            Verdict::NeedsApproval(_) | Verdict::Allowed => {}
        }
        let secs = p
            .timeout
            .unwrap_or(self.default_timeout)
            .clamp(1, self.max_timeout);
        let spec = run::Spec {
            bash: &self.bash,
            command: &command,
            env: &self.env,
            sandbox: &self.sandbox,
            grants: &self.grants,
            approval: Approval::from(ctx.user_approved),
            timeout: Duration::from_secs(secs),
            max_output: self.max_output,
            memory_limit_mb: self.memory_limit_mb,
        };
        let finished = match run::run(spec).await {
            Ok(f) => f,
            Err(e) => {
                return with_invocation(ToolOutput::error(format!("Could not run bash: {e}")));
            }
        };
        let output =
            finished.into_tool_output(Duration::from_secs(secs), self.max_output, |data| {
                if data.contains("Permission denied") {
                    if !data.ends_with('\n') {
                        data.push('\n');
                    }
                    data.push_str(SANDBOX_NOTE);
                }
            });
        with_invocation(output)
    }
}

impl TypedTool for BashTool {
    type Params = BashParams;

    fn name(&self) -> &str {
        "bash"
    }

    fn toolset(&self) -> &str {
        TOOLSET
    }

    fn description(&self) -> &str {
        "Run a read-only shell command (bash) for troubleshooting, e.g. `kubectl get pods -n \
         prod | grep -v Running`. Pipes `|` and the operators `&&`, `||` and `;` are allowed. \
         Not allowed: redirection to files (`2>&1` and `2>/dev/null` are fine), subshells, \
         command substitution `$(…)`, variables `$X`, loops and background jobs `&`. Commands \
         outside the allow list need the user's approval. Commands run in a sandbox: without \
         approval they may write only in $TMPDIR. Output is stdout and stderr combined."
    }

    fn one_liner(&self, params: &BashParams) -> String {
        params.command.clone()
    }

    fn timeout(&self) -> Duration {
        // The command enforces its own timeout; this only backs it up.
        Duration::from_secs(self.max_timeout + 15)
    }

    fn invoke<'a>(&'a self, params: BashParams, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(self.call(params, ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::super::find_bash;
    use super::*;
    use crate::tools::{Tool, Typed};
    use serde_json::{Value, json};
    use std::time::Instant;

    fn tool_with(cfg: BashConfig) -> Typed<BashTool> {
        let bash = find_bash().expect("bash installed");
        Typed::new(BashTool::new(&cfg, bash, &Sandbox::for_tests(), |k| {
            std::env::var(k).ok()
        }))
    }

    fn tool() -> Typed<BashTool> {
        tool_with(BashConfig::default())
    }

    fn approved() -> ToolContext {
        ToolContext {
            user_approved: true,
            ..ToolContext::default()
        }
    }

    async fn invoke(tool: &Typed<BashTool>, params: Value, ctx: &ToolContext) -> ToolOutput {
        tool.invoke(&params, ctx).await
    }

    /// Whether a process whose command line contains `pattern` exists.
    fn running(pattern: &str) -> bool {
        std::process::Command::new("pgrep")
            .arg("-f")
            .arg(pattern)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    async fn gone_within(pattern: &str, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if !running(pattern) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        !running(pattern)
    }

    #[tokio::test]
    async fn runs_an_allowed_command() {
        let out = invoke(
            &tool(),
            json!({"command": "echo hello && echo 'a b' | tr a-z A-Z"}),
            &ToolContext::default(),
        )
        .await;
        assert_eq!(out.status, ToolStatus::Success, "{out:?}");
        assert_eq!(out.data, "hello\nA B\n");
        assert_eq!(out.return_code, Some(0));
        assert_eq!(
            out.invocation.as_deref(),
            Some("echo hello && echo 'a b' | tr a-z A-Z")
        );
    }

    #[tokio::test]
    async fn nonzero_exit_is_an_error_with_merged_output() {
        let out = invoke(
            &tool(),
            json!({"command": "ls /definitely/not/here"}),
            &ToolContext::default(),
        )
        .await;
        assert_eq!(out.status, ToolStatus::Error);
        assert_eq!(out.return_code, Some(2));
        assert_eq!(out.error.as_deref(), Some("Command exited with code 2"));
        assert!(out.data.contains("No such file"), "stderr merged: {out:?}");
    }

    #[tokio::test]
    async fn empty_output_is_no_data() {
        let out = invoke(
            &tool(),
            json!({"command": "echo -n"}),
            &ToolContext::default(),
        )
        .await;
        assert_eq!(out.status, ToolStatus::NoData, "{out:?}");
        assert_eq!(out.return_code, Some(0));
    }

    #[tokio::test]
    async fn refused_and_approval_required() {
        let t = tool();
        let out = invoke(
            &t,
            json!({"command": "cat /etc/shadow"}),
            &approved(), // approval never overrides a refusal
        )
        .await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(
            out.error
                .as_deref()
                .unwrap()
                .starts_with("Command refused: /etc/shadow is a sensitive path"),
            "{out:?}"
        );
        let out = invoke(
            &t,
            json!({"command": "rm -rf /tmp/triage-nope"}),
            &ToolContext::default(),
        )
        .await;
        assert_eq!(out.status, ToolStatus::ApprovalRequired);
        assert_eq!(
            out.error.as_deref(),
            Some(
                "Command requires approval. Segment(s) not in allow list: 'rm -rf /tmp/triage-nope'"
            )
        );
        assert_eq!(out.invocation.as_deref(), Some("rm -rf /tmp/triage-nope"));
        assert!(out.data.is_empty());
    }

    #[tokio::test]
    async fn configured_sensitive_paths_are_refused() {
        let t = tool_with(BashConfig {
            sensitive_paths: vec!["/etc/triage".into()],
            ..BashConfig::default()
        });
        let out = invoke(
            &t,
            json!({"command": "cat /etc/triage/config.toml"}),
            &approved(),
        )
        .await;
        assert_eq!(
            out.error.as_deref(),
            Some("Command refused: /etc/triage is a sensitive path")
        );
    }

    #[tokio::test]
    async fn user_approval_runs_a_command_outside_the_allow_list() {
        let out = invoke(
            &tool(),
            json!({"command": "true && printenv LANG"}),
            &approved(),
        )
        .await;
        assert_eq!(out.status, ToolStatus::Success, "{out:?}");
        assert_eq!(out.data, "C.UTF-8\n");
    }

    #[tokio::test]
    async fn suggested_prefixes_must_occur_in_the_command() {
        let t = tool();
        let out = invoke(
            &t,
            json!({"command": "echo hi", "suggested_prefixes": ["echo"]}),
            &ToolContext::default(),
        )
        .await;
        assert_eq!(out.status, ToolStatus::Success, "{out:?}");
        let out = invoke(
            &t,
            json!({"command": "echo hi", "suggested_prefixes": ["kubectl get"]}),
            &ToolContext::default(),
        )
        .await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(out.error.unwrap().contains("'kubectl get'"));
        let out = invoke(&t, json!({"cmd": "echo hi"}), &ToolContext::default()).await;
        assert!(out.error.unwrap().contains("command"));
    }

    #[tokio::test]
    async fn the_environment_is_clean() {
        // The test process has variables the commands must not see (cargo sets CARGO_*).
        assert!(std::env::vars().any(|(k, _)| k.starts_with("CARGO")));
        let t = tool_with(BashConfig {
            allow: vec!["printenv".into()],
            ..BashConfig::default()
        });
        let out = invoke(&t, json!({"command": "printenv"}), &ToolContext::default()).await;
        assert_eq!(out.status, ToolStatus::Success, "{out:?}");
        for line in out.data.lines() {
            let key = line.split('=').next().unwrap();
            assert!(
                [
                    "PATH",
                    "LANG",
                    "HOME",
                    "KUBECONFIG",
                    "KUBERNETES_SERVICE_HOST",
                    "KUBERNETES_SERVICE_PORT",
                    "PWD",
                    "TMPDIR",
                    "SHLVL",
                    "_",
                    "OLDPWD"
                ]
                .contains(&key),
                "unexpected variable {line:?} in\n{}",
                out.data
            );
        }
        assert!(out.data.contains(&format!("PATH={}\n", run::SAFE_PATH)));
    }

    #[tokio::test]
    async fn memory_is_limited() {
        let out = invoke(&tool(), json!({"command": "ulimit -v"}), &approved()).await;
        assert_eq!(out.data.trim(), "819200", "{out:?}");
    }

    #[tokio::test]
    async fn timeout_kills_the_process_group() {
        let start = Instant::now();
        let out = invoke(
            &tool(),
            json!({"command": "sleep 30.0417 | cat", "timeout": 1}),
            &approved(),
        )
        .await;
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(out.status, ToolStatus::Error);
        assert_eq!(out.error.as_deref(), Some("Command timed out after 1 s"));
        assert!(gone_within("sleep 30.0417", Duration::from_secs(2)).await);
    }

    #[tokio::test]
    async fn output_is_capped() {
        let t = tool_with(BashConfig {
            max_output_bytes: 1000,
            ..BashConfig::default()
        });
        let start = Instant::now();
        let out = invoke(&t, json!({"command": "yes"}), &approved()).await;
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(out.status, ToolStatus::Success, "{:?}", out.error);
        let (kept, note) = out.data.split_at(1000);
        assert!(kept.starts_with("y\ny\n"));
        assert_eq!(note, "[output cut at 1000 bytes; the command was stopped]");
    }

    #[tokio::test]
    async fn non_utf8_output_is_converted_lossily() {
        let out = invoke(
            &tool(),
            json!({"command": "printf 'a\\377b'"}),
            &ToolContext::default(),
        )
        .await;
        assert_eq!(out.data, "a\u{FFFD}b");
    }

    #[tokio::test]
    async fn dropping_the_call_kills_the_process_group() {
        let t = tool();
        let ctx = approved();
        let seen_running = {
            let call = invoke(&t, json!({"command": "sleep 5.0731 | cat"}), &ctx);
            tokio::pin!(call);
            tokio::select! {
                _ = &mut call => false,
                seen = async {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    running("sleep 5.0731")
                } => seen,
            }
            // The call (client went away) is dropped here, unfinished.
        };
        assert!(
            seen_running,
            "the command should be running before the drop"
        );
        assert!(
            gone_within("sleep 5.0731", Duration::from_secs(2)).await,
            "sleep survived the dropped call"
        );
    }
}
