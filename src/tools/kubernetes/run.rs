//! Running the real `kubectl`: argv built by the caller (never a shell), a clean environment,
//! the sandbox (reading only the kubeconfig and system locations, writing only its private
//! `TMPDIR` and the configured cache), its own process group (killed on timeout or when the
//! call is dropped), capped output.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::KubernetesConfig;
use super::kubectl_grants;
use super::output::{RunOutput, display_command, to_tool_output};
use crate::sandbox::{Approval, Grants, Sandbox};
use crate::tools::ToolOutput;
use crate::tools::capped::{Overflow, chunks, read_capped};

/// Most of kubectl's stderr kept for an error message.
const MAX_STDERR_BYTES: usize = 64 * 1024;

/// Environment variables passed through to kubectl besides PATH and HOME: the in-cluster
/// service-account discovery (without them kubectl inside a pod falls back to localhost:8080)
/// and the proxy settings.
const PASSTHROUGH_ENV: &[&str] = &[
    "KUBERNETES_SERVICE_HOST",
    "KUBERNETES_SERVICE_PORT",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// kubectl's environment, from triage's (`lookup`): PATH, HOME, the kubeconfig (`kubeconfig`,
/// else KUBECONFIG's entries made absolute) and [`PASSTHROUGH_ENV`].
fn kubectl_env(
    kubeconfig: Option<&Path>,
    lookup: &dyn Fn(&str) -> Option<OsString>,
) -> Vec<(OsString, OsString)> {
    let mut env = Vec::new();
    let path = lookup("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    env.push(("PATH".into(), path));
    if let Some(home) = lookup("HOME") {
        env.push(("HOME".into(), home));
    }
    match kubeconfig {
        Some(p) => env.push(("KUBECONFIG".into(), p.as_os_str().to_owned())),
        None => {
            if let Some(k) = lookup("KUBECONFIG") {
                let entries =
                    std::env::split_paths(&k).map(|p| std::path::absolute(&p).unwrap_or(p));
                if let Ok(k) = std::env::join_paths(entries) {
                    env.push(("KUBECONFIG".into(), k));
                }
            }
        }
    }
    for name in PASSTHROUGH_ENV {
        if let Some(v) = lookup(name) {
            env.push(((*name).into(), v));
        }
    }
    env
}

/// How to run kubectl: the resolved binary, the connection flags appended to every command,
/// the environment and the limits.
#[derive(Debug, Clone)]
pub(super) struct Kubectl {
    program: PathBuf,
    global_flags: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    sandbox: Sandbox,
    grants: Grants,
    pub(super) timeout: Duration,
    /// Whether `--request-timeout` goes on the command line (see [`in_cluster_only`]).
    request_timeout_flag: bool,
    max_output_bytes: usize,
}

/// Whether kubectl's only credentials are a pod's service account: no kubeconfig configured,
/// none in `KUBECONFIG` or `~/.kube/config`, and `KUBERNETES_SERVICE_HOST` set. kubectl then
/// falls back to the in-cluster configuration only while its connection settings equal the
/// defaults, and `--request-timeout` is one of them: with it kubectl calls localhost:8080.
fn in_cluster_only(kubeconfig: Option<&PathBuf>, home: Option<&std::path::Path>) -> bool {
    kubeconfig.is_none()
        && std::env::var_os("KUBECONFIG").is_none()
        && !home.is_some_and(|h| h.join(".kube/config").exists())
        && std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
}

#[derive(Debug)]
pub(super) enum RunError {
    Spawn(std::io::Error),
    TimedOut(Duration),
    Io(std::io::Error),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spawn(e) => write!(f, "kubectl could not be run: {e}"),
            RunError::TimedOut(d) => {
                write!(f, "kubectl did not finish within {} s", d.as_secs())
            }
            RunError::Io(e) => write!(f, "reading kubectl's output failed: {e}"),
        }
    }
}

