//! What users and the model see of a kubectl run: the command line shown, a status from the
//! exit code, stdout cut at a line when over the cap, and stderr without klog's noise.

use crate::tools::ToolOutput;
use crate::wire::events::ToolStatus;

/// What one kubectl run produced.
#[derive(Debug)]
pub(super) struct RunOutput {
    /// Exit code; `None` when killed by a signal.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Vec<u8>,
    /// Bytes kubectl wrote to stdout in total (more than `stdout.len()` when cut).
    pub stdout_total: u64,
    pub stderr: Vec<u8>,
}

/// `kubectl <args>` as shown to users (the connection flags are left out).
pub(super) fn display_command(args: &[String]) -> String {
    let mut line = String::from("kubectl");
    for a in args {
        line.push(' ');
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
            line.push_str(&format!("{a:?}"));
        } else {
            line.push_str(a);
        }
    }
    line
}

/// True for klog's own log lines (`E1122 00:17:47.869604   26816 memcache.go:265] …`).
fn is_klog_line(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 6
        && matches!(b[0], b'I' | b'W' | b'E' | b'F')
        && b[1..5].iter().all(u8::is_ascii_digit)
        && b[5] == b' '
}

/// kubectl's stderr without klog noise (kept when it is all there is).
pub(super) fn clean_stderr(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let plain: Vec<&str> = lines.iter().copied().filter(|l| !is_klog_line(l)).collect();
    if plain.is_empty() {
        lines.join("\n")
    } else {
        plain.join("\n")
    }
}

/// The data text, cut at the last line break when kubectl printed more than the cap.
fn stdout_text(stdout: &[u8], total: u64, cap: usize) -> String {
    if total <= stdout.len() as u64 {
        return String::from_utf8_lossy(stdout).into_owned();
    }
    let cut = match stdout.iter().rposition(|&b| b == b'\n') {
        Some(i) if i > 0 => &stdout[..=i],
        _ => stdout,
    };
    let mut text = String::from_utf8_lossy(cut).into_owned();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!(
        "\n[output truncated: kubectl printed {total} bytes, only the first {} are shown \
         (limit {cap} bytes); narrow the query]",
        cut.len()
    ));
    text
}

pub(super) fn to_tool_output(out: RunOutput, cap: usize) -> ToolOutput {
    let data = stdout_text(&out.stdout, out.stdout_total, cap);
    let stderr = clean_stderr(&out.stderr);
    match out.code {
        Some(0) if data.trim().is_empty() => ToolOutput {
            status: ToolStatus::NoData,
            data: stderr,
            error: None,
            return_code: Some(0),
            invocation: None,
        },
        Some(0) => ToolOutput {
            status: ToolStatus::Success,
            data,
            error: None,
            return_code: Some(0),
            invocation: None,
        },
        code => {
            let error = if !stderr.is_empty() {
                stderr
            } else if let Some(c) = code {
                format!("kubectl exited with code {c}")
            } else {
                format!(
                    "kubectl was killed by signal {}",
                    out.signal.unwrap_or_default()
                )
            };
            ToolOutput {
                status: ToolStatus::Error,
                data,
                error: Some(error),
                return_code: code,
                invocation: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(code: Option<i32>, stdout: &str, stderr: &str) -> RunOutput {
        RunOutput {
            code,
            signal: if code.is_none() { Some(9) } else { None },
            stdout: stdout.as_bytes().to_vec(),
            stdout_total: stdout.len() as u64,
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    #[test]
    fn exit_codes_map_to_statuses() {
        let o = to_tool_output(out(Some(0), "NAME\nweb\n", "Warning: x\n"), 100);
        assert_eq!(o.status, ToolStatus::Success);
        assert_eq!(o.data, "NAME\nweb\n");
        assert_eq!(o.return_code, Some(0));

        let o = to_tool_output(
            out(Some(0), "", "No resources found in shop namespace.\n"),
            100,
        );
        assert_eq!(o.status, ToolStatus::NoData);
        assert_eq!(o.data, "No resources found in shop namespace.");

        let o = to_tool_output(
            out(
                Some(1),
                "",
                "E1122 00:17:47.869604   26816 memcache.go:265] noise\n\
                 Error from server (NotFound): pods \"x\" not found\n",
            ),
            100,
        );
        assert_eq!(o.status, ToolStatus::Error);
        assert_eq!(
            o.error.as_deref(),
            Some("Error from server (NotFound): pods \"x\" not found")
        );
        assert_eq!(o.return_code, Some(1));

        let o = to_tool_output(out(Some(3), "", ""), 100);
        assert_eq!(o.error.as_deref(), Some("kubectl exited with code 3"));
        let o = to_tool_output(out(None, "", ""), 100);
        assert_eq!(o.error.as_deref(), Some("kubectl was killed by signal 9"));
        assert_eq!(o.return_code, None);
    }

    #[test]
    fn long_output_is_cut_at_a_line_with_a_note() {
        let full = "line one\nline two\nline three\n";
        let o = to_tool_output(
            RunOutput {
                code: Some(0),
                signal: None,
                stdout: full.as_bytes()[..14].to_vec(),
                stdout_total: full.len() as u64,
                stderr: vec![],
            },
            14,
        );
        assert!(
            o.data.starts_with("line one\n\n[output truncated"),
            "{}",
            o.data
        );
        assert!(o.data.contains("printed 29 bytes, only the first 9"));
    }

    #[test]
    fn klog_lines_are_recognised() {
        assert!(is_klog_line(
            "E1122 00:17:47.869604   26816 memcache.go:265] \"Unhandled Error\""
        ));
        assert!(!is_klog_line("Error from server (NotFound): x"));
        assert_eq!(
            clean_stderr(b"E1122 00:17:47 only klog\n"),
            "E1122 00:17:47 only klog"
        );
    }

    #[test]
    fn commands_are_displayed_like_a_shell_line() {
        let args: Vec<String> = ["get", "pods", "-n", "shop", "-o", "wide"]
            .map(String::from)
            .to_vec();
        assert_eq!(display_command(&args), "kubectl get pods -n shop -o wide");
        assert_eq!(display_command(&["a b".to_string()]), "kubectl \"a b\"");
    }
}
