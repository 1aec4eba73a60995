//! `POST /api/admin/reload`, `/reload/toolsets`, `/reload/models` (HolmesGPT's admin API, on
//! only with `ENABLE_ADMIN_API=true`): the config files read again and the part asked for
//! rebuilt and swapped in whole; requests in flight finish on what they started with.
//!
//! The rebuild is startup's (it builds models and tools from settings, a layer above this
//! one): it reaches here as a `Reload` trait object.
//!
//! A reload that fails (a file that does not read, a model entry or a toolset that does not
//! build) answers 500 with the error, and the previous configuration keeps serving. 5xx
//! because the request is right and the server's own files are not: the same request will
//! fail until someone fixes them, and monitoring that watches for server errors should see
//! it. Not 503: the server still serves, and load balancers must not take it out.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use axum::extract::State;
use axum::http::StatusCode;
use schemars::JsonSchema;
use serde::Serialize;

use super::extract::Json;
use super::{ApiError, AppState};

/// What a reload rebuilds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadScope {
    /// Models, toolsets, prompts and the agent's options.
    All,
    /// Toolsets (MCP servers, YAML and built-in toolsets, skills) and the prompts naming them.
    Toolsets,
    /// The model list (triage's `[models]`, HolmesGPT's model list file, the env model).
    Models,
}

impl ReloadScope {
    /// The `component` of the answer.
    pub fn component(self) -> &'static str {
        match self {
            ReloadScope::All => "all",
            ReloadScope::Toolsets => "toolsets",
            ReloadScope::Models => "models",
        }
    }
}

/// What a reload did: words for people and the counts of what now serves.
pub struct ReloadReport {
    pub detail: String,
    pub counts: BTreeMap<String, u64>,
}

pub type ReloadFuture<'a> = Pin<Box<dyn Future<Output = Result<ReloadReport, String>> + Send + 'a>>;

/// Rebuilds what `scope` names from the config files and swaps it in, or leaves everything
/// as it was and says why.
pub trait Reload: Send + Sync {
    fn reload(&self, scope: ReloadScope) -> ReloadFuture<'_>;
}

/// HolmesGPT's answer to a reload.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReloadResponse {
    /// `success`.
    pub status: String,
    /// `all`, `toolsets` or `models`.
    pub component: String,
    pub detail: String,
    /// What serves now: `models`, `toolsets` (enabled), `tools`.
    pub counts: BTreeMap<String, u64>,
}

pub async fn reload_all(state: State<AppState>) -> Result<Json<ReloadResponse>, ApiError> {
    reload(state, ReloadScope::All).await
}

pub async fn reload_toolsets(state: State<AppState>) -> Result<Json<ReloadResponse>, ApiError> {
    reload(state, ReloadScope::Toolsets).await
}

pub async fn reload_models(state: State<AppState>) -> Result<Json<ReloadResponse>, ApiError> {
    reload(state, ReloadScope::Models).await
}

async fn reload(
    State(state): State<AppState>,
    scope: ReloadScope,
) -> Result<Json<ReloadResponse>, ApiError> {
    let Some(reloader) = &state.admin else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "Not Found: the admin API is off (ENABLE_ADMIN_API=true or admin.enabled turns it on)",
        ));
    };
    match reloader.reload(scope).await {
        Ok(report) => {
            tracing::info!(component = scope.component(), counts = ?report.counts, "configuration reloaded");
            Ok(Json(ReloadResponse {
                status: "success".into(),
                component: scope.component().into(),
                detail: report.detail,
                counts: report.counts,
            }))
        }
        Err(e) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "reloading {} failed; the previous configuration is still serving: {e}",
                scope.component()
            ),
        )),
    }
}
