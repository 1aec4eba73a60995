//! Operations routes: liveness, readiness, server info, Prometheus metrics.

use std::sync::OnceLock;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde_json::json;

use super::AppState;
use crate::tools::ToolsetStatus;

pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "healthy"}))
}

/// Ready when configuration loaded and at least one model is configured.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let models = state.agent.models.keys();
    if models.is_empty() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "detail": format!("Service not ready: {}", crate::llm::registry::NO_MODEL_HELP)
            })),
        )
            .into_response();
    }
    Json(json!({"status": "ready", "models": models})).into_response()
}

pub async fn info(State(state): State<AppState>) -> Json<serde_json::Value> {
    let toolsets: Vec<_> = state
        .agent
        .tools
        .toolsets()
        .iter()
        .map(|t| {
            let (status, error) = match &t.status {
                ToolsetStatus::Enabled => ("enabled", None),
                ToolsetStatus::Disabled => ("disabled", None),
                ToolsetStatus::Unavailable(reason) => ("failed", Some(reason.clone())),
            };
            json!({"name": t.name, "status": status, "error": error, "tool_count": t.tools.len()})
        })
        .collect();
    let count = |s: &str| toolsets.iter().filter(|t| t["status"] == s).count();
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_seconds": state.started.elapsed().as_secs(),
        "auth_enabled": state.api_keys.enabled(),
        "models": state.agent.models.keys(),
        "default_model": state.agent.models.default_key(),
        "toolsets_summary": {
            "total": toolsets.len(),
            "enabled": count("enabled"),
            "failed": count("failed"),
            "disabled": count("disabled"),
        },
        "toolsets": toolsets,
        "sandbox": state.agent.tools.sandbox().map(crate::sandbox::Sandbox::describe),
    }))
}

pub async fn metrics() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        metrics_handle().render(),
    )
        .into_response()
}

/// The process-wide recorder, installed on first use (tests build many apps in one process).
pub fn metrics_handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let seconds = [
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
        ];
        let recorder = PrometheusBuilder::new()
            .set_buckets(&seconds)
            .map(PrometheusBuilder::build_recorder)
            .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was already installed");
        }
        handle
    })
}
