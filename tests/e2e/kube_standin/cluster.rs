//! The cluster the stand-in serves: namespace `default` on one node, two healthy pods and
//! one in CrashLoopBackOff, their logs and events. Timestamps are relative to the request.

use chrono::{DateTime, Duration as ChronoDuration, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::api::{qget, status_object};

/// The namespace holding the pods.
pub const NAMESPACE: &str = "default";
/// A healthy pod.
pub const POD_OK: &str = "web-5d8f7b6c9-x2k4p";
/// A second healthy pod.
pub const POD_OK_2: &str = "web-5d8f7b6c9-q9z7m";
/// The pod in CrashLoopBackOff.
pub const POD_CRASH: &str = "checkout-6c9b5f4d7-abcde";
/// Restarts of the crashing pod.
pub const CRASH_RESTARTS: u32 = 7;
/// Node the pods run on.
pub const NODE: &str = "node-1";
/// The crashing container's current log (it started again and waits).
pub const CRASH_LOG_CURRENT: &str = "2025-01-01T10:00:00Z INFO checkout v2.3.1 starting\n2025-01-01T10:00:01Z INFO connecting to postgres at db:5432\n";
/// The crashing container's previous log (why it died).
pub const CRASH_LOG_PREVIOUS: &str = "2025-01-01T09:59:00Z INFO checkout v2.3.1 starting\n2025-01-01T09:59:01Z FATAL could not connect to postgres at db:5432: connection refused\npanic: database unavailable\n";
/// The healthy pod's log.
pub const OK_LOG: &str =
    "10.244.0.1 - - \"GET /healthz HTTP/1.1\" 200\n10.244.0.1 - - \"GET / HTTP/1.1\" 200\n";
/// Reason of the warning event about the crashing pod.
pub const CRASH_EVENT_REASON: &str = "BackOff";
/// Message of that event.
pub const CRASH_EVENT_MESSAGE: &str = "Back-off restarting failed container checkout in pod checkout-6c9b5f4d7-abcde_default(6b0c1f2a-1111-4a4a-8888-000000000003)";

pub(super) fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

pub(super) fn ago(now: DateTime<Utc>, secs: i64) -> DateTime<Utc> {
    now - ChronoDuration::seconds(secs)
}

pub(super) fn namespace(now: DateTime<Utc>) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "uid": "6b0c1f2a-0000-4a4a-8888-000000000000",
                     "resourceVersion": "10", "creationTimestamp": ts(ago(now, 30 * 86_400))},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"}
    })
}

pub(super) fn node(now: DateTime<Utc>) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE, "uid": "6b0c1f2a-0000-4a4a-8888-0000000000aa",
                     "resourceVersion": "11", "creationTimestamp": ts(ago(now, 30 * 86_400)),
                     "labels": {"kubernetes.io/hostname": NODE}},
        "spec": {"podCIDR": "10.244.0.0/24"},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": ts(ago(now, 10)), "lastTransitionTime": ts(ago(now, 30 * 86_400))}],
            "addresses": [{"type": "InternalIP", "address": "192.168.1.10"}, {"type": "Hostname", "address": NODE}],
            "nodeInfo": {"kubeletVersion": "v1.32.4", "osImage": "Debian GNU/Linux 12 (bookworm)",
                         "kernelVersion": "6.1.0-28-amd64", "containerRuntimeVersion": "containerd://1.7.24",
                         "architecture": "amd64", "operatingSystem": "linux", "kubeProxyVersion": "v1.32.4",
                         "machineID": "", "systemUUID": "", "bootID": ""}
        }
    })
}

struct PodSpec {
    name: &'static str,
    uid: &'static str,
    ip: &'static str,
    app: &'static str,
    image: &'static str,
    crash: bool,
    age_secs: i64,
}

