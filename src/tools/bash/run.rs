//! Running a checked command: a clean `bash` in the sandbox ([`crate::sandbox`]), in its own
//! process group, with a memory limit, merged output read up to a cap, and the whole group
//! killed on timeout, on overflow, once the shell exits (stragglers) and when the caller stops
//! waiting (the future is dropped). The call's private `TMPDIR` goes after the group.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Command;

use crate::sandbox::{Approval, Grants, Sandbox};
use crate::tools::ToolOutput;
use crate::tools::capped::Capped;
use crate::wire::events::ToolStatus;

/// The PATH the commands get, whatever triage's own PATH is.
pub const SAFE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Variables passed through from triage's environment when set; nothing else is (the
/// server's API keys must not be visible). `KUBERNETES_SERVICE_*` let kubectl find the API
/// server from inside a pod; they are addresses, not secrets.
const PASSED_ENV: &[&str] = &[
    "HOME",
    "KUBECONFIG",
    "KUBERNETES_SERVICE_HOST",
    "KUBERNETES_SERVICE_PORT",
];

pub struct Spec<'a> {
    pub bash: &'a Path,
    pub command: &'a str,
    pub env: &'a [(String, String)],
    pub sandbox: &'a Sandbox,
    pub grants: &'a Grants,
    pub approval: Approval,
    pub timeout: Duration,
    pub max_output: usize,
    /// 0: no limit.
    pub memory_limit_mb: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    /// The output reached the cap; the command was killed.
    Truncated,
}

#[derive(Debug)]
pub struct Finished {
    pub output: Vec<u8>,
    pub outcome: Outcome,
}

impl Finished {
    /// The tool result this run gives: status, error and exit code from the outcome, a marker
    /// where the output was cut. `decorate` may append to the output first (a hint, say).
    pub fn into_tool_output(
        self,
        timeout: Duration,
        max_output: usize,
        decorate: impl FnOnce(&mut String),
    ) -> ToolOutput {
        let mut data = String::from_utf8_lossy(&self.output).into_owned();
        decorate(&mut data);
        let (status, error, code) = match self.outcome {
            Outcome::TimedOut => (
                ToolStatus::Error,
                Some(format!(
                    "Command timed out after {} s",
                    timeout.as_secs_f64()
                )),
                None,
            ),
            Outcome::Truncated => {
                if !data.ends_with('\n') {
                    data.push('\n');
                }
                data.push_str(&format!(
                    "[output cut at {max_output} bytes; the command was stopped]"
                ));
                (ToolStatus::Success, None, None)
            }
            Outcome::Signaled(sig) => (
                ToolStatus::Error,
                Some(format!("Command was killed by signal {sig}")),
                None,
            ),
            Outcome::Exited(0) if data.is_empty() => (ToolStatus::NoData, None, Some(0)),
            Outcome::Exited(0) => (ToolStatus::Success, None, Some(0)),
            Outcome::Exited(code) => (
                ToolStatus::Error,
                Some(format!("Command exited with code {code}")),
                Some(code),
            ),
        };
        ToolOutput {
            status,
            data,
            error,
            return_code: code,
            invocation: None,
        }
    }
}

/// The environment of the commands, from a lookup in triage's environment.
pub fn child_env(lookup: impl Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".to_owned(), SAFE_PATH.to_owned()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
    ];
    env.extend(
        PASSED_ENV
            .iter()
            .filter_map(|k| lookup(k).map(|v| ((*k).to_owned(), v))),
    );
    env
}

