//! A stdio MCP server as a tool process: spawned through the sandbox like a bash command
//! (Landlock, the tools' user, limits, a private `TMPDIR` that is also its `HOME` and working
//! directory, the process guard that kills it with triage), with a clean environment plus the
//! server's `env`, in its own process group that is killed when the session ends.

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::sandbox::{Approval, CallDir, Grants, Sandbox};
use crate::tools::bash::run::child_env;

/// The last lines a server wrote to stderr, kept for its status when it dies.
const STDERR_TAIL_BYTES: usize = 2048;

/// A running server process; dropping it kills the group and removes its directory.
pub struct ServerProcess {
    child: Child,
    pgid: Option<i32>,
    stderr_tail: Arc<Mutex<String>>,
    // Dropped after the group is killed (field order): nothing runs in it any more.
    _dir: CallDir,
}

impl ServerProcess {
    /// The process group id (the guard's pid), for operators and tests.
    pub fn pid(&self) -> Option<u32> {
        self.pgid.and_then(|p| u32::try_from(p).ok())
    }

    /// What the server last wrote to stderr, one line.
    pub fn stderr_tail(&self) -> String {
        let tail = self
            .stderr_tail
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default();
        tail.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// Whether the process has exited, and how.
    pub fn exit_status(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            _ => None,
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // SAFETY: killpg only sends a signal; `pgid` is the group created for this server
            // (process_group(0)), checked > 1 so it can never be our own group or init.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

/// Starts `command args` sandboxed; returns the process and its stdout/stdin for the MCP
/// transport.
pub fn spawn(
    sandbox: &Sandbox,
    server: &str,
    command: &str,
    args: &[String],
    env: &[(String, String)],
) -> std::io::Result<(ServerProcess, ChildStdout, ChildStdin)> {
    let mut cmd = Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(child_env(|_| None))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let dir = sandbox
        .prepare(&mut cmd, &Grants::default(), Approval::NotApproved)
        .map_err(std::io::Error::other)?;
    // npm, pip and friends want a HOME they can write: the private directory.
    cmd.env("HOME", dir.path());
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let mut child = cmd.spawn()?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .filter(|id| *id > 1);
    let (Some(stdout), Some(stdin), Some(stderr)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("no pipes to the server"));
    };
    let stderr_tail = Arc::new(Mutex::new(String::new()));
    let tail = stderr_tail.clone();
    let name = server.to_owned();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(mcp_server = %name, "{line}");
            if let Ok(mut t) = tail.lock() {
                t.push_str(&line);
                t.push('\n');
                if t.len() > STDERR_TAIL_BYTES {
                    let cut = t.len() - STDERR_TAIL_BYTES;
                    let at = (cut..t.len())
                        .find(|i| t.is_char_boundary(*i))
                        .unwrap_or(t.len());
                    t.drain(..at);
                }
            }
        }
    });
    Ok((
        ServerProcess {
            child,
            pgid,
            stderr_tail,
            _dir: dir,
        },
        stdout,
        stdin,
    ))
}