const POD_SPECS: [PodSpec; 3] = [
    PodSpec {
        name: POD_OK,
        uid: "6b0c1f2a-1111-4a4a-8888-000000000001",
        ip: "10.244.0.11",
        app: "web",
        image: "nginx:1.27",
        crash: false,
        age_secs: 3 * 3600,
    },
    PodSpec {
        name: POD_OK_2,
        uid: "6b0c1f2a-1111-4a4a-8888-000000000002",
        ip: "10.244.0.12",
        app: "web",
        image: "nginx:1.27",
        crash: false,
        age_secs: 3 * 3600,
    },
    PodSpec {
        name: POD_CRASH,
        uid: "6b0c1f2a-1111-4a4a-8888-000000000003",
        ip: "10.244.0.13",
        app: "checkout",
        image: "registry.example.com/checkout:2.3.1",
        crash: true,
        age_secs: 25 * 60,
    },
];

fn pod(p: &PodSpec, now: DateTime<Utc>) -> Value {
    let created = ago(now, p.age_secs);
    let container = if p.crash { "checkout" } else { "nginx" };
    let state = if p.crash {
        json!({
            "state": {"waiting": {"reason": "CrashLoopBackOff",
                "message": format!("back-off 5m0s restarting failed container={container} pod={}_{NAMESPACE}({})", p.name, p.uid)}},
            "lastState": {"terminated": {"exitCode": 2, "reason": "Error",
                "startedAt": ts(ago(now, 100)), "finishedAt": ts(ago(now, 98)),
                "containerID": "containerd://3f1e0c9b7a"}},
            "ready": false, "started": false, "restartCount": CRASH_RESTARTS,
        })
    } else {
        json!({
            "state": {"running": {"startedAt": ts(created)}},
            "lastState": {},
            "ready": true, "started": true, "restartCount": 0,
        })
    };
    let mut status = json!({
        "name": container,
        "image": p.image,
        "imageID": format!("{}@sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0", p.image),
        "containerID": "containerd://9a8b7c6d5e4f",
    });
    if let (Some(s), Some(extra)) = (status.as_object_mut(), state.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    let ready = if p.crash { "False" } else { "True" };
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": p.name,
            "namespace": NAMESPACE,
            "uid": p.uid,
            "resourceVersion": "4242",
            "creationTimestamp": ts(created),
            "labels": {"app": p.app, "pod-template-hash": "5d8f7b6c9"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": p.name.rsplit_once('-').map(|(rs, _)| rs).unwrap_or(p.name),
                "uid": "6b0c1f2a-2222-4a4a-8888-000000000001", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "containers": [{
                "name": container,
                "image": p.image,
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"limits": {"memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
                "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"
            }],
            "restartPolicy": "Always",
            "nodeName": NODE,
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "dnsPolicy": "ClusterFirst",
            "terminationGracePeriodSeconds": 30
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(created)},
                {"type": "Initialized", "status": "True", "lastTransitionTime": ts(created)},
                {"type": "ContainersReady", "status": ready, "lastTransitionTime": ts(created)},
                {"type": "Ready", "status": ready, "lastTransitionTime": ts(created)}
            ],
            "hostIP": "192.168.1.10",
            "hostIPs": [{"ip": "192.168.1.10"}],
            "podIP": p.ip,
            "podIPs": [{"ip": p.ip}],
            "startTime": ts(created),
            "qosClass": "Burstable",
            "containerStatuses": [status]
        }
    })
}

pub(super) fn pods(now: DateTime<Utc>) -> Vec<Value> {
    POD_SPECS.iter().map(|p| pod(p, now)).collect()
}

pub(super) fn find_pod(ns: &str, name: &str, now: DateTime<Utc>) -> Option<Value> {
    if ns != NAMESPACE {
        return None;
    }
    POD_SPECS
        .iter()
        .find(|p| p.name == name)
        .map(|p| pod(p, now))
}

