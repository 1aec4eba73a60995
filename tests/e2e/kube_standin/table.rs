//! Lists as kubectl asks for them: plain `*List` objects, or the server-side
//! `meta.k8s.io/v1` Table `kubectl get` requests, with the cells the real printers produce.

use axum::response::Response;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::api::json;

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({
        "kind": kind,
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "5000"},
        "items": items
    })
}

pub(super) fn list_or_table(
    kind: &str,
    items: Vec<Value>,
    table: bool,
    now: DateTime<Utc>,
) -> Response {
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
