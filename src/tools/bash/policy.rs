//! What may run: the user's `allow`/`deny` entries with the built-in lists, and [`classify`],
//! which turns a command into a [`Verdict`].

use super::allowlist::{
    BuiltinAllowlist, CORE_ALLOW, EXTENDED_ALLOW, RUNNERS, SHELLS, allow_match,
};
use super::deny::deny_match;
use super::evaluation;
use super::parse::{self, Analysis, Segment, Word};
use super::patterns::pattern_reaches_sensitive;
use super::program_checks::{hard_block, risky_option};
use super::sensitive_paths::{
    PathPolicy, SENSITIVE_PATHS, canonical_path, normalize, sensitive_path,
};

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

impl PathPolicy for Policy {
    fn cwd(&self) -> &str {
        &self.cwd
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
}
