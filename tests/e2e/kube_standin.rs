//! The smallest honest stand-in for a Kubernetes API server, for driving the REAL `kubectl`.
//!
//! No cluster can run on this machine: there is no container runtime and no kubelet, so
//! neither kind, k3s, minikube nor a real kube-apiserver + etcd pair is an option. Instead
//! this axum server on `127.0.0.1:0` speaks just enough of the real API for `kubectl`
//! (v1.32 here) to work unmodified against it:
//!
//! * `GET /version`;
//! * legacy discovery: `/api` (APIVersions), `/api/v1` (APIResourceList with pods, pods/log,
//!   events, namespaces, nodes), `/apis` (APIGroupList with `events.k8s.io/v1`) and
//!   `/apis/events.k8s.io/v1`. The aggregated-discovery Accept types kubectl asks for first
//!   are answered with plain `application/json`, which makes it fall back to legacy discovery;
//! * pods of namespace `default` (list, one, `/log` as plain text with a different text for
//!   `previous=true`), cluster-wide pods (`/api/v1/pods`), core v1 events (namespace and
//!   cluster-wide, honouring the `involvedObject.*` field selectors `kubectl describe` sends),
//!   the `default` namespace and one node;
//! * lists asked for as `application/json;as=Table;v=v1;g=meta.k8s.io` (what `kubectl get`
//!   requests) are answered with a server-side `meta.k8s.io/v1` Table, like the real server;
//! * anything else: a 404 `Status` object (and the path is recorded, see [`KubeStandin::unknown`]).
//!
//! There is no metrics API, so `kubectl top` fails here as on a cluster without metrics-server.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Duration as ChronoDuration, SecondsFormat, Utc};
use serde_json::{Value, json};

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

/// One request the stand-in saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub query: String,
    pub accept: String,
}

#[derive(Default)]
struct Inner {
    seen: Mutex<Vec<Seen>>,
    unknown: Mutex<Vec<String>>,
}

struct ServerTask(tokio::task::JoinHandle<()>);

impl Drop for ServerTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A running stand-in plus the kubeconfig pointing at it; dropping it stops the server and
/// deletes the kubeconfig's directory.
pub struct KubeStandin {
    inner: Arc<Inner>,
    addr: std::net::SocketAddr,
    dir: PathBuf,
    kubeconfig: PathBuf,
    _task: ServerTask,
}

