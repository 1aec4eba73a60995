//! The API server's own answers: JSON responses, `Status` objects, the version and the
//! discovery documents kubectl reads before anything else.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub(super) fn parse_query(query: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

pub(super) fn qget<'a>(q: &'a [(String, String)], key: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

pub(super) fn json(v: Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

pub(super) fn json_status(code: StatusCode, v: Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

pub(super) fn status_object(
    code: u16,
    reason: &str,
    message: &str,
    details: Option<Value>,
) -> Value {
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
pub(super) fn not_found(resource: &str, name: &str) -> Response {
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

pub(super) fn version() -> Value {
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

pub(super) fn core_resources() -> Value {
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

pub(super) fn api_groups() -> Value {
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

pub(super) fn events_group_resources() -> Value {
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
