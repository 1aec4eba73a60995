//! The allow-list rules: the built-in lists of commands allowed, never run or never named,
//! and how a user's `allow` entry matches a command's words.

use serde::{Deserialize, Serialize};

/// Which built-in allow list applies (`builtin_allowlist` in config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BuiltinAllowlist {
    /// Read-only kubectl and text filters.
    Core,
    /// `core` plus read-only file, process and network inspection.
    #[default]
    Extended,
    /// Nothing is allowed without approval except the user's `allow` entries.
    None,
}

/// Read-only commands allowed at the `core` level (prefixes matched word by word). Not
/// `kubectl config view`: its redaction spares auth-provider tokens (`id-token`,
/// `refresh-token`, `client-secret`) and credential plugins' `env` and `args`.
pub const CORE_ALLOW: &[&str] = &[
    "kubectl get",
    "kubectl describe",
    "kubectl logs",
    "kubectl top",
    "kubectl explain",
    "kubectl api-resources",
    "kubectl api-versions",
    "kubectl config current-context",
    "kubectl config get-contexts",
    "kubectl cluster-info",
    "kubectl version",
    "kubectl auth can-i",
    "kubectl events",
    "jq",
    "grep",
    "egrep",
    "fgrep",
    "head",
    "tail",
    "sort",
    "uniq",
    "wc",
    "cut",
    "tr",
    "id",
    "whoami",
    "hostname",
    "uname",
    "date",
    "which",
    "echo",
    "printf",
    "column",
    "nl",
    "tac",
    "rev",
];

/// Added at the `extended` level. Not `awk` (`system()`), `sed` (`e`, `w`) or `curl` (`-o`);
/// not `dig`, `nslookup`, `host` or `ping` either: a name looked up, a server asked or a ping
/// payload can carry what the model has read out of the network, so they need approval.
pub const EXTENDED_ALLOW: &[&str] = &[
    "cat",
    "ls",
    "find",
    "stat",
    "du",
    "df",
    "file",
    "base64",
    "free",
    "uptime",
    "ps",
    "ip addr show",
    "ip route show",
    "ip link show",
    "ss",
    "netstat",
];

/// Commands that run other commands, change which program a name runs, load code or change
/// privileges: never run. (`compgen -C`, `fc -e` and `trap` run commands; `hash -p` points a
/// name at another program; `enable -f` loads a builtin from a shared object.) A wrapper's
/// command is not checked, so with approval `stdbuf -o0 kubectl delete …` would escape a
/// `deny` entry; `time` (a keyword) is one too.
pub const RUNNERS: &[&str] = &[
    "sudo",
    "su",
    "doas",
    "pkexec",
    "runuser",
    "eval",
    "exec",
    "source",
    ".",
    "env",
    "xargs",
    "nohup",
    "timeout",
    "nice",
    "setsid",
    "chroot",
    "nsenter",
    "unshare",
    "busybox",
    "command",
    "builtin",
    "trap",
    "compgen",
    "fc",
    "hash",
    "enable",
    "time",
    "stdbuf",
    "ionice",
    "taskset",
    "chrt",
    "flock",
    "watch",
    "script",
    "strace",
    "ltrace",
    "setpriv",
    "capsh",
    "prlimit",
    "unbuffer",
    "parallel",
    "systemd-run",
    "sg",
    "newgrp",
    "numactl",
    "cgexec",
    "firejail",
    "bwrap",
    "catchsegv",
    "valgrind",
];

/// Options that name the files to read in a file or on stdin, out of the path checks' sight
/// (`find / -print0 | wc --files0-from=-` tells the size of every file found).
pub(super) const FILE_LIST_OPTIONS: &[(&str, &[&str])] = &[
    ("wc", &["--files0-from"]),
    ("du", &["--files0-from"]),
    ("sort", &["--files0-from"]),
    ("find", &["-files0-from"]),
    ("file", &["-f", "--files-from"]),
    ("tar", &["-T", "--files-from"]),
];

/// Shells: a nested shell (`-c`, a script, or commands piped in) hides what it runs.
pub const SHELLS: &[&str] = &[
    "bash", "sh", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh",
];

/// `find` actions that run commands, delete or write files.
pub const FIND_BLOCKED: &[&str] = &[
    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
];

/// Allow entries match a prefix of the words exactly; the entry's last word may also be
/// a path prefix (`cat /var/log` allows `cat /var/log/syslog`, not `/var/log/../x`).
pub(super) fn allow_match(entry: &[String], words: &[&str]) -> bool {
    let Some((last, init)) = entry.split_last() else {
        return false;
    };
    if words.len() < entry.len() || init.iter().zip(words).any(|(e, w)| e != w) {
        return false;
    }
    let w = words[init.len()];
    if w == last {
        return true;
    }
    let under = w
        .strip_prefix(last.as_str())
        .is_some_and(|rest| last.ends_with('/') && !rest.is_empty() || rest.starts_with('/'));
    under && !w.split('/').any(|c| c == "..")
}

#[cfg(test)]
mod tests {
    use super::super::deny::deny_match;
    use super::*;

    #[test]
    fn entries_match_by_words() {
        let e = |s: &str| vec![s.to_owned()];
        assert!(allow_match(
            &["kubectl".into(), "get".into()],
            &["kubectl", "get", "x"]
        ));
        assert!(!allow_match(
            &["kubectl".into(), "get".into()],
            &["kubectl", "getx"]
        ));
        assert!(!allow_match(
            &["kubectl".into(), "get".into()],
            &["kubectl"]
        ));
        assert!(deny_match(
            &["kubectl".into(), "get".into(), "secret".into()],
            &["kubectl", "get", "secret/x"]
        ));
        assert!(!deny_match(&e("rm"), &["ls", "rm"]));
    }
}