impl Drop for KubeStandin {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts the stand-in and writes its kubeconfig.
pub async fn start() -> KubeStandin {
    let inner = Arc::new(Inner::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("kube stand-in: bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("kube stand-in: local_addr");
    let app = Router::new().fallback(handle).with_state(inner.clone());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let dir = unique_temp_dir("kube-standin");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_text(&format!("http://{addr}")))
        .expect("kube stand-in: write kubeconfig");
    KubeStandin {
        inner,
        addr,
        dir,
        kubeconfig,
        _task: ServerTask(task),
    }
}

impl KubeStandin {
    /// A kubeconfig (no auth) whose only context points at this server.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// A directory for kubectl's `--cache-dir`, so runs against the stand-in leave nothing
    /// in `~/.kube/cache` (it is removed with the stand-in).
    pub fn cache_dir(&self) -> PathBuf {
        self.dir.join("cache")
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Every request served so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.inner
            .seen
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// Paths answered with 404 because the stand-in does not know them.
    pub fn unknown(&self) -> Vec<String> {
        self.inner
            .unknown
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }
}

/// A fresh directory under the system temp dir (no tempfile crate here).
pub fn unique_temp_dir(prefix: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "{prefix}-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).expect("kube stand-in: create temp dir");
    dir
}

/// A kubeconfig with one cluster at `server`, no credentials.
pub fn kubeconfig_text(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster:\n    server: {server}\n\
         users:\n- name: standin\n  user: {{}}\ncontexts:\n- name: standin\n  context:\n    \
         cluster: standin\n    user: standin\n    namespace: default\ncurrent-context: standin\n"
    )
}

async fn handle(State(inner): State<Arc<Inner>>, uri: Uri, headers: HeaderMap) -> Response {
    let path = uri.path().trim_end_matches('/').to_owned();
    let query = uri.query().unwrap_or("").to_owned();
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if let Ok(mut seen) = inner.seen.lock() {
        seen.push(Seen {
            path: path.clone(),
            query: query.clone(),
            accept: accept.clone(),
        });
    }
    let table = accept.contains("as=Table");
    let q = parse_query(&query);
    let now = Utc::now();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let answer = match segs.as_slice() {
        ["version"] => Some(json(version())),
        ["api"] => Some(json(json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]
        }))),
        ["api", "v1"] => Some(json(core_resources())),
        ["apis"] => Some(json(api_groups())),
        ["apis", "events.k8s.io", "v1"] => Some(json(events_group_resources())),
        ["api", "v1", "namespaces"] => Some(list_or_table(
            "NamespaceList",
            vec![namespace(now)],
            table,
            now,
        )),
        ["api", "v1", "namespaces", ns] if *ns == NAMESPACE => Some(json(namespace(now))),
        ["api", "v1", "nodes"] => Some(list_or_table("NodeList", vec![node(now)], table, now)),
        ["api", "v1", "nodes", name] if *name == NODE => Some(if table {
            list_or_table("NodeList", vec![node(now)], true, now)
        } else {
            json(node(now))
        }),
        ["api", "v1", "nodes", name] => Some(not_found("nodes", name)),
        ["api", "v1", "pods"] => Some(list_or_table("PodList", pods(now), table, now)),
        ["api", "v1", "namespaces", ns, "pods"] => {
            let items = if *ns == NAMESPACE { pods(now) } else { vec![] };
            Some(list_or_table("PodList", items, table, now))
        }
        ["api", "v1", "namespaces", ns, "pods", name] => Some(match find_pod(ns, name, now) {
            Some(p) if table => list_or_table("PodList", vec![p], true, now),
            Some(p) => json(p),
            None => not_found("pods", name),
        }),
        ["api", "v1", "namespaces", ns, "pods", name, "log"] => {
            Some(match (find_pod(ns, name, now), log_text(name, &q)) {
                (Some(_), Ok(text)) => {
                    ([(header::CONTENT_TYPE, "text/plain")], text).into_response()
                }
                (Some(_), Err(status)) => json_status(StatusCode::BAD_REQUEST, status),
                (None, _) => not_found("pods", name),
            })
        }
        ["api", "v1", "events"] => Some(list_or_table(
            "EventList",
            filter_events(events(now), &q),
            table,
            now,
        )),
        ["api", "v1", "namespaces", ns, "events"] => {
            let items = if *ns == NAMESPACE {
                filter_events(events(now), &q)
            } else {
                vec![]
            };
            Some(list_or_table("EventList", items, table, now))
        }
        _ => None,
    };
    match answer {
        Some(r) => r,
        None => {
            eprintln!("kube stand-in: unknown path {path}?{query} (accept {accept})");
            if let Ok(mut unknown) = inner.unknown.lock() {
                unknown.push(path.clone());
            }
            json_status(
                StatusCode::NOT_FOUND,
                status_object(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                    None,
                ),
            )
        }
    }
}

