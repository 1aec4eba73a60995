//! The `kubernetes` toolset: read-only tools that run the real `kubectl` with structured,
//! validated parameters (never through a shell).
//!
//! At start-up the toolset checks that kubectl is installed and (unless disabled) that a
//! cluster answers `kubectl version`; otherwise it is reported unavailable with the reason
//! instead of failing every call.

mod commands;
pub(crate) mod flags;
mod output;
mod run;
mod values;

use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ToolContext, ToolOutput, Toolset, TypedTool, invalid_parameters_line};
use crate::sandbox::{Grants, Identity, Sandbox};
use commands::Command;
use run::{Kubectl, RunError};

pub use values::is_secret_resource;

const TOOLSET: &str = "kubernetes";
/// Bound of the start-up `kubectl version` check (its request timeout is 3 s).
const STARTUP_CHECK_LIMIT: Duration = Duration::from_secs(5);
const STARTUP_REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

const INSTRUCTIONS: &str = "\
The kubernetes tools read the cluster through kubectl (read-only; secrets cannot be read).
* Start with the failing object: kubectl_get_by_name or kubectl_describe (find it first with \
kubectl_get_by_kind_in_namespace, or kubectl_get_by_kind_in_cluster when the namespace is unknown).
* Then kubectl_events for that object (for_object = \"kind/name\") or its namespace.
* Then kubectl_logs; when a container restarted (RESTARTS > 0, CrashLoopBackOff, OOMKilled) \
also read previous = true: the previous run's log shows why it died.
* Follow owners and dependencies (Deployment → ReplicaSet → Pod, Service, ConfigMap, Node) \
with the same tools, and kubectl_top_pods / kubectl_top_nodes for resource pressure.";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KubernetesConfig {
    pub enabled: bool,
    /// The kubectl binary: a path, or a name looked up on PATH.
    pub kubectl: PathBuf,
    /// Passed as `--kubeconfig` (and `KUBECONFIG`); otherwise kubectl's own defaults
    /// (`KUBECONFIG`, `~/.kube/config`, in-cluster service account).
    pub kubeconfig: Option<PathBuf>,
    /// Passed as `--context`.
    pub context: Option<String>,
    /// Passed as `--cache-dir` (kubectl's discovery and HTTP cache); default
    /// `~/.kube/cache`.
    pub cache_dir: Option<PathBuf>,
    /// Limit of one kubectl run, also passed as `--request-timeout`.
    pub timeout_secs: u64,
    /// Most of kubectl's output kept per call; the rest is cut with a note.
    pub max_output_bytes: usize,
    /// Check at start-up that a cluster answers (`kubectl version`).
    pub check_on_startup: bool,
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        KubernetesConfig {
            enabled: true,
            kubectl: PathBuf::from("kubectl"),
            kubeconfig: None,
            context: None,
            cache_dir: None,
            timeout_secs: 30,
            max_output_bytes: 1024 * 1024,
            check_on_startup: true,
        }
    }
}

pub async fn toolset(cfg: &KubernetesConfig, sandbox: &Sandbox) -> Toolset {
    if !cfg.enabled {
        return Toolset::disabled(TOOLSET);
    }
    let Some(program) = run::resolve_program(&cfg.kubectl) else {
        let how = if cfg.kubectl.components().count() > 1 {
            format!(
                "{} does not exist or is not executable",
                cfg.kubectl.display()
            )
        } else {
            format!("no `{}` on PATH", cfg.kubectl.display())
        };
        return Toolset::unavailable(
            TOOLSET,
            format!(
                "kubectl is not installed ({how}); install it (e.g. Debian's kubernetes-client) \
                 or set toolsets.kubernetes.kubectl"
            ),
        );
    };
    let kubectl = Arc::new(Kubectl::new(program, cfg, sandbox));
    if let Err(reason) = check_client_version(&kubectl).await {
        return Toolset::unavailable(TOOLSET, reason);
    }
    if cfg.check_on_startup
        && let Err(reason) = check_cluster(&kubectl, cfg, sandbox.identity()).await
    {
        return Toolset::unavailable(TOOLSET, reason);
    }
    Toolset::enabled(TOOLSET, INSTRUCTIONS, commands::tools(&kubectl))
}

