//! Operations routes: liveness, readiness, server info, Prometheus metrics.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::responses::{
    ErrorDetail, ErrorResponse, HealthResponse, InfoResponse, ReadyResponse, ToolsetInfo,
    ToolsetState, ToolsetsSummary,
};
use crate::tools::ToolsetStatus;

pub async fn healthz() -> Json<HealthResponse> {
    Json(HealthResponse {
        status: "healthy".into(),
    })
}

/// Ready when configuration loaded and at least one model is configured.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let models = state.agent().models.keys();
    if models.is_empty() {
        let detail = format!("Service not ready: {}", crate::llm::registry::NO_MODEL_HELP);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(ErrorResponse {
                detail: ErrorDetail::Message(detail),
            }),
        )
            .into_response();
    }
    Json(ReadyResponse {
        status: "ready".into(),
        models,
    })
    .into_response()
}

pub async fn info(State(state): State<AppState>) -> Json<InfoResponse> {
    let agent = state.agent();
    let toolsets: Vec<ToolsetInfo> = agent
        .tools
        .toolsets()
        .iter()
        .map(|t| {
            let (status, error) = match &t.status {
                ToolsetStatus::Enabled => (ToolsetState::Enabled, None),
                ToolsetStatus::Disabled => (ToolsetState::Disabled, None),
                ToolsetStatus::Unavailable(reason) => (ToolsetState::Failed, Some(reason.clone())),
            };
            ToolsetInfo {
                name: t.name.clone(),
                status,
                error,
                tool_count: t.tools.len() as u64,
            }
        })
        .collect();
    let count = |s: ToolsetState| toolsets.iter().filter(|t| t.status == s).count() as u64;
    Json(InfoResponse {
        version: env!("CARGO_PKG_VERSION").into(),
        uptime_seconds: state.started.elapsed().as_secs(),
        auth_enabled: state.api_keys.enabled(),
        models: agent.models.keys(),
        default_model: agent.models.default_key().map(str::to_owned),
        toolsets_summary: ToolsetsSummary {
            total: toolsets.len() as u64,
            enabled: count(ToolsetState::Enabled),
            failed: count(ToolsetState::Failed),
            disabled: count(ToolsetState::Disabled),
        },
        toolsets,
        sandbox: agent.tools.sandbox().map(crate::sandbox::Sandbox::describe),
        // A server's last error quotes its stderr and URLs: through the masker.
        mcp_servers: agent
            .tools
            .mcp_statuses()
            .into_iter()
            .map(|mut status| {
                if let Some(error) = status.last_error.as_mut() {
                    agent.masker.mask(error);
                }
                status
            })
            .collect(),
        tool_definitions: agent.tools.definitions_report(),
    })
}

pub async fn metrics() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::meters::recorder().render(),
    )
        .into_response()
}