/// Kills the process group when dropped, unless already done.
struct GroupGuard(Option<i32>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // SAFETY: killpg only sends a signal. `pgid` is the id of the group created for
            // this command (process_group(0) makes it the shell's pid), checked to be > 1 so
            // it can never mean "our own group" (0) or init.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `bash -c SCRIPT NAME COMMAND`: the command arrives as `$1` and is run by `eval`, so it is
/// never spliced into the script text.
fn script(memory_limit_mb: u64) -> String {
    let limit = if memory_limit_mb > 0 {
        format!(
            "ulimit -v {} 2>/dev/null; ",
            memory_limit_mb.saturating_mul(1024)
        )
    } else {
        String::new()
    };
    format!("{limit}exec 2>&1; eval \"$1\"")
}

pub async fn run(spec: Spec<'_>) -> std::io::Result<Finished> {
    let mut cmd = Command::new(spec.bash);
    cmd.arg("--noprofile")
        .arg("--norc")
        .arg("-c")
        .arg(script(spec.memory_limit_mb))
        .arg("triage-bash")
        .arg(spec.command)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    // The directory is declared before the child and the group guard, so dropped after them:
    // it is removed once nothing runs in it any more.
    let (mut child, _tmpdir) = spec
        .sandbox
        .spawn(cmd, spec.grants, spec.approval, |_, _| {})
        .await?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .filter(|id| *id > 1);
    let mut guard = GroupGuard(pgid);
    let Some(mut stdout) = child.stdout.take() else {
        return Err(std::io::Error::other("no stdout pipe"));
    };

    let mut output = Capped::default();
    let mut buf = vec![0u8; 16 * 1024];
    let mut status = None;
    let mut eof = false;
    let mut cut = None;
    let deadline = tokio::time::sleep(spec.timeout);
    tokio::pin!(deadline);
    while !(eof && status.is_some()) {
        tokio::select! {
            read = stdout.read(&mut buf), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => {
                    output.push(&buf[..n], spec.max_output);
                    if output.truncated() {
                        cut = Some(Outcome::Truncated);
                        break;
                    }
                }
            },
            exit = child.wait(), if status.is_none() => {
                status = Some(exit?);
                // The shell is gone; end whatever it left behind holding the pipe.
                guard.kill();
            },
            _ = &mut deadline => {
                cut = Some(Outcome::TimedOut);
                break;
            }
        }
    }
    guard.kill();
    if let Some(outcome) = cut {
        if status.is_none() {
            let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
        }
        return Ok(Finished {
            output: output.bytes,
            outcome,
        });
    }
    let outcome = match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => Outcome::Exited(code),
            (None, Some(sig)) => Outcome::Signaled(sig),
            (None, None) => Outcome::Exited(-1),
        },
        None => Outcome::Exited(-1),
    };
    Ok(Finished {
        output: output.bytes,
        outcome,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_passes_only_the_listed_variables() {
        let parent = |k: &str| match k {
            "HOME" => Some("/home/t".to_owned()),
            "KUBECONFIG" => Some("/k/config".to_owned()),
            "OPENAI_API_KEY" | "TRIAGE_TEST_SECRET" | "PATH" => Some("secret".to_owned()),
            // Every AWS credential the Bedrock provider reads stays out of the commands.
            "AWS_ACCESS_KEY_ID"
            | "AWS_SECRET_ACCESS_KEY"
            | "AWS_SESSION_TOKEN"
            | "AWS_BEARER_TOKEN_BEDROCK"
            | "AWS_PROFILE"
            | "AWS_SHARED_CREDENTIALS_FILE"
            | "AWS_WEB_IDENTITY_TOKEN_FILE"
            | "AWS_ROLE_ARN"
            | "AWS_CONTAINER_CREDENTIALS_FULL_URI"
            | "AWS_CONTAINER_AUTHORIZATION_TOKEN"
            | "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE" => Some("aws-secret".to_owned()),
            _ => None,
        };
        let env = child_env(parent);
        assert_eq!(
            env,
            vec![
                ("PATH".to_owned(), SAFE_PATH.to_owned()),
                ("LANG".to_owned(), "C.UTF-8".to_owned()),
                ("HOME".to_owned(), "/home/t".to_owned()),
                ("KUBECONFIG".to_owned(), "/k/config".to_owned()),
            ]
        );
    }

    #[test]
    fn script_sets_the_limit_and_merges_stderr() {
        assert_eq!(
            script(800),
            "ulimit -v 819200 2>/dev/null; exec 2>&1; eval \"$1\""
        );
        assert_eq!(script(0), "exec 2>&1; eval \"$1\"");
    }
}
