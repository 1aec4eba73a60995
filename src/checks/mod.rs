//! Health checks, HolmesGPT's `POST /api/checks/execute` (what its operator's `HealthCheck`
//! resources call): a yes/no question answered by the agent core with a schema-enforced
//! verdict, bounded by the check's timeout, and in `alert` mode a failed check announced to
//! its destinations (`notify/`).
//!
//! A check without a verdict is `error`, not `fail`: a model that would not answer in the
//! verdict's shape, a provider outage or a timeout says nothing about the cluster, and paging
//! someone for it would teach them to ignore the page. HolmesGPT counts an unreadable answer
//! as a failure; its operator records `error` separately, which is where these belong.

mod notify;
mod request;
mod verdict;

use std::sync::Arc;
use std::time::Instant;

use schemars::JsonSchema;
use serde::Serialize;

use crate::agent::{CurrentAgent, RunError};
use crate::config::ChecksSettings;
use crate::runtime::trust::ExtraRoots;

pub use notify::{DeliveryStatus, NotificationStatus};
pub use request::{CheckMode, CheckRequest};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    Pass,
    Fail,
    /// No verdict: the check could not be evaluated (see `error`).
    Error,
}

/// HolmesGPT's answer to a check; every field is always sent, `null` when unknown.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CheckResponse {
    pub status: CheckStatus,
    pub message: String,
    /// Seconds the check ran (notifications not counted).
    pub duration: f64,
    pub rationale: Option<String>,
    pub error: Option<String>,
    /// The model key that answered.
    pub model_used: Option<String>,
    /// Each delivery's outcome; `null` when none was due (monitor mode, a check that did not
    /// fail, no destinations).
    pub notifications: Option<Vec<NotificationStatus>>,
}

/// Why a check was not run.
#[derive(Debug)]
pub enum CheckError {
    /// The request is wrong: the message names the field.
    Invalid(String),
    /// The agent refused before running anything (unknown model, no model, no call slot).
    Refused(RunError),
}

pub struct Checks {
    serving: Arc<CurrentAgent>,
    notifier: notify::Notifier,
    max_timeout_secs: u64,
    /// What alerts name as their source: the cluster, as HolmesGPT names it.
    source: String,
}

impl Checks {
    pub fn new(
        serving: Arc<CurrentAgent>,
        settings: &ChecksSettings,
        roots: &ExtraRoots,
        cluster_name: &str,
    ) -> Result<Checks, reqwest::Error> {
        Ok(Checks {
            serving,
            notifier: notify::Notifier::new(settings, roots)?,
            max_timeout_secs: settings.max_timeout_secs,
            source: match cluster_name.trim() {
                "" => "triage".to_owned(),
                name => name.to_owned(),
            },
        })
    }

    /// Runs one check, then notifies its destinations if it failed in `alert` mode.
    pub async fn execute(&self, request: CheckRequest) -> Result<CheckResponse, CheckError> {
        let check = request
            .into_check(self.max_timeout_secs)
            .map_err(CheckError::Invalid)?;
        let agent = self.serving.current();
        let started = Instant::now();
        let run = verdict::start(&agent, &check).map_err(CheckError::Refused)?;
        let model_key = check
            .model
            .clone()
            .or_else(|| agent.models.default_key().map(str::to_owned));
        let finished = verdict::finish(run, check.timeout, model_key).await;
        let duration = started.elapsed().as_secs_f64();
        let mut response = match finished.verdict {
            Ok(v) => CheckResponse {
                status: if v.passed {
                    CheckStatus::Pass
                } else {
                    CheckStatus::Fail
                },
                message: format!(
                    "Check {}. {}",
                    if v.passed { "passed" } else { "failed" },
                    v.rationale
                ),
                duration,
                rationale: Some(v.rationale),
                error: None,
                model_used: finished.model_used,
                notifications: None,
            },
            Err(e) => CheckResponse {
                status: CheckStatus::Error,
                message: format!("Check errored: {e}"),
                duration,
                rationale: None,
                error: Some(e),
                model_used: finished.model_used,
                notifications: None,
            },
        };
        tracing::info!(check = %check.name, status = ?response.status, duration_s = duration, "check finished");
        if check.mode == CheckMode::Alert
            && response.status == CheckStatus::Fail
            && !check.destinations.is_empty()
        {
            let alert = notify::Alert {
                check_name: &check.name,
                query: &check.query,
                analysis: response.rationale.as_deref().unwrap_or(&response.message),
                source: &self.source,
            };
            response.notifications = Some(self.notifier.notify(&check.destinations, &alert).await);
        }
        Ok(response)
    }
}
