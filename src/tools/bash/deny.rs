//! Matching commands against the user's `deny` entries. An entry must hold however the
//! command is spelled: with flags in between, plurals, `kind/name`, comma lists and, for
//! kubectl, every name the API server resolves to the same resource (`cm`, `ConfigMap`,
//! `configmaps.v1`) — a deny entry the model can respell is no limit at all.

/// Deny entries match the command name (also as a path's last part) and then each further
/// entry word in order anywhere among the arguments (so flags in between do not escape
/// them), tolerating plurals, `kind/name` and comma lists: `kubectl get secret` also denies
/// `kubectl -n x get secrets/a` and `kubectl get pods,secret`.
pub(super) fn deny_match(entry: &[String], words: &[&str]) -> bool {
    let Some((first, rest)) = entry.split_first() else {
        return false;
    };
    let Some((name, args)) = words.split_first() else {
        return false;
    };
    let base = name.rsplit('/').next().unwrap_or(name);
    if base != first && name != first {
        return false;
    }
    let kubectl = matches!(first.as_str(), "kubectl" | "oc");
    let mut args = args.iter();
    rest.iter().all(|e| {
        args.by_ref().any(|w| {
            w.split(',')
                .any(|el| deny_word(e, el) || (kubectl && same_resource(e, el)))
        })
    })
}

fn deny_word(entry: &str, word: &str) -> bool {
    [entry.to_owned(), format!("{entry}s")].iter().any(|e| {
        word.strip_prefix(e.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// Whether two kubectl words name the same resource type (or the same subcommand): compared
/// without case, group, version or object name, short names expanded, in the singular.
fn same_resource(entry: &str, word: &str) -> bool {
    !entry.contains('/') && !entry.starts_with('-') && resource(entry) == resource(word)
}

/// Short names of the built-in resources (`kubectl api-resources`).
const SHORT_NAMES: &[(&str, &str)] = &[
    ("cs", "componentstatuses"),
    ("cm", "configmaps"),
    ("ep", "endpoints"),
    ("ev", "events"),
    ("limits", "limitranges"),
    ("ns", "namespaces"),
    ("no", "nodes"),
    ("pvc", "persistentvolumeclaims"),
    ("pv", "persistentvolumes"),
    ("po", "pods"),
    ("rc", "replicationcontrollers"),
    ("quota", "resourcequotas"),
    ("sa", "serviceaccounts"),
    ("svc", "services"),
    ("crd", "customresourcedefinitions"),
    ("crds", "customresourcedefinitions"),
    ("ds", "daemonsets"),
    ("deploy", "deployments"),
    ("rs", "replicasets"),
    ("sts", "statefulsets"),
    ("hpa", "horizontalpodautoscalers"),
    ("cj", "cronjobs"),
    ("csr", "certificatesigningrequests"),
    ("ing", "ingresses"),
    ("netpol", "networkpolicies"),
    ("pdb", "poddisruptionbudgets"),
    ("pc", "priorityclasses"),
    ("sc", "storageclasses"),
];

/// The resource a kubectl word names, lower-case and singular: `ConfigMaps.v1/x` → `configmap`.
fn resource(word: &str) -> String {
    let lower = word.to_lowercase();
    let name = lower.split('/').next().unwrap_or(&lower);
    let name = name.split('.').next().unwrap_or(name);
    let name = SHORT_NAMES
        .iter()
        .find(|(short, _)| *short == name)
        .map_or(name, |(_, full)| full);
    singular(name)
}

fn singular(name: &str) -> String {
    if let Some(stem) = name.strip_suffix("ies") {
        format!("{stem}y")
    } else if name.ends_with("sses") || name.ends_with("uses") {
        name[..name.len() - 2].to_owned()
    } else if name.ends_with('s') && !name.ends_with("ss") && !name.ends_with("us") {
        name[..name.len() - 1].to_owned()
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    fn denies(e: &str, command: &str) -> bool {
        let words: Vec<&str> = command.split_whitespace().collect();
        deny_match(&entry(e), &words)
    }

    /// kubectl resolves all of these to configmaps: a deny entry must too.
    #[test]
    fn kubectl_resource_spellings_are_denied() {
        for command in [
            "kubectl get configmap x",
            "kubectl get configmaps",
            "kubectl get cm x",
            "kubectl get CM",
            "kubectl get ConfigMap x",
            "kubectl get configmaps.v1 x",
            "kubectl get configmap.v1. x",
            "kubectl get cm/x",
            "kubectl get all,cm",
            "kubectl -n x get Cm",
            "/usr/bin/kubectl get cm",
        ] {
            assert!(denies("kubectl get configmap", command), "{command}");
        }
        assert!(denies("kubectl get networkpolicy", "kubectl get netpol"));
        assert!(denies("kubectl get ingresses", "kubectl get ing"));
        assert!(denies(
            "kubectl get ingress",
            "kubectl get Ingresses.networking.k8s.io"
        ));
        assert!(denies("kubectl get componentstatus", "kubectl get cs"));
        assert!(denies("kubectl Rollout", "kubectl rollout restart x"));
        assert!(!denies("kubectl get configmap", "kubectl get pods"));
        assert!(!denies("kubectl get configmap", "kubectl get csr"));
        assert!(!denies("kubectl rollout", "kubectl get pods -l rollout=x"));
        assert!(denies("kubectl get secret", "kubectl get secret/x"));
        assert!(!denies("rm", "ls rm"));
    }
}
