//! Program-specific checks: the programs and options that are refused outright (runners,
//! shells, `find -exec`, file-name lists, kubectl's connection flags and Secrets) and the
//! options that make an otherwise read-only command need approval.

use super::allowlist::{FILE_LIST_OPTIONS, FIND_BLOCKED, RUNNERS, SHELLS};
use super::evaluation;
use super::hidden_reads;
use crate::tools::kubernetes;

pub(super) fn hard_block(base: &str, args: &[&str]) -> Option<String> {
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
    let names_secrets = args
        .iter()
        .any(|a| a.split(',').any(kubernetes::is_secret_resource));
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

/// Options that make an otherwise read-only command write files, run programs or change
/// the system.
pub(super) fn risky_option(name: &str, args: &[&str]) -> Option<&'static str> {
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

#[cfg(test)]
mod tests {
    use super::super::policy::classify;
    use super::super::policy_tests::{Kind::*, assert_all, kind, policy};

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
}
