//! HTTP: routes, the `{"detail": …}` error shape, JSON body parsing and SSE framing.
//! Handlers only translate between HTTP and the agent.

mod body;
mod chat;
mod error;
pub mod sse;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::agent::Agent;
pub use error::ApiError;

#[derive(Clone)]
pub struct AppState {
    pub agent: Arc<Agent>,
    pub keepalive: Option<Duration>,
    pub body_limit: usize,
    pub model_name_as_string: bool,
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/chat", post(chat::chat))
        .route("/api/model", get(models))
        .fallback(|| async { ApiError::new(axum::http::StatusCode::NOT_FOUND, "Not Found") })
        .layer(DefaultBodyLimit::max(state.body_limit))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

async fn models(State(state): State<AppState>) -> Json<Value> {
    let keys = state.agent.models.keys();
    if state.model_name_as_string {
        // HolmesGPT's code sends the list JSON-encoded inside a string.
        let encoded = serde_json::to_string(&keys).unwrap_or_else(|_| "[]".into());
        return Json(json!({ "model_name": encoded }));
    }
    Json(json!({ "model_name": keys }))
}