/// The oldest kubectl the tools work with: `kubectl events` arrived in 1.26.
const MIN_KUBECTL_MINOR: u64 = 26;

/// `kubectl version --client -o json` (local, no cluster): Err when kubectl is older than 1.26.
/// A version that cannot be read is let through; the cluster check or the tools will say more.
async fn check_client_version(kubectl: &Kubectl) -> Result<(), String> {
    let args = ["version", "--client", "-o", "json"].map(str::to_owned);
    let Ok(out) = kubectl
        .run(&args, STARTUP_REQUEST_TIMEOUT, STARTUP_CHECK_LIMIT)
        .await
    else {
        return Ok(());
    };
    let version: Option<Value> = serde_json::from_slice(&out.stdout).ok();
    let client = version.as_ref().map(|v| &v["clientVersion"]);
    let number = |field: &str| {
        client
            .and_then(|c| c[field].as_str())
            .and_then(|n| n.trim_end_matches('+').parse::<u64>().ok())
    };
    match (number("major"), number("minor")) {
        (Some(1), Some(minor)) if minor < MIN_KUBECTL_MINOR => Err(format!(
            "kubectl 1.{minor} is too old: triage needs kubectl 1.{MIN_KUBECTL_MINOR} or newer \
             (`kubectl events`); install a current kubectl \
             (https://kubernetes.io/docs/tasks/tools/) or point toolsets.kubernetes.kubectl at one"
        )),
        _ => Ok(()),
    }
}

/// `kubectl version -o json`: Ok when the server reported its version, else the reason.
async fn check_cluster(
    kubectl: &Kubectl,
    cfg: &KubernetesConfig,
    tools_user: &Identity,
) -> Result<(), String> {
    let args = ["version".to_owned(), "-o".to_owned(), "json".to_owned()];
    let out = match kubectl
        .run(&args, STARTUP_REQUEST_TIMEOUT, STARTUP_CHECK_LIMIT)
        .await
    {
        Ok(out) => out,
        Err(e @ RunError::TimedOut(_)) => return Err(format!("no cluster reachable: {e}")),
        Err(e) => return Err(e.to_string()),
    };
    let version: Option<Value> = serde_json::from_slice(&out.stdout).ok();
    let server = version
        .as_ref()
        .and_then(|v| v["serverVersion"]["gitVersion"].as_str());
    if let Some(server) = server {
        tracing::info!(
            toolset = TOOLSET,
            server_version = server,
            "cluster reachable"
        );
        return Ok(());
    }
    let stderr = output::clean_stderr(&out.stderr);
    let mut reason = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().trim_start_matches("error: ").to_owned())
        .unwrap_or_else(|| {
            format!(
                "`kubectl version` reported no server version (exit code {})",
                out.code.map_or_else(|| "none".into(), |c| c.to_string())
            )
        });
    let no_kubeconfig = cfg.kubeconfig.is_none()
        && std::env::var_os("KUBECONFIG").is_none()
        && std::env::var_os("KUBERNETES_SERVICE_HOST").is_none()
        && !std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(".kube/config").exists())
            .unwrap_or(false);
    if no_kubeconfig {
        reason.push_str(
            " (no kubeconfig found: set toolsets.kubernetes.kubeconfig or KUBECONFIG, or run in a pod)",
        );
    } else if reason.contains("permission denied")
        && let Identity::Switch { name, .. } = tools_user
    {
        reason.push_str(&format!(
            " (tool processes run as the user `{name}` (sandbox.user) because triage runs as \
             root: make the kubeconfig readable by that user, set sandbox.user to a user who \
             can read it, or run triage as a non-root user)"
        ));
    }
    Err(format!("no cluster reachable: {reason}"))
}

/// The builders already keep every value from passing as a flag; this is the second line, so a
/// builder's mistake still cannot change where kubectl connects or run a plugin.
fn checked(argv: Vec<String>) -> Result<Vec<String>, String> {
    match flags::refusal(&argv) {
        Some(reason) => Err(reason),
        None => Ok(argv),
    }
}

/// What kubectl needs besides system locations: its kubeconfig files (`kubeconfigs`, else
/// `~/.kube/config`), in a pod the service-account credentials, and the cache directory when
/// one is configured.
pub fn kubectl_grants(
    kubeconfigs: Vec<PathBuf>,
    home: Option<&Path>,
    cache_dir: Option<&Path>,
) -> Grants {
    let in_a_pod = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    grants_for(kubeconfigs, home, cache_dir, in_a_pod)
}