pub(super) fn log_text(name: &str, q: &[(String, String)]) -> Result<String, Value> {
    let previous = qget(q, "previous") == Some("true");
    let spec = POD_SPECS.iter().find(|p| p.name == name);
    let crash = spec.is_some_and(|p| p.crash);
    let text = match (crash, previous) {
        (true, false) => CRASH_LOG_CURRENT.to_owned(),
        (true, true) => CRASH_LOG_PREVIOUS.to_owned(),
        (false, false) => OK_LOG.to_owned(),
        (false, true) => {
            let container = "nginx";
            return Err(status_object(
                400,
                "BadRequest",
                &format!(
                    "previous terminated container \"{container}\" in pod \"{name}\" not found"
                ),
                None,
            ));
        }
    };
    Ok(
        match qget(q, "tailLines").and_then(|n| n.parse::<usize>().ok()) {
            Some(n) => {
                let lines: Vec<&str> = text.lines().collect();
                let start = lines.len().saturating_sub(n);
                lines[start..].iter().map(|l| format!("{l}\n")).collect()
            }
            None => text,
        },
    )
}

/// One core v1 event about a pod.
struct Ev {
    name: String,
    object: &'static str,
    uid: &'static str,
    field_path: &'static str,
    typ: &'static str,
    reason: &'static str,
    message: String,
    count: u32,
    first_ago: i64,
    last_ago: i64,
}

fn event(now: DateTime<Utc>, e: Ev) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": e.name, "namespace": NAMESPACE, "uid": format!("ev-{}", e.name),
                     "resourceVersion": "5000", "creationTimestamp": ts(ago(now, e.first_ago))},
        "involvedObject": {"kind": "Pod", "namespace": NAMESPACE, "name": e.object, "uid": e.uid,
                           "apiVersion": "v1", "fieldPath": e.field_path},
        "reason": e.reason,
        "message": e.message,
        "source": {"component": "kubelet", "host": NODE},
        "firstTimestamp": ts(ago(now, e.first_ago)),
        "lastTimestamp": ts(ago(now, e.last_ago)),
        "count": e.count,
        "type": e.typ,
        "eventTime": null,
        "reportingComponent": "kubelet",
        "reportingInstance": NODE
    })
}

pub(super) fn events(now: DateTime<Utc>) -> Vec<Value> {
    let crash_uid = POD_SPECS[2].uid;
    [
        Ev {
            name: format!("{POD_CRASH}.181a0b0c0d0e0f01"),
            object: POD_CRASH,
            uid: crash_uid,
            field_path: "spec.containers{checkout}",
            typ: "Normal",
            reason: "Pulled",
            message:
                "Container image \"registry.example.com/checkout:2.3.1\" already present on machine"
                    .into(),
            count: CRASH_RESTARTS + 1,
            first_ago: 25 * 60,
            last_ago: 100,
        },
        Ev {
            name: format!("{POD_CRASH}.181a0b0c0d0e0f02"),
            object: POD_CRASH,
            uid: crash_uid,
            field_path: "spec.containers{checkout}",
            typ: "Warning",
            reason: CRASH_EVENT_REASON,
            message: CRASH_EVENT_MESSAGE.into(),
            count: 42,
            first_ago: 24 * 60,
            last_ago: 20,
        },
        Ev {
            name: format!("{POD_OK}.181a0b0c0d0e0f03"),
            object: POD_OK,
            uid: POD_SPECS[0].uid,
            field_path: "spec.containers{nginx}",
            typ: "Normal",
            reason: "Started",
            message: "Started container nginx".into(),
            count: 1,
            first_ago: 3 * 3600,
            last_ago: 3 * 3600,
        },
    ]
    .into_iter()
    .map(|e| event(now, e))
    .collect()
}

/// Honours the `involvedObject.<field>=<value>` terms `kubectl describe`/`events --for` send.
pub(super) fn filter_events(items: Vec<Value>, q: &[(String, String)]) -> Vec<Value> {
    let Some(selector) = qget(q, "fieldSelector") else {
        return items;
    };
    let terms: Vec<(&str, &str)> = selector
        .split(',')
        .filter_map(|t| t.split_once('='))
        .map(|(k, v)| (k.trim_end_matches('='), v))
        .collect();
    items
        .into_iter()
        .filter(|ev| {
            terms.iter().all(|(k, v)| {
                let field = k.strip_prefix("involvedObject.").unwrap_or(k);
                match ev["involvedObject"][field].as_str() {
                    Some(actual) => actual == *v,
                    None => field == "metadata.namespace" || v.is_empty(),
                }
            })
        })
        .collect()
}
