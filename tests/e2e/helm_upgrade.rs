//! An upgrade keeps the keys the chart generated: rendered cluster-aware (Helm's `lookup`)
//! against a stand-in Kubernetes API that holds the release's Secret from the first install,
//! the chart writes the same API key and signing key again; with no Secret there, new ones.
//! Skips like the other chart tests (see helm_chart.rs) without the renderer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

use crate::helm_chart::{NAMESPACE, RELEASE, render_with, secret_data, venv_python};
use crate::helpers::scratch;

/// The Secrets it holds by name, and every path it was asked for.
#[derive(Default)]
struct Cluster {
    secrets: BTreeMap<String, Value>,
    asked: Mutex<Vec<String>>,
}

/// The API server paths Helm's `lookup` of a Secret uses: discovery of `v1`, then the object.
async fn answer(State(cluster): State<Arc<Cluster>>, uri: Uri) -> Response {
    let path = uri.path().to_owned();
    cluster.asked.lock().unwrap().push(path.clone());
    let secrets_prefix = format!("/api/v1/namespaces/{NAMESPACE}/secrets/");
    if path == "/api/v1" {
        axum::Json(json!({
            "kind": "APIResourceList",
            "groupVersion": "v1",
            "resources": [{"name": "secrets", "singularName": "secret", "namespaced": true,
                           "kind": "Secret", "verbs": ["get", "list"]}],
        }))
        .into_response()
    } else if let Some(secret) = path
        .strip_prefix(&secrets_prefix)
        .and_then(|name| cluster.secrets.get(name))
    {
        axum::Json(secret.clone()).into_response()
    } else {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "reason": "NotFound", "code": 404, "message": format!("{path} not found")});
        (StatusCode::NOT_FOUND, axum::Json(status)).into_response()
    }
}

/// Starts the stand-in; its kubeconfig's path and the cluster's record.
async fn start_cluster(secrets: BTreeMap<String, Value>) -> (std::path::PathBuf, Arc<Cluster>) {
    let cluster = Arc::new(Cluster {
        secrets,
        ..Cluster::default()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().fallback(answer).with_state(cluster.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let kubeconfig = scratch().join(format!("helm-kubeconfig-{}", uuid::Uuid::new_v4().simple()));
    std::fs::write(
        &kubeconfig,
        crate::kube_standin::kubeconfig_text(&format!("http://{addr}")),
    )
    .unwrap();
    (kubeconfig, cluster)
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[tokio::test]
async fn an_upgrade_keeps_the_generated_api_key_and_signing_key() {
    let Some(python) = venv_python("an_upgrade_keeps_the_generated_api_key_and_signing_key") else {
        return;
    };
    let name = format!("{RELEASE}-holmes-api-key");
    let first_install = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "data": {"apiKey": b64("the-key-of-the-first-install"), "signing_key": b64("its-signing-key")},
    });
    let (kubeconfig, cluster) =
        start_cluster(BTreeMap::from([(name.clone(), first_install)])).await;
    let kubeconfig = kubeconfig.display().to_string();

    let r = render_with(&python, &["--kubeconfig", &kubeconfig], &[&json!({})])
        .await
        .unwrap_or_else(|(stage, error)| panic!("{stage} failed: {error}"));
    let data = secret_data(r.get("Secret", &name));
    assert_eq!(data["apiKey"], "the-key-of-the-first-install");
    assert_eq!(data["signing_key"], "its-signing-key");
    let secret_path = format!("/api/v1/namespaces/{NAMESPACE}/secrets/{name}");
    assert!(
        cluster.asked.lock().unwrap().contains(&secret_path),
        "{:?}",
        cluster.asked.lock().unwrap()
    );

    // A key given in the values wins over the stored one.
    let given = json!({"auth": {"apiKey": "a-key-of-our-own"}});
    let r = render_with(&python, &["--kubeconfig", &kubeconfig], &[&given])
        .await
        .unwrap_or_else(|(stage, error)| panic!("{stage} failed: {error}"));
    let data = secret_data(r.get("Secret", &name));
    assert_eq!(data["apiKey"], "a-key-of-our-own");
    assert_eq!(data["signing_key"], "its-signing-key");

    // No Secret in the cluster (a first install): new keys, each render its own.
    let (empty, _) = start_cluster(BTreeMap::new()).await;
    let empty = empty.display().to_string();
    let mut keys = Vec::new();
    for _ in 0..2 {
        let r = render_with(&python, &["--kubeconfig", &empty], &[&json!({})])
            .await
            .unwrap_or_else(|(stage, error)| panic!("{stage} failed: {error}"));
        keys.push(secret_data(r.get("Secret", &name))["apiKey"].clone());
    }
    assert!(keys[0].len() >= 32 && keys[0] != keys[1], "{keys:?}");
}
