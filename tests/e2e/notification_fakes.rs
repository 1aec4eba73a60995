//! Local stand-ins for the services a failed check notifies, each checking the request shape
//! and credential its real API documents and answering as that API does:
//! - Slack's `POST /api/chat.postMessage`: `Authorization: Bearer xoxb-…`, a JSON body with a
//!   `channel` and `text` or `blocks`; HTTP 200 with `{"ok": true}`, or `{"ok": false,
//!   "error": …}` (`invalid_auth`, `channel_not_found`, `invalid_arguments`).
//! - PagerDuty's Events API v2 `POST /v2/enqueue`: `routing_key` (32 characters),
//!   `event_action: trigger`, `payload.{summary, source, severity}`; 202 `{"status":
//!   "success"}`, or 400 `{"status": "invalid event", "errors": […]}`.
//! - A webhook receiver under `/hook/…`: 200; 500 under `/hook/fail`; 400 under `/hook/echo`,
//!   with the request's headers echoed in the body (a receiver that quotes credentials back);
//!   500 under `/hook/endless`, with a body that never ends.
//!
//! Every request is recorded, so a test also sees what the fakes refused.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// A PagerDuty routing key of the documented length.
pub const ROUTING_KEY: &str = "R0UT1NGKEY0123456789abcdefABCDEF";

#[derive(Debug, Clone)]
pub struct Got {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
    /// What the fake answered (`ok`, or why it refused).
    pub verdict: String,
}

#[derive(Clone, Default)]
struct Record(Arc<Mutex<Vec<Got>>>);

pub struct Fakes {
    pub base: String,
    record: Record,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Fakes {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Fakes {
    pub async fn start() -> Fakes {
        let record = Record::default();
        let app = Router::new()
            .route("/api/chat.postMessage", post(slack))
            .route("/v2/enqueue", post(pagerduty))
            .route("/hook/{*rest}", post(hook))
            .with_state(record.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Fakes {
            base,
            record,
            server,
        }
    }

    pub fn got(&self) -> Vec<Got> {
        self.record.0.lock().unwrap().clone()
    }

    /// The requests to paths starting with `prefix`.
    pub fn to(&self, prefix: &str) -> Vec<Got> {
        self.got()
            .into_iter()
            .filter(|g| g.path.starts_with(prefix))
            .collect()
    }
}

fn keep(record: &Record, path: &str, headers: &HeaderMap, body: &Bytes, verdict: &str) -> Value {
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    record.0.lock().unwrap().push(Got {
        path: path.to_owned(),
        headers: headers.clone(),
        body: body.clone(),
        verdict: verdict.to_owned(),
    });
    body
}

async fn slack(State(record): State<Record>, headers: HeaderMap, body: Bytes) -> Response {
    let json_body = serde_json::from_slice::<Value>(&body).ok();
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let is_json = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let verdict = match (token, &json_body) {
        (None, _) => "not_authed",
        (Some(t), _) if !t.starts_with("xoxb-") => "invalid_auth",
        (_, None) => "invalid_json",
        _ if !is_json => "invalid_form_data",
        (_, Some(b)) if !b["channel"].is_string() => "channel_not_found",
        (_, Some(b)) if b["channel"] == "#nope" => "channel_not_found",
        (_, Some(b)) if !(b["text"].is_string() || b["blocks"].is_array()) => "no_text",
        _ => "ok",
    };
    keep(&record, "/api/chat.postMessage", &headers, &body, verdict);
    let answer = if verdict == "ok" {
        json!({"ok": true, "channel": "C0123", "ts": "1700000000.000100"})
    } else {
        json!({"ok": false, "error": verdict})
    };
    (StatusCode::OK, axum::Json(answer)).into_response()
}

async fn pagerduty(State(record): State<Record>, headers: HeaderMap, body: Bytes) -> Response {
    let b: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut errors = Vec::new();
    if b["routing_key"].as_str().map(str::len) != Some(32) {
        errors.push("Length of 'routing_key' is incorrect (should be 32 characters)");
    }
    if b["event_action"] != "trigger" {
        errors.push("'event_action' is invalid (must be one of: trigger, acknowledge, resolve)");
    }
    let p = &b["payload"];
    if !p["summary"]
        .as_str()
        .is_some_and(|s| !s.is_empty() && s.len() <= 1024)
    {
        errors.push("'payload.summary' is missing or blank");
    }
    if p["source"].as_str().is_none_or(|s| s.is_empty()) {
        errors.push("'payload.source' is missing or blank");
    }
    if !matches!(
        p["severity"].as_str(),
        Some("critical" | "error" | "warning" | "info")
    ) {
        errors.push("'payload.severity' is invalid");
    }
    let verdict = if errors.is_empty() {
        "ok".to_owned()
    } else {
        errors.join("; ")
    };
    keep(&record, "/v2/enqueue", &headers, &body, &verdict);
    if errors.is_empty() {
        (
            StatusCode::ACCEPTED,
            axum::Json(json!({"status": "success", "message": "Event processed", "dedup_key": b["dedup_key"]})),
        )
            .into_response()
    } else {
        (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"status": "invalid event", "message": "Event object is invalid", "errors": errors})),
        )
            .into_response()
    }
}

async fn hook(State(record): State<Record>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_owned();
    if path.starts_with("/hook/echo") {
        keep(&record, &path, &headers, &body, "400");
        let echoed: Vec<String> = headers
            .iter()
            .map(|(k, v)| format!("{k}: {}", v.to_str().unwrap_or("")))
            .collect();
        return (StatusCode::BAD_REQUEST, echoed.join("\n")).into_response();
    }
    if path.starts_with("/hook/endless") {
        keep(&record, &path, &headers, &body, "500");
        let chunk = Bytes::from("endless answer ".repeat(512));
        let forever =
            futures::stream::repeat_with(move || Ok::<_, std::convert::Infallible>(chunk.clone()));
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::body::Body::from_stream(forever),
        )
            .into_response();
    }
    let failing = path.starts_with("/hook/fail");
    keep(
        &record,
        &path,
        &headers,
        &body,
        if failing { "500" } else { "ok" },
    );
    if failing {
        (StatusCode::INTERNAL_SERVER_ERROR, "receiver broken").into_response()
    } else {
        StatusCode::OK.into_response()
    }
}
