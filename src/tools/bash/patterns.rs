//! Glob and brace reasoning: what a word with a pattern (`/etc/sha*`, `{a,b}`) could match,
//! judged from the pattern alone against the sensitive paths.

use super::parse::Word;
use super::sensitive_paths::{
    PathPolicy, SENSITIVE_COMPONENTS, SENSITIVE_PROC_FILES, canonical_path, sensitive_path,
};

/// A brace expansion with more words than this is not followed.
const MAX_BRACE_WORDS: usize = 64;
/// Nor one longer than this, or with more groups: the check must stay cheap.
const MAX_BRACE_WORD_LEN: usize = 4096;
const MAX_BRACE_GROUPS: usize = 16;

/// Why a word with a glob or a brace expansion is refused: it can reach a sensitive path, or
/// it is too complex to tell. Judged from the pattern alone, never by walking directories
/// (`/*/*/*/*/*/*/x` would read millions of entries, a network mount could hang).
pub(super) fn pattern_reaches_sensitive(w: &Word, policy: &impl PathPolicy) -> Option<String> {
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
                format!("{}/{word}", policy.cwd())
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
fn glob_reaches(path: &str, policy: &impl PathPolicy) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::super::policy::{Verdict, classify};
    use super::super::policy_tests::{Kind::*, assert_all, policy};
    use super::*;

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
}