fn parse_query(query: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn qget<'a>(q: &'a [(String, String)], key: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

fn json(v: Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn json_status(code: StatusCode, v: Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn status_object(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut v = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code
    });
    if let Some(d) = details {
        v["details"] = d;
    }
    v
}

/// The real server's answer for a missing object: `pods "x" not found`.
fn not_found(resource: &str, name: &str) -> Response {
    json_status(
        StatusCode::NOT_FOUND,
        status_object(
            404,
            "NotFound",
            &format!("{resource} \"{name}\" not found"),
            Some(json!({"name": name, "kind": resource})),
        ),
    )
}

fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.4",
        "gitCommit": "59526cd4867447956156ae3a602fcbac5b2a4f9c",
        "gitTreeState": "clean",
        "buildDate": "2025-04-22T16:02:27Z",
        "goVersion": "go1.23.6",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

fn resource(name: &str, namespaced: bool, kind: &str, short: &[&str], verbs: &[&str]) -> Value {
    let mut v = json!({
        "name": name,
        "singularName": if name.contains('/') { "" } else { name.trim_end_matches('s') },
        "namespaced": namespaced,
        "kind": kind,
        "verbs": verbs,
    });
    if !short.is_empty() {
        v["shortNames"] = json!(short);
    }
    v
}

fn core_resources() -> Value {
    let read = ["get", "list", "watch"];
    json!({
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            resource("events", true, "Event", &["ev"], &read),
            resource("namespaces", false, "Namespace", &["ns"], &read),
            resource("nodes", false, "Node", &["no"], &read),
            {
                "name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                "verbs": read, "shortNames": ["po"], "categories": ["all"]
            },
            resource("pods/log", true, "Pod", &[], &["get"]),
        ]
    })
}

fn api_groups() -> Value {
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [{
            "name": "events.k8s.io",
            "versions": [{"groupVersion": "events.k8s.io/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "events.k8s.io/v1", "version": "v1"}
        }]
    })
}

fn events_group_resources() -> Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "events.k8s.io/v1",
        "resources": [{
            "name": "events", "singularName": "event", "namespaced": true, "kind": "Event",
            "verbs": ["get", "list", "watch"], "shortNames": ["ev"]
        }]
    })
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn ago(now: DateTime<Utc>, secs: i64) -> DateTime<Utc> {
    now - ChronoDuration::seconds(secs)
}

/// `kubectl`'s short age: 45s, 12m, 3h, 2d.
fn short_age(now: DateTime<Utc>, t: DateTime<Utc>) -> String {
    let s = (now - t).num_seconds().max(0);
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn namespace(now: DateTime<Utc>) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "uid": "6b0c1f2a-0000-4a4a-8888-000000000000",
                     "resourceVersion": "10", "creationTimestamp": ts(ago(now, 30 * 86_400))},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"}
    })
}

fn node(now: DateTime<Utc>) -> Value {
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

fn pods(now: DateTime<Utc>) -> Vec<Value> {
    POD_SPECS.iter().map(|p| pod(p, now)).collect()
}

fn find_pod(ns: &str, name: &str, now: DateTime<Utc>) -> Option<Value> {
    if ns != NAMESPACE {
        return None;
    }
    POD_SPECS
        .iter()
        .find(|p| p.name == name)
        .map(|p| pod(p, now))
}

fn log_text(name: &str, q: &[(String, String)]) -> Result<String, Value> {
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

fn events(now: DateTime<Utc>) -> Vec<Value> {
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
fn filter_events(items: Vec<Value>, q: &[(String, String)]) -> Vec<Value> {
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

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({
        "kind": kind,
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "5000"},
        "items": items
    })
}

fn list_or_table(kind: &str, items: Vec<Value>, table: bool, now: DateTime<Utc>) -> Response {
    if !table {
        return json(list(kind, items));
    }
    let (columns, rows): (Vec<Value>, Vec<Value>) = match kind {
        "PodList" => (
            pod_columns(),
            items.iter().map(|p| pod_row(p, now)).collect(),
        ),
        "EventList" => (
            event_columns(),
            items.iter().map(|e| event_row(e, now)).collect(),
        ),
        _ => (
            vec![
                col("Name", "string", "name", 0),
                col("Status", "string", "", 0),
                col("Age", "string", "", 0),
            ],
            items
                .iter()
                .map(|o| {
                    let status = o["status"]["phase"]
                        .as_str()
                        .map(str::to_owned)
                        .or_else(|| {
                            o["status"]["conditions"][0]["status"]
                                .as_str()
                                .map(|s| if s == "True" { "Ready" } else { "NotReady" }.to_owned())
                        })
                        .unwrap_or_default();
                    row(
                        o,
                        vec![
                            json!(o["metadata"]["name"]),
                            json!(status),
                            json!(age_of(o, now)),
                        ],
                    )
                })
                .collect(),
        ),
    };
    json(json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": "5000"},
        "columnDefinitions": columns,
        "rows": rows
    }))
}

