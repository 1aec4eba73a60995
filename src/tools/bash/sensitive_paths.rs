//! Path reasoning about sensitive paths: which paths are never named, and whether a word
//! names one (after normalisation, relative to the working directory, or through a link).

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

/// Lexical normalisation: `//`, `.` and `..` resolved, relative paths kept relative.
pub(super) fn normalize(path: &str) -> String {
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

/// The path with every link resolved, if it exists and is UTF-8.
pub(super) fn canonical_path(path: &str) -> Option<String> {
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
/// What the path checks need of a command's policy: where its relative paths start, and
/// every path it keeps commands from. A trait so that this file and `patterns.rs` sit below
/// `policy.rs`, which implements it.
pub(super) trait PathPolicy {
    fn cwd(&self) -> &str;
    fn sensitive_paths(&self) -> Vec<String>;
}

pub(super) fn sensitive_path(word: &str, policy: &impl PathPolicy) -> Option<String> {
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
            normalize(&format!("{}/{cand}", policy.cwd()))
        };
        // A link names what it points to (`/tmp/x -> /etc/shadow`): paths that exist are
        // also checked under their real name, resolved as the kernel does (`link/..` is the
        // parent of the link's target, not the link's own directory). A bare name is followed
        // only when it is a link, so that under cwd `/` the word `root` stays a word.
        let raw = if cand.starts_with('/') {
            cand.to_owned()
        } else {
            format!("{}/{cand}", policy.cwd())
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
    use super::super::policy::{Verdict, classify};
    use super::super::policy_tests::policy;
    use super::*;

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
    fn path_helpers() {
        assert_eq!(normalize("/a//b/./c/../d"), "/a/b/d");
        assert_eq!(normalize("/../etc"), "/etc");
        assert_eq!(normalize("a/../../b"), "../b");
        assert!(contains_path("-f/etc/shadow", "/etc/shadow"));
        assert!(contains_path("/etc/shadow-", "/etc/shadow"));
        assert!(!contains_path("/etc/shadowx", "/etc/shadow"));
        assert!(!starts_with_path("/rootfs", "/root"));
    }
}
