//! The `kubernetes` toolset driving the REAL `kubectl` against the API stand-in
//! ([`crate::kube_standin`]): real kubectl output, errors and start-up checks.

use serde_json::json;
use triage::sandbox::{Sandbox, SandboxSettings};
use triage::tools::kubernetes::KubernetesConfig;
use triage::tools::{ToolOutput, Toolset, ToolsetStatus};
use triage::wire::events::ToolStatus;

use crate::helpers::{call, tool};
use crate::kube_standin::{self, *};

/// These tests need kubectl; say so loudly instead of passing without it.
fn require_kubectl() {
    let ok = std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "kubectl is not installed (no working `kubectl` on PATH): the kubernetes toolset tests \
         drive the real kubectl; `.ci/run` installs Debian's `kubernetes-client` package \
         (apt-get install kubernetes-client)"
    );
}

/// The toolset as triage builds it: kubectl in the default sandbox.
async fn toolset(cfg: &KubernetesConfig) -> Toolset {
    let sandbox = Sandbox::new(&SandboxSettings::default(), &[], &[]).expect("the default sandbox");
    triage::tools::kubernetes::toolset(cfg, &sandbox).await
}

fn ok(out: &ToolOutput) -> &str {
    assert_eq!(out.status, ToolStatus::Success, "{out:?}");
    assert_eq!(out.return_code, Some(0), "{out:?}");
    &out.data
}

async fn standin_toolset(standin: &KubeStandin) -> Toolset {
    let ts = toolset(&KubernetesConfig {
        kubeconfig: Some(standin.kubeconfig_path().to_owned()),
        cache_dir: Some(standin.cache_dir()),
        ..KubernetesConfig::default()
    })
    .await;
    assert_eq!(ts.status, ToolsetStatus::Enabled);
    ts
}

