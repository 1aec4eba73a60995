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
//! [`start`] serves plain HTTP without credentials. [`start_tls`] is the API server a pod sees:
//! HTTPS with a certificate of a test CA, and every request must carry the service account's
//! bearer token (401 otherwise, as the real server answers); it writes the files a pod finds
//! under `/var/run/secrets/kubernetes.io/serviceaccount/` ([`KubeStandin::service_account_dir`]).
//!
//! There is no metrics API, so `kubectl top` fails here as on a cluster without metrics-server.
#![allow(dead_code)]

mod api;
mod cluster;
mod table;
mod tls;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde_json::json;

use api::{
    api_groups, core_resources, events_group_resources, json, json_status, not_found, parse_query,
    status_object, version,
};
pub use cluster::{
    CRASH_EVENT_MESSAGE, CRASH_EVENT_REASON, CRASH_LOG_CURRENT, CRASH_LOG_PREVIOUS, CRASH_RESTARTS,
    NAMESPACE, NODE, OK_LOG, POD_CRASH, POD_OK, POD_OK_2,
};
use cluster::{events, filter_events, find_pod, log_text, namespace, node, pods};
use table::list_or_table;

/// One request the stand-in saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub query: String,
    pub accept: String,
    /// Whether it carried the expected bearer token (always true without one, see [`start`]).
    pub authorized: bool,
}

#[derive(Default)]
struct Inner {
    seen: Mutex<Vec<Seen>>,
    unknown: Mutex<Vec<String>>,
    /// The bearer token every request must carry ([`start_tls`]).
    token: Option<String>,
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
    /// [`start_tls`]: token, ca.crt and namespace, as mounted in a pod.
    service_account: Option<PathBuf>,
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
    let (listener, addr) = bind().await;
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
        service_account: None,
        _task: ServerTask(task),
    }
}

/// Starts the stand-in over HTTPS, requiring a service account's token, and writes that
/// account's files (token, ca.crt, namespace) and a kubeconfig with the same credentials.
pub async fn start_tls() -> KubeStandin {
    let token = format!("standin-token-{}", rand::random::<u64>());
    let inner = Arc::new(Inner {
        token: Some(token.clone()),
        ..Inner::default()
    });
    let (listener, addr) = bind().await;
    let dir = unique_temp_dir("kube-standin-tls");
    let pki_dir = dir.join("pki");
    std::fs::create_dir_all(&pki_dir).expect("kube stand-in: create pki dir");
    let pki = tls::make_pki(&pki_dir);
    let app = Router::new().fallback(handle).with_state(inner.clone());
    let task = tls::serve(listener, &pki, app);
    let account = dir.join("serviceaccount");
    std::fs::create_dir_all(&account).expect("kube stand-in: create serviceaccount dir");
    std::fs::write(account.join("token"), &token).expect("kube stand-in: write token");
    std::fs::copy(&pki.ca_cert, account.join("ca.crt")).expect("kube stand-in: copy ca.crt");
    std::fs::write(account.join("namespace"), NAMESPACE).expect("kube stand-in: write namespace");
    let kubeconfig = dir.join("kubeconfig");
    let text = kubeconfig_text(&format!("https://{addr}"))
        .replace(
            "    server: ",
            &format!(
                "    certificate-authority: {}\n    server: ",
                account.join("ca.crt").display()
            ),
        )
        .replace("  user: {}", &format!("  user:\n    token: {token}"));
    std::fs::write(&kubeconfig, text).expect("kube stand-in: write kubeconfig");
    KubeStandin {
        inner,
        addr,
        dir,
        kubeconfig,
        service_account: Some(account),
        _task: ServerTask(task),
    }
}

async fn bind() -> (tokio::net::TcpListener, std::net::SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("kube stand-in: bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("kube stand-in: local_addr");
    (listener, addr)
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

    /// [`start_tls`]: the directory to mount at `/var/run/secrets/kubernetes.io/serviceaccount`.
    pub fn service_account_dir(&self) -> &Path {
        self.service_account
            .as_deref()
            .expect("kube stand-in: a service account exists only with start_tls")
    }

    /// [`start_tls`]: the bearer token requests must carry.
    pub fn token(&self) -> &str {
        self.inner
            .token
            .as_deref()
            .expect("kube stand-in: a token exists only with start_tls")
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

/// A fresh directory in the test process's scratch directory.
pub fn unique_temp_dir(prefix: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = crate::helpers::scratch().join(format!(
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
    let authorized = inner.token.as_ref().is_none_or(|token| {
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == format!("Bearer {token}"))
    });
    if let Ok(mut seen) = inner.seen.lock() {
        seen.push(Seen {
            path: path.clone(),
            query: query.clone(),
            accept: accept.clone(),
            authorized,
        });
    }
    if !authorized {
        return json_status(
            StatusCode::UNAUTHORIZED,
            status_object(401, "Unauthorized", "Unauthorized", None),
        );
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