fn grants_for(
    kubeconfigs: Vec<PathBuf>,
    home: Option<&Path>,
    cache_dir: Option<&Path>,
    in_a_pod: bool,
) -> Grants {
    let mut read = kubeconfigs;
    if read.is_empty()
        && let Some(home) = home
    {
        read.push(home.join(".kube/config"));
    }
    if in_a_pod {
        read.push(PathBuf::from(
            "/var/run/secrets/kubernetes.io/serviceaccount",
        ));
    }
    Grants {
        read,
        write: cache_dir.map(Path::to_path_buf).into_iter().collect(),
    }
}

/// One kubectl command as a tool.
struct KubectlTool<C> {
    kubectl: Arc<Kubectl>,
    command: PhantomData<fn() -> C>,
}

impl<C: Command> KubectlTool<C> {
    fn new(kubectl: Arc<Kubectl>) -> Self {
        KubectlTool {
            kubectl,
            command: PhantomData,
        }
    }
}

impl<C: Command> TypedTool for KubectlTool<C> {
    type Params = C;

    fn name(&self) -> &str {
        C::NAME
    }

    fn toolset(&self) -> &str {
        TOOLSET
    }

    fn description(&self) -> &str {
        C::DESCRIPTION
    }

    fn one_liner(&self, params: &C) -> String {
        match params.argv() {
            Ok(argv) => output::display_command(&argv),
            Err(_) => invalid_parameters_line(C::NAME),
        }
    }

    fn timeout(&self) -> Duration {
        // kubectl's own limit plus room for killing it and reporting why.
        self.kubectl.timeout + Duration::from_secs(10)
    }

    fn invoke<'a>(&'a self, params: C, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            match params.argv().and_then(checked) {
                Ok(argv) => self.kubectl.invoke(&argv).await,
                Err(e) => ToolOutput::error(e),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolsetStatus;
    use crate::wire::events::ToolStatus;
    use serde_json::json;

    async fn toolset_for_tests(cfg: &KubernetesConfig) -> Toolset {
        toolset(cfg, &Sandbox::for_tests()).await
    }

    #[test]
    fn config_defaults_and_unknown_fields() {
        let cfg: KubernetesConfig = serde_json::from_value(json!({})).expect("defaults");
        assert!(cfg.enabled && cfg.check_on_startup);
        assert_eq!(cfg.kubectl, PathBuf::from("kubectl"));
        assert_eq!(cfg.timeout_secs, 30);
        assert_eq!(cfg.max_output_bytes, 1 << 20);
        let cfg: KubernetesConfig =
            serde_json::from_value(json!({"kubeconfig": "/etc/kc", "context": "prod"}))
                .expect("paths");
        assert_eq!(cfg.kubeconfig, Some(PathBuf::from("/etc/kc")));
        assert!(serde_json::from_value::<KubernetesConfig>(json!({"kubectl_path": "x"})).is_err());
    }

    #[tokio::test]
    async fn disabled_and_missing_binary() {
        let t = toolset_for_tests(&KubernetesConfig {
            enabled: false,
            ..Default::default()
        })
        .await;
        assert_eq!(t.status, ToolsetStatus::Disabled);
        let t = toolset_for_tests(&KubernetesConfig {
            kubectl: "/nonexistent/kubectl".into(),
            ..Default::default()
        })
        .await;
        match t.status {
            ToolsetStatus::Unavailable(r) => {
                assert!(r.starts_with("kubectl is not installed"), "{r}")
            }
            s => panic!("{s:?}"),
        }
        let t = toolset_for_tests(&KubernetesConfig {
            kubectl: "no-such-kubectl-binary".into(),
            ..Default::default()
        })
        .await;
        assert!(
            matches!(&t.status, ToolsetStatus::Unavailable(r) if r.contains("no `no-such-kubectl-binary` on PATH")),
            "{:?}",
            t.status
        );
    }

    #[tokio::test]
    async fn tools_without_startup_check() {
        let t = toolset_for_tests(&KubernetesConfig {
            kubectl: "/bin/echo".into(),
            check_on_startup: false,
            ..Default::default()
        })
        .await;
        assert_eq!(t.status, ToolsetStatus::Enabled);
        assert!(t.instructions.contains("previous"));
        let names: Vec<&str> = t.tools.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            [
                "kubectl_get_by_name",
                "kubectl_get_by_kind_in_namespace",
                "kubectl_get_by_kind_in_cluster",
                "kubectl_describe",
                "kubectl_logs",
                "kubectl_events",
                "kubectl_top_pods",
                "kubectl_top_nodes"
            ]
        );
        let describe = &t.tools[3];
        let params = json!({"kind":"pod","name":"web-1","namespace":"shop"});
        assert_eq!(
            describe.one_liner(&params),
            "kubectl describe pod web-1 -n shop"
        );
        assert_eq!(describe.toolset(), "kubernetes");
        // `/bin/echo` prints its argv: the connection flags come after the command.
        let out = describe.invoke(&params, &ToolContext::default()).await;
        assert_eq!(out.status, ToolStatus::Success);
        assert_eq!(
            out.data,
            "describe pod web-1 -n shop --request-timeout=30s\n"
        );
        assert_eq!(
            out.invocation.as_deref(),
            Some("kubectl describe pod web-1 -n shop")
        );
        let out = describe
            .invoke(
                &json!({"kind":"secret","name":"db","namespace":"shop"}),
                &ToolContext::default(),
            )
            .await;
        assert_eq!(out.status, ToolStatus::Error);
        assert_eq!(out.error.as_deref(), Some("reading secrets is not allowed"));
        assert_eq!(
            describe.one_liner(&json!({"kind":"pod","name":"-x"})),
            "kubectl_describe (invalid parameters)"
        );
    }

