//! A stdio MCP server as a tool process: spawned through the sandbox like a bash command
//! (Landlock, the tools' user, limits, a private `TMPDIR` that is also its `HOME` and working
//! directory, the process guard that kills it with triage), with a clean environment plus the
//! server's `env`, in its own process group that is killed when the session ends. It may read
//! where it is installed ([`super::install`]).

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::install::{advice, denied_path, install_grants};
use crate::sandbox::{Approval, CallDir, Grants, Sandbox};
use crate::tools::bash::run::{SAFE_PATH, child_env};

/// The last lines a server wrote to stderr, kept for its status when it dies.
const STDERR_TAIL_BYTES: usize = 2048;

/// A running server process; dropping it kills the group and removes its directory.
pub struct ServerProcess {
    child: Child,
    pgid: Option<i32>,
    stderr_tail: Arc<Mutex<String>>,
    /// The first path the server said it could not open.
    denied: Arc<Mutex<Option<String>>>,
    /// Paths its command or arguments name that are triage's own, so not granted.
    refused: Vec<std::path::PathBuf>,
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

    /// Why the server may have failed in the sandbox, when its stderr or its arguments say:
    /// the path it could not open and the key that grants it.
    pub fn sandbox_advice(&self) -> Option<String> {
        let denied = self.denied.lock().ok().and_then(|d| d.clone());
        match (denied, self.refused.first()) {
            (Some(path), _) => Some(advice(&path)),
            (None, Some(own)) => Some(format!(
                "{} is triage's own (its configuration or data) and is not readable by tools",
                own.display()
            )),
            (None, None) => None,
        }
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
pub async fn spawn(
    sandbox: &Sandbox,
    server: &str,
    command: &str,
    args: &[String],
    env: &[(String, String)],
) -> std::io::Result<(ServerProcess, ChildStdout, ChildStdin)> {
    let install = install_grants(sandbox, command, args, SAFE_PATH);
    if !install.read.is_empty() {
        tracing::debug!(mcp_server = %server, read = ?install.read, "install locations granted");
    }
    for own in &install.refused {
        tracing::warn!(mcp_server = %server, path = %own.display(),
            "an argument of the MCP server names triage's own file or a directory holding one: not readable by it");
    }
    let grants = Grants {
        read: install.read,
        write: Vec::new(),
    };
    let mut cmd = Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(child_env(|_| None))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let (mut child, dir) = sandbox
        .spawn(cmd, &grants, Approval::NotApproved, |cmd, dir| {
            // npm, pip and friends want a HOME they can write: the private directory.
            cmd.env("HOME", dir);
            cmd.envs(env.iter().map(|(k, v)| (k, v)));
        })
        .await?;
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
    let denied = Arc::new(Mutex::new(None));
    tokio::spawn(keep_stderr_tail(
        stderr,
        server.to_owned(),
        stderr_tail.clone(),
        denied.clone(),
    ));
    Ok((
        ServerProcess {
            child,
            pgid,
            stderr_tail,
            denied,
            refused: install.refused,
            _dir: dir,
        },
        stdout,
        stdin,
    ))
}

/// Logs the server's stderr line by line and keeps its last bytes in `tail`, and in `denied`
/// the first path a line says could not be opened (a stack trace may push that line out of
/// the tail: Node ends with its version). Reads in chunks
/// and cuts a line at the tail's size: a server writing one endless line (no `\n`) would
/// otherwise grow a line buffer in triage until the memory ran out.
async fn keep_stderr_tail(
    mut stderr: impl AsyncRead + Unpin,
    name: String,
    tail: Arc<Mutex<String>>,
    denied: Arc<Mutex<Option<String>>>,
) {
    let mut chunk = [0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let read = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for piece in chunk[..read].split_inclusive(|b| *b == b'\n') {
            let room = STDERR_TAIL_BYTES.saturating_sub(line.len());
            let ended = piece.ends_with(b"\n");
            let body = piece.strip_suffix(b"\n").unwrap_or(piece);
            line.extend_from_slice(&body[..body.len().min(room)]);
            if ended || line.len() >= STDERR_TAIL_BYTES {
                let text = String::from_utf8_lossy(&line).into_owned();
                tracing::debug!(mcp_server = %name, "{text}");
                if let Some(path) = denied_path(&text)
                    && let Ok(mut first) = denied.lock()
                {
                    first.get_or_insert(path);
                }
                push_tail(&tail, &text);
                line.clear();
            }
        }
    }
}

fn push_tail(tail: &Mutex<String>, line: &str) {
    let Ok(mut t) = tail.lock() else { return };
    t.push_str(line);
    t.push('\n');
    if t.len() > STDERR_TAIL_BYTES {
        let cut = t.len() - STDERR_TAIL_BYTES;
        let at = (cut..t.len())
            .find(|i| t.is_char_boundary(*i))
            .unwrap_or(t.len());
        t.drain(..at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hostile server writes megabytes of stderr without a newline and then stays quiet:
    /// what it wrote still reaches the tail, bounded, instead of waiting in a line buffer
    /// that grows as long as it writes.
    #[tokio::test]
    async fn an_endless_stderr_line_is_cut_not_buffered() {
        let flood = tokio::io::repeat(b'x').take(8 * 1024 * 1024);
        let (quiet, _keep_open) = tokio::io::duplex(1);
        let tail = Arc::new(Mutex::new(String::new()));
        let task = tokio::spawn(keep_stderr_tail(
            flood.chain(quiet),
            "hostile".into(),
            tail.clone(),
            Arc::new(Mutex::new(None)),
        ));
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let len = tail.lock().map(|t| t.len()).unwrap_or(0);
            if len > 0 {
                assert!(len <= STDERR_TAIL_BYTES + 1, "{len}");
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the tail stayed empty"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        task.abort();
    }
}
