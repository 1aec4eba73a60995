//! Allowed programs that read what the path checks cannot see: a file named in two parts
//! (a directory in one word, the name in another), or the environment of other processes.

/// Why `jq` with these arguments must not run: a module directive reads a file from a search
/// path, so `jq -n 'import "key" as $k {search: "/var/run/gcp"}; $k'` prints
/// `/var/run/gcp/key.json` although no word names that file. `-L DIR` sets the search path
/// too. jq filters never need modules to troubleshoot.
pub(super) fn jq_modules(base: &str, args: &[&str]) -> Option<String> {
    if base != "jq" {
        return None;
    }
    let library_path = args
        .iter()
        .take_while(|a| **a != "--args" && **a != "--jsonargs")
        .find(|a| a.starts_with("-L") || a.starts_with("--library-path"));
    let directive = args.iter().find_map(|a| {
        ["import", "include"]
            .into_iter()
            .find(|k| has_keyword(a, k))
    });
    let what = match (library_path, directive) {
        (Some(flag), _) => format!("`jq {flag}`"),
        (None, Some(keyword)) => format!("a jq `{keyword}` directive"),
        (None, None) => return None,
    };
    Some(format!(
        "{what} is not allowed: jq would read a module or data file from a search path, \
         where it cannot be checked for sensitive paths"
    ))
}

/// Whether `keyword` occurs in `text` as a word of its own (not `.import`, `$include`,
/// `imports`). Inside a string it counts too: refusing such a filter is safe.
fn has_keyword(text: &str, keyword: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(keyword).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + keyword.len()..].chars().next();
        !before.is_some_and(|c| ident(c) || c == '.' || c == '$') && !after.is_some_and(ident)
    })
}

/// Why `ps` with these arguments must not run: BSD `e` and the `environ` format print the
/// environment of processes (triage's own included), which holds credentials.
pub(super) fn ps_environment(base: &str, args: &[&str]) -> Option<String> {
    if base != "ps" {
        return None;
    }
    let bsd_e = args.iter().any(|a| !a.starts_with('-') && a.contains('e'));
    let environ_format = args.iter().any(|a| a.to_lowercase().contains("environ"));
    (bsd_e || environ_format).then(|| {
        "`ps e` and `ps -o environ` print the environment of processes, which holds credentials"
            .into()
    })
}

#[cfg(test)]
mod tests {
    use super::super::{BuiltinAllowlist, Policy, Verdict, classify};

    fn policy() -> Policy {
        Policy::new(BuiltinAllowlist::Extended, &[], &[], None, "/tmp".into())
            .with_sensitive_paths(["/var/run/gcp/key.json".to_owned()])
    }

    /// A credentials file named by its directory and its name in separate places.
    #[test]
    fn jq_modules_are_refused() {
        let p = policy();
        for cmd in [
            "jq -n 'import \"key\" as $k {search: \"/var/run/gcp\"}; $k'",
            "jq -n -L /var/run/gcp 'import \"key\" as $k; $k'",
            "jq -n -L/var/run/gcp '1'",
            "jq -n --library-path /var/run/gcp '1'",
            "jq -n 'include \"key\"; 1'",
            "jq -n '#c\ninclude \"key\" {search: \"/var/run/gcp\"}; 1'",
            "jq -n 'import\"key\"as$k;$k'",
        ] {
            let got = classify(cmd, &p);
            assert!(matches!(got, Verdict::Refused(_)), "{cmd:?}: {got:?}");
        }
        for cmd in [
            "jq '.imports'",
            "jq '.include_paths'",
            "jq '$important'",
            "jq -r '.items[] | .metadata.name'",
            "jq -n --arg L x '$L'",
        ] {
            assert_eq!(classify(cmd, &p), Verdict::Allowed, "{cmd:?}");
        }
    }

    #[test]
    fn ps_environment_is_refused() {
        let p = policy();
        for cmd in [
            "ps e",
            "ps auxe",
            "ps -o pid,environ",
            "ps -eo environ",
            "ps --format=pid,ENVIRON",
            "ps -O environ",
        ] {
            let got = classify(cmd, &p);
            assert!(matches!(got, Verdict::Refused(_)), "{cmd:?}: {got:?}");
        }
        for cmd in ["ps -ef", "ps aux", "ps -eo pid,args"] {
            assert_eq!(classify(cmd, &p), Verdict::Allowed, "{cmd:?}");
        }
    }
}