#[tokio::test]
async fn get_describe_and_errors_with_real_kubectl() {
    require_kubectl();
    let standin = kube_standin::start().await;
    let ts = standin_toolset(&standin).await;

    let params = json!({"kind": "pods", "namespace": NAMESPACE});
    assert_eq!(
        tool(&ts, "kubectl_get_by_kind_in_namespace").one_liner(&params),
        "kubectl get pods -n default -o wide"
    );
    let out = call(&ts, "kubectl_get_by_kind_in_namespace", params).await;
    let text = ok(&out);
    assert_eq!(
        out.invocation.as_deref(),
        Some("kubectl get pods -n default -o wide")
    );
    for header in ["NAME", "READY", "STATUS", "RESTARTS", "IP", "NODE"] {
        assert!(text.starts_with("NAME") && text.contains(header), "{text}");
    }
    let crash_line = text
        .lines()
        .find(|l| l.starts_with(POD_CRASH))
        .unwrap_or_else(|| panic!("no {POD_CRASH} row in\n{text}"));
    assert!(crash_line.contains("0/1"), "{crash_line}");
    assert!(crash_line.contains("CrashLoopBackOff"), "{crash_line}");
    assert!(
        crash_line.contains(&format!("{CRASH_RESTARTS} (")),
        "{crash_line}"
    );
    for pod in [POD_OK, POD_OK_2] {
        let line = text.lines().find(|l| l.starts_with(pod));
        assert!(
            line.is_some_and(|l| l.contains("1/1") && l.contains("Running") && l.contains(NODE)),
            "{text}"
        );
    }

    let out = call(
        &ts,
        "kubectl_get_by_name",
        json!({"kind": "pod", "name": POD_CRASH, "namespace": NAMESPACE}),
    )
    .await;
    let text = ok(&out);
    assert!(
        text.contains(POD_CRASH) && text.contains("CrashLoopBackOff"),
        "{text}"
    );
    assert!(!text.contains(POD_OK), "{text}");

    let out = call(
        &ts,
        "kubectl_get_by_kind_in_cluster",
        json!({"kind": "pods"}),
    )
    .await;
    let text = ok(&out);
    assert!(text.starts_with("NAMESPACE"), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("default ")).count(),
        3,
        "{text}"
    );

    let params = json!({"kind": "pod", "name": POD_CRASH, "namespace": NAMESPACE});
    assert_eq!(
        tool(&ts, "kubectl_describe").one_liner(&params),
        format!("kubectl describe pod {POD_CRASH} -n default")
    );
    let out = call(&ts, "kubectl_describe", params).await;
    let text = ok(&out);
    for needle in [
        format!("Name:             {POD_CRASH}"),
        "Namespace:        default".into(),
        format!("Node:             {NODE}/"),
        "Reason:       CrashLoopBackOff".into(),
        "Exit Code:    2".into(),
        format!("Restart Count:  {CRASH_RESTARTS}"),
        "registry.example.com/checkout:2.3.1".into(),
        format!("Warning  {CRASH_EVENT_REASON}"),
    ] {
        assert!(text.contains(&needle), "describe lacks {needle:?}:\n{text}");
    }

    // kubectl's own NotFound error and exit code.
    let out = call(
        &ts,
        "kubectl_get_by_name",
        json!({"kind": "pod", "name": "nope", "namespace": NAMESPACE}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Error, "{out:?}");
    assert_eq!(
        out.error.as_deref(),
        Some("Error from server (NotFound): pods \"nope\" not found")
    );
    assert!(out.return_code.is_some_and(|c| c != 0), "{out:?}");
    let out = call(
        &ts,
        "kubectl_describe",
        json!({"kind": "pod", "name": "nope", "namespace": NAMESPACE}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Error, "{out:?}");
    assert!(
        out.error
            .as_deref()
            .is_some_and(|e| e.contains("not found")),
        "{out:?}"
    );

    // "No resources found" is no data, not an error.
    let out = call(
        &ts,
        "kubectl_get_by_kind_in_namespace",
        json!({"kind": "pods", "namespace": "empty"}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::NoData, "{out:?}");
    assert_eq!(out.data, "No resources found in empty namespace.");

    // A kind the server does not have.
    let out = call(
        &ts,
        "kubectl_get_by_kind_in_namespace",
        json!({"kind": "widgets", "namespace": NAMESPACE}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Error, "{out:?}");
    assert!(
        out.error
            .as_deref()
            .is_some_and(|e| e.contains("doesn't have a resource type \"widgets\"")),
        "{out:?}"
    );

    // Refused before kubectl runs: secrets and flag injection.
    let out = call(
        &ts,
        "kubectl_get_by_kind_in_namespace",
        json!({"kind": "secrets", "namespace": NAMESPACE}),
    )
    .await;
    assert_eq!(out.error.as_deref(), Some("reading secrets is not allowed"));
    let out = call(
        &ts,
        "kubectl_get_by_name",
        json!({"kind": "pod", "name": "--kubeconfig=/x"}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(
        out.error
            .as_deref()
            .is_some_and(|e| e.starts_with("invalid parameter `name`"))
    );
    assert!(
        standin.seen().iter().all(|r| !r.path.contains("secret")),
        "a secret was requested"
    );
    assert_eq!(
        standin.unknown(),
        Vec::<String>::new(),
        "kubectl asked for paths the stand-in lacks"
    );
}

#[tokio::test]
async fn logs_events_and_top_with_real_kubectl() {
    require_kubectl();
    let standin = kube_standin::start().await;
    let ts = standin_toolset(&standin).await;

    let params = json!({"pod": POD_CRASH, "namespace": NAMESPACE});
    assert_eq!(
        tool(&ts, "kubectl_logs").one_liner(&params),
        format!("kubectl logs {POD_CRASH} -n default --tail=500")
    );
    let current = call(&ts, "kubectl_logs", params).await;
    assert_eq!(ok(&current), CRASH_LOG_CURRENT);
    let previous = call(
        &ts,
        "kubectl_logs",
        json!({"pod": POD_CRASH, "namespace": NAMESPACE, "previous": true}),
    )
    .await;
    assert_eq!(ok(&previous), CRASH_LOG_PREVIOUS);
    assert_ne!(current.data, previous.data);
    let last = call(
        &ts,
        "kubectl_logs",
        json!({"pod": POD_CRASH, "namespace": NAMESPACE, "previous": true, "tail_lines": 1,
               "container": "checkout", "since": "1h"}),
    )
    .await;
    assert_eq!(ok(&last), "panic: database unavailable\n");
    let logs_query = standin
        .seen()
        .into_iter()
        .rev()
        .find(|r| r.path.ends_with("/log"))
        .map(|r| r.query)
        .unwrap_or_default();
    for part in [
        "container=checkout",
        "previous=true",
        "tailLines=1",
        "sinceSeconds=3600",
    ] {
        assert!(logs_query.contains(part), "{logs_query}");
    }
    let out = call(
        &ts,
        "kubectl_logs",
        json!({"pod": POD_OK, "namespace": NAMESPACE}),
    )
    .await;
    assert_eq!(ok(&out), OK_LOG);
    let out = call(
        &ts,
        "kubectl_logs",
        json!({"pod": POD_OK, "namespace": NAMESPACE, "previous": true}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Error, "{out:?}");
    assert!(
        out.error
            .as_deref()
            .is_some_and(|e| e.contains("previous terminated container \"nginx\"")),
        "{out:?}"
    );
    let out = call(
        &ts,
        "kubectl_logs",
        json!({"pod": "nope", "namespace": NAMESPACE}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Error, "{out:?}");
    // kubectl logs words it its own way.
    assert_eq!(
        out.error.as_deref(),
        Some(
            "error: error from server (NotFound): pods \"nope\" not found in namespace \"default\""
        )
    );
    assert!(out.return_code.is_some_and(|c| c != 0));

    let params = json!({"namespace": NAMESPACE});
    assert_eq!(
        tool(&ts, "kubectl_events").one_liner(&params),
        "kubectl events -n default"
    );
    let out = call(&ts, "kubectl_events", params).await;
    let text = ok(&out);
    assert!(text.starts_with("LAST SEEN"), "{text}");
    let backoff = text
        .lines()
        .find(|l| l.contains(CRASH_EVENT_REASON))
        .unwrap_or_else(|| panic!("no {CRASH_EVENT_REASON} event in\n{text}"));
    assert!(
        backoff.contains("Warning") && backoff.contains(CRASH_EVENT_MESSAGE),
        "{backoff}"
    );
    assert!(text.contains("Started container nginx"), "{text}");

    let out = call(
        &ts,
        "kubectl_events",
        json!({"namespace": NAMESPACE, "for_object": format!("pod/{POD_CRASH}")}),
    )
    .await;
    let text = ok(&out);
    assert!(text.contains(CRASH_EVENT_REASON), "{text}");
    assert!(!text.contains("Started container nginx"), "{text}");

    let out = call(&ts, "kubectl_events", json!({})).await;
    let text = ok(&out);
    assert!(
        text.starts_with("NAMESPACE") && text.contains(CRASH_EVENT_REASON),
        "{text}"
    );

    // No metrics API behind the stand-in, as on a cluster without metrics-server.
    for (name, params) in [
        ("kubectl_top_pods", json!({"namespace": NAMESPACE})),
        ("kubectl_top_nodes", json!({})),
    ] {
        let out = call(&ts, name, params).await;
        assert_eq!(out.status, ToolStatus::Error, "{out:?}");
        assert_eq!(
            out.error.as_deref(),
            Some("error: Metrics API not available")
        );
    }
}

#[tokio::test]
async fn unreachable_cluster_makes_the_toolset_unavailable() {
    require_kubectl();
    // A port that was just free: connection refused.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let dir = unique_temp_dir("kube-closed");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        kubeconfig_text(&format!("http://127.0.0.1:{port}")),
    )
    .expect("write kubeconfig");
    let started = std::time::Instant::now();
    let ts = toolset(&KubernetesConfig {
        kubeconfig: Some(kubeconfig),
        cache_dir: Some(dir.join("cache")),
        ..KubernetesConfig::default()
    })
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(started.elapsed() < std::time::Duration::from_secs(6));
    let ToolsetStatus::Unavailable(reason) = &ts.status else {
        panic!("expected unavailable, got {:?}", ts.status);
    };
    assert!(
        reason.starts_with("no cluster reachable: ")
            && reason.contains("connection")
            && reason.contains(&format!("127.0.0.1:{port}"))
            && reason.contains("refused"),
        "{reason}"
    );
    assert!(ts.tools.is_empty());

    // A kubeconfig that does not exist.
    let ts = toolset(&KubernetesConfig {
        kubeconfig: Some("/nonexistent/kubeconfig".into()),
        cache_dir: Some("/nonexistent/cache".into()),
        ..KubernetesConfig::default()
    })
    .await;
    assert!(
        matches!(&ts.status, ToolsetStatus::Unavailable(r) if r.contains("/nonexistent/kubeconfig")),
        "{:?}",
        ts.status
    );

    // A context the kubeconfig lacks.
    let standin = kube_standin::start().await;
    let ts = toolset(&KubernetesConfig {
        kubeconfig: Some(standin.kubeconfig_path().to_owned()),
        cache_dir: Some(standin.cache_dir()),
        context: Some("prod".into()),
        ..KubernetesConfig::default()
    })
    .await;
    assert!(
        matches!(&ts.status, ToolsetStatus::Unavailable(r) if r.contains("context \"prod\" does not exist")),
        "{:?}",
        ts.status
    );
}

#[tokio::test]
async fn missing_kubectl_makes_the_toolset_unavailable() {
    let ts = toolset(&KubernetesConfig {
        kubectl: "/nonexistent/kubectl".into(),
        ..KubernetesConfig::default()
    })
    .await;
    let ToolsetStatus::Unavailable(reason) = &ts.status else {
        panic!("expected unavailable, got {:?}", ts.status);
    };
    assert!(reason.starts_with("kubectl is not installed"), "{reason}");
    let ts = toolset(&KubernetesConfig {
        enabled: false,
        kubectl: "/nonexistent/kubectl".into(),
        ..KubernetesConfig::default()
    })
    .await;
    assert_eq!(ts.status, ToolsetStatus::Disabled);
}