    #[test]
    fn built_commands_pass_the_flag_check_and_injected_flags_do_not() {
        let kubectl = Arc::new(Kubectl::new(
            "/bin/echo".into(),
            &KubernetesConfig::default(),
            &Sandbox::for_tests(),
        ));
        for tool in commands::tools(&kubectl) {
            let params = match tool.name() {
                "kubectl_get_by_kind_in_namespace" => json!({"kind":"pods","namespace":"shop"}),
                "kubectl_get_by_kind_in_cluster" => json!({"kind":"pods"}),
                "kubectl_logs" => json!({"pod":"web-1","namespace":"shop","since":"1h"}),
                "kubectl_events" => json!({"namespace":"shop","for_object":"pod/web-1"}),
                "kubectl_top_pods" => json!({"namespace":"shop"}),
                "kubectl_top_nodes" => json!({}),
                _ => json!({"kind":"pod","name":"web-1","namespace":"shop"}),
            };
            let argv = commands::tests::argv_by_name(tool.name(), params);
            assert!(argv.and_then(checked).is_ok(), "{}", tool.name());
        }
        for argv in [
            vec!["get", "pods", "--kubeconfig=/dev/stdin"],
            vec!["get", "pods", "-n", "shop", "--context", "prod"],
            vec!["evil-plugin"],
        ] {
            let argv = argv.into_iter().map(String::from).collect();
            assert!(checked(argv).is_err());
        }
    }

    #[test]
    fn schemas_are_objects() {
        let kubectl = Arc::new(Kubectl::new(
            "/bin/echo".into(),
            &KubernetesConfig::default(),
            &Sandbox::for_tests(),
        ));
        let tools = commands::tools(&kubectl);
        for t in &tools {
            assert_eq!(t.parameters()["type"], "object", "{}", t.name());
            assert!(t.parameters().get("$schema").is_none());
        }
        assert_eq!(tools[4].name(), "kubectl_logs");
        assert_eq!(
            tools[4].parameters()["required"],
            json!(["pod", "namespace"])
        );
    }

    #[tokio::test]
    async fn startup_check_reports_kubectls_reason() {
        // `false` prints nothing and fails: no server version.
        let t = toolset_for_tests(&KubernetesConfig {
            kubectl: "/bin/false".into(),
            kubeconfig: Some("/nonexistent/kubeconfig".into()),
            ..Default::default()
        })
        .await;
        assert!(
            matches!(&t.status, ToolsetStatus::Unavailable(r)
                if r.starts_with("no cluster reachable: `kubectl version` reported no server version")),
            "{:?}",
            t.status
        );
    }
}