fn col(name: &str, typ: &str, format: &str, priority: u8) -> Value {
    json!({"name": name, "type": typ, "format": format, "description": "", "priority": priority})
}

/// A row with the object's metadata attached (`includeObject=Metadata`, the default), which
/// kubectl needs for the NAMESPACE column of `-A`.
fn row(obj: &Value, cells: Vec<Value>) -> Value {
    json!({
        "cells": cells,
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"]
        }
    })
}

fn age_of(obj: &Value, now: DateTime<Utc>) -> String {
    obj["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| short_age(now, t.with_timezone(&Utc)))
        .unwrap_or_else(|| "<unknown>".into())
}

fn pod_columns() -> Vec<Value> {
    vec![
        col("Name", "string", "name", 0),
        col("Ready", "string", "", 0),
        col("Status", "string", "", 0),
        col("Restarts", "string", "", 0),
        col("Age", "string", "", 0),
        col("IP", "string", "", 1),
        col("Node", "string", "", 1),
        col("Nominated Node", "string", "", 1),
        col("Readiness Gates", "string", "", 1),
    ]
}

/// The cells the real server's pod printer produces.
fn pod_row(p: &Value, now: DateTime<Utc>) -> Value {
    let statuses = p["status"]["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let total = statuses.len();
    let ready = statuses.iter().filter(|s| s["ready"] == true).count();
    let restarts: u64 = statuses
        .iter()
        .filter_map(|s| s["restartCount"].as_u64())
        .sum();
    let reason = statuses
        .iter()
        .find_map(|s| s["state"]["waiting"]["reason"].as_str())
        .unwrap_or_else(|| p["status"]["phase"].as_str().unwrap_or("Unknown"));
    let last_restart = statuses
        .iter()
        .filter_map(|s| s["lastState"]["terminated"]["finishedAt"].as_str())
        .filter_map(|t| DateTime::parse_from_rfc3339(t).ok())
        .max();
    let restarts_cell = match last_restart {
        Some(t) if restarts > 0 => {
            format!("{restarts} ({} ago)", short_age(now, t.with_timezone(&Utc)))
        }
        _ => restarts.to_string(),
    };
    row(
        p,
        vec![
            json!(p["metadata"]["name"]),
            json!(format!("{ready}/{total}")),
            json!(reason),
            json!(restarts_cell),
            json!(age_of(p, now)),
            json!(p["status"]["podIP"]),
            json!(p["spec"]["nodeName"]),
            json!("<none>"),
            json!("<none>"),
        ],
    )
}

fn event_columns() -> Vec<Value> {
    vec![
        col("Last Seen", "string", "", 0),
        col("Type", "string", "", 0),
        col("Reason", "string", "", 0),
        col("Object", "string", "", 0),
        col("Subobject", "string", "", 1),
        col("Source", "string", "", 1),
        col("Message", "string", "", 0),
        col("First Seen", "string", "", 1),
        col("Count", "string", "", 1),
        col("Name", "string", "name", 1),
    ]
}

fn event_row(e: &Value, now: DateTime<Utc>) -> Value {
    let at = |field: &str| {
        e[field]
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| short_age(now, t.with_timezone(&Utc)))
            .unwrap_or_default()
    };
    let obj = &e["involvedObject"];
    row(
        e,
        vec![
            json!(at("lastTimestamp")),
            json!(e["type"]),
            json!(e["reason"]),
            json!(format!(
                "{}/{}",
                obj["kind"].as_str().unwrap_or("").to_lowercase(),
                obj["name"].as_str().unwrap_or("")
            )),
            json!(obj["fieldPath"]),
            json!(format!(
                "{}, {}",
                e["source"]["component"].as_str().unwrap_or(""),
                e["source"]["host"].as_str().unwrap_or("")
            )),
            json!(e["message"]),
            json!(at("firstTimestamp")),
            json!(e["count"].to_string()),
            json!(e["metadata"]["name"]),
        ],
    )
}
