//! OpenAI's endpoints: `POST /v1/chat/completions` (and `/chat/completions`), which consumes
//! the script (or a rule, or the responder) and answers through `wire`, and `GET /v1/models`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use crate::{EXHAUSTED_MESSAGE, Inner, Responder, parse, window, wire};

pub(crate) async fn list_models(State(inner): State<Arc<Inner>>) -> Response {
    let models = inner
        .models
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    match models {
        Ok(ids) => {
            let data: Vec<Value> = ids
                .iter()
                .map(|id| json!({"id": id, "object": "model", "owned_by": "fake"}))
                .collect();
            wire::json_response(StatusCode::OK, &json!({"object": "list", "data": data}))
        }
        Err(status) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            wire::json_response(
                status,
                &json!({"error": {"message": "refused by the fake"}}),
            )
        }
    }
}

pub(crate) async fn complete(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    // Parsed once, and only when something needs it.
    let mut body: Option<Value> = None;
    let rule = inner.rule_for(None, &raw, &mut body);
    if let Some(rule) = &rule {
        rule.record(&raw);
    }
    // Without a window the step is taken with the recording, so the n-th request recorded is
    // the one that consumed the n-th step even when requests run concurrently.
    let (window, next) = {
        let mut script = inner.script();
        if rule.is_none() {
            inner.count.fetch_add(1, Ordering::SeqCst);
            if script.keep_requests {
                script.requests.push(raw.clone());
                script.headers.push(headers);
            }
        }
        match script.context_window {
            Some(window) => (Some(window), None),
            None => (None, rule.is_none().then(|| script.next())),
        }
    };
    inner.changed.notify_waiters();

    if let Some(window) = window {
        // Counted outside the lock: a large prompt takes a while.
        let request = body.get_or_insert_with(|| parse(&raw));
        if let Some(error) = window::refusal(request, window) {
            return wire::json_response(StatusCode::BAD_REQUEST, &error);
        }
    }
    let step = match &rule {
        Some(rule) => rule.next(),
        None => {
            let (scripted, responder) = next.unwrap_or_else(|| inner.script().next());
            // The responder runs outside the lock: it may be slow, and may call into the fake.
            scripted.or_else(|| match responder? {
                Responder::Json(f) => Some(f(body.get_or_insert_with(|| parse(&raw)))),
                Responder::Raw(f) => Some(f(&raw)),
            })
        }
    };
    let Some(step) = step else {
        return wire::json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"error": {"message": EXHAUSTED_MESSAGE, "type": "server_error"}}),
        );
    };
    wire::answer(
        inner,
        step,
        || body.unwrap_or_else(|| parse(&raw)),
        raw.len(),
    )
    .await
}