impl Kubectl {
    pub(super) fn new(program: PathBuf, cfg: &KubernetesConfig, sandbox: &Sandbox) -> Kubectl {
        let timeout_secs = cfg.timeout_secs.max(1);
        // kubectl runs in its private TMPDIR: relative paths would resolve there.
        let absolute = |p: &PathBuf| std::path::absolute(p).unwrap_or_else(|_| p.clone());
        let kubeconfig = cfg.kubeconfig.as_ref().map(absolute);
        let cache_dir = cfg.cache_dir.as_ref().map(absolute);
        let mut global_flags = Vec::new();
        if let Some(path) = &kubeconfig {
            let mut flag = OsString::from("--kubeconfig=");
            flag.push(path);
            global_flags.push(flag);
        }
        if let Some(context) = &cfg.context {
            global_flags.push(format!("--context={context}").into());
        }
        if let Some(dir) = &cache_dir {
            let mut flag = OsString::from("--cache-dir=");
            flag.push(dir);
            global_flags.push(flag);
        }
        let env = kubectl_env(kubeconfig.as_deref(), &|name| std::env::var_os(name));
        let kubeconfigs = env.iter().filter(|(k, _)| k == "KUBECONFIG");
        let kubeconfigs = kubeconfigs
            .flat_map(|(_, v)| std::env::split_paths(v))
            .collect();
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let request_timeout_flag = !in_cluster_only(kubeconfig.as_ref(), home.as_deref());
        let mut grants = kubectl_grants(kubeconfigs, home.as_deref(), cache_dir.as_deref());
        // A kubectl outside the system locations (e.g. in a home directory) must be runnable.
        grants.read.push(program.clone());
        Kubectl {
            program,
            global_flags,
            env,
            sandbox: sandbox.clone(),
            grants,
            timeout: Duration::from_secs(timeout_secs),
            request_timeout_flag,
            max_output_bytes: cfg.max_output_bytes.max(1),
        }
    }

    /// Runs `kubectl <args> <connection flags> --request-timeout=<t>s`, bounded by `limit`
    /// (alone in a pod without a kubeconfig, see [`in_cluster_only`]).
    pub(super) async fn run(
        &self,
        args: &[String],
        request_timeout: Duration,
        limit: Duration,
    ) -> Result<RunOutput, RunError> {
        let mut cmd = Command::new(&self.program);
        cmd.args(args).args(&self.global_flags);
        if self.request_timeout_flag {
            cmd.arg(format!(
                "--request-timeout={}s",
                request_timeout.as_secs().max(1)
            ));
        }
        cmd.env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // The directory is declared before the child, so removed after the group is killed.
        let (mut child, _tmpdir) = self
            .sandbox
            .spawn(cmd, &self.grants, Approval::NotApproved, |_, _| {})
            .await
            .map_err(RunError::Spawn)?;
        // Declared after `child`, so dropped first: kills the whole group (kubectl and any
        // credential plugin it started) before tokio reaps the leader.
        let mut group = ProcessGroupGuard(child.id());
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(RunError::Spawn(std::io::Error::other("no output pipes")));
        };
        let max = self.max_output_bytes;
        let work = async {
            // Both pipes are read to the end, so kubectl never blocks writing to a full one.
            let (out, err, status) = tokio::join!(
                read_capped(chunks(stdout), max, Overflow::Drain),
                read_capped(chunks(stderr), MAX_STDERR_BYTES, Overflow::Drain),
                child.wait()
            );
            let out = out?;
            let stderr = err?.bytes;
            let status = status?;
            Ok::<_, std::io::Error>((out.bytes, out.total, stderr, status))
        };
        match tokio::time::timeout(limit, work).await {
            Err(_) => Err(RunError::TimedOut(limit)),
            Ok(Err(e)) => Err(RunError::Io(e)),
            Ok(Ok((stdout, stdout_total, stderr, status))) => {
                group.disarm();
                use std::os::unix::process::ExitStatusExt;
                Ok(RunOutput {
                    code: status.code(),
                    signal: status.signal(),
                    stdout,
                    stdout_total,
                    stderr,
                })
            }
        }
    }

    /// Runs a tool's command and turns the result into the tool's output.
    pub(super) async fn invoke(&self, args: &[String]) -> ToolOutput {
        let invocation = display_command(args);
        let mut output = match self
            .run(args, self.timeout, self.timeout + Duration::from_secs(2))
            .await
        {
            Ok(out) => to_tool_output(out, self.max_output_bytes),
            Err(e) => ToolOutput::error(e.to_string()),
        };
        output.invocation = Some(invocation);
        output
    }
}

/// Kills a child's process group unless disarmed (the child was reaped normally).
struct ProcessGroupGuard(Option<u32>);

impl ProcessGroupGuard {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for ProcessGroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0.and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: plain syscall; the group leader is our unreaped child, so the id is ours.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
}

/// The kubectl binary: a path is taken as is, a bare name is looked up on PATH.
pub(super) fn resolve_program(program: &Path) -> Option<PathBuf> {
    if program.as_os_str().is_empty() {
        return None;
    }
    if program.components().count() > 1 {
        return is_executable(program).then(|| program.to_owned());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::events::ToolStatus;

    #[test]
    fn programs_resolve_by_path_or_name() {
        assert_eq!(resolve_program(Path::new("/nonexistent/kubectl")), None);
        assert_eq!(resolve_program(Path::new("")), None);
        assert_eq!(
            resolve_program(Path::new("sh")).map(|p| p.is_absolute()),
            Some(true)
        );
        assert_eq!(
            resolve_program(Path::new("/bin/sh")),
            Some(PathBuf::from("/bin/sh"))
        );
    }

    /// A stand-in "kubectl" script to exercise the process handling without a cluster.
    fn script(body: &str) -> (PathBuf, Kubectl) {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!(
            "triage-kubectl-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        // The hanging test's script writes a pid file here, as the tools' user.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let path = dir.join("kubectl");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let cfg = KubernetesConfig {
            kubeconfig: Some(PathBuf::from("/tmp/kc")),
            context: Some("prod".into()),
            cache_dir: Some(PathBuf::from("/tmp/c")),
            max_output_bytes: 100,
            ..KubernetesConfig::default()
        };
        let mut kubectl = Kubectl::new(path, &cfg, &Sandbox::for_tests());
        kubectl.grants.write.push(dir.clone());
        (dir, kubectl)
    }

    #[tokio::test]
    async fn runs_with_flags_and_a_clean_environment() {
        let (dir, k) = script("echo \"$@\"; env | sort");
        let o = k.invoke(&["get".into(), "pods".into()]).await;
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(o.status, ToolStatus::Success, "{o:?}");
        // 100-byte cap: the first line fits, the environment is cut.
        assert!(
            o.data.starts_with(
                "get pods --kubeconfig=/tmp/kc --context=prod --cache-dir=/tmp/c \
                 --request-timeout=30s\n"
            ),
            "{}",
            o.data
        );
        assert!(o.data.contains("[output truncated"));
        assert_eq!(o.invocation.as_deref(), Some("kubectl get pods"));

        let (dir, k) = script(
            "env | grep -v '^PWD=' | grep -v '^SHLVL=' | grep -v '^_=' | cut -d= -f1 | sort | tr '\\n' ' '",
        );
        let o = k.invoke(&[]).await;
        let _ = std::fs::remove_dir_all(&dir);
        let names: Vec<&str> = o.data.split_whitespace().collect();
        assert!(
            names.contains(&"PATH") && names.contains(&"KUBECONFIG"),
            "{names:?}"
        );
        assert!(
            names
                .iter()
                .all(|n| ["PATH", "HOME", "KUBECONFIG", "TMPDIR"].contains(n)
                    || PASSTHROUGH_ENV.contains(n)),
            "{names:?}"
        );
    }

    /// In a pod kubectl finds the API server by KUBERNETES_SERVICE_HOST/PORT and reads the
    /// service account's token and CA: both reach it, nothing else of triage's environment.
    #[test]
    fn in_a_pod_kubectl_gets_the_service_address_and_the_service_account() {
        let pod = |name: &str| -> Option<OsString> {
            match name {
                "KUBERNETES_SERVICE_HOST" => Some("10.96.0.1".into()),
                "KUBERNETES_SERVICE_PORT" => Some("443".into()),
                "HOME" => Some("/home/triage".into()),
                "OPENAI_API_KEY" => Some("sk-not-for-kubectl".into()),
                _ => None,
            }
        };
        let env = kubectl_env(None, &pod);
        let value = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(value("KUBERNETES_SERVICE_HOST"), Some("10.96.0.1".into()));
        assert_eq!(value("KUBERNETES_SERVICE_PORT"), Some("443".into()));
        assert_eq!(
            value("KUBECONFIG"),
            None,
            "in-cluster: no kubeconfig is invented"
        );
        assert_eq!(value("OPENAI_API_KEY"), None);
        let account = PathBuf::from("/var/run/secrets/kubernetes.io/serviceaccount");
        let grants =
            super::super::grants_for(Vec::new(), Some(Path::new("/home/triage")), None, true);
        assert!(grants.read.contains(&account), "{grants:?}");
        let outside = super::super::grants_for(Vec::new(), None, None, false);
        assert!(!outside.read.contains(&account), "{outside:?}");
    }

    #[tokio::test]
    async fn a_hanging_kubectl_is_killed_with_its_children() {
        let (dir, k) = script("sleep 30 & echo $! > \"$(dirname \"$0\")/bg.pid\"; sleep 30");
        let started = std::time::Instant::now();
        let r = k
            .run(&[], Duration::from_secs(1), Duration::from_millis(500))
            .await;
        assert!(matches!(r, Err(RunError::TimedOut(_))), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let pid = std::fs::read_to_string(dir.join("bg.pid")).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        let pid = pid.trim();
        assert!(
            !pid.is_empty(),
            "the script did not start its background child"
        );
        // The background `sleep` (same process group) is gone or a zombie awaiting its reaper.
        let mut alive = true;
        for _ in 0..50 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().next());
            if stat.is_empty() || state == Some("Z") {
                alive = false;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!alive, "background child {pid} survived the timeout");
    }
}
